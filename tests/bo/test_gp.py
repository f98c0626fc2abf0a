"""optarium.bo.gp: the one GP helper of the bo family (kernel, model, capped ML fit, hyperparameter state)."""

from __future__ import annotations

import math

import pytest
import torch

from optarium.bo.gp import fit_gp, hyperparameter_state, matern52_kernel, single_task_gp

pytest.importorskip("botorch", reason="BoTorch (pinned 0.18.1) provides SingleTaskGP")


def _data(n: int = 14, d: int = 2, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.rand(n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    y = torch.sin(6 * x[:, 0]) + x[:, 1] ** 2
    return x, (y - y.mean()) / y.std()


def _mll(model) -> float:
    from gpytorch.mlls import ExactMarginalLogLikelihood

    model.train()
    mll = ExactMarginalLogLikelihood(model.likelihood, model)
    with torch.no_grad():
        value = float(mll(model(*model.train_inputs), model.train_targets))
    model.eval()
    return value


def test_kernels_have_the_requested_form_and_bounds() -> None:
    from gpytorch.kernels import MaternKernel, ScaleKernel

    k = matern52_kernel(3, lengthscale_bounds=(0.005, 4.0), outputscale_bounds=(0.05, 20.0))
    assert isinstance(k, ScaleKernel) and isinstance(k.base_kernel, MaternKernel)
    assert k.base_kernel.nu == 2.5 and k.base_kernel.ard_num_dims == 3
    assert float(k.base_kernel.raw_lengthscale_constraint.upper_bound) == 4.0
    assert float(k.raw_outputscale_constraint.lower_bound) == pytest.approx(0.05)
    # (lower, inf): a lower bound only, the softplus transform shifted by lower (no upper bound)
    from gpytorch.constraints import GreaterThan

    lb = matern52_kernel(3, lengthscale_bounds=(0.01, math.inf)).base_kernel
    assert type(lb.raw_lengthscale_constraint) is GreaterThan
    with torch.no_grad():
        lb.raw_lengthscale.fill_(-200.0)
    assert torch.allclose(lb.lengthscale, torch.full((1, 3), 0.01))
    with torch.no_grad():
        lb.raw_lengthscale.fill_(0.0)
    assert torch.allclose(lb.lengthscale, torch.full((1, 3), 0.01 + math.log(2.0)))
    prior = matern52_kernel(3, prior="dim_scaled")
    assert isinstance(prior, MaternKernel) and prior.lengthscale_prior is not None
    # the kernel is the Matern-5/2 formula
    x = torch.tensor([[0.0, 0.0, 0.0]], dtype=torch.float64)
    z = torch.tensor([[0.3, 0.0, 0.0]], dtype=torch.float64)
    base = matern52_kernel(3).base_kernel.to(x)
    r = 0.3 / float(base.lengthscale[0, 0])
    expected = (1 + 5**0.5 * r + 5 / 3 * r**2) * torch.exp(torch.tensor(-(5**0.5) * r, dtype=torch.float64))
    torch.testing.assert_close(base(x, z).to_dense().reshape(()), expected, rtol=1e-12, atol=0)


def test_model_follows_the_data_and_its_noise_options() -> None:
    from botorch.models.transforms.outcome import Standardize
    from gpytorch.likelihoods import FixedNoiseGaussianLikelihood

    x, y = _data()
    fixed = single_task_gp(x, y, covar_module=matern52_kernel(2), noise=1e-6)
    assert isinstance(fixed.likelihood, FixedNoiseGaussianLikelihood)
    torch.testing.assert_close(fixed.likelihood.noise, torch.full_like(y, 1e-6))
    bounded = single_task_gp(
        x, 3 * y + 1, covar_module=matern52_kernel(2), noise_bounds=(1e-8, 1e-3), standardize=True
    )
    assert isinstance(bounded.outcome_transform, Standardize)
    torch.testing.assert_close(bounded.train_targets, y, rtol=1e-12, atol=1e-12)  # standardised inside
    assert float(bounded.likelihood.noise) <= 1e-3
    plain = single_task_gp(x.float(), y.float(), covar_module=matern52_kernel(2))
    assert all(p.dtype == torch.float32 for p in plain.parameters())
    assert all(p.dtype == torch.float64 for p in fixed.parameters())


def test_capped_plain_fit_is_one_botorch_scipy_run() -> None:
    from botorch.optim.fit import fit_gpytorch_mll_scipy
    from gpytorch.mlls import ExactMarginalLogLikelihood

    x, y = _data()
    ours = fit_gp(single_task_gp(x, y, covar_module=matern52_kernel(2), noise=1e-6), maxiter=15, retry=False)
    ref = single_task_gp(x, y, covar_module=matern52_kernel(2), noise=1e-6)
    mll = ExactMarginalLogLikelihood(ref.likelihood, ref)
    mll.train()
    fit_gpytorch_mll_scipy(mll, options={"maxiter": 15})
    for (k, a), (_, b) in zip(ours.state_dict().items(), ref.state_dict().items(), strict=True):
        assert torch.equal(a, b), k
    assert not ours.training


def test_retrying_fit_is_botorch_fit_gpytorch_mll_and_raises_the_likelihood() -> None:
    from botorch.fit import fit_gpytorch_mll
    from gpytorch.mlls import ExactMarginalLogLikelihood

    x, y = _data(seed=1)
    start = single_task_gp(x, y, covar_module=matern52_kernel(2, prior="dim_scaled"))
    before = _mll(start)
    ours = fit_gp(start, maxiter=30)
    ref = single_task_gp(x, y, covar_module=matern52_kernel(2, prior="dim_scaled"))
    fit_gpytorch_mll(
        ExactMarginalLogLikelihood(ref.likelihood, ref), optimizer_kwargs={"options": {"maxiter": 30}}
    )
    for (k, a), (_, b) in zip(ours.state_dict().items(), ref.state_dict().items(), strict=True):
        assert torch.equal(a, b), k
    assert _mll(ours) > before + 1e-3


def test_warm_start_and_fixed_hyperparameters() -> None:
    x, y = _data(seed=2)
    first = fit_gp(single_task_gp(x, y, covar_module=matern52_kernel(2), noise=1e-4), maxiter=40, retry=False)
    state = hyperparameter_state(first)
    x2, y2 = _data(n=10, seed=3)
    fixed = fit_gp(
        single_task_gp(x2, y2, covar_module=matern52_kernel(2), noise=1e-4), init_state=state, maxiter=0
    )
    torch.testing.assert_close(
        fixed.covar_module.base_kernel.lengthscale, first.covar_module.base_kernel.lengthscale
    )
    assert torch.equal(fixed.train_inputs[0], x2)  # the data are the new model's own, not the state's
    # a zero-iteration fit leaves fresh hyperparameters untouched
    fresh = single_task_gp(x, y, covar_module=matern52_kernel(2), noise=1e-4)
    init = hyperparameter_state(fresh)
    kept = hyperparameter_state(fit_gp(fresh, maxiter=0))
    assert all(torch.equal(init[k], kept[k]) for k in init)


def test_hyperparameter_state_filters_and_copies() -> None:
    x, y = _data()
    model = single_task_gp(
        x, y, covar_module=matern52_kernel(2, lengthscale_bounds=(0.01, 3.0)), noise_bounds=(1e-8, 1e-3)
    )
    raw = hyperparameter_state(model, prefixes=("covar_module", "likelihood"), raw_only=True)
    assert raw and all(k.startswith(("covar_module", "likelihood")) and "raw" in k for k in raw)
    assert "covar_module.base_kernel.raw_lengthscale" in raw
    assert not any(k.startswith("mean_module") for k in raw)
    raw["covar_module.base_kernel.raw_lengthscale"].add_(1.0)  # a copy: the model is unchanged
    assert not torch.equal(
        raw["covar_module.base_kernel.raw_lengthscale"], model.covar_module.base_kernel.raw_lengthscale
    )
    everything = hyperparameter_state(model)
    assert set(raw) < set(everything) and "mean_module.raw_constant" in everything


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda x, y: matern52_kernel(0), "d"),
        (lambda x, y: matern52_kernel(2, prior="gamma"), "prior"),
        (lambda x, y: matern52_kernel(2, lengthscale_bounds=(1.0, 0.5)), "lengthscale_bounds"),
        (lambda x, y: matern52_kernel(2, prior="dim_scaled", outputscale_bounds=(0.1, 1.0)), "prior"),
        (lambda x, y: single_task_gp(x[0], y, covar_module=matern52_kernel(2)), "train_x"),
        (lambda x, y: single_task_gp(x, y[:-1], covar_module=matern52_kernel(2)), "train_y"),
        (lambda x, y: single_task_gp(x, y.float(), covar_module=matern52_kernel(2)), "train_y"),
        (lambda x, y: single_task_gp(x, y * float("nan"), covar_module=matern52_kernel(2)), "train_y"),
        (lambda x, y: single_task_gp(x, y, covar_module=matern52_kernel(2), noise=-1.0), "noise"),
        (
            lambda x, y: single_task_gp(
                x, y, covar_module=matern52_kernel(2), noise=1e-6, noise_bounds=(1e-8, 1e-3)
            ),
            "noise_bounds",
        ),
        (lambda x, y: fit_gp(single_task_gp(x, y, covar_module=matern52_kernel(2)), maxiter=-1), "maxiter"),
        (lambda x, y: fit_gp(single_task_gp(x, y, covar_module=matern52_kernel(2)), retry=1), "retry"),
    ],
)
def test_bad_input_names_the_argument(call, name: str) -> None:
    x, y = _data()
    with pytest.raises((ValueError, TypeError), match=rf"^{name}"):
        call(x, y)
