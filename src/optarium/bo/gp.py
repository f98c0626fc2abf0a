r"""GP fitting for the ``bo`` family: one place that builds and fits BoTorch ``SingleTaskGP`` surrogates.

POM (:mod:`optarium.bo.pom`), tcGP (:mod:`optarium.bo.tcgp`) and the GP-TuRBO baseline
(:class:`optarium.bo.turbo_enn.TurboGP`) all fit an exact GP with a Matérn-5/2 ARD kernel on float64 inputs
scaled to the unit cube and standardised targets, by maximising the exact marginal log likelihood with
L-BFGS-B under a capped iteration budget. The pieces, in the order a method uses them:

- :func:`matern52_kernel`: the covariance module (Matérn-5/2 ARD times an outputscale, optional interval
  bounds on lengthscale and outputscale; or BoTorch's dimension-scaled lengthscale prior without outputscale).
- :func:`single_task_gp`: the model, with a fixed noise variance, a learned noise (optionally bounded) and
  targets either already standardised by the caller or standardised by BoTorch's ``Standardize``.
- :func:`fit_gp`: warm start from stored hyperparameters, then ML fit with ``maxiter`` L-BFGS-B iterations at
  most, either BoTorch's ``fit_gpytorch_mll`` (retries from prior samples when the fit fails) or one plain
  ``fit_gpytorch_mll_scipy`` run; the model is left in eval mode.
- :func:`hyperparameter_state`: detached copies of the fitted state (for warm starts, fixed hyperparameters
  and ``state_dict``).

BoTorch and GPyTorch are imported inside the functions, so importing this module stays cheap.

Example:
    >>> import torch
    >>> from optarium.bo.gp import fit_gp, matern52_kernel, single_task_gp
    >>> x = torch.rand(12, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    >>> y = torch.sin(6 * x[:, 0]) + x[:, 1]
    >>> y = (y - y.mean()) / y.std()
    >>> model = fit_gp(single_task_gp(x, y, covar_module=matern52_kernel(2)), maxiter=50, retry=False)
    >>> model.covar_module.base_kernel.lengthscale.shape
    torch.Size([1, 2])

Reference: M. Balandat et al., "BoTorch: A Framework for Efficient Monte-Carlo Bayesian Optimization",
NeurIPS 2020; C. E. Rasmussen and C. K. I. Williams, "Gaussian Processes for Machine Learning", ch. 5.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from optarium._core.validation import check_choice, check_int, check_positive, check_type

__all__ = ["KERNEL_PRIORS", "fit_gp", "hyperparameter_state", "matern52_kernel", "single_task_gp"]

#: ``prior`` choices of :func:`matern52_kernel`.
KERNEL_PRIORS = (None, "dim_scaled")


def _bounds(name: str, value: Sequence[float] | None) -> tuple[float, float] | None:
    if value is None:
        return None
    if not isinstance(value, Sequence) or isinstance(value, str) or len(value) != 2:
        raise TypeError(f"{name}: must be a (lower, upper) pair or None, got {value!r}")
    lo = check_positive(name, value[0])
    hi = math.inf if value[1] == math.inf else check_positive(name, value[1])
    if not lo < hi:
        raise ValueError(f"{name}: lower must be < upper, got {value!r}")
    return lo, hi


def matern52_kernel(
    d: int,
    *,
    prior: str | None = None,
    lengthscale_bounds: Sequence[float] | None = None,
    outputscale_bounds: Sequence[float] | None = None,
) -> Any:
    r"""The Matérn-5/2 ARD covariance module of a ``d``-dimensional GP.

    .. math:: k(x, x') = \sigma^2 \Big(1 + \sqrt5 r + \tfrac53 r^2\Big) e^{-\sqrt5 r},
        \quad r^2 = \sum_j (x_j - x'_j)^2 / \ell_j^2 .

    Args:
        d: input dimension (one lengthscale :math:`\ell_j` per dimension).
        prior: ``None``: GPyTorch's ``ScaleKernel(MaternKernel(nu=2.5))`` (outputscale :math:`\sigma^2`, no
            priors, positive constraints unless bounded); ``"dim_scaled"``: BoTorch's
            ``get_covar_module_with_dim_scaled_prior`` (Matérn-5/2 with the log-normal lengthscale prior
            scaled by :math:`\sqrt d`, no outputscale: :math:`\sigma^2 = 1` on standardised targets).
        lengthscale_bounds: ``(lower, upper)`` interval constraint on every :math:`\ell_j` (``prior=None``);
            ``(lower, math.inf)`` is a lower bound only (GPyTorch's ``GreaterThan``: the softplus transform of
            its default positive constraint, shifted by ``lower``).
        outputscale_bounds: ``(lower, upper)`` interval constraint on :math:`\sigma^2` (``prior=None``).

    Returns:
        A GPyTorch kernel module (float32 until the model moves it to its data's dtype).
    """
    d = check_int("d", d, minimum=1)
    prior = check_choice("prior", prior, KERNEL_PRIORS)
    ls = _bounds("lengthscale_bounds", lengthscale_bounds)
    os_ = _bounds("outputscale_bounds", outputscale_bounds)
    if prior == "dim_scaled":
        if ls is not None or os_ is not None:
            raise ValueError("prior: 'dim_scaled' takes no lengthscale_bounds or outputscale_bounds")
        from botorch.models.utils.gpytorch_modules import get_covar_module_with_dim_scaled_prior

        return get_covar_module_with_dim_scaled_prior(ard_num_dims=d, use_rbf_kernel=False)
    from gpytorch.constraints import GreaterThan, Interval
    from gpytorch.kernels import MaternKernel, ScaleKernel

    if ls is None:
        ls_constraint = None
    else:
        ls_constraint = GreaterThan(ls[0]) if math.isinf(ls[1]) else Interval(*ls)
    base = MaternKernel(nu=2.5, ard_num_dims=d, lengthscale_constraint=ls_constraint)
    return ScaleKernel(base, outputscale_constraint=None if os_ is None else Interval(*os_))


def single_task_gp(
    train_x: torch.Tensor,
    train_y: torch.Tensor,
    *,
    covar_module: Any,
    noise: float | None = None,
    noise_bounds: Sequence[float] | None = None,
    standardize: bool = False,
) -> Any:
    r"""A BoTorch ``SingleTaskGP`` (constant mean) on ``(train_x, train_y)``, in the data's dtype and device.

    Args:
        train_x: ``(n, d)`` floating inputs, usually scaled to :math:`[0, 1]^d`, float64 for BO.
        train_y: ``(n,)`` targets of the same dtype: already standardised by the caller
            (``standardize=False``, e.g. :meth:`~optarium._core.asktell.AskTellStrategy.standardized_Y`) or
            raw (``standardize=True``: BoTorch's ``Standardize`` outcome transform, undone in posteriors).
        covar_module: the kernel, e.g. :func:`matern52_kernel`.
        noise: a fixed observation-noise variance (on the targets' scale, after any standardisation by the
            caller); ``None``: a learned homoscedastic Gaussian noise.
        noise_bounds: ``(lower, upper)`` interval on the learned noise (``noise=None`` only); ``None``:
            BoTorch's default likelihood (its noise prior and lower bound).
        standardize: standardise the targets inside the model.
    """
    from botorch.models import SingleTaskGP

    check_type("train_x", train_x, torch.Tensor)
    check_type("train_y", train_y, torch.Tensor)
    if train_x.ndim != 2 or not train_x.is_floating_point():
        raise ValueError(
            f"train_x: must be a floating (n, d) tensor, got {train_x.dtype} {tuple(train_x.shape)}"
        )
    if train_y.shape != (train_x.shape[0],):
        raise ValueError(f"train_y: must have shape ({train_x.shape[0]},), got {tuple(train_y.shape)}")
    if train_y.dtype != train_x.dtype:
        raise ValueError(f"train_y: dtype {train_y.dtype} differs from train_x's {train_x.dtype}")
    if not bool(torch.isfinite(train_x).all()):
        raise ValueError("train_x: contains NaN or inf")
    if not bool(torch.isfinite(train_y).all()):
        raise ValueError("train_y: contains NaN or inf")
    check_type("standardize", standardize, bool)
    nb = _bounds("noise_bounds", noise_bounds)
    kwargs: dict[str, Any] = {"covar_module": covar_module.to(train_x)}
    if noise is not None:
        if nb is not None:
            raise ValueError("noise_bounds: only with a learned noise (noise=None)")
        kwargs["train_Yvar"] = torch.full_like(train_y, check_positive("noise", noise)).unsqueeze(-1)
    elif nb is not None:
        from gpytorch.constraints import Interval
        from gpytorch.likelihoods import GaussianLikelihood

        kwargs["likelihood"] = GaussianLikelihood(noise_constraint=Interval(*nb))
    if standardize:
        from botorch.models.transforms.outcome import Standardize

        kwargs["outcome_transform"] = Standardize(m=1)
    else:
        kwargs["outcome_transform"] = None
    return SingleTaskGP(train_x, train_y.unsqueeze(-1), **kwargs).to(train_x)


def fit_gp(
    model: Any,
    *,
    maxiter: int | None = None,
    retry: bool = True,
    init_state: Mapping[str, torch.Tensor] | None = None,
    quiet: bool = True,
) -> Any:
    r"""Fit ``model``'s hyperparameters by maximising the exact marginal log likelihood; returns ``model``.

    The rule, in order:

    1. ``init_state`` (e.g. :func:`hyperparameter_state` of an earlier fit) is loaded, non-strictly and
       without its ``train*`` entries (the data stay the model's own): the warm start, or the fixed
       hyperparameters when ``maxiter=0``.
    2. ``maxiter=0``: no optimisation. Otherwise L-BFGS-B (``scipy.optimize.minimize`` through BoTorch) with
       at most ``maxiter`` iterations (``None``: BoTorch's default budget), started from the current values:
       ``retry=True`` runs BoTorch's ``fit_gpytorch_mll`` (an optimiser warning or a non-PSD error triggers up
       to 4 more attempts from hyperparameters resampled from their priors; all failing raises BoTorch's
       ``ModelFittingError``); ``retry=False`` runs one ``fit_gpytorch_mll_scipy`` and, if it raises, warns
       (``RuntimeWarning``) and keeps the hyperparameters where the failed run left them.
    3. The model is put in eval mode.

    Args:
        model: a GPyTorch exact GP, e.g. :func:`single_task_gp`.
        maxiter: L-BFGS-B iteration cap, ``>= 0`` or ``None``.
        retry: BoTorch's retrying fit (True) or one plain run (False).
        init_state: hyperparameters to start from.
        quiet: silence the warnings raised during the fit (non-convergence is expected under a small cap).
    """
    from gpytorch.mlls import ExactMarginalLogLikelihood

    if maxiter is not None:
        maxiter = check_int("maxiter", maxiter, minimum=0)
    check_type("retry", retry, bool)
    check_type("quiet", quiet, bool)
    if init_state is not None:
        check_type("init_state", init_state, Mapping)
        model.load_state_dict(
            {k: v for k, v in init_state.items() if not k.startswith("train")}, strict=False
        )
    if maxiter != 0:
        mll = ExactMarginalLogLikelihood(model.likelihood, model)
        with warnings.catch_warnings():
            if quiet:
                warnings.simplefilter("ignore")
            if retry:
                from botorch.fit import fit_gpytorch_mll

                kwargs: dict[str, Any] = {}
                if maxiter is not None:
                    kwargs["optimizer_kwargs"] = {"options": {"maxiter": maxiter}}
                fit_gpytorch_mll(mll, **kwargs)
            else:
                from botorch.optim.fit import fit_gpytorch_mll_scipy

                mll.train()
                options = {} if maxiter is None else {"options": {"maxiter": maxiter}}
                try:
                    fit_gpytorch_mll_scipy(mll, **options)
                except Exception as exc:  # numerical failure of the ML fit
                    warnings.warn(
                        f"ML fit failed ({exc}); keeping the hyperparameters where it stopped",
                        RuntimeWarning,
                        stacklevel=2,
                    )
    model.eval()
    return model


def hyperparameter_state(
    model: Any, *, prefixes: Sequence[str] | None = None, raw_only: bool = False
) -> dict[str, torch.Tensor]:
    """Detached copies of ``model.state_dict()`` entries: those whose name starts with one of ``prefixes``
    (all when ``None``) and, with ``raw_only``, contains ``"raw"`` (the unconstrained parameters, without
    the constraints' bound buffers or the training data)."""
    check_type("raw_only", raw_only, bool)
    pre = None if prefixes is None else tuple(str(p) for p in prefixes)
    return {
        k: v.detach().clone()
        for k, v in model.state_dict().items()
        if (pre is None or k.startswith(pre)) and (not raw_only or "raw" in k)
    }
