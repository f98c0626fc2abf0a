"""Tests of optarium.problems.tiny_lm: the tiny LLaMA-style decoder, dense and mixture-of-experts."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from optarium.problems.tiny_lm import (
    FULL_DENSE,
    FULL_MOE,
    QUICK,
    MoEFeedForward,
    TinyLMConfig,
    build_tiny_lm,
    count_parameters,
    load_balancing_loss,
)

SMALL = TinyLMConfig(d_model=32, n_layers=2, n_heads=2, context=16, d_ff=64)
SMALL_MOE = dataclasses.replace(SMALL, n_experts=4, top_k=2, expert_d_ff=32)
CONFIGS = pytest.mark.parametrize("config", [SMALL, SMALL_MOE], ids=["dense", "moe"])


def _tokens(shape: tuple[int, ...], seed: int = 0, vocab: int = 256) -> torch.Tensor:
    return torch.randint(0, vocab, shape, generator=torch.Generator().manual_seed(seed))


def _expected_count(c: TinyLMConfig) -> int:
    attn = 4 * c.d_model * c.d_model
    mlp = c.n_experts * (3 * c.d_model * c.expert_d_ff + c.d_model) if c.is_moe else 3 * c.d_model * c.d_ff
    return c.vocab_size * c.d_model + c.n_layers * (attn + mlp + 2 * c.d_model) + c.d_model


# ---------------------------------------------------------------------------------------------------------
# Config
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "name"),
    [
        ({"d_model": 0}, "d_model"),
        ({"n_layers": -1}, "n_layers"),
        ({"n_heads": 3}, "d_model"),  # 32 not divisible by 3
        ({"d_model": 30, "n_heads": 2}, "d_model"),  # head dim 15 is odd
        ({"context": 2.0}, "context"),
        ({"vocab_size": True}, "vocab_size"),
        ({"n_experts": -1}, "n_experts"),
        ({"n_experts": 2, "top_k": 3}, "top_k"),
        ({"aux_loss_weight": -0.1}, "aux_loss_weight"),
        ({"rope_base": 1.0}, "rope_base"),
        ({"rope_base": float("inf")}, "rope_base"),
    ],
)
def test_config_validation_names_the_field(changes: dict, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        dataclasses.replace(SMALL, **changes)


def test_presets() -> None:
    assert (QUICK.d_model, QUICK.n_layers, QUICK.n_heads, QUICK.context, QUICK.d_ff) == (64, 2, 2, 64, 176)
    assert (FULL_DENSE.d_model, FULL_DENSE.n_layers, FULL_DENSE.n_heads, FULL_DENSE.context) == (
        128,
        4,
        4,
        128,
    )
    assert FULL_DENSE.d_ff == 344 and not FULL_DENSE.is_moe
    assert (FULL_MOE.n_experts, FULL_MOE.top_k, FULL_MOE.expert_d_ff) == (4, 2, 256)
    assert dataclasses.replace(FULL_MOE, n_experts=0, top_k=2, expert_d_ff=256) == FULL_DENSE
    with pytest.raises(dataclasses.FrozenInstanceError):
        QUICK.d_model = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    ("config", "spec"),
    [(QUICK, 0.12e6), (FULL_DENSE, 0.82e6), (FULL_MOE, 1.9e6)],
    ids=["quick", "full", "moe"],
)
def test_parameter_counts_match_spec(config: TinyLMConfig, spec: float) -> None:
    model = build_tiny_lm(config, 0)
    n = count_parameters(model)
    assert n == _expected_count(config)  # tied embedding counted once
    assert abs(n - spec) / spec < 0.10


# ---------------------------------------------------------------------------------------------------------
# Model behaviour
# ---------------------------------------------------------------------------------------------------------


@CONFIGS
def test_forward_shapes_and_dtype(config: TinyLMConfig) -> None:
    model = build_tiny_lm(config, 0)
    logits = model(_tokens((3, config.context)))
    assert logits.shape == (3, config.context, 256) and logits.dtype == torch.float32
    assert model(_tokens((2, 5))).shape == (2, 5, 256)  # shorter than the context
    model64 = build_tiny_lm(config, 0, dtype=torch.float64)
    out64 = model64(_tokens((2, 7)))
    assert out64.dtype == torch.float64
    assert torch.allclose(out64.float(), model(_tokens((2, 7))), atol=1e-4)  # same weights, other dtype
    with pytest.raises(ValueError, match="idx"):
        model(_tokens((2, config.context + 1)))
    with pytest.raises(ValueError, match="idx"):
        model(_tokens((config.context,)))


@CONFIGS
def test_causality(config: TinyLMConfig) -> None:
    model = build_tiny_lm(config, 1)
    idx = _tokens((2, config.context), seed=1)
    base = model(idx)
    for t in (0, 5, config.context - 2):
        changed = idx.clone()
        changed[:, t + 1 :] = _tokens((2, config.context - t - 1), seed=100 + t)
        out = model(changed)
        assert torch.allclose(out[:, : t + 1], base[:, : t + 1], rtol=0, atol=1e-6)
        assert not torch.allclose(out[:, t + 1 :], base[:, t + 1 :], atol=1e-3)


def test_tied_embeddings() -> None:
    model = build_tiny_lm(SMALL, 0)
    assert model.lm_head.weight is model.tok_emb.weight
    assert model.lm_head.weight.data_ptr() == model.tok_emb.weight.data_ptr()
    assert "lm_head.weight" in model.state_dict()  # nn.Module lists both names for the same tensor
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    x = _tokens((2, 8))
    model.loss(x, x)[0].backward()
    opt.step()
    assert model.lm_head.weight.data_ptr() == model.tok_emb.weight.data_ptr()
    assert "rope_cos" not in model.state_dict()  # non-persistent buffers


@pytest.mark.parametrize("config", [SMALL, SMALL_MOE, QUICK], ids=["dense", "moe", "quick"])
def test_initial_cross_entropy_near_log_vocab(config: TinyLMConfig) -> None:
    model = build_tiny_lm(config, 0)
    idx = _tokens((8, config.context), seed=2)
    targets = _tokens((8, config.context), seed=3)
    with torch.no_grad():
        total, ce = model.loss(idx, targets)
    assert abs(ce.item() - math.log(256)) < 0.1
    if config.is_moe:
        assert total.item() == pytest.approx(ce.item() + 0.01 * model.last_aux_loss.item(), abs=1e-6)
    else:
        assert total is ce


def test_seeded_build_is_reproducible_and_keeps_global_rng() -> None:
    for config in (SMALL, SMALL_MOE):
        state = torch.get_rng_state()
        a, b, c = build_tiny_lm(config, 5), build_tiny_lm(config, 5), build_tiny_lm(config, 6)
        assert torch.equal(state, torch.get_rng_state())
        sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
        assert sa.keys() == sb.keys()
        assert all(torch.equal(sa[k], sb[k]) for k in sa)
        weights = [k for k in sa if "norm" not in k]  # norm weights are all ones for every seed
        assert all(not torch.equal(sa[k], sc[k]) for k in weights)
        idx = _tokens((2, 8))
        assert torch.equal(a(idx), b(idx))


def test_init_statistics() -> None:
    model = build_tiny_lm(FULL_DENSE, 0)
    assert model.tok_emb.weight.std().item() == pytest.approx(0.02, rel=0.05)
    assert model.blocks[0].attn.qkv.weight.std().item() == pytest.approx(0.02, rel=0.05)
    assert model.blocks[0].mlp.down.weight.std().item() == pytest.approx(0.02 / math.sqrt(8), rel=0.05)
    assert all(torch.equal(b.attn_norm.weight, torch.ones(128)) for b in model.blocks)


def test_rope_encodes_relative_position() -> None:
    from optarium.problems.tiny_lm import _apply_rope, _rope_tables

    cos, sin = _rope_tables(32, 8, 10000.0)
    q, k = torch.randn(2, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(3)).unbind(0)
    qs = _apply_rope(q.expand(32, 8), cos.double(), sin.double())
    ks = _apply_rope(k.expand(32, 8), cos.double(), sin.double())
    assert torch.allclose(qs.norm(dim=1), q.norm().expand(32), atol=1e-6)  # a rotation
    scores = qs @ ks.T  # scores[m, n] = <rope(q, m), rope(k, n)>
    for shift in (0, 3, 10):
        diag = torch.diagonal(scores, offset=shift)
        assert torch.allclose(diag, diag[0].expand_as(diag), atol=1e-5)  # depends only on n - m
    assert not torch.allclose(scores[0, 0], scores[0, 3])


# ---------------------------------------------------------------------------------------------------------
# Mixture of experts
# ---------------------------------------------------------------------------------------------------------


def test_moe_gating_weights_sum_to_one_and_are_top_k() -> None:
    model = build_tiny_lm(SMALL_MOE, 0)
    moe = model.blocks[0].mlp
    assert isinstance(moe, MoEFeedForward)
    x = torch.randn(50, SMALL_MOE.d_model, generator=torch.Generator().manual_seed(0)) * 3.0
    probs, weights, top_idx = moe.route(x)
    assert probs.shape == (50, 4) and weights.shape == top_idx.shape == (50, 2)
    assert torch.allclose(probs.sum(1), torch.ones(50), atol=1e-6)
    assert torch.allclose(weights.sum(1), torch.ones(50), atol=1e-6)
    assert (top_idx[:, 0] != top_idx[:, 1]).all()
    chosen = probs.gather(1, top_idx)
    assert torch.allclose(weights, chosen / chosen.sum(1, keepdim=True))
    assert (chosen.min(1).values >= probs.sort(1, descending=True).values[:, 1] - 1e-7).all()


def test_moe_sparse_dispatch_equals_dense_dispatch() -> None:
    model = build_tiny_lm(SMALL_MOE, 3)
    moe = model.blocks[1].mlp
    x = torch.randn(4, 16, SMALL_MOE.d_model, generator=torch.Generator().manual_seed(1), requires_grad=True)
    moe.dispatch = "sparse"
    y_sparse = moe(x)
    (g_sparse,) = torch.autograd.grad(y_sparse.square().sum(), x)
    moe.dispatch = "dense"
    y_dense = moe(x)
    (g_dense,) = torch.autograd.grad(y_dense.square().sum(), x)
    assert torch.allclose(y_sparse, y_dense, atol=1e-6)
    assert torch.allclose(g_sparse, g_dense, atol=1e-5)
    # And against a per-token reference with explicit top-k renormalised gates.
    flat = x.detach().reshape(-1, SMALL_MOE.d_model)
    probs = torch.softmax(flat @ moe.router.weight.T, dim=-1)
    ref = torch.zeros_like(flat)
    for n in range(flat.shape[0]):
        top = probs[n].topk(2)
        for w, e in zip(top.values / top.values.sum(), top.indices.tolist(), strict=True):
            gate, up = (flat[n] @ moe.gate_up[e]).chunk(2)
            ref[n] += w * ((torch.nn.functional.silu(gate) * up) @ moe.down[e])
    assert torch.allclose(y_sparse.detach().reshape(-1, SMALL_MOE.d_model), ref, atol=1e-6)


def test_load_balancing_loss_values() -> None:
    # Uniform router probabilities give exactly 1 whatever the assignment.
    probs = torch.full((6, 4), 0.25)
    idx = torch.tensor([[0, 1]] * 6)
    assert load_balancing_loss(probs, idx, 4).item() == pytest.approx(1.0, abs=1e-6)
    # Balanced assignment (uniform f) gives exactly 1 whatever the probabilities.
    probs = torch.softmax(torch.randn(4, 4, generator=torch.Generator().manual_seed(2)), dim=1)
    idx = torch.tensor([[0, 1], [2, 3], [1, 0], [3, 2]])
    assert load_balancing_loss(probs, idx, 4).item() == pytest.approx(1.0, abs=1e-6)
    # Collapse onto one expert (top-1) gives the maximum, n_experts.
    probs = torch.tensor([[1.0, 0.0, 0.0, 0.0]] * 5)
    assert load_balancing_loss(probs, torch.zeros(5, 1, dtype=torch.long), 4).item() == pytest.approx(4.0)
    # Not bounded below by 1 in general (f and P only loosely coupled): the documented 8/9 example.
    probs = torch.tensor([[0.5001, 0.4999], [0.5001, 0.4999], [0.0, 1.0]])
    idx = probs.topk(1, dim=1).indices
    assert load_balancing_loss(probs, idx, 2).item() == pytest.approx(8 / 9, abs=1e-3)


def test_moe_aux_loss_in_model() -> None:
    model = build_tiny_lm(SMALL_MOE, 0)
    idx = _tokens((4, 16))
    total, ce = model.loss(idx, _tokens((4, 16), seed=1))
    aux = model.last_aux_loss
    # Near-uniform router at init: close to the balanced value 1; always within [0, n_experts].
    assert 0.0 <= aux.item() <= 4.0
    assert abs(aux.item() - 1.0) < 0.05
    layer_aux = torch.stack([b.mlp.last_aux_loss for b in model.blocks])
    assert torch.allclose(aux, layer_aux.mean())
    assert torch.allclose(total, ce + SMALL_MOE.aux_loss_weight * aux)
    # The aux loss reaches the router: its gradient alone is non-zero there.
    (grad,) = torch.autograd.grad(aux, model.blocks[0].mlp.router.weight)
    assert grad.abs().sum() > 0
    dense = build_tiny_lm(SMALL, 0)
    dense(idx)
    assert dense.last_aux_loss.item() == 0.0


# ---------------------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------------------


@CONFIGS
def test_adamw_overfits_one_batch(config: TinyLMConfig) -> None:
    model = build_tiny_lm(config, 0)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.9, 0.95), weight_decay=0.0)
    data = _tokens((4 * 17,), seed=9, vocab=32).view(4, 17)  # random text over 32 symbols
    x, y = data[:, :-1], data[:, 1:]
    first = None
    for _ in range(60):
        opt.zero_grad()
        total, ce = model.loss(x, y)
        total.backward()
        opt.step()
        first = ce.item() if first is None else first
    final = model.loss(x, y)[1].item()
    assert first == pytest.approx(math.log(256), abs=0.1)
    assert final < 0.5 * first  # memorised: from ~5.5 nats to well below ln(32) = 3.47
