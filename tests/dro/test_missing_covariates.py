"""Missing-covariate DRO (optarium.dro.missing_covariates): the spec's tests 1-6 and 8, exact references."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from optarium.dro.missing_covariates import (
    MissingCovariateDRO,
    block_radii,
    newsvendor_cost,
    robust_grid_search,
)

COST = newsvendor_cost(1.0, 4.0)
Y5 = np.arange(5.0)


def _smallest_argmin(values: np.ndarray) -> int:
    return int(np.flatnonzero(values <= values.min() + 1e-9)[0])


def _sample(n: int, seed: int, miss_rate: float = 0.3) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = np.stack([rng.integers(0, 2, n), rng.integers(0, 2, n)], 1).astype(np.float64)
    y = np.minimum(rng.poisson(0.8 + X[:, 0] + 1.5 * X[:, 1]), 4).astype(np.float64)
    X[rng.random(n) < miss_rate, 1] = np.nan
    return X, y


def _population() -> tuple[np.ndarray, np.ndarray]:
    """A known joint law P(x1, x2, y) on 2 x 2 x 5 cells."""
    rng = np.random.default_rng(7)
    P = rng.random((2, 2, 5)) + 0.05
    return P / P.sum(), Y5


def _observed_rows(P: np.ndarray, pi: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Population-level observed rows under MCAR (X2 missing with probability pi) and their weights."""
    X, y, w = [], [], []
    for a, b, j in itertools.product(range(2), range(2), range(5)):
        X.append([a, b])
        y.append(j)
        w.append((1 - pi) * P[a, b, j])
    for a, j in itertools.product(range(2), range(5)):
        X.append([a, math.nan])
        y.append(j)
        w.append(pi * P[a, :, j].sum())
    return np.array(X, dtype=np.float64), np.array(y, dtype=np.float64), np.array(w)


def test_no_missing_data_is_conditional_saa() -> None:
    """Test 1: complete data, r = 0, unrestricted -> the per-cell empirical 0.8-quantile (smallest argmin)."""
    X, y = _sample(60, 0, miss_rate=0.0)
    model = MissingCovariateDRO(COST, decisions=Y5, outcomes=Y5, radius=0.0, mechanism="unrestricted")
    model.fit(X, y)
    for a, b in itertools.product(range(2), range(2)):
        rows = y[(X[:, 0] == a) & (X[:, 1] == b)]
        saa = COST(Y5, rows).mean(-1)
        dec = model.decide([a, b])
        assert dec.z == Y5[_smallest_argmin(saa)]
        assert dec.worst_case_cost == pytest.approx(saa.min(), abs=1e-8)


def test_mcar_population_recovers_the_true_conditional_decision() -> None:
    """Test 2: MCAR with the exact propensity, r = 0, population-level observed law -> the true P."""
    P, _ = _population()
    X, y, w = _observed_rows(P, 0.3)
    model = MissingCovariateDRO(COST, decisions=Y5, outcomes=Y5, radius=0.0, mechanism="mcar")
    model.fit(X, y, sample_weight=w)
    for a, b in itertools.product(range(2), range(2)):
        law = P[a, b] / P[a, b].sum()
        true_cost = COST(Y5, Y5) @ law
        dec = model.decide([a, b])
        assert dec.z == Y5[_smallest_argmin(true_cost)]
        assert dec.worst_case_cost == pytest.approx(true_cost.min(), abs=1e-7)
        np.testing.assert_allclose(dec.worst_case_distribution.numpy(), law, atol=1e-7)


def test_mcar_sampled_at_the_smallest_feasible_radius_is_near_complete_case_saa() -> None:
    """Test 2 (sampled data): at r_min the set is non-empty; the decision is within one grid step of CC-SAA.

    With fixed block masses the exact MCAR equalities also fix each x1's missing fraction, which a sample
    never meets, so the set is empty for every radius; the slack tau is the largest gap between a pattern's
    frequency within an x1 level and overall (+0.01), and r_min is computed at that slack.
    """
    X, y = _sample(400, 1)
    miss = np.isnan(X[:, 1])
    tau = max(abs(miss[X[:, 0] == a].mean() - miss.mean()) for a in (0, 1)) + 0.01
    kw = dict(decisions=Y5, outcomes=Y5, mechanism="mcar")
    exact = MissingCovariateDRO(COST, radius=0.0, **kw).fit(X, y)
    assert exact.decide([0, 0]).status == "infeasible"
    assert exact.min_feasible_radius() == math.inf
    model = MissingCovariateDRO(COST, radius=0.0, mcar_slack=tau, **kw).fit(X, y)
    r_min = model.min_feasible_radius()
    assert 0 < r_min < 1
    assert model.decide([0, 0]).status == "infeasible"
    model = MissingCovariateDRO(COST, radius=r_min + 1e-6, mcar_slack=tau, **kw).fit(X, y)
    for a, b in itertools.product(range(2), range(2)):
        rows = y[~miss & (X[:, 0] == a) & (X[:, 1] == b)]
        cc = Y5[_smallest_argmin(COST(Y5, rows).mean(-1))]
        dec = model.decide([a, b])
        assert dec.status == "optimal" and abs(dec.z - cc) <= 1.0


def test_true_law_is_inside_the_set() -> None:
    """Test 3: true block masses, radii >= W1(true, empirical) per block, (a, b) around the true
    propensities -> the worst case dominates the true conditional cost for every context and decision."""
    P, _ = _population()
    pi = np.array([0.2, 0.5])  # P(X2 missing | x1): MAR, inside (0.1, 0.7)
    rng = np.random.default_rng(3)
    n = 300
    flat = rng.choice(20, size=n, p=P.reshape(-1))
    a_, b_, j_ = np.unravel_index(flat, P.shape)
    miss = rng.random(n) < pi[a_]
    X = np.stack([a_, b_], 1).astype(np.float64)
    X[miss, 1] = np.nan
    y = j_.astype(np.float64)
    # reweight rows so that every block has its true mass; the exact W1 radii of the conditional laws
    true_block: dict[tuple[int, int], np.ndarray] = {}
    for a in range(2):
        for b in range(2):
            true_block[(a, b)] = (1 - pi[a]) * P[a, b]
        true_block[(a, -1)] = pi[a] * P[a].sum(0)
    keys = [(int(r[0]), -1 if np.isnan(r[1]) else int(r[1])) for r in X]
    w = np.array([true_block[k].sum() / keys.count(k) for k in keys])
    model = MissingCovariateDRO(COST, decisions=Y5, outcomes=Y5, radius=0.0, propensity_bounds=(0.1, 0.7))
    model.fit(X, y, sample_weight=w)
    radii = []
    for g, code in model.blocks_:
        key = (code[0], -1 if g else code[1])
        emp = np.bincount(y[[k == key for k in keys]].astype(int), minlength=5).astype(np.float64)
        tru = true_block[key] / true_block[key].sum()
        radii.append(np.abs(np.cumsum(emp / emp.sum()) - np.cumsum(tru))[:-1].sum() + 1e-9)
    model = MissingCovariateDRO(
        COST, decisions=Y5, outcomes=Y5, radius=radii, propensity_bounds=(0.1, 0.7)
    ).fit(X, y, sample_weight=w)
    for a, b in itertools.product(range(2), range(2)):
        law = P[a, b] / P[a, b].sum()
        for z in (0.0, 1.5, 3.0):
            status, val, _ = model.worst_case([a, b], z)
            assert status == "optimal" and val >= float(COST(z, Y5) @ law) - 1e-8


def test_worst_case_is_monotone_in_radius_and_bounds() -> None:
    """Test 4: non-decreasing in every r_B and in widening [a, b]."""
    X, y = _sample(120, 2)
    prev = -math.inf
    for r in (0.2, 0.4, 0.8):
        model = MissingCovariateDRO(COST, decisions=Y5, outcomes=Y5, radius=r, propensity_bounds=(0.1, 0.7))
        _, val, _ = model.fit(X, y).worst_case([1, 0], 2.0)
        assert val >= prev - 1e-9
        prev = val
    prev = -math.inf
    for ab in ((0.2, 0.5), (0.1, 0.7), (0.0, 1.0)):
        model = MissingCovariateDRO(COST, decisions=Y5, outcomes=Y5, radius=0.3, propensity_bounds=ab)
        _, val, _ = model.fit(X, y).worst_case([1, 0], 2.0)
        assert val >= prev - 1e-9
        prev = val
    for tv in (0.05, 0.1, 0.2):
        model = MissingCovariateDRO(COST, decisions=Y5, outcomes=Y5, divergence="tv", radius=tv)
        _, val, _ = model.fit(X, y).worst_case([1, 0], 2.0)
        assert val >= prev - 1e-9 or tv == 0.05
        prev = val


def test_manski_limit_matches_enumeration() -> None:
    """Test 5: a = 0, b = 1, r = 0 on K = 2, |Y| = 3: the worst case is the best vertex allocation."""
    X = np.array([[0.0], [0.0], [1.0], [1.0], [np.nan], [np.nan], [np.nan], [0.0], [1.0]])
    y = np.array([0.0, 1.0, 2.0, 0.0, 2.0, 0.0, 1.0, 0.0, 1.0])
    ys = np.arange(3.0)
    model = MissingCovariateDRO(COST, decisions=ys, outcomes=ys, radius=0.0, mechanism="unrestricted")
    model.fit(X, y)
    n = len(y)
    for cell in (0, 1):
        p0 = np.array([np.sum((X[:, 0] == cell) & (y == j)) for j in range(3)]) / n
        mis = np.array([np.sum(np.isnan(X[:, 0]) & (y == j)) for j in range(3)]) / n
        for z in (0.0, 0.5, 1.0, 2.0):
            c = COST(z, ys)
            best, best_law = -math.inf, None
            for s in itertools.product((0.0, 1.0), repeat=3):
                m = p0 + np.array(s) * mis
                val = float(m @ c / m.sum())
                if val > best:
                    best, best_law = val, m / m.sum()
            status, val, law = model.worst_case([float(cell)], z)
            assert status == "optimal" and val == pytest.approx(best, abs=1e-9)
            if z == 0.0:
                np.testing.assert_allclose(law / law.sum(), best_law, atol=1e-8)


@pytest.mark.parametrize("divergence", ["w1", "tv"])
def test_dual_lp_equals_grid_of_inner_lps_cvxpy(divergence: str) -> None:
    """Test 6: the dualised single LP + grid snap (HiGHS) = min over the grid of inner LPs (cvxpy)."""
    X, y = _sample(80, 4)
    grid = np.arange(0.0, 4.01, 0.5)
    kw = dict(decisions=grid, outcomes=Y5, divergence=divergence, radius=0.2, propensity_bounds=(0.1, 0.7))
    fast = MissingCovariateDRO(COST, **kw).fit(X, y)
    ref = MissingCovariateDRO(COST, solver="cvxpy", **kw).fit(X, y)
    for ctx in ([1, 1],):
        dec = fast.decide(ctx)
        res = robust_grid_search(ref, ctx)
        assert res.status == "converged" and res.n_iter == len(grid)
        assert dec.z == float(res.x)
        assert dec.worst_case_cost == pytest.approx(res.value, abs=1e-7)
        # the dual LP's continuous minimum equals the inner LP at that decision, below the grid minimum
        _, val, _ = ref.worst_case(ctx, dec.continuous_z)
        _, dual_val, _, _ = fast._dual(fast._context(ctx))
        assert dual_val == pytest.approx(val, abs=1e-7)
        assert dual_val <= res.value + 1e-9


def test_policy_and_joint_certificate() -> None:
    """The joint-policy LP is a Result; its value is the joint worst case of its own policy and no larger than
    that of the per-context decisions."""
    X, y = _sample(100, 5)
    model = MissingCovariateDRO(COST, decisions=Y5, outcomes=Y5, radius=0.3).fit(
        X, torch.as_tensor(y, dtype=torch.float32)
    )
    res = model.fit_policy()
    assert res.status == "converged" and res.x.dtype == torch.float32 and res.x.shape == (4,)
    status, val = model.joint_worst_case(res.x.double().numpy())
    assert status == "optimal" and val == pytest.approx(res.value, rel=1e-6)
    per_ctx = [model.decide(list(c)).z for c in model.cells_]
    assert model.joint_worst_case(per_ctx)[1] >= res.value - 1e-7


def test_block_radii_bootstrap_and_formula() -> None:
    counts = np.array([[5.0, 3.0, 2.0], [1.0, 0.0, 9.0]])
    r = block_radii(counts, np.arange(3.0), rng=0)
    assert r.shape == (2,) and (r > 0).all()
    assert np.array_equal(r, block_radii(counts, np.arange(3.0), rng=0))
    f = block_radii(counts, np.arange(3.0), divergence="tv", method="formula", confidence=0.9)
    np.testing.assert_allclose(f, 0.5 * np.sqrt((6 * math.log(2) + 2 * math.log(2 / 0.1)) / 10.0))


def test_bad_input() -> None:
    """Test 8: bad arguments raise naming the argument; an unseen context warns; NaN outcomes raise."""
    with pytest.raises(ValueError, match=r"^propensity_bounds"):
        MissingCovariateDRO(COST, propensity_bounds=(0.7, 0.1))
    with pytest.raises(ValueError, match=r"^propensity_bounds"):
        MissingCovariateDRO(COST, propensity_bounds=(-0.1, 0.5))
    with pytest.raises(ValueError, match=r"^propensity_bounds"):
        MissingCovariateDRO(COST, propensity_bounds=(0.1, 1.5))
    with pytest.raises(ValueError, match=r"^radius"):
        MissingCovariateDRO(COST, radius=-0.1)
    with pytest.raises(TypeError, match=r"^cost"):
        MissingCovariateDRO(lambda z, y: 0.0)  # type: ignore[arg-type]
    X, y = _sample(30, 6)
    y_bad = y.copy()
    y_bad[0] = np.nan
    with pytest.raises(ValueError, match=r"^y"):
        MissingCovariateDRO(COST, outcomes=Y5).fit(X, y_bad)
    keep = ~((X[:, 0] == 1) & (X[:, 1] == 1))  # no complete row of context (1, 1)
    model = MissingCovariateDRO(COST, decisions=Y5, outcomes=Y5, radius=0.5, mechanism="unrestricted")
    model.fit(X[keep], y[keep], sample_weight=None)
    with pytest.warns(UserWarning, match="no complete training row"):
        dec = model.decide([1, 1])
    assert dec.status == "optimal" and math.isfinite(dec.worst_case_cost)
    with pytest.raises(ValueError, match=r"^x"):
        model.decide([1, 5])
    with pytest.raises(ValueError, match=r"^max_iter"):
        robust_grid_search(model, [0, 0], max_iter=-1)


@pytest.mark.slow
def test_tv_formula_certificate_is_reliable() -> None:
    """Test 7: per-block TV radii from the concentration bound at level beta/B (5 outcome levels, n = 500,
    MNAR through Y inside the bounds): the joint certificate of the robust decisions covers their true
    expected cost in >= 1 - beta - 0.03 of 200 repetitions; the certificate stays below the trivial bound
    (coverage alone holds for any over-large set, so the OOS cost relative to the true optimum is checked).
    """
    P, _ = _population()
    px = P.sum(2).reshape(-1)
    laws = (P / P.sum(2, keepdims=True)).reshape(4, 5)
    cost = COST(Y5, Y5)  # (decision, y)
    best = (px * (cost @ laws.T).min(0)).sum()
    covered, ratios, rel_cost = 0, [], []
    for rep in range(200):
        rng = np.random.default_rng(1000 + rep)
        flat = rng.choice(20, size=500, p=P.reshape(-1))
        a_, b_, j_ = np.unravel_index(flat, P.shape)
        miss = rng.random(500) < np.where(j_ < 2, 0.2, 0.5)
        X = np.stack([a_, b_], 1).astype(np.float64)
        X[miss, 1] = np.nan
        model = MissingCovariateDRO(
            COST, decisions=Y5, outcomes=Y5, divergence="tv", radius="formula", confidence=0.9,
            propensity_bounds=(0.1, 0.7), levels=[[0.0, 1.0], [0.0, 1.0]],
        ).fit(X, j_.astype(np.float64))  # fmt: skip
        z = np.array([model.decide([float(c[0]), float(c[1])]).z for c in model.cells_])
        status, cert = model.joint_worst_case(z)
        true_cost = float(px @ np.array([cost[int(z[c])] @ laws[c] for c in range(4)]))
        covered += status == "optimal" and cert >= true_cost
        ratios.append(cert / float(px @ cost[z.astype(int)].max(1)))
        rel_cost.append(true_cost / best)
    assert covered / 200 >= 1 - 0.1 - 0.03
    assert float(np.median(ratios)) < 1.0
    assert float(np.mean(rel_cost)) < 1.5
