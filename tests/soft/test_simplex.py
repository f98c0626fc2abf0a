"""Unit-simplex projections of optarium.soft._simplex (softmax, sparsemax, p = 3/2 and 4/3 closed forms)."""

from __future__ import annotations

import pytest
import torch

from optarium.soft._simplex import safe_log, simplex_projection

torch.set_num_threads(1)
F64 = torch.float64
EXPONENT = {"c0": 1, "c1": 2, "c2": 3}  # y_i = [v_i - theta]_+^(q - 1)


def _bisection_reference(v: torch.Tensor, mode: str) -> torch.Tensor:
    """theta with sum [v - theta]_+^r = 1 by 200 bisection steps (independent of the closed forms)."""
    r = EXPONENT[mode]
    lo = v.amax(-1, keepdim=True) - 1.0  # sum >= 1 here
    hi = v.amax(-1, keepdim=True)  # sum = 0 here
    for _ in range(200):
        mid = (lo + hi) / 2
        s = (v - mid).clamp(min=0).pow(r).sum(-1, keepdim=True)
        lo, hi = torch.where(s > 1, mid, lo), torch.where(s > 1, hi, mid)
    return (v - (lo + hi) / 2).clamp(min=0).pow(r)


@pytest.mark.parametrize("mode", ["c0", "c1", "c2"])
def test_sparse_modes_match_bisection_reference(mode: str) -> None:
    g = torch.Generator().manual_seed(0)
    z = torch.randn(6, 9, generator=g, dtype=F64) * 0.7
    y = simplex_projection(z, softness=0.5, mode=mode)
    torch.testing.assert_close(y, _bisection_reference(z / 0.5, mode), rtol=0, atol=1e-12)
    assert bool((y == 0).any()), "well separated inputs should give exact zeros (sparsity)"


def test_smooth_is_softmax_and_rows_sum_to_one() -> None:
    z = torch.randn(4, 7, dtype=F64, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(
        simplex_projection(z, softness=0.3), torch.softmax(z / 0.3, -1), rtol=0, atol=0
    )
    for mode in ("smooth", "c0", "c1", "c2"):
        y = simplex_projection(z, softness=0.1, mode=mode)
        assert bool((y >= 0).all())
        assert (y.sum(-1) - 1).abs().max().item() <= 1e-12


@pytest.mark.parametrize("mode", ["c0", "c1", "c2"])
def test_is_the_regularised_argmax(mode: str) -> None:
    """y* maximises <v, y> - R(y), R(y) = sum y^p / p, over the simplex (KKT and random competitors)."""
    p = {"c0": 2.0, "c1": 1.5, "c2": 4.0 / 3.0}[mode]

    def objective(v: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return (v * y).sum(-1) - y.pow(p).sum(-1) / p

    g = torch.Generator().manual_seed(2)
    v = torch.randn(5, generator=g, dtype=F64) * 2
    y = simplex_projection(v, softness=1.0, mode=mode)
    # stationarity: on the support R'(y_i) = y_i^(p - 1) = v_i - theta (p - 1 = 1 / r), off it v_i <= theta
    r = EXPONENT[mode]
    supp = y > 0
    theta = v[supp] - y[supp].pow(1.0 / r)
    assert (theta - theta[0]).abs().max().item() < 1e-12
    assert bool((v[~supp] <= theta[0] + 1e-12).all())
    best = objective(v, y)
    trials = torch.distributions.Dirichlet(torch.ones(5, dtype=F64)).sample((2000,))
    assert bool((objective(v, trials) <= best + 1e-12).all())


@pytest.mark.parametrize("mode", ["smooth", "c0", "c1", "c2"])
def test_gradcheck(mode: str) -> None:
    z = torch.randn(3, 5, dtype=F64, generator=torch.Generator().manual_seed(3), requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda t: simplex_projection(t, softness=0.5, mode=mode), (z,), eps=1e-6, atol=1e-6
    )


def test_dim_argument_and_batching() -> None:
    z = torch.randn(2, 6, 3, dtype=F64, generator=torch.Generator().manual_seed(4))
    for mode in ("smooth", "c1"):
        a = simplex_projection(z, dim=1, mode=mode)
        b = simplex_projection(z.movedim(1, -1), dim=-1, mode=mode).movedim(-1, 1)
        torch.testing.assert_close(a, b, rtol=0, atol=1e-15)
        row = simplex_projection(z[1, :, 2], mode=mode)
        torch.testing.assert_close(a[1, :, 2], row, rtol=0, atol=1e-15)


@pytest.mark.parametrize("mode", ["smooth", "c0", "c1", "c2"])
def test_extreme_inputs_stay_finite(mode: str) -> None:
    for dtype in (torch.float32, F64):
        big = simplex_projection(torch.tensor([1e30, -1e30, 0.0, 1e30], dtype=dtype), mode=mode)
        torch.testing.assert_close(big, torch.tensor([0.5, 0.0, 0.0, 0.5], dtype=dtype))
        tiny = simplex_projection(torch.tensor([1e-40, 0.0, 3e-41], dtype=dtype), mode=mode)
        torch.testing.assert_close(tiny, torch.full((3,), 1 / 3, dtype=dtype))
        one = simplex_projection(torch.tensor([7.0], dtype=dtype), mode=mode)
        assert one.item() == 1.0
        ties = simplex_projection(torch.zeros(4, dtype=dtype), mode=mode)
        torch.testing.assert_close(ties, torch.full((4,), 0.25, dtype=dtype))


def test_log_output_and_safe_log() -> None:
    z = torch.tensor([[0.0, -200.0, 1.0]], dtype=F64)
    y, lp = simplex_projection(z, softness=0.1, mode="smooth", return_log=True)
    torch.testing.assert_close(lp, torch.log_softmax(z / 0.1, -1))
    assert bool(torch.isfinite(lp).all()) and y[0, 1].item() == 0.0  # underflows in y, finite in log
    x = torch.tensor([0.0, 0.3, 0.7], dtype=F64, requires_grad=True)
    out = safe_log(x)
    assert out[0].item() == float("-inf")
    out[1:].sum().backward()
    assert x.grad is not None and bool(torch.isfinite(x.grad).all()) and x.grad[0].item() == 0.0
    _, lp0 = simplex_projection(torch.tensor([0.0, 5.0]), mode="c0", return_log=True)
    assert lp0[0].item() == float("-inf") and lp0[1].item() == 0.0


def test_bad_input() -> None:
    z = torch.randn(3)
    with pytest.raises(ValueError, match=r"^softness"):
        simplex_projection(z, softness=0.0)
    with pytest.raises(ValueError, match=r"^mode"):
        simplex_projection(z, mode="hard")
    with pytest.raises(ValueError, match=r"^dim"):
        simplex_projection(z, dim=2)
    with pytest.raises(TypeError, match=r"^z"):
        simplex_projection(torch.arange(3))
