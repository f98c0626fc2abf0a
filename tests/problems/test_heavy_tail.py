"""Heavy-tailed noise samplers: distribution, moments, tails, reproducibility (spec test 5)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats
import torch

from optarium.problems.heavy_tail import (
    AlphaStableNoise,
    StudentTNoise,
    SubWeibullNoise,
    alpha_stable,
    chambers_mallows_stuck,
    student_t,
    student_t_abs_moment,
    student_t_pbcm_sigma,
    sub_weibull,
    sub_weibull_abs_moment,
    sub_weibull_sigma,
)

NAN = math.nan


@pytest.mark.parametrize("nu", [1.5, 3.0])
def test_student_t_matches_scipy_distribution(nu: float) -> None:
    x = student_t(50_000, nu, generator=torch.Generator().manual_seed(0))
    assert scipy.stats.kstest(x.numpy(), scipy.stats.t(nu).cdf).pvalue > 1e-3


def test_student_t_fractional_moment_matches_closed_form(seed: int) -> None:
    # an order below nu / 2, so that |U|^a has finite variance: c_{1.5, 0.5} = 1.1067
    assert student_t_abs_moment(1.5, 0.5) == pytest.approx(1.1067, abs=1e-4)
    x = student_t(100_000, 1.5, generator=torch.Generator().manual_seed(seed))
    assert float(x.abs().pow(0.5).mean()) == pytest.approx(student_t_abs_moment(1.5, 0.5), rel=0.02)
    # scale enters linearly
    y = student_t(100_000, 1.5, scale=3.0, generator=torch.Generator().manual_seed(seed))
    torch.testing.assert_close(y, 3.0 * x, rtol=1e-14, atol=0)


def test_student_t_infinite_variance_sample_variance_grows_with_n() -> None:
    gen = torch.Generator().manual_seed(0)
    small = student_t((50, 1_000), 1.5, generator=gen).var(dim=1).median()
    large = student_t((50, 100_000), 1.5, generator=gen).var(dim=1).median()
    assert float(large) >= 3 * float(small)
    # a finite-variance control (nu = 5): the ratio stays near 1
    small5 = student_t((50, 1_000), 5.0, generator=gen).var(dim=1).median()
    large5 = student_t((50, 100_000), 5.0, generator=gen).var(dim=1).median()
    assert float(large5) < 1.5 * float(small5)


def test_pbcm_constant_bounds_the_pth_moment_of_the_vector() -> None:
    assert student_t_abs_moment(1.5, 1.4) == pytest.approx(10.93, abs=0.01)
    assert student_t_pbcm_sigma(1.5, 1.4, 20) == pytest.approx(46.9, abs=0.05)
    # nu = 4, p = 2: E||U||^2 = d * nu / (nu - 2) exactly, and sigma^p bounds it
    u = StudentTNoise(4.0).sample((200_000, 5), torch.Generator().manual_seed(1))
    assert float(u.square().sum(-1).mean()) <= student_t_pbcm_sigma(4.0, 2.0, 5) ** 2 * 1.05
    assert student_t_pbcm_sigma(4.0, 2.0, 5) ** 2 == pytest.approx(5 * 2.0)


def test_sub_weibull_tail_bound_and_moments(seed: int) -> None:
    theta, scale = 1.0, 1.5
    x = sub_weibull(200_000, theta, scale=scale, generator=torch.Generator().manual_seed(seed))
    sigma = sub_weibull_sigma(theta, scale)
    for t in (1.0, 3.0, 6.0, 10.0):
        emp = float((x.abs() >= t).double().mean())
        assert emp <= 2 * math.exp(-((t / sigma) ** (1 / theta))) + 3e-3
    assert float(x.abs().mean()) == pytest.approx(sub_weibull_abs_moment(theta, 1.0, scale), rel=0.02)
    # theta = 1/2 is Gaussian: E|U|^2 = scale^2
    g = SubWeibullNoise(0.5, 2.0).sample(100_000, torch.Generator().manual_seed(seed))
    assert float(g.square().mean()) == pytest.approx(4.0, rel=0.03)
    assert sub_weibull_abs_moment(0.5, 2.0, 2.0) == pytest.approx(4.0)


def test_sub_weibull_lighter_than_student_t_tail() -> None:
    gen = torch.Generator().manual_seed(0)
    sw = sub_weibull(100_000, 1.0, generator=gen).abs()
    st = student_t(100_000, 1.5, generator=gen).abs()
    assert float(torch.quantile(st, 0.9999) / torch.quantile(st, 0.99)) > 3 * float(
        torch.quantile(sw, 0.9999) / torch.quantile(sw, 0.99)
    )


def test_reproducible_shape_dtype_device() -> None:
    a = student_t((3, 4, 5), 1.5, generator=torch.Generator().manual_seed(7), dtype=torch.float32)
    b = student_t((3, 4, 5), 1.5, generator=torch.Generator().manual_seed(7), dtype=torch.float32)
    assert a.shape == (3, 4, 5) and a.dtype == torch.float32 and torch.equal(a, b)
    assert torch.isfinite(a).all()
    assert student_t(0, 2.0).shape == (0,)
    c = SubWeibullNoise(1.0).sample((2, 3), torch.Generator().manual_seed(7), dtype=torch.float32)
    assert c.shape == (2, 3) and c.dtype == torch.float32


def test_bad_arguments_raise() -> None:
    with pytest.raises(ValueError, match=r"^nu"):
        student_t(3, 0.0)
    with pytest.raises(ValueError, match=r"^scale"):
        student_t(3, 1.5, scale=-1.0)
    with pytest.raises(ValueError, match=r"^theta"):
        sub_weibull(3, 0.2)
    with pytest.raises(ValueError, match=r"^p"):
        student_t_pbcm_sigma(1.5, 2.5, 3)
    with pytest.raises(ValueError, match=r"^p"):
        student_t_pbcm_sigma(1.5, 1.6, 3)  # p must be < nu
    with pytest.raises(ValueError, match=r"^a"):
        student_t_abs_moment(1.5, 1.5)
    with pytest.raises(ValueError, match=r"^nu"):
        StudentTNoise(-1.0)


# ---------------------------------------------------------------------------------------- alpha-stable noise
# scipy.stats.levy_stable is the reference (its default parameterization "S1"; for beta = 0 S1 and S0 agree).


@pytest.mark.parametrize(("alpha", "beta"), [(1.3, 0.0), (1.6, 0.0), (0.8, 0.0), (1.5, 0.5), (1.0, 0.5)])
def test_alpha_stable_matches_scipy_levy_stable(alpha: float, beta: float) -> None:
    assert scipy.stats.levy_stable.parameterization == "S1"
    scale = 1.3
    x = alpha_stable(10_000, alpha, beta=beta, scale=scale, generator=torch.Generator().manual_seed(0))
    ref = scipy.stats.levy_stable(alpha, beta, scale=scale)
    # two-sample KS against scipy's own sampler
    y = ref.rvs(size=10_000, random_state=np.random.default_rng(1))
    assert scipy.stats.ks_2samp(x.numpy(), y).pvalue > 0.01
    # the empirical CDF at fixed points against scipy's CDF (binomial 4.5 SE)
    pts = np.array([-8.0, -3.0, -1.0, -0.3, 0.0, 0.3, 1.0, 3.0, 8.0])
    emp = (x.numpy()[:, None] <= pts[None, :]).mean(0)
    cdf = ref.cdf(pts)
    assert np.all(np.abs(emp - cdf) <= 4.5 * np.sqrt(cdf * (1 - cdf) / x.numel()) + 1e-3), (emp, cdf)


def test_alpha_stable_limit_cases_gaussian_and_cauchy() -> None:
    gen = torch.Generator().manual_seed(0)
    g = alpha_stable(100_000, 2.0, scale=1.5, generator=gen)
    assert float(g.var()) == pytest.approx(2 * 1.5**2, rel=0.02)  # S1: alpha = 2 is N(0, 2 sigma^2)
    assert scipy.stats.kstest(g.numpy(), scipy.stats.norm(scale=math.sqrt(2) * 1.5).cdf).pvalue > 0.01
    assert AlphaStableNoise(2.0, 1.5).variance == pytest.approx(4.5)
    assert AlphaStableNoise(1.5).variance == math.inf
    c = alpha_stable(100_000, 1.0, scale=0.7, generator=gen)
    assert scipy.stats.kstest(c.numpy(), scipy.stats.cauchy(scale=0.7).cdf).pvalue > 0.01


@pytest.mark.parametrize("alpha", [1.3, 1.5, 1.8])
def test_alpha_stable_tail_index_by_hill(alpha: float) -> None:
    from optarium.optim.levy_mirror import hill_estimator

    x = AlphaStableNoise(alpha).sample(1_000_000, torch.Generator().manual_seed(0))
    assert hill_estimator(x, 1000) == pytest.approx(alpha, abs=0.15)


def test_chambers_mallows_stuck_with_per_row_alpha_shares_the_draws() -> None:
    gen = torch.Generator().manual_seed(3)
    v = torch.rand(4, 1, 50, generator=gen, dtype=torch.float64).sub_(0.5).mul_(math.pi)
    w = torch.empty(4, 1, 50, dtype=torch.float64).exponential_(generator=gen)
    alphas = torch.tensor([1.0, 1.3, 2.0], dtype=torch.float64).view(3, 1)
    both = chambers_mallows_stuck(v, w, alphas, scale=2.0)
    assert both.shape == (4, 3, 50)
    for i, a in enumerate((1.0, 1.3, 2.0)):
        torch.testing.assert_close(both[:, i], chambers_mallows_stuck(v, w, a, scale=2.0)[:, 0], rtol=1e-14,
                                   atol=0)  # fmt: skip
    # alpha = 2: 2 sin(V) sqrt(W); alpha = 1, beta = 0: tan(V)
    gauss = 2.0 * 2 * torch.sin(v[:, 0]) * w[:, 0].sqrt()
    torch.testing.assert_close(both[:, 2], gauss, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(both[:, 0], 2.0 * torch.tan(v[:, 0]), rtol=1e-14, atol=0)
    # the sampler is this transform of one rand then one exponential_ draw
    g1, g2 = torch.Generator().manual_seed(9), torch.Generator().manual_seed(9)
    v2 = torch.rand(7, generator=g2, dtype=torch.float64).sub_(0.5).mul_(math.pi)
    w2 = torch.empty(7, dtype=torch.float64).exponential_(generator=g2)
    torch.testing.assert_close(alpha_stable(7, 1.7, generator=g1), chambers_mallows_stuck(v2, w2, 1.7))


def test_alpha_stable_reproducible_dtype_and_bad_arguments() -> None:
    a = AlphaStableNoise(1.4).sample((3, 4), torch.Generator().manual_seed(1), dtype=torch.float32)
    b = AlphaStableNoise(1.4).sample((3, 4), torch.Generator().manual_seed(1), dtype=torch.float32)
    assert a.dtype == torch.float32 and a.shape == (3, 4) and torch.equal(a, b)
    assert alpha_stable(0, 1.5).shape == (0,)
    bad = [({"alpha": 0.0}, "alpha"), ({"alpha": 2.5}, "alpha"), ({"alpha": NAN}, "alpha"),
           ({"alpha": 1.5, "beta": 1.5}, "beta"), ({"alpha": 1.5, "scale": -1.0}, "scale")]  # fmt: skip
    for kwargs, name in bad:
        with pytest.raises(ValueError, match=rf"^{name}"):
            alpha_stable(3, **kwargs)
    with pytest.raises(ValueError, match=r"^alpha"):
        chambers_mallows_stuck(torch.zeros(2), torch.ones(2), torch.tensor([1.0, 2.5]))
    with pytest.raises(TypeError, match=r"^v"):
        chambers_mallows_stuck([0.0], torch.ones(1), 1.5)
