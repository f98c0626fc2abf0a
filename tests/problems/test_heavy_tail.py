"""Heavy-tailed noise samplers: distribution, moments, tails, reproducibility (spec test 5)."""

from __future__ import annotations

import math

import pytest
import scipy.stats
import torch

from optarium.problems.heavy_tail import (
    StudentTNoise,
    SubWeibullNoise,
    student_t,
    student_t_abs_moment,
    student_t_pbcm_sigma,
    sub_weibull,
    sub_weibull_abs_moment,
    sub_weibull_sigma,
)


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
