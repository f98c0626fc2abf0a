"""Tests of optarium.experiments.segment_po: bit packing, response mask, critic, verdict rule."""

from __future__ import annotations

import torch

from optarium.experiments import segment_po as ex
from optarium.problems import step_arithmetic as sa


def test_pack_unpack_round_trip():
    bits = torch.rand(137, generator=torch.Generator().manual_seed(0)) < 0.4
    rec = ex._pack(bits)
    assert len(rec) == 7 and all(isinstance(v, float) for v in rec.values())
    assert ex._unpack(rec, 137) == bits.long().tolist()


def test_response_mask_stops_after_first_eos():
    toks = torch.tensor([[1, sa.EOS, 2, sa.EOS], [1, 2, 3, 4]])
    assert ex._response_mask(toks).tolist() == [[1, 1, 0, 0], [1, 1, 1, 1]]


def test_critic_starts_at_zero_and_is_trainable():
    from dataclasses import replace

    from optarium.problems.tiny_lm import QUICK, build_tiny_lm

    trunk = build_tiny_lm(replace(QUICK, vocab_size=len(sa.VOCAB), context=16), 0)
    critic = ex._Critic(trunk)
    v = critic(torch.randint(len(sa.VOCAB), (3, 9)))
    assert v.shape == (3, 9) and bool((v == 0).all())
    v.sum().backward()
    assert critic.head.weight.grad is not None and bool(critic.head.weight.grad.abs().sum() > 0)


def _records(sapo_bits, ppo_bits):
    out = []
    for m, bits in (("sapo", sapo_bits), ("ppo", ppo_bits)):
        t = torch.tensor(bits, dtype=torch.bool)
        out.append({"method": m, "seed": 0, "step": 40, "acc": float(t.float().mean()), "acc_sft": 0.3,
                    **ex._pack(t)})  # fmt: skip
    return out


def test_decide_rule():
    cfg = {**ex.CONFIGS["quick"], "n_eval": 100}
    better = _records([1] * 60 + [0] * 40, [1] * 30 + [0] * 70)
    assert ex.decide(better, cfg).outcome == "reproduced"
    worse = _records([1] * 30 + [0] * 70, [1] * 60 + [0] * 40)
    assert ex.decide(worse, cfg).outcome == "not reproduced"
    same = _records([1, 0] * 50, [0, 1] * 50)
    assert ex.decide(same, cfg).outcome == "inconclusive"
    assert ex.decide(better[1:], cfg).outcome == "inconclusive"  # no SAPO records
