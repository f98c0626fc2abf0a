"""ReWA: the spec's falsifiable checks (../shared/papers/rewa.md, tests 1-8)."""

from __future__ import annotations

import copy
import math
import warnings

import numpy as np
import pytest
import scipy.optimize
import torch

from optarium.optim.rewa import ReWA, from_hidden, to_hidden


def _mlp(seed: int = 0, dtype: torch.dtype = torch.float64) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)).to(dtype)


def _train(model: torch.nn.Module, opt: torch.optim.Optimizer, steps: int, seed: int = 0) -> None:
    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x = torch.randn(32, 5, generator=gen, dtype=torch.float64)
        y = torch.sin(2 * x[:, :1]) + x[:, 1:2]
        opt.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        opt.step()


def _same(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    return all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))


# 1. Reparameterisation round trip.
@pytest.mark.parametrize("order", [9.0, 2.25, 1.0, 0.5])
def test_hidden_round_trip_is_identity(order: float) -> None:
    gen = torch.Generator().manual_seed(0)
    y = torch.randn(500, generator=gen, dtype=torch.float64) * torch.logspace(-3, 1, 500, dtype=torch.float64)
    y[::50] = 0.0
    torch.testing.assert_close(to_hidden(from_hidden(y, order), order), y, rtol=1e-12, atol=1e-30)
    x = torch.randn(500, generator=gen, dtype=torch.float64) * torch.logspace(-8, 2, 500, dtype=torch.float64)
    x[::50] = 0.0
    torch.testing.assert_close(from_hidden(to_hidden(x, order), order), x, rtol=1e-12, atol=1e-300)
    assert torch.equal(torch.sign(to_hidden(x, order)), torch.sign(x))


# 2. K = 1, M = 0, eps = 0 is the base optimizer with weight decay kappa.
@pytest.mark.parametrize("foreach", [True, False])
def test_order_one_reduces_to_torch_sgd(foreach: bool) -> None:
    a, b = _mlp(), _mlp()
    _train(a, torch.optim.SGD(a.parameters(), lr=0.05, momentum=0.9, weight_decay=0.01), 20)
    opt = ReWA(
        b.parameters(), lr=0.05, order=1.0, adapt_exp=0.0, eps=0.0, weight_decay=0.01, momentum=0.9,
        exclude=None, foreach=foreach,
    )  # fmt: skip
    _train(b, opt, 20)
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("foreach", [True, False])
def test_order_one_reduces_to_torch_adamw(foreach: bool) -> None:
    a, b = _mlp(), _mlp()
    _train(a, torch.optim.AdamW(a.parameters(), lr=3e-3, weight_decay=0.1), 20)
    opt = ReWA(
        b.parameters(), lr=3e-3, order=1.0, adapt_exp=0.0, weight_decay=0.1, base="adamw",
        exclude=None, foreach=foreach,
    )  # fmt: skip
    _train(b, opt, 20)
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-12, atol=1e-14)


def test_plain_group_is_base_optimizer_and_ewa_group_is_not() -> None:
    a, b = _mlp(), _mlp()
    _train(a, torch.optim.SGD(a.parameters(), lr=0.05, momentum=0.9), 10)
    _train(b, ReWA([{"params": b.parameters(), "rewa": False}], lr=0.05, weight_decay=0.0), 10)
    assert _same(a, b)
    c = _mlp()
    _train(c, ReWA(c.parameters(), lr=0.05, weight_decay=0.0), 10)
    assert not _same(a, c)


# 3. Effective update against autograd through x = sign(y)|y|^K (SGD base, momentum 0).
@pytest.mark.filterwarnings("ignore:.*adapt_exp:UserWarning")
@pytest.mark.parametrize("eps", [0.0, 0.3])
@pytest.mark.parametrize("order,adapt_exp", [(9.0, 2.0), (2.25, 1.25), (3.0, 0.0)])
def test_y_update_matches_autograd_reference(order: float, adapt_exp: float, eps: float) -> None:
    gen = torch.Generator().manual_seed(1)
    y0 = torch.randn(40, generator=gen, dtype=torch.float64) * 0.7
    y0[:5] = 0.0
    a = torch.randn(40, generator=gen, dtype=torch.float64)
    lr, kappa = 0.01, 0.2

    def f(x: torch.Tensor) -> torch.Tensor:
        return 0.5 * ((x - a) ** 2).sum() + (x**4).sum() / 4

    y = y0.clone().requires_grad_(True)
    x_of_y = torch.sign(y) * y.abs() ** order
    (gy,) = torch.autograd.grad(f(x_of_y), y)
    x = from_hidden(y0, order).requires_grad_(True)
    (gx,) = torch.autograd.grad(f(x), x)
    ay = y0.abs()
    if eps > 0:
        expected = lr * gy * ay**adapt_exp / (order * ay ** (order - 1) + eps) + lr * kappa * y0
    else:
        expected = lr * gx * ay**adapt_exp + lr * kappa * y0
    param = x.detach().clone().requires_grad_(True)
    opt = ReWA(
        [param], lr=lr, order=order, adapt_exp=adapt_exp, eps=eps, weight_decay=kappa, momentum=0.0,
        exclude=None,
    )  # fmt: skip
    param.grad = gx.clone()
    opt.step()
    update = y0 - to_hidden(param.detach(), order)
    assert torch.isfinite(update).all()
    nz = y0 != 0
    torch.testing.assert_close(update[nz], expected[nz], rtol=1e-9, atol=1e-13)
    if adapt_exp > 0:
        assert torch.equal(param.detach()[~nz], torch.zeros(5, dtype=torch.float64))


# 4. Zeros are absorbing with a fresh state; the sign trap.
@pytest.mark.parametrize("base", ["sgd", "adamw"])
def test_zero_coordinates_stay_zero_while_others_train(base: str) -> None:
    gen = torch.Generator().manual_seed(0)
    X = torch.randn(64, 10, generator=gen, dtype=torch.float64)
    target = X @ torch.randn(10, generator=gen, dtype=torch.float64)
    w = torch.randn(10, generator=gen, dtype=torch.float64)
    w[[2, 7]] = 0.0
    w0 = w.clone()
    w.requires_grad_(True)
    lr = 0.02 if base == "sgd" else 0.01
    opt = ReWA([w], lr=lr, weight_decay=1e-3, base=base, momentum=0.9, exclude=None)
    for _ in range(100):
        opt.zero_grad()
        (0.5 * ((X @ w - target) ** 2).mean()).backward()
        assert float(w.grad[2].abs()) > 0  # the gradient there is not zero: s = 0 does the work
        opt.step()
    assert float(w.detach()[2]) == 0.0 and float(w.detach()[7]) == 0.0
    moved = (w.detach() - w0).abs()
    assert bool((moved[[0, 1, 3, 4, 5, 6, 8, 9]] > 1e-4).all())


def test_sign_trap_keeps_wrong_sign_weight_at_zero() -> None:
    xs = torch.full((2,), -0.01, dtype=torch.float64, requires_grad=True)
    opt = ReWA(
        [{"params": [xs], "lr": 0.1}], lr=0.1, order=9.0, adapt_exp=2.0, weight_decay=0.0, momentum=0.0,
        exclude=None,
    )  # fmt: skip
    lrs = torch.tensor([0.1, 0.5], dtype=torch.float64)
    for _ in range(10_000):
        xs.grad = (xs.detach() - 1.0) * lrs / 0.1  # per-coordinate lr 0.1 and 0.5 via the gradient scale
        opt.step()
    x = xs.detach()
    assert bool((x <= 0).all()) and float(x.abs().max()) < 1e-12


# 5. 1-D fixed point and the lp link: x + kappa x^(p-1) = a.
def _roots(kappa: float, a: float, p: float) -> list[float]:
    h = lambda x: x + kappa * x ** (p - 1) - a  # noqa: E731
    xmin = (kappa * (1 - p)) ** (1 / (2 - p))  # argmin of x + kappa x^(p-1)
    if h(xmin) >= 0:
        return []
    return [scipy.optimize.brentq(h, 1e-300, xmin, xtol=1e-300), scipy.optimize.brentq(h, xmin, a + 1)]


def test_fixed_point_is_lp_stationary_point() -> None:
    order, adapt_exp = 9.0, 2.0
    p = (order + 1 - adapt_exp) / order
    cases = [(0.3, 1.0, [1e-6, 1e-4, 1e-2, 0.5, 2.0]), (0.1, 0.2, [1e-4, 1e-3, 1e-2, 0.1, 1.0])]
    cases.append((0.1, 0.05, [1e-3, 1e-2, 0.04, 1.0]))
    params, targets = [], []
    groups = []
    for kappa, a, starts in cases:
        x = torch.tensor(starts, dtype=torch.float64, requires_grad=True)
        params.append(x)
        targets.append(a)
        groups.append({"params": [x], "weight_decay": kappa})
    opt = ReWA(groups, lr=0.05, order=order, adapt_exp=adapt_exp, eps=0.0, momentum=0.0, exclude=None)
    assert opt.lp_equivalent(0) == pytest.approx({"p": 8 / 9, "lambda": 0.3 / (8 / 9)})
    for _ in range(6_000):  # converged well before (contraction >= 1.6 % per step at the roots)
        for x, a in zip(params, targets, strict=True):
            x.grad = x.detach() - a
        opt.step()
    for (kappa, a, starts), x in zip(cases, params, strict=True):
        roots = _roots(kappa, a, p)
        assert (len(roots) == 2) == (a != 0.05)
        for x0, xt in zip(starts, x.detach().tolist(), strict=True):
            if roots and x0 > roots[0]:
                assert xt == pytest.approx(roots[1], rel=1e-9)
                # stationarity of f(x) + lambda |x|^p with lambda = kappa / p
                lam = opt.lp_equivalent(cases.index((kappa, a, starts)))["lambda"]
                assert (xt - a) + lam * p * xt ** (p - 1) == pytest.approx(0.0, abs=1e-9)
            else:
                assert abs(xt) < 1e-12
    assert _roots(0.3, 1.0, p)[0] == pytest.approx(1.97e-5, rel=0.01)
    assert _roots(0.3, 1.0, p)[1] == pytest.approx(0.6872, rel=1e-4)


@pytest.mark.filterwarnings("ignore:.*adapt_exp:UserWarning")
def test_lp_equivalent_values() -> None:
    w = torch.ones(2, 2, requires_grad=True)
    assert ReWA([w], order=2.25, adapt_exp=1.25, weight_decay=0.1).lp_equivalent() == pytest.approx(
        {"p": 8 / 9, "lambda": 0.1 * 9 / 8}
    )
    assert ReWA([w], order=9.0, adapt_exp=1.0, weight_decay=0.1).lp_equivalent()["p"] == 1.0


# 6. Sparse linear regression recovers the support.
def test_sparse_linear_regression_finds_support() -> None:
    d, n = 2000, 400
    gen = torch.Generator().manual_seed(123)
    X = torch.randn(n, d, generator=gen, dtype=torch.float64)
    target = X[:, 0] + torch.randn(n, generator=gen, dtype=torch.float64)
    steps = 100 * (n // 25)
    # three seeds at once: row s of w is seed s's run (the update is elementwise, so rows are independent)
    gens = [torch.Generator().manual_seed(seed) for seed in range(3)]
    rows = [(torch.rand(d, generator=g, dtype=torch.float64) * 2 - 1) / math.sqrt(d) for g in gens]
    w = torch.stack(rows).requires_grad_(True)
    opt = ReWA([w], lr=0.03, weight_decay=0.1, momentum=0.9)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda t: 0.5 * (1 + math.cos(math.pi * t / steps)))
    for _ in range(100):
        perms = torch.stack([torch.randperm(n, generator=g) for g in gens]).view(3, -1, 25)
        for b in range(perms.shape[1]):
            idx = perms[:, b]
            opt.zero_grad()
            pred = torch.einsum("sbd,sd->sb", X[idx], w)
            (0.5 * ((pred - target[idx]) ** 2).mean(1).sum()).backward()
            opt.step()
            sched.step()
    x = w.detach().abs()
    assert x.argmax(1).tolist() == [0, 0, 0]
    assert bool(((x[:, 1:] <= 1e-4).double().mean(1) >= 0.95).all())
    assert opt.sparsity(1e-4) == pytest.approx(float((x <= 1e-4).double().mean()))


# 7. Bad input.
@pytest.mark.parametrize(
    "kwargs,name",
    [
        ({"order": 0.0}, "order"),
        ({"order": -2.0}, "order"),
        ({"adapt_exp": -0.1}, "adapt_exp"),
        ({"eps": -1e-3}, "eps"),
        ({"weight_decay": -1e-4}, "weight_decay"),
        ({"lr": float("inf")}, "lr"),  # lr = 0 is valid (torch's rule; conformance check zero_lr)
        ({"lr": -0.1}, "lr"),
        ({"momentum": 1.0}, "momentum"),
        ({"base": "adam"}, "base"),
        ({"betas": (0.9, 1.0)}, "betas"),
        ({"adam_eps": -1.0}, "adam_eps"),
        ({"exclude": "bias"}, "exclude"),
        ({"nonfinite": "ignore"}, "nonfinite"),
    ],
)
def test_invalid_hyperparameters_raise_naming_argument(kwargs: dict[str, object], name: str) -> None:
    w = torch.ones(2, 2, requires_grad=True)
    with pytest.raises(ValueError, match=rf"^{name}|\.{name}"):
        ReWA([w], **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=name):
        ReWA([{"params": [w], **kwargs}]) if name not in ("exclude", "nonfinite") else ReWA([w], **kwargs)  # type: ignore[arg-type]


def test_type_errors_and_range_warning() -> None:
    w = torch.ones(2, 2, requires_grad=True)
    with pytest.raises(TypeError, match="order"):
        ReWA([w], order="9")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="maximize"):
        ReWA([w], maximize=1)  # type: ignore[arg-type]
    with pytest.warns(UserWarning, match="adapt_exp"):
        ReWA([w], order=3.0, adapt_exp=2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ReWA([w], order=9.0, adapt_exp=2.0)


# Exclusion rule and zero-initialised parameters.
def test_exclude_default_moves_biases_to_plain_group() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.LayerNorm(8), torch.nn.Linear(8, 1))
    opt = ReWA(model.parameters(), lr=0.1, weight_decay=0.1)
    assert [g["rewa"] for g in opt.param_groups] == [True, False]
    assert [p.ndim for p in opt.param_groups[0]["params"]] == [2, 2]
    assert opt.param_groups[1]["weight_decay"] == 0.0 and len(opt.param_groups[1]["params"]) == 4
    # the LayerNorm shift starts at exactly 0 and still trains in the plain group
    model(torch.randn(16, 4)).square().mean().backward()
    opt.step()
    assert float(model[1].bias.detach().abs().max()) > 0
    custom = ReWA(model.parameters(), exclude=lambda p: p.shape == (8, 4))
    assert [len(g["params"]) for g in custom.param_groups] == [5, 1]
    assert len(ReWA(model.parameters(), exclude=None).param_groups) == 1


def test_all_zero_rewa_parameter_warns() -> None:
    with pytest.warns(UserWarning, match="never move"):
        ReWA([torch.zeros(3, 3, requires_grad=True)])


# 8. sparsity(), state_dict, foreach parity, maximize, closure.
def test_sparsity_matches_numpy_count() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(30, 20), torch.nn.Linear(20, 5))
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(torch.rand_like(p) < 0.5)
    opt = ReWA(model.parameters())
    weights = np.concatenate(
        [model[0].weight.detach().numpy().ravel(), model[1].weight.detach().numpy().ravel()]
    )
    for thr in (0.0, 1e-3, 0.05):
        assert opt.sparsity(thr) == pytest.approx(np.mean(np.abs(weights) <= thr))


@pytest.mark.parametrize("base", ["sgd", "adamw"])
def test_state_dict_round_trip_continues_identically(base: str) -> None:
    model = _mlp()
    opt = ReWA(model.parameters(), lr=0.01, base=base, weight_decay=1e-3, eps=1e-2)
    _train(model, opt, 5, seed=1)
    saved_model, saved = copy.deepcopy(model), copy.deepcopy(opt.state_dict())
    _train(model, opt, 5, seed=2)
    opt2 = ReWA(saved_model.parameters(), lr=1.0, base=base, weight_decay=0.5)
    opt2.load_state_dict(saved)
    assert opt2.param_groups[0]["weight_decay"] == 1e-3
    _train(saved_model, opt2, 5, seed=2)
    assert _same(model, saved_model)


@pytest.mark.parametrize("base", ["sgd", "adamw"])
@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_foreach_matches_per_tensor(base: str, eps: float) -> None:
    a, b = _mlp(), _mlp()
    kw = {"lr": 0.01, "base": base, "eps": eps, "weight_decay": 1e-2, "maximize": False}
    _train(a, ReWA(a.parameters(), foreach=True, **kw), 15)  # type: ignore[arg-type]
    _train(b, ReWA(b.parameters(), foreach=False, **kw), 15)  # type: ignore[arg-type]
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-12, atol=1e-12)


def test_maximize_equals_minimising_the_negative() -> None:
    a, b = _mlp(), _mlp()
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(16, 5, generator=gen, dtype=torch.float64)
    oa = ReWA(a.parameters(), lr=0.01, maximize=True)
    ob = ReWA(b.parameters(), lr=0.01)
    for _ in range(5):
        oa.zero_grad()
        (-(a(x) ** 2).mean()).backward()
        oa.step()
        ob.zero_grad()
        (a(x).detach().sum() * 0 + (b(x) ** 2).mean()).backward()
        ob.step()
    assert _same(a, b)


def test_closure_evaluated_under_grad_and_float32_follows_dtype() -> None:
    w = torch.tensor([[0.5, -0.2]], requires_grad=True)
    opt = ReWA([w], lr=0.1)

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = ((w - 1.0) ** 2).sum()
        loss.backward()
        return loss

    with torch.no_grad():
        loss = opt.step(closure)
    assert loss.requires_grad and w.dtype == torch.float32
    assert float(w.detach()[0, 0]) > 0.5
