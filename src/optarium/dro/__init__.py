"""Distributionally robust optimization: ambiguity sets, exact worst cases and DRO solvers.

Start here when a loss must hold up under a shift of the data distribution:

* ambiguity sets (:mod:`optarium.dro.ambiguity`): :class:`KL`, :class:`ChiSquare`, :class:`TotalVariation`,
  :class:`CVaR` (reweightings of the empirical distribution) and :class:`Wasserstein` (moves of its points);
* :func:`worst_case` (:mod:`optarium.dro.worst_case`): the exact worst-case expected loss and weights over
  a reweighting set, batched and differentiable in the losses (gradient = the worst-case weights);
* :func:`wasserstein_worst_case` (:mod:`optarium.dro.wasserstein`): the type-2 Wasserstein worst case of a
  smooth loss by its Lagrangian dual with an exact inner fixed point (a ``Result`` with the worst-case
  points), :func:`wasserstein_fixed_point`, WRM's inner maximisation for a fixed penalty, and
  :func:`linear_wasserstein_penalty`, the exact type-1 worst case of a Lipschitz loss of a linear model;
* :func:`minimize_worst_case` (:mod:`optarium.dro.minimize`): min over parameters of the worst case over a
  reweighting set (a ``Result``).

Entropic OT comes from :mod:`optarium.ot`. Everything is pure torch, follows the inputs' dtype and device,
and raises ``ValueError`` / ``TypeError`` naming the bad argument; cvxpy is the test reference.
"""

from optarium.dro.ambiguity import KL, AmbiguitySet, ChiSquare, CVaR, TotalVariation, Wasserstein
from optarium.dro.minimize import minimize_worst_case
from optarium.dro.wasserstein import (
    linear_wasserstein_penalty,
    wasserstein_fixed_point,
    wasserstein_worst_case,
)
from optarium.dro.worst_case import WorstCase, check_weights, worst_case

__all__ = [
    "KL",
    "AmbiguitySet",
    "CVaR",
    "ChiSquare",
    "TotalVariation",
    "Wasserstein",
    "WorstCase",
    "check_weights",
    "linear_wasserstein_penalty",
    "minimize_worst_case",
    "wasserstein_fixed_point",
    "wasserstein_worst_case",
    "worst_case",
]
