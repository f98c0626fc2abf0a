"""Tests of optarium.experiments.context_tuning: the verdict rule and the soft-prompt arms' record layout.

The smoke run with the real model is in ``test_all_smoke.py``; here ``run`` uses the tiny random Llama of
``tests/llm`` (mechanics only) and the rule is checked on synthetic records.
"""

from __future__ import annotations

import contextlib

import pytest
import torch

pytest.importorskip("transformers")

from optarium.experiments import context_tuning as ex


class CharTok:
    """Byte-level tokenizer (as in tests/llm): id = ord(char) % 120 + 2; 0 = pad, 1 = eos."""

    pad_token_id, eos_token_id = 0, 1

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict[str, list[int]]:
        return {"input_ids": [ord(c) % 120 + 2 for c in text]}

    def decode(self, ids: list[int]) -> str:
        return "".join(chr(i - 2) for i in ids if i >= 2)


def tiny():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=122, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)  # fmt: skip
    m = LlamaForCausalLM(cfg).to(torch.float64).eval()
    for p in m.parameters():
        p.requires_grad_(False)
    return m


class _Ctx:
    def __init__(self, method: str, seed: int) -> None:
        self.method, self.seed, self.records = method, seed, []

    def untimed(self):
        return contextlib.nullcontext()

    evaluating = untimed

    def log(self, step: int, **m):
        self.records.append({"method": self.method, "seed": self.seed, "step": int(step), **m})


def _per_query(method, bits, seed=0, start=0):
    return [
        {"method": method, "seed": seed, "step": start + i, "correct": b, "task": 0}
        for i, b in enumerate(bits)
    ]


def test_run_soft_prompt_arms_keep_steps_aligned(monkeypatch):
    import optarium.llm

    model = tiny()
    monkeypatch.setattr(optarium.llm, "load_smollm2", lambda: (model, CharTok()))
    cfg = {
        **ex.CONFIGS["smoke"],
        "tasks": ["remapped_sentiment", "char_shift"],
        "n_demos": 2,
        "n_queries": 3,
        "steps": 1,
        "prompt_tasks": ["char_shift"],
        "n_virtual": 4,
    }
    out = {}
    for m in ("icl", "ct_prompt", "prompt_tuning"):
        ctx = _Ctx(m, 0)
        ex.run(ctx, m, 0, cfg)
        out[m] = ctx.records
    # the prompt arms skip the first task but their second task's queries carry the same steps as ICL's
    icl_steps = {r["step"] for r in out["icl"] if "correct" in r and r["task"] == 1}
    for m in ("ct_prompt", "prompt_tuning"):
        q = [r for r in out[m] if "correct" in r]
        assert {r["task"] for r in q} == {1} and {r["step"] for r in q} == icl_steps
        assert any("loss0_char_shift" in r for r in out[m])
    recs = [r for rs in out.values() for r in rs]
    v = ex.decide(recs, {**cfg, "methods": ["icl", "ct_prompt", "prompt_tuning"]})
    assert v.figures["ct_prompt-icl:n"] == len(icl_steps)
    assert v.outcome == "inconclusive"  # no CT-KV records


def test_decide_rule_and_prompt_figures():
    cfg = ex.CONFIGS["quick"]
    better = _per_query("ct_kv", [1] * 20 + [0] * 12) + _per_query("icl", [0] * 20 + [0] * 12)
    assert ex.decide(better, cfg).outcome == "reproduced"
    worse = _per_query("ct_kv", [0] * 32) + _per_query("icl", [1] * 10 + [0] * 22)
    assert ex.decide(worse, cfg).outcome == "not reproduced"
    same = _per_query("ct_kv", [1, 0] * 16) + _per_query("icl", [0, 1] * 16)
    assert ex.decide(same, cfg).outcome == "inconclusive"
    # full: the soft-prompt arms are reported but do not change the outcome
    full = {**ex.CONFIGS["full"], "tasks": ["remapped_sentiment"]}
    recs = (
        _per_query("ct_kv", [1] * 20 + [0] * 12)
        + _per_query("icl", [0] * 32)
        + _per_query("random_prefix", [0] * 32)
        + _per_query("ct_prompt", [1] * 6 + [0] * 26)
        + _per_query("prompt_tuning", [0] * 32)
    )
    v = ex.decide(recs, full)
    assert v.outcome == "reproduced"
    assert v.figures["ct_prompt-icl:n10"] == 6 and v.figures["ct_prompt-prompt_tuning:diff"] == 6 / 32
    assert v.figures["ct_kv-ct_prompt:n10"] == 14
    without = [r for r in recs if r["method"] not in ex.PROMPT_ARMS]
    assert ex.decide(without, full).outcome == v.outcome


def _full_records(ct_kv, icl, random_prefix, seeds=(0, 1)):
    """Per-query records of the full rule's three arms, two tasks per draw (steps as ``run`` lays them)."""
    recs = []
    for s in seeds:
        for m, bits in (("ct_kv", ct_kv), ("icl", icl), ("random_prefix", random_prefix)):
            for t in (0, 1):
                recs += [
                    {"method": m, "seed": s, "step": t * 1000 + i, "correct": b, "task": t}
                    for i, b in enumerate(bits)
                ]
    return recs


def test_decide_full_rule_uses_paired_bootstrap_cis():
    full = {**ex.CONFIGS["full"], "tasks": ["remapped_sentiment"], "n_boot": 1000}
    n = 40
    win = [1] * 12 + [0] * (n - 12)  # +30 points over ICL's zeros on every (draw, task) cell
    zeros = [0] * n
    v = ex.decide(_full_records(win, zeros, zeros), full)
    f = v.figures
    assert v.outcome == "reproduced"
    assert f["ct_kv-icl:diff"] == pytest.approx(0.3) and f["ct_kv-icl:n"] == 4 * n
    assert 0 < f["ct_kv-icl:ci_lo"] < 0.3 < f["ct_kv-icl:ci_hi"] and f["ct_kv-random_prefix:ci_lo"] > 0
    assert "95% CI" in v.summary and "ct_kv-zero_shot:ci_lo" not in f
    # the same gain over ICL, but the random-init prefix is as good as CT-KV: inconclusive
    assert ex.decide(_full_records(win, zeros, win), full).outcome == "inconclusive"
    # CT-KV worse than ICL on every cell: the CI lies below 0
    v = ex.decide(_full_records(zeros, win, zeros), full)
    assert v.outcome == "not reproduced" and v.figures["ct_kv-icl:ci_hi"] < 0
    # a CI above 0 but a mean gain under 5 points (3 of 100 per cell): inconclusive, though McNemar agrees
    small = [1] * 3 + [0] * 97
    v = ex.decide(_full_records(small, [0] * 100, [0] * 100), full)
    assert v.figures["ct_kv-icl:ci_lo"] > 0 and v.figures["ct_kv-icl:diff"] == pytest.approx(0.03)
    assert v.figures["ct_kv-icl:p_greater"] < 0.05 and v.outcome == "inconclusive"
    # a CI straddling 0: inconclusive; ties give a zero-width CI at 0, which is "not reproduced" (<= 0)
    mixed = [1, 0] * (n // 2)
    assert ex.decide(_full_records(mixed, mixed[::-1], zeros), full).outcome == "inconclusive"
    assert ex.decide(_full_records(win, win, zeros), full).outcome == "not reproduced"
