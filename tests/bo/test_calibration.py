"""twCRPS closed form and quadrature, the generalised-normal family, LOO formulas and calibration metrics."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from scipy import integrate, stats

from optarium.bo.calibration import (
    CalibratedPredictive,
    brier_score,
    conditional_pit,
    crps_gaussian,
    gennorm_cdf,
    gennorm_expected_improvement,
    ks_uniform,
    log_h,
    loo_predictions,
    reliability_curve,
    twcrps,
    twcrps_gaussian,
    twcrps_gennorm,
    twcrps_quadrature,
)

D = torch.float64


def t64(v: float) -> torch.Tensor:
    return torch.tensor(v, dtype=D)


def _adaptive_twcrps(cdf, y: float, t: float, centre: float, width: float) -> float:
    """int_{-inf}^t (F(u) - 1{y <= u})^2 du by scipy.quad, split at y and around the predictive mass."""
    pts = sorted({min(y, t), *(min(centre + k * width, t) for k in (-10, -3, 0, 3, 10))})
    total = integrate.quad(
        lambda u: cdf(u) ** 2 if u < y else (cdf(u) - 1) ** 2,
        -math.inf,
        pts[0],
        epsabs=1e-15,
        epsrel=1e-13,
        limit=200,
    )[0]
    for a, b in itertools.pairwise(pts):
        if b > a:
            total += integrate.quad(
                lambda u: (cdf(u) - (1.0 if u >= y else 0.0)) ** 2,
                a,
                b,
                epsabs=1e-15,
                epsrel=1e-13,
                limit=200,
            )[0]
    if t > pts[-1]:
        total += integrate.quad(
            lambda u: (cdf(u) - (1.0 if u >= y else 0.0)) ** 2,
            pts[-1],
            t,
            epsabs=1e-15,
            epsrel=1e-13,
            limit=200,
        )[0]
    return total


CASES = [
    (0.0, 1.0, -12.0, 0.0),  # y far below the predictive mass (over-confident case)
    (0.3, 2.0, 1.5, 0.5),  # y > t
    (0.0, 1.0, 0.2, 40.0),  # t far above the mass
    (-1.0, 0.5, -1.2, -0.8),
    (2.0, 3.0, -4.0, 1.0),
    (0.0, 1.0, 3.0, -2.0),
]


@pytest.mark.parametrize(("m", "s", "y", "t"), CASES)
def test_twcrps_gaussian_closed_form_equals_adaptive_quadrature(
    m: float, s: float, y: float, t: float
) -> None:
    ref = _adaptive_twcrps(lambda u: stats.norm.cdf(u, m, s), y, t, m, s)
    got = float(twcrps_gaussian(t64(m), t64(s), t64(y), t))
    assert got == pytest.approx(ref, rel=1e-6, abs=1e-12 * s)


def test_twcrps_reference_value_and_truncation_would_fail() -> None:
    got = float(twcrps_gaussian(t64(0.0), t64(1.0), t64(-12.0), 0.0))
    assert got == pytest.approx(11.31896, abs=1e-5)
    # integrating from mu - 8 sigma drops the part below it: the check above must tell the difference
    trunc = integrate.quad(lambda u: (stats.norm.cdf(u) - 1.0) ** 2, -8.0, 0.0)[0]
    assert trunc == pytest.approx(7.31896, abs=1e-5)
    assert abs(trunc - got) > 1e-6 * got


def test_twcrps_infinite_threshold_is_crps_and_crps_matches_quadrature() -> None:
    gen = torch.Generator().manual_seed(0)
    m, s, y = (
        torch.randn(20, generator=gen, dtype=D),
        torch.rand(20, generator=gen, dtype=D) + 0.2,
        torch.randn(20, generator=gen, dtype=D) * 2,
    )
    tw = twcrps_gaussian(m, s, y, math.inf)
    cr = crps_gaussian(m, s, y)
    torch.testing.assert_close(tw, cr, rtol=1e-13, atol=1e-14)
    # a very high but finite threshold agrees too (no cancellation in the rearranged form)
    torch.testing.assert_close(twcrps_gaussian(m, s, y, 1e8), cr, rtol=1e-10, atol=1e-12)
    for i in range(3):
        ref = _adaptive_twcrps(
            lambda u, i=i: stats.norm.cdf(u, float(m[i]), float(s[i])),
            float(y[i]),
            math.inf,
            float(m[i]),
            float(s[i]),
        )
        assert float(cr[i]) == pytest.approx(ref, rel=1e-7)


def test_generic_quadrature_matches_gaussian_closed_form() -> None:
    gen = torch.Generator().manual_seed(1)
    n = 200
    m = torch.randn(n, generator=gen, dtype=D)
    s = torch.rand(n, generator=gen, dtype=D) * 2 + 0.05
    y = m + s * torch.randn(n, generator=gen, dtype=D) * 4
    t = m + s * torch.randn(n, generator=gen, dtype=D) * 3
    z = float(stats.norm.ppf(1e-10))
    q = twcrps_quadrature(
        lambda u: torch.special.ndtr((u - m[:, None]) / s[:, None]), y, t, m + z * s, m - z * s, m
    )
    closed = twcrps_gaussian(m, s, y, t)
    torch.testing.assert_close(q, closed, rtol=1e-8, atol=1e-12)
    # the over-confident reference case through the generic path
    q1 = twcrps_gennorm(t64(-12.0), t64(0.0), 1.0, 2.0)
    assert float(q1) == pytest.approx(11.318962927824689, rel=1e-12)


@pytest.mark.parametrize("beta", [1.0, 1.5, 3.0, 4.0])
def test_gennorm_quadrature_matches_adaptive_quadrature(beta: float) -> None:
    gen = torch.Generator().manual_seed(int(beta * 10))
    s = 0.7
    dist = stats.gennorm(beta, scale=s * math.sqrt(2))
    for _ in range(6):
        y = float(torch.randn((), generator=gen, dtype=D) * 2)
        t = float(torch.randn((), generator=gen, dtype=D) * 1.5)
        ref = _adaptive_twcrps(dist.cdf, y, t, 0.0, s)
        got = float(twcrps_gennorm(t64(y), t64(t), s, beta))
        assert got == pytest.approx(ref, rel=1e-7, abs=1e-12 * s)


def test_gennorm_cdf_matches_scipy_and_beta2_is_gaussian() -> None:
    z = torch.linspace(-6, 6, 41, dtype=D)
    for beta in (1.0, 1.5, 2.0, 3.0, 4.0):
        ref = stats.gennorm(beta, scale=0.8 * math.sqrt(2)).cdf(z.numpy())
        torch.testing.assert_close(gennorm_cdf(z, 0.8, beta), torch.as_tensor(ref), rtol=1e-10, atol=1e-14)
    torch.testing.assert_close(gennorm_cdf(z, 0.8, 2.0), torch.special.ndtr(z / 0.8), rtol=1e-10, atol=1e-15)


def test_twcrps_is_nonnegative_and_proper() -> None:
    gen = torch.Generator().manual_seed(3)
    y = torch.randn(40_000, generator=gen, dtype=D)  # truth N(0, 1)
    t = 0.3
    zero = t64(0.0)
    scores = {
        (mu, sd): float(twcrps_gaussian(zero + mu, zero + sd, y, t).mean())
        for mu in (-0.3, 0.0, 0.3)
        for sd in (0.6, 1.0, 1.6)
    }
    assert min(scores, key=scores.get) == (0.0, 1.0)
    assert min(scores.values()) >= 0.0
    assert float(twcrps_gaussian(zero, zero + 1, y, t).min()) >= 0.0


def test_twcrps_entry_point_uses_the_predictive_family() -> None:
    pred = CalibratedPredictive(t64(1.0).expand(3), t64(2.0).expand(3), s=1.5, beta=2.0)
    y = torch.tensor([0.0, 1.0, 4.0], dtype=D)
    torch.testing.assert_close(twcrps(pred, y, 2.0), twcrps_gaussian(t64(1.0), t64(3.0), y, 2.0))
    pg = CalibratedPredictive(t64(1.0).expand(3), t64(2.0).expand(3), s=1.5, beta=1.0)
    dist = stats.gennorm(1.0, loc=1.0, scale=2.0 * 1.5 * math.sqrt(2))
    for i in range(3):
        ref = _adaptive_twcrps(dist.cdf, float(y[i]), 2.0, 1.0, 3.0)
        assert float(twcrps(pg, y, 2.0)[i]) == pytest.approx(ref, rel=1e-7)
    with pytest.raises(TypeError, match=r"^pred:"):
        twcrps((1.0, 2.0), y, 0.0)  # type: ignore[arg-type]


@pytest.mark.parametrize("beta", [1.0, 1.5, 2.0, 3.0, 4.0])
def test_expected_improvement_closed_form_matches_quadrature(beta: float) -> None:
    s = 0.6
    dist = stats.gennorm(beta, scale=s * math.sqrt(2))
    c = torch.tensor([-3.0, -0.7, 0.0, 0.4, 2.5], dtype=D)
    ei = gennorm_expected_improvement(c, s, beta)
    for ci, e in zip(c.tolist(), ei.tolist(), strict=True):
        ref = integrate.quad(dist.cdf, -math.inf, ci, epsabs=1e-14, epsrel=1e-12)[0]
        assert e == pytest.approx(ref, rel=1e-5, abs=1e-14)
    assert (ei >= 0).all()
    if beta == 2.0:
        z = c / s
        torch.testing.assert_close(
            ei, s * (z * torch.special.ndtr(z) + torch.exp(-0.5 * z**2) / math.sqrt(2 * math.pi))
        )


def test_log_h_is_accurate_and_finite_far_in_the_tail() -> None:
    mpmath = pytest.importorskip("mpmath", reason="high-precision reference for log h")
    mpmath.mp.dps = 50
    z = torch.linspace(-40, 5, 200, dtype=D)
    ref = [float(mpmath.log(v * mpmath.ncdf(v) + mpmath.npdf(v))) for v in map(mpmath.mpf, z.tolist())]
    torch.testing.assert_close(log_h(z), torch.tensor(ref, dtype=D), rtol=1e-9, atol=1e-10)
    far = log_h(torch.tensor([-50.0, -1e3, -1e5], dtype=D))
    assert torch.isfinite(far).all() and (far.diff() < 0).all()
    zz = torch.tensor([-2.0, 0.5], dtype=D, requires_grad=True)
    (g,) = torch.autograd.grad(log_h(zz).sum(), zz)
    assert torch.isfinite(g).all() and (g > 0).all()


def _matern52(x1: torch.Tensor, x2: torch.Tensor, ls: float) -> torch.Tensor:
    r = torch.cdist(x1, x2) / ls
    return (1 + math.sqrt(5) * r + 5 * r**2 / 3) * torch.exp(-math.sqrt(5) * r)


@pytest.mark.parametrize(("ls", "rtol"), [(0.3, 1e-6), (1.5, 1e-5)])
def test_loo_closed_form_equals_refitting(ls: float, rtol: float) -> None:
    gen = torch.Generator().manual_seed(4)
    x = torch.rand(25, 2, generator=gen, dtype=D)
    y = torch.sin(5 * x[:, 0]) + x[:, 1] ** 2
    K = _matern52(x, x, ls) + 1e-8 * torch.eye(25, dtype=D)
    for mean in (0.4, None):
        mu, sd = loo_predictions(K, y, mean=mean)
        for i in (0, 7, 24):
            keep = torch.arange(25) != i
            Ki = K[keep][:, keep]
            ki = K[i, keep]
            one = torch.ones(24, dtype=D)
            if mean is None:  # universal kriging: constant mean re-estimated without point i
                a = torch.linalg.solve(Ki, torch.stack([y[keep], one], -1))
                m_hat = (one @ a[:, 0]) / (one @ a[:, 1])
                w = torch.linalg.solve(Ki, ki)
                u = 1 - one @ w
                var = K[i, i] - ki @ w + u**2 / (one @ a[:, 1])
            else:
                m_hat = torch.tensor(mean, dtype=D)
                var = K[i, i] - ki @ torch.linalg.solve(Ki, ki)
            pred = m_hat + ki @ torch.linalg.solve(Ki, y[keep] - m_hat)
            assert float(mu[i]) == pytest.approx(float(pred), rel=rtol, abs=rtol)
            assert float(sd[i]) == pytest.approx(float(var.sqrt()), rel=rtol)


def test_loo_bad_input() -> None:
    K = torch.eye(3, dtype=D)
    with pytest.raises(ValueError, match=r"^K:"):
        loo_predictions(torch.eye(4, dtype=D), torch.zeros(3, dtype=D))
    with pytest.raises(ValueError, match=r"^y:"):
        loo_predictions(K, torch.tensor([0.0, math.nan, 1.0], dtype=D))


def test_ks_brier_reliability_and_conditional_pit() -> None:
    gen = torch.Generator().manual_seed(5)
    u = torch.rand(500, generator=gen, dtype=D)
    assert float(ks_uniform(u)) == pytest.approx(stats.kstest(u.numpy(), "uniform").statistic, rel=1e-12)
    p = torch.tensor([0.0, 1.0, 0.5, 0.25], dtype=D)
    e = torch.tensor([False, True, True, False])
    assert float(brier_score(p, e)) == pytest.approx((0 + 0 + 0.25 + 0.0625) / 4)
    mean_p, freq, count = reliability_curve(p, e, bins=4)
    assert count.tolist() == [1.0, 1.0, 1.0, 1.0] and freq.tolist() == [0.0, 0.0, 1.0, 1.0]
    assert mean_p.tolist() == [0.0, 0.25, 0.5, 1.0]
    # data drawn from the predictive itself: the conditional PIT is uniform on {y <= t}
    n = 20_000
    mean = torch.randn(n, generator=gen, dtype=D)
    sd = torch.rand(n, generator=gen, dtype=D) + 0.5
    y = mean + sd * torch.randn(n, generator=gen, dtype=D)
    good = conditional_pit(CalibratedPredictive(mean, sd), y, -0.5)
    bad = conditional_pit(CalibratedPredictive(mean, 0.5 * sd), y, -0.5)
    assert good.numel() == int((y <= -0.5).sum())
    assert float(ks_uniform(good)) < 0.03 < float(ks_uniform(bad))
