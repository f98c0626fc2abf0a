r"""ENN as a BoTorch ``Model``, so BoTorch acquisition functions (UCB, EI, qUCB, qEI, ...) run on it.

:func:`as_botorch_model` wraps an :class:`~optarium.bo.enn.ENN` and fixed :class:`~optarium.bo.enn.ENNParams`.
``posterior(X)`` for ``X`` of shape ``batch x q x d`` returns a ``GPyTorchPosterior`` over a multivariate
normal with the ENN mean and a *diagonal* covariance (ENN predicts each point independently; joint MC samples
of a q-batch are therefore independent across its points). ``observation_noise=True`` adds the aleatoric
variance.
The posterior is differentiable in ``X`` (the neighbours' distances are recomputed by direct differences), so
``botorch.optim.optimize_acqf`` can use gradients; the neighbour set itself is piecewise constant.

BoTorch is imported on the first call, never at import time of :mod:`optarium.bo`. Only single-output models
(or ``output_indices`` selecting one output) are supported.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from optarium._core.validation import check_type
from optarium.bo.enn import ENN, ENNParams

__all__ = ["as_botorch_model", "botorch_model_class"]


@functools.cache
def botorch_model_class() -> type:
    """The ``botorch.models.model.Model`` subclass :class:`ENNModel` (built on first use)."""
    from botorch.models.model import Model
    from botorch.posteriors.gpytorch import GPyTorchPosterior
    from gpytorch.distributions import MultivariateNormal
    from linear_operator.operators import DiagLinearOperator

    class ENNModel(Model):
        """A BoTorch model whose posterior is the ENN's mean and (diagonal) variance."""

        def __init__(self, enn: ENN, params: ENNParams) -> None:
            super().__init__()
            self.enn = enn
            self.params = params
            self._num_outputs = enn.num_outputs

        @property
        def num_outputs(self) -> int:
            return self._num_outputs

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
            outputs = list(range(self.num_outputs)) if output_indices is None else list(output_indices)
            if len(outputs) != 1:
                raise ValueError("output_indices: the ENN BoTorch model supports one output at a time")
            j = outputs[0]
            shape = X.shape[:-1]
            flat = X.reshape(-1, X.shape[-1]).to(self.enn.dtype)
            enn = self.enn
            mean_z, var_epi, var_ale, _, _ = enn.posterior_batch(
                flat,
                self.params.k,
                flat.new_tensor([self.params.epistemic_variance_scale]),
                flat.new_tensor([self.params.aleatoric_variance_scale]),
                observation_noise=bool(observation_noise is not False),
            )
            var = (var_epi[0, :, j] + var_ale[0, :, j]).clamp_min(enn.eps) * enn.y_std[j] ** 2
            mean = enn.y_mean[j] + enn.y_std[j] * mean_z[0, :, j]
            mean, var = mean.reshape(shape).to(X.dtype), var.reshape(shape).to(X.dtype)
            posterior = GPyTorchPosterior(MultivariateNormal(mean, DiagLinearOperator(var)))
            if posterior_transform is not None:
                return posterior_transform(posterior)
            return posterior

        def forward(self, X: torch.Tensor) -> Any:  # pragma: no cover - not a GPyTorch model
            raise NotImplementedError("use posterior()")

    ENNModel.__module__ = __name__
    ENNModel.__qualname__ = "ENNModel"
    return ENNModel


def as_botorch_model(enn: ENN, params: ENNParams | None = None) -> Any:
    """Wrap ``enn`` with ``params`` (default ``ENNParams()``) as a BoTorch ``Model``.

    Example:
        >>> from botorch.acquisition import UpperConfidenceBound
        >>> x = torch.rand(30, 2, dtype=torch.float64)
        >>> model = as_botorch_model(ENN(x, x.sum(-1)), ENNParams(k=5))
        >>> UpperConfidenceBound(model, beta=1.0)(torch.rand(4, 1, 2, dtype=torch.float64)).shape
        torch.Size([4])
    """
    check_type("enn", enn, ENN)
    params = ENNParams() if params is None else check_type("params", params, ENNParams)
    return botorch_model_class()(enn, params)
