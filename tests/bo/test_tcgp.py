"""tcGP: limits (plain GP = BoTorch GP-EI, t = inf = global calibration), selection rules, scale recovery,
calibration gain on a misspecified GP, EI properties, the ask/tell loop (state, determinism, bad input)."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from scipy import integrate

from optarium.bo.calibration import (
    CalibratedPredictive,
    brier_score,
    conditional_pit,
    crps_gaussian,
    ks_uniform,
    loo_predictions,
    twcrps_gaussian,
)
from optarium.bo.tcgp import CalibrationFit, TailCalibratedGP, TcGPEI, select_calibration
from optarium.harness.stats import paired_effect

D = torch.float64


def _matern52(x1: torch.Tensor, x2: torch.Tensor, ls: float, var: float = 1.0) -> torch.Tensor:
    r = torch.cdist(x1, x2) / ls
    return var * (1 + math.sqrt(5) * r + 5 * r**2 / 3) * torch.exp(-math.sqrt(5) * r)


def _branin_data(n: int = 15, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    from botorch.test_functions import Branin

    f = Branin()
    gen = torch.Generator().manual_seed(seed)
    lo, hi = f.bounds.to(D)
    x = lo + (hi - lo) * torch.rand(n, 2, generator=gen, dtype=D)
    return x, f(x), f.bounds.to(D)


@pytest.mark.filterwarnings("ignore:ExpectedImprovement has known numerical issues")
def test_plain_gp_limit_reproduces_botorch_posterior_and_ei_exactly() -> None:
    from botorch.acquisition import ExpectedImprovement
    from botorch.models import SingleTaskGP
    from gpytorch.kernels import MaternKernel, ScaleKernel

    x, y, bounds = _branin_data()
    model = TailCalibratedGP(x, y, bounds=bounds, family="none", fit_maxiter=50).fit()
    assert (model.s, model.beta) == (1.0, 2.0)
    hp = model.hyperparameters
    xn = (x - bounds[0]) / (bounds[1] - bounds[0])
    ym, ys = y.mean(), y.std()
    covar = ScaleKernel(MaternKernel(nu=2.5, ard_num_dims=2)).to(D)
    covar.base_kernel.lengthscale = hp["lengthscale"]
    covar.outputscale = hp["outputscale"]
    ref = SingleTaskGP(
        xn,
        ((y - ym) / ys).unsqueeze(-1),
        train_Yvar=torch.full((15, 1), model.jitter_, dtype=D),
        covar_module=covar,
        outcome_transform=None,
    )
    ref.mean_module.constant = hp["constant"]
    ref.eval()
    gen = torch.Generator().manual_seed(1)
    xt = bounds[0] + (bounds[1] - bounds[0]) * torch.rand(50, 2, generator=gen, dtype=D)
    xtn = (xt - bounds[0]) / (bounds[1] - bounds[0])
    with torch.no_grad():
        post = ref.posterior(xtn)
        pred = model.predictive(xt)
        torch.testing.assert_close(pred.mean, ym + ys * post.mean.squeeze(-1), rtol=1e-9, atol=1e-7)
        # the model reads the nugget as noiseless: its variance of f is BoTorch's minus the nugget
        var = pred.sd**2 / ys**2 + model.jitter_
        torch.testing.assert_close(var, post.variance.squeeze(-1), rtol=1e-6, atol=1e-9)
        best = float(((y - ym) / ys).min())
        sd_f = (post.variance.squeeze(-1) - model.jitter_).sqrt()
        z = (best - post.mean.squeeze(-1)) / sd_f
        ei_f = ys * sd_f * (z * torch.special.ndtr(z) + torch.exp(-0.5 * z**2) / math.sqrt(2 * math.pi))
        torch.testing.assert_close(model.expected_improvement(xt), ei_f, rtol=1e-7, atol=1e-10 * float(ys))
        # and BoTorch's own EI where the nugget is negligible against the posterior variance
        ei_ref = ys * ExpectedImprovement(ref, best_f=best, maximize=False)(xtn.unsqueeze(1))
        far = post.variance.squeeze(-1) > 1e-2
        assert int(far.sum()) >= 10
        torch.testing.assert_close(model.expected_improvement(xt)[far], ei_ref[far], rtol=1e-3, atol=1e-8)
    # a calibrated family forced to (s, beta) = (1, 2) gives the same predictive
    tc = TailCalibratedGP(x, y, bounds=bounds, family="gennorm")
    tc.hyperparameters = {k: v.clone() for k, v in hp.items()}
    tc.fit(optimize_hyperparameters=False)
    tc.calibration = CalibrationFit(1.0, 2.0, 0.0)
    with torch.no_grad():
        torch.testing.assert_close(tc.expected_improvement(xt), model.expected_improvement(xt))


def _loo_problem(seed: int, n: int = 40) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """LOO predictions of a variance-1 GP on data from a variance-4 GP (over-confident model)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 2, generator=gen, dtype=D)
    K4 = _matern52(x, x, 0.3, 4.0) + 1e-8 * torch.eye(n, dtype=D)
    y = torch.linalg.cholesky(K4) @ torch.randn(n, generator=gen, dtype=D)
    mu, sd = loo_predictions(_matern52(x, x, 0.3) + 1e-8 * torch.eye(n, dtype=D), y, mean=0.0)
    return mu, sd, y


def test_infinite_threshold_is_the_global_crps_fit() -> None:
    mu, sd, y = _loo_problem(0)
    fit = select_calibration(mu, sd, y, math.inf, family="scale")
    s_fine = torch.logspace(math.log10(0.05), math.log10(20), 4001, dtype=D)
    crps = crps_gaussian(mu, sd * s_fine[:, None], y).sum(-1)
    s_ref = float(s_fine[int(crps.argmin())])
    assert fit.s == pytest.approx(s_ref, rel=2e-3)
    assert float(crps_gaussian(mu, sd * fit.s, y).sum()) <= float(crps.min()) + 1e-9
    # a finite threshold far above the data is the same limit
    assert select_calibration(mu, sd, y, 1e6, family="scale").s == pytest.approx(fit.s, rel=1e-6)
    # and the tail threshold gives a different answer
    t = float(torch.quantile(y, 0.25))
    assert select_calibration(mu, sd, y, t, family="scale").s != pytest.approx(fit.s, rel=1e-3)


def test_degeneracy_rule_fires_only_when_the_loss_is_flat() -> None:
    mu, sd, y = _loo_problem(1)
    t_low = float((mu - 40 * 20 * sd).min())
    for family in ("scale", "gennorm"):
        fit = select_calibration(mu, sd, y, t_low, family=family)
        assert (fit.s, fit.beta, fit.degenerate) == (1.0, 2.0, True)
    t = float(torch.quantile(y, 0.25))
    fit = select_calibration(mu, sd, y, t, family="scale", refine=False)
    assert not fit.degenerate
    grid = torch.logspace(math.log10(0.05), math.log10(20), 41, dtype=D)
    losses = (twcrps_gaussian(mu, sd * grid[:, None], y, t)).sum(-1)
    assert fit.s == pytest.approx(float(grid[int(losses.argmin())]), rel=1e-12)
    refined = select_calibration(mu, sd, y, t, family="scale")
    assert refined.loss <= fit.loss + 1e-12
    assert float(twcrps_gaussian(mu, sd * refined.s, y, t).sum()) == pytest.approx(refined.loss, rel=1e-10)


def test_scale_recovery_on_a_gp_sample_with_four_times_the_variance() -> None:
    gen = torch.Generator().manual_seed(7)
    picked = []
    for _ in range(20):
        x = torch.rand(200, 2, generator=gen, dtype=D)
        K1 = _matern52(x, x, 0.25) + 1e-8 * torch.eye(200, dtype=D)
        y = 2.0 * (torch.linalg.cholesky(K1) @ torch.randn(200, generator=gen, dtype=D))
        mu, sd = loo_predictions(K1, y, mean=0.0)
        picked.append(select_calibration(mu, sd, y, float(torch.quantile(y, 0.25)), family="scale").s)
    med = float(torch.tensor(picked).median())
    assert 1.6 <= med <= 2.4, picked


def test_tail_calibration_improves_ks_and_brier_below_t_on_a_misspecified_gp() -> None:
    """Data from a variance-4 GP, model with variance 1 (over-confident): paired over 20 seeds."""
    ks_gp, ks_tc, br_gp, br_tc = {}, {}, {}, {}
    for seed in range(20):
        gen = torch.Generator().manual_seed(100 + seed)
        n, m = 40, 400
        x = torch.rand(n + m, 2, generator=gen, dtype=D)
        K = _matern52(x, x, 0.3) + 1e-8 * torch.eye(n + m, dtype=D)
        f = 2.0 * (torch.linalg.cholesky(K) @ torch.randn(n + m, generator=gen, dtype=D))
        y, yt = f[:n], f[n:]
        Kn = K[:n, :n]
        kx = K[n:, :n]
        mean = kx @ torch.linalg.solve(Kn, y)
        sd = (1.0 - (kx * torch.linalg.solve(Kn, kx.T).T).sum(-1)).clamp_min(1e-12).sqrt()
        t = float(torch.quantile(y, 0.25))
        mu, s_loo = loo_predictions(Kn, y, mean=0.0)
        fit = select_calibration(mu, s_loo, y, max(t, float(y.min())), family="scale")
        for s, ks, br in ((1.0, ks_gp, br_gp), (fit.s, ks_tc, br_tc)):
            pred = CalibratedPredictive(mean, sd, s, 2.0)
            ks[seed] = float(ks_uniform(conditional_pit(pred, yt, t)))
            br[seed] = float(brier_score(pred.cdf(torch.full_like(yt, t)), yt <= t))
    eff = paired_effect(ks_tc, ks_gp)  # gap = KS_GP - KS_tcGP
    assert eff.mean > 2 * eff.se, eff
    assert paired_effect(br_tc, br_gp).mean > -2 * paired_effect(br_tc, br_gp).se


def test_expected_improvement_properties() -> None:
    x, y, bounds = _branin_data(12, seed=2)
    for family in ("scale", "gennorm"):
        model = TailCalibratedGP(x, y, bounds=bounds, family=family, fit_maxiter=50).fit()
        assert model.s >= model.s_min
        gen = torch.Generator().manual_seed(3)
        xt = bounds[0] + (bounds[1] - bounds[0]) * torch.rand(200, 2, generator=gen, dtype=D)
        with torch.no_grad():
            assert (model.expected_improvement(x) >= 0).all()
            assert (model.expected_improvement(xt) >= 0).all()
            if family == "scale":  # EI > 0 at unvisited points: its log is finite (no underflow in log form)
                assert torch.isfinite(model.log_expected_improvement(xt)).all()
            pred = model.predictive(xt[:3])
            ei = model.expected_improvement(xt[:3])
        m = float(y.min())
        for i in range(3):
            p1 = CalibratedPredictive(pred.mean[i : i + 1], pred.sd[i : i + 1], pred.s, pred.beta)
            ref = integrate.quad(
                lambda u, p1=p1: float(p1.cdf(torch.tensor([u], dtype=D))[0]),
                -math.inf,
                m,
                epsabs=1e-13,
                epsrel=1e-10,
                limit=200,
            )[0]
            assert float(ei[i]) == pytest.approx(ref, rel=1e-5, abs=1e-12)
    # the floor s_min keeps EI positive at unvisited points even for the narrowest spread
    model.calibration = CalibrationFit(model.s_min, 2.0, 0.0)
    with torch.no_grad():
        assert torch.isfinite(model.log_expected_improvement(xt)).all()
        xb = x[int(y.argmin())]
        near = xb + 0.01 * (xt[:5] - xb)  # close to the best design point, still unvisited
        assert (model.expected_improvement(near) > 0).all()


def test_state_dict_round_trip_and_determinism() -> None:
    from botorch.test_functions import Branin

    f = Branin()
    bounds = f.bounds.to(D)

    def make() -> TcGPEI:
        return TcGPEI(
            bounds, generator=torch.Generator().manual_seed(11), n_init=6, raw_samples=128, fit_maxiter=50
        )

    a, b = make(), make()
    for _ in range(8):
        xa, xb = a.ask(), b.ask()
        torch.testing.assert_close(xa, xb, rtol=0, atol=0)
        a.tell(xa, f(xa))
        b.tell(xb, f(xb))
    state = a.state_dict()
    c = make()
    c.load_state_dict(state)
    xa, xc = a.ask(), c.ask()
    torch.testing.assert_close(xa, xc, rtol=0, atol=0)
    assert ((xa >= bounds[0]) & (xa <= bounds[1])).all()
    assert a.best_y == pytest.approx(float(a.Y.min()))
    two = c.ask(2)  # kriging believer: two distinct points
    assert two.shape == (2, 2) and not torch.allclose(two[0], two[1])


def test_model_state_dict_round_trip() -> None:
    x, y, bounds = _branin_data(12, seed=4)
    a = TailCalibratedGP(x, y, bounds=bounds, family="gennorm", fit_maxiter=50).fit()
    b = TailCalibratedGP(x, y, bounds=bounds, family="gennorm")
    b.load_state_dict(a.state_dict())
    assert (b.s, b.beta) == (a.s, a.beta)
    xt = x[:4] + 0.1
    with torch.no_grad():
        torch.testing.assert_close(b.expected_improvement(xt), a.expected_improvement(xt))


def test_bad_input_raises_value_error_naming_the_argument() -> None:
    x, y, bounds = _branin_data(6)
    with pytest.raises(ValueError, match=r"^quantile:"):
        TailCalibratedGP(quantile=1.0)
    with pytest.raises(ValueError, match=r"^quantile:"):
        TailCalibratedGP(quantile=0.0)
    with pytest.raises(ValueError, match=r"^s_min:"):
        TailCalibratedGP(s_min=0.0)
    with pytest.raises(ValueError, match=r"^family:"):
        TailCalibratedGP(family="student")
    with pytest.raises(ValueError, match=r"^threshold:"):
        TailCalibratedGP(threshold=math.nan)
    with pytest.raises(ValueError, match=r"^train_y:"):
        TailCalibratedGP(x, torch.where(torch.arange(6) == 2, math.nan, y))
    with pytest.raises(ValueError, match=r"^train_y:"):
        TailCalibratedGP(x, y[:4])
    with pytest.raises(ValueError, match=r"^s_min:"):
        TcGPEI(bounds, s_min=-1.0)
    opt = TcGPEI(bounds, n_init=3)
    with pytest.raises(ValueError, match=r"^y:"):
        opt.tell(x[:2], torch.tensor([1.0, math.inf], dtype=D))
    with pytest.raises(ValueError, match=r"^x:"):
        opt.tell(x[:2] + 100.0, y[:2])


def test_duplicate_points_warn_and_still_fit() -> None:
    x, y, bounds = _branin_data(10, seed=5)
    x = torch.cat([x, x[:1]])
    y = torch.cat([y, y[:1]])
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        model = TailCalibratedGP(x, y, bounds=bounds, fit_maxiter=30).fit()
    assert any("duplicate" in str(w.message) for w in rec)
    assert math.isfinite(model.s) and torch.isfinite(model.expected_improvement(x)).all()


@pytest.mark.slow
def test_density_sanity_on_a_deceptive_1d_function() -> None:
    """tcGP-EI on a narrow-basin 1-D function keeps filling the space: fill distance after 200 < after 50."""

    def f(x: torch.Tensor) -> torch.Tensor:
        return (x[:, 0] - 0.3) ** 2 - 2 * torch.exp(-(((x[:, 0] - 0.93) / 0.005) ** 2))

    grid = torch.linspace(0, 1, 10_001, dtype=D).unsqueeze(-1)
    check = torch.linspace(0, 1, 1001, dtype=D).unsqueeze(-1)
    x = torch.linspace(0.05, 0.85, 5, dtype=D).unsqueeze(-1)
    y = f(x)
    bounds = torch.tensor([[0.0], [1.0]], dtype=D)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = TailCalibratedGP(x, y, bounds=bounds, noise=1e-10, fit_maxiter=100).fit()
    fill = {}
    for step in range(1, 201):
        refit = step % 25 == 1
        hp = model.hyperparameters
        model = TailCalibratedGP(x, y, bounds=bounds, noise=1e-10, fit_maxiter=100)
        if not refit:
            model.hyperparameters = hp
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # gpytorch rounds the 1e-10 nugget up during the ML fit
            model.fit(optimize_hyperparameters=refit)
        with torch.no_grad():  # log EI (no underflow); evaluated points have EI = 0 in the noiseless model
            lei = model.log_expected_improvement(grid)
            lei = torch.where(torch.cdist(grid, x).amin(-1) > 1e-12, lei, -math.inf)
        xn = grid[int(lei.argmax())].unsqueeze(0)
        x, y = torch.cat([x, xn]), torch.cat([y, f(xn)])
        if step in (50, 200):
            fill[step] = float(torch.cdist(check, x).amin(-1).max())
    assert fill[200] < fill[50]
