r"""The surrogate-loss contract of the RL family: batched tensors in, a scalar and diagnostics out.

A policy-optimisation loss (PPO's clipped surrogate, GIPO, segment-level PPO, CVaR policy gradients, ...)
is a function

.. code-block:: python

    loss, diagnostics = loss_fn(logp, old_logp, advantages, mask)

of batched tensors of one shape (``(B, T)`` token level, or ``(N,)``): ``logp`` the log-probabilities of
the taken actions under the current policy (differentiable), ``old_logp`` under the behaviour policy,
``advantages`` (broadcastable to ``logp``'s shape: per token, or ``(B, 1)`` per sequence) and ``mask``
(``None`` or ``logp``'s shape; 0 marks padding). It returns a 0-d ``loss`` to *minimise* and a dict of
0-d, detached diagnostics (clip fraction, approximate KL, ...). ``old_logp`` and ``advantages`` are
constants (no gradient flows into them); masked entries affect neither the loss nor its gradient;
hyperparameters are keyword arguments bound before the call (``functools.partial``). :class:`SurrogateLoss`
is the protocol; :func:`check_batch` validates the inputs and :func:`aggregate` averages per-token terms
the ways the papers do. The conformance checks are :mod:`optarium.testing.losses`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

import torch

from optarium._core.validation import check_choice

__all__ = ["AGGREGATIONS", "SurrogateLoss", "aggregate", "check_batch"]

#: How per-token terms become one number: the mean over all valid tokens (``token-mean``), the mean over
#: sequences of each sequence's token mean (``seq-mean-token-mean``) or token sum (``seq-mean-token-sum``).
AGGREGATIONS: tuple[str, ...] = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum")


@runtime_checkable
class SurrogateLoss(Protocol):
    """``loss_fn(logp, old_logp, advantages, mask) -> (loss, diagnostics)`` (see the module docstring)."""

    def __call__(
        self,
        logp: torch.Tensor,
        old_logp: torch.Tensor,
        advantages: torch.Tensor,
        mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, Mapping[str, torch.Tensor]]:
        """The scalar loss to minimise and its diagnostics."""
        ...


def check_batch(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Validate a batch; return ``(logp, old_logp, advantages, mask)`` ready to combine.

    ``old_logp`` and ``advantages`` come back detached (constants), ``advantages`` expanded to ``logp``'s
    shape, ``mask`` as a 0/1 tensor of ``logp``'s dtype (all ones for ``None``). Errors name the argument.
    """
    for name, t in (("logp", logp), ("old_logp", old_logp), ("advantages", advantages)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}: must be a tensor, got {type(t).__name__}")
        if not t.is_floating_point():
            raise TypeError(f"{name}: must be a floating tensor, got {t.dtype}")
    if logp.ndim == 0:
        raise ValueError("logp: must be batched (at least 1-d), got a 0-d tensor")
    if old_logp.shape != logp.shape:
        raise ValueError(f"old_logp: must have logp's shape {tuple(logp.shape)}, got {tuple(old_logp.shape)}")
    try:
        shape = torch.broadcast_shapes(advantages.shape, logp.shape)
    except RuntimeError:
        shape = None
    if shape != logp.shape:
        raise ValueError(
            f"advantages: must broadcast to logp's shape {tuple(logp.shape)}, got {tuple(advantages.shape)}"
        )
    if mask is None:
        m = torch.ones_like(logp, dtype=logp.dtype).detach()
    else:
        if not isinstance(mask, torch.Tensor):
            raise TypeError(f"mask: must be a tensor or None, got {type(mask).__name__}")
        if mask.shape != logp.shape:
            raise ValueError(f"mask: must have logp's shape {tuple(logp.shape)}, got {tuple(mask.shape)}")
        m = mask.detach().to(dtype=logp.dtype, device=logp.device)
    return logp, old_logp.detach(), advantages.detach().expand(logp.shape), m


def aggregate(per_token: torch.Tensor, mask: torch.Tensor, mode: str = "token-mean") -> torch.Tensor:
    """Average ``per_token`` over the valid entries of ``mask`` as :data:`AGGREGATIONS` says.

    For 1-d inputs every entry is its own sequence. Masked entries contribute nothing (also when they hold
    NaN or inf); an all-masked batch gives 0.
    """
    check_choice("mode", mode, AGGREGATIONS)
    terms = torch.where(mask > 0, per_token, torch.zeros_like(per_token)) * mask
    if mode == "token-mean" or per_token.ndim == 1:
        return terms.sum() / mask.sum().clamp_min(1.0)
    seq = terms.flatten(1).sum(-1)
    if mode == "seq-mean-token-mean":
        seq = seq / mask.flatten(1).sum(-1).clamp_min(1.0)
    return seq.mean()
