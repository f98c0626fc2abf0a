"""Argument checks and batching shared by the OT solvers (messages start with the argument's name)."""

from __future__ import annotations

import numbers
import time
from typing import Any

import torch

from optarium._core.validation import check_int, check_nonnegative, check_positive
from optarium.ot.result import OTResult

__all__ = ["case_marginal_error", "case_problem", "check_reg", "deadline_after", "package", "prepare"]


def check_reg(reg: Any) -> float:
    """The regularisation strength as a finite float > 0 (a 0-d tensor is read as its value)."""
    if isinstance(reg, torch.Tensor):
        if reg.numel() != 1:
            raise ValueError(f"reg: must be a scalar, got a tensor of shape {tuple(reg.shape)}")
        reg = float(reg)
    if isinstance(reg, bool) or not isinstance(reg, numbers.Real):
        raise TypeError(f"reg: must be a real number, got {type(reg).__name__} {reg!r}")
    return check_positive("reg", reg)


def deadline_after(start: float, time_limit_s: Any) -> float | None:
    """``start + time_limit_s`` (``None`` for no limit); ``time_limit_s`` must be a finite number >= 0."""
    if time_limit_s is None:
        return None
    return start + check_nonnegative("time_limit_s", time_limit_s)


def _masses(name: str, w: Any, size: int, cost: torch.Tensor) -> torch.Tensor:
    if w is None:
        return torch.full((size,), 1.0 / size, dtype=cost.dtype, device=cost.device)
    if isinstance(w, torch.Tensor):
        if w.device != cost.device:
            raise ValueError(f"{name}: must be on the cost's device {cost.device}, got {w.device}")
        if w.is_complex():
            raise TypeError(f"{name}: must be real, got dtype {w.dtype}")
    w = torch.as_tensor(w, dtype=cost.dtype, device=cost.device)
    if w.ndim < 1 or w.shape[-1] != size:
        raise ValueError(
            f"{name}: must have {size} entries in its last dimension, got shape {tuple(w.shape)}"
        )
    if not bool(torch.isfinite(w).all()):
        raise ValueError(f"{name}: must be finite")
    if not bool((w > 0).all()):
        raise ValueError(f"{name}: every mass must be > 0 (drop zero-mass points before solving)")
    return w


def prepare(
    cost: Any, a: Any, b: Any, tol: Any, max_iter: Any
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Size, float, int]:
    """Validate a batched problem and flatten it to (C (B, n, m), a (B, n), b (B, m), batch, tol, iters).

    ``cost`` (..., n, m) floating; ``a`` (..., n) and ``b`` (..., m) positive masses (``None``: uniform),
    cast to the cost's dtype, broadcast against the cost's batch dimensions, with equal totals per problem.
    """
    if not isinstance(cost, torch.Tensor):
        raise TypeError(f"cost: must be a torch.Tensor, got {type(cost).__name__}")
    if not cost.is_floating_point():
        raise TypeError(f"cost: must have a floating dtype, got {cost.dtype}")
    if cost.ndim < 2:
        raise ValueError(f"cost: must have shape (..., n, m), got {tuple(cost.shape)}")
    n, m = cost.shape[-2], cost.shape[-1]
    if n < 1 or m < 1:
        raise ValueError(f"cost: needs n >= 1 and m >= 1, got shape {tuple(cost.shape)}")
    # A finite sum proves every entry finite in one read; only a non-finite sum (NaN/inf entries, or finite
    # entries whose sum overflowed) pays for the elementwise check.
    if not bool(torch.isfinite(cost.detach().sum())) and not bool(torch.isfinite(cost).all()):
        raise ValueError("cost: must be finite")
    tol = check_nonnegative("tol", tol)
    max_iter = check_int("max_iter", max_iter, minimum=1)
    a = _masses("a", a, n, cost)
    b = _masses("b", b, m, cost)
    rel = max(1e-9, 1e3 * torch.finfo(cost.dtype).eps)
    ta, tb = a.sum(-1), b.sum(-1)
    if not bool(((ta - tb).abs() <= rel * torch.maximum(ta, tb)).all()):
        raise ValueError(
            f"b: must have the same total mass as a, got sum(a) = {ta.tolist()}, sum(b) = {tb.tolist()}"
        )
    batch = torch.broadcast_shapes(cost.shape[:-2], a.shape[:-1], b.shape[:-1])
    C = cost.expand(*batch, n, m).reshape(-1, n, m)
    B = C.shape[0]
    return C, a.expand(*batch, n).reshape(B, n), b.expand(*batch, m).reshape(B, m), batch, tol, max_iter


def package(
    batch: torch.Size,
    plan: torch.Tensor,
    potentials: tuple[torch.Tensor, torch.Tensor],
    values: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    info: dict[str, Any],
    start: float,
) -> OTResult:
    """The :class:`OTResult` of a flat solve, reshaped to the problem's batch dimensions.

    ``plan`` (B, n, m), ``potentials`` ((B, n), (B, m)), ``values`` = (value, value_linear, dual_value) (B,),
    ``info`` the solver's n_iter, error, status and history, ``start`` its ``time.perf_counter()`` start.
    """
    n, m = plan.shape[-2], plan.shape[-1]
    f, g = potentials
    value, value_linear, dual = values
    return OTResult(
        plan=plan.reshape(*batch, n, m),
        potentials=(f.reshape(*batch, n), g.reshape(*batch, m)),
        value=value.reshape(batch),
        value_linear=value_linear.reshape(batch),
        dual_value=dual.reshape(batch),
        status=info["status"],
        n_iter=int(info["n_iter"]),
        marginal_error=float(info["error"]),
        history=tuple(info["history"]),
        wall_time_s=time.perf_counter() - start,
    )


def case_problem(
    dtype: torch.dtype, device: Any, seed: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The small (6 x 5) problem of both OT solvers' conformance cases: cost, a, b in ``dtype``/``device``."""
    g = torch.Generator().manual_seed(1000 + seed)
    cost = torch.rand(6, 5, generator=g, dtype=torch.float64)
    a = torch.rand(6, generator=g, dtype=torch.float64) + 0.2
    b = torch.rand(5, generator=g, dtype=torch.float64) + 0.2
    a, b = a / a.sum(), b / b.sum()
    return tuple(t.to(dtype=dtype, device=device) for t in (cost, a, b))  # type: ignore[return-value]


def case_marginal_error(res: Any) -> float:
    """Relative marginal error of a case's returned plan, recomputed from the problem (max of both sides)."""
    _, a, b = case_problem(res.x.dtype, res.x.device, 0)
    rows = (res.x.sum(-1) - a).abs().amax() / a.amax()
    cols = (res.x.sum(-2) - b).abs().amax() / b.amax()
    return float(torch.maximum(rows, cols))
