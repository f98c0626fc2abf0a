"""The machinery shared by the axis-wise soft operators: argument checks, layouts and the method cores.

Every axis-wise operator (:mod:`optarium.soft.extrema`, :mod:`optarium.soft.sorting`,
:mod:`optarium.soft.top_k`, :mod:`optarium.soft.quantiles`) moves its reduced axis last, standardizes it
(``_prep``) and asks one of the method cores below for the rows of its soft index: ``_argsort_rows``,
``_argmax_row``, ``_argtopk_rows`` (``softsort``, ``neuralsort``, ``ot``, ``sorting_network``) or
``_sorted_values`` (the value-only methods). A core takes (..., n) with the reduced axis last and returns
rows (..., r, [n]) and optional log-rows. The methods themselves are described in
:mod:`optarium.soft.axiswise`.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from optarium.soft import elementwise as _ew
from optarium.soft._common import MODES, _unchecked, canonical_dim, check_mode, check_nan, check_softness
from optarium.soft._common import standardize as _standardize
from optarium.soft._common import unstandardize as _unstandardize
from optarium.soft._simplex import safe_log, simplex_projection
from optarium.soft._sorting_network import sorting_network as _sorting_network

__all__ = ["AX_METHODS", "INTERPOLATIONS", "VAL_METHODS"]

#: Methods that produce a soft index.
AX_METHODS: tuple[str, ...] = ("ot", "softsort", "neuralsort", "sorting_network")
#: Methods accepted by the value-returning functions (the last two give values only).
VAL_METHODS: tuple[str, ...] = (*AX_METHODS, "fast_soft_sort", "smooth_sort")
_VALUE_ONLY = ("fast_soft_sort", "smooth_sort", "sorting_network")
#: Quantile interpolation rules (as torch.quantile).
INTERPOLATIONS: tuple[str, ...] = ("linear", "lower", "higher", "nearest", "midpoint")
_OT_KEYS = ("sinkhorn_tol", "sinkhorn_max_iter", "lbfgs_tol", "lbfgs_max_iter", "implicit")

_builtin_max = max
_builtin_min = min


# ---------------------------------------------------------------------------------------------------------
# argument handling
# ---------------------------------------------------------------------------------------------------------


def _check_x(x: Any) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x: must be a torch.Tensor, got {type(x).__name__}")
    if x.is_complex():
        raise TypeError(f"x: must be real, got dtype {x.dtype}")
    return check_nan("x", x)


def _check_common(
    softness: Any, mode: Any, method: Any, methods: tuple[str, ...], standardize: Any, ot_kwargs: Any
) -> dict[str, Any]:
    check_softness("softness", softness)
    check_mode(mode, MODES)
    check_mode(method, methods, name="method")
    _check_bools(standardize=standardize)
    if ot_kwargs is None:
        return {}
    if not isinstance(ot_kwargs, dict):
        raise TypeError(f"ot_kwargs: must be a dict or None, got {type(ot_kwargs).__name__}")
    bad = sorted(set(ot_kwargs) - set(_OT_KEYS))
    if bad:
        raise ValueError(f"ot_kwargs: unknown key(s) {bad}; allowed: {list(_OT_KEYS)}")
    return dict(ot_kwargs)


def _check_bools(**flags: Any) -> None:
    """``TypeError`` naming the first of ``flags`` (in the order given) that is not a bool."""
    for name, val in flags.items():
        if not isinstance(val, bool):
            raise TypeError(f"{name}: must be a bool, got {type(val).__name__}")


def _check_log(return_log_probs: Any, log_prob_eps: Any) -> None:
    _check_bools(return_log_probs=return_log_probs)
    if log_prob_eps is not None:
        if isinstance(log_prob_eps, bool) or not isinstance(log_prob_eps, (int, float)):
            raise TypeError(f"log_prob_eps: must be a float or None, got {type(log_prob_eps).__name__}")
        if not 0.0 < float(log_prob_eps) < 1.0:
            raise ValueError(f"log_prob_eps: must be in (0, 1), got {log_prob_eps!r}")


def _float(x: torch.Tensor) -> torch.Tensor:
    return x if x.is_floating_point() else x.to(torch.get_default_dtype())


def _flatten_or_move(x: torch.Tensor, dim: int | None) -> tuple[torch.Tensor, int | None]:
    """(x with the reduced axis last, canonical dim or None when flattened)."""
    if dim is None:
        return x.reshape(-1), None
    if x.ndim == 0:
        raise ValueError("dim: must be None for a 0-d tensor")
    d = canonical_dim("dim", dim, x.ndim)
    return torch.movedim(x, d, -1), d


def _check_nonempty(xl: torch.Tensor) -> int:
    n = xl.shape[-1]
    if n == 0:
        raise ValueError("x: the reduced dimension is empty")
    return n


def _one_hot(idx: torch.Tensor, n: int, dtype: torch.dtype) -> torch.Tensor:
    return F.one_hot(idx, num_classes=n).to(dtype)


def _hard_dtype(x: torch.Tensor) -> torch.dtype:
    return x.dtype if x.is_floating_point() else torch.get_default_dtype()


def _finish_index(
    p: torch.Tensor, logp: torch.Tensor | None, return_log_probs: bool, log_prob_eps: float | None
) -> torch.Tensor:
    """Probabilities, or log-probabilities (floored at ``log_prob_eps`` and renormalised if given)."""
    if not return_log_probs:
        return p
    lp = logp if logp is not None else safe_log(p)
    if log_prob_eps is not None:
        lp = lp.clamp(min=math.log(log_prob_eps))
        lp = lp - torch.logsumexp(lp, dim=-1, keepdim=True)
    return lp


def _take(x_last: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """sum_n x[..., n] p[..., r, n] -> (..., r)."""
    return torch.matmul(p, x_last.unsqueeze(-1).to(p.dtype)).squeeze(-1)


def _prep(xl: torch.Tensor, standardize: bool) -> torch.Tensor:
    xl = _float(xl)
    return _standardize(xl, dim=-1)[0] if standardize else xl


# ---------------------------------------------------------------------------------------------------------
# method cores: inputs (..., n) with the reduced axis last (already standardized); outputs rows (..., r, [n])
# and optional log-rows
# ---------------------------------------------------------------------------------------------------------

_Rows = tuple[torch.Tensor, torch.Tensor | None]


def _project(z: torch.Tensor, softness: Any, mode: str, want_log: bool) -> _Rows:
    if want_log:
        return simplex_projection(z, -1, softness, mode, return_log=True)  # type: ignore[return-value]
    return simplex_projection(z, -1, softness, mode), None  # type: ignore[return-value]


def _abs_sum(xl: torch.Tensor, softness: Any, mode: str) -> torch.Tensor:
    """sum_k |x_j - x_k|~ for every j (soft abs of the same mode), shape (..., n)."""
    with _unchecked():
        return _ew.abs(xl.unsqueeze(-1) - xl.unsqueeze(-2), softness, mode).sum(dim=-1)


def _neuralsort_rows(xl: torch.Tensor, pos: torch.Tensor, softness: Any, mode: str, want_log: bool) -> _Rows:
    """Rows for 1-based ascending positions ``pos`` (r,): simplex((2i - n - 1) x_j - sum_k |x_j - x_k|~)."""
    n = xl.shape[-1]
    coef = (n + 1 - 2 * pos).to(xl.dtype)
    a_sum = _abs_sum(xl, softness, mode)
    z = -(coef.unsqueeze(-1) * xl.unsqueeze(-2) + a_sum.unsqueeze(-2))
    return _project(z, softness, mode, want_log)


def _softsort_rows(
    xl: torch.Tensor, anchors: torch.Tensor, softness: Any, mode: str, want_log: bool
) -> _Rows:
    """Rows simplex(-|a_r - x_j|) for anchors (..., r)."""
    z = -(anchors.unsqueeze(-1) - xl.unsqueeze(-2)).abs()
    return _project(z, softness, mode, want_log)


def _ot_rows(
    xl: torch.Tensor,
    anchors: list[float],
    masses: list[float],
    cols: list[int],
    softness: Any,
    mode: str,
    ot_kwargs: dict[str, Any],
) -> torch.Tensor:
    """Normalised plan columns ``cols`` as rows (..., len(cols), [n]) for the given anchors and masses."""
    from optarium.soft._anchor_plan import transport_plan

    a = torch.tensor(anchors, dtype=xl.dtype, device=xl.device)
    nu = torch.tensor(masses, dtype=xl.dtype, device=xl.device).clamp(min=1e-12)
    nu = nu / nu.sum()
    plan = transport_plan(xl, a, nu, softness, mode, **ot_kwargs)  # (..., n, m)
    sel = plan[..., cols].transpose(-1, -2)  # (..., r, n)
    return sel / sel.sum(dim=-1, keepdim=True).clamp(min=torch.finfo(sel.dtype).tiny)


def _argsort_rows(
    xl: torch.Tensor,
    descending: bool,
    softness: Any,
    mode: str,
    method: str,
    standardized: bool,
    ot_kwargs: dict[str, Any],
    want_log: bool,
) -> _Rows:
    n = xl.shape[-1]
    if method == "softsort":
        anchors = torch.sort(xl, dim=-1, descending=descending).values
        return _softsort_rows(xl, anchors, softness, mode, want_log)
    if method == "neuralsort":
        pos = torch.arange(1, n + 1, device=xl.device)
        return _neuralsort_rows(xl, pos.flip(0) if descending else pos, softness, mode, want_log)
    if method == "ot":
        anchors = torch.linspace(0.0, 1.0, n, dtype=torch.float64).tolist()
        if descending:
            anchors = anchors[::-1]
        return _ot_rows(xl, anchors, [1.0 / n] * n, list(range(n)), softness, mode, ot_kwargs), None
    _, perm = _sorting_network(xl, softness, mode, descending, standardized, return_perm=True)
    assert perm is not None
    return perm, None


def _argmax_row(
    xl: torch.Tensor,
    softness: Any,
    mode: str,
    method: str,
    standardized: bool,
    ot_kwargs: dict[str, Any],
    want_log: bool,
) -> _Rows:
    n = xl.shape[-1]
    if method == "softsort":
        return _project(xl.unsqueeze(-2), softness, mode, want_log)
    if method == "neuralsort":
        return _neuralsort_rows(xl, torch.tensor([n], device=xl.device), softness, mode, want_log)
    if method == "ot":
        return _ot_rows(xl, [0.0, 1.0], [(n - 1) / n, 1.0 / n], [1], softness, mode, ot_kwargs), None
    _, perm = _sorting_network(xl, softness, mode, True, standardized, return_perm=True)
    assert perm is not None
    return perm[..., :1, :], None


def _argtopk_rows(
    xl: torch.Tensor,
    k: int,
    softness: Any,
    mode: str,
    method: str,
    standardized: bool,
    ot_kwargs: dict[str, Any],
    want_log: bool,
) -> _Rows:
    n = xl.shape[-1]
    if method == "softsort":
        anchors = torch.topk(xl, k, dim=-1).values
        return _softsort_rows(xl, anchors, softness, mode, want_log)
    if method == "neuralsort":
        pos = torch.arange(n, n - k, -1, device=xl.device)
        return _neuralsort_rows(xl, pos, softness, mode, want_log)
    if method == "ot":
        if k == n:
            return _argsort_rows(xl, True, softness, mode, "ot", standardized, ot_kwargs, False)
        anchors = torch.linspace(0.0, 1.0, k + 1, dtype=torch.float64).flip(0).tolist()
        masses = [1.0 / n] * k + [(n - k) / n]
        return _ot_rows(xl, anchors, masses, list(range(k)), softness, mode, ot_kwargs), None
    _, perm = _sorting_network(xl, softness, mode, True, standardized, return_perm=True)
    assert perm is not None
    return perm[..., :k, :], None


def _sorted_values(
    xl: torch.Tensor, descending: bool, softness: Any, mode: str, method: str, standardize: bool
) -> torch.Tensor:
    """Soft sorted values (..., n) of a value-only method; xl is the raw (float) input, axis last.

    ``smooth_sort`` works on the raw values whatever ``standardize`` says (as SoftJAX, whose method it is).
    """
    if method == "smooth_sort":
        return _smooth_sort_values(xl, descending, softness, mode)
    if standardize:
        z, mean, std = _standardize(xl, dim=-1)
    else:
        z = xl
    n = xl.shape[-1]
    if method == "sorting_network":
        vals, _ = _sorting_network(z, softness, mode, descending, standardize, return_perm=False)
    elif method == "fast_soft_sort":
        from optarium.soft._permutahedron import permutahedron_projection

        anchors = torch.arange(n, dtype=z.dtype, device=z.device) / _builtin_max(n - 1, 1)
        vals = permutahedron_projection(anchors.expand_as(z), z, softness, mode)
        if descending:
            vals = vals.flip(-1)
    else:  # pragma: no cover - method validated by the callers
        raise ValueError(f"method: {method!r} is not a value-only method")
    return _unstandardize(vals, mean, std) if standardize else vals


def _smooth_sort_values(z: torch.Tensor, descending: bool, softness: Any, mode: str) -> torch.Tensor:
    from optarium.soft._smooth_sort import smooth_sort_values

    return smooth_sort_values(z, softness=softness, mode=mode, descending=descending)
