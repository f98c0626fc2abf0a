"""POM: coverage factor, limits, the MC quality estimator, the non-domination kernel, the strategy."""

from __future__ import annotations

import math

import pytest
import torch

from optarium.bo.pom import (
    POM,
    QLogEHVI,
    QSVGDBatch,
    coverage_log_probability,
    coverage_probability,
    joint_posterior_samples,
    kernel_repulsion_greedy,
    marginal_pareto_screen,
    non_dominated_samples,
    pom_greedy_batch,
    pom_log_value,
    smoothed_log_quality,
)

pytest.importorskip("botorch", reason="BoTorch (pinned 0.18.1) provides the GP surrogate and qLogEHVI")


def _nd_random(s: int, n: int, seed: int, p: float = 0.3) -> torch.Tensor:
    return torch.rand(s, n, generator=torch.Generator().manual_seed(seed)) < p


# ------------------------------------------------------------------------------------------- coverage factor
def test_min_form_is_permutation_invariant_and_zero_for_duplicates() -> None:
    g = torch.Generator().manual_seed(0)
    cand = torch.rand(30, 2, generator=g, dtype=torch.float64)
    ev = torch.rand(6, 2, generator=g, dtype=torch.float64)
    order = torch.tensor([3, 7, 11, 19, 25])
    ref = pom_log_value(order, cand, ev, radius=0.1, coverage="minimax")
    for _ in range(5):
        perm = order[torch.randperm(5, generator=g)]
        assert pom_log_value(perm, cand, ev, radius=0.1, coverage="minimax") == pytest.approx(ref, abs=1e-14)
    # a batch point coinciding with another batch point or with an evaluated point gives C = 0
    dup = torch.tensor([3, 7, 3])
    assert pom_log_value(dup, cand, ev, radius=0.1) == -math.inf
    assert pom_log_value(dup, cand, ev, radius=0.1, coverage="minimax") == -math.inf
    cand2 = torch.cat([cand, ev[:1]])
    assert pom_log_value(torch.tensor([0, 30]), cand2, ev, radius=0.1) == -math.inf


def test_coverage_is_monotone_in_distance_and_accurate_for_tiny_x() -> None:
    d = torch.linspace(0, 3, 301, dtype=torch.float64)
    for kernel in ("exponential", "gaussian"):
        c = coverage_probability(d, 0.2, kernel)
        assert (c.diff() >= 0).all() and c[0] == 0 and c[1] > 0  # c rounds to 1 at large x
        lc = coverage_log_probability(d[1:], 0.2, kernel)
        assert (lc.diff() > 0).all()
        torch.testing.assert_close(lc, torch.log(c[1:]), rtol=1e-12, atol=1e-15)
    # r = 1e6: c = x (1 - x/2 + ...) with x = d / r, resolved by expm1 (1 - exp(-x) would lose it)
    small = torch.tensor([0.05, 0.01, 1e-4], dtype=torch.float64)
    x = small / 1e6
    torch.testing.assert_close(coverage_probability(small, 1e6), x * (1 - x / 2), rtol=1e-12, atol=0)
    torch.testing.assert_close(
        coverage_probability(small, 1e6, "gaussian"), small**2 / 2e12, rtol=1e-12, atol=0
    )
    # large x: log c resolves differences where c itself rounds to 1
    lc = coverage_log_probability(torch.tensor([40.0, 41.0], dtype=torch.float64), 1.0)
    assert lc[0] < lc[1] < 0


def test_product_form_increases_with_every_pairwise_distance() -> None:
    cand = torch.tensor([[0.0, 0.0], [0.1, 0.0], [0.5, 0.5]], dtype=torch.float64)
    ev = torch.empty(0, 2, dtype=torch.float64)
    order = torch.tensor([0, 1, 2])
    base = pom_log_value(order, cand, ev, radius=0.2)
    farther = cand.clone()
    farther[1, 0] = 0.2  # increase the distance between points 0 and 1 (others unchanged or larger)
    assert pom_log_value(order, farther, ev, radius=0.2) > base


# ----------------------------------------------------------------------------------------------------- limits
def test_limit_q1_far_from_data_reduces_to_quality() -> None:
    nd = _nd_random(512, 40, 1)
    cand = torch.rand(40, 2, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    idx, _ = pom_greedy_batch(1, cand, torch.empty(0, 2, dtype=torch.float64), radius=0.1, nd=nd)
    counts = nd.sum(0)
    assert int(idx[0]) == int(torch.argmax(counts))  # first maximiser of the Pareto frequency


def _farthest_point(cand: torch.Tensor, ev: torch.Tensor, q: int) -> list[int]:
    out: list[int] = []
    for _ in range(q):
        best, best_d = -1, -1.0
        for i in range(cand.shape[0]):
            pts = [*ev, *(cand[j] for j in out)]
            d = min(float((cand[i] - p).norm()) for p in pts)
            if d > best_d:
                best, best_d = i, d
        out.append(best)
    return out


@pytest.mark.parametrize("radius", [1e-3, 0.05, 1.0, 1e3])
def test_limit_quality_off_gives_the_farthest_point_traversal(radius: float) -> None:
    g = torch.Generator().manual_seed(4)
    cand = torch.rand(60, 2, generator=g, dtype=torch.float64)
    ev = torch.rand(5, 2, generator=g, dtype=torch.float64)
    idx, _ = pom_greedy_batch(6, cand, ev, radius=radius, nd=None)
    assert idx.tolist() == _farthest_point(cand, ev, 6)


@pytest.mark.parametrize("kernel,power", [("exponential", 1), ("gaussian", 2)])
def test_limit_large_radius_ranks_like_qehvi_sf(kernel: str, power: int) -> None:
    g = torch.Generator().manual_seed(5)
    cand = torch.rand(50, 2, generator=g, dtype=torch.float64)
    ev = torch.rand(4, 2, generator=g, dtype=torch.float64)
    nd = _nd_random(512, 50, 6, p=0.7)
    alphas, refs = [], []
    for _ in range(200):
        order = torch.randperm(50, generator=g)[:3]
        la = pom_log_value(order, cand, ev, radius=1e6, nd=nd, coverage="minimax", coverage_kernel=kernel)
        q = smoothed_log_quality(nd, order)[0]
        dmin = math.exp(pom_log_value(order, cand, ev, radius=math.inf, coverage="distance"))
        alphas.append(la)
        refs.append(q + power * math.log(dmin))
    a, r = torch.tensor(alphas), torch.tensor(refs)
    differ = (r[:, None] - r[None]).abs() > 1e-4
    agree = torch.sign(a[:, None] - a[None]) == torch.sign(r[:, None] - r[None])
    assert agree[differ].all()


def test_limit_tiny_radius_is_a_hard_no_duplicate_constraint() -> None:
    g = torch.Generator().manual_seed(7)
    cand = torch.rand(20, 2, generator=g, dtype=torch.float64)
    ev = torch.rand(3, 2, generator=g, dtype=torch.float64)
    assert pom_log_value(torch.tensor([1, 5, 9]), cand, ev, radius=1e-9) == 0.0  # C = 1 exactly
    assert pom_log_value(torch.tensor([1, 5, 1]), cand, ev, radius=1e-9) == -math.inf


# ---------------------------------------------------------------------------------------------------- quality
def test_single_objective_quality_matches_two_point_gaussian_closed_form() -> None:
    mu = torch.tensor([0.3, 0.0], dtype=torch.float64)
    sd = torch.tensor([1.0, 0.7], dtype=torch.float64)
    rho = 0.4
    cov = torch.tensor([[sd[0] ** 2, rho * sd[0] * sd[1]], [rho * sd[0] * sd[1], sd[1] ** 2]])
    s = 100_000
    z = torch.randn(s, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    f = mu + z @ torch.linalg.cholesky(cov).T  # (S, 2)
    nd = non_dominated_samples(f.unsqueeze(-1))  # M = 1: Pareto optimal = minimiser
    p_hat = float(nd[:, 0].double().mean())
    # P(f(a) < f(b)) = Phi((mu_b - mu_a) / sqrt(sa^2 + sb^2 - 2 rho sa sb))
    scale = math.sqrt(sd[0] ** 2 + sd[1] ** 2 - 2 * rho * sd[0] * sd[1])
    p = 0.5 * (1 + math.erf((mu[1] - mu[0]) / scale / math.sqrt(2)))
    assert abs(p_hat - p) <= 4 * math.sqrt(p * (1 - p) / s)


def test_smoothed_estimator_is_positive_and_matches_the_raw_frequency_identity() -> None:
    nd = _nd_random(512, 30, 8, p=0.7)
    g = torch.Generator().manual_seed(9)
    for _ in range(20):
        order = torch.randperm(30, generator=g)[:5]
        logq, fallbacks = smoothed_log_quality(nd, order)
        assert math.isfinite(logq)
        counts = [512]
        joint = torch.ones(512, dtype=torch.bool)
        for i in order.tolist():
            joint = joint & nd[:, i]
            counts.append(int(joint.sum()))
        if fallbacks == 0 and counts[-1] >= 1:
            factor = math.prod(
                (counts[i] + 0.5) / counts[i] * counts[i - 1] / (counts[i - 1] + 1) for i in range(1, 6)
            )
            assert logq == pytest.approx(math.log(counts[-1] / 512 * factor), abs=1e-12)
    # rare joint events fall back to marginals and stay > 0
    rare = _nd_random(512, 10, 10, p=0.05)
    logq, fallbacks = smoothed_log_quality(rare, torch.arange(5))
    assert math.isfinite(logq) and fallbacks >= 1


def test_greedy_batch_value_equals_its_recomputed_value_and_beats_random_batches() -> None:
    g = torch.Generator().manual_seed(11)
    cand = torch.rand(80, 2, generator=g, dtype=torch.float64)
    ev = torch.rand(5, 2, generator=g, dtype=torch.float64)
    nd = _nd_random(512, 80, 12, p=0.5)
    idx, _ = pom_greedy_batch(4, cand, ev, radius=0.1, nd=nd)
    best = pom_log_value(idx, cand, ev, radius=0.1, nd=nd)
    # each greedy step maximised the augmented value: no single-point swap at the last position does better
    for j in range(80):
        if j not in idx.tolist():
            alt = torch.cat([idx[:3], torch.tensor([j])])
            assert pom_log_value(alt, cand, ev, radius=0.1, nd=nd) <= best + 1e-12


@pytest.mark.parametrize("m", [2, 3])
def test_non_domination_kernel_agrees_with_botorch(m: int) -> None:
    from botorch.utils.multi_objective.pareto import is_non_dominated

    g = torch.Generator().manual_seed(m)
    for F in (
        torch.rand(8, 60, m, generator=g, dtype=torch.float64),
        torch.randint(0, 4, (8, 60, m), generator=g).double(),  # many ties and exact duplicates
    ):
        ours = non_dominated_samples(F)
        ref = torch.stack([is_non_dominated(-f, deduplicate=False) for f in F])
        assert torch.equal(ours, ref)


def test_joint_posterior_samples_have_the_posterior_moments() -> None:
    from optarium.bo.pom import _models

    g = torch.Generator().manual_seed(13)
    X = torch.rand(8, 2, generator=g, dtype=torch.float64)
    Y = torch.stack([torch.sin(6 * X[:, 0]), torch.cos(5 * X[:, 1])], -1)
    hyper = [
        {
            "covar_module.raw_lengthscale": torch.tensor([[0.3, 0.3]], dtype=torch.float64),
            "likelihood.noise_covar.raw_noise": torch.tensor([1e-4], dtype=torch.float64),
        }
    ] * 2
    models = _models(X, Y, hyper)
    Xt = torch.rand(5, 2, generator=g, dtype=torch.float64)
    s = joint_posterior_samples(models, Xt, 8192, torch.Generator().manual_seed(0))
    assert s.shape == (8192, 5, 2)
    for k, model in enumerate(models):
        post = model.posterior(Xt)
        torch.testing.assert_close(s[..., k].mean(0), post.mean.squeeze(-1).detach(), atol=0.03, rtol=0)
        cov = torch.cov(s[..., k].T)
        torch.testing.assert_close(cov, post.distribution.covariance_matrix.detach(), atol=0.03, rtol=0)


# ------------------------------------------------------------------------------------------------- strategy
def _omni(x: torch.Tensor) -> torch.Tensor:
    return torch.stack([torch.sin(math.pi * x).sum(-1), torch.cos(math.pi * x).sum(-1)], -1)


def _pool(n: int = 300, seed: int = 0) -> torch.Tensor:
    return 6 * torch.quasirandom.SobolEngine(2, scramble=True, seed=seed).draw(n, dtype=torch.float64)


_HYPER = [
    {
        "covar_module.raw_lengthscale": torch.tensor([[0.09, 0.09]], dtype=torch.float64),
        "likelihood.noise_covar.raw_noise": torch.tensor([1e-3], dtype=torch.float64),
    }
] * 2


def test_strategy_state_dict_round_trip_and_determinism() -> None:
    bounds = torch.tensor([[0.0, 0.0], [6.0, 6.0]], dtype=torch.float64)
    pool = _pool()

    def make() -> POM:
        return POM(
            bounds,
            candidate_pool=pool,
            gp_hyperparameters=_HYPER,
            num_mc_samples=128,
            generator=torch.Generator().manual_seed(3),
        )

    a = make()
    x = a.ask(4)
    a.tell(x, _omni(x))
    x = a.ask(3)
    a.tell(x, _omni(x))
    state = a.state_dict()
    b = make()
    b.load_state_dict(state)
    xa, xb = a.ask(3), b.ask(3)
    assert torch.equal(xa, xb)
    # the generator state is part of the state: a later state gives a different draw of the base samples
    c = make()
    c.load_state_dict(a.state_dict())
    assert not torch.equal(c.ask(3), xa)
    # batch points are distinct pool points never evaluated before
    assert (torch.cdist(xa, pool, compute_mode="donot_use_mm_for_euclid_dist").amin(1) == 0).all()
    assert (torch.cdist(xa, a.X).amin(1) > 0).all()
    assert a.pareto_y.shape[1] == 2 and a.last_info["candidates"] == pool.shape[0] - 7
    with pytest.raises(RuntimeError):
        _ = a.best_x


def test_maximize_flag_is_consistent() -> None:
    bounds = torch.tensor([[0.0, 0.0], [6.0, 6.0]], dtype=torch.float64)
    pool = _pool()
    x0 = pool[:10]
    outs = []
    for minimize, sign in ((True, 1.0), (False, -1.0)):
        s = POM(
            bounds,
            candidate_pool=pool,
            gp_hyperparameters=_HYPER,
            num_mc_samples=128,
            minimize=minimize,
            generator=torch.Generator().manual_seed(0),
        )
        s.tell(x0, sign * _omni(x0))
        outs.append(s.ask(3))
    assert torch.equal(outs[0], outs[1])  # maximising -f is minimising f


def test_qlogehvi_baseline_and_qehvi_quality_run() -> None:
    bounds = torch.tensor([[0.0, 0.0], [6.0, 6.0]], dtype=torch.float64)
    pool = _pool(200)
    for s in (
        QLogEHVI(bounds, candidate_pool=pool, gp_hyperparameters=_HYPER, num_mc_samples=16, subset_size=50),
        POM(
            bounds,
            candidate_pool=pool,
            gp_hyperparameters=_HYPER,
            num_mc_samples=16,
            quality="qehvi",
            coverage="distance",
        ),
    ):
        s.tell(pool[:8], _omni(pool[:8]))
        x = s.ask(3)
        assert x.shape == (3, 2) and (torch.cdist(x, pool[:8]).amin(1) > 0).all()
        assert torch.unique(x, dim=0).shape[0] == 3


def test_bad_input_names_the_argument() -> None:
    bounds = torch.tensor([[0.0, 0.0], [6.0, 6.0]], dtype=torch.float64)
    with pytest.raises(ValueError, match=r"^n_objectives"):
        POM(bounds, n_objectives=1)
    with pytest.raises(ValueError, match=r"^ref_point"):
        POM(bounds, ref_point=torch.zeros(3))
    with pytest.raises(ValueError, match=r"^candidate_pool"):
        POM(bounds, candidate_pool=torch.full((4, 2), 7.0, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"^quality"):
        POM(bounds, quality="ehvi")
    with pytest.raises(ValueError, match=r"^radius"):
        POM(bounds, radius=-1.0)
    s = POM(bounds, candidate_pool=_pool(20), gp_hyperparameters=_HYPER)
    with pytest.raises(ValueError, match=r"^n"):
        s.ask(0)
    with pytest.raises(ValueError, match=r"^y"):
        s.tell(torch.ones(2, 2, dtype=torch.float64), torch.tensor([[0.0, float("nan")], [0.0, 0.0]]))
    with pytest.raises(ValueError, match=r"^y"):
        s.tell(torch.ones(2, 2, dtype=torch.float64), torch.zeros(2))
    with pytest.raises(ValueError, match=r"^q"):
        pom_greedy_batch(0, torch.rand(5, 2), torch.rand(1, 2), radius=0.1)
    s.tell(_pool(20)[:18], _omni(_pool(20)[:18]))
    with pytest.raises(ValueError, match=r"^n"):
        s.ask(3)  # only 2 unevaluated pool points left


# ------------------------------------------------------------------------------------ behaviour on OmniTest-2
def _omnitest_setup(n_data: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list]:
    from optarium.bo.mo_problems import OmniTest
    from optarium.bo.pom import sobol_gp_hyperparameters

    pool = _pool(1000, seed)
    bounds = torch.tensor([[0.0, 0.0], [6.0, 6.0]], dtype=torch.float64)
    return bounds, pool, pool[:n_data], sobol_gp_hyperparameters(OmniTest(2), 64)


@pytest.mark.parametrize("kind", ["qlogehvi", "qehvi_quality"])
def test_hypervolume_acquisitions_pick_predicted_improvements(kind: str) -> None:
    """With the objectives' sign right, the pick's posterior mean is not dominated by the observed data."""
    bounds, pool, x0, hyper = _omnitest_setup(30, 1)
    if kind == "qlogehvi":
        s = QLogEHVI(
            bounds, candidate_pool=pool[:400], gp_hyperparameters=hyper, num_mc_samples=32, subset_size=400
        )
    else:
        s = POM(
            bounds,
            candidate_pool=pool[:400],
            gp_hyperparameters=hyper,
            num_mc_samples=32,
            quality="qehvi",
            coverage="distance",
        )
    s.tell(x0, _omni(x0))
    x = s.ask(1)
    models = s._fit()
    mean = torch.stack([m.posterior(s._unit(x)).mean.reshape(-1) for m in models], -1).detach()
    yn = s.standardized_Y()
    assert not ((yn <= mean).all(-1)).any()


def test_screening_keeps_the_most_often_non_dominated_candidates_and_continuous_mode_runs() -> None:
    bounds = torch.tensor([[0.0, 0.0], [6.0, 6.0]], dtype=torch.float64)
    pool = _pool(400)
    s = POM(bounds, candidate_pool=pool, gp_hyperparameters=_HYPER, num_mc_samples=64, screen_size=40)
    s.tell(pool[:10], _omni(pool[:10]))
    x = s.ask(4)
    assert s.last_info["candidates"] == 40
    keep = s._screen(s._fit(), s._unit(pool[10:]), s.standardized_Y())
    assert keep.shape == (40,) and keep.unique().numel() == 40
    # without a pool: fresh Sobol candidates inside the box, distinct, none equal to the data
    c = POM(bounds, gp_hyperparameters=_HYPER, num_mc_samples=64, num_candidates=200)
    c.tell(pool[:10], _omni(pool[:10]))
    xc = c.ask(3)
    assert ((xc >= 0) & (xc <= 6)).all() and torch.unique(xc, dim=0).shape[0] == 3
    assert x.shape == (4, 2)


def test_sobol_gp_hyperparameters_are_the_fit_on_the_seeded_sobol_design() -> None:
    from optarium.bo.mo_problems import OmniTest, sobol_pool
    from optarium.bo.pom import fit_gp_hyperparameters, sobol_gp_hyperparameters

    prob = OmniTest(2)
    hyper = sobol_gp_hyperparameters(prob, 24, seed=7)
    X = sobol_pool(prob, 24, 7)
    Y = prob(X)
    lo, hi = prob.bounds
    ref = fit_gp_hyperparameters((X - lo) / (hi - lo), (Y - Y.mean(0)) / Y.std(0))
    assert len(hyper) == 2
    for h, r in zip(hyper, ref, strict=True):
        assert h.keys() == r.keys() and all(torch.equal(h[k], r[k]) for k in h)
    ls = [h["covar_module.raw_lengthscale"] for h in hyper]
    assert all(v.shape == (1, 2) for v in ls) and not torch.equal(ls[0], ls[1])  # one fit per objective
    with pytest.raises(ValueError, match=r"^n_points"):
        sobol_gp_hyperparameters(prob, 1)


# --------------------------------------------------------------------- baselines added for the full scale
def test_kernel_repulsion_greedy_limits() -> None:
    """eta = 0: the top-q utilities in order; large eta: a duplicate of a picked point is never picked while
    a far one exists; ties go to the lowest index; h is the median heuristic med^2 / log N."""
    g = torch.Generator().manual_seed(3)
    c = torch.rand(50, 2, generator=g, dtype=torch.float64)
    u = torch.randn(50, generator=g, dtype=torch.float64)
    idx, h = kernel_repulsion_greedy(5, c, u, 0.0)
    assert idx.tolist() == torch.argsort(u, descending=True)[:5].tolist()
    d = torch.cdist(c, c)
    med = d[torch.triu(torch.ones(50, 50, dtype=torch.bool), 1)].median()
    assert h == pytest.approx(float(med) ** 2 / math.log(50), rel=1e-12)
    dup = torch.cat([c[:1], c[:1], torch.tensor([[0.9, 0.9]], dtype=torch.float64)])
    ud = torch.tensor([1.0, 1.0, 0.5], dtype=torch.float64)
    assert kernel_repulsion_greedy(2, dup, ud, 0.0)[0].tolist() == [0, 1]  # tie: lowest index first
    assert kernel_repulsion_greedy(2, dup, ud, 10.0)[0].tolist() == [0, 2]  # repelled from the duplicate
    # the greedy score is the stated one: U(x) - eta * sum_j exp(-|x - x_j|^2 / h) at every step
    idx, h = kernel_repulsion_greedy(4, c, u, 0.7)
    for k in range(1, 4):
        score = u - 0.7 * torch.exp(-torch.cdist(c, c[idx[:k]]).square() / h).sum(1)
        score[idx[:k]] = -math.inf
        assert int(score.argmax()) == int(idx[k])
    with pytest.raises(ValueError, match=r"^q"):
        kernel_repulsion_greedy(51, c, u, 1.0)
    with pytest.raises(ValueError, match=r"^utility"):
        kernel_repulsion_greedy(2, c, u[:3], 1.0)


def test_marginal_screen_matches_its_definition() -> None:
    """The screen keeps the candidates with the highest marginal non-domination frequency (stable order)."""
    bounds = torch.tensor([[0.0, 0.0], [6.0, 6.0]], dtype=torch.float64)
    pool = _pool(300)
    s = POM(bounds, candidate_pool=pool, gp_hyperparameters=_HYPER)
    s.tell(pool[:10], _omni(pool[:10]))
    models, yn, cu = s._fit(), s.standardized_Y(), s._unit(pool[10:])
    keep = marginal_pareto_screen(models, cu, yn, 30, 64, torch.Generator().manual_seed(5))
    g = torch.Generator().manual_seed(5)
    seed = int(torch.randint(2**31 - 1, (1,), generator=g))
    with torch.no_grad():
        post = [m.posterior(cu.unsqueeze(-2)) for m in models]
        mean = torch.stack([p.mean.reshape(-1) for p in post], -1)
        std = torch.stack([p.variance.reshape(-1).sqrt() for p in post], -1)
    z = torch.randn(64, *mean.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    draws = torch.cat([yn.expand(64, -1, -1), mean + std * z], 1)
    freq = non_dominated_samples(draws)[:, 10:].sum(0)
    assert keep.tolist() == torch.argsort(-freq.double(), stable=True)[:30].tolist()
    with pytest.raises(ValueError, match=r"^size"):
        marginal_pareto_screen(models, cu, yn, 0, 64, g)


@pytest.mark.parametrize("pending", ["joint", "incremental"])
def test_qlogehvi_pending_modes_and_screen(pending: str) -> None:
    """Both pending-point forms (joint qLogEHVI, incremental qLogNEHVI) give q distinct unevaluated pool
    points, and with a screen only points of the marginal screen (recomputed here from the same generator)."""
    bounds = torch.tensor([[0.0, 0.0], [6.0, 6.0]], dtype=torch.float64)
    pool = _pool(300)
    s = QLogEHVI(
        bounds,
        candidate_pool=pool,
        gp_hyperparameters=_HYPER,
        num_mc_samples=32,
        subset_size=1000,
        pending=pending,
        screen_size=40,
        screen_samples=64,
        generator=torch.Generator().manual_seed(2),
    )
    s.tell(pool[:10], _omni(pool[:10]))
    x = s.ask(4)
    assert x.shape == (4, 2) and torch.unique(x, dim=0).shape[0] == 4
    assert (torch.cdist(x, pool[:10]).amin(1) > 0).all()
    g = torch.Generator().manual_seed(2)
    keep = marginal_pareto_screen(s._fit(), s._unit(pool[10:]), s.standardized_Y(), 40, 64, g)
    screened = pool[10:][keep]
    assert (torch.cdist(x, screened, compute_mode="donot_use_mm_for_euclid_dist").amin(1) == 0).all()
    with pytest.raises(ValueError, match=r"^pending"):
        QLogEHVI(bounds, pending="greedy")


def test_qsvgd_batch_runs_decays_and_round_trips() -> None:
    bounds = torch.tensor([[0.0, 0.0], [6.0, 6.0]], dtype=torch.float64)
    pool = _pool(300)
    s = QSVGDBatch(
        bounds,
        candidate_pool=pool,
        gp_hyperparameters=_HYPER,
        num_mc_samples=16,
        screen_size=60,
        screen_samples=32,
        generator=torch.Generator().manual_seed(0),
    )
    s.tell(pool[:10], _omni(pool[:10]))
    etas = []
    for _ in range(2):
        x = s.ask(4)
        assert torch.unique(x, dim=0).shape[0] == 4 and s.last_info["candidates"] == 60
        etas.append(s.last_info["eta"])
        s.tell(x, _omni(x))
    assert etas == pytest.approx([1.0, 0.9], rel=1e-12)
    state = s.state_dict()
    t = QSVGDBatch(bounds, candidate_pool=pool, gp_hyperparameters=_HYPER, num_mc_samples=16, screen_size=60)
    t.load_state_dict(state)
    assert t.batches == 2 and torch.equal(t.ask(3), s.ask(3))
    with pytest.raises(ValueError, match=r"^decay"):
        QSVGDBatch(bounds, decay=1.5)
    with pytest.raises(ValueError, match=r"^eta0"):
        QSVGDBatch(bounds, eta0=0.0)
