"""Bilevel optimization: hypergradients of an upper objective through the solution of a lower problem.

The family's problems, hypergradient estimators and solvers are exported here as they land (issue 15:
natural hypergradient descent, multi-task bilevel with weighted-Chebyshev penalties, decision-focused OT
ambiguity sets; the distributed bilevel methods of Distributed II build on the same layer).

- The family layer (:mod:`~optarium.bilevel.problem`, :mod:`~optarium.bilevel.hypergradients`):
  :class:`BilevelProblem` (per-sample lower loss, upper objective, optional exact regulariser and sample
  weights), :class:`WorkCounter`, :func:`sample_batch`; the estimators :func:`hypergradient` (AID with CG,
  Neumann, exact solve, or the Fisher), :func:`conjugate_gradient`, :func:`neumann_series`,
  :func:`stocbio_hypergradient`, :func:`unrolled_hypergradient` (ITD and its truncation), :func:`soba_step`;
  the solvers :func:`inner_sgd`, :func:`outer_loop`, :func:`bilevel_solve` and :func:`soba`.
- Natural hypergradient descent (:mod:`~optarium.bilevel.nhgd`, nhgd): :class:`NHGD`, :class:`RunningFisher`,
  :func:`empirical_fisher`, :func:`natural_hypergradient`, :func:`fisher_solve`, :func:`woodbury_update`.
- Multi-task bilevel as equality-constrained multi-objective optimization (:mod:`~optarium.bilevel.chebyshev`,
  mtbl-wc-penalty): :class:`ECMOProblem`, :func:`wc_penalty` (weighted-Chebyshev penalty; hard, smooth, gda
  and the linear-scalarisation baseline), :func:`wc_penalty_front`, :func:`mgda_penalty` (MGDA-type
  baseline), :func:`simplex_grid`, :func:`kkt_residual`, :func:`min_norm_weights`, :func:`project_simplex`,
  :func:`scalarized_value`.
- Decision-focused OT ambiguity sets (:mod:`~optarium.bilevel.ot_ambiguity`, dfl-ambiguity-otdro):
  :class:`OTDROProblem` (closed-form OT-DRO lower levels), :func:`learn_ambiguity_shape` (the trainable
  Mahalanobis cost), :func:`mahalanobis_wasserstein` (exact OT and its envelope gradient),
  :func:`ambiguity_objective`, :func:`calibrate_radius`.
- Decentralized Hessian/Jacobian-free bilevel with a PL lower level
  (:mod:`~optarium.bilevel.decentralized_pl`, decentralized-pl-bilevel; SPMD on :mod:`optarium.distributed`):
  :func:`dhjf_bilevel` (D-HJFBiO), :func:`dpenalty_bilevel` (value-function penalty), :func:`dsoba_bilevel`
  (D-SOBA baseline), the common :func:`decentralized_bilevel`, the synthetic instance :class:`PLSinBilevel` /
  :func:`make_pl_sin_bilevel`.
- Federated bilevel performative prediction (:mod:`~optarium.bilevel.fbi_performative`, fbi-performative;
  SPMD on :mod:`optarium.distributed`): :func:`fbi_rrm`, :func:`fbi_sgd`, the baselines :func:`pooled_rrm`
  and :func:`performative_fedavg`, :func:`stable_point`, :func:`stability_threshold`,
  :func:`default_outer_schedule`, :class:`PerformativeProblem`; the problem is
  :mod:`optarium.problems.strategic_regression`.
"""

from optarium.bilevel.chebyshev import (
    ECMOProblem,
    kkt_residual,
    mgda_penalty,
    min_norm_weights,
    project_simplex,
    scalarized_value,
    simplex_grid,
    wc_penalty,
    wc_penalty_front,
)
from optarium.bilevel.decentralized_pl import (
    PLSinBilevel,
    decentralized_bilevel,
    dhjf_bilevel,
    dpenalty_bilevel,
    dsoba_bilevel,
    make_pl_sin_bilevel,
)
from optarium.bilevel.fbi_performative import (
    PerformativeProblem,
    default_outer_schedule,
    fbi_rrm,
    fbi_sgd,
    performative_fedavg,
    pooled_rrm,
    stability_threshold,
    stable_point,
)
from optarium.bilevel.hypergradients import (
    bilevel_solve,
    conjugate_gradient,
    hypergradient,
    inner_sgd,
    neumann_series,
    outer_loop,
    soba,
    soba_step,
    stocbio_hypergradient,
    unrolled_hypergradient,
)
from optarium.bilevel.nhgd import (
    NHGD,
    RunningFisher,
    empirical_fisher,
    fisher_solve,
    natural_hypergradient,
    woodbury_update,
)
from optarium.bilevel.ot_ambiguity import (
    OTDROProblem,
    ambiguity_objective,
    calibrate_radius,
    learn_ambiguity_shape,
    mahalanobis_wasserstein,
)
from optarium.bilevel.problem import BilevelProblem, WorkCounter, sample_batch

__all__: list[str] = [
    "NHGD",
    "BilevelProblem",
    "ECMOProblem",
    "OTDROProblem",
    "PLSinBilevel",
    "PerformativeProblem",
    "RunningFisher",
    "WorkCounter",
    "ambiguity_objective",
    "bilevel_solve",
    "calibrate_radius",
    "conjugate_gradient",
    "decentralized_bilevel",
    "default_outer_schedule",
    "dhjf_bilevel",
    "dpenalty_bilevel",
    "dsoba_bilevel",
    "empirical_fisher",
    "fbi_rrm",
    "fbi_sgd",
    "fisher_solve",
    "hypergradient",
    "inner_sgd",
    "kkt_residual",
    "learn_ambiguity_shape",
    "mahalanobis_wasserstein",
    "make_pl_sin_bilevel",
    "mgda_penalty",
    "min_norm_weights",
    "natural_hypergradient",
    "neumann_series",
    "outer_loop",
    "performative_fedavg",
    "pooled_rrm",
    "project_simplex",
    "sample_batch",
    "scalarized_value",
    "simplex_grid",
    "soba",
    "soba_step",
    "stability_threshold",
    "stable_point",
    "stocbio_hypergradient",
    "unrolled_hypergradient",
    "wc_penalty",
    "wc_penalty_front",
    "woodbury_update",
]
