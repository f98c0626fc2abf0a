"""CT-KV on a tiny random LlamaForCausalLM (mechanics only) with a character tokenizer."""

from __future__ import annotations

import math

import pytest
import torch

pytest.importorskip("transformers")

from optarium.llm import context_tuning as ct
from optarium.problems import llm_tasks


class CharTok:
    """Byte-level tokenizer: id = ord(char) % 120 + 2; 0 = pad, 1 = eos."""

    pad_token_id = 0
    eos_token_id = 1

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict[str, list[int]]:
        return {"input_ids": [ord(c) % 120 + 2 for c in text]}

    def decode(self, ids: list[int]) -> str:
        return "".join(chr(i - 2) for i in ids if i >= 2)


def tiny(dtype: torch.dtype = torch.float64, seed: int = 0, max_pos: int = 256):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=122,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_pos,
    )
    m = LlamaForCausalLM(cfg).to(dtype).eval()
    for p in m.parameters():
        p.requires_grad_(False)
    return m


DEMOS = [("ab", "x"), ("cd", "y"), ("ef", "x"), ("gh", "y")]


@pytest.fixture(scope="module")
def model():
    return tiny()


def test_step0_equals_single_forward_pass(model):
    tu = ct.ContextTuner(model, CharTok(), steps=0)
    st = tu.init_state(DEMOS)
    ids = []
    for x, y in DEMOS:
        a, b = tu.pair_ids(x, y)
        ids += a + b
    q, o = tu.pair_ids("ij", "x")
    full = model(torch.tensor([ids + q + o])).logits[0, len(ids) :]
    L = st.prefix_len
    pos = torch.arange(len(q + o))[None] + L
    out = model(
        input_ids=torch.tensor([q + o]),
        attention_mask=torch.ones(1, L + len(q + o), dtype=torch.float64),
        position_ids=pos,
        cache=ct._cache(st, 1),
        use_cache=True,
    ).logits[0]
    torch.testing.assert_close(out, full, atol=1e-5, rtol=0)
    # option scoring via the cache equals the NLL computed from the single pass
    logp = torch.log_softmax(full[:-1], -1)
    ref = -torch.stack([logp[len(q) - 1 + j, t] for j, t in enumerate(o)]).mean()
    s = tu.score_options(st, "ij", ["x"])
    assert float(s[0]) == pytest.approx(float(ref), abs=1e-8)


def _pair_grad(model, loo: bool) -> tuple[float, float]:
    tu = ct.ContextTuner(model, CharTok(), steps=0, token_dropout=0.0)
    st = tu.init_state(DEMOS)
    keys = [k.clone().requires_grad_(True) for k in st.keys]
    vals = [v.clone().requires_grad_(True) for v in st.values]
    st2 = ct.ContextState(keys, vals, st.prefix_len, st.spans)
    ids, tgt, km = tu._batch([tu.pair_ids(*DEMOS[0])], st.prefix_len)
    km[:, : st.prefix_len] = tu.train_masks(st, 1, None, loo)
    tu._nll(st2, ids, tgt, km).sum().backward()
    a, b = st.spans[0]
    own = sum(float(k.grad[..., a:b, :].abs().sum()) for k in keys + vals)
    other = sum(float(k.grad[..., b:, :].abs().sum()) for k in keys + vals)
    return own, other


def test_leave_one_out_zero_gradient_on_own_pair(model):
    own, other = _pair_grad(model, True)
    assert own == 0.0 and other > 0
    own_off, _ = _pair_grad(model, False)
    assert own_off > 0


def test_model_frozen_and_loss_decreases(model):
    before = [p.clone() for p in model.parameters()]
    tu = ct.ContextTuner(model, CharTok(), steps=40, lr=0.1, token_dropout=0.0, grad_clip=100.0)
    st = tu.fit(DEMOS, seed=0)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    assert all(p.grad is None for p in model.parameters())
    assert st.losses[-1] < st.losses[0] - 0.2
    assert all(not k.requires_grad for k in st.keys)


def test_determinism_and_dropout(model):
    tu = ct.ContextTuner(model, CharTok(), steps=3, token_dropout=0.0)
    a, b = tu.fit(DEMOS, seed=0), tu.fit(DEMOS, seed=1)
    assert a.losses == b.losses  # p = 0: seed-independent
    tu.token_dropout = 0.5
    c, d = tu.fit(DEMOS, seed=5), tu.fit(DEMOS, seed=5)
    assert c.losses == d.losses
    st = tu.init_state(DEMOS)
    m = tu.train_masks(st, 50, torch.Generator().manual_seed(0), False)
    n = m.numel()
    assert abs(float((~m).sum()) - n / 2) < 4 * math.sqrt(n / 4)
    # inference never drops: scores are deterministic
    assert torch.equal(
        tu.score_options(c, ["ab", "cd"], ["x", "y"]), tu.score_options(c, ["ab", "cd"], ["x", "y"])
    )


def test_option_scoring_picks_lowest_and_macro_f1(model):
    tu = ct.ContextTuner(model, CharTok(), steps=0)
    st = tu.init_state(DEMOS)
    s = tu.score_options(st, ["ab", "zz"], ["x", "y", "qq"])
    preds = tu.predict(st, ["ab", "zz"], ["x", "y", "qq"])
    assert preds == [["x", "y", "qq"][int(i)] for i in s.argmin(-1)]
    # confusion: a->a, a->b, b->b, b->b: F1(a) = 2/3, F1(b) = 0.8
    assert ct.macro_f1(["a", "a", "b", "b"], ["a", "b", "b", "b"]) == pytest.approx((2 / 3 + 0.8) / 2)


def test_work_counts_exponents():
    ks = [2, 4, 8, 16]

    def slope(mode, key):
        v = [ct.work_counts(mode, k, 8, 30, 576)[key] for k in ks]
        return (math.log(v[-1]) - math.log(v[0])) / (math.log(ks[-1]) - math.log(ks[0]))

    assert slope("kv", "tokens") == pytest.approx(1.0)
    assert slope("prompt", "tokens") - slope("kv", "tokens") >= 0.5
    assert slope("prompt", "qk_pairs") - slope("kv", "qk_pairs") >= 0.5


def test_mcnemar_exact():
    r = ct.mcnemar_exact([1, 1, 1, 1, 1, 0], [0, 0, 0, 0, 0, 0])
    assert r["n10"] == 5 and r["n01"] == 0 and r["p_greater"] == pytest.approx(1 / 32)
    r2 = ct.mcnemar_exact([1, 0], [1, 0])
    assert r2["p_greater"] == 1.0 and r2["p_less"] == 1.0


def test_evaluate_methods_and_lora_restores_model(model):
    task = llm_tasks.remapped_sentiment(4, 6, seed=0, labels=("x", "y"))
    before = [p.clone() for p in model.parameters()]
    tu = ct.ContextTuner(model, CharTok(), steps=2, token_dropout=0.0)
    accs = {}
    for m in ("zero_shot", "icl", "ct_kv", "random_prefix", "ttt_lora"):
        r = ct.evaluate(tu, task, m, seed=0)
        assert len(r.extras["correct"]) == 6 and 0 <= r.value <= 1
        accs[m] = r.value
    assert type(model).__name__ == "LlamaForCausalLM"
    assert not any("lora" in n for n, _ in model.named_parameters())
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    gen = llm_tasks.char_shift(2, 1, seed=0)
    out = tu.generate(tu.init_state(gen.demos), gen.queries[0][0], max_new_tokens=3)
    assert isinstance(out, str)


def test_bad_input(model):
    tok = CharTok()
    with pytest.raises(ValueError, match="lr"):
        ct.ContextTuner(model, tok, lr=0.0)
    with pytest.raises(ValueError, match="token_dropout"):
        ct.ContextTuner(model, tok, token_dropout=1.0)
    tu = ct.ContextTuner(model, tok, steps=1)
    with pytest.raises(ValueError, match="demos"):
        tu.fit([])
    short = tiny(max_pos=16)
    with pytest.raises(ValueError, match="context"):
        ct.ContextTuner(short, tok).init_state(DEMOS * 3)
    with pytest.raises(ValueError, match="method"):
        ct.evaluate(tu, llm_tasks.remapped_sentiment(2, 2), "nope")


# -- CT-Prompt and Lester prompt tuning ---------------------------------------------------------------


def _demo_batch(tu, st, pairs, loo):
    ids, tgt, km = tu._batch([tu.pair_ids(x, y) for x, y in pairs], st.prefix_len)
    km[:, : st.prefix_len] = tu.train_masks(st, len(pairs), None, loo)
    return ids, tgt, km


def test_ct_prompt_step0_is_icl(model):
    tu = ct.ContextTuner(model, CharTok(), steps=0, token_dropout=0.0)
    icl, pr = tu.init_state(DEMOS), tu.init_prompt(DEMOS)
    assert pr.prompt is not None and pr.prompt.shape == (icl.prefix_len, 32) and pr.spans == icl.spans
    # the prompt is exactly the demos' token embeddings, so its cache is the ICL cache
    ids = [t for x, y in DEMOS for part in tu.pair_ids(x, y) for t in part]
    assert torch.equal(pr.prompt, model.get_input_embeddings()(torch.tensor(ids)))
    for a, b in zip(icl.keys + icl.values, pr.keys + pr.values, strict=True):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=0)
    q = ["ij", "ab"]
    torch.testing.assert_close(
        tu.score_options(pr, q, ["x", "y"]), tu.score_options(icl, q, ["x", "y"]), atol=1e-12, rtol=0
    )
    # the training path ([P; pair] through all layers) gives CT-KV's step-0 loss when nothing is masked
    ids_, tgt, km = _demo_batch(tu, icl, DEMOS, False)
    torch.testing.assert_close(
        tu._prompt_nll(pr.prompt, ids_, tgt, km), tu._nll(icl, ids_, tgt, km), atol=1e-10, rtol=0
    )
    # ... and differs once leave-one-out hides pair i (otherwise the mask would be a no-op)
    _, _, km_loo = _demo_batch(tu, icl, DEMOS, True)
    assert not torch.allclose(tu._prompt_nll(pr.prompt, ids_, tgt, km_loo), tu._nll(icl, ids_, tgt, km))


def _prompt_loss(tu, P, st, loo):
    ids, tgt, km = _demo_batch(tu, st, DEMOS, loo)
    return tu._prompt_nll(P, ids, tgt, km)


def test_ct_prompt_leave_one_out_has_no_leak(model):
    tu = ct.ContextTuner(model, CharTok(), steps=0, token_dropout=0.0)
    st = tu.init_prompt(DEMOS)
    a, b = st.spans[1]
    P2 = st.prompt.clone()
    P2[a:b] = torch.randn(b - a, P2.shape[1], generator=torch.Generator().manual_seed(3), dtype=P2.dtype)
    base, moved = _prompt_loss(tu, st.prompt, st, True), _prompt_loss(tu, P2, st, True)
    # pair 1's loss ignores its own prompt positions entirely (also through later prompt positions) ...
    assert float(base[1]) == pytest.approx(float(moved[1]), abs=1e-12)
    # ... while the other pairs see the change, and without leave-one-out pair 1 does too
    assert float((base[[0, 2, 3]] - moved[[0, 2, 3]]).abs().min()) > 1e-8
    off, off_moved = _prompt_loss(tu, st.prompt, st, False), _prompt_loss(tu, P2, st, False)
    assert abs(float(off[1] - off_moved[1])) > 1e-8
    # gradient of pair 1's loss w.r.t. its own prompt rows is exactly zero
    P = st.prompt.clone().requires_grad_(True)
    _prompt_loss(tu, P, st, True)[1].backward()
    assert float(P.grad[a:b].abs().sum()) == 0.0 and float(P.grad[:a].abs().sum()) > 0


def test_ct_prompt_trains_only_the_prompt(model):
    before = [p.clone() for p in model.parameters()]
    tu = ct.ContextTuner(model, CharTok(), steps=30, lr=0.05, token_dropout=0.0, grad_clip=100.0)
    st0 = tu.init_prompt(DEMOS)
    st = tu.fit(DEMOS, state=st0, seed=0)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    assert all(p.grad is None for p in model.parameters())
    assert st.prompt is not None and not st.prompt.requires_grad
    assert not torch.equal(st.prompt, st0.prompt) and torch.equal(st0.prompt, tu.init_prompt(DEMOS).prompt)
    assert len(st.losses) == 30 and st.losses[-1] < st.losses[0] - 0.1  # ~0.15 here; ~0 if P never moved
    # the tuned state's cache is the tuned prompt's cache: scoring equals a single pass over [P; query]
    q, o = tu.pair_ids("ij", "x")
    x = torch.cat([st.prompt, model.get_input_embeddings()(torch.tensor(q + o))])[None]
    full = torch.log_softmax(model(inputs_embeds=x).logits[0, st.prefix_len :], -1)
    ref = -torch.stack([full[len(q) - 1 + j, t] for j, t in enumerate(o)]).mean()
    assert float(tu.score_options(st, "ij", ["x"])[0]) == pytest.approx(float(ref), abs=1e-10)
    # determinism under the seed with dropout on
    tu.steps, tu.token_dropout = 3, 0.3
    assert tu.fit(DEMOS, state=st0, seed=4).losses == tu.fit(DEMOS, state=st0, seed=4).losses


def test_lester_init_from_vocab_and_labels(model):
    tu = ct.ContextTuner(model, CharTok(), steps=0)
    E = model.get_input_embeddings().weight
    P = ct.lester_init(tu, 12, seed=1, vocab_top=20)
    # every row is the embedding of one of the first 20 ids
    hit = (P[:, None] == E[None]).all(-1)
    assert bool(hit.any(1).all()) and bool(hit[:, :20].any(1).all())
    assert torch.equal(P, ct.lester_init(tu, 12, seed=1, vocab_top=20))
    assert not torch.equal(P, ct.lester_init(tu, 12, seed=2, vocab_top=20))
    L = ct.lester_init(tu, 5, seed=1, labels=["x", "yz"])
    torch.testing.assert_close(L[0], E[tu._ids("x")[0]])
    torch.testing.assert_close(L[1], E[tu._ids("yz")].mean(0))
    st = tu.init_prompt(prompt_embeds=L)
    assert st.prefix_len == 5 and st.spans == [] and torch.equal(st.prompt, L)
    for bad, kw, name in [
        (0, {}, "n_virtual"),
        (1, {"labels": ["x", "y"]}, "labels"),
        (3, {"vocab_top": 0}, "vocab_top"),
    ]:
        with pytest.raises(ValueError, match=name):
            ct.lester_init(tu, bad, **kw)


def test_prompt_methods_evaluate_and_bad_input(model):
    task = llm_tasks.remapped_sentiment(3, 4, seed=0, labels=("x", "y"))
    tu = ct.ContextTuner(model, CharTok(), steps=2, token_dropout=0.0)
    L = len(tu._demo_ids(task.demos)[0])
    for m in ("ct_prompt", "prompt_tuning"):
        r = ct.evaluate(tu, task, m, seed=0)
        assert len(r.extras["correct"]) == 4 and len(r.extras["losses"]) == 2
    r = ct.evaluate(tu, task, "prompt_tuning", seed=0, n_virtual=6)
    assert r.n_iter == 2
    assert ct.work_counts("prompt", 4, 8, 2, 32, prompt_len=6)["tokens"] == 4 * (6 + 8) * 2
    assert L > 6
    with pytest.raises(ValueError, match="prompt_embeds"):
        tu.init_prompt(prompt_embeds=torch.zeros(3, 31, dtype=torch.float64))
    with pytest.raises(ValueError, match="prompt_embeds"):
        tu.init_prompt(prompt_embeds=torch.zeros(3, dtype=torch.float64))
    with pytest.raises(TypeError, match="prompt_embeds"):
        tu.init_prompt(prompt_embeds=[[0.0] * 32])
    with pytest.raises(ValueError, match="demos"):
        tu.init_prompt([])
    with pytest.raises(ValueError, match="context"):
        ct.ContextTuner(tiny(max_pos=16), CharTok()).init_prompt(DEMOS * 3)
    with pytest.raises(ValueError, match="spans"):
        tu.fit(DEMOS, state=tu.init_prompt(prompt_embeds=torch.zeros(3, 32, dtype=torch.float64)))
    with pytest.raises(ValueError, match="prompt_len"):
        ct.work_counts("prompt", 2, 2, 1, 1, prompt_len=0)
