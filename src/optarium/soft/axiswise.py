"""Soft axis-wise operators: arg/max/min, (arg)sort, (arg)topk, rank, (arg)quantile, (arg)median.

Reference: A. Paulus, A. R. Geist, V. Musil, S. Hoffmann, O. Beker, G. Martius, "SoftJAX & SoftTorch:
Empowering Automatic Differentiation Libraries with Informative Gradients", ICML 2026 (arXiv:2603.08824).
Names, signatures, defaults, modes, methods and return shapes follow SoftTorch 0.1.1; every function is
pure torch, batched over the leading dimensions without a Python loop over the batch, and its dtype and
device follow the input. Methods (all restated in our own notation):

* ``softsort`` (Prillo & Eisenschlos 2020, arXiv:2006.16038): row i of the soft permutation is
  simplex(-|x_(i) - x_j|) with the hard-sorted anchors x_(i); argmax = simplex(x).
* ``neuralsort`` (Grover et al. 2019, arXiv:1903.08850): row i is
  simplex((2i - n - 1) x_j - sum_k |x_j - x_k|~) (i = 1..n ascending, flipped for descending; |.|~ the soft
  abs of the same mode and softness); argmax uses i = n.
* ``ot`` (Cuturi et al. 2019, arXiv:1905.11885; Xie et al. 2020 for top-k): regularised transport between the
  n values and m anchors (cost (x_i - a_j)^2, plan from :func:`optarium.soft._anchor_plan.transport_plan`
  on the solvers of :mod:`optarium.ot`); the soft
  index of anchor j is column j of the plan, normalised (argsort: anchors linspace(0, 1, n), masses 1/n;
  argmax: anchors {0, 1}, masses ((n-1)/n, 1/n); top-k: k + 1 anchors; quantile: 3 or 4 anchors).
* ``sorting_network`` (Petersen et al. 2021, arXiv:2105.04019): a soft bitonic network
  (:mod:`optarium.soft._sorting_network`).
* ``fast_soft_sort`` (Blondel et al. 2020, arXiv:2002.08871): values only, by projection onto the
  permutahedron (:func:`optarium.soft._permutahedron.permutahedron_projection`).
* ``smooth_sort``: values only (SoftJAX's method, absent from SoftTorch, where it raises), a C-infinity
  permutahedron projection (:mod:`optarium.soft._smooth_sort`); ``mode="smooth"`` only, and applied to the raw
  values (no standardization), as in SoftJAX.

Simplex projections (:mod:`optarium.soft._simplex`) use the regulariser of ``mode``: entropy (``smooth``,
softmax), squared norm (``c0``, sparsemax), p = 3/2 (``c1``) and p = 4/3 (``c2``). With ``standardize=True``
(default) the reduced axis is first mapped to logistic((x - mean) / sqrt(var + 1e-6)) so the softness is
(approximately) scale free; value-only methods map their result back with logit * std + mean. Values of the
index-based methods are sum_j x_j P_j with the soft index P (detached first when ``gated_grad=False``).
``mode="hard"`` returns the exact torch result, indices as float one-hot tensors in an extra trailing axis.

SoftTorch quirks kept: ``max``/``min``/``median`` with ``dim=None`` return a bare tensor and with a ``dim``
a (values, indices) structseq; ``rank`` is descending by default (largest value -> rank 1) and flattens
for ``dim=None``; ``argsort``/``sort``/``topk`` use the last axis for ``dim=None``.

Beyond SoftTorch: ``return_log_probs=True`` on every index-returning function returns log-probabilities
instead (``log_softmax`` directly for the ``smooth`` simplex methods, so they stay finite where the
probabilities underflow; ``-inf`` at exact zeros otherwise, with zero gradient there); ``log_prob_eps``
floors the probabilities at that value and renormalises (useful for the sparse modes); a public
:func:`argtopk`; a batched OT solver and sorting network instead of per-sample loops.

Deliberate deviations from SoftTorch 0.1.1 (documented): OT plans come from our own solver (correct c0-c2,
implicit gradients solved to convergence) and OT soft indices are renormalised, so they sum to one to
rounding; bad arguments raise ``ValueError`` naming the argument in every mode (softness <= 0, q outside
[0, 1] instead of silently clamping, ``return_argquantile`` with a value-only method); ``max``/``min`` with
``dim=None, keepdim=True`` give shape (1,) * x.ndim in every mode and method (SoftTorch returns a scalar in
hard mode and a shape depending on the method otherwise); the sorting network pads each row with its own
maximum + 1 when not standardized (SoftTorch uses the batch maximum); hard one-hot indices of integer
inputs use the default float dtype; ``midpoint`` quantiles whose position p is within rounding of an
integer select that order statistic (SoftTorch takes floor(p), which can be the one below).

The operators live in one module per group (all re-exported here and in :mod:`optarium.soft`):
:mod:`optarium.soft.extrema` (arg/max/min), :mod:`optarium.soft.sorting` (argsort, sort, rank),
:mod:`optarium.soft.top_k` (argtopk, topk), :mod:`optarium.soft.quantiles` (arg/quantile, arg/median), on
the shared checks and method cores of :mod:`optarium.soft._axis_core`.
"""

from optarium.soft._axis_core import AX_METHODS, INTERPOLATIONS, VAL_METHODS
from optarium.soft.extrema import argmax, argmax_st, argmin, argmin_st, max, max_st, min, min_st
from optarium.soft.quantiles import (
    argmedian,
    argmedian_st,
    argquantile,
    argquantile_st,
    median,
    median_st,
    quantile,
    quantile_st,
)
from optarium.soft.sorting import argsort, argsort_st, rank, rank_st, sort, sort_st
from optarium.soft.top_k import argtopk, argtopk_st, topk, topk_st

__all__ = [
    "AX_METHODS",
    "INTERPOLATIONS",
    "VAL_METHODS",
    "argmax",
    "argmax_st",
    "argmedian",
    "argmedian_st",
    "argmin",
    "argmin_st",
    "argquantile",
    "argquantile_st",
    "argsort",
    "argsort_st",
    "argtopk",
    "argtopk_st",
    "max",
    "max_st",
    "median",
    "median_st",
    "min",
    "min_st",
    "quantile",
    "quantile_st",
    "rank",
    "rank_st",
    "sort",
    "sort_st",
    "topk",
    "topk_st",
]
