"""Convex optimisation layers: batched, differentiable solvers of small convex programs in pure torch.

Start here when a method needs the solution of a convex program inside a gradient computation (bilevel
lower levels, decision-focused learning, simplex-weighted multi-objective steps, portfolio layers):

* :func:`capped_qp` (:mod:`optarium.convex.qp`): min x'Qx/2 s.t. a'x = b, x >= 0, x_i <= c_i 1'x + u_i, by a
  batched interior point, an active-set polish differentiated by autograd and an implicit KKT fallback;
  returns a :class:`QPSolution` (x, polished, kkt_residual, n_iter).
* :func:`simplex_qp`: the same over the (capped) probability simplex, e.g. the min-norm point of a convex
  hull.

Pure torch end to end (no numpy round trip), dtype and device follow the inputs, bad input raises
``ValueError`` / ``TypeError`` whose message starts with the argument's name. cvxpy / cvxpylayers are test
references only. The sparse tangent portfolio (:mod:`optarium.soft.sparse_tangent_portfolio`) is built on
:func:`capped_qp`.
"""

from optarium.convex.qp import QPSolution, capped_qp, simplex_qp

__all__ = ["QPSolution", "capped_qp", "simplex_qp"]
