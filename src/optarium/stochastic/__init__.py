"""Stochastic constrained optimization: single-loop stochastic penalty methods.

* MoSSP (:mod:`optarium.stochastic.mossp`, arXiv:2605.29635): the momentum-based single-loop stochastic
  penalty method for constrained problems with a difference-of-convex regulariser, :func:`mossp` (Polyak or
  recursive momentum, a ``Result``); its baselines :func:`penalty_prox_sgd` (single-loop stochastic penalty
  prox-SGD, optionally with recursive momentum or a projection) and :func:`penalty_dca` (deterministic penalty
  DCA); the common KKT residual :func:`kkt_residual`; proximal maps :func:`prox_l1`, :func:`prox_l2_norm`,
  :func:`prox_capped_excess`, :func:`prox_zero` (objects with ``value`` and ``subgradient``).

Pure torch; dtype and device follow ``x0``; bad arguments raise ``ValueError`` / ``TypeError`` naming them.
"""

from optarium.stochastic.mossp import (
    CappedExcess,
    L1Norm,
    L2Norm,
    ProxOperator,
    Zero,
    kkt_residual,
    mossp,
    penalty_dca,
    penalty_prox_sgd,
    prox_capped_excess,
    prox_l1,
    prox_l2_norm,
    prox_zero,
)

__all__ = [
    "CappedExcess",
    "L1Norm",
    "L2Norm",
    "ProxOperator",
    "Zero",
    "kkt_residual",
    "mossp",
    "penalty_dca",
    "penalty_prox_sgd",
    "prox_capped_excess",
    "prox_l1",
    "prox_l2_norm",
    "prox_zero",
]
