"""Optimal transport: batched regularised OT solvers in pure torch, the shared base of the OT-based methods.

Start here when a method needs a transport plan (soft sorting, mirror steps of Gromov-Wasserstein, Sinkhorn
DRO, entropic OT ground truths):

* :func:`sinkhorn` (:mod:`optarium.ot.sinkhorn`): entropic OT by log-domain Sinkhorn for costs (..., n, m)
  and masses a, b, batched in lock step; warm start ``f_init``; gradients to the cost by implicit
  differentiation (``grad="implicit"``) or through the iterations (``grad="unrolled"``).
* :func:`smooth_ot` (:mod:`optarium.ot.smooth`): p-norm regularised OT (p = 2, 3/2, 4/3; sparse plans) by
  damped Newton on the dual, implicit gradients.
* :class:`OTResult` (:mod:`optarium.ot.result`): plan, potentials, regularised and linear values, dual value
  (so the duality gap is one subtraction), status (converged / max_iter / diverged), iterations, marginal
  error and its history; :meth:`OTResult.to_result` gives the solver contract's ``optarium._core.Result``.

Names follow POT's ``ot.solve`` result for familiarity; POT is the reference in the tests, never a
dependency. Every function keeps the cost's dtype and device, and bad input raises ``ValueError`` /
``TypeError`` whose message starts with the argument's name. The soft operators' ``method="ot"``
(:mod:`optarium.soft`) is built on these two solvers.

Particle methods on Wasserstein space: :class:`MWGraD` and :class:`AcceleratedMWGraD`
(:mod:`optarium.ot.a_mwgrad`): multi-target sampling by (accelerated) multiple Wasserstein gradient descent,
min-norm (MGDA) weights over the targets' Wasserstein gradients estimated with kernels.

Graph matching: :func:`structurally_robust_gw` (:mod:`optarium.ot.srgw`): Gromov-Wasserstein with dual
edge masks (structurally robust GW, reconstructed from the paper's abstract) by mask-guided GW with a
Frank-Wolfe, mirror (Bregman proximal) or entropic T-step; with masks off it reproduces POT's
``gromov_wasserstein`` and ``entropic_gromov_wasserstein``.
"""

from optarium.ot.a_mwgrad import AcceleratedMWGraD, MWGraD
from optarium.ot.result import OTResult
from optarium.ot.sinkhorn import GRADS, sinkhorn
from optarium.ot.smooth import P_VALUES, smooth_ot
from optarium.ot.srgw import structurally_robust_gw

__all__ = [
    "GRADS",
    "P_VALUES",
    "AcceleratedMWGraD",
    "MWGraD",
    "OTResult",
    "sinkhorn",
    "smooth_ot",
    "structurally_robust_gw",
]
