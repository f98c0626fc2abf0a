"""MetaSG-SAEA (reconstruction): MM-CCI level properties, policy limits, the SAEA's limits and bookkeeping."""

from __future__ import annotations

import math

import pytest
import torch

from optarium.bo.metasg_saea import MetaSGSAEA, RegionPolicy, mm_cci_level, run_saea, train_region_policy

D64 = torch.float64


def _g(seed: int, n: int = 40, j: int = 3) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, j, generator=g, dtype=D64) * torch.tensor([1.0, 10.0, 0.1], dtype=D64)[:j]


def _toy(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Bi-objective, one constraint (a disc in the first two coordinates away from the unconstrained front);
    extra coordinates only add a distance term to f2."""
    f = torch.stack([x[:, 0], 1 - x[:, 0] + ((x[:, 1:] - 0.5) ** 2).sum(1)], 1)
    g = (0.3**2 - ((x[:, :2] - torch.tensor([0.6, 0.7], dtype=D64)) ** 2).sum(1)).unsqueeze(1)
    return f, g


_BOX = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=D64)
_FAST = {"n_init": 6, "pop_size": 12, "generations": 3, "fit_maxiter": 15}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mm_cci_range_feasible_zero_and_single_constraint(seed: int) -> None:
    G = _g(seed)
    lam = mm_cci_level(G)
    assert lam.shape == (40,) and bool(((lam >= 0) & (lam <= 1)).all())
    feas = (G <= 0).all(1)
    assert feas.any() and bool((lam[feas] == 0).all())
    # nestedness of R(tau): the level sets grow with tau
    taus = torch.linspace(0, 1, 11, dtype=D64)
    inside = lam.unsqueeze(0) <= taus.unsqueeze(1)
    assert bool((inside[:-1] <= inside[1:]).all()) and bool(inside[-1].all())
    # one constraint: the min-max normalised violation
    v = G[:, 1].clamp_min(0)
    expected = (v - v.min()) / (v.max() - v.min() + 1e-12)
    torch.testing.assert_close(mm_cci_level(G[:, 1:2]), expected, rtol=0, atol=1e-15)
    # feasible-first ordering: sorting by the level puts every feasible point first
    order = lam.argsort(stable=True)
    assert bool(feas[order][: int(feas.sum())].all())


def test_mm_cci_invariances() -> None:
    G = _g(3)
    lam = mm_cci_level(G)
    scaled = G * torch.tensor([1.0, 7.5, 0.01], dtype=D64)
    torch.testing.assert_close(mm_cci_level(scaled), lam, rtol=1e-9, atol=1e-9)
    never = torch.cat([G, -torch.rand(40, 1, dtype=D64) - 0.1], 1)  # a constraint satisfied everywhere
    torch.testing.assert_close(mm_cci_level(never), lam, rtol=0, atol=0)
    # calibration by a reference archive; an unseen violation of an always-satisfied constraint is the worst
    ref = torch.cat([G, -torch.ones(40, 1, dtype=D64)], 1)
    new = torch.tensor([[-1.0, -1.0, -1.0, 1e-6]], dtype=D64)
    assert float(mm_cci_level(new, reference_G=ref)) == 1.0
    assert mm_cci_level(torch.empty(5, 0, dtype=D64)).tolist() == [0.0] * 5


def test_mm_cci_bad_input() -> None:
    with pytest.raises(ValueError, match="G"):
        mm_cci_level(torch.tensor([[math.nan]], dtype=D64))
    with pytest.raises(ValueError, match="reference_G"):
        mm_cci_level(torch.zeros(2, 2, dtype=D64), reference_G=torch.zeros(2, 3, dtype=D64))
    with pytest.raises(TypeError, match="G"):
        mm_cci_level([[0.0]])  # type: ignore[arg-type]


def test_policies() -> None:
    g = torch.Generator().manual_seed(0)
    assert RegionPolicy.coerce("linear").level(30, 120, 0.0, g) == pytest.approx(0.75)
    assert RegionPolicy.coerce(0.0).level(30, 120, 0.0, g) == 0.0
    sched = RegionPolicy("schedule", tau0=0.8, p=2.0, rho=0.3)
    assert sched.level(60, 120, 0.1, g) == pytest.approx(0.8 * 0.25)
    assert sched.level(60, 120, 0.31, g) == 0.0  # switched off once the feasible ratio exceeds rho
    r1 = [RegionPolicy("random").level(0, 10, 0, torch.Generator().manual_seed(4)) for _ in range(2)]
    assert r1[0] == r1[1] and 0 <= r1[0] <= 1
    for bad in (-0.1, 1.5):
        with pytest.raises(ValueError, match="policy"):
            RegionPolicy.coerce(bad)
        with pytest.raises(ValueError, match="tau0"):
            RegionPolicy("constant", tau0=bad)
    with pytest.raises(ValueError, match="kind"):
        RegionPolicy("ppo")


def test_tau_one_is_the_unconstrained_saea() -> None:
    """tau = 1: the relaxed violation is always 0, so the proposals equal those of the J = 0 strategy."""
    a = MetaSGSAEA(_BOX, n_constr=1, policy=1.0, seed=5, **_FAST)
    b = MetaSGSAEA(_BOX, n_constr=0, policy=1.0, seed=5, **_FAST)
    for _ in range(4):
        xa, xb = a.ask(3), b.ask(3)
        torch.testing.assert_close(xa, xb, rtol=0, atol=0)
        f, g = _toy(xa)
        a.tell(xa, f, g)
        b.tell(xb, f)


def test_tau_zero_is_feasibility_first_ranking() -> None:
    from optarium.bo.metasg_saea import _survival_keys

    F = torch.rand(20, 2, generator=torch.Generator().manual_seed(0), dtype=D64)
    cv = torch.zeros(20, dtype=D64)
    cv[::3] = torch.linspace(0.1, 1.0, 7, dtype=D64)
    keys = _survival_keys(F, cv)
    assert keys[cv == 0].max() < keys[cv > 0].min()
    infeasible = (cv > 0).nonzero().squeeze(1)
    assert torch.equal(infeasible[keys[infeasible].argsort()], infeasible[cv[infeasible].argsort()])


def test_budget_no_duplicates_state_and_determinism() -> None:
    opt = run_saea(
        _toy, _BOX, n_objectives=2, n_constr=1, policy="linear", max_evals=24, q=4, seed=1, **_FAST
    )
    assert opt.X.shape == (24, 2) and opt.G.shape == (24, 1)
    d = torch.cdist(opt.X, opt.X) + torch.eye(24, dtype=D64)
    assert float(d.min()) > 1e-9
    assert [t for _, t in opt.tau_history] == sorted((t for _, t in opt.tau_history), reverse=True)
    again = run_saea(
        _toy, _BOX, n_objectives=2, n_constr=1, policy="linear", max_evals=24, q=4, seed=1, **_FAST
    )
    assert torch.equal(opt.X, again.X)
    # resume from a state_dict proposes exactly the same next batch
    clone = MetaSGSAEA(_BOX, n_constr=1, policy="linear", seed=9, **_FAST)
    clone.load_state_dict(opt.state_dict())
    torch.testing.assert_close(clone.ask(3), opt.ask(3), rtol=0, atol=0)
    fy = opt.feasible_pareto_y
    assert fy.shape[0] >= 1 and bool(opt.feasible_pareto_x is not None)
    _, gg = _toy(opt.feasible_pareto_x)
    assert bool((gg <= 0).all())


@pytest.mark.slow  # six 60-evaluation SAEA runs, about 35 CPU-s
def test_guidance_beats_random_design_on_toy() -> None:
    """In 4-D the SAEA (tau = 0) reaches a larger feasible hypervolume than as many Latin-hypercube points,
    on most of six paired seeds and on average. (At 30 evaluations it does not: it wins on 1-2 of 6 seeds,
    so the former single-seed check at 30 evaluations held by the seed's luck.)"""
    from optarium.bo.metrics import hypervolume
    from optarium.bo.trust_region import latin_hypercube

    ref = torch.tensor([1.1, 2.0], dtype=D64)
    box = torch.tensor([[0.0] * 4, [1.0] * 4], dtype=D64)
    diffs = []
    for seed in range(6):
        opt = run_saea(
            _toy, box, n_objectives=2, n_constr=1, policy=0.0, max_evals=60, q=3, seed=seed, n_init=10
        )
        x = latin_hypercube(60, 4, generator=torch.Generator().manual_seed(seed), dtype=D64)
        f, g = _toy(x)
        diffs.append(float(hypervolume(opt.feasible_pareto_y, ref) - hypervolume(f[(g <= 0).all(1)], ref)))
    assert sum(d > 0 for d in diffs) >= 4 and sum(diffs) > 0, diffs


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="bounds"):
        MetaSGSAEA(torch.tensor([[0.0, 1.0], [0.0, 2.0]], dtype=D64))
    with pytest.raises(ValueError, match="policy"):
        MetaSGSAEA(_BOX, policy=1.2)
    opt = MetaSGSAEA(_BOX, n_constr=1, **_FAST)
    x = opt.ask(2)
    f, g = _toy(x)
    with pytest.raises(ValueError, match="g"):
        opt.tell(x, f)
    with pytest.raises(ValueError, match="g"):
        opt.tell(x, f, torch.full_like(g, math.nan))
    with pytest.raises(ValueError, match="g"):
        opt.tell(x, f, g.squeeze(1))
    with pytest.raises(ValueError, match="y"):
        opt.tell(x, torch.full_like(f, math.nan), g)
    assert opt.X.shape[0] == 0 and opt.G.shape[0] == 0


def test_train_region_policy_random_search() -> None:
    def sampler(e: int):
        kw = {"problem": _toy, "bounds": _BOX, "n_objectives": 2, "n_constr": 1, "seed": e, "max_evals": 12}
        return kw, lambda opt: -float(opt.feasible.sum())

    pol, hist = train_region_policy(sampler, budget=2, episodes_per_candidate=1, run_kwargs={"q": 3, **_FAST})
    assert pol.kind == "schedule" and len(hist) == 2
    assert min(s for _, s in hist) == next(s for p, s in hist if p == pol.to_dict())


@pytest.mark.parametrize("seed", [0, 1])
def test_diffusion_prior_follows_its_condition(seed: int) -> None:
    """5-D, about 30 % feasible (x1 + x2 <= its 30 % quantile, away from the centre): samples conditioned on
    low archive levels have at most half the true level of samples conditioned on high ones."""
    from optarium.bo.metasg_saea import ConditionalDiffusionPrior

    g = torch.Generator().manual_seed(seed)
    U = torch.rand(200, 5, generator=g, dtype=D64)
    s = U[:, 0] + U[:, 1]
    thr = float(s.quantile(0.3))
    G = (s - thr).unsqueeze(1)
    lam = mm_cci_level(G)
    prior = ConditionalDiffusionPrior(5).fit(U, lam, g)
    low, high = lam[lam <= 0.1], lam[lam >= 0.5]
    c_low = low[torch.randint(low.numel(), (200,), generator=g)]
    c_high = high[torch.randint(high.numel(), (200,), generator=g)]
    x_low, x_high = prior.sample(c_low, g), prior.sample(c_high, g)
    for x in (x_low, x_high):
        assert bool(((x >= 0) & (x <= 1)).all())

    def true_level(x: torch.Tensor) -> torch.Tensor:
        return mm_cci_level((x[:, 0] + x[:, 1] - thr).unsqueeze(1), reference_G=G)

    assert float(true_level(x_low).mean()) <= 0.5 * float(true_level(x_high).mean())


def test_diffusion_path_runs_and_resumes() -> None:
    kw = {**_FAST, "prior_fraction": 0.5}
    opt = MetaSGSAEA(_BOX, n_constr=1, policy="linear", seed=2, refit_every=6, **kw)
    for _ in range(4):
        x = opt.ask(3)
        opt.tell(x, *_toy(x))
    assert opt._prior is not None and opt._prior.params is not None
    clone = MetaSGSAEA(_BOX, n_constr=1, policy="linear", seed=0, refit_every=6, **kw)
    clone.load_state_dict(opt.state_dict())
    torch.testing.assert_close(clone.ask(3), opt.ask(3), rtol=0, atol=0)


@pytest.mark.parametrize(("d", "m", "j"), [(5, 2, 1), (10, 3, 4), (3, 2, 0)])
def test_one_policy_object_runs_on_any_shape(d: int, m: int, j: int) -> None:
    """The same RegionPolicy drives problems with different (D, M, J), including J = 0 (unconstrained)."""
    policy = RegionPolicy("schedule", tau0=0.9, p=1.5, rho=0.5)
    w = torch.linspace(0.2, 0.8, d, dtype=D64)

    def problem(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        f = torch.stack([((x - w.roll(k)) ** 2).sum(1) for k in range(m)], 1)
        g = torch.stack([x[:, k] + x[:, (k + 1) % d] - 1.0 - 0.1 * k for k in range(j)], 1) if j else None
        return f, (g if g is not None else torch.empty(x.shape[0], 0, dtype=D64))

    box = torch.stack([torch.zeros(d, dtype=D64), torch.ones(d, dtype=D64)])
    fast = {**_FAST, "fit_maxiter": 5, "generations": 2}
    opt = run_saea(problem, box, n_objectives=m, n_constr=j, policy=policy, max_evals=12, q=3, seed=0, **fast)
    assert opt.X.shape == (12, d) and opt.Y.shape == (12, m) and opt.G.shape == (12, j)
    assert all(0.0 <= t <= 1.0 for _, t in opt.tau_history)
    if j == 0:
        assert bool(opt.feasible.all()) and bool((opt.levels == 0).all())
        torch.testing.assert_close(opt.feasible_pareto_y, opt.pareto_y, rtol=0, atol=0)


# ------------------------------------------------------------------ diffusion prior, mixing, learned schedule
def _toy_prior_data(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, float, torch.Generator]:
    g = torch.Generator().manual_seed(seed)
    U = torch.rand(200, 5, generator=g, dtype=D64)
    s = U[:, 0] + U[:, 1]
    thr = float(s.quantile(0.3))
    G = (s - thr).unsqueeze(1)
    return U, G, mm_cci_level(G), thr, g


@pytest.mark.parametrize("seed", [0, 1])
def test_conditioned_samples_concentrate_in_the_low_level_region(seed: int) -> None:
    """Conditioned on the archive's levels <= 0.1, the samples' true mean level is at most a quarter of the
    unconditioned samples' (which follow the archive: about 70 % infeasible), and most are feasible."""
    from optarium.bo.metasg_saea import ConditionalDiffusionPrior

    U, G, lam, thr, g = _toy_prior_data(seed)
    prior = ConditionalDiffusionPrior(5).fit(U, lam, g)
    low = lam[lam <= 0.1]
    x_low = prior.sample(low[torch.randint(low.numel(), (300,), generator=g)], g)
    x_unc = prior.sample(None, g, n=300)

    def true_level(x: torch.Tensor) -> torch.Tensor:
        return mm_cci_level((x[:, 0] + x[:, 1] - thr).unsqueeze(1), reference_G=G)

    lo, un = true_level(x_low), true_level(x_unc)
    assert float(lo.mean()) <= 0.25 * float(un.mean())
    assert float((lo == 0).double().mean()) >= 2 * float((un == 0).double().mean())


def test_diffusion_prior_determinism_dtype_and_subset() -> None:
    from optarium.bo.metasg_saea import ConditionalDiffusionPrior

    U, _, lam, _, _ = _toy_prior_data(3)
    c = torch.full((7,), 0.05, dtype=D64)

    def draw(seed: int, dtype: torch.dtype = D64) -> torch.Tensor:
        g = torch.Generator().manual_seed(seed)
        p = ConditionalDiffusionPrior(5, hidden=16, steps=5, max_points=50)
        return p.fit(U.to(dtype), lam.to(dtype), g, iters=5).sample(c.to(dtype), g)

    a, b = draw(0), draw(0)
    assert torch.equal(a, b) and not torch.equal(a, draw(1))
    x32 = draw(0, torch.float32)
    assert x32.dtype == torch.float32 and x32.shape == (7, 5)
    assert bool(((x32 >= 0) & (x32 <= 1)).all())


def test_diffusion_prior_bad_arguments() -> None:
    from optarium.bo.metasg_saea import ConditionalDiffusionPrior

    U, _, lam, _, g = _toy_prior_data(0)
    p = ConditionalDiffusionPrior(5, hidden=8, steps=3)
    with pytest.raises(ValueError, match="guidance"):
        ConditionalDiffusionPrior(5, guidance=-1.0)
    with pytest.raises(ValueError, match="max_points"):
        ConditionalDiffusionPrior(5, max_points=1)
    with pytest.raises(ValueError, match="U"):
        p.fit(U * 2, lam, g)
    with pytest.raises(ValueError, match="U"):
        p.fit(U[:, :3], lam, g)
    with pytest.raises(ValueError, match="c"):
        p.fit(U, lam[:-1], g)
    with pytest.raises(ValueError, match="c"):
        p.fit(U, lam + 2, g)
    with pytest.raises(ValueError, match="iters"):
        p.fit(U, lam, g, iters=0)
    with pytest.raises(RuntimeError, match="fit"):
        p.sample(lam[:3], g)
    p.fit(U, lam, g, iters=1)
    with pytest.raises(ValueError, match="n"):
        p.sample(None, g)
    with pytest.raises(ValueError, match="c"):
        p.sample(torch.tensor([1.5], dtype=D64), g)
    with pytest.raises(ValueError, match="prior_fraction"):
        MetaSGSAEA(_BOX, n_constr=1, prior_fraction=1.5)
    with pytest.raises(ValueError, match="prior"):
        MetaSGSAEA(_BOX, n_constr=1, prior="vae")


def _proposals(steps: int = 3, policy: RegionPolicy | str = "linear", **kw: object) -> torch.Tensor:
    opt = MetaSGSAEA(_BOX, n_constr=1, policy=policy, seed=3, **{**_FAST, **kw})  # type: ignore[arg-type]
    for _ in range(steps):
        x = opt.ask(3)
        opt.tell(x, *_toy(x))
    return opt.X


def test_prior_fraction_zero_is_the_saea_without_prior() -> None:
    """w = 0 draws nothing from either prior: the proposals equal the default SAEA's bit for bit; w > 0
    changes them (the mixed-in samples reach the inner population)."""
    base = _proposals()
    for prior in ("diffusion", "gaussian"):
        torch.testing.assert_close(_proposals(prior_fraction=0.0, prior=prior), base, rtol=0, atol=0)
    assert not torch.equal(_proposals(prior_fraction=1.0, prior="gaussian"), base)


def test_schedule_limits_and_switch() -> None:
    g = torch.Generator().manual_seed(0)
    lin, zero = RegionPolicy("linear"), RegionPolicy("constant", tau0=0.0)
    one = RegionPolicy("schedule", tau0=1.0, p=1.0, rho=1.0)
    off = RegionPolicy("schedule", tau0=0.0, p=2.5, rho=0.3)
    for fe in (0, 7, 30, 64, 119, 120):
        for ratio in (0.0, 0.25, 0.999, 1.0):
            assert one.level(fe, 120, ratio, g) == lin.level(fe, 120, ratio, g)
            assert off.level(fe, 120, ratio, g) == zero.level(fe, 120, ratio, g) == 0.0
    sched = RegionPolicy("schedule", tau0=0.6, p=0.5, rho=0.2)
    assert sched.level(30, 120, 0.2, g) == pytest.approx(0.6 * 0.75**0.5)  # not above rho: still on
    assert sched.level(30, 120, 0.2001, g) == 0.0
    # in the strategy: the limit schedule proposes exactly what the linear schedule does
    torch.testing.assert_close(_proposals(policy=one), _proposals(policy="linear"), rtol=0, atol=0)


def test_schedule_switch_is_permanent_in_the_strategy() -> None:
    """Once the archive's feasible ratio exceeded rho, tau stays 0 even if the ratio falls again."""
    opt = MetaSGSAEA(
        _BOX,
        n_constr=1,
        policy=RegionPolicy("schedule", tau0=1.0, p=1.0, rho=0.5),
        decision_interval=1,
        max_evals=100,
        **_FAST,
    )
    feas, infeas = torch.tensor([[0.0, 0.0]], dtype=D64), torch.tensor([[0.6, 0.7]], dtype=D64)
    taus = []
    for x in (feas, feas, infeas, infeas, infeas, infeas):
        opt.tell(x, *_toy(x))
        taus.append(opt._decide_level())
    assert taus[0] == 0.0 and taus[1] == 0.0  # ratio 1 > 0.5
    assert all(t == 0.0 for t in taus[2:])  # ratios 2/3, 1/2, 2/5, 1/3: still off
    fresh = MetaSGSAEA(_BOX, n_constr=1, policy=opt.policy, decision_interval=1, max_evals=100, **_FAST)
    fresh.load_state_dict(opt.state_dict())
    x = infeas + 0.01
    fresh.tell(x, *_toy(x))
    assert fresh._decide_level() == 0.0
    # without the history, the same archive (ratio 2/7 <= 0.5) would switch the schedule back on
    assert opt.policy.level(7, 100, 2 / 7, torch.Generator()) > 0


def test_schedule_candidates_are_independent_of_their_number() -> None:
    from optarium.bo.metasg_saea import schedule_candidates

    a, b = schedule_candidates(5, 0), schedule_candidates(30, 0)
    assert [c.to_dict() for c in a] == [c.to_dict() for c in b[:5]]
    assert a[0].to_dict() != schedule_candidates(1, 1)[0].to_dict()
    for c in b:
        assert c.kind == "schedule" and 0 <= c.tau0 <= 1 and 0.25 <= c.p <= 4 and 0 <= c.rho <= 1
    with pytest.raises(ValueError, match="n"):
        schedule_candidates(0)
