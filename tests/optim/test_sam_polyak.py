"""SAMPolyak (SAM / USAM with a Polyak step): the checks of ../shared/papers/sam-polyak.md (tests 1-9)."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable

import pytest
import torch

from optarium.optim._nonfinite import NonFiniteGradientError
from optarium.optim.sam_polyak import SAM_SPS, SAMPolyak
from optarium.problems.least_squares import conditioned_least_squares

F64 = torch.float64


def _closure(opt: torch.optim.Optimizer, loss_fn: Callable[[], torch.Tensor]) -> Callable[[], torch.Tensor]:
    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        return loss

    return closure


def _mlp(seed: int = 0, dtype: torch.dtype = F64, out: int = 1) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, out)).to(dtype)


def _batch(gen: torch.Generator, dtype: torch.dtype = F64) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(32, 6, generator=gen, dtype=dtype)
    return x, torch.sin(x.sum(1, keepdim=True))


def _quadratic(seed: int, d: int = 20) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    q, _ = torch.linalg.qr(torch.randn(d, d, generator=gen, dtype=F64))
    h = q @ torch.diag(torch.logspace(-1, 0, d, dtype=F64)) @ q.T
    return h, torch.randn(d, generator=gen, dtype=F64)


# 1. rho = 0 is SPS_max: gamma = min((f - l*) / ||g||^2, gamma_b), x+ = x - gamma g.
@pytest.mark.parametrize("gamma_max", [math.inf, 0.7])
def test_rho_zero_is_sps_max(seed: int, gamma_max: float) -> None:
    h, x_star = _quadratic(seed, d=10)
    x = torch.zeros(10, dtype=F64, requires_grad=True)
    opt = SAMPolyak([x], rho=0.0, f_star=-0.25, gamma_max=gamma_max, weight_decay=0.0)

    def f(z: torch.Tensor) -> torch.Tensor:
        return 0.5 * (z - x_star) @ h @ (z - x_star)

    for _ in range(15):
        x0 = x.detach().clone()
        g = h @ (x0 - x_star)
        gamma = min(float((f(x0) + 0.25) / (g @ g)), gamma_max)
        opt.step(_closure(opt, lambda: f(x)))
        assert opt.param_groups[0]["lr"] == pytest.approx(gamma, rel=1e-12)
        torch.testing.assert_close(x.detach(), x0 - gamma * g, rtol=1e-13, atol=1e-15)


# 2. The ascent point: e - x = rho g (lambda 0), rho g / ||g|| (lambda 1), global norm over all tensors.
@pytest.mark.parametrize("lambd", [0.0, 0.3, 1.0])
def test_perturbation_formula(lambd: float) -> None:
    a = torch.tensor([0.5, -1.0, 2.0], dtype=F64, requires_grad=True)
    b = torch.tensor([[1.5, 0.25]], dtype=F64, requires_grad=True)
    opt = SAMPolyak([{"params": [a]}, {"params": [b]}], rho=0.2, lambd=lambd)
    seen: list[list[torch.Tensor]] = []

    def closure() -> torch.Tensor:
        seen.append([a.detach().clone(), b.detach().clone()])
        opt.zero_grad()
        loss = (a**4).sum() / 4 + (b**2).sum() / 2
        loss.backward()
        return loss

    x_a, x_b = a.detach().clone(), b.detach().clone()
    g_a, g_b = x_a**3, x_b
    norm = torch.sqrt((g_a**2).sum() + (g_b**2).sum())
    scale = 0.2 * ((1 - lambd) + lambd / norm)
    opt.step(closure)
    assert len(seen) == 2 and torch.equal(seen[0][0], x_a) and torch.equal(seen[0][1], x_b)
    torch.testing.assert_close(seen[1][0] - x_a, scale * g_a, rtol=1e-14, atol=1e-15)
    torch.testing.assert_close(seen[1][1] - x_b, scale * g_b, rtol=1e-14, atol=1e-15)


# 3. Deterministic strongly convex quadratic, USAM-SPS: linear convergence to 1e-10 within 100 iterations.
@pytest.mark.parametrize("rho_l", [0.5, 1.0])
def test_usam_sps_linear_convergence_on_quadratic(seed: int, rho_l: float) -> None:
    h, x_star = _quadratic(seed)
    x = torch.zeros(20, dtype=F64, requires_grad=True)
    opt = SAMPolyak([x], rho=rho_l / 1.0, lambd=0.0, f_star=0.0, gamma_max=math.inf, weight_decay=0.0)

    def f() -> torch.Tensor:
        d = x - x_star
        return 0.5 * d @ h @ d

    f0 = float(f().detach())
    errs = []
    for _ in range(100):
        opt.step(_closure(opt, f))
        errs.append(float(f().detach()) / f0)
        if errs[-1] <= 1e-10:
            break
    assert errs[-1] <= 1e-10, f"relative error {errs[-1]:.2e} after 100 iterations"
    y = torch.log(torch.tensor(errs, dtype=F64))
    t = torch.arange(len(errs), dtype=F64)
    slope = float(((t - t.mean()) * (y - y.mean())).sum() / ((t - t.mean()) ** 2).sum())
    resid = y - y.mean() - slope * (t - t.mean())
    r2 = 1 - float((resid**2).sum() / ((y - y.mean()) ** 2).sum())
    assert slope < 0 and r2 > 0.95, (slope, r2)


# 4. Interpolated least squares, stochastic USAM-SPS with rho = 0.5 / L_max: converges to x*.
def test_usam_sps_stochastic_interpolated_least_squares(seed: int) -> None:
    prob = conditioned_least_squares(100, 20, 3.0, 1.0, L=1.0, seed=seed)
    x = torch.zeros(20, dtype=F64, requires_grad=True)
    opt = SAMPolyak([x], rho=0.5 / prob.L_max, lambd=0.0, gamma_max=math.inf, weight_decay=0.0)
    gen = torch.Generator().manual_seed(1000 + seed)
    for _ in range(2000):
        idx = torch.randperm(100, generator=gen)[:10]
        opt.step(_closure(opt, lambda idx=idx: prob.loss(x, idx)))
    rel = float(torch.linalg.vector_norm(x.detach() - prob.x_star) / torch.linalg.vector_norm(prob.x_star))
    assert rel <= 1e-6, rel


# 5 and 6. 0 <= gamma <= gamma_b; a negative gap leaves x exactly unchanged (bit-exact restore).
def test_gamma_in_range_and_negative_gap_freezes_bit_exactly() -> None:
    model = _mlp(1)
    opt = SAMPolyak(model.parameters(), rho=0.1, lambd=1.0, gamma_max=0.5)
    gen = torch.Generator().manual_seed(2)
    gammas = []
    for _ in range(30):
        x, y = _batch(gen)
        opt.step(_closure(opt, lambda x=x, y=y: ((model(x) - y) ** 2).mean()))
        gammas.append(opt.param_groups[0]["lr"])
    assert all(0.0 <= g <= 0.5 for g in gammas)
    assert any(0.0 < g < 0.5 for g in gammas), "the Polyak ratio was never the active branch"

    # A negative gap with the loss above f_star (the sharpness term exceeds the loss gap): gamma = 0 and x
    # is restored bit-exactly. f_star sits just below this batch's loss at the ascent point, measured on a
    # copy that takes the same step.
    before = [p.detach().clone() for p in model.parameters()]
    x, y = _batch(gen)
    probe = copy.deepcopy((model, opt))
    probe[1].step(_closure(probe[1], lambda: ((probe[0](x) - y) ** 2).mean()))
    loss_e = float(probe[1].perturbed_loss)
    opt.step(_closure(opt, lambda: ((model(x) - y) ** 2).mean()), f_star=loss_e - 1e-12)
    assert opt.param_groups[0]["lr"] == 0.0
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), before, strict=True))


def test_loss_below_f_star_raises_and_leaves_x() -> None:
    """A loss below its bound (here the default 0 with a loss shifted by -10) must not freeze silently."""
    model = _mlp(1)
    opt = SAMPolyak(model.parameters(), rho=0.1)
    x, y = _batch(torch.Generator().manual_seed(3))
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.raises(ValueError, match=r"^f_star: the loss at the ascent point"):
        opt.step(_closure(opt, lambda: ((model(x) - y) ** 2).mean() - 10.0))
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), before, strict=True))
    opt.step(_closure(opt, lambda: ((model(x) - y) ** 2).mean() - 10.0), f_star=-10.0)  # the right bound
    assert opt.param_groups[0]["lr"] > 0.0
    assert not all(torch.equal(p, q) for p, q in zip(model.parameters(), before, strict=True))


def _reference_step(
    xs: list[torch.Tensor], loss_fn: Callable[[list[torch.Tensor]], torch.Tensor], hp: dict[str, float]
) -> tuple[list[torch.Tensor], float]:
    """The update rule written out directly (float64, autograd.grad on explicit tensors)."""
    xs = [x.detach().requires_grad_() for x in xs]
    gx = torch.autograd.grad(loss_fn(xs), xs)
    norm = max(float(torch.sqrt(sum((g**2).sum() for g in gx))), 1e-12)
    r = [hp["rho"] * ((1 - hp["lambd"]) + hp["lambd"] / norm) * g for g in gx]
    es = [(x + ri).detach().requires_grad_() for x, ri in zip(xs, r, strict=True)]
    fe = loss_fn(es)
    ge = torch.autograd.grad(fe, es)
    gap = float(fe.detach()) - hp["f_star"] - sum(float((g * ri).sum()) for g, ri in zip(ge, r, strict=True))
    den = max(sum(float((g**2).sum()) for g in ge), 1e-12)
    gamma = min(max(gap, 0.0) / (hp["c"] * den), hp["gamma_max"])
    new = [(x - gamma * (g + hp["weight_decay"] * x)).detach() for x, g in zip(xs, ge, strict=True)]
    return new, gamma


# 6. Agreement with a double-precision reference implementation of the rule.
@pytest.mark.parametrize("foreach", [True, False])
def test_matches_double_precision_reference(foreach: bool) -> None:
    model = _mlp(3)
    hp = {"rho": 0.07, "lambd": 0.6, "f_star": 0.01, "gamma_max": 2.0, "c": 1.5, "weight_decay": 1e-2}
    opt = SAMPolyak(model.parameters(), foreach=foreach, **hp)
    ref = [p.detach().clone() for p in model.parameters()]
    gen = torch.Generator().manual_seed(4)
    gammas = []
    for _ in range(10):
        x, y = _batch(gen)

        def loss_of(ps: list[torch.Tensor], x: torch.Tensor = x, y: torch.Tensor = y) -> torch.Tensor:
            h = torch.tanh(x @ ps[0].T + ps[1])
            return ((h @ ps[2].T + ps[3] - y) ** 2).mean()

        ref, gamma = _reference_step(ref, loss_of, hp)
        opt.step(_closure(opt, lambda x=x, y=y: ((model(x) - y) ** 2).mean()))
        assert opt.param_groups[0]["lr"] == pytest.approx(gamma, rel=1e-10)
        gammas.append(gamma)
        for p, q in zip(model.parameters(), ref, strict=True):
            torch.testing.assert_close(p.detach(), q, rtol=1e-11, atol=1e-13)
    assert any(0 < g < 2.0 for g in gammas)


# 7. Side by side with the authors' package (sam-sps 1.0.0).
def _copy_into(dst: torch.nn.Module, src: torch.nn.Module) -> None:
    with torch.no_grad():
        for p, q in zip(dst.parameters(), src.parameters(), strict=True):
            p.copy_(q)


@pytest.mark.parametrize("dtype", [torch.float32, F64])
@pytest.mark.parametrize("lambd", [0.0, 1.0])
def test_same_steps_as_sam_sps_package_over_50_steps(dtype: torch.dtype, lambd: float) -> None:
    """From the same iterate, each of 50 steps gives the package's gamma_t, f(e_t) and x_{t+1}."""
    sam_sps = pytest.importorskip("sam_sps", reason="the reference package sam-sps==1.0.0 is not installed")
    theirs, ours = _mlp(0, dtype), _mlp(0, dtype)
    a = sam_sps.SAM_SPS(theirs.parameters(), rho=0.05, lambd=lambd, gamma_b=1.0, weight_decay=5e-4)
    b = SAMPolyak(ours.parameters(), rho=0.05, lambd=lambd, gamma_max=1.0, weight_decay=5e-4)
    gen = torch.Generator().manual_seed(1)
    active = 0
    for _ in range(50):
        _copy_into(ours, theirs)
        x, y = _batch(gen, dtype)

        def ca(x: torch.Tensor = x, y: torch.Tensor = y) -> torch.Tensor:
            loss = ((theirs(x) - y) ** 2).mean()
            loss.backward()
            return loss

        def cb(x: torch.Tensor = x, y: torch.Tensor = y) -> torch.Tensor:
            loss = ((ours(x) - y) ** 2).mean()
            loss.backward()
            return loss

        loss_e = a.step(ca)
        b.step(cb)
        ga, gb = a.param_groups[0]["lr"], b.param_groups[0]["lr"]
        active += 0 < ga < 1.0
        assert gb == pytest.approx(ga, rel=1e-5)
        assert float(b.perturbed_loss) == pytest.approx(float(loss_e.detach()), rel=1e-5)
        for p, q in zip(ours.parameters(), theirs.parameters(), strict=True):
            torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-5, atol=1e-6)
    assert active >= 20, "the Polyak ratio (not the cap) should decide most steps"


def test_same_trajectory_as_sam_sps_package_with_its_defaults() -> None:
    """50 free-running steps with the package's defaults (rho 0.1, SAM, cap 1, weight decay 5e-4)."""
    sam_sps = pytest.importorskip("sam_sps", reason="the reference package sam-sps==1.0.0 is not installed")
    theirs, ours = _mlp(0, torch.float32, out=3), _mlp(0, torch.float32, out=3)
    a, b = sam_sps.SAM_SPS(theirs.parameters()), SAMPolyak(ours.parameters())
    gen = torch.Generator().manual_seed(1)
    for _ in range(50):
        x, y = torch.randn(32, 6, generator=gen), torch.randint(0, 3, (32,), generator=gen)

        def ca(x: torch.Tensor = x, y: torch.Tensor = y) -> torch.Tensor:
            loss = torch.nn.functional.cross_entropy(theirs(x), y)
            loss.backward()
            return loss

        a.step(ca)
        b.step(_closure(b, lambda x=x, y=y: torch.nn.functional.cross_entropy(ours(x), y)))
        assert b.param_groups[0]["lr"] == pytest.approx(a.param_groups[0]["lr"], rel=1e-5)
    for p, q in zip(ours.parameters(), theirs.parameters(), strict=True):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-5, atol=1e-6)


# 8. Errors and degenerate gradients.
def test_step_without_closure_raises_naming_closure() -> None:
    x = torch.zeros(2, requires_grad=True)
    with pytest.raises(ValueError, match="closure"):
        SAMPolyak([x]).step()


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"rho": -0.1}, "rho"),
        ({"rho": math.inf}, "rho"),
        ({"gamma_max": 0.0}, "gamma_max"),
        ({"gamma_max": -1.0}, "gamma_max"),
        ({"lambd": -0.1}, "lambd"),
        ({"lambd": 1.5}, "lambd"),
        ({"c": 0.0}, "c"),
        ({"weight_decay": -1e-3}, "weight_decay"),
        ({"f_star": math.nan}, "f_star"),
        ({"nonfinite": "ignore"}, "nonfinite"),
    ],
)
def test_invalid_hyperparameters_raise_naming_the_argument(kwargs: dict[str, float], name: str) -> None:
    with pytest.raises(ValueError, match=rf"^{name}"):
        SAMPolyak([torch.zeros(2, requires_grad=True)], **kwargs)


def test_wrong_types_and_group_errors() -> None:
    x = torch.zeros(2, requires_grad=True)
    with pytest.raises(TypeError, match=r"^rho"):
        SAMPolyak([x], rho="0.1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^foreach"):
        SAMPolyak([x], foreach=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^lambd"):
        SAMPolyak([{"params": [x], "lambd": 2.0}])
    with pytest.raises(ValueError, match=r"^f_star"):
        SAMPolyak([{"params": [x]}, {"params": [torch.zeros(1, requires_grad=True)], "f_star": 1.0}])
    opt = SAMPolyak([x])
    with pytest.raises(ValueError, match=r"^f_star"):
        opt.step(_closure(opt, lambda: (x**2).sum()), f_star=math.inf)


def test_zero_gradient_at_x_or_at_e_gives_no_nan() -> None:
    # zero gradient at x_t: f = 0.5 max(x - 1, 0)^2 at x = 0
    x = torch.zeros(3, dtype=F64, requires_grad=True)
    opt = SAMPolyak([x], rho=0.5, lambd=1.0, weight_decay=0.0)
    opt.step(_closure(opt, lambda: 0.5 * (torch.clamp(x - 1, min=0) ** 2).sum()))
    assert torch.isfinite(x).all() and torch.equal(x.detach(), torch.zeros(3, dtype=F64))
    assert math.isfinite(opt.param_groups[0]["lr"])
    # zero gradient at e_t: f = 0.5 min(z, 1)^2 from z = 0.5 with a normalised step of 1 lands at e = 1.5
    z = torch.full((1,), 0.5, dtype=F64, requires_grad=True)
    opt = SAMPolyak([z], rho=1.0, lambd=1.0, gamma_max=3.0, weight_decay=0.0)
    opt.step(_closure(opt, lambda: 0.5 * (torch.clamp(z, max=1.0) ** 2).sum()))
    assert torch.equal(z.detach(), torch.full((1,), 0.5, dtype=F64))
    assert opt.param_groups[0]["lr"] == 3.0  # the clamped denominator sends the ratio to the cap
    # a tiny gradient: ||g||^2 = 1e-14 is clamped to 1e-12, so gamma = f / 1e-12 (SPS would give 0.5)
    w = torch.full((1,), 1e-7, dtype=F64, requires_grad=True)
    opt = SAMPolyak([w], rho=0.0, gamma_max=math.inf, weight_decay=0.0)
    opt.step(_closure(opt, lambda: 0.5 * (w**2).sum()))
    assert opt.param_groups[0]["lr"] == pytest.approx(0.5e-14 / 1e-12, rel=1e-12)


# 9. The lambda = 1 stall (SAM-SPS freezes at a distance of order rho); USAM-SPS converges.
def test_sam_sps_stalls_where_usam_sps_converges() -> None:
    prob = conditioned_least_squares(100, 100, 10.0, 1.0, L=1.0, seed=0)
    result = {}
    for lambd in (1.0, 0.0):
        x = torch.zeros(100, dtype=F64, requires_grad=True)
        opt = SAMPolyak([x], rho=0.1, lambd=lambd, gamma_max=math.inf, weight_decay=0.0)
        zero = 0
        for _ in range(2000 if lambd == 1.0 else 500):  # USAM-SPS is below 1e-12 after 500 already
            opt.step(_closure(opt, lambda x=x: prob.loss(x)))
            zero += opt.param_groups[0]["lr"] == 0.0
        result[lambd] = (zero, float(prob.gap(x.detach())))
    assert result[1.0][0] > 1000 and result[1.0][1] > 1e-4, result
    assert result[0.0][1] < 1e-10, result


# House rules: foreach parity, groups, state_dict, scheduler, grad None, non-finite, dtype.
def _train(model: torch.nn.Module, opt: SAMPolyak, steps: int, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    dtype = next(model.parameters()).dtype
    for _ in range(steps):
        x, y = _batch(gen, dtype)
        opt.step(_closure(opt, lambda x=x, y=y: ((model(x) - y) ** 2).mean()))


def test_foreach_matches_per_tensor_with_groups_and_weight_decay() -> None:
    models = [_mlp(5), _mlp(5)]
    for model, foreach in zip(models, (True, False), strict=True):
        groups = [
            {"params": list(model[0].parameters()), "rho": 0.08, "weight_decay": 1e-2},
            {"params": list(model[2].parameters()), "lambd": 0.0, "c": 2.0},
        ]
        _train(model, SAMPolyak(groups, rho=0.05, gamma_max=3.0, foreach=foreach), 20, seed=6)
    for p, q in zip(models[0].parameters(), models[1].parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-12, atol=1e-12)


def test_per_group_c_and_gamma_max_scale_the_one_polyak_ratio() -> None:
    model = _mlp(7)
    groups = [{"params": list(model[0].parameters())}, {"params": list(model[2].parameters()), "c": 4.0}]
    opt = SAMPolyak(groups, rho=0.05, gamma_max=math.inf)
    _train(model, opt, 1, seed=8)
    g0, g1 = (g["lr"] for g in opt.param_groups)
    assert g0 > 0 and g1 == pytest.approx(g0 / 4.0, rel=1e-14)


def test_state_dict_round_trip_and_hyperparameters_travel() -> None:
    model = _mlp(0)
    opt = SAMPolyak(model.parameters(), rho=0.03, lambd=0.5, gamma_max=2.0, weight_decay=1e-3)
    _train(model, opt, 5, seed=1)
    saved_model, saved = copy.deepcopy(model), copy.deepcopy(opt.state_dict())
    _train(model, opt, 5, seed=2)
    opt2 = SAMPolyak(saved_model.parameters())  # defaults differ; the state dict restores them
    opt2.load_state_dict(saved)
    assert opt2.param_groups[0]["rho"] == 0.03 and opt2.param_groups[0]["lambd"] == 0.5
    _train(saved_model, opt2, 5, seed=2)
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), saved_model.parameters(), strict=True))
    bad = copy.deepcopy(saved)
    bad["param_groups"][0]["rho"] = -1.0
    with pytest.raises(ValueError, match="rho"):
        opt2.load_state_dict(bad)


def test_lr_scheduler_attaches_and_lr_reports_gamma() -> None:
    a, b = _mlp(2), _mlp(2)
    opt_a = SAMPolyak(a.parameters(), rho=0.05)
    opt_b = SAMPolyak(b.parameters(), rho=0.05)
    sched = torch.optim.lr_scheduler.LambdaLR(opt_b, lambda k: 0.1 ** (k + 1))
    gen_a, gen_b = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    for _ in range(5):
        xa, ya = _batch(gen_a)
        xb, yb = _batch(gen_b)
        opt_a.step(_closure(opt_a, lambda xa=xa, ya=ya: ((a(xa) - ya) ** 2).mean()))
        opt_b.step(_closure(opt_b, lambda xb=xb, yb=yb: ((b(xb) - yb) ** 2).mean()))
        assert opt_b.param_groups[0]["lr"] == opt_a.param_groups[0]["lr"] > 0
        sched.step()
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))


def test_step_returns_loss_at_x_and_keeps_loss_at_e() -> None:
    x = torch.tensor([1.0, -2.0], dtype=F64, requires_grad=True)
    opt = SAM_SPS([x], rho=0.1, lambd=0.0, weight_decay=0.0)
    loss = opt.step(_closure(opt, lambda: (x**2).sum()))
    assert float(loss.detach()) == 5.0
    assert float(opt.perturbed_loss) == pytest.approx(5.0 * 1.2**2, rel=1e-14)


def test_closure_without_zero_grad_is_fine() -> None:
    """Each pass starts from cleared gradients (as in the package), so accumulation cannot leak in."""
    a, b = _mlp(4), _mlp(4)
    opt_a, opt_b = SAMPolyak(a.parameters()), SAMPolyak(b.parameters())
    x, y = _batch(torch.Generator().manual_seed(0))

    def lazy() -> torch.Tensor:
        loss = ((b(x) - y) ** 2).mean()
        loss.backward()
        return loss

    opt_a.step(_closure(opt_a, lambda: ((a(x) - y) ** 2).mean()))
    opt_b.step(lazy)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))


def test_grad_none_parameter_untouched_and_float32_kept() -> None:
    used = torch.randn(4, requires_grad=True)
    unused = torch.randn(4, requires_grad=True)
    before = unused.detach().clone()
    opt = SAMPolyak([used, unused], rho=0.01, lambd=0.0)
    for _ in range(3):
        opt.step(_closure(opt, lambda: (used**2).sum()))
    assert unused.grad is None and torch.equal(unused.detach(), before)
    assert len(opt.state) == 0 and used.dtype == torch.float32


def test_nonfinite_at_the_ascent_point_restores_x() -> None:
    def f(z: torch.Tensor) -> torch.Tensor:  # finite at z = 1, NaN once z > 1.5
        return torch.where(z > 1.5, z * math.nan, z**2).sum()

    z = torch.ones(2, dtype=F64, requires_grad=True)
    opt = SAMPolyak([z], rho=1.0, lambd=1.0)
    with pytest.raises(NonFiniteGradientError):
        opt.step(_closure(opt, lambda: f(z)))
    assert torch.equal(z.detach(), torch.ones(2, dtype=F64))
    opt = SAMPolyak([z], rho=1.0, lambd=1.0, nonfinite="skip")
    opt.step(_closure(opt, lambda: f(z)))
    assert opt.skipped_steps == 1 and torch.equal(z.detach(), torch.ones(2, dtype=F64))
