r"""optarium's surrogates as BoTorch ``Model``\ s, so BoTorch's acquisition functions run on them.

:func:`as_botorch_model` wraps an :class:`~optarium.bo.enn.ENN` and fixed :class:`~optarium.bo.enn.ENNParams`.
``posterior(X)`` for ``X`` of shape ``batch x q x d`` returns a ``GPyTorchPosterior`` over a multivariate
normal with the ENN mean and a *diagonal* covariance (ENN predicts each point independently; joint MC samples
of a q-batch are therefore independent across its points). ``observation_noise=True`` adds the aleatoric
variance. The posterior is differentiable in ``X`` (the neighbours' distances are recomputed by direct
differences), so ``botorch.optim.optimize_acqf`` can use gradients; the neighbour set itself is piecewise
constant.

Fantasies. ENN is a K-nearest-neighbour model, so conditioning on observations adds points:
``condition_on_observations(X, Y, noise=None)`` returns a model whose prediction at a query uses the ``K``
nearest among the training points and the new points (the new ones count after the training points at a
distance tie, as :meth:`ENN.add` would number them), with the training data's standardisation and the same
:class:`ENNParams` kept fixed, as BoTorch keeps a GP's hyperparameters and outcome transform when it
conditions. Batched observations (``Y`` of shape ``sample_shape x batch_shape x n' x m``, what
``fantasize`` draws) give a model of that batch shape, evaluated for all batches in one vectorised pass, so
fantasy-based acquisitions (qKnowledgeGradient, qNoisyExpectedImprovement's fantasies) run on ENN.
``noise`` (variances in the objective's units) adds to the new points' aleatoric variance, as ``train_yvar``
does.

:func:`strategy_model` wraps a surrogate fitted in a strategy's own coordinates (unit-cube inputs, signed or
standardised targets) so that it predicts the user's objective at the user's inputs: ``x_model = (x - lower) /
(upper - lower)`` and ``y_user = offset + scale * y_model`` per output (``scale < 0`` undoes the sign flip of
a minimising strategy). Conditioning maps ``X`` and ``Y`` the same way before delegating. This is what the
strategies' public ``model`` properties return (:class:`~optarium.bo.TurboENN`, :class:`~optarium.bo.TurboGP`,
:class:`~optarium.bo.TcGPEI`, the POM family). BoTorch maximises: for a minimisation problem pass
``posterior_transform=ScalarizedPosteriorTransform(weights=torch.tensor([-1.0]))`` (or an objective that
negates) to the acquisition function, as for any BoTorch model of a quantity to minimise.

BoTorch is imported on the first call, never at import time of :mod:`optarium.bo`. Only single-output models
(or ``output_indices`` selecting one output) are supported by the ENN adapter.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from optarium._core.validation import check_type
from optarium.bo.enn import ENN, ENNParams

__all__ = [
    "as_botorch_model",
    "botorch_model_class",
    "gaussian_model",
    "strategy_model",
]


def _affine_posterior(posterior: Any, offset: torch.Tensor, scale: torch.Tensor) -> Any:
    """``offset + scale * Y`` of a single-output ``GPyTorchPosterior`` (an exact Gaussian transform)."""
    from botorch.posteriors.gpytorch import GPyTorchPosterior
    from gpytorch.distributions import MultivariateNormal

    mvn = posterior.distribution
    s = scale.reshape(())
    return GPyTorchPosterior(
        MultivariateNormal(offset.reshape(()) + s * mvn.mean, mvn.lazy_covariance_matrix * s**2)
    )


@functools.cache
def botorch_model_class() -> type:
    """The ``botorch.models.model.Model`` subclass :class:`ENNModel` (built on first use)."""
    from botorch.models.model import FantasizeMixin, Model
    from botorch.posteriors.gpytorch import GPyTorchPosterior
    from gpytorch.distributions import MultivariateNormal
    from linear_operator.operators import DiagLinearOperator

    class ENNModel(Model, FantasizeMixin):
        """A BoTorch model whose posterior is the ENN's mean and (diagonal) variance, optionally conditioned
        on extra (batched) observations: ``fantasies = (x, yz, vz)`` of shapes ``batch x n' x d``,
        ``batch x n' x m`` (standardised with the ENN's standardisation) and the same or ``None`` (their
        standardised noise variances)."""

        def __init__(
            self,
            enn: ENN,
            params: ENNParams,
            fantasies: tuple[torch.Tensor, torch.Tensor, torch.Tensor | None] | None = None,
        ) -> None:
            super().__init__()
            self.enn = enn
            self.params = params
            self.fantasies = fantasies
            self._num_outputs = enn.num_outputs
            self.likelihood = None  # FantasizeMixin.fantasize looks for a fixed-noise likelihood

        @property
        def num_outputs(self) -> int:
            return self._num_outputs

        @property
        def batch_shape(self) -> torch.Size:
            return torch.Size([]) if self.fantasies is None else self.fantasies[0].shape[:-2]

        def posterior(
            self,
            X: torch.Tensor,
            output_indices: list[int] | None = None,
            observation_noise: bool | torch.Tensor = False,
            posterior_transform: Any = None,
            **kwargs: Any,
        ) -> Any:
            outputs = list(range(self.num_outputs)) if output_indices is None else list(output_indices)
            if len(outputs) != 1:
                raise ValueError("output_indices: the ENN BoTorch model supports one output at a time")
            j = outputs[0]
            noisy = observation_noise is not False
            if self.fantasies is None:
                mean_z, var = self._base(X, j, noisy)
            else:
                mean_z, var = self._conditioned(X, j, noisy)
            enn = self.enn
            mean = (enn.y_mean[j] + enn.y_std[j] * mean_z).to(X.dtype)
            var = (var.clamp_min(enn.eps) * enn.y_std[j] ** 2).to(X.dtype)
            posterior = GPyTorchPosterior(MultivariateNormal(mean, DiagLinearOperator(var)))
            if posterior_transform is not None:
                return posterior_transform(posterior)
            return posterior

        def _base(self, X: torch.Tensor, j: int, noisy: bool) -> tuple[torch.Tensor, torch.Tensor]:
            enn, p = self.enn, self.params
            flat = X.reshape(-1, X.shape[-1]).to(enn.dtype)
            mean_z, var_epi, var_ale, _, _ = enn.posterior_batch(
                flat,
                p.k,
                flat.new_tensor([p.epistemic_variance_scale]),
                flat.new_tensor([p.aleatoric_variance_scale]),
                observation_noise=noisy,
            )
            shape = X.shape[:-1]
            return mean_z[0, :, j].reshape(shape), (var_epi[0, :, j] + var_ale[0, :, j]).reshape(shape)

        def _conditioned(self, X: torch.Tensor, j: int, noisy: bool) -> tuple[torch.Tensor, torch.Tensor]:
            """The K nearest among the training points and this model's extra points, for every batch at
            once: the training points' K nearest (shared by all batches) and all extra points of the query's
            batch are merged and the K smallest distances kept (a stable sort: training points first)."""
            enn, p = self.enn, self.params
            fx, fyz, fvz = self.fantasies  # type: ignore[misc]
            batch = torch.broadcast_shapes(X.shape[:-2], fx.shape[:-2])
            q, d, n_new = X.shape[-2], X.shape[-1], fx.shape[-2]
            Xb = X.to(enn.dtype).expand(*batch, q, d)
            flat = Xb.reshape(-1, d)
            idx, d2_base = enn.neighbors(flat, p.k)  # (P, k')
            c_ale = float(p.aleatoric_variance_scale)
            v_base = flat.new_full(d2_base.shape, c_ale)
            if enn.Yvar_z is not None:
                v_base = v_base + enn.Yvar_z[idx, j]
            fxb = fx.expand(*batch, n_new, d)
            d2_new = (Xb.unsqueeze(-2) - fxb.unsqueeze(-3)).square().sum(-1).reshape(-1, n_new)  # (P, n')
            y_new = (
                fyz[..., j].expand(*batch, n_new).unsqueeze(-2).expand(*batch, q, n_new).reshape(-1, n_new)
            )
            v_new = flat.new_full(d2_new.shape, c_ale)
            if fvz is not None:
                v_new = v_new + fvz[..., j].expand(*batch, n_new).unsqueeze(-2).expand(
                    *batch, q, n_new
                ).reshape(-1, n_new)
            d2 = torch.cat([d2_base, d2_new], -1)
            yz = torch.cat([enn.Yz[idx, j], y_new], -1)
            extra = torch.cat([v_base, v_new], -1)
            k = min(p.k, d2.shape[-1])
            order = d2.detach().argsort(dim=-1, stable=True)[:, :k]
            d2, yz, extra = d2.gather(-1, order), yz.gather(-1, order), extra.gather(-1, order)
            w = (enn.eps + p.epistemic_variance_scale * d2 + extra).reciprocal()
            wsum = w.sum(-1)
            wbar = w / wsum.unsqueeze(-1)
            mean_z = (wbar * yz).sum(-1)
            var = wsum.reciprocal()
            if noisy:
                var = var + (wbar * extra).sum(-1)
            shape = (*batch, q)
            return mean_z.reshape(shape), var.reshape(shape)

        def condition_on_observations(
            self, X: torch.Tensor, Y: torch.Tensor, noise: torch.Tensor | None = None, **kwargs: Any
        ) -> ENNModel:
            """This model conditioned on ``(X, Y)`` (``noise``: their variances), see the module docstring."""
            enn = self.enn
            if X.ndim < 2 or X.shape[-1] != enn.X.shape[1]:
                raise ValueError(f"X: must have shape batch x n' x {enn.X.shape[1]}, got {tuple(X.shape)}")
            if Y.ndim < 2 or Y.shape[-1] != self.num_outputs or Y.shape[-2] != X.shape[-2]:
                raise ValueError(
                    f"Y: must have shape batch x {X.shape[-2]} x {self.num_outputs}, got {tuple(Y.shape)}"
                )
            if not (torch.isfinite(X).all() and torch.isfinite(Y).all()):
                raise ValueError("X, Y: contain NaN or inf")
            batch = torch.broadcast_shapes(X.shape[:-2], Y.shape[:-2], self.batch_shape)
            n_new, d, m = X.shape[-2], X.shape[-1], self.num_outputs
            x = X.to(enn.dtype).expand(*batch, n_new, d)
            yz = ((Y.to(enn.dtype) - enn.y_mean) / enn.y_std).expand(*batch, n_new, m)
            vz = None
            if noise is not None:
                if not (torch.isfinite(noise).all() and (noise >= 0).all()):
                    raise ValueError("noise: must be finite and >= 0")
                vz = (noise.to(enn.dtype) / enn.y_std.square()).expand(*batch, n_new, m)
            if self.fantasies is not None:
                ox, oy, ov = self.fantasies
                n_old = ox.shape[-2]
                x = torch.cat([ox.expand(*batch, n_old, d), x], -2)
                yz = torch.cat([oy.expand(*batch, n_old, m), yz], -2)
                if ov is not None or vz is not None:
                    ov = torch.zeros_like(oy) if ov is None else ov
                    vz_new = torch.zeros(*batch, n_new, m, dtype=enn.dtype) if vz is None else vz
                    vz = torch.cat([ov.expand(*batch, n_old, m), vz_new], -2)
            return ENNModel(enn, self.params, (x, yz, vz))

        def forward(self, X: torch.Tensor) -> Any:  # pragma: no cover - not a GPyTorch model
            raise NotImplementedError("use posterior()")

    ENNModel.__module__ = __name__
    ENNModel.__qualname__ = "ENNModel"
    return ENNModel


def as_botorch_model(enn: ENN, params: ENNParams | None = None) -> Any:
    """Wrap ``enn`` with ``params`` (default ``ENNParams()``) as a BoTorch ``Model`` (with fantasies).

    Example:
        >>> from botorch.acquisition import UpperConfidenceBound
        >>> x = torch.rand(30, 2, dtype=torch.float64)
        >>> model = as_botorch_model(ENN(x, x.sum(-1)), ENNParams(k=5))
        >>> UpperConfidenceBound(model, beta=1.0)(torch.rand(4, 1, 2, dtype=torch.float64)).shape
        torch.Size([4])
        >>> fantasy = model.condition_on_observations(torch.rand(3, 2, 1, 2, dtype=torch.float64),
        ...                                           torch.rand(3, 2, 1, 1, dtype=torch.float64))
        >>> fantasy.batch_shape, fantasy.posterior(torch.rand(3, 2, 4, 2, dtype=torch.float64)).mean.shape
        (torch.Size([3, 2]), torch.Size([3, 2, 4, 1]))
    """
    check_type("enn", enn, ENN)
    params = ENNParams() if params is None else check_type("params", params, ENNParams)
    return botorch_model_class()(enn, params)


@functools.cache
def _strategy_model_class() -> type:
    from botorch.models.model import FantasizeMixin, Model

    class StrategyModel(Model, FantasizeMixin):
        """A single-output model fitted in a strategy's coordinates, seen in the user's (module docstring)."""

        def __init__(self, inner: Any, bounds: torch.Tensor, offset: float, scale: float) -> None:
            super().__init__()
            self.inner = inner
            self.register_buffer("bounds", bounds.clone())
            self.offset = float(offset)
            self.scale = float(scale)
            self.likelihood = None  # FantasizeMixin.fantasize looks for a fixed-noise likelihood

        @property
        def num_outputs(self) -> int:
            return 1

        @property
        def batch_shape(self) -> torch.Size:
            return self.inner.batch_shape

        def _unit(self, X: torch.Tensor) -> torch.Tensor:
            lo, hi = self.bounds[0].to(X), self.bounds[1].to(X)
            return (X - lo) / (hi - lo)

        def posterior(
            self,
            X: torch.Tensor,
            output_indices: list[int] | None = None,
            observation_noise: bool | torch.Tensor = False,
            posterior_transform: Any = None,
            **kwargs: Any,
        ) -> Any:
            if output_indices is not None and list(output_indices) != [0]:
                raise ValueError("output_indices: this model has one output")
            noise = observation_noise
            if isinstance(noise, torch.Tensor):
                noise = noise / self.scale**2
            post = self.inner.posterior(self._unit(X), observation_noise=noise)
            post = _affine_posterior(post, X.new_tensor(self.offset), X.new_tensor(self.scale))
            return posterior_transform(post) if posterior_transform is not None else post

        def condition_on_observations(self, X: torch.Tensor, Y: torch.Tensor, **kwargs: Any) -> Any:
            if "noise" in kwargs and kwargs["noise"] is not None:
                kwargs["noise"] = kwargs["noise"] / self.scale**2
            inner = self.inner.condition_on_observations(
                self._unit(X), (Y - self.offset) / self.scale, **kwargs
            )
            return StrategyModel(inner, self.bounds, self.offset, self.scale)

        def forward(self, X: torch.Tensor) -> Any:  # pragma: no cover - not a GPyTorch model
            raise NotImplementedError("use posterior()")

    StrategyModel.__module__ = __name__
    StrategyModel.__qualname__ = "StrategyModel"
    return StrategyModel


def strategy_model(inner: Any, bounds: torch.Tensor, *, offset: float = 0.0, scale: float = 1.0) -> Any:
    """``inner`` (a single-output BoTorch model over the unit cube of ``bounds``) seen in the user's units:
    inputs in the box ``bounds`` (shape ``(2, d)``), output ``offset + scale * y_inner``.

    Raises:
        ValueError: ``bounds`` is not ``(2, d)`` with lower < upper, or ``scale`` is 0 or not finite.
    """
    check_type("bounds", bounds, torch.Tensor)
    if bounds.ndim != 2 or bounds.shape[0] != 2 or not bool((bounds[0] < bounds[1]).all()):
        raise ValueError(f"bounds: must have shape (2, d) with lower < upper, got {tuple(bounds.shape)}")
    if not (scale == scale and abs(scale) not in (0.0, float("inf"))):
        raise ValueError(f"scale: must be finite and non-zero, got {scale}")
    return _strategy_model_class()(inner, bounds, offset, scale)


@functools.cache
def _gaussian_model_class() -> type:
    from botorch.models.model import Model
    from botorch.posteriors.gpytorch import GPyTorchPosterior
    from gpytorch.distributions import MultivariateNormal
    from linear_operator.operators import DiagLinearOperator

    class GaussianModel(Model):
        """A single-output model from a function ``x (n, d) -> (mean (n,), variance (n,))``."""

        def __init__(self, mean_var: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]) -> None:
            super().__init__()
            self.mean_var = mean_var

        @property
        def num_outputs(self) -> int:
            return 1

        @property
        def batch_shape(self) -> torch.Size:
            return torch.Size([])

        def posterior(
            self,
            X: torch.Tensor,
            output_indices: list[int] | None = None,
            observation_noise: bool | torch.Tensor = False,
            posterior_transform: Any = None,
            **kwargs: Any,
        ) -> Any:
            if output_indices is not None and list(output_indices) != [0]:
                raise ValueError("output_indices: this model has one output")
            mean, var = self.mean_var(X.reshape(-1, X.shape[-1]))
            if isinstance(observation_noise, torch.Tensor):
                var = var + observation_noise.reshape(-1).expand_as(var)
            shape = X.shape[:-1]
            mvn = MultivariateNormal(mean.reshape(shape).to(X), DiagLinearOperator(var.reshape(shape).to(X)))
            post = GPyTorchPosterior(mvn)
            return posterior_transform(post) if posterior_transform is not None else post

        def forward(self, X: torch.Tensor) -> Any:  # pragma: no cover - not a GPyTorch model
            raise NotImplementedError("use posterior()")

    GaussianModel.__module__ = __name__
    GaussianModel.__qualname__ = "GaussianModel"
    return GaussianModel


def gaussian_model(mean_var: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]) -> Any:
    """A single-output BoTorch ``Model`` with independent Gaussian marginals from ``mean_var(x)`` (``x`` of
    shape ``(n, d)`` -> mean and variance of shape ``(n,)``); differentiable if ``mean_var`` is. It cannot be
    conditioned (``condition_on_observations`` raises BoTorch's ``NotImplementedError``)."""
    if not callable(mean_var):
        raise TypeError(f"mean_var: must be callable, got {type(mean_var).__name__}")
    return _gaussian_model_class()(mean_var)
