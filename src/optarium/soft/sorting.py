"""Soft sorting along an axis: :func:`argsort`, :func:`sort`, :func:`rank` and their ``*_st`` variants.

``argsort`` gives the soft permutation (a SoftIndex per sorted position), ``sort`` the values sum_j x_j P_ij
(or a value-only method's result), ``rank`` the soft 1-based ranks; methods and modes are described in
:mod:`optarium.soft.axiswise`.
"""

from __future__ import annotations

from typing import Any

import torch

from optarium.soft._axis_core import (
    _VALUE_ONLY,
    AX_METHODS,
    VAL_METHODS,
    _abs_sum,
    _argsort_rows,
    _builtin_max,
    _check_bools,
    _check_common,
    _check_log,
    _check_nonempty,
    _check_x,
    _finish_index,
    _flatten_or_move,
    _float,
    _hard_dtype,
    _one_hot,
    _prep,
    _sorted_values,
    _sorting_network,
    _take,
    simplex_projection,
)
from optarium.soft._common import (
    SoftIndex,
    SortResult,
)
from optarium.soft.straight_through import make_st

__all__ = ["argsort", "argsort_st", "rank", "rank_st", "sort", "sort_st"]


# ---------------------------------------------------------------------------------------------------------
# argsort / sort / argtopk / topk
# ---------------------------------------------------------------------------------------------------------


def argsort(
    x: torch.Tensor,
    dim: int | None = -1,
    descending: bool = False,
    softness: float = 0.1,
    mode: str = "smooth",
    method: str = "neuralsort",
    standardize: bool = True,
    ot_kwargs: dict | None = None,
    *,
    return_log_probs: bool = False,
    log_prob_eps: float | None = None,
) -> SoftIndex:
    """Soft ``torch.argsort``: a SoftIndex (..., n, ..., [n]); entry [..., i, ..., j] is the weight of input
    j at sorted position i (ascending unless ``descending``). ``dim=None`` means the last axis.

    Methods ``neuralsort`` (default), ``softsort``, ``ot`` (n anchors linspace(0, 1, n), masses 1/n),
    ``sorting_network``. ``mode="hard"``: float one-hot of ``torch.argsort``.
    """
    x = _check_x(x)
    okw = _check_common(softness, mode, method, AX_METHODS, standardize, ot_kwargs)
    _check_log(return_log_probs, log_prob_eps)
    xl, d = _flatten_or_move(x, -1 if dim is None else dim)
    assert d is not None
    n = _check_nonempty(xl)
    if mode == "hard":
        p, lp = _one_hot(torch.argsort(xl, dim=-1, descending=descending), n, _hard_dtype(x)), None
    else:
        p, lp = _argsort_rows(
            _prep(xl, standardize), descending, softness, mode, method, standardize, okw, return_log_probs
        )
    return torch.movedim(_finish_index(p, lp, return_log_probs, log_prob_eps), -2, d)


def sort(
    x: torch.Tensor,
    dim: int | None = -1,
    descending: bool = False,
    softness: float = 0.1,
    mode: str = "smooth",
    method: str = "neuralsort",
    standardize: bool = True,
    ot_kwargs: dict | None = None,
    gated_grad: bool = True,
    return_indices: bool = True,
    *,
    return_log_probs: bool = False,
    log_prob_eps: float | None = None,
) -> Any:
    """Soft ``torch.sort``: ``torch.return_types.sort`` of (values (..., n, ...), indices (..., n, ..., [n])).

    Index methods: values = sum_j x_j P_ij with P = :func:`argsort`. Value-only methods
    (``fast_soft_sort``, ``smooth_sort``, ``sorting_network``) return ``indices=None``; so does
    ``return_indices=False``. ``dim=None`` means the last axis.
    """
    x = _check_x(x)
    okw = _check_common(softness, mode, method, VAL_METHODS, standardize, ot_kwargs)
    _check_log(return_log_probs, log_prob_eps)
    _check_bools(gated_grad=gated_grad, return_indices=return_indices)
    xl, d = _flatten_or_move(x, -1 if dim is None else dim)
    assert d is not None
    n = _check_nonempty(xl)
    idx: torch.Tensor | None = None
    if mode == "hard":
        res = torch.sort(xl, dim=-1, descending=descending)
        values = res.values
        if return_indices:
            idx = _finish_index(
                _one_hot(res.indices, n, _hard_dtype(x)), None, return_log_probs, log_prob_eps
            )
    elif method in _VALUE_ONLY:
        values = _sorted_values(_float(xl), descending, softness, mode, method, standardize)
    else:
        xf = _float(xl)
        p, lp = _argsort_rows(
            _prep(xf, standardize), descending, softness, mode, method, standardize, okw, return_log_probs
        )
        values = _take(xf, p if gated_grad else p.detach())
        if return_indices:
            idx = _finish_index(p, lp, return_log_probs, log_prob_eps)
    values = torch.movedim(values, -1, d)
    if idx is not None:
        idx = torch.movedim(idx, -2, d)
    return SortResult((values, idx))


# ---------------------------------------------------------------------------------------------------------
# rank
# ---------------------------------------------------------------------------------------------------------


def rank(
    x: torch.Tensor,
    dim: int | None = None,
    softness: float = 0.1,
    mode: str = "smooth",
    method: str = "neuralsort",
    descending: bool = True,
    standardize: bool = True,
    ot_kwargs: dict | None = None,
) -> torch.Tensor:
    """Soft 1-based ranks in [1, n] (descending by default: the largest value gets rank 1).

    rank_i = sum_j j P_ij, where row i of P is a distribution over the sorted positions of element i:
    ``softsort`` simplex(-|x_i - x_(j)|) over j; ``neuralsort`` the argsort projection taken over the
    elements (column-wise) and renormalised per element; ``ot`` and ``sorting_network`` the row-normalised
    transposed plan / permutation; ``fast_soft_sort`` the permutahedron projection of x onto the ranks
    directly (Blondel et al. 2020). Shape of x, or ([N],) for ``dim=None`` (flattened, as SoftTorch).
    ``mode="hard"``: exact ranks by a double ``torch.argsort``.
    """
    x = _check_x(x)
    okw = _check_common(softness, mode, method, VAL_METHODS, standardize, ot_kwargs)
    xl, d = _flatten_or_move(_float(x), dim)
    n = _check_nonempty(xl)
    if mode == "hard":
        order = torch.argsort(xl, dim=-1, descending=descending)
        ranks = (torch.argsort(order, dim=-1) + 1).to(xl.dtype)
    else:
        z = xl if method == "smooth_sort" else _prep(xl, standardize)
        nums = torch.arange(1, n + 1, dtype=z.dtype, device=z.device)
        if method == "fast_soft_sort":
            from optarium.soft._permutahedron import permutahedron_projection

            scale = _builtin_max(n - 1, 1)
            w = -z if descending else z
            ranks = permutahedron_projection(w, (nums / scale).expand_as(w), softness, mode) * scale
        elif method == "smooth_sort":  # raw values, as SoftJAX
            ranks = _smooth_sort_ranks(xl, descending, softness, mode)
        else:
            if method == "softsort":
                anchors = torch.sort(z, dim=-1, descending=descending).values
                p = simplex_projection(-(z.unsqueeze(-1) - anchors.unsqueeze(-2)).abs(), -1, softness, mode)
            elif method == "neuralsort":
                pos = nums.flip(0) if descending else nums
                coef = n + 1 - 2 * pos
                a_sum = _abs_sum(z, softness, mode)
                zz = -(coef.unsqueeze(-2) * z.unsqueeze(-1) + a_sum.unsqueeze(-1))  # [element, position]
                p = simplex_projection(zz, -2, softness, mode)
                p = p / p.sum(dim=-1, keepdim=True).clamp(min=1e-10)
            elif method == "ot":
                pt, _ = _argsort_rows(z, descending, softness, mode, "ot", standardize, okw, False)
                p = pt.transpose(-1, -2)
                p = p / p.sum(dim=-1, keepdim=True).clamp(min=1e-10)
            else:
                _, perm = _sorting_network(z, softness, mode, descending, standardize, return_perm=True)
                assert perm is not None
                p = perm.transpose(-1, -2)
                p = p / p.sum(dim=-1, keepdim=True).clamp(min=1e-10)
            ranks = torch.matmul(p, nums)
    return ranks if d is None else torch.movedim(ranks, -1, d)


def _smooth_sort_ranks(z: torch.Tensor, descending: bool, softness: Any, mode: str) -> torch.Tensor:
    from optarium.soft._smooth_sort import smooth_sort_ranks

    return smooth_sort_ranks(z, softness=softness, mode=mode, descending=descending)


argsort_st = make_st(argsort, "argsort_st")
sort_st = make_st(sort, "sort_st")
rank_st = make_st(rank, "rank_st")
