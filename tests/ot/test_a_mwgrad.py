"""MWGraD / A-MWGraD (optarium.ot.a_mwgrad): estimators, min-norm weights, limit cases, acceleration."""

from __future__ import annotations

import math
import statistics

import pytest
import torch

from optarium.ot.a_mwgrad import (
    AcceleratedMWGraD,
    MWGraD,
    frank_wolfe_min_norm,
    gaussian_score,
    kde_score,
    median_bandwidth,
    min_norm_gram,
    rbf_kernel,
    svgd_field,
)

torch.set_num_threads(1)
F64 = torch.float64


def _targets(means: torch.Tensor, cov: torch.Tensor) -> tuple[list, list]:
    P = torch.linalg.inv(cov)

    def lp(m: torch.Tensor) -> object:
        return lambda x: -0.5 * (((x - m) @ P) * (x - m)).sum(-1)

    def sc(m: torch.Tensor) -> object:
        return lambda x: -(x - m) @ P

    return [lp(m) for m in means], [sc(m) for m in means]


def _X(seed: int, n: int = 60, d: int = 2, scale: float = 3.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return scale * torch.randn(n, d, generator=g, dtype=F64)


MEANS3 = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]], dtype=F64)


def test_kernel_scores_match_autograd() -> None:
    """The KDE score and the SVGD field equal their definitions differentiated by autograd."""
    X = _X(0, n=30)
    h = median_bandwidth(X)
    Kmat, _ = rbf_kernel(X, h)
    Y = X.detach()
    x = X.clone().requires_grad_(True)
    k = torch.exp(-((x.unsqueeze(1) - Y.unsqueeze(0)) ** 2).sum(-1) / (2 * h * h))  # k(x_i, y_j)
    (g,) = torch.autograd.grad(k.sum(-1).log().sum(), x)
    torch.testing.assert_close(kde_score(X, Kmat, h), g, rtol=1e-12, atol=1e-12)
    # SVGD: (1/n) sum_j [k(x_j, x_i) grad V(x_j) - grad_{x_j} k(x_j, x_i)]
    gV = torch.randn(2, 30, 2, dtype=F64, generator=torch.Generator().manual_seed(1))
    y = X.clone().requires_grad_(True)  # differentiate in the first argument x_j
    kk = torch.exp(-((y.unsqueeze(1) - Y.unsqueeze(0)) ** 2).sum(-1) / (2 * h * h))  # [j, i]
    rep_i = torch.stack(
        [torch.autograd.grad(kk[:, i].sum(), y, retain_graph=True)[0].sum(0) for i in range(30)]
    )  # sum_j grad_{x_j} k(x_j, x_i), per i
    want = (torch.einsum("ji,kjd->kid", Kmat, gV) - rep_i) / 30
    torch.testing.assert_close(svgd_field(X, Kmat, h, gV), want, rtol=1e-12, atol=1e-12)


def test_median_bandwidth_positive_and_linear_in_scale() -> None:
    X = _X(2, n=50)
    h = median_bandwidth(X)
    assert float(h) > 0
    torch.testing.assert_close(median_bandwidth(3.7 * X), 3.7 * h, rtol=1e-12, atol=0)
    assert float(median_bandwidth(torch.zeros(5, 2, dtype=F64))) == 1.0  # coinciding particles


@pytest.mark.parametrize("K", [2, 3, 4, 5])
def test_min_norm_weights_match_exact_qp(K: int) -> None:
    """Exact weights: on the simplex, KKT-optimal, and lambda'Q lambda equals cvxpy's QP optimum."""
    cp = pytest.importorskip("cvxpy", reason="cvxpy (test extra) is the exact QP reference")
    for seed in range(3):
        g = torch.Generator().manual_seed(10 * K + seed)
        xi = torch.randn(K, 40, 3, generator=g, dtype=F64) + torch.randn(1, 40, 3, generator=g, dtype=F64)
        s = MWGraD([lambda x: -(x**2).sum(-1)] * K)
        s.wasserstein_gradients = lambda X, xi=xi: xi  # type: ignore[method-assign]
        _, lam, S = s.direction(torch.zeros(40, 3, dtype=F64))
        Q = min_norm_gram(xi)
        assert float(lam.min()) >= 0 and abs(float(lam.sum()) - 1) < 1e-12
        Ql = Q @ lam
        # optimality <xi_lam, xi_k - xi_lam> >= -tol for every k
        assert float((Ql - lam @ Ql).min()) >= -1e-8 * float(Q.diagonal().max())
        w = cp.Variable(K)
        Qn = Q.numpy()
        prob = cp.Problem(cp.Minimize(cp.quad_form(w, cp.psd_wrap(Qn))), [w >= 0, cp.sum(w) == 1])
        prob.solve(solver=cp.CLARABEL)
        assert float(S) <= prob.value + 1e-8 * float(Q.diagonal().max())
        fw = frank_wolfe_min_norm(Q, max_iter=20000, rtol=1e-6)
        assert float(fw @ Q @ fw) - float(S) <= 1e-6 * float(Q.diagonal().max())


def test_k2_closed_form_equals_enumeration() -> None:
    from optarium.bilevel.chebyshev import min_norm_weights

    g = torch.Generator().manual_seed(3)
    G = torch.randn(2, 50, generator=g, dtype=F64)
    lam = min_norm_weights(G)
    # the K = 2 face enumeration by hand: vertices and the interior point
    Q = G @ G.T
    t = (Q[1, 1] - Q[0, 1]) / (Q[0, 0] + Q[1, 1] - 2 * Q[0, 1])
    cands = [torch.tensor([1.0, 0.0], dtype=F64), torch.tensor([0.0, 1.0], dtype=F64)]
    if 0 <= t <= 1:
        cands.append(torch.stack([t, 1 - t]))
    best = min(cands, key=lambda c: float(c @ Q @ c))
    torch.testing.assert_close(lam, best, rtol=0, atol=1e-12)


def test_single_target_is_the_plain_flow() -> None:
    """K = 1: MWGraD is x <- x - eta (KDE score + grad V), and the SVGD estimator is an SVGD step."""
    lps, _ = _targets(MEANS3[1:2], torch.eye(2, dtype=F64))
    X0 = _X(4)
    for est in ("blob", "svgd"):
        X = X0.clone()
        MWGraD(lps, score_estimator=est, step_size=0.1).step(X)
        h = median_bandwidth(X0)
        Kmat, _ = rbf_kernel(X0, h)
        gV = (X0 - MEANS3[1]).unsqueeze(0)
        xi = kde_score(X0, Kmat, h) + gV[0] if est == "blob" else svgd_field(X0, Kmat, h, gV)[0]
        torch.testing.assert_close(X, X0 - 0.1 * xi, rtol=1e-13, atol=1e-13)


def test_identical_targets_flow_equals_single_target_flow() -> None:
    lps, scs = _targets(MEANS3[:1], torch.eye(2, dtype=F64))
    for cls in (MWGraD, AcceleratedMWGraD):
        one = cls(lps, scores=scs, step_size=0.05).run(_X(5), 40, measure=False).x
        three = cls(lps * 3, scores=scs * 3, step_size=0.05).run(_X(5), 40, measure=False).x
        torch.testing.assert_close(three, one, rtol=1e-10, atol=1e-10)


def test_zero_momentum_is_mwgrad() -> None:
    lps, scs = _targets(MEANS3, torch.eye(2, dtype=F64))
    a = AcceleratedMWGraD(lps, scores=scs, damping=("constant", 0.0), step_size=0.05)
    b = MWGraD(lps, scores=scs, step_size=0.05)
    torch.testing.assert_close(a.run(_X(6), 30).x, b.run(_X(6), 30).x, rtol=1e-12, atol=1e-12)
    ha, hb = a.history.history.metrics, b.history.history.metrics
    for name in hb:
        torch.testing.assert_close(torch.tensor(ha[name]), torch.tensor(hb[name]), rtol=1e-10, atol=1e-14)


def test_gaussian_score_recovers_target_moments() -> None:
    """Exact Gaussian score: mean and covariance converge to the target's (relative error < 2 %)."""
    m = torch.tensor([1.0, -2.0], dtype=F64)
    cov = torch.tensor([[2.0, 0.6], [0.6, 0.5]], dtype=F64)
    lps, scs = _targets(m.unsqueeze(0), cov)
    for cls in (MWGraD, AcceleratedMWGraD):
        X = cls(lps, scores=scs, score_estimator="gaussian", step_size=0.05).run(_X(7, n=200), 400).x
        Xc = X - X.mean(0)
        assert float((X.mean(0) - m).norm() / m.norm()) < 0.02
        assert float((Xc.T @ Xc / X.shape[0] - cov).norm() / cov.norm()) < 0.02
    torch.testing.assert_close(gaussian_score(X), -(X - X.mean(0)) @ torch.linalg.inv(Xc.T @ Xc / 200))


def _kl(X: torch.Tensor, m: torch.Tensor, cov: torch.Tensor) -> float:
    from optarium.ot.a_mwgrad import gaussian_kl

    return gaussian_kl(X, m, cov)


def test_acceleration_on_an_ill_conditioned_gaussian() -> None:
    """kappa = 100, exact Gaussian score, eta = 0.004: A-MWGraD needs <= half MWGraD's iterations to
    KL <= 1e-2 (median over 10 seeds) and has the lower KL at iteration 200 in >= 9 of 10 seeds."""
    m = torch.tensor([1.0, 1.0], dtype=F64)
    cov = torch.diag(torch.tensor([1.0, 0.01], dtype=F64))
    lps, scs = _targets(m.unsqueeze(0), cov)
    cap = 600
    iters: dict[str, list[int]] = {"a": [], "mw": []}
    kl200: dict[str, list[float]] = {"a": [], "mw": []}
    for seed in range(10):
        for key, cls in (("a", AcceleratedMWGraD), ("mw", MWGraD)):
            s = cls(lps, scores=scs, score_estimator="gaussian", step_size=0.004)
            X = _X(seed, n=200)
            hit = cap
            for k in range(1, cap + 1):
                s.step(X)
                kl = _kl(X, m, cov) if (k % 10 == 0 or k == 200) else math.inf
                if k == 200:
                    kl200[key].append(kl)
                if kl <= 1e-2:
                    hit = k
                    break
            if hit < 200:
                for _ in range(200 - hit):
                    s.step(X)
                kl200[key].append(_kl(X, m, cov))
            iters[key].append(hit)
    ratio = statistics.median(a / b for a, b in zip(iters["a"], iters["mw"], strict=True))
    assert ratio <= 0.5, (iters, ratio)
    assert sum(a < b for a, b in zip(kl200["a"], kl200["mw"], strict=True)) >= 9, kl200


def test_restart_fires_when_momentum_points_uphill() -> None:
    lps, scs = _targets(MEANS3, torch.eye(2, dtype=F64))
    s = AcceleratedMWGraD(lps, scores=scs, step_size=0.05)
    X = _X(8)
    s.step(X)
    s.step(X)
    d, _, _ = s.direction(X)
    s.velocity = d.clone()  # uphill on purpose
    s.k = 10
    X_before = X.clone()
    s.step(X)
    assert s.n_restarts == 1 and s.k == 2
    torch.testing.assert_close(s.velocity, -math.sqrt(0.05) * d)
    torch.testing.assert_close(X, X_before - 0.05 * d)
    s2 = AcceleratedMWGraD(lps, scores=scs, step_size=0.05, restart=False)
    s2.velocity, s2.k = d.clone(), 10
    s2.step(X_before.clone())
    assert s2.n_restarts == 0


@pytest.mark.parametrize("momentum", ["heavy_ball", "nesterov"])
def test_long_run_stays_finite_and_stationary(momentum: str) -> None:
    lps, scs = _targets(MEANS3, torch.eye(2, dtype=F64))
    s = AcceleratedMWGraD(lps, scores=scs, step_size=0.1, momentum=momentum)
    res = s.run(_X(9, n=40), 600, measure=False, record_every=50)
    assert res.status == "max_iter"
    assert bool(torch.isfinite(res.x).all())
    assert res.value < 1e-4  # Pareto-stationary up to the KDE floor
    assert s.n_restarts >= 1


def test_strong_damping_converges_and_state_dict_round_trip() -> None:
    lps, scs = _targets(MEANS3, torch.eye(2, dtype=F64))
    kw = {"scores": scs, "score_estimator": "gaussian", "step_size": 0.05, "damping": ("strong", 1.0)}
    s = AcceleratedMWGraD(lps, **kw)
    X = _X(10)
    for _ in range(10):
        s.step(X)
    state, X_mid = s.state_dict(), X.clone()
    for _ in range(5):
        s.step(X)
    t = AcceleratedMWGraD(lps, **kw)
    t.load_state_dict(state)
    for _ in range(5):
        t.step(X_mid)
    assert torch.equal(X, X_mid)
    assert s.run(_X(10), 300, measure=False).value < 1e-8


def test_dtype_follows_input() -> None:
    lps, _ = _targets(MEANS3.float(), torch.eye(2))
    res = AcceleratedMWGraD(lps, step_size=0.05).run(_X(11).float(), 5)
    assert res.x.dtype == torch.float32


def test_bad_input_raises() -> None:
    lps, scs = _targets(MEANS3, torch.eye(2, dtype=F64))
    with pytest.raises(ValueError, match=r"^log_probs"):
        MWGraD([])
    with pytest.raises(ValueError, match=r"^step_size"):
        MWGraD(lps, step_size=0.0)
    with pytest.raises(ValueError, match=r"^step_size"):
        AcceleratedMWGraD(lps, step_size=-1.0)
    with pytest.raises(ValueError, match=r"^score_estimator"):
        MWGraD(lps, score_estimator="kde")
    with pytest.raises(ValueError, match=r"^damping"):
        AcceleratedMWGraD(lps, damping=("constant", 1.0))
    with pytest.raises(ValueError, match=r"^scores"):
        MWGraD(lps, scores=scs[:2])
    with pytest.raises(TypeError, match=r"^log_probs"):
        MWGraD([1.0])
    X = _X(12)
    X[3, 1] = math.nan
    with pytest.raises(ValueError, match=r"^X"):
        MWGraD(lps).step(X)
    with pytest.raises(ValueError):  # particles in 3-D for 2-D targets
        MWGraD(lps).step(_X(12, d=3))
    with pytest.raises(ValueError, match=r"^scores"):
        MWGraD(lps, scores=[lambda x: x[:, :1]] * 3).step(_X(12))


def test_divergence_is_reported_not_raised() -> None:
    """A step far above 2/L blows the particles up: status diverged, huge value, no exception."""
    lps, scs = _targets(MEANS3, torch.eye(2, dtype=F64))
    for measure in (True, False):
        s = MWGraD(lps, scores=scs, score_estimator="gaussian", step_size=1e3)
        res = s.run(_X(13), 500, measure=measure)
        assert res.status == "diverged" and res.value > 1e12 and res.n_iter < 500
