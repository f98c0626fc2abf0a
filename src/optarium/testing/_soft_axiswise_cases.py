"""Conformance cases of the axis-wise soft operators (:mod:`optarium.soft.axiswise`).

Each public axis-wise function (and its ``*_st`` variant) gets one case over the simplex / sorting-network /
permutahedron methods, compared with the ``softtorch`` 0.1.1 wheel in every mode (forward and straight-through
gradient), and one ``[ot]`` case for the optimal-transport method: compared with the wheel in ``smooth`` mode
only (forward, at sinkhorn_tol 1e-9 on both sides), because the wheel's OT c0/c1/c2 is broken (all-zero plans)
and its OT gradients are inexact (5 CG steps); our OT c0-c2 and OT gradients are checked by gradcheck and the
SoftIndex checks here, and by tests/soft/test_ot.py. The sorting network is not permutation equivariant (the
network compares fixed wire pairs), so the equivariance identities leave it out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from optarium.soft._common import SOFT_MODES
from optarium.testing.soft_checks import BadInput, Golden, SoftOpCase

__all__ = ["axiswise_cases"]

_N = 5  # length of the reduced axis in the random inputs
_OT_KW = {"ot_kwargs": {"sinkhorn_tol": 1e-9, "lbfgs_tol": 1e-10}}
_OT_SKIP = {
    (
        "ot",
        m,
    ): "softtorch 0.1.1 OT c0/c1/c2 returns all-zero plans (broken wheel; checked by our own criteria)"
    for m in ("c0", "c1", "c2")
}
_OT_LIMIT = (1e-1, 3e-2)  # OT at softness 1e-3 needs very many Sinkhorn iterations; 3e-2 shows the trend


def _x_inputs(shape: tuple[int, ...], **kwargs: Any) -> Callable[..., tuple[tuple[Any, ...], dict[str, Any]]]:
    def make(g: torch.Generator, dtype: torch.dtype) -> tuple[tuple[Any, ...], dict[str, Any]]:
        x = torch.randn(shape, generator=g, dtype=torch.float64)
        # keep entries apart (no near-ties) so hard results are unambiguous and gradients are smooth
        x = x + 0.15 * torch.arange(shape[-1], dtype=torch.float64)[torch.randperm(shape[-1], generator=g)]
        return (x.to(dtype),), dict(kwargs)

    return make


def _onehot(idx: torch.Tensor, n: int, like: torch.Tensor) -> torch.Tensor:
    return F.one_hot(idx, n).to(like.dtype)


def _index(out: Any) -> list[torch.Tensor]:
    return [out]


def _indices_field(out: Any) -> list[torch.Tensor]:
    idx = out[1]
    return [] if idx is None else [idx]


def _quantile_index(out: Any) -> list[torch.Tensor]:
    return [out[1]] if isinstance(out, tuple) else []


def _bad(
    fn: Callable[..., Any], x: torch.Tensor, extra: tuple[Any, ...] = (), **more: Any
) -> tuple[BadInput, ...]:
    base = (x, *extra)
    out = [
        BadInput(base, {"softness": 0.0}, "softness"),
        BadInput(base, {"softness": -1.0}, "softness"),
        BadInput(base, {"mode": "c3"}, "mode"),
        BadInput(base, {"method": "bogus"}, "method"),
        BadInput(base, {"dim": 3}, "dim"),
        BadInput(base, {"ot_kwargs": {"tol": 1.0}}, "ot_kwargs"),
    ]
    for name, kw in more.items():
        out.append(BadInput(base, kw, name.rstrip("_0123456789")))
    return tuple(out)


def axiswise_cases() -> list[SoftOpCase]:
    """The axis-wise cases (argmax ... rank, argtopk, the ``*_st`` variants) for the conformance suite."""
    from optarium.soft import axiswise as A

    x1 = torch.randn(2, _N, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    xg = torch.tensor([-0.2, -1.0, 0.3, 1.0], dtype=torch.float64)
    index_methods = ("softsort", "neuralsort", "sorting_network")
    value_methods = (*index_methods, "fast_soft_sort", "smooth_sort")
    inputs = _x_inputs((2, _N), dim=-1)
    small = _x_inputs((2, 4), dim=-1)

    def equivariance(fn: Callable[..., torch.Tensor], kind: str, methods: tuple[str, ...], **kw: Any) -> Any:
        """fn(x[..., perm]) equals fn(x) permuted (kind: "values" unchanged, "index" columns permuted,
        "elementwise" permuted along the axis)."""

        def check(g: torch.Generator) -> None:
            x = _x_inputs((3, _N))(g, torch.float64)[0][0]
            perm = torch.randperm(_N, generator=g)
            for method in methods:
                for mode in SOFT_MODES:
                    kk = {**kw, **(_OT_KW if method == "ot" else {})}
                    a = fn(x, mode=mode, method=method, **kk)
                    b = fn(x[:, perm], mode=mode, method=method, **kk)
                    if kind == "values":
                        want = a
                    elif kind == "index":
                        want = a[..., perm]
                    else:
                        want = a[:, perm]
                    torch.testing.assert_close(b, want, rtol=0, atol=1e-8, msg=f"{method} {mode}")

        return check

    def affine(fn: Callable[..., torch.Tensor], methods: tuple[str, ...], **kw: Any) -> Any:
        """Standardization makes fn nearly affine invariant: |fn(a x + b) - fn(x)| <= 1e-4 (spec test 6)."""

        def check(g: torch.Generator) -> None:
            x = torch.randn(2, 8, generator=g, dtype=torch.float64)
            x = (x - x.mean(-1, keepdim=True)) / x.std(-1, unbiased=False, keepdim=True)
            for method in methods:
                kk = {**kw, **(_OT_KW if method == "ot" else {})}
                base = fn(x, method=method, **kk)
                for a, b in ((0.3, 0.0), (1000.0, -100.0), (7.0, 100.0)):
                    torch.testing.assert_close(fn(a * x + b, method=method, **kk), base, rtol=0, atol=1e-4)

        return check

    def identity(
        lhs: Callable[[torch.Tensor, str, str], Any],
        rhs: Callable[[torch.Tensor, str, str], Any],
        methods: tuple[str, ...] = ("softsort", "neuralsort", "sorting_network"),
    ) -> Any:
        def check(g: torch.Generator) -> None:
            x = _x_inputs((3, _N))(g, torch.float64)[0][0]
            for method in methods:
                for mode in SOFT_MODES:
                    for u, v in zip(
                        _leaves(lhs(x, mode, method)), _leaves(rhs(x, mode, method)), strict=True
                    ):
                        torch.testing.assert_close(u, v, rtol=0, atol=1e-12)

        return check

    def hard_rank(x: torch.Tensor, dim: int = -1, descending: bool = True, **_: Any) -> torch.Tensor:
        order = torch.argsort(x, dim=dim, descending=descending)
        return (torch.argsort(order, dim=dim) + 1).to(x.dtype)

    def rank_sum(g: torch.Generator) -> None:  # rank(x) + rank_desc(x) = n + 1 in hard mode
        x = _x_inputs((3, _N))(g, torch.float64)[0][0]
        s = A.rank(x, -1, mode="hard") + A.rank(x, -1, mode="hard", descending=False)
        torch.testing.assert_close(s, torch.full_like(s, _N + 1.0), rtol=0, atol=0)

    def hard_quantile_index(x: torch.Tensor, q: Any, dim: int = -1, **kw: Any) -> torch.Tensor:
        interp = kw.get("interpolation", "linear")
        qt = torch.as_tensor(q, dtype=x.dtype)
        p = qt * (x.shape[dim] - 1)
        k = {"lower": torch.floor, "higher": torch.ceil, "nearest": torch.round}.get(interp, torch.floor)(p)
        order = torch.argsort(x, dim=dim)
        out = _onehot(order[..., k.long()], x.shape[dim], x)
        return out.movedim(-2, 0) if qt.ndim == 1 else out

    cases: list[SoftOpCase] = []

    smooth_sort_only = {"smooth_sort": ("smooth",)}  # SoftJAX's smooth_sort has no c0/c1/c2
    smooth_sort_skip = {
        "smooth_sort": "softtorch 0.1.1 raises NotImplementedError for smooth_sort (SoftJAX only)"
    }

    def add(
        name: str, fn: Any, st_fn: Any, hard: Any, ref: str | None, *, methods: tuple[str, ...], **kw: Any
    ) -> None:
        if "smooth_sort" in methods:
            kw = {"method_modes": smooth_sort_only, "reference_skip": smooth_sort_skip, **kw}
        cases.append(
            SoftOpCase(
                name=name,
                fn=fn,
                st_fn=st_fn,
                hard=hard,
                methods=methods,
                reference=ref,
                reference_st=(f"{ref}_st" if ref is not None else None),
                **kw,
            )
        )

    def add_ot(name: str, fn: Any, st_fn: Any, hard: Any, ref: str | None, **kw: Any) -> None:
        cases.append(
            SoftOpCase(
                name=f"{name}[ot]",
                fn=fn,
                st_fn=st_fn,
                hard=hard,
                methods=("ot",),
                method_kwargs={"ot": _OT_KW},
                reference=ref,
                reference_st=None,  # the wheel's OT gradients are inexact (spec, test 5)
                reference_skip=_OT_SKIP,
                reference_atol=1e-6,
                limit_pair=_OT_LIMIT,
                **kw,
            )
        )

    # ---- argmax / argmin -------------------------------------------------------------------------------
    def hard_argmax(x: torch.Tensor, dim: int = -1, **_: Any) -> torch.Tensor:
        return _onehot(torch.argmax(x, dim=dim), x.shape[dim], x)

    def hard_argmin(x: torch.Tensor, dim: int = -1, **_: Any) -> torch.Tensor:
        return _onehot(torch.argmin(x, dim=dim), x.shape[dim], x)

    common_idx = {"inputs": inputs, "gradcheck_inputs": small, "softindex": _index}
    add(
        "argmax",
        A.argmax,
        A.argmax_st,
        hard_argmax,
        "argmax",
        methods=index_methods,
        golden=(Golden((xg,), [0.0215, 0.0022, 0.1176, 0.8586]),),
        bad_inputs=_bad(A.argmax, x1, log_prob_eps={"return_log_probs": True, "log_prob_eps": 2.0}),
        identities=(
            equivariance(A.argmax, "index", ("softsort", "neuralsort", "ot"), dim=-1),
            affine(A.argmax, ("softsort", "neuralsort", "sorting_network", "ot"), dim=-1),
        ),
        **common_idx,
    )
    add_ot("argmax", A.argmax, A.argmax_st, hard_argmax, "argmax", **common_idx)
    add(
        "argmin",
        A.argmin,
        A.argmin_st,
        hard_argmin,
        "argmin",
        methods=index_methods,
        bad_inputs=_bad(A.argmin, x1),
        identities=(
            identity(
                lambda x, mo, me: A.argmin(x, -1, mode=mo, method=me),
                lambda x, mo, me: A.argmax(-x, -1, mode=mo, method=me),
            ),
        ),
        **common_idx,
    )
    add_ot("argmin", A.argmin, A.argmin_st, hard_argmin, "argmin", **common_idx)

    # ---- max / min ---------------------------------------------------------------------------------------
    def hard_max(x: torch.Tensor, dim: int = -1, **_: Any) -> Any:
        r = torch.max(x, dim=dim)
        return torch.return_types.max((r.values, _onehot(r.indices, x.shape[dim], x)))

    def hard_min(x: torch.Tensor, dim: int = -1, **_: Any) -> Any:
        r = torch.min(x, dim=dim)
        return torch.return_types.min((r.values, _onehot(r.indices, x.shape[dim], x)))

    common_val = {"inputs": inputs, "gradcheck_inputs": small, "softindex": _indices_field}
    add(
        "max",
        A.max,
        A.max_st,
        hard_max,
        "max",
        methods=value_methods,
        golden=(Golden((xg,), 0.8874),),
        bad_inputs=_bad(A.max, x1),
        identities=(equivariance(lambda x, **k: A.max(x, -1, **k).values, "values", ("softsort", "ot")),),
        **common_val,
    )
    add_ot("max", A.max, A.max_st, hard_max, "max", **common_val)
    add(
        "min",
        A.min,
        A.min_st,
        hard_min,
        "min",
        methods=value_methods,
        bad_inputs=_bad(A.min, x1),
        identities=(
            identity(
                lambda x, mo, me: A.min(x, -1, mode=mo, method=me).values,
                lambda x, mo, me: -A.max(-x, -1, mode=mo, method=me).values,
            ),
        ),
        **common_val,
    )
    add_ot("min", A.min, A.min_st, hard_min, "min", **common_val)

    # ---- argsort / sort -----------------------------------------------------------------------------------
    def hard_argsort(x: torch.Tensor, dim: int = -1, descending: bool = False, **_: Any) -> torch.Tensor:
        return _onehot(torch.argsort(x, dim=dim, descending=descending), x.shape[dim], x)

    def hard_sort(x: torch.Tensor, dim: int = -1, descending: bool = False, **_: Any) -> Any:
        r = torch.sort(x, dim=dim, descending=descending)
        return torch.return_types.sort((r.values, _onehot(r.indices, x.shape[dim], x)))

    add(
        "argsort",
        A.argsort,
        A.argsort_st,
        hard_argsort,
        "argsort",
        methods=index_methods,
        bad_inputs=_bad(A.argsort, x1),
        identities=(
            equivariance(A.argsort, "index", ("softsort", "neuralsort", "ot"), dim=-1),
            affine(A.argsort, ("softsort", "neuralsort", "sorting_network", "ot"), dim=-1),
        ),
        **common_idx,
    )
    add_ot("argsort", A.argsort, A.argsort_st, hard_argsort, "argsort", **common_idx)
    sort_inputs = _x_inputs((2, _N), dim=-1, descending=True)
    sort_kw = {"inputs": sort_inputs, "gradcheck_inputs": small, "softindex": _indices_field}
    add(
        "sort",
        A.sort,
        A.sort_st,
        hard_sort,
        "sort",
        methods=value_methods,
        golden=(
            Golden((xg,), [-0.8792, -0.1641, 0.2767, 0.8738], select=lambda o: o.values),
            Golden(
                (xg,), [-0.8996, -0.1705, 0.2847, 0.8874], {"method": "softsort"}, select=lambda o: o.values
            ),
        ),
        bad_inputs=_bad(A.sort, x1),
        identities=(
            equivariance(
                lambda x, **k: A.sort(x, -1, **k).values, "values", ("softsort", "neuralsort", "ot")
            ),
        ),
        **sort_kw,
    )
    add_ot("sort", A.sort, A.sort_st, hard_sort, "sort", **sort_kw)

    # ---- topk / argtopk -----------------------------------------------------------------------------------
    def hard_topk(x: torch.Tensor, k: int, dim: int = -1, **_: Any) -> Any:
        r = torch.topk(x, k, dim=dim)
        return torch.return_types.topk((r.values, _onehot(r.indices, x.shape[dim], x)))

    def hard_argtopk(x: torch.Tensor, k: int, dim: int = -1, **_: Any) -> torch.Tensor:
        return _onehot(torch.topk(x, k, dim=dim).indices, x.shape[dim], x)

    def with_k(make: Any, k: int) -> Any:
        def inner(g: torch.Generator, dtype: torch.dtype) -> tuple[tuple[Any, ...], dict[str, Any]]:
            (x,), kw = make(g, dtype)
            return (x, k), kw

        return inner

    topk_kw = {"inputs": with_k(inputs, 2), "gradcheck_inputs": with_k(small, 2), "softindex": _indices_field}
    add(
        "topk",
        A.topk,
        A.topk_st,
        hard_topk,
        "topk",
        methods=value_methods,
        bad_inputs=(
            *_bad(A.topk, x1, (2,)),
            BadInput((x1, 0), {}, "k"),
            BadInput((x1, _N + 1), {}, "k"),
        ),
        **topk_kw,
    )
    add_ot("topk", A.topk, A.topk_st, hard_topk, "topk", **topk_kw)
    argtopk_kw = {"inputs": with_k(inputs, 3), "gradcheck_inputs": with_k(small, 2), "softindex": _index}
    cases.append(
        SoftOpCase(
            name="argtopk",
            fn=A.argtopk,
            st_fn=A.argtopk_st,
            hard=hard_argtopk,
            methods=(*index_methods, "ot"),
            method_kwargs={"ot": _OT_KW},
            bad_inputs=(*_bad(A.argtopk, x1, (2,)), BadInput((x1, -1), {}, "k")),
            identities=(
                identity(
                    lambda x, mo, me: A.argtopk(x, 3, mode=mo, method=me),
                    lambda x, mo, me: A.topk(x, 3, mode=mo, method=me).indices,
                    ("softsort", "neuralsort"),
                ),
            ),
            **argtopk_kw,
        )
    )

    # ---- rank ----------------------------------------------------------------------------------------------
    rank_kw = {"inputs": inputs, "gradcheck_inputs": small}
    add(
        "rank",
        A.rank,
        A.rank_st,
        hard_rank,
        "rank",
        methods=value_methods,
        golden=(Golden((xg,), [1.9950, 1.0548, 3.0239, 3.9228], {"descending": False}),),
        bad_inputs=_bad(A.rank, x1),
        identities=(
            equivariance(lambda x, **k: A.rank(x, -1, **k), "elementwise", ("softsort", "neuralsort", "ot")),
            affine(lambda x, **k: A.rank(x, -1, **k), ("softsort", "neuralsort", "sorting_network")),
            rank_sum,
        ),
        limit_pair=(1.0, 1e-3),  # fast_soft_sort ranks are already exact (error ~1e-14) at softness 0.1
        **rank_kw,
    )
    add_ot("rank", A.rank, A.rank_st, hard_rank, "rank", **rank_kw)

    # ---- quantiles -----------------------------------------------------------------------------------------
    def with_q(make: Any, q: Any, **extra: Any) -> Any:
        def inner(g: torch.Generator, dtype: torch.dtype) -> tuple[tuple[Any, ...], dict[str, Any]]:
            (x,), kw = make(g, dtype)
            return (x, q), {**kw, **extra}

        return inner

    def hard_quantile(x: torch.Tensor, q: Any, dim: int = -1, **kw: Any) -> torch.Tensor:
        qt = torch.as_tensor(q, dtype=x.dtype)
        return torch.quantile(x, qt, dim=dim, interpolation=kw.get("interpolation", "linear"))

    q_bad = (
        BadInput((x1, 1.5), {}, "q"),
        BadInput((x1, torch.full((2, 2), 0.5)), {}, "q"),
        BadInput((x1, 0.5), {"interpolation": "cubic"}, "interpolation"),
    )
    # q = 0.25 with n = 5: position 1 exactly, so even the linear hard index is one-hot
    for name, q, interp in (
        ("argquantile", 0.25, "linear"),
        ("argquantile[nearest,vector]", torch.tensor([0.3, 0.8], dtype=torch.float64), "nearest"),
    ):
        aq_kw = {
            "inputs": with_q(inputs, q, interpolation=interp),
            "gradcheck_inputs": with_q(small, q, interpolation=interp),
            "softindex": _index,
        }
        add(
            name,
            A.argquantile,
            A.argquantile_st,
            hard_quantile_index,
            "argquantile",
            methods=index_methods,
            bad_inputs=(*_bad(A.argquantile, x1, (0.5,)), *q_bad),
            **aq_kw,
        )
        add_ot(name, A.argquantile, A.argquantile_st, hard_quantile_index, "argquantile", **aq_kw)
    for name, q, interp in (
        ("quantile", 0.3, "linear"),
        ("quantile[midpoint,vector]", torch.tensor([0.1, 0.6], dtype=torch.float64), "midpoint"),
    ):
        qkw = {
            "inputs": with_q(inputs, q, interpolation=interp),
            "gradcheck_inputs": with_q(small, q, interpolation=interp),
        }
        add(
            name,
            A.quantile,
            A.quantile_st,
            hard_quantile,
            "quantile",
            methods=value_methods,
            golden=(Golden((xg, 0.2), -0.4501),),
            bad_inputs=(
                *_bad(A.quantile, x1, (0.5,)),
                *q_bad,
                BadInput(
                    (x1, 0.5), {"method": "sorting_network", "return_argquantile": True}, "return_argquantile"
                ),
            ),
            **qkw,
        )
        add_ot(name, A.quantile, A.quantile_st, hard_quantile, "quantile", **qkw)

    # ---- median --------------------------------------------------------------------------------------------
    def hard_argmedian(x: torch.Tensor, dim: int = -1, **_: Any) -> torch.Tensor:
        return hard_quantile_index(x, 0.5, dim, interpolation="lower")

    def hard_median(x: torch.Tensor, dim: int = -1, **_: Any) -> Any:
        r = torch.median(x, dim=dim)
        return torch.return_types.median((r.values, _onehot(r.indices, x.shape[dim], x)))

    even = _x_inputs((2, 6), dim=-1)  # even length: the lower median
    med_kw = {"inputs": even, "gradcheck_inputs": small}
    add(
        "argmedian",
        A.argmedian,
        A.argmedian_st,
        hard_argmedian,
        "argmedian",
        methods=index_methods,
        softindex=_index,
        bad_inputs=_bad(A.argmedian, x1),
        **med_kw,
    )
    add_ot("argmedian", A.argmedian, A.argmedian_st, hard_argmedian, "argmedian", softindex=_index, **med_kw)
    add(
        "median",
        A.median,
        A.median_st,
        hard_median,
        "median",
        methods=("softsort", "neuralsort"),
        softindex=_indices_field,
        bad_inputs=(
            *_bad(A.median, x1),
            BadInput((x1,), {"dim": None, "keepdim": True}, "keepdim"),
            BadInput((x1,), {"dim": 1, "method": "fast_soft_sort"}, "method"),
            BadInput((x1,), {"dim": 1, "method": "sorting_network"}, "method"),
        ),
        identities=(
            identity(
                lambda x, mo, me: A.median(x, -1, mode=mo, method=me).values,
                lambda x, mo, me: A.quantile(x, 0.5, -1, mode=mo, method=me, interpolation="lower"),
                ("softsort", "neuralsort"),
            ),
        ),
        **med_kw,
    )
    add_ot("median", A.median, A.median_st, hard_median, "median", softindex=_indices_field, **med_kw)
    flat = _x_inputs((3, 4), dim=None)
    add(
        "median[flat]",
        A.median,
        A.median_st,
        lambda x, dim=None, **_: torch.median(x),
        "median",
        methods=value_methods,
        inputs=flat,
        gradcheck_inputs=_x_inputs((2, 3), dim=None),
        limit_pair=(1.0, 1e-2),  # fast_soft_sort is exact (error ~1e-15) already at softness 1; at 1e-3 its
        # c1 projection carries ~1e-9 rounding, which the check would misread as a larger error
    )
    return cases


def _leaves(out: Any) -> list[torch.Tensor]:
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _leaves(o)]
    return [] if out is None else [out]
