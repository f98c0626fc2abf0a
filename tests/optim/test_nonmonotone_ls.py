"""NonmonotoneLineSearchGD and AdGD: the spec's tests 1-7 (eos-large-step), float64, exact references."""

from __future__ import annotations

import copy
import itertools
import math
import pickle

import pytest
import torch

from optarium.optim import AdGD, NonFiniteGradientError, NonmonotoneLineSearchGD

torch.set_num_threads(1)


def _closure(opt: torch.optim.Optimizer, fn):  # type: ignore[no-untyped-def]
    def closure() -> torch.Tensor:
        loss = fn()
        if torch.is_grad_enabled():
            opt.zero_grad()
            loss.backward()
        return loss

    return closure


def _quad_1d(L: float, x0: float, **kw):  # type: ignore[no-untyped-def]
    x = torch.tensor([x0], dtype=torch.float64, requires_grad=True)
    opt = NonmonotoneLineSearchGD([x], **kw)
    return x, opt, _closure(opt, lambda: 0.5 * L * (x**2).sum())


def _mlp_problem(seed: int = 0):  # type: ignore[no-untyped-def]
    gen = torch.Generator().manual_seed(seed)
    X = torch.randn(40, 5, generator=gen, dtype=torch.float64)
    Y = torch.sin(X @ torch.randn(5, 2, generator=gen, dtype=torch.float64))
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2)).double()
    return model, X, Y


# -------------------------------------------------------------------------------------------- test 1
def test_xi_zero_is_armijo_and_accepted_steps_satisfy_it() -> None:
    """xi = 0: C_k = f(x_k); every accepted step satisfies Armijo within 1e-12 (both searches)."""
    for mode in ("equality", "backtracking"):
        model, X, Y = _mlp_problem(1)
        opt = NonmonotoneLineSearchGD(model.parameters(), xi=0.0, c=0.3, mode=mode)
        closure = _closure(opt, lambda model=model, X=X, Y=Y: ((model(X) - Y) ** 2).mean())
        for _ in range(15):
            f_k = float(closure().detach())
            loss = float(opt.step(closure).detach())
            assert loss == pytest.approx(f_k, abs=1e-15)
            assert opt.reference == pytest.approx(f_k, rel=0, abs=1e-15)  # C_k = f(x_k)
            g2 = sum(float((p.grad**2).sum()) for p in model.parameters())
            with torch.no_grad():
                f_new = float(((model(X) - Y) ** 2).mean())
            eta = opt.last_step_size
            assert eta > 0
            assert f_new <= f_k - 0.3 * eta * g2 + 1e-12


def test_backtracking_takes_the_first_acceptable_trial() -> None:
    """Backtracking from the Polyak step: eta = eta_init * 0.5^j with the smallest such j."""
    L, x0, c, c_p = 3.0, 1.7, 0.5, 0.1
    _, opt, closure = _quad_1d(L, x0, xi=0.0, c=c, c_p=c_p, mode="backtracking", eta_max=100.0)
    opt.step(closure)
    eta_init = (0.5 * L * x0**2) / (c_p * (L * x0) ** 2)  # = 1 / (2 c_p L)
    eta_star = 2 * (1 - c) / L  # the largest acceptable step
    j = math.ceil(math.log(eta_init / eta_star, 2))
    assert opt.last_step_size == pytest.approx(eta_init * 0.5**j, rel=1e-15)
    assert opt.state_counters["last_evals"] == j + 1


# -------------------------------------------------------------------------------------------- test 2
@pytest.mark.parametrize("r", [None, 4.0, 2.0])
@pytest.mark.parametrize(("max_evals", "tol"), [(30, 1e-6), (60, 1e-10)])
def test_equality_root_on_a_quadratic(r: float | None, max_evals: int, tol: float) -> None:
    """f = L x^2 / 2, reference C = r f(x_k): t = eta L solves (1 - t)^2 = r - 2 c t."""
    L, x0, c = 3.0, 1.7, 0.5
    x, opt, closure = _quad_1d(L, x0, xi=0.0, c=c, max_evals=max_evals, eta_max=100.0)
    f0 = 0.5 * L * x0**2
    opt.step(closure, reference=None if r is None else r * f0)
    rr = 1.0 if r is None else r
    t = (1 - c) + math.sqrt((1 - c) ** 2 + rr - 1)
    eta_star = t / L
    if r is None:
        assert eta_star * L == pytest.approx(2 * (1 - c))
    elif r > 1 + 4 * c:
        assert eta_star * L > 2
    else:
        assert 2 * (1 - c) < eta_star * L < 2
    eta = opt.last_step_size
    assert eta <= eta_star
    assert (eta_star - eta) / eta_star <= tol
    assert opt.state_counters["last_evals"] <= max_evals
    assert float(x.detach()) == pytest.approx(x0 * (1 - eta * L), rel=1e-14)


def test_equality_expands_to_the_cap_when_everything_is_accepted() -> None:
    """A trial accepted all the way up stops at min(eta_max, cap(k))."""
    _, opt, closure = _quad_1d(1.0, 1.0, xi=0.0, c=0.5, eta_max=10.0, eta_cap_schedule=lambda k: 0.3)
    opt.step(closure)  # every eta <= 1 is acceptable (eta* = 1): the cap 0.3 binds
    assert opt.last_step_size == 0.3
    _, opt, closure = _quad_1d(1.0, 1.0, xi=0.0, c=0.5, init="previous", eta_max=0.4, c_p=100.0)
    opt.step(closure)
    assert opt.last_step_size == 0.4


# -------------------------------------------------------------------------------------------- test 3
def test_zhang_hager_reference_between_min_and_max() -> None:
    """min_{j<=k} f_j <= C_k <= max_{j<=k} f_j, and C_k is the running mean for xi = 1."""
    for xi in (1.0, 0.7):
        model, X, Y = _mlp_problem(2)
        opt = NonmonotoneLineSearchGD(model.parameters(), xi=xi)
        closure = _closure(opt, lambda model=model, X=X, Y=Y: ((model(X) - Y) ** 2).mean())
        fs = []
        for _ in range(25):
            fs.append(float(opt.step(closure).detach()))
            assert min(fs) - 1e-14 <= opt.reference <= max(fs) + 1e-14
            if xi == 1.0:
                assert opt.reference == pytest.approx(sum(fs) / len(fs), rel=1e-12)
        assert len(set(fs)) > 1


def test_nonmonotone_search_takes_large_steps_and_loss_goes_up_sometimes() -> None:
    """xi = 1 with the equality search on an MLP: some steps raise the loss, and the loss still decreases."""
    model, X, Y = _mlp_problem(3)
    opt = NonmonotoneLineSearchGD(model.parameters(), xi=1.0)
    closure = _closure(opt, lambda: ((model(X) - Y) ** 2).mean())
    fs = [float(opt.step(closure).detach()) for _ in range(60)]
    ups = sum(b > a for a, b in itertools.pairwise(fs))
    assert ups >= 3
    assert fs[-1] < 0.5 * fs[0]


# -------------------------------------------------------------------------------------------- test 4
# The sharpness estimator (Lanczos on HVPs) is tested in tests/experiments/test_eos_large_step.py (the
# experiment's warm-started meter) and in the diagnostics module's own tests.


# -------------------------------------------------------------------------------------------- test 5
def test_adgd_converges_on_logistic_regression() -> None:
    """Non-separable logistic regression (overlapping Gaussians, 10 % flipped labels): ||grad|| < 1e-6."""
    gen = torch.Generator().manual_seed(0)
    n = 200
    y = (torch.arange(n) % 2).to(torch.float64)
    X = torch.randn(n, 3, generator=gen, dtype=torch.float64) + (2 * y[:, None] - 1) * 0.7
    X = torch.cat([X, torch.ones(n, 1, dtype=torch.float64)], 1)
    flip = torch.rand(n, generator=gen) < 0.1
    y = torch.where(flip, 1 - y, y)
    w = torch.zeros(4, dtype=torch.float64, requires_grad=True)
    opt = AdGD([w], lr=1e-6)
    closure = _closure(opt, lambda: torch.nn.functional.binary_cross_entropy_with_logits(X @ w, y))
    steps = 0
    while steps < 5000:
        opt.step(closure)
        steps += 1
        if float(w.grad.norm()) < 1e-6:
            break
    assert float(w.grad.norm()) < 1e-6, steps
    assert opt.state_counters["backward"] == steps


def test_adgd_step_rule_by_hand() -> None:
    """The second step equals ||x1 - x0|| / (a ||g1 - g0||) (theta_0 = inf), on a 1-D quadratic."""
    L = 4.0
    for a in (2.0, 0.5):
        x = torch.tensor([1.0], dtype=torch.float64, requires_grad=True)
        opt = AdGD([x], lr=0.01, a=a)
        closure = _closure(opt, lambda x=x: 0.5 * L * (x**2).sum())
        opt.step(closure)
        assert float(x.detach()) == pytest.approx(1 - 0.01 * L)
        opt.step(closure)
        assert opt.last_step_size == pytest.approx(1 / (a * L), rel=1e-12)
        opt.step(closure)  # third: min(sqrt(1 + theta_1) eta_1, 1 / (a L))
        theta = (1 / (a * L)) / 0.01
        assert opt.last_step_size == pytest.approx(min(math.sqrt(1 + theta) / (a * L), 1 / (a * L)))


# -------------------------------------------------------------------------------------------- test 6
def test_counters_are_exact() -> None:
    """At most max_evals forward passes per search; forward/backward counted exactly (counted by hand)."""
    model, X, Y = _mlp_problem(4)
    calls = {"fwd": 0, "bwd": 0}
    opt = NonmonotoneLineSearchGD(model.parameters(), max_evals=12)

    def closure() -> torch.Tensor:
        calls["fwd"] += 1
        loss = ((model(X) - Y) ** 2).mean()
        if torch.is_grad_enabled():
            calls["bwd"] += 1
            opt.zero_grad()
            loss.backward()
        return loss

    for _ in range(10):
        before = calls["fwd"]
        opt.step(closure)
        assert calls["fwd"] - before - 1 <= 12
        assert opt.state_counters["last_evals"] == calls["fwd"] - before - 1
    assert opt.state_counters["forward"] == calls["fwd"]
    assert opt.state_counters["backward"] == calls["bwd"] == 10
    assert opt.state_counters["steps"] == 10
    # the counters survive a state_dict round trip
    sd = copy.deepcopy(opt.state_dict())
    opt2 = NonmonotoneLineSearchGD(model.parameters(), max_evals=12)
    opt2.load_state_dict(sd)
    assert opt2.state_counters == opt.state_counters
    assert opt2.last_step_size == opt.last_step_size


# -------------------------------------------------------------------------------------------- test 7
@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"c": 0.0}, "c"),
        ({"c": 1.0}, "c"),
        ({"xi": -0.1}, "xi"),
        ({"xi": 1.01}, "xi"),
        ({"eta_min": 0.0}, "eta_min"),
        ({"eta_min": -1.0}, "eta_min"),
        ({"eta_min": 1.0, "eta_max": 0.5}, "eta_max"),
        ({"max_evals": 0}, "max_evals"),
        ({"mode": "exact"}, "mode"),
        ({"init": "zero"}, "init"),
    ],
)
def test_bad_hyperparameters(kwargs: dict, name: str) -> None:
    with pytest.raises(ValueError) as info:
        NonmonotoneLineSearchGD([torch.zeros(2, requires_grad=True)], **kwargs)
    assert str(info.value).startswith(name)


def test_step_without_closure_and_bad_schedule() -> None:
    opt = NonmonotoneLineSearchGD([torch.zeros(2, requires_grad=True)])
    with pytest.raises(ValueError, match=r"^closure"):
        opt.step()
    with pytest.raises(TypeError, match=r"^eta_cap_schedule"):
        NonmonotoneLineSearchGD([torch.zeros(2, requires_grad=True)], eta_cap_schedule=3.0)


def test_nonfinite_gradient_policy() -> None:
    """A NaN gradient at x_k raises before anything moves, or is skipped and counted."""
    x = torch.ones(3, dtype=torch.float64, requires_grad=True)
    opt = NonmonotoneLineSearchGD([x])
    opt.step(_closure(opt, lambda: (x**2).sum()))
    before, state = x.detach().clone(), copy.deepcopy(opt.state_dict()["state"])
    with pytest.raises(NonFiniteGradientError):
        opt.step(_closure(opt, lambda: (x * float("nan")).sum()))
    assert torch.equal(x.detach(), before)
    opt = NonmonotoneLineSearchGD([x], nonfinite="skip")
    opt.step(_closure(opt, lambda: (x * float("inf")).sum()))
    assert opt.skipped_steps == 1 and torch.equal(x.detach(), before)
    assert state["nonmonotone_ls"]["k"] == 1


def test_nan_trial_is_a_rejection_and_never_accepted() -> None:
    """A loss that is NaN beyond |x| > 1: trials there are rejected and flagged; no NaN step is taken."""
    x = torch.tensor([0.9], dtype=torch.float64, requires_grad=True)
    opt = NonmonotoneLineSearchGD([x], xi=0.0, c=0.1, eta_max=100.0)

    def fn() -> torch.Tensor:
        v = (x**2).sum()
        return torch.where(x.abs().max() > 1.0, torch.full_like(v, float("nan")), v)

    closure = _closure(opt, fn)
    for _ in range(5):
        opt.step(closure)
        assert bool(torch.isfinite(x).all()) and float(x.abs().max()) <= 1.0
    assert opt.state_counters["nonfinite_trials"] > 0
    # the accepted steps still satisfy the condition
    assert float(x.abs().max()) < 0.9


def test_modes_none_give_polyak_and_barzilai_borwein() -> None:
    """mode='none': init='polyak' is Polyak's step (c_p = 1); init='bb' is <s, s>/<s, y> after step 1."""
    h = torch.tensor([1.0, 3.0, 10.0], dtype=torch.float64)
    x = torch.ones(3, dtype=torch.float64, requires_grad=True)
    opt = NonmonotoneLineSearchGD([x], mode="none", init="polyak", c_p=1.0, eta_max=1e6)
    closure = _closure(opt, lambda: 0.5 * (h * x**2).sum())
    f = 0.5 * float((h * x.detach() ** 2).sum())
    g2 = float(((h * x.detach()) ** 2).sum())
    opt.step(closure)
    assert opt.last_step_size == pytest.approx(f / g2, rel=1e-14)
    assert opt.state_counters["forward"] == 1  # no trial evaluations

    x = torch.ones(3, dtype=torch.float64, requires_grad=True)
    opt = NonmonotoneLineSearchGD([x], mode="none", init="bb", eta_max=1e6)
    closure = _closure(opt, lambda: 0.5 * (h * x**2).sum())
    xs, gs = [], []
    for _ in range(6):
        xs.append(x.detach().clone())
        gs.append(h * x.detach())
        opt.step(closure)
        if len(xs) >= 2:
            s, y = xs[-1] - xs[-2], gs[-1] - gs[-2]
            assert opt.last_step_size == pytest.approx(float(s @ s / (s @ y)), rel=1e-12)


def test_copies_and_state_dict_continue_identically() -> None:
    """deepcopy / pickle / state_dict of a BB-initialised search (per-parameter state) continue exactly."""
    model, X, Y = _mlp_problem(5)
    opt = NonmonotoneLineSearchGD(model.parameters(), init="bb", xi=0.85)

    def train(m: torch.nn.Module, o: torch.optim.Optimizer, n: int) -> None:
        c = _closure(o, lambda: ((m(X) - Y) ** 2).mean())
        for _ in range(n):
            o.step(c)

    train(model, opt, 4)
    copies = [copy.deepcopy((model, opt)), pickle.loads(pickle.dumps((model, opt)))]
    train(model, opt, 4)
    for m, o in copies:
        train(m, o, 4)
        assert all(torch.equal(p, q) for p, q in zip(model.parameters(), m.parameters(), strict=True))
