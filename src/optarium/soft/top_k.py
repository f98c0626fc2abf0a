"""Soft top-k along an axis: :func:`argtopk` (the soft indices of the k largest), :func:`topk` and ``*_st``.

The ``ot`` method uses k + 1 anchors (Xie et al. 2020); the others take the first k rows of the descending
soft argsort. Methods and modes are described in :mod:`optarium.soft.axiswise`.
"""

from __future__ import annotations

from typing import Any

import torch

from optarium.soft._axis_core import (
    _VALUE_ONLY,
    AX_METHODS,
    VAL_METHODS,
    _argtopk_rows,
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
    SoftIndex,
    TopKResult,
)
from optarium.soft.straight_through import make_st

__all__ = ["argtopk", "argtopk_st", "topk", "topk_st"]


def _check_k(k: Any, n: int) -> int:
    if isinstance(k, bool) or not isinstance(k, int):
        if isinstance(k, torch.Tensor) and k.ndim == 0 and not k.is_floating_point():
            k = int(k)
        else:
            raise TypeError(f"k: must be an integer, got {type(k).__name__}")
    if k <= 0:
        raise ValueError(f"k: must be positive, got {k}")
    if k > n:
        raise ValueError(f"k: must be <= the size of the reduced dimension ({n}), got {k}")
    return k


def argtopk(
    x: torch.Tensor,
    k: int,
    dim: int | None = None,
    softness: float = 0.1,
    mode: str = "smooth",
    method: str = "neuralsort",
    standardize: bool = True,
    ot_kwargs: dict | None = None,
    *,
    return_log_probs: bool = False,
    log_prob_eps: float | None = None,
) -> SoftIndex:
    """Soft indices of the k largest entries (private in SoftTorch): SoftIndex (..., k, ..., [n]).

    Row i is the distribution over inputs of the i-th largest value: the first k rows of the descending
    :func:`argsort` (``ot`` instead uses k + 1 anchors linspace(1, 0, k + 1) with masses 1/n for the k top
    anchors and (n - k)/n for the last, Xie et al. 2020). ``dim=None`` means the last axis.
    ``mode="hard"``: float one-hot of ``torch.topk(x, k).indices``.
    """
    x = _check_x(x)
    okw = _check_common(softness, mode, method, AX_METHODS, standardize, ot_kwargs)
    _check_log(return_log_probs, log_prob_eps)
    xl, d = _flatten_or_move(x, -1 if dim is None else dim)
    assert d is not None
    n = _check_nonempty(xl)
    k = _check_k(k, n)
    if mode == "hard":
        p, lp = _one_hot(torch.topk(xl, k, dim=-1).indices, n, _hard_dtype(x)), None
    else:
        p, lp = _argtopk_rows(
            _prep(xl, standardize), k, softness, mode, method, standardize, okw, return_log_probs
        )
    return torch.movedim(_finish_index(p, lp, return_log_probs, log_prob_eps), -2, d)


def topk(
    x: torch.Tensor,
    k: int,
    dim: int | None = None,
    softness: float = 0.1,
    mode: str = "smooth",
    method: str = "neuralsort",
    standardize: bool = True,
    ot_kwargs: dict | None = None,
    gated_grad: bool = True,
    *,
    return_log_probs: bool = False,
    log_prob_eps: float | None = None,
) -> Any:
    """Soft ``torch.topk`` (largest, sorted): ``torch.return_types.topk`` of (values (..., k, ...),
    indices (..., k, ..., [n]) from :func:`argtopk`, or ``None`` for the value-only methods, whose values
    are the first k of the descending soft sort). ``dim=None`` means the last axis.
    """
    x = _check_x(x)
    okw = _check_common(softness, mode, method, VAL_METHODS, standardize, ot_kwargs)
    _check_log(return_log_probs, log_prob_eps)
    _check_bools(gated_grad=gated_grad)
    xl, d = _flatten_or_move(x, -1 if dim is None else dim)
    assert d is not None
    n = _check_nonempty(xl)
    k = _check_k(k, n)
    idx: torch.Tensor | None = None
    if mode == "hard":
        res = torch.topk(xl, k, dim=-1)
        values = res.values
        idx = _finish_index(_one_hot(res.indices, n, _hard_dtype(x)), None, return_log_probs, log_prob_eps)
    elif method in _VALUE_ONLY:
        values = _sorted_values(_float(xl), True, softness, mode, method, standardize)[..., :k]
    else:
        xf = _float(xl)
        p, lp = _argtopk_rows(
            _prep(xf, standardize), k, softness, mode, method, standardize, okw, return_log_probs
        )
        values = _take(xf, p if gated_grad else p.detach())
        idx = _finish_index(p, lp, return_log_probs, log_prob_eps)
    values = torch.movedim(values, -1, d)
    if idx is not None:
        idx = torch.movedim(idx, -2, d)
    return TopKResult((values, idx))


argtopk_st = make_st(argtopk, "argtopk_st")
topk_st = make_st(topk, "topk_st")
