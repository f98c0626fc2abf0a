"""Soft comparisons and fuzzy logic: greater ... isclose, logical_not/and/or/xor, all, any.

Reference: A. Paulus, A. R. Geist, V. Musil, S. Hoffmann, O. Beker, G. Martius, "SoftJAX & SoftTorch:
Empowering Automatic Differentiation Libraries with Informative Gradients", ICML 2026, arXiv:2603.08824.
Same names, signatures, defaults and modes as SoftTorch 0.1.1; pure torch; broadcasting like torch.

Comparisons (sigma_s the sigmoidal of :mod:`optarium.soft.elementwise`, |.|~ the soft abs, eps = 1e-10 a
tie-breaker): greater = sigma(x - y - eps); greater_equal = sigma(x - y + eps); less = 1 - greater_equal;
less_equal = 1 - greater; eq = 2 (1 - sigma(|x - y|~ - eps)); not_equal = 2 sigma(|x - y|~ - eps) - 1;
isclose = 2 (1 - sigma(|x - y|~ - atol - rtol |y|~ - eps)).

Range caveat (as in SoftTorch, reproduced for parity): at x = y the soft |x - y| is exactly 0, so ``eq`` is
1 + O(eps/s) there and ``isclose`` = 2 (1 - sigma(-(atol + rtol |y|~ + eps))) > 1, growing with |y| (1.005 at
x = y = 100, smooth, s = 0.1): ``isclose`` takes values in [0, 2). Beyond SoftTorch, ``isclose(...,
clip=True)`` clamps it to [0, 1].

Fuzzy logic with the product t-norm: not = 1 - x; all = prod x (or the geometric mean exp(mean log max(x,
eps)) with ``use_geometric_mean``; SoftTorch's docstring says geometric mean but its default, which we
follow, is the product); any = 1 - all(1 - x); and = all(stack(x, y)); or = any(stack(x, y));
xor = or(and(x, not y), and(not x, y)). Beyond SoftTorch: the binary ops broadcast their arguments, and
``all``/``any`` accept ``dim=None`` (all elements) and ``keepdim``.
"""

from __future__ import annotations

from typing import Any

import torch

from optarium.soft import elementwise as _ew
from optarium.soft._common import (
    MODES,
    SoftBool,
    _unchecked,
    canonical_dim,
    check_mode,
    check_nan,
    check_softness,
    ensure_float,
)


def _sig(x: torch.Tensor, softness: Any, mode: str) -> torch.Tensor:
    """The elementwise sigmoidal on a value derived from already NaN-checked inputs (no second check)."""
    with _unchecked():
        return _ew.sigmoidal(x, softness, mode)


def _sabs(x: torch.Tensor, softness: Any, mode: str) -> torch.Tensor:
    """The elementwise soft abs on a value derived from already NaN-checked inputs (no second check)."""
    with _unchecked():
        return _ew.abs(x, softness, mode)


__all__ = [
    "all",
    "any",
    "eq",
    "greater",
    "greater_equal",
    "isclose",
    "less",
    "less_equal",
    "logical_and",
    "logical_not",
    "logical_or",
    "logical_xor",
    "not_equal",
]


def _prep(x: Any, y: Any, softness: Any, mode: str) -> tuple[torch.Tensor, torch.Tensor, Any]:
    check_mode(mode, MODES)
    softness = check_softness("softness", softness)
    x = check_nan("x", ensure_float(x))
    if not isinstance(y, torch.Tensor):
        y = torch.as_tensor(y, dtype=x.dtype, device=x.device)
    check_nan("y", y)
    dtype = torch.promote_types(x.dtype, y.dtype) if y.is_floating_point() else x.dtype
    return x.to(dtype), y.to(dtype), softness


def _eps(name: str, epsilon: Any) -> float:
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not epsilon >= 0:
        raise ValueError(f"{name}: must be a real number >= 0, got {epsilon!r}")
    return float(epsilon)


def greater(
    x: torch.Tensor, y: torch.Tensor, softness: Any = 0.1, mode: str = "smooth", epsilon: float = 1e-10
) -> SoftBool:
    """Soft ``x > y``: sigma_s(x - y - epsilon) (0.5 minus a hair at ties; hard: ``torch.gt`` as float)."""
    x, y, softness = _prep(x, y, softness, mode)
    epsilon = _eps("epsilon", epsilon)
    if mode == "hard":
        return torch.gt(x, y).to(x.dtype)
    return _sig(x - y - epsilon, softness, mode)


def greater_equal(
    x: torch.Tensor, y: torch.Tensor, softness: Any = 0.1, mode: str = "smooth", epsilon: float = 1e-10
) -> SoftBool:
    """Soft ``x >= y``: sigma_s(x - y + epsilon) (hard: ``torch.ge`` as float)."""
    x, y, softness = _prep(x, y, softness, mode)
    epsilon = _eps("epsilon", epsilon)
    if mode == "hard":
        return torch.ge(x, y).to(x.dtype)
    return _sig(x - y + epsilon, softness, mode)


def less(
    x: torch.Tensor, y: torch.Tensor, softness: Any = 0.1, mode: str = "smooth", epsilon: float = 1e-10
) -> SoftBool:
    """Soft ``x < y``: 1 - greater_equal(x, y) (hard: ``torch.lt`` as float)."""
    x, y, softness = _prep(x, y, softness, mode)
    if mode == "hard":
        _eps("epsilon", epsilon)
        return torch.lt(x, y).to(x.dtype)
    return 1.0 - greater_equal(x, y, softness, mode, epsilon)


def less_equal(
    x: torch.Tensor, y: torch.Tensor, softness: Any = 0.1, mode: str = "smooth", epsilon: float = 1e-10
) -> SoftBool:
    """Soft ``x <= y``: 1 - greater(x, y) (hard: ``torch.le`` as float)."""
    x, y, softness = _prep(x, y, softness, mode)
    if mode == "hard":
        _eps("epsilon", epsilon)
        return torch.le(x, y).to(x.dtype)
    return 1.0 - greater(x, y, softness, mode, epsilon)


def eq(
    x: torch.Tensor, y: torch.Tensor, softness: Any = 0.1, mode: str = "smooth", epsilon: float = 1e-10
) -> SoftBool:
    """Soft ``x == y``: 2 (1 - sigma_s(|x - y|~ - epsilon)); 1 + O(epsilon/s) at ties (hard: torch.eq)."""
    x, y, softness = _prep(x, y, softness, mode)
    epsilon = _eps("epsilon", epsilon)
    if mode == "hard":
        return torch.eq(x, y).to(x.dtype)
    d = _sabs(x - y, softness, mode)
    return 2.0 * (1.0 - _sig(d - epsilon, softness, mode))


def not_equal(
    x: torch.Tensor, y: torch.Tensor, softness: Any = 0.1, mode: str = "smooth", epsilon: float = 1e-10
) -> SoftBool:
    """Soft ``x != y``: 2 sigma_s(|x - y|~ - epsilon) - 1 (hard: ``torch.ne``); eq + not_equal = 1."""
    x, y, softness = _prep(x, y, softness, mode)
    epsilon = _eps("epsilon", epsilon)
    if mode == "hard":
        return torch.ne(x, y).to(x.dtype)
    d = _sabs(x - y, softness, mode)
    return 2.0 * _sig(d - epsilon, softness, mode) - 1.0


def isclose(
    x: torch.Tensor,
    y: torch.Tensor,
    softness: Any = 0.1,
    rtol: float = 1e-05,
    atol: float = 1e-08,
    mode: str = "smooth",
    epsilon: float = 1e-10,
    *,
    clip: bool = False,
) -> torch.Tensor:
    """Soft ``torch.isclose``: 2 (1 - sigma_s(|x - y|~ - atol - rtol |y|~ - epsilon)).

    Values lie in [0, 2) (above 1 near ties, growing with |y|), exactly as in SoftTorch; ``clip=True``
    (beyond SoftTorch) clamps the result to [0, 1]. Hard mode: ``torch.isclose(x, y, rtol, atol)`` as float.
    """
    x, y, softness = _prep(x, y, softness, mode)
    epsilon = _eps("epsilon", epsilon)
    rtol = _eps("rtol", rtol)
    atol = _eps("atol", atol)
    if mode == "hard":
        return torch.isclose(x, y, rtol=rtol, atol=atol).to(x.dtype)
    d = _sabs(x - y, softness, mode)
    tol = atol + rtol * _sabs(y, softness, mode)
    out = 2.0 * (1.0 - _sig(d - tol - epsilon, softness, mode))
    return out.clamp(0.0, 1.0) if clip else out


def logical_not(x: SoftBool) -> SoftBool:
    """Fuzzy NOT: 1 - x."""
    return 1.0 - check_nan("x", x)


def _reduce_dim(x: torch.Tensor, dim: int | None) -> tuple[torch.Tensor, int]:
    if dim is None:
        return x.reshape(-1), 0
    return x, canonical_dim("dim", dim, x.ndim)


def all(
    x: SoftBool,
    dim: int | None = -1,
    epsilon: float = 1e-10,
    use_geometric_mean: bool = False,
    *,
    keepdim: bool = False,
) -> SoftBool:
    """Fuzzy ALL along ``dim``: the product of x (or exp(mean log max(x, epsilon)) with the geometric mean).

    Beyond SoftTorch: ``dim=None`` reduces over all elements; ``keepdim`` keeps a singleton.
    """
    x = check_nan("x", ensure_float(x))
    epsilon = _eps("epsilon", epsilon)
    if x.ndim == 0:
        x = x.reshape(1)
    xr, d = _reduce_dim(x, dim)
    if use_geometric_mean:
        out = torch.exp(torch.log(xr.clamp_min(epsilon)).mean(dim=d, keepdim=keepdim and dim is not None))
    else:
        out = torch.prod(xr, dim=d, keepdim=keepdim and dim is not None)
    if keepdim and dim is None:
        out = out.reshape((1,) * x.ndim)
    return out


def any(
    x: SoftBool,
    dim: int | None = -1,
    use_geometric_mean: bool = False,
    *,
    epsilon: float = 1e-10,
    keepdim: bool = False,
) -> SoftBool:
    """Fuzzy ANY along ``dim``: 1 - all(1 - x)."""
    x = check_nan("x", ensure_float(x))
    with _unchecked():
        return 1.0 - all(1.0 - x, dim, epsilon, use_geometric_mean, keepdim=keepdim)


def _pair(x: Any, y: Any) -> torch.Tensor:
    x = check_nan("x", ensure_float(x))
    y = ensure_float(y) if isinstance(y, torch.Tensor) else torch.as_tensor(y, dtype=x.dtype, device=x.device)
    check_nan("y", y)
    dtype = torch.promote_types(x.dtype, y.dtype)
    xb, yb = torch.broadcast_tensors(x.to(dtype), y.to(dtype))
    return torch.stack([xb, yb], dim=-1)


def logical_and(x: SoftBool, y: SoftBool, use_geometric_mean: bool = False) -> SoftBool:
    """Fuzzy AND: x * y (product t-norm), or sqrt(max(x, eps) max(y, eps)) with the geometric mean."""
    xy = _pair(x, y)
    with _unchecked():
        return all(xy, dim=-1, use_geometric_mean=use_geometric_mean)


def logical_or(x: SoftBool, y: SoftBool, use_geometric_mean: bool = False) -> SoftBool:
    """Fuzzy OR: 1 - (1 - x)(1 - y) (probabilistic sum), or its geometric-mean variant."""
    xy = _pair(x, y)
    with _unchecked():
        return any(xy, dim=-1, use_geometric_mean=use_geometric_mean)


def logical_xor(x: SoftBool, y: SoftBool, use_geometric_mean: bool = False) -> SoftBool:
    """Fuzzy XOR: or(and(x, not y), and(not x, y))."""
    _pair(x, y)
    with _unchecked():
        return _xor(x, y, use_geometric_mean)


def _xor(x: SoftBool, y: SoftBool, use_geometric_mean: bool) -> SoftBool:
    a = logical_and(x, logical_not(y), use_geometric_mean)
    b = logical_and(logical_not(x), y, use_geometric_mean)
    return logical_or(a, b, use_geometric_mean)
