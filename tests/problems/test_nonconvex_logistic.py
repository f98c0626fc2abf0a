"""The nonconvex logistic problem: analytic (batched) gradients equal autograd's; data as documented."""

from __future__ import annotations

import pytest
import torch

from optarium.problems.nonconvex_logistic import NonconvexLogistic, make_nonconvex_logistic


def _autograd(prob: NonconvexLogistic, x: torch.Tensor, idx: torch.Tensor | None) -> torch.Tensor:
    x = x.detach().clone().requires_grad_()
    a, y = (prob.a, prob.y) if idx is None else (prob.a[idx], prob.y[idx])
    loss = torch.nn.functional.softplus(-(a @ x) * y).mean() + prob.alpha * (x * x / (1 + x * x)).sum()
    loss.backward()
    return x.grad


def test_gradients_match_autograd_full_and_batched() -> None:
    prob = make_nonconvex_logistic(n=200, dim=7, seed=1)
    gen = torch.Generator().manual_seed(0)
    xs = torch.randn(4, 7, generator=gen, dtype=torch.float64)
    idx = torch.randint(200, (4, 8), generator=gen)
    full = prob.grad(xs)
    batched = prob.grad(xs, idx)
    shared = prob.grad(xs, idx[0])
    for k in range(4):
        torch.testing.assert_close(full[k], _autograd(prob, xs[k], None), rtol=1e-12, atol=1e-14)
        torch.testing.assert_close(batched[k], _autograd(prob, xs[k], idx[k]), rtol=1e-12, atol=1e-14)
        torch.testing.assert_close(shared[k], _autograd(prob, xs[k], idx[0]), rtol=1e-12, atol=1e-14)
        torch.testing.assert_close(prob.grad(xs[k]), full[k], rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(prob.loss(xs)[2], prob.loss(xs[2]))


def test_data_shape_labels_and_flip_rate() -> None:
    clean = make_nonconvex_logistic(n=4000, dim=20, flip=0.0, seed=2)
    noisy = make_nonconvex_logistic(n=4000, dim=20, flip=0.1, seed=2)
    assert clean.a.shape == (4000, 20) and set(clean.y.unique().tolist()) == {-1.0, 1.0}
    assert torch.equal(clean.a, noisy.a)
    rate = float((clean.y != noisy.y).double().mean())
    assert 0.08 < rate < 0.12
    # reproducible from the seed
    assert torch.equal(
        make_nonconvex_logistic(n=50, dim=3, seed=4).y, make_nonconvex_logistic(n=50, dim=3, seed=4).y
    )


@pytest.mark.parametrize(
    "kwargs,name", [({"n": 0}, "n"), ({"alpha": -1.0}, "alpha"), ({"flip": 1.5}, "flip")]
)
def test_bad_arguments_raise(kwargs: dict, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        make_nonconvex_logistic(**kwargs)
