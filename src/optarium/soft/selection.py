"""Selection with soft conditions and soft indices: where, take_along_dim, take, index_select, narrow.

Reference: A. Paulus, A. R. Geist, V. Musil, S. Hoffmann, O. Beker, G. Martius, "SoftJAX & SoftTorch:
Empowering Automatic Differentiation Libraries with Informative Gradients", ICML 2026, arXiv:2603.08824.
Same names, signatures and return shapes as SoftTorch 0.1.1; pure torch (batched matmuls, no Python loop over
the selected positions); dtype/device follow the input.

A SoftIndex P carries the distribution over the n positions of the indexed axis in its *last* dimension, so
each soft selection is an expectation: where(c, x, y) = c x + (1 - c) y; take_along_dim(x, P, dim)_k =
sum_n x_n P_{..., k, ..., n}; take(x, P (k, [n]), dim); index_select(x, p ([n],), dim) = sum_n x_n p_n;
narrow(x, p ([n],), length, dim)_i = sum_n x_{(n + i) mod n} p_n (cyclic wrap), i = 0 .. length - 1. With a
one-hot P (the hard indices of :mod:`optarium.soft`) each reduces exactly to the torch operation.
"""

from __future__ import annotations

import torch

from optarium._core.validation import check_int
from optarium.soft._common import SoftBool, SoftIndex, canonical_dim, check_nan

__all__ = ["index_select", "narrow", "take", "take_along_dim", "where"]


def _check_tensor(name: str, t: object) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: must be a torch.Tensor, got {type(t).__name__}")
    return check_nan(name, t)


def where(condition: SoftBool, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Soft ``torch.where``: x * condition + y * (1 - condition) (broadcast like torch)."""
    check_nan("condition", condition)
    check_nan("x", x)
    check_nan("y", y)
    return x * condition + y * (1.0 - condition)


def take_along_dim(x: torch.Tensor, soft_index: SoftIndex, dim: int | None = None) -> torch.Tensor:
    """Soft ``torch.take_along_dim``: out[..., k, ...] = sum_n x[..., n, ...] soft_index[..., k, ..., n].

    ``soft_index`` has ``x.ndim + 1`` dims (the distribution axis last); its other dims broadcast against x
    except ``dim``, whose size k is free. ``dim=None`` flattens x first (``soft_index`` then (k, [N])).
    """
    x = _check_tensor("x", x)
    soft_index = _check_tensor("soft_index", soft_index)
    if dim is None:
        x = x.reshape(-1)
        d = 0
    else:
        d = canonical_dim("dim", dim, x.ndim)
    if x.ndim + 1 != soft_index.ndim:
        raise ValueError(
            f"soft_index: must have x.ndim + 1 = {x.ndim + 1} dims (distribution axis last), "
            f"got shape {tuple(soft_index.shape)}"
        )
    n = x.shape[d]
    if soft_index.shape[-1] != n:
        raise ValueError(
            f"soft_index: last dim must have size {n} (x.shape[{d}]), got {soft_index.shape[-1]}"
        )
    xm = torch.movedim(x, d, -1).unsqueeze(-1)  # (..., n, 1)
    pm = torch.movedim(soft_index, d, -2)  # (..., k, n)
    try:
        torch.broadcast_shapes(xm.shape[:-2], pm.shape[:-2])
    except RuntimeError as err:
        raise ValueError(
            f"soft_index: shape {tuple(soft_index.shape)} does not broadcast with x of shape {tuple(x.shape)}"
        ) from err
    dtype = torch.promote_types(x.dtype, soft_index.dtype)
    out = torch.matmul(pm.to(dtype), xm.to(dtype)).squeeze(-1)  # (..., k)
    return torch.movedim(out, -1, d)


def take(x: torch.Tensor, soft_index: SoftIndex, dim: int | None = None) -> torch.Tensor:
    """Soft ``torch.take`` with k soft indices (``soft_index`` of shape (k, [n])) along ``dim``.

    Output shape: x's with the size n of ``dim`` replaced by k; ``dim=None`` flattens x (output (k,)).
    """
    x = _check_tensor("x", x)
    soft_index = _check_tensor("soft_index", soft_index)
    if soft_index.ndim != 2:
        raise ValueError(f"soft_index: must have shape (k, [n]), got shape {tuple(soft_index.shape)}")
    if dim is None:
        x = x.reshape(-1)
        d = 0
    else:
        d = canonical_dim("dim", dim, x.ndim)
    n = x.shape[d]
    if soft_index.shape[-1] != n:
        raise ValueError(
            f"soft_index: last dim must have size {n} (x.shape[{d}]), got {soft_index.shape[-1]}"
        )
    dtype = torch.promote_types(x.dtype, soft_index.dtype)
    out = torch.movedim(x, d, -1).to(dtype) @ soft_index.to(dtype).T  # (..., k)
    return torch.movedim(out, -1, d)


def index_select(x: torch.Tensor, soft_index: SoftIndex, dim: int, keepdim: bool = True) -> torch.Tensor:
    """Soft ``torch.index_select`` with one soft index ``soft_index`` ([n],): sum_n x_n p_n along ``dim``.

    Returns shape (..., 1, ...) with ``keepdim`` (default, as SoftTorch), else ``dim`` is removed.
    """
    x = _check_tensor("x", x)
    soft_index = _check_tensor("soft_index", soft_index)
    d = canonical_dim("dim", dim, x.ndim)
    if x.ndim == 0:
        x = x.reshape(1)
    if soft_index.ndim != 1:
        raise ValueError(f"soft_index: must be 1-D of shape ([n],), got shape {tuple(soft_index.shape)}")
    if soft_index.shape[0] != x.shape[d]:
        raise ValueError(f"soft_index: size {soft_index.shape[0]} does not match x.shape[{d}] = {x.shape[d]}")
    dtype = torch.promote_types(x.dtype, soft_index.dtype)
    out = torch.movedim(x, d, -1).to(dtype) @ soft_index.to(dtype)  # (...)
    return out.unsqueeze(d) if keepdim else out


def narrow(x: torch.Tensor, soft_start: SoftIndex, length: int, dim: int = 0) -> torch.Tensor:
    """Soft ``torch.narrow`` from a soft start position ``soft_start`` ([n],), wrapping cyclically.

    out_i = sum_n x_{(n + i) mod n} p_n for i = 0 .. length - 1 along ``dim``; needs 0 < length <= n.
    """
    x = _check_tensor("x", x)
    soft_start = _check_tensor("soft_start", soft_start)
    d = canonical_dim("dim", dim, x.ndim)
    if x.ndim == 0:
        x = x.reshape(1)
    n = x.shape[d]
    length = check_int("length", length)
    if not 0 < length <= n:
        raise ValueError(f"length: must satisfy 0 < length <= x.shape[dim] = {n}, got {length}")
    if soft_start.ndim != 1 or soft_start.shape[0] != n:
        raise ValueError(f"soft_start: must have shape ({n},), got shape {tuple(soft_start.shape)}")
    dtype = torch.promote_types(x.dtype, soft_start.dtype)
    idx = (torch.arange(length, device=x.device).unsqueeze(-1) + torch.arange(n, device=x.device)) % n
    xm = torch.movedim(x, d, -1).to(dtype)[..., idx]  # (..., length, n)
    out = xm @ soft_start.to(dtype)  # (..., length)
    return torch.movedim(out, -1, d)
