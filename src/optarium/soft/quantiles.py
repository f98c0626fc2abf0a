"""Soft quantiles along an axis: :func:`argquantile`, :func:`quantile`, :func:`argmedian`, :func:`median`.

The q-quantile mixes the soft indices of the two order statistics around position q (n - 1) with torch's
interpolation rules (:data:`INTERPOLATIONS`); the median is the lower median, as torch's. ``*_st`` variants
included. Methods and modes are described in :mod:`optarium.soft.axiswise`.
"""

from __future__ import annotations

from typing import Any

import torch

from optarium.soft._axis_core import (
    _VALUE_ONLY,
    AX_METHODS,
    INTERPOLATIONS,
    VAL_METHODS,
    _check_bools,
    _check_common,
    _check_log,
    _check_nonempty,
    _check_x,
    _finish_index,
    _flatten_or_move,
    _float,
    _hard_dtype,
    _neuralsort_rows,
    _one_hot,
    _ot_rows,
    _prep,
    _Rows,
    _softsort_rows,
    _sorted_values,
    _sorting_network,
    _take,
    check_mode,
)
from optarium.soft._common import (
    MedianResult,
    SoftIndex,
    check_nan,
)
from optarium.soft.straight_through import make_st

__all__ = [
    "INTERPOLATIONS",
    "argmedian",
    "argmedian_st",
    "argquantile",
    "argquantile_st",
    "median",
    "median_st",
    "quantile",
    "quantile_st",
]


# ---------------------------------------------------------------------------------------------------------
# quantiles
# ---------------------------------------------------------------------------------------------------------


def _check_q(q: Any) -> torch.Tensor:
    if isinstance(q, bool):
        raise TypeError("q: must be a float or a tensor, got bool")
    if isinstance(q, torch.Tensor):
        qt = q.detach()
    elif isinstance(q, (int, float)):
        qt = torch.tensor(float(q), dtype=torch.float64)
    elif isinstance(q, (list, tuple)):
        qt = torch.tensor([float(v) for v in q], dtype=torch.float64)
    else:
        raise TypeError(f"q: must be a float, a sequence or a tensor, got {type(q).__name__}")
    if qt.ndim > 1:
        raise ValueError(f"q: must be a scalar or 1-D, got shape {tuple(qt.shape)}")
    if qt.numel() == 0:
        raise ValueError("q: must not be empty")
    check_nan("q", qt)
    if qt.is_complex() or bool(((qt < 0) | (qt > 1) | torch.isnan(qt)).any()):
        raise ValueError(f"q: must lie in [0, 1], got {qt.tolist()!r}")
    return qt


def _quantile_positions(
    qt: torch.Tensor, n: int, interpolation: str, dtype: torch.dtype, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, bool]:
    """Order-statistic positions (k, k + 1 clipped), weight a of the upper one, and whether it is used."""
    p = qt.reshape(-1).to(dtype=dtype, device=device) * (n - 1)
    zero = torch.zeros_like(p)
    if interpolation == "linear":
        k = torch.floor(p)
        a = p - k
        blend = True
    elif interpolation == "lower":
        k, a, blend = torch.floor(p), zero, False
    elif interpolation == "higher":
        k, a, blend = torch.ceil(p), zero, False
    elif interpolation == "nearest":
        k, a, blend = torch.round(p), zero, False  # half to even, as torch
    else:  # midpoint
        near = torch.isclose(p, torch.round(p))
        k = torch.where(near, torch.round(p), torch.floor(p))
        a = torch.where(near, zero, torch.full_like(p, 0.5))
        blend = True
    k = k.long().clamp(0, n - 1)
    kp1 = (k + 1).clamp(max=n - 1)
    return k, kp1, a, blend


def _argquantile_rows(
    xl: torch.Tensor,
    k: torch.Tensor,
    kp1: torch.Tensor,
    a: torch.Tensor,
    blend: bool,
    softness: Any,
    mode: str,
    method: str,
    standardized: bool,
    ot_kwargs: dict[str, Any],
    want_log: bool,
) -> _Rows:
    """Soft indices (..., Q, [n]) of the Q quantiles given by positions k, kp1 and weights a (all (Q,))."""
    n = xl.shape[-1]
    nq = k.shape[0]
    pos = torch.cat([k, kp1]) if blend else k
    lo_hi: torch.Tensor
    logs: torch.Tensor | None = None
    if method == "softsort":
        anchors = torch.sort(xl, dim=-1).values[..., pos]
        lo_hi, logs = _softsort_rows(xl, anchors, softness, mode, want_log)
    elif method == "neuralsort":
        lo_hi, logs = _neuralsort_rows(xl, pos + 1, softness, mode, want_log)
    elif method == "sorting_network":
        _, perm = _sorting_network(xl, softness, mode, False, standardized, return_perm=True)
        assert perm is not None
        lo_hi = perm[..., pos, :]
    else:
        rows = []
        for kk, k1, aa in zip(k.tolist(), kp1.tolist(), a.tolist(), strict=True):
            if blend:
                masses = [kk / n, 1.0 / n, (k1 - kk) / n, (n - k1 - 1) / n]
                pr = _ot_rows(xl, [0.0, 1 / 3, 2 / 3, 1.0], masses, [1, 2], softness, mode, ot_kwargs)
                rows.append((1.0 - aa) * pr[..., 0, :] + aa * pr[..., 1, :])
            else:
                masses = [kk / n, 1.0 / n, (n - kk - 1) / n]
                rows.append(_ot_rows(xl, [0.0, 0.5, 1.0], masses, [1], softness, mode, ot_kwargs)[..., 0, :])
        return torch.stack(rows, dim=-2), None
    if not blend:
        return lo_hi, logs
    w = a.to(lo_hi.dtype).unsqueeze(-1)
    p = (1.0 - w) * lo_hi[..., :nq, :] + w * lo_hi[..., nq:, :]
    lp = None
    if logs is not None and mode == "smooth":  # finite log rows: mix in log space
        lp = torch.logaddexp(torch.log1p(-w) + logs[..., :nq, :], torch.log(w) + logs[..., nq:, :])
    return p, lp


def _quantile_layout(
    out: torch.Tensor, x: torch.Tensor, d: int | None, keepdim: bool, scalar_q: bool, extra: int
):
    """Move the Q axis (at -1 - extra) to the front (dropped for a scalar q) and apply keepdim."""
    out = torch.movedim(out, -1 - extra, 0)  # (Q, ..., [n]?)
    if keepdim:
        if d is None:
            out = out.reshape(out.shape[0], *(1,) * x.ndim, *out.shape[out.ndim - extra :])
        else:
            out = out.unsqueeze(d + 1)
    return out[0] if scalar_q else out


def argquantile(
    x: torch.Tensor,
    q: torch.Tensor | float,
    dim: int | None = None,
    keepdim: bool = False,
    softness: float = 0.1,
    mode: str = "smooth",
    method: str = "neuralsort",
    interpolation: str = "linear",
    standardize: bool = True,
    ot_kwargs: dict | None = None,
    *,
    return_log_probs: bool = False,
    log_prob_eps: float | None = None,
) -> SoftIndex:
    """Soft index of the q-quantile: SoftIndex (..., {1}, ..., [n]); a 1-D q of length Q prepends a Q axis.

    With p = q (n - 1): ``linear`` blends rows k = floor(p) and k + 1 of the ascending soft permutation with
    weight a = p - k; ``lower``/``higher``/``nearest`` (round half to even) take one row; ``midpoint`` blends
    with a = 1/2 unless p is integral. ``ot`` uses dedicated anchors [0, 1/3, 2/3, 1] with masses
    [k, 1, 1, n - k - 2]/n (or [0, 1/2, 1] with [k, 1, n - k - 1]/n). ``dim=None`` flattens x.
    ``mode="hard"``: the one- (or two-) hot index of the order statistics.
    """
    x = _check_x(x)
    okw = _check_common(softness, mode, method, AX_METHODS, standardize, ot_kwargs)
    check_mode(interpolation, INTERPOLATIONS, name="interpolation")
    _check_log(return_log_probs, log_prob_eps)
    qt = _check_q(q)
    xl, d = _flatten_or_move(x, dim)
    n = _check_nonempty(xl)
    dtype = _hard_dtype(x)
    k, kp1, a, blend = _quantile_positions(qt, n, interpolation, dtype, x.device)
    if mode == "hard":
        order = torch.argsort(xl, dim=-1)
        p = _one_hot(order[..., k], n, dtype)
        if blend:
            w = a.unsqueeze(-1)
            p = (1.0 - w) * p + w * _one_hot(order[..., kp1], n, dtype)
        lp = None
    else:
        p, lp = _argquantile_rows(
            _prep(xl, standardize),
            k,
            kp1,
            a,
            blend,
            softness,
            mode,
            method,
            standardize,
            okw,
            return_log_probs,
        )
    out = _finish_index(p, lp, return_log_probs, log_prob_eps)
    return _quantile_layout(out, x, d, keepdim, qt.ndim == 0, extra=1)


def quantile(
    x: torch.Tensor,
    q: torch.Tensor | float,
    dim: int | None = None,
    keepdim: bool = False,
    softness: float = 0.1,
    mode: str = "smooth",
    method: str = "neuralsort",
    interpolation: str = "linear",
    standardize: bool = True,
    ot_kwargs: dict | None = None,
    return_argquantile: bool = False,
    gated_grad: bool = True,
    *,
    return_log_probs: bool = False,
    log_prob_eps: float | None = None,
) -> Any:
    """Soft ``torch.quantile``: tensor (..., {1}, ...) (Q prepended for a 1-D q); ``dim=None`` flattens.

    Index methods: sum_j x_j P_j with P = :func:`argquantile`; value-only methods blend the soft-sorted
    values at positions k and k + 1. ``return_argquantile=True`` returns ``(values, soft_index)`` (not
    available for the value-only methods: ``ValueError``). ``mode="hard"``: ``torch.quantile``.
    """
    x = _check_x(x)
    okw = _check_common(softness, mode, method, VAL_METHODS, standardize, ot_kwargs)
    check_mode(interpolation, INTERPOLATIONS, name="interpolation")
    _check_log(return_log_probs, log_prob_eps)
    _check_bools(return_argquantile=return_argquantile, gated_grad=gated_grad)
    if return_argquantile and method in _VALUE_ONLY:
        raise ValueError(
            f"return_argquantile: not available with method={method!r}, which returns values only"
        )
    qt = _check_q(q)
    xf = _float(x)
    xl, d = _flatten_or_move(xf, dim)
    n = _check_nonempty(xl)
    idx: torch.Tensor | None = None
    if mode == "hard":
        values = torch.quantile(
            xf, qt.to(dtype=xf.dtype, device=xf.device), dim=dim, keepdim=keepdim, interpolation=interpolation
        )
        if return_argquantile:
            idx = argquantile(
                x,
                q,
                dim,
                keepdim,
                softness,
                "hard",
                method,
                interpolation,
                standardize,
                ot_kwargs,
                return_log_probs=return_log_probs,
                log_prob_eps=log_prob_eps,
            )
            return values, idx
        return values
    k, kp1, a, blend = _quantile_positions(qt, n, interpolation, xl.dtype, xl.device)
    if method in _VALUE_ONLY:
        sv = _sorted_values(xl, False, softness, mode, method, standardize)
        vals = sv[..., k]
        if blend:
            vals = (1.0 - a) * vals + a * sv[..., kp1]
    else:
        p, lp = _argquantile_rows(
            _prep(xl, standardize),
            k,
            kp1,
            a,
            blend,
            softness,
            mode,
            method,
            standardize,
            okw,
            return_log_probs,
        )
        vals = _take(xl, p if gated_grad else p.detach())
        if return_argquantile:
            idx = _quantile_layout(
                _finish_index(p, lp, return_log_probs, log_prob_eps), x, d, keepdim, qt.ndim == 0, extra=1
            )
    values = _quantile_layout(vals, x, d, keepdim, qt.ndim == 0, extra=0)
    return (values, idx) if return_argquantile else values


def argmedian(
    x: torch.Tensor,
    dim: int | None = None,
    keepdim: bool = False,
    softness: float = 0.1,
    mode: str = "smooth",
    method: str = "neuralsort",
    standardize: bool = True,
    ot_kwargs: dict | None = None,
    *,
    return_log_probs: bool = False,
    log_prob_eps: float | None = None,
) -> SoftIndex:
    """Soft index of the (lower) median: :func:`argquantile` with q = 0.5 and ``interpolation="lower"``."""
    return argquantile(
        x,
        0.5,
        dim,
        keepdim,
        softness,
        mode,
        method,
        "lower",
        standardize,
        ot_kwargs,
        return_log_probs=return_log_probs,
        log_prob_eps=log_prob_eps,
    )


def median(
    x: torch.Tensor,
    dim: int | None = None,
    keepdim: bool = False,
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
    """Soft ``torch.median`` (the lower median): :func:`quantile` with q = 0.5, ``interpolation="lower"``.

    ``dim=None``: a bare tensor (``keepdim=True`` then raises ``ValueError``). With ``dim``: a
    ``torch.return_types.median`` of (values, SoftIndex); the value-only methods are then refused
    (``ValueError``), as in SoftTorch. ``mode="hard"``: ``torch.median``.
    """
    x = _check_x(x)
    if dim is None and keepdim:
        raise ValueError("keepdim: keepdim=True is not supported with dim=None")
    _check_common(softness, mode, method, VAL_METHODS, standardize, ot_kwargs)
    if dim is not None and method in _VALUE_ONLY:
        raise ValueError(
            f"method: {method!r} returns values only, so it cannot give median's (values, indices) "
            "with a dim; use 'neuralsort' or 'softsort', or dim=None"
        )
    _check_log(return_log_probs, log_prob_eps)
    if mode == "hard":
        if dim is None:
            return torch.median(x)
        xl, d = _flatten_or_move(x, dim)
        n = _check_nonempty(xl)
        res = torch.median(xl, dim=-1)
        idx = _finish_index(_one_hot(res.indices, n, _hard_dtype(x)), None, return_log_probs, log_prob_eps)
        assert d is not None
        if keepdim:
            return MedianResult((res.values.unsqueeze(d), idx.unsqueeze(d)))
        return MedianResult((res.values, idx))
    if dim is None:
        return quantile(
            x, 0.5, None, False, softness, mode, method, "lower", standardize, ot_kwargs, False, gated_grad
        )
    vals, idx = quantile(
        x,
        0.5,
        dim,
        keepdim,
        softness,
        mode,
        method,
        "lower",
        standardize,
        ot_kwargs,
        True,
        gated_grad,
        return_log_probs=return_log_probs,
        log_prob_eps=log_prob_eps,
    )
    return MedianResult((vals, idx))


argquantile_st = make_st(argquantile, "argquantile_st")
quantile_st = make_st(quantile, "quantile_st")
argmedian_st = make_st(argmedian, "argmedian_st")
median_st = make_st(median, "median_st")
