"""optarium.optim.sam.sam_step: the constant-step SAM / USAM baseline of SAM-Polyak."""

from __future__ import annotations

import math

import pytest
import torch

from optarium.optim import SAMPolyak, sam_step

A = torch.tensor([[3.0, 1.0], [1.0, 2.0]], dtype=torch.float64)


def _quadratic(x: torch.Tensor, seen: list[torch.Tensor] | None = None):
    def closure() -> torch.Tensor:
        if seen is not None:
            seen.append(x.detach().clone())
        loss = 0.5 * x @ A @ x
        loss.backward()
        return loss

    return closure


@pytest.mark.parametrize("lambd", [0.0, 0.4, 1.0])
@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_one_step_is_the_formula(lambd: float, weight_decay: float) -> None:
    x0 = torch.tensor([1.0, -2.0], dtype=torch.float64)
    x = x0.clone().requires_grad_(True)
    seen: list[torch.Tensor] = []
    lr, rho = 0.1, 0.3
    loss = sam_step([x], _quadratic(x, seen), lr, rho, lambd, weight_decay)
    g = A @ x0
    e = x0 + rho * ((1 - lambd) + lambd / g.norm()) * g
    expected = x0 - lr * (A @ e + weight_decay * x0)
    torch.testing.assert_close(x.detach(), expected, rtol=1e-14, atol=1e-15)
    assert float(loss) == pytest.approx(float(0.5 * x0 @ A @ x0), rel=1e-15)
    assert len(seen) == 2 and torch.equal(seen[0], x0)  # first pass at x_t, second at e_t
    torch.testing.assert_close(seen[1], e, rtol=1e-15, atol=0)
    torch.testing.assert_close(x.grad, A @ e, rtol=1e-14, atol=0)  # the perturbed gradient, no decay


def test_zero_radius_is_gradient_descent_and_zero_lr_restores_exactly() -> None:
    x = torch.tensor([0.7, 0.2], dtype=torch.float64, requires_grad=True)
    x0 = x.detach().clone()
    sam_step([x], _quadratic(x), 0.05, 0.0)
    torch.testing.assert_close(x.detach(), x0 - 0.05 * (A @ x0), rtol=1e-15, atol=0)
    y = torch.randn(4, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0)).requires_grad_(
        True
    )
    y0 = y.detach().clone()

    def closure() -> torch.Tensor:
        loss = torch.sin(y).sum() + (y**3).sum()
        loss.backward()
        return loss

    sam_step([y], closure, 0.0, 0.5)
    assert torch.equal(y.detach(), y0)  # restored from a stored copy, bit for bit


def test_direction_matches_sam_polyak_at_its_step_size() -> None:
    """SAMPolyak and sam_step share the perturbation and weight-decay rule: at SAMPolyak's gamma_t, the
    constant-step baseline lands on the same iterate."""
    gen = torch.Generator().manual_seed(1)
    w = torch.randn(5, dtype=torch.float64, generator=gen)
    X = torch.randn(30, 5, dtype=torch.float64, generator=gen)
    y = X @ w + 0.1 * torch.randn(30, dtype=torch.float64, generator=gen)
    for lambd in (0.0, 1.0):
        a = torch.zeros(5, dtype=torch.float64, requires_grad=True)
        b = torch.zeros(5, dtype=torch.float64, requires_grad=True)

        def loss_of(p: torch.Tensor):
            def closure() -> torch.Tensor:
                loss = ((X @ p - y) ** 2).mean()
                loss.backward()
                return loss

            return closure

        opt = SAMPolyak([a], rho=0.05, lambd=lambd, f_star=0.0, gamma_max=math.inf, weight_decay=0.01)
        for _ in range(3):
            with torch.no_grad():
                b.copy_(a)
            opt.step(loss_of(a))
            sam_step([b], loss_of(b), opt.param_groups[0]["lr"], 0.05, lambd, 0.01)
            torch.testing.assert_close(b.detach(), a.detach(), rtol=1e-12, atol=1e-14)


def test_a_constant_step_converges_on_a_quadratic() -> None:
    x = torch.tensor([1.0, -2.0], dtype=torch.float64, requires_grad=True)
    for _ in range(200):
        sam_step([x], _quadratic(x), 0.2, 0.05, lambd=0.0)  # USAM: the minimiser is a fixed point
    assert float(x.detach().norm()) < 1e-8


@pytest.mark.parametrize(
    ("kwargs", "name", "exc"),
    [
        ({"lr": -0.1}, "lr", ValueError),
        ({"lr": float("nan")}, "lr", ValueError),
        ({"rho": -1.0}, "rho", ValueError),
        ({"lambd": 1.5}, "lambd", ValueError),
        ({"weight_decay": -1e-3}, "weight_decay", ValueError),
        ({"params": []}, "params", TypeError),
        ({"params": "x"}, "params", TypeError),
        ({"closure": 3}, "closure", TypeError),
    ],
)
def test_bad_input_names_the_argument(kwargs: dict, name: str, exc: type) -> None:
    x = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    args = {"params": [x], "closure": _quadratic(x), "lr": 0.1, "rho": 0.1, **kwargs}
    with pytest.raises(exc, match=rf"^{name}"):
        sam_step(**args)


def test_a_closure_without_backward_is_named() -> None:
    x = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    with pytest.raises(ValueError, match=r"^closure"):
        sam_step([x], lambda: (x**2).sum(), 0.1, 0.1)


def test_sam_iterates_match_pytorch_optimizer_sam_with_sgd() -> None:
    """sam_step (lambd = 1) against pytorch-optimizer 4.1.0's SAM(base_optimizer=SGD) on a tanh MLP, float64.

    The peer perturbs along the gradient already in ``.grad`` (its usage: backward, then ``step(closure)``);
    the definitions differ in its perturb_eps (added to the gradient norm), set to 0 here, and in its global
    gradient norm, which it accumulates in float32 (a relative error of about 1e-7 in the radius): 25 steps
    agree to 1e-8 (measured 3.6e-10), while a radius off by 1 % moves them apart by 1.7e-4.
    """
    from pytorch_optimizer import SAM

    torch.manual_seed(0)
    x = torch.randn(64, 6, dtype=torch.float64)
    y = torch.randn(64, 3, dtype=torch.float64)

    def make() -> torch.nn.Module:
        torch.manual_seed(1)
        return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3)).double()

    ours, peer = make(), make()
    ref = SAM(peer.parameters(), base_optimizer=torch.optim.SGD, rho=0.05, lr=0.3, perturb_eps=0.0)
    params = list(ours.parameters())

    def closure_for(model: torch.nn.Module, opt: torch.optim.Optimizer | None) -> object:
        def closure() -> torch.Tensor:
            if opt is not None:
                opt.zero_grad()
            else:
                for p in params:
                    p.grad = None
            loss = 0.5 * ((model(x) - y) ** 2).sum(1).mean()
            loss.backward()
            return loss

        return closure

    for _ in range(25):
        sam_step(params, closure_for(ours, None), lr=0.3, rho=0.05)
        peer_closure = closure_for(peer, ref)
        peer_closure()  # the peer's step perturbs along the gradient already in .grad, then calls the closure
        ref.step(peer_closure)
    for a, b in zip(ours.parameters(), peer.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-8)
    start = make().parameters()
    moved = sum(float((p - q).abs().sum()) for p, q in zip(ours.parameters(), start, strict=True))
    assert moved > 1e-2  # the comparison is not between two models that never moved
