"""Shared definitions for :mod:`optarium.soft`: modes, argument checks, standardization and result types.

Conventions (Paulus et al., "SoftJAX & SoftTorch: Empowering Automatic Differentiation Libraries with
Informative Gradients", ICML 2026, arXiv:2603.08824):

* a **SoftBool** is a tensor of fuzzy truth values in [0, 1];
* a **SoftIndex** is a non-negative tensor summing to one over its *last* axis (a distribution over the n
  positions of the reduced axis);
* ``softness`` s > 0 sets the width of every relaxation (s -> 0 recovers the hard function);
* ``mode`` picks the smoothness class: ``"hard"`` (exact torch result), ``"smooth"`` (C-infinity, logistic /
  entropic), ``"c0"`` (piecewise linear / Euclidean), ``"c1"`` (cubic / p = 3/2), ``"c2"`` (quintic /
  p = 4/3).

Axis-wise operators first *standardize* the reduced axis, z = logistic((x - mean) / sqrt(var + 1e-6)) with the
population variance, so the softness is (approximately) scale free; value-returning permutahedron / sorting
network methods map back with :func:`unstandardize` (logit(y) * std + mean).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import torch

__all__ = [
    "MODES",
    "NAN_POLICIES",
    "SOFT_MODES",
    "MaxResult",
    "MedianResult",
    "MinResult",
    "SoftBool",
    "SoftIndex",
    "SortResult",
    "TopKResult",
    "canonical_dim",
    "check_mode",
    "check_nan",
    "check_softness",
    "ensure_float",
    "get_nan_policy",
    "nan_policy",
    "set_nan_policy",
    "standardize",
    "unstandardize",
]

#: Fuzzy truth values in [0, 1] (a plain tensor; the alias documents intent, as in SoftTorch).
SoftBool = torch.Tensor
#: Non-negative weights summing to one over the last axis (a plain tensor alias, as in SoftTorch).
SoftIndex = torch.Tensor

#: All public modes, in increasing order of smoothness after ``"hard"``.
MODES: tuple[str, ...] = ("hard", "smooth", "c0", "c1", "c2")
#: The relaxed modes (everything but ``"hard"``).
SOFT_MODES: tuple[str, ...] = ("smooth", "c0", "c1", "c2")

# Result types: the torch.return_types structseqs, so results index, unpack and print exactly like torch's
# (and like SoftTorch's, which returns the same types). ``indices`` holds a SoftIndex (or None).
SortResult = torch.return_types.sort
MaxResult = torch.return_types.max
MinResult = torch.return_types.min
MedianResult = torch.return_types.median
TopKResult = torch.return_types.topk


#: The NaN policies: ``"raise"`` (default) validates every floating input and raises
#: ``ValueError("<arg>: contains NaN ...")``; ``"propagate"`` skips the check (no device sync, no graph
#: break) and returns whatever the arithmetic gives.
NAN_POLICIES: tuple[str, ...] = ("raise", "propagate")
_NAN_POLICY: ContextVar[str] = ContextVar("optarium_soft_nan_policy", default="raise")


def _check_policy(policy: Any) -> str:
    if not isinstance(policy, str) or policy not in NAN_POLICIES:
        raise ValueError(f"policy: must be one of {', '.join(map(repr, NAN_POLICIES))}, got {policy!r}")
    return policy


def get_nan_policy() -> str:
    """The NaN policy in force (``"raise"`` unless changed by :func:`set_nan_policy` / :func:`nan_policy`)."""
    return _NAN_POLICY.get()


def set_nan_policy(policy: str) -> str:
    """Set the NaN policy of every soft operator (in this thread / context); returns the previous one."""
    old = _NAN_POLICY.get()
    _NAN_POLICY.set(_check_policy(policy))
    return old


@contextmanager
def nan_policy(policy: str) -> Iterator[None]:
    """Context manager: the NaN policy ``policy`` inside the block, the previous one after it."""
    token = _NAN_POLICY.set(_check_policy(policy))
    try:
        yield
    finally:
        _NAN_POLICY.reset(token)


def _unchecked() -> Any:
    """Context for an operator's internal calls on values derived from already-checked inputs."""
    return nan_policy("propagate")


def check_nan(name: str, t: Any) -> Any:
    """``t`` unchanged; under the ``"raise"`` policy ``ValueError`` starting with ``name`` if it holds a NaN.

    Checks floating and complex tensors (one ``isnan().any()`` reduction and one host read) and Python
    floats; other values pass through (their own checks name them).
    """
    if _NAN_POLICY.get() != "raise":
        return t
    if isinstance(t, torch.Tensor):
        if (t.is_floating_point() or t.is_complex()) and t.numel() and bool(torch.isnan(t).any()):
            n_bad = int(torch.isnan(t).sum())
            raise ValueError(
                f"{name}: contains NaN ({n_bad} of {t.numel()} entries); a soft operator cannot order, "
                "compare or relax NaN (use optarium.soft.nan_policy('propagate') to skip this check)"
            )
    elif isinstance(t, float) and math.isnan(t):
        raise ValueError(f"{name}: contains NaN (got the float nan)")
    return t


def check_softness(name: str, s: Any) -> Any:
    """Validate a softness: a finite real number > 0 (returned as float) or a tensor of such values.

    A tensor softness is returned unchanged (so a schedule or a learned temperature keeps its graph).
    Raises ``ValueError`` (``TypeError`` for a non-number) whose message starts with ``name``.
    """
    if isinstance(s, torch.Tensor):
        if s.is_complex() or not (s.is_floating_point() or s.dtype in (torch.int32, torch.int64)):
            raise TypeError(f"{name}: must be a real number or real tensor, got tensor of dtype {s.dtype}")
        bad = ~(torch.isfinite(s) & (s > 0))
        if bool(bad.any()):
            raise ValueError(f"{name}: must be finite and > 0, got {s.detach().cpu().tolist()!r}")
        return s
    if isinstance(s, bool) or not isinstance(s, numbers.Real):
        raise TypeError(f"{name}: must be a real number, got {type(s).__name__} {s!r}")
    v = float(s)
    if math.isnan(v) or not math.isfinite(v) or v <= 0:
        raise ValueError(f"{name}: must be finite and > 0, got {v!r}")
    return v


def check_mode(mode: Any, allowed: Sequence[str] = MODES, name: str = "mode") -> str:
    """Return ``mode`` if it is one of ``allowed``; ``ValueError`` starting with ``name`` otherwise."""
    if not isinstance(mode, str) or mode not in tuple(allowed):
        listed = ", ".join(repr(m) for m in allowed)
        raise ValueError(f"{name}: must be one of {listed}, got {mode!r}")
    return mode


def canonical_dim(name: str, dim: Any, ndim: int) -> int:
    """``dim`` as a non-negative axis of a tensor with ``ndim`` dims (a 0-d tensor counts as 1-d).

    ``ValueError`` (``TypeError`` for a non-integer) whose message starts with ``name``.
    """
    if isinstance(dim, bool) or not isinstance(dim, numbers.Integral):
        raise TypeError(f"{name}: must be an integer, got {type(dim).__name__} {dim!r}")
    nd = max(int(ndim), 1)
    d = int(dim)
    if not -nd <= d < nd:
        raise ValueError(f"{name}: {d} is out of range for a tensor with {ndim} dimension(s)")
    return d + nd if d < 0 else d


def ensure_float(x: Any) -> torch.Tensor:
    """``x`` as a floating tensor: non-float tensors (and Python scalars) take the default float dtype."""
    if not isinstance(x, torch.Tensor):
        x = torch.as_tensor(x)
    return x if x.is_floating_point() else x.to(torch.get_default_dtype())


def standardize(
    x: torch.Tensor, dim: int = -1, eps: float = 1e-6
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Standardize and squash along ``dim``: z = logistic((x - mean) / sqrt(var + eps)).

    Uses the population variance. Returns ``(z, mean, std)`` with ``mean``/``std`` kept as singleton dims so
    :func:`unstandardize` inverts the map. Pure torch; differentiable; dtype/device follow ``x``.
    """
    mean = x.mean(dim=dim, keepdim=True)
    var = (x - mean).square().mean(dim=dim, keepdim=True)
    std = torch.sqrt(var + eps)
    return torch.sigmoid((x - mean) / std), mean, std


def unstandardize(y: torch.Tensor, mean: torch.Tensor, std: torch.Tensor, eps: float = 1e-10) -> torch.Tensor:
    """Inverse of :func:`standardize`: logit(y) * std + mean, with y clipped to [e, 1 - e] first.

    e = max(eps, 10 * machine epsilon of y's dtype), so values squashed to exactly 0 or 1 stay finite.
    """
    e = max(eps, 10.0 * torch.finfo(y.dtype).eps)
    y = y.clamp(e, 1.0 - e)
    return torch.logit(y) * std + mean
