"""Falsifiable checks of the BP, checkpointed BP, accumulation, FmAD and ZO gradient estimators."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from optarium.optim.gradient_estimators import (
    ESTIMATORS,
    GradientEstimator,
    make_estimator,
    normalised_error,
    peak_allocated_bytes,
    saved_tensor_bytes,
)
from optarium.problems.lora import TinyLMClassifier, add_lora
from optarium.problems.tiny_lm import TinyLMConfig, build_tiny_lm

CFG = TinyLMConfig(vocab_size=64, d_model=32, n_layers=2, n_heads=4, context=32, d_ff=48)


def _classifier(dtype: torch.dtype = torch.float64) -> tuple[TinyLMClassifier, list[nn.Parameter]]:
    lm = build_tiny_lm(CFG, 0, dtype=dtype)
    model = TinyLMClassifier(lm, generator=torch.Generator().manual_seed(1))
    params = add_lora(model, 2, seed=0)
    with torch.no_grad():  # move off the B = 0 start so every adapter has a gradient
        gen = torch.Generator().manual_seed(3)
        for p in params:
            p.add_(0.1 * torch.randn(p.shape, generator=gen, dtype=dtype))
    return model, params


def _batch(n: int = 6, t: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(5)
    return torch.randint(0, 64, (n, t), generator=gen), torch.randint(0, 2, (n,), generator=gen)


def _grads(params: list[nn.Parameter]) -> torch.Tensor:
    return torch.cat([p.grad.reshape(-1) for p in params])  # type: ignore[union-attr]


def _true_grad(model: nn.Module, loss_fn, batch, params) -> torch.Tensor:
    make_estimator("bp").compute(model, loss_fn, batch, params)
    return _grads(params).clone()


class _Linear(nn.Module):
    """Linear regression y = X w; the quadratic loss 0.5 mean (Xw - y)^2."""

    def __init__(self, d: int, seed: int = 0) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.w = nn.Parameter(torch.randn(d, generator=gen, dtype=torch.float64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.w


def _mse(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return 0.5 * (out - y).square().mean()


def _regression(d: int, n: int = 40, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=gen, dtype=torch.float64), torch.randn(
        n, generator=gen, dtype=torch.float64
    )


def test_fmad_directional_derivative_matches_autograd_on_tiny_transformer() -> None:
    model, params = _classifier()
    batch = _batch()
    g = _true_grad(model, F.cross_entropy, batch, params)
    est = make_estimator("fmad", seed=2)
    loss = est.compute(model, F.cross_entropy, batch, params)
    (s,) = est.last_directional
    ghat = _grads(params)  # = s v
    assert abs(float(ghat @ g) - s * s) <= 1e-10 * max(1.0, s * s)  # g . (s v) = s (g . v) = s^2
    with torch.no_grad():
        assert float(loss) == pytest.approx(float(F.cross_entropy(model(batch[0]), batch[1])), abs=1e-12)


def test_checkpointed_and_accumulated_bp_equal_plain_bp() -> None:
    model, params = _classifier()
    batch = _batch()
    g = _true_grad(model, F.cross_entropy, batch, params)
    make_estimator("bp_checkpoint").compute(model, F.cross_entropy, batch, params)
    torch.testing.assert_close(_grads(params), g, rtol=0, atol=1e-12)
    for m in (2, 3, 6):
        make_estimator("bp_accumulate", micro_batches=m).compute(model, F.cross_entropy, batch, params)
        torch.testing.assert_close(_grads(params), g, rtol=1e-10, atol=1e-12)
    # the model's blocks are restored after the checkpointed call
    assert all(type(b).forward is b.forward.__func__ for b in model.lm.blocks)  # type: ignore[attr-defined]


def test_checkpointing_saves_less_for_backward() -> None:
    model, params = _classifier(torch.float32)
    x, y = _batch(8, 32)

    def run(name: str) -> int:
        return saved_tensor_bytes(
            lambda: make_estimator(name).compute(model, F.cross_entropy, (x, y), params)
        )

    bp, ck, fm, zo = run("bp"), run("bp_checkpoint"), run("fmad"), run("zo")
    assert 0 < ck < 0.5 * bp
    assert fm == 0 and zo == 0
    assert peak_allocated_bytes(
        lambda: make_estimator("bp_checkpoint").compute(model, F.cross_entropy, (x, y), params)
    ) < peak_allocated_bytes(lambda: make_estimator("bp").compute(model, F.cross_entropy, (x, y), params))


@pytest.mark.parametrize("name", ["fmad", "zo"])
def test_forward_gradient_and_zo_are_unbiased(name: str) -> None:
    d, k = 5, 3000 if name == "zo" else 1200
    model = _Linear(d)
    batch = _regression(d)
    params = list(model.parameters())
    g = _true_grad(model, _mse, batch, params)
    make_estimator(name, num_directions=k, seed=11).compute(model, _mse, batch, params)
    mean = _grads(params)
    # Var of (g.v) v_i over Gaussian v = ||g||^2 + g_i^2 (quadratic loss: ZO's projection is exact)
    se = ((g.square().sum() + g.square()) / k).sqrt()
    assert float(((mean - g).abs() / se).max()) < 4.5


def test_zo_is_exact_on_quadratic_and_bias_is_second_order() -> None:
    d = 8
    model = _Linear(d)
    batch = _regression(d)
    params = list(model.parameters())
    ests = []
    for eps in (1.0, 1e-1, 1e-3):
        make_estimator("zo", eps=eps, seed=4).compute(model, _mse, batch, params)
        ests.append(_grads(params).clone())
    torch.testing.assert_close(ests[0], ests[2], rtol=1e-8, atol=1e-10)  # central difference exact
    torch.testing.assert_close(ests[1], ests[2], rtol=1e-8, atol=1e-10)

    def smooth(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.sin(out).mean() + (out - y).pow(4).mean()

    g = {}
    for eps in (0.08, 0.04, 0.02):
        make_estimator("zo", eps=eps, seed=4).compute(model, smooth, batch, params)
        g[eps] = _grads(params).clone()
    ratio = float((g[0.08] - g[0.04]).norm() / (g[0.04] - g[0.02]).norm())
    assert 3.7 < ratio < 4.3  # O(eps^2): halving eps quarters the difference


@pytest.mark.parametrize(("dtype", "tol"), [(torch.float64, 1e-12), (torch.float32, 1e-5)])
def test_zo_seed_trick_restores_parameters(dtype: torch.dtype, tol: float) -> None:
    model, params = _classifier(dtype)
    before = [p.detach().clone() for p in params]
    make_estimator("zo", num_directions=3, eps=1e-2).compute(model, F.cross_entropy, _batch(), params)
    for p, b in zip(params, before, strict=True):
        if dtype == torch.float64:
            assert float((p.detach() - b).abs().max()) <= tol
        else:
            torch.testing.assert_close(p.detach(), b, rtol=1e-5, atol=1e-7)


def test_seed_trick_and_stored_directions_agree() -> None:
    d = 6
    model = _Linear(d)
    batch = _regression(d)
    params = list(model.parameters())
    make_estimator("zo", seed=9, sparse_keep=0.5).compute(model, _mse, batch, params)
    a = _grads(params).clone()
    make_estimator("zo", seed=9, sparse_keep=0.5, seed_trick=False).compute(model, _mse, batch, params)
    # equal up to the rounding that the first call's +-eps moves left in the parameters
    torch.testing.assert_close(_grads(params), a, rtol=1e-12, atol=1e-12)
    assert int((a == 0).sum()) > 0  # the sparse variant leaves some coordinates unperturbed
    e = make_estimator("zo", seed=9, zo_direction="eps_z", eps=0.1)
    e.compute(model, _mse, batch, params)
    c = _grads(params).clone()
    b = make_estimator("zo", seed=9, eps=0.1)
    b.compute(model, _mse, batch, params)
    torch.testing.assert_close(c, 0.1 * _grads(params), rtol=1e-12, atol=0)  # repository variant: eps * MeZO
    assert e.last_directional[0] == pytest.approx(0.1 * b.last_directional[0], rel=1e-12)


@pytest.mark.parametrize("d", [10, 30, 100])
def test_normalised_error_is_d_plus_one_over_k(d: int) -> None:
    model = _Linear(d)
    batch = _regression(d, n=2 * d)
    for k in (1, 4) if d == 10 else (1,):
        mean, se = normalised_error(
            make_estimator("zo", num_directions=k, seed=d + k), model, _mse, batch, draws=1500
        )
        assert abs(mean - (d + 1) / k) < 4 * se, (d, k, mean, se)


def test_fmad_normalised_error_matches_theory() -> None:
    d = 10
    model = _Linear(d)
    batch = _regression(d)
    mean, se = normalised_error(make_estimator("fmad", seed=1), model, _mse, batch, draws=600)
    assert abs(mean - (d + 1)) < 4 * se


def test_tangent_std_scales_the_forward_gradient() -> None:
    model = _Linear(4)
    batch = _regression(4)
    params = list(model.parameters())
    make_estimator("fmad", seed=3).compute(model, _mse, batch, params)
    a = _grads(params).clone()
    make_estimator("fmad", seed=3, tangent_std=0.5).compute(model, _mse, batch, params)
    torch.testing.assert_close(_grads(params), 0.25 * a, rtol=1e-12, atol=1e-14)
    est = make_estimator("fmad", seed=3, jvp_clip=1e-6)
    est.compute(model, _mse, batch, params)
    assert abs(est.last_directional[0]) > 1e-6  # recorded before the clip
    torch.testing.assert_close(_grads(params), a * (1e-6 / abs(est.last_directional[0])), rtol=1e-10, atol=0)


def test_cost_counters_follow_the_cost_model() -> None:
    model, params = _classifier()
    batch = _batch()
    expected = {"bp": 3.0, "bp_checkpoint": 4.0, "bp_accumulate": 3.0, "fmad": 2.5 * 2, "zo": 2.0 * 2}
    expected.update({"fmad_svrg": 5.0 * 2, "zo_svrg": 4.0 * 2})  # both points per direction
    anchor = {"fmad_svrg": 2.5 * 3 * 2, "zo_svrg": 2.0 * 3 * 2}  # 2 batches x 3 directions
    for name in ESTIMATORS:
        est = make_estimator(name, num_directions=2, micro_batches=3)
        assert est.step_cost() == expected[name]
        fe0 = 0.0
        if name in anchor:
            est.set_anchor(model, F.cross_entropy, [batch, batch], params, directions=3)
            fe0 = anchor[name]
            assert est.anchor_cost(2, 3) == fe0
            assert est.counters.forward_equivalents == pytest.approx(fe0, rel=1e-12)
        for _ in range(2):
            est.compute(model, F.cross_entropy, batch, params)
        assert est.counters.steps == 2
        assert est.counters.forward_equivalents == pytest.approx(fe0 + 2 * expected[name], rel=1e-12)
        est.counters.reset()
        assert est.counters.forward_equivalents == 0.0


@pytest.mark.parametrize("name", ["fmad_svrg", "zo_svrg"])
def test_svrg_is_unbiased_around_its_anchor(name: str) -> None:
    """E[g_svrg] = grad(theta) - grad(anchor point) + anchor estimate; at the anchor point g = anchor."""
    d, k = 5, 1500 if name == "fmad_svrg" else 800
    model = _Linear(d)
    batch = _regression(d)
    params = list(model.parameters())
    est = make_estimator(name, num_directions=k, seed=21, tangent_batch=500)
    est.set_anchor(model, _mse, [batch, _regression(d, seed=2)], params, directions=4)
    assert est.anchor_grad is not None
    anchor = torch.cat([a.reshape(-1) for a in est.anchor_grad]).clone()
    g_tilde = _true_grad(model, _mse, batch, params)
    est.compute(model, _mse, batch, params)  # at the anchor point the differences vanish exactly
    torch.testing.assert_close(_grads(params), anchor, rtol=0, atol=1e-12)
    with torch.no_grad():
        model.w.add_(torch.linspace(-0.5, 0.7, d, dtype=torch.float64))
    g = _true_grad(model, _mse, batch, params)
    est.compute(model, _mse, batch, params)
    diff = g - g_tilde
    se = ((diff.square().sum() + diff.square()) / k).sqrt()  # quadratic loss: exact projections
    z = (_grads(params) - (diff + anchor)).abs() / se
    assert float(z.max()) < 4.5
    assert est.steps_since_anchor == 2


@pytest.mark.parametrize("name", ["fmad", "zo"])
def test_sparse_variant_has_mean_keep_times_grad(name: str) -> None:
    d, k, keep = 6, 4000 if name == "fmad" else 2000, 0.3
    model = _Linear(d)
    batch = _regression(d)
    params = list(model.parameters())
    g = _true_grad(model, _mse, batch, params)
    est = make_estimator(name, num_directions=k, sparse_keep=keep, seed=5, tangent_batch=1000)
    est.compute(model, _mse, batch, params)
    # Var of (g . m z)(m z)_i with m ~ Bernoulli(keep), z ~ N(0, 1): 3 p g_i^2 + p^2 (|g|^2 - 2 g_i^2)
    var = 3 * keep * g.square() + keep**2 * (g.square().sum() - 2 * g.square())
    z = (_grads(params) - keep * g).abs() / (var / k).sqrt()
    assert float(z.max()) < 4.5
    assert float((_grads(params) - g).abs().max()) > 0.2 * float(g.abs().max())  # not the plain estimate


def test_batched_tangents_equal_the_one_at_a_time_loop() -> None:
    model, params = _classifier()
    batch = _batch()
    out = {}
    for name in ("fmad", "fmad_svrg"):
        for tb in (1, 3):
            est = make_estimator(name, num_directions=5, tangent_batch=tb, seed=8, sparse_keep=0.5)
            if name == "fmad_svrg":
                est.set_anchor(model, F.cross_entropy, [batch], params)
                with torch.no_grad():
                    params[-1].add_(0.3)
            est.compute(model, F.cross_entropy, batch, params)
            if name == "fmad_svrg":
                with torch.no_grad():
                    params[-1].sub_(0.3)
            out[name, tb] = (_grads(params).clone(), est.last_directional, est.counters.jvp)
    for name in ("fmad", "fmad_svrg"):
        torch.testing.assert_close(out[name, 3][0], out[name, 1][0], rtol=1e-10, atol=1e-12)
        assert out[name, 3][1] == pytest.approx(out[name, 1][1], rel=1e-10, abs=1e-12)
        assert out[name, 3][2] == out[name, 1][2] == (5 + 10 if name == "fmad_svrg" else 5)  # anchor + 2 x 5


def test_bad_input() -> None:
    with pytest.raises(ValueError, match=r"^num_directions"):
        make_estimator("fmad", num_directions=0)
    with pytest.raises(ValueError, match=r"^eps"):
        make_estimator("zo", eps=0.0)
    with pytest.raises(ValueError, match=r"^tangent_std"):
        make_estimator("fmad", tangent_std=-1.0)
    with pytest.raises(ValueError, match=r"^name"):
        make_estimator("adam")
    with pytest.raises(ValueError, match=r"^sparse_keep"):
        make_estimator("zo", sparse_keep=0.0)
    with pytest.raises(ValueError, match=r"^tangent_batch"):
        make_estimator("fmad", tangent_batch=0)
    with pytest.raises(ValueError, match=r"^name"):
        make_estimator("fmad").set_anchor(_Linear(3), _mse, [_regression(3)])
    with pytest.raises(ValueError, match=r"^name"):
        make_estimator("zo_svrg").compute(_Linear(3), _mse, _regression(3))
    with pytest.raises(ValueError, match=r"^batches"):
        make_estimator("zo_svrg").set_anchor(_Linear(3), _mse, [])
    with pytest.raises(ValueError, match=r"^n_batches"):
        make_estimator("zo_svrg").anchor_cost(0)
    model = _Linear(3)
    with pytest.raises(ValueError, match=r"^batch"):
        make_estimator("bp").compute(model, _mse, (torch.ones(3),))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^segments"):
        make_estimator("bp_checkpoint").compute(model, _mse, _regression(3))

    class NoJvp(torch.autograd.Function):
        @staticmethod
        def forward(x: torch.Tensor) -> torch.Tensor:
            return 2 * x

        @staticmethod
        def setup_context(ctx, inputs, output) -> None:
            return None

        @staticmethod
        def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
            return 2 * grad

    class Opaque(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.ones(3, dtype=torch.float64))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return NoJvp.apply(x @ self.w)

    with pytest.raises(NotImplementedError, match="Opaque"):
        make_estimator("fmad").compute(Opaque(), _mse, _regression(3))
    assert isinstance(make_estimator("bp"), GradientEstimator)
    assert math.isfinite(float(make_estimator("zo").compute(model, _mse, _regression(3))))
