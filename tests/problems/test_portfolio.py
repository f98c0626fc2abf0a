"""optarium.problems.portfolio: the synthetic factor universe has the stated model; S&P-20 returns load."""

from __future__ import annotations

import pytest
import torch

from optarium.problems.portfolio import NOISE_SCALE, sp500_returns, synthetic_universe


def test_shapes_dtype_and_seeded_determinism() -> None:
    u = synthetic_universe(0, 6, 300)
    assert u["returns"].shape == (300, 6) and u["signals"].shape == (300, 6, 2)
    assert u["alpha"].shape == (300, 6) and u["sigma"].shape == (6, 6)
    assert all(v.dtype == torch.float64 for v in u.values())
    again = synthetic_universe(0, 6, 300)
    assert all(torch.equal(u[k], again[k]) for k in u)
    other = synthetic_universe(1, 6, 300)
    assert not torch.equal(u["returns"], other["returns"])
    # the first days of a longer draw differ (the draw depends on days through the stream layout) but the
    # loadings do not: the covariance is the same
    torch.testing.assert_close(synthetic_universe(0, 6, 500)["sigma"], u["sigma"], rtol=0, atol=0)


def test_the_model_holds() -> None:
    n, days = 4, 20_000
    u = synthetic_universe(3, n, days)
    z, alpha = u["signals"], u["alpha"]
    # alpha_{t+1} = 2e-4 tanh(a' z_t): bounded, zero on day 0, a deterministic function of yesterday's z
    assert float(alpha[0].abs().max()) == 0.0 and float(alpha.abs().max()) <= 2e-4
    # AR(1) signals with persistence 0.98 and unit stationary variance
    phi = float((z[1:] * z[:-1]).sum() / (z[:-1] ** 2).sum())
    assert phi == pytest.approx(0.98, abs=0.01)
    # returns minus the drift have the stated covariance: factor vol 0.4 % c, idiosyncratic 0.8 % c
    eps = u["returns"] - alpha
    cov = torch.cov(eps.T)
    torch.testing.assert_close(cov, u["sigma"], rtol=0.1, atol=0.1 * float(u["sigma"].diagonal().min()))
    # sigma = B B' sf^2 + se^2 I: with 8 assets and 5 factors, sigma - se^2 I is PSD of rank 5
    se = 0.008 * NOISE_SCALE
    sig8 = synthetic_universe(3, 8, 10)["sigma"]
    ev = torch.linalg.eigvalsh(sig8 - se**2 * torch.eye(8, dtype=torch.float64))
    assert float(ev[:3].abs().max()) < 1e-18 and float(ev[3:].min()) > 1e-8
    # the noise scale multiplies both noise levels: sigma scales by c^2
    doubled = synthetic_universe(3, n, 50, noise_scale=2 * NOISE_SCALE)
    torch.testing.assert_close(
        doubled["sigma"], 4 * synthetic_universe(3, n, 50)["sigma"], rtol=1e-12, atol=0
    )


def test_bad_input_names_the_argument() -> None:
    for kwargs, name in [({"n": 0}, "n"), ({"days": 1}, "days"), ({"n_factors": 0}, "n_factors")]:
        args = {"seed": 0, "n": 3, "days": 10, **kwargs}
        with pytest.raises(ValueError, match=rf"^{name}"):
            synthetic_universe(**args)
    with pytest.raises(ValueError, match=r"^noise_scale"):
        synthetic_universe(0, 3, 10, noise_scale=-1.0)


def test_sp500_returns_are_daily_simple_returns() -> None:
    pytest.importorskip("skfolio", reason="skfolio ships the S&P-20 prices")
    rets, years = sp500_returns()
    assert rets.shape[1] == 20 and rets.shape[0] == len(years) and rets.dtype == torch.float64
    assert bool(torch.isfinite(rets).all()) and float(rets.abs().max()) < 1.0
    assert list(years) == sorted(years) and years[0] <= 2000 and years[-1] >= 2022
