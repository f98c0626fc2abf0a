"""ENN as a BoTorch Model: BoTorch's acquisition functions run on it and agree with the closed forms."""

from __future__ import annotations

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
