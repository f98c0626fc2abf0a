"""optarium.soft.elementwise: smoothness classes, closed forms, limits, numerics, shapes and dtypes.

Hard parity, ST forward, gradcheck, golden values, bad input and softtorch parity run in the conformance suite
(tests/conformance/test_soft.py); this file checks what is specific to the elementwise operators.
"""

from __future__ import annotations

import pytest
import torch

import optarium.soft.elementwise as E
from optarium.soft._common import SOFT_MODES

torch.set_num_threads(1)
F64 = torch.float64


def _derivs(fn, x0: float, order: int) -> list[float]:  # type: ignore[no-untyped-def]
    """d1..d_order of fn at x0 by nested autograd (float64)."""
    x = torch.tensor(x0, dtype=F64, requires_grad=True)
    y = fn(x)
    out = []
    for _ in range(order):
        if y.requires_grad:
            (y,) = torch.autograd.grad(y, x, create_graph=True, allow_unused=True, materialize_grads=True)
        else:  # a constant (e.g. the derivative of a polynomial piece of lower degree): next derivative 0
            y = torch.zeros((), dtype=F64)
        out.append(float(y.detach()))
    return out


def _jumps(fn, at: float, order: int = 4) -> list[float]:  # type: ignore[no-untyped-def]
    right = _derivs(fn, at + 1e-9, order)
    left = _derivs(fn, at - 1e-9, order)
    return [r - lft for r, lft in zip(right, left, strict=True)]


# (function, mode) -> {u: jumps of d1..d4} at s = 0.2 (so u = x); from spec test 4, confirmed on the wheel.
# None: not checked (derivatives above the first jump of a class may jump too).
_SIG = {
    "c0": {1.0: [-0.5, None, None, None], -1.0: [0.5, None, None, None]},
    "c1": {1.0: [0, 1.5, None, None], -1.0: [0, 1.5, None, None]},
    "c2": {1.0: [0, 0, -7.5, None], -1.0: [0, 0, 7.5, None]},
    "smooth": {1.0: [0, 0, 0, 0], -1.0: [0, 0, 0, 0]},
}
_RELU = {
    "c0": {1.0: [0, -0.5, None, None], -1.0: [0, 0.5, None, None]},
    "c1": {1.0: [0, 0, 1.5, None], -1.0: [0, 0, 1.5, None]},
    "c2": {1.0: [0, 0, 0, -7.5], -1.0: [0, 0, 0, 7.5]},
    "smooth": {1.0: [0, 0, 0, 0], -1.0: [0, 0, 0, 0]},
}
_GATED = {
    "c0": {1.0: [-0.5, None, None, None], -1.0: [-0.5, None, None, None]},
    "c1": {1.0: [0, 1.5, None, None], -1.0: [0, -1.5, None, None]},
    "c2": {1.0: [0, 0, -7.5, None], -1.0: [0, 0, -7.5, None]},
    "smooth": {1.0: [0, 0, 0, 0], -1.0: [0, 0, 0, 0]},
}


@pytest.mark.parametrize("mode", ["smooth", "c0", "c1", "c2"])
@pytest.mark.parametrize(
    ("kind", "table"),
    [("sigmoidal", _SIG), ("relu", _RELU), ("gated", _GATED)],
    ids=["sigmoidal", "relu", "gated"],
)
def test_smoothness_classes_exact_jumps(kind: str, table: dict, mode: str) -> None:  # type: ignore[type-arg]
    """Spec test 4: one-sided derivative jumps at u = +-1 (s = 0.2) match the class of each mode exactly."""
    fns = {
        "sigmoidal": lambda x: E.sigmoidal(x, 0.2, mode),
        "relu": lambda x: E.softrelu(x, 0.2, mode),
        "gated": lambda x: E.softrelu(x, 0.2, mode, gated=True),
    }
    for at, want in table[mode].items():
        got = _jumps(fns[kind], at)
        for k, (g, w) in enumerate(zip(got, want, strict=True)):
            if w is not None:
                assert abs(g - w) <= 1e-4, f"{kind} {mode} d{k + 1} jump at {at}: {g} != {w}"


def test_jumps_scale_with_softness() -> None:
    """At the default s = 0.1, sigmoidal c0 d1 and non-gated relu c0 d2 both jump by -1.0 at u = +1."""
    assert abs(_jumps(lambda x: E.sigmoidal(x, 0.1, "c0"), 0.5, 1)[0] + 1.0) < 1e-4
    assert abs(_jumps(lambda x: E.softrelu(x, 0.1, "c0"), 0.5, 2)[1] + 1.0) < 1e-4


@pytest.mark.parametrize(
    ("mode", "simplex_mode"), [("smooth", "smooth"), ("c0", "c0"), ("_c1_pnorm", "c1"), ("_c2_pnorm", "c2")]
)
def test_sigmoidal_is_the_two_point_simplex_projection(mode: str, simplex_mode: str) -> None:
    """sigma_s(x) = 2nd entry of the regularised argmax over {0, x} (independent code: the simplex module)."""
    from optarium.soft._simplex import simplex_projection

    x = torch.linspace(-0.7, 0.7, 29, dtype=F64)
    s = 0.1
    z = torch.stack([torch.zeros_like(x), x], -1)
    y = simplex_projection(z, -1, s if mode == "smooth" else 5 * s, simplex_mode)[..., 1]
    torch.testing.assert_close(E.sigmoidal(x, s, mode), y, rtol=0, atol=1e-12)


@pytest.mark.parametrize("mode", [*SOFT_MODES, "_c1_pnorm", "_c2_pnorm"])
def test_softrelu_is_softness_times_integral_of_sigmoidal(mode: str) -> None:
    x = torch.linspace(-1.0, 1.0, 41, dtype=F64, requires_grad=True)
    (g,) = torch.autograd.grad(E.softrelu(x, 0.1, mode).sum(), x)
    torch.testing.assert_close(g, E.sigmoidal(x.detach(), 0.1, mode), rtol=0, atol=1e-10)


def test_values_outside_the_transition_are_exact() -> None:
    x = torch.tensor([-3.0, -0.51, 0.51, 3.0], dtype=F64)
    for mode in ("c0", "c1", "c2", "_c1_pnorm", "_c2_pnorm"):
        assert torch.equal(E.sigmoidal(x, 0.1, mode), torch.tensor([0.0, 0.0, 1.0, 1.0], dtype=F64))
        assert torch.equal(E.softrelu(x, 0.1, mode), torch.relu(x))
    assert torch.equal(
        E.clamp(torch.tensor([-5.0, 0.0, 5.0]), -1.0, 1.0, 0.1, "c1"), torch.tensor([-1.0, 0.0, 1.0])
    )


@pytest.mark.parametrize("fn", ["sigmoidal", "softrelu", "heaviside", "sign", "abs", "relu", "round"])
def test_huge_inputs_give_finite_values_and_gradients(fn: str) -> None:
    f = getattr(E, fn)
    for dtype in (torch.float32, F64):
        x = torch.tensor([-1e30, -1e4, 0.0, 1e4, 1e30], dtype=dtype, requires_grad=True)
        for mode in SOFT_MODES:
            y = f(x, 0.1, mode)
            if fn == "round":  # floor(1e30) is huge but finite; round stays near x
                assert bool(torch.isfinite(y).all())
            else:
                assert bool(torch.isfinite(y).all()), (fn, mode, dtype, y)
            (g,) = torch.autograd.grad(y.sum(), x)
            assert bool(torch.isfinite(g).all()), (fn, mode, dtype, g)


def test_round_limit_and_neighbor_radius() -> None:
    x = torch.tensor([-2.3, -0.6, 0.2, 1.7, 3.45], dtype=F64)
    for mode in SOFT_MODES:
        assert (E.round(x, 1e-3, mode) - torch.round(x)).abs().max() < 1e-9
    # the window of neighbours only matters when the softness is wide: radius 0 vs 5 agree at s = 0.01
    torch.testing.assert_close(E.round(x, 0.01, neighbor_radius=1), E.round(x, 0.01), rtol=0, atol=1e-12)


def test_dtype_shape_and_integer_inputs() -> None:
    x = torch.randn(2, 3, 4)
    for name in ("sigmoidal", "softrelu", "heaviside", "sign", "abs", "relu", "round"):
        for mode in ("hard", *SOFT_MODES):
            y = getattr(E, name)(x, 0.1, mode)
            assert y.shape == x.shape and y.dtype == torch.float32, (name, mode)
    assert E.abs(torch.tensor([-2, 0, 3])).dtype == torch.get_default_dtype()
    assert E.clamp(x.double(), -0.5, 0.5).dtype == F64


def test_tensor_softness_keeps_its_graph() -> None:
    s = torch.tensor(0.3, dtype=F64, requires_grad=True)
    x = torch.tensor([0.1, -0.2], dtype=F64)
    (g,) = torch.autograd.grad(E.relu(x, s).sum(), s)
    assert torch.isfinite(g) and g != 0


def test_clamp_broadcasts_tensor_bounds_and_one_sided() -> None:
    x = torch.randn(3, 4, dtype=F64)
    a, b = torch.full((4,), -0.2, dtype=F64), torch.full((3, 1), 0.4, dtype=F64)
    assert E.clamp(x, a, b).shape == (3, 4)
    torch.testing.assert_close(E.clamp(x, None, 0.3, 1e-4, "c2"), torch.clamp(x, max=0.3), rtol=0, atol=1e-9)
    torch.testing.assert_close(
        E.clamp(x, -0.3, None, 1e-4, "c0"), torch.clamp(x, min=-0.3), rtol=0, atol=1e-9
    )


def test_golden_sign() -> None:
    x = torch.tensor([-0.2, -1.0, 0.3, 1.0], dtype=F64)
    want = torch.tensor([-0.7616, -0.9999, 0.9051, 0.9999], dtype=F64)
    torch.testing.assert_close(E.sign(x), want, rtol=0, atol=1e-4)
