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
  reweighting set (a ``Result``);
* nested DRO (:mod:`optarium.dro.nested`): an optimistic phi-divergence reweighting over an OT-robustified
  loss: :func:`optimistic_weights`, :func:`nested_linear_value` (exact for linear models),
  :class:`NestedDRORegressor`, the criterion :class:`NestedDRO` for torch models and :func:`nested_dro_fit`
  (a ``Result``);
* Safe KL (:mod:`optarium.dro.safe_kl`): the overflow-safe, unbiased stochastic LogSumExp surrogate:
  :func:`safe_logsumexp_surrogate`, its exact full-batch value :func:`safe_logsumexp`, the conjugate pair
  :func:`safe_kl_conjugate` / :func:`safe_kl_generator`, the KL-DRO criterion :class:`SafeKLDROLoss`
  (penalised, constrained, Sinkhorn), :func:`entropic_ot_dual_sgd`, stochastic entropic-OT dual ascent
  (a ``Result``), and the MLMC LogSumExp baseline :func:`mlmc_logsumexp`;
* GFS-DRO (:mod:`optarium.dro.gradient_flow`): gradient-flow samplers of the Sinkhorn-DRO worst case
  (Langevin/WGF, Wasserstein-Fisher-Rao, SVGD, and the WRM and dual-method reductions):
  :class:`SinkhornDROSampler` (with ``robust_loss`` for any torch training loop), :func:`gradient_flow_dro`
  (the outer loop, a ``Result``), :func:`svgd_direction`, :func:`fisher_rao_step`;
* missing-covariate DRO (:mod:`optarium.dro.missing_covariates`): robust contextual decisions from
  partially observed discrete covariates, by LPs over observation-consistent laws with a missingness
  mechanism: :class:`MissingCovariateDRO` (per-context decisions with certificates, the joint policy as a
  ``Result``), :func:`newsvendor_cost` / :class:`PiecewiseLinearCost`, :func:`block_radii` and
  :func:`robust_grid_search` (the exhaustive grid reference, a ``Result``); NumPy/SciPy LPs (HiGHS).

Entropic OT comes from :mod:`optarium.ot`. Everything is pure torch, follows the inputs' dtype and device,
and raises ``ValueError`` / ``TypeError`` naming the bad argument; cvxpy is the test reference.
"""

from optarium.dro.ambiguity import KL, AmbiguitySet, ChiSquare, CVaR, TotalVariation, Wasserstein
from optarium.dro.gradient_flow import (
    SinkhornDROSampler,
    fisher_rao_step,
    gradient_flow_dro,
    svgd_direction,
)
from optarium.dro.minimize import minimize_worst_case
from optarium.dro.missing_covariates import (
    MissingCovariateDRO,
    PiecewiseLinearCost,
    RobustDecision,
    block_radii,
    newsvendor_cost,
    robust_grid_search,
)
from optarium.dro.nested import (
    NestedDRO,
    NestedDRORegressor,
    nested_dro_fit,
    nested_linear_value,
    optimistic_weights,
)
from optarium.dro.safe_kl import (
    SafeKLDROLoss,
    entropic_ot_dual_sgd,
    mlmc_logsumexp,
    safe_kl_conjugate,
    safe_kl_generator,
    safe_logsumexp,
    safe_logsumexp_surrogate,
)
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
    "MissingCovariateDRO",
    "NestedDRO",
    "NestedDRORegressor",
    "PiecewiseLinearCost",
    "RobustDecision",
    "SafeKLDROLoss",
    "SinkhornDROSampler",
    "TotalVariation",
    "Wasserstein",
    "WorstCase",
    "block_radii",
    "check_weights",
    "entropic_ot_dual_sgd",
    "fisher_rao_step",
    "gradient_flow_dro",
    "linear_wasserstein_penalty",
    "minimize_worst_case",
    "mlmc_logsumexp",
    "nested_dro_fit",
    "nested_linear_value",
    "newsvendor_cost",
    "optimistic_weights",
    "robust_grid_search",
    "safe_kl_conjugate",
    "safe_kl_generator",
    "safe_logsumexp",
    "safe_logsumexp_surrogate",
    "svgd_direction",
    "wasserstein_fixed_point",
    "wasserstein_worst_case",
    "worst_case",
]
