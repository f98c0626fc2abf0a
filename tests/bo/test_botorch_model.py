"""ENN as a BoTorch Model: BoTorch's acquisition functions run on it and agree with the closed forms."""

from __future__ import annotations

import warnings

import pytest
import torch

from optarium.bo.enn import ENN, ENNParams

botorch = pytest.importorskip("botorch", reason="the adapter targets BoTorch's Model API")

from optarium.bo.botorch_model import as_botorch_model  # noqa: E402

DT = torch.float64


def _model(aleatoric: float = 0.0):
    g = torch.Generator().manual_seed(0)
    x = torch.rand(40, 2, generator=g, dtype=DT)
    enn = ENN(x, torch.sin(5 * x[:, 0]) + x[:, 1])
    params = ENNParams(5, 2.0, aleatoric)
    return enn, params, as_botorch_model(enn, params)


def test_analytic_ucb_and_ei_match_the_enn_posterior() -> None:
    from botorch.acquisition import ExpectedImprovement, UpperConfidenceBound

    enn, params, model = _model()
    X = torch.rand(7, 1, 2, generator=torch.Generator().manual_seed(1), dtype=DT)
    post = enn.posterior(X.squeeze(1), params)
    mu, sd = post.mean[:, 0], post.stddev[:, 0]
    torch.testing.assert_close(UpperConfidenceBound(model, beta=4.0)(X), mu + 2.0 * sd)
    best = float(mu.max())
    z = (mu - best) / sd
    normal = torch.distributions.Normal(0.0, 1.0)
    ei = sd * (z * normal.cdf(z) + normal.log_prob(z).exp())
    with pytest.warns(Warning):
        acq = ExpectedImprovement(model, best_f=best)
    torch.testing.assert_close(acq(X), ei)


def test_qucb_monte_carlo_agrees_and_gradients_flow() -> None:
    from botorch.acquisition import qUpperConfidenceBound
    from botorch.sampling import SobolQMCNormalSampler

    enn, params, model = _model()
    X = torch.rand(3, 1, 2, generator=torch.Generator().manual_seed(2), dtype=DT).requires_grad_(True)
    sampler = SobolQMCNormalSampler(torch.Size([4096]), seed=0)
    val = qUpperConfidenceBound(model, beta=1.0, sampler=sampler)(X)
    post = enn.posterior(X.detach().squeeze(1), params)
    expected = post.mean[:, 0] + post.stddev[:, 0]  # qUCB: sqrt(beta pi / 2) E|Y - mu| = sqrt(beta) sigma
    torch.testing.assert_close(val, expected, atol=5e-3, rtol=0)
    val.sum().backward()
    assert X.grad is not None and torch.isfinite(X.grad).all() and X.grad.abs().sum() > 0


def test_optimize_acqf_runs_and_observation_noise_adds_variance() -> None:
    from botorch.acquisition import UpperConfidenceBound
    from botorch.optim import optimize_acqf

    _, _, model = _model(aleatoric=0.3)
    bounds = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=DT)
    cand, value = optimize_acqf(
        UpperConfidenceBound(model, beta=1.0),
        bounds,
        q=1,
        num_restarts=2,
        raw_samples=16,
        options={"maxiter": 5},
    )
    assert cand.shape == (1, 2) and ((cand >= 0) & (cand <= 1)).all() and torch.isfinite(value)
    X = torch.rand(5, 2, dtype=DT)
    v0 = model.posterior(X).variance
    v1 = model.posterior(X, observation_noise=True).variance
    assert (v1 > v0).all() and model.num_outputs == 1
    assert model.posterior(X.unsqueeze(0)).mean.shape == (1, 5, 1)


# ------------------------------------------------------------------------------------------------ fantasies


def _reference(
    enn: ENN, x_new: torch.Tensor, y_new: torch.Tensor, yvar_new: torch.Tensor | None = None
) -> ENN:
    """ENN on the training and new points with the training data's standardisation kept (what conditioning
    means for a K-NN model whose scales are fixed)."""
    if yvar_new is None:
        ref = ENN(torch.cat([enn.X, x_new]), torch.cat([enn.Y, y_new]))
    else:
        ref = ENN(
            torch.cat([enn.X, x_new]),
            torch.cat([enn.Y, y_new]),
            torch.cat([torch.zeros_like(enn.Y), yvar_new]),
        )
    ref.y_mean, ref.y_std = enn.y_mean, enn.y_std
    ref.Yz = (ref.Y - ref.y_mean) / ref.y_std
    ref.Yvar_z = None if ref.Yvar is None else ref.Yvar / ref.y_std.square()
    return ref


@pytest.mark.parametrize("noisy", [False, True])
def test_batched_conditioning_equals_an_enn_with_the_points_added(noisy: bool) -> None:
    enn, params, model = _model(aleatoric=0.1)
    g = torch.Generator().manual_seed(3)
    x_new = torch.rand(3, 4, 2, generator=g, dtype=DT)
    y_new = torch.randn(3, 4, 1, generator=g, dtype=DT)
    noise = torch.rand(3, 4, 1, generator=g, dtype=DT) * 0.2 if noisy else None
    cond = model.condition_on_observations(x_new, y_new, noise=noise)
    assert cond.batch_shape == torch.Size([3]) and model.batch_shape == torch.Size([])
    query = torch.rand(3, 6, 2, generator=g, dtype=DT)
    x_new[0, 0] = query[0, 0]  # a query at a new point: distance exactly 0 to it
    cond = model.condition_on_observations(x_new, y_new, noise=noise)
    post = cond.posterior(query, observation_noise=True)
    for b in range(3):
        ref = _reference(enn, x_new[b], y_new[b], None if noise is None else noise[b])
        want = ref.posterior(query[b], params, observation_noise=True)
        torch.testing.assert_close(post.mean[b, :, 0], want.mean[:, 0], rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(post.variance[b, :, 0], want.stddev[:, 0] ** 2, rtol=1e-10, atol=1e-14)
    # conditioning twice = conditioning once on both sets; the unbatched query broadcasts over the batch
    twice = model.condition_on_observations(x_new[:, :2], y_new[:, :2]).condition_on_observations(
        x_new[:, 2:], y_new[:, 2:]
    )
    once = model.condition_on_observations(x_new, y_new)
    torch.testing.assert_close(twice.posterior(query[0]).mean, once.posterior(query[0]).mean)
    with pytest.raises(ValueError, match="Y"):
        model.condition_on_observations(x_new, y_new[:, :3])
    with pytest.raises(ValueError, match="noise"):
        model.condition_on_observations(x_new, y_new, noise=-torch.ones_like(y_new))


def test_fantasy_acquisitions_run_on_enn() -> None:
    from botorch.acquisition import qKnowledgeGradient, qLogNoisyExpectedImprovement
    from botorch.sampling import SobolQMCNormalSampler

    enn, _, model = _model()
    g = torch.Generator().manual_seed(4)
    kg = qKnowledgeGradient(model, num_fantasies=4)
    X = torch.rand(3, 1 + 4, 2, generator=g, dtype=DT).requires_grad_(True)
    value = kg(X)
    value.sum().backward()
    assert value.shape == (3,) and torch.isfinite(value).all() and torch.isfinite(X.grad).all()
    # the fantasy model's posterior at the observed point is pulled towards the fantasised value
    fant = model.fantasize(X[:1, :1].detach(), SobolQMCNormalSampler(torch.Size([2]), seed=0))
    assert fant.batch_shape == torch.Size([2, 1])
    nei = qLogNoisyExpectedImprovement(model, X_baseline=enn.X, cache_root=False)
    val = nei(torch.rand(5, 2, 2, generator=g, dtype=DT))
    assert val.shape == (5,) and torch.isfinite(val).all()


# ------------------------------------------------------------------------------------ strategies' models


def _told(strategy, rounds: int, q: int = 4):
    for _ in range(rounds):
        x = strategy.ask(q)
        strategy.tell(x, _branin_like(x))
    return strategy


def _branin_like(x: torch.Tensor) -> torch.Tensor:
    return ((x - 1.0) ** 2).sum(-1) + torch.sin(3 * x[..., 0])


BOUNDS = torch.tensor([[-2.0, -2.0], [3.0, 3.0]], dtype=DT)


@pytest.mark.parametrize("minimize", [True, False])
def test_turbo_enn_model_predicts_the_objective_in_user_units(minimize: bool) -> None:
    from optarium.bo import TurboENN

    opt = TurboENN(BOUNDS, batch_size=4, seed=0, minimize=minimize)
    with pytest.raises(RuntimeError, match="model"):
        _ = opt.model
    _told(opt, 4)
    model = opt.model
    # the TR run's data are reproduced at the data points (ENN interpolates: distance 0, epsilon variance)
    X = opt.X[opt._tr_start :][:6]
    post = model.posterior(X)
    torch.testing.assert_close(post.mean[:, 0], _branin_like(X), rtol=1e-6, atol=1e-6)
    enn_post = opt._enn.posterior((X - BOUNDS[0]) / (BOUNDS[1] - BOUNDS[0]), opt.params)
    sign = -1.0 if minimize else 1.0
    torch.testing.assert_close(post.mean[:, 0], sign * enn_post.mean[:, 0])
    # a snapshot: later tells do not change the model already handed out
    before = model.posterior(X[:2]).mean.clone()
    _told(opt, 2)
    torch.testing.assert_close(model.posterior(X[:2]).mean, before)


def test_qlognei_and_qkg_run_on_a_strategy_model_and_propose_in_the_box() -> None:
    from botorch.acquisition import qLogNoisyExpectedImprovement
    from botorch.acquisition.objective import ScalarizedPosteriorTransform
    from botorch.optim import optimize_acqf

    from optarium.bo import TurboENN

    opt = _told(TurboENN(BOUNDS, batch_size=4, seed=1), 4)
    minimise = ScalarizedPosteriorTransform(weights=torch.tensor([-1.0], dtype=DT))
    acq = qLogNoisyExpectedImprovement(
        opt.model, X_baseline=opt.X, posterior_transform=minimise, cache_root=False
    )
    with warnings.catch_warnings():  # ENN's neighbour sets are piecewise constant: L-BFGS line searches
        warnings.simplefilter("ignore", RuntimeWarning)  # end "ABNORMAL", BoTorch warns and restarts
        cand, value = optimize_acqf(acq, BOUNDS, q=2, num_restarts=2, raw_samples=32, options={"maxiter": 10})
    assert (
        cand.shape == (2, 2) and ((cand >= BOUNDS[0]) & (cand <= BOUNDS[1])).all() and torch.isfinite(value)
    )
    fant = opt.model.condition_on_observations(opt.X[:1], torch.tensor([[-100.0]], dtype=DT))
    assert float(fant.posterior(opt.X[:1]).mean) < float(opt.model.posterior(opt.X[:1]).mean)


def test_gp_strategies_expose_their_fitted_models_in_user_units() -> None:
    from optarium.bo import TcGPEI, TurboGP

    gp = _told(TurboGP(BOUNDS, batch_size=4, seed=0, gp_maxiter=20), 4)
    X = gp.X[gp._tr_start :][:5]
    torch.testing.assert_close(gp.model.posterior(X).mean[:, 0], _branin_like(X), rtol=0, atol=0.05)
    tc = TcGPEI(BOUNDS, seed=0, n_init=6, raw_samples=32, num_restarts=1, fit_maxiter=20)
    with pytest.raises(RuntimeError, match="model"):
        _ = tc.model
    _told(tc, 3, q=3)
    post = tc.model.posterior(tc.X[:4])
    torch.testing.assert_close(post.mean[:, 0], _branin_like(tc.X[:4]), rtol=0, atol=0.05)
    away = BOUNDS[0] + (BOUNDS[1] - BOUNDS[0]) * torch.rand(
        5, 2, generator=torch.Generator().manual_seed(5), dtype=DT
    )
    tc.ask(1)  # fits the surrogate on every point told so far, so its standardisation is today's
    mean_z, var_z = tc.surrogate.posterior((away - BOUNDS[0]) / (BOUNDS[1] - BOUNDS[0]))
    mean, std, sign = tc.standardization()
    post = tc.model.posterior(away)
    torch.testing.assert_close(
        post.mean[:, 0], float(mean) + sign * float(std) * mean_z, rtol=1e-9, atol=1e-9
    )
    torch.testing.assert_close(post.variance[:, 0], var_z * float(std) ** 2, rtol=1e-9, atol=1e-9)


def test_pom_model_is_a_model_list_of_the_objectives() -> None:
    from optarium.bo import POM

    opt = POM(BOUNDS, n_objectives=2, seed=0, num_candidates=64)
    x = opt.ask(8)
    y = torch.stack([_branin_like(x), (x**2).sum(-1)], -1)
    opt.tell(x, y)
    model = opt.model
    assert model.num_outputs == 2
    post = model.posterior(x[:3])
    mean, std, sign = opt.standardization()
    for k, gp in enumerate(opt._fit()):  # each output is that objective's GP mapped back to user units
        inner = gp.posterior((x[:3] - BOUNDS[0]) / (BOUNDS[1] - BOUNDS[0]))
        want = mean[k] + sign * std[k] * inner.mean[:, 0]
        torch.testing.assert_close(post.mean[:, k], want, rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(
            post.variance[:, k], std[k] ** 2 * inner.variance[:, 0], rtol=1e-6, atol=1e-9
        )
    assert (post.mean - y[:3]).abs().max() < 0.1 * y.abs().max()
