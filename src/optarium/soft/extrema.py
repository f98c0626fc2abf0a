"""Soft arg/max/min along an axis: :func:`argmax`, :func:`argmin`, :func:`max`, :func:`min` and ``*_st``.

Signatures and return types follow SoftTorch 0.1.1 (``dim=None`` gives a bare tensor, a ``dim`` a
structseq of (values, SoftIndex)); methods and modes are described in :mod:`optarium.soft.axiswise`.
"""

from __future__ import annotations

from typing import Any

import torch

from optarium.soft._axis_core import (
    _VALUE_ONLY,
    AX_METHODS,
    VAL_METHODS,
    _argmax_row,
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
    _take,
)
from optarium.soft._common import (
    MaxResult,
    MinResult,
    SoftIndex,
)
from optarium.soft.straight_through import make_st

__all__ = ["argmax", "argmax_st", "argmin", "argmin_st", "max", "max_st", "min", "min_st"]


# ---------------------------------------------------------------------------------------------------------
# argmax / argmin / max / min
# ---------------------------------------------------------------------------------------------------------


def _reduce_index_shape(p: torch.Tensor, x: torch.Tensor, d: int | None, keepdim: bool) -> torch.Tensor:
    """(..., [n]) from a reduction over x's axis d (None: flattened) -> keepdim layout."""
    if not keepdim:
        return p
    if d is None:
        return p.reshape(*(1,) * x.ndim, p.shape[-1])
    return p.unsqueeze(d)


def argmax(
    x: torch.Tensor,
    dim: int | None = None,
    keepdim: bool = False,
    softness: float = 0.1,
    mode: str = "smooth",
    method: str = "softsort",
    standardize: bool = True,
    ot_kwargs: dict | None = None,
    *,
    return_log_probs: bool = False,
    log_prob_eps: float | None = None,
) -> SoftIndex:
    """Soft ``torch.argmax``: a SoftIndex (..., {1}, ..., [n]) over the positions of ``dim``.

    ``dim=None`` flattens ``x`` (result ([N],), or (1,) * x.ndim + ([N],) with ``keepdim``). Methods:
    ``softsort`` (simplex(x); default), ``neuralsort`` (simplex((n - 1) x_i - sum_j |x_i - x_j|~)), ``ot``
    (two anchors {0, 1} with masses ((n - 1)/n, 1/n)), ``sorting_network`` (first row of the descending
    network). ``mode="hard"`` gives the float one-hot of ``torch.argmax``. ``return_log_probs`` returns
    log-probabilities (``log_prob_eps``: floor and renormalise).
    """
    x = _check_x(x)
    okw = _check_common(softness, mode, method, AX_METHODS, standardize, ot_kwargs)
    _check_log(return_log_probs, log_prob_eps)
    xl, d = _flatten_or_move(x, dim)
    n = _check_nonempty(xl)
    if mode == "hard":
        p = _one_hot(torch.argmax(xl, dim=-1), n, _hard_dtype(x))
        lp = None
    else:
        z = _prep(xl, standardize)
        p, lp = _argmax_row(z, softness, mode, method, standardize, okw, return_log_probs)
        p = p.squeeze(-2)
        lp = lp.squeeze(-2) if lp is not None else None
    out = _finish_index(p, lp, return_log_probs, log_prob_eps)
    return _reduce_index_shape(out, x, d, keepdim)


def argmin(
    x: torch.Tensor,
    dim: int | None = None,
    keepdim: bool = False,
    softness: float = 0.1,
    mode: str = "smooth",
    method: str = "softsort",
    standardize: bool = True,
    ot_kwargs: dict | None = None,
    *,
    return_log_probs: bool = False,
    log_prob_eps: float | None = None,
) -> SoftIndex:
    """Soft ``torch.argmin`` = :func:`argmax` of ``-x`` (same arguments and shapes)."""
    x = _check_x(x)
    if mode == "hard":  # torch.argmin keeps torch's own tie rule (first occurrence)
        _check_common(softness, mode, method, AX_METHODS, standardize, ot_kwargs)
        _check_log(return_log_probs, log_prob_eps)
        xl, d = _flatten_or_move(x, dim)
        n = _check_nonempty(xl)
        p = _one_hot(torch.argmin(xl, dim=-1), n, _hard_dtype(x))
        return _reduce_index_shape(_finish_index(p, None, return_log_probs, log_prob_eps), x, d, keepdim)
    return argmax(
        -x,
        dim,
        keepdim,
        softness,
        mode,
        method,
        standardize,
        ot_kwargs,
        return_log_probs=return_log_probs,
        log_prob_eps=log_prob_eps,
    )


def max(
    x: torch.Tensor,
    dim: int | None = None,
    keepdim: bool = False,
    softness: float = 0.1,
    mode: str = "smooth",
    method: str = "softsort",
    standardize: bool = True,
    ot_kwargs: dict | None = None,
    gated_grad: bool = True,
    *,
    return_log_probs: bool = False,
    log_prob_eps: float | None = None,
) -> Any:
    """Soft ``torch.max``: sum_j x_j P_j with P = :func:`argmax` (or the first soft-sorted value).

    ``dim=None``: a bare tensor (0-d; shape (1,) * x.ndim with ``keepdim``). With ``dim``: a
    ``torch.return_types.max`` of (values (..., {1}, ...), indices SoftIndex (..., {1}, ..., [n]) or
    ``None`` for the value-only methods ``fast_soft_sort``/``smooth_sort``/``sorting_network``).
    ``gated_grad=False`` detaches P (gradient only through x).
    """
    x = _check_x(x)
    okw = _check_common(softness, mode, method, VAL_METHODS, standardize, ot_kwargs)
    _check_log(return_log_probs, log_prob_eps)
    _check_bools(gated_grad=gated_grad)
    xl, d = _flatten_or_move(x, dim)
    n = _check_nonempty(xl)
    if mode == "hard":
        res = torch.max(xl, dim=-1)
        values = res.values
        idx: torch.Tensor | None = _finish_index(
            _one_hot(res.indices, n, _hard_dtype(x)), None, return_log_probs, log_prob_eps
        )
    elif method in _VALUE_ONLY:
        values = _sorted_values(_float(xl), True, softness, mode, method, standardize)[..., 0]
        idx = None
    else:
        xf = _float(xl)
        p, lp = _argmax_row(
            _prep(xf, standardize), softness, mode, method, standardize, okw, return_log_probs
        )
        values = _take(xf, p if gated_grad else p.detach()).squeeze(-1)
        idx = _finish_index(
            p.squeeze(-2), None if lp is None else lp.squeeze(-2), return_log_probs, log_prob_eps
        )
    if d is None:
        return values.reshape((1,) * x.ndim) if keepdim else values.reshape(())
    if keepdim:
        values = values.unsqueeze(d)
        idx = idx.unsqueeze(d) if idx is not None else None
    return MaxResult((values, idx))


def min(
    x: torch.Tensor,
    dim: int | None = None,
    keepdim: bool = False,
    softness: float = 0.1,
    mode: str = "smooth",
    method: str = "softsort",
    standardize: bool = True,
    ot_kwargs: dict | None = None,
    gated_grad: bool = True,
    *,
    return_log_probs: bool = False,
    log_prob_eps: float | None = None,
) -> Any:
    """Soft ``torch.min`` = -:func:`max` of ``-x`` (same arguments; ``torch.return_types.min`` with a dim)."""
    x = _check_x(x)
    if mode == "hard":  # torch.min's own tie rule
        _check_common(softness, mode, method, VAL_METHODS, standardize, ot_kwargs)
        _check_log(return_log_probs, log_prob_eps)
        xl, d = _flatten_or_move(x, dim)
        n = _check_nonempty(xl)
        res = torch.min(xl, dim=-1)
        if d is None:
            return res.values.reshape((1,) * x.ndim) if keepdim else res.values
        idx = _finish_index(_one_hot(res.indices, n, _hard_dtype(x)), None, return_log_probs, log_prob_eps)
        if keepdim:
            return MinResult((res.values.unsqueeze(d), idx.unsqueeze(d)))
        return MinResult((res.values, idx))
    out = max(
        -x,
        dim,
        keepdim,
        softness,
        mode,
        method,
        standardize,
        ot_kwargs,
        gated_grad,
        return_log_probs=return_log_probs,
        log_prob_eps=log_prob_eps,
    )
    if dim is None:
        return -out
    return MinResult((-out.values, out.indices))


argmax_st = make_st(argmax, "argmax_st")
argmin_st = make_st(argmin, "argmin_st")
max_st = make_st(max, "max_st")
min_st = make_st(min, "min_st")
