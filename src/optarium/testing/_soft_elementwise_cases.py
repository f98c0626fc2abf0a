"""Conformance cases of the elementwise, comparison, logic and selection soft operators and their ``*_st``.

One :class:`~optarium.testing.soft_checks.SoftOpCase` per public function of :mod:`optarium.soft.elementwise`,
:mod:`optarium.soft.logic`, :mod:`optarium.soft.selection` and :mod:`optarium.soft.straight_through`; the
axis-wise operators' cases are in :mod:`optarium.testing._soft_axiswise_cases`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from optarium.soft._common import SOFT_MODES
from optarium.testing.soft_checks import BadInput, Golden, Inputs, SoftOpCase, _gen

__all__ = ["elementwise_cases"]


def _away(x: torch.Tensor, points: Sequence[float], gap: float = 0.03) -> torch.Tensor:
    """Push entries of ``x`` lying within ``gap`` of any of ``points`` by 2 * gap (away from kinks/ties)."""
    for p in points:
        x = torch.where((x - p).abs() < gap, x + 2 * gap, x)
    return x


_KINKS = (0.0, 0.5, -0.5)  # u = 0 (ties) and |u| = 1 at the default softness 0.1


def _x(shape: tuple[int, ...], scale: float = 1.0, points: Sequence[float] = _KINKS) -> Inputs:
    def make(g: torch.Generator, dtype: torch.dtype) -> tuple[tuple[Any, ...], dict[str, Any]]:
        x = torch.randn(shape, generator=g, dtype=torch.float64) * scale
        return (_away(x, points).to(dtype),), {}

    return make


def _xy(shape: tuple[int, ...], ties: bool = False) -> Inputs:
    def make(g: torch.Generator, dtype: torch.dtype) -> tuple[tuple[Any, ...], dict[str, Any]]:
        x = torch.randn(shape, generator=g, dtype=torch.float64)
        y = x - _away(torch.randn(shape, generator=g, dtype=torch.float64) * 0.8, _KINKS)
        if ties:
            y = torch.where(torch.rand(shape, generator=g, dtype=torch.float64) < 0.3, x, y)
        return (x.to(dtype), y.to(dtype)), {}

    return make


def _round_inputs(g: torch.Generator, dtype: torch.dtype) -> tuple[tuple[Any, ...], dict[str, Any]]:
    x = torch.randn(3, 4, generator=g, dtype=torch.float64) * 2.0
    frac = x - torch.floor(x)
    x = (
        torch.floor(x) + 0.1 + 0.3 * frac + torch.where(frac > 0.5, 0.5, 0.0)
    )  # within 0.1 of no multiple of 1/2
    return (x.to(dtype),), {}


def _clamp_inputs(g: torch.Generator, dtype: torch.dtype) -> tuple[tuple[Any, ...], dict[str, Any]]:
    x = _away(
        torch.randn(3, 4, generator=g, dtype=torch.float64) * 1.5, (-1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5)
    )
    a = torch.full((4,), -1.0, dtype=torch.float64)
    return (x.to(dtype), a.to(dtype), torch.tensor(1.0, dtype=dtype)), {}


def _bools(shape: tuple[int, ...], n: int, hard: bool) -> Inputs:
    def make(g: torch.Generator, dtype: torch.dtype) -> tuple[tuple[Any, ...], dict[str, Any]]:
        out = []
        for _ in range(n):
            u = torch.rand(shape, generator=g, dtype=torch.float64)
            out.append(((u > 0.5).to(torch.float64) if hard else 0.05 + 0.9 * u).to(dtype))
        return tuple(out), {}

    return make


def _simplex(shape: tuple[int, ...], g: torch.Generator, hard: bool) -> torch.Tensor:
    z = torch.randn(shape, generator=g, dtype=torch.float64)
    if hard:
        return torch.nn.functional.one_hot(z.argmax(-1), shape[-1]).to(torch.float64)
    return torch.softmax(z, dim=-1)


def _sel_inputs(kind: str, hard: bool) -> Inputs:
    def make(g: torch.Generator, dtype: torch.dtype) -> tuple[tuple[Any, ...], dict[str, Any]]:
        x = torch.randn(3, 5, generator=g, dtype=torch.float64)
        if kind == "where":
            c = (
                (torch.rand(3, 5, generator=g) > 0.5).double()
                if hard
                else torch.rand(3, 5, generator=g).double()
            )
            y = torch.randn(3, 5, generator=g, dtype=torch.float64)
            return (c.to(dtype), x.to(dtype), y.to(dtype)), {}
        if kind == "take_along_dim":
            return (x.to(dtype), _simplex((3, 2, 5), g, hard).to(dtype)), {"dim": 1}
        if kind == "take_along_dim_flat":
            return (x.to(dtype), _simplex((4, 15), g, hard).to(dtype)), {"dim": None}
        if kind == "take":
            return (x.to(dtype), _simplex((2, 3), g, hard).to(dtype)), {"dim": 0}
        if kind == "index_select":
            return (x.to(dtype), _simplex((5,), g, hard).to(dtype)), {"dim": 1}
        return (x.to(dtype), _simplex((5,), g, hard).to(dtype), 3), {"dim": 1}  # narrow

    return make


def _onehot_idx(p: torch.Tensor) -> torch.Tensor:
    return p.argmax(-1)


def _hard_take_along_dim(x: torch.Tensor, p: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    if dim is None:
        return torch.take(x, _onehot_idx(p))
    return torch.take_along_dim(x, _onehot_idx(p), dim=dim)


def _hard_take(x: torch.Tensor, p: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    if dim is None:
        return torch.take(x, _onehot_idx(p))
    return torch.index_select(x, dim, _onehot_idx(p))


def _hard_index_select(x: torch.Tensor, p: torch.Tensor, dim: int, keepdim: bool = True) -> torch.Tensor:
    out = torch.index_select(x, dim, _onehot_idx(p).reshape(1))
    return out if keepdim else out.squeeze(dim)


def _hard_narrow(x: torch.Tensor, p: torch.Tensor, length: int, dim: int = 0) -> torch.Tensor:
    start = int(_onehot_idx(p))
    return torch.roll(x, -start, dims=dim).narrow(dim, 0, length)


def _same_fn(a: Callable[..., Any], b: Callable[..., Any], n_args: int) -> Callable[[torch.Generator], None]:
    """An identity check: ``a`` and ``b`` agree on random inputs (float64, every soft mode)."""

    def check(g: torch.Generator) -> None:
        args = [torch.randn(3, 4, generator=g, dtype=torch.float64) for _ in range(n_args)]
        for mode in SOFT_MODES:
            torch.testing.assert_close(a(*args, mode=mode), b(*args, mode=mode), rtol=1e-12, atol=1e-12)

    return check


def _soft_bool_out(out: Any) -> list[torch.Tensor]:
    return [out]


def elementwise_cases() -> list[SoftOpCase]:
    """Cases for the elementwise, comparison, logic and selection operators (and their ``*_st``)."""
    from optarium.soft import elementwise as E
    from optarium.soft import logic as L
    from optarium.soft import selection as S
    from optarium.soft import straight_through as T

    xg = torch.tensor([-0.2, -1.0, 0.3, 1.0], dtype=torch.float64)
    yg = torch.tensor([0.2, -0.5, 0.5, -1.0], dtype=torch.float64)
    ag = torch.tensor([0.1, 0.2, 0.8, 1.0], dtype=torch.float64)
    bg = torch.tensor([0.7, 0.3, 0.1, 0.9], dtype=torch.float64)
    x1 = torch.randn(4, dtype=torch.float64, generator=_gen(0))

    def soft_bad(fn: Callable[..., Any], *extra: Any) -> list[BadInput]:
        return [
            BadInput((x1, *extra), {"softness": 0.0}, "softness"),
            BadInput((x1, *extra), {"softness": -1.0}, "softness"),
            BadInput((x1, *extra), {"softness": float("nan")}, "softness"),
            BadInput((x1, *extra), {"mode": "c3"}, "mode"),
            BadInput((x1, *extra), {"mode": "_c1_pnorm"}, "mode"),
        ]

    def odd(fn: Callable[..., Any]) -> Callable[[torch.Generator], None]:
        def check(g: torch.Generator) -> None:
            x = torch.randn(3, 4, generator=g, dtype=torch.float64)
            for mode in SOFT_MODES:
                torch.testing.assert_close(fn(-x, mode=mode), -fn(x, mode=mode), rtol=1e-12, atol=1e-12)

        return check

    def sig_symmetry(g: torch.Generator) -> None:
        x = torch.randn(3, 4, generator=g, dtype=torch.float64)
        for mode in (*SOFT_MODES, "_c1_pnorm", "_c2_pnorm"):
            s = E.sigmoidal(x, mode=mode) + E.sigmoidal(-x, mode=mode)
            torch.testing.assert_close(s, torch.ones_like(s), rtol=0, atol=1e-12)
            half = E.sigmoidal(torch.zeros(1, dtype=torch.float64), mode=mode)
            torch.testing.assert_close(half, torch.full_like(half, 0.5), rtol=0, atol=1e-15)

    def relu_identity(g: torch.Generator) -> None:  # relu(x) - relu(-x) = x, as sigma(u) + sigma(-u) = 1
        x = torch.randn(3, 4, generator=g, dtype=torch.float64)
        for mode in (*SOFT_MODES, "_c1_pnorm", "_c2_pnorm"):
            torch.testing.assert_close(
                E.softrelu(x, mode=mode) - E.softrelu(-x, mode=mode), x, rtol=0, atol=1e-12
            )

    def abs_even(g: torch.Generator) -> None:
        x = torch.randn(3, 4, generator=g, dtype=torch.float64)
        for mode in SOFT_MODES:
            a = E.abs(x, mode=mode)
            torch.testing.assert_close(E.abs(-x, mode=mode), a, rtol=0, atol=1e-15)
            assert bool((a >= 0).all() and (a <= x.abs()).all())

    def clamp_wide(g: torch.Generator) -> None:  # clamp(x, a, b) -> x as a -> -inf, b -> inf
        x = torch.randn(3, 4, generator=g, dtype=torch.float64)
        for mode in SOFT_MODES:
            torch.testing.assert_close(E.clamp(x, -1e3, 1e3, mode=mode), x, rtol=0, atol=1e-9)
            one_sided = E.clamp(x, -0.5, None, mode=mode)
            torch.testing.assert_close(one_sided, E.clamp(x, -0.5, 1e3, mode=mode), rtol=0, atol=1e-9)

    def round_integers(g: torch.Generator) -> None:  # integers are fixed points up to the tails
        k = torch.randint(-5, 6, (3, 4), generator=g).double()
        for mode in SOFT_MODES:
            torch.testing.assert_close(
                E.round(k, mode=mode), k, rtol=0, atol=1e-12 if mode != "smooth" else 1e-6
            )

    def eq_ne(g: torch.Generator) -> None:
        x = torch.randn(3, 4, generator=g, dtype=torch.float64)
        y = torch.where(torch.rand(3, 4, generator=g) < 0.3, x, torch.randn(3, 4, generator=g).double())
        for mode in SOFT_MODES:
            s = L.eq(x, y, mode=mode) + L.not_equal(x, y, mode=mode)
            torch.testing.assert_close(s, torch.ones_like(s), rtol=0, atol=1e-12)

    def less_complement(g: torch.Generator) -> None:
        x, y = torch.randn(2, 3, 4, generator=g, dtype=torch.float64)
        for mode in SOFT_MODES:
            torch.testing.assert_close(L.less(x, y, mode=mode), 1 - L.greater_equal(x, y, mode=mode))
            torch.testing.assert_close(
                L.less_equal(x, y, mode=mode), L.greater(y, x, mode=mode), atol=1e-9, rtol=0
            )

    def or_identity(g: torch.Generator) -> None:
        a, b = torch.rand(2, 3, 4, generator=g, dtype=torch.float64)
        torch.testing.assert_close(L.logical_or(a, b), 1 - (1 - a) * (1 - b), rtol=0, atol=1e-15)
        torch.testing.assert_close(L.logical_and(a, b), a * b, rtol=0, atol=1e-15)
        torch.testing.assert_close(L.any(a, dim=0), 1 - torch.prod(1 - a, dim=0), rtol=0, atol=1e-15)
        torch.testing.assert_close(L.logical_and(a, b[0]), a * b[0], rtol=0, atol=1e-15)  # broadcasting

    def elementwise(name: str, **kw: Any) -> SoftOpCase:
        fn = getattr(E, name)
        return SoftOpCase(
            name=name,
            fn=fn,
            st_fn=getattr(T, f"{name}_st", None),
            reference=name,
            reference_st=f"{name}_st" if hasattr(T, f"{name}_st") else None,
            **kw,
        )

    def comparison(name: str, hard_op: Callable[..., torch.Tensor], **kw: Any) -> SoftOpCase:
        def hard(x: torch.Tensor, y: torch.Tensor, **k: Any) -> torch.Tensor:
            return hard_op(x, y, **k).to(x.dtype)

        kw.setdefault("softbool", _soft_bool_out)
        return SoftOpCase(
            name=name,
            fn=getattr(L, name),
            inputs=_xy((3, 4)),
            hard=hard,
            hard_inputs=_xy((3, 4), ties=True),
            st_fn=getattr(T, f"{name}_st"),
            bad_inputs=[
                *soft_bad(getattr(L, name), x1 + 1),
                BadInput((x1, x1), {"epsilon": -1.0}, "epsilon"),
            ],
            reference=name,
            reference_st=f"{name}_st",
            **kw,
        )

    def logical(name: str, n: int, hard_op: Callable[..., torch.Tensor] | None, **kw: Any) -> SoftOpCase:
        def hard(*args: torch.Tensor, **k: Any) -> torch.Tensor:
            assert hard_op is not None
            return hard_op(*(a.bool() for a in args), **k).to(args[0].dtype)

        return SoftOpCase(
            name=name + ("[geo]" if kw.get("kwargs", {}).get("use_geometric_mean") else ""),
            fn=getattr(L, name),
            inputs=_bools((3, 4), n, hard=False),
            hard=hard if hard_op is not None else None,
            hard_inputs=_bools((3, 4), n, hard=True),
            has_mode=False,
            softbool=_soft_bool_out,
            limit=False,
            reference=name,
            **kw,
        )

    ew_inputs = _x((3, 4))

    def selection(
        name: str,
        fn: Callable[..., Any],
        hard: Callable[..., Any],
        key: str | None = None,
        bad_inputs: Sequence[BadInput] = (),
        reference: str | None = None,
    ) -> SoftOpCase:
        """A selection case: soft and one-hot selector inputs of ``key``; no mode, no softness limit."""
        key = key or name
        return SoftOpCase(
            name=name,
            fn=fn,
            inputs=_sel_inputs(key, False),
            hard_inputs=_sel_inputs(key, True),
            hard=hard,
            has_mode=False,
            limit=False,
            bad_inputs=tuple(bad_inputs),
            reference=reference or name,
        )

    cases = [
        SoftOpCase(
            name="sigmoidal",
            fn=E.sigmoidal,
            inputs=ew_inputs,
            hard=lambda x: torch.heaviside(x, torch.tensor(0.5, dtype=x.dtype)),
            modes=(*SOFT_MODES, "_c1_pnorm", "_c2_pnorm"),
            softbool=_soft_bool_out,
            identities=(sig_symmetry,),
            bad_inputs=[
                *soft_bad(E.sigmoidal)[:4],
                BadInput((x1,), {"softness": "0.1"}, "softness", TypeError),
            ],
            reference="sigmoidal",
            reference_skip={"hard": "softtorch.sigmoidal has no hard mode (ours: heaviside(x, 0.5))"},
        ),
        SoftOpCase(
            name="softrelu",
            fn=E.softrelu,
            inputs=ew_inputs,
            hard=torch.relu,
            modes=(*SOFT_MODES, "_c1_pnorm", "_c2_pnorm"),
            identities=(relu_identity,),
            bad_inputs=soft_bad(E.softrelu)[:4],
            reference="softrelu",
            reference_skip={"hard": "softtorch.softrelu has no hard mode (ours: torch.relu)"},
        ),
        SoftOpCase(
            name="softrelu[gated]",
            fn=E.softrelu,
            inputs=ew_inputs,
            kwargs={"gated": True},
            hard=lambda x, gated: torch.relu(x),
            modes=(*SOFT_MODES, "_c1_pnorm", "_c2_pnorm"),
            reference="softrelu",
            reference_skip={"hard": "softtorch.softrelu has no hard mode (ours: torch.relu)"},
        ),
        elementwise(
            "heaviside",
            inputs=ew_inputs,
            hard=lambda x: torch.heaviside(x, torch.tensor(0.5, dtype=x.dtype)),
            hard_inputs=_x((3, 4), points=()),
            softbool=_soft_bool_out,
            bad_inputs=soft_bad(E.heaviside),
        ),
        elementwise(
            "sign", inputs=ew_inputs, hard=torch.sign, identities=(odd(E.sign),), bad_inputs=soft_bad(E.sign)
        ),
        elementwise(
            "abs",
            inputs=ew_inputs,
            hard=torch.abs,
            identities=(abs_even,),
            golden=(Golden((xg,), [0.1523, 0.9999, 0.2715, 0.9999]),),
            bad_inputs=soft_bad(E.abs),
        ),
        elementwise(
            "relu",
            inputs=ew_inputs,
            hard=torch.relu,
            golden=(Golden((xg,), [0.0127, 0.0, 0.3049, 1.0]),),
            bad_inputs=soft_bad(E.relu),
        ),
        SoftOpCase(
            name="relu[gated]",
            fn=E.relu,
            inputs=ew_inputs,
            kwargs={"gated": True},
            hard=lambda x, gated: torch.relu(x),
            st_fn=T.relu_st,
            reference="relu",
            reference_st="relu_st",
        ),
        elementwise(
            "clamp",
            inputs=_clamp_inputs,
            hard=torch.clamp,
            identities=(clamp_wide,),
            bad_inputs=[*soft_bad(E.clamp, -1.0, 1.0), BadInput((x1, None, None), {}, "a")],
        ),
        elementwise(
            "round",
            inputs=_round_inputs,
            hard=torch.round,
            identities=(round_integers,),
            bad_inputs=[*soft_bad(E.round), BadInput((x1,), {"neighbor_radius": -1}, "neighbor_radius")],
        ),
        comparison(
            "greater",
            torch.gt,
            golden=(Golden((xg, yg), [0.0180, 0.0067, 0.1192, 1.0]),),
            identities=(less_complement,),
        ),
        comparison("greater_equal", torch.ge),
        comparison("less", torch.lt),
        comparison("less_equal", torch.le),
        comparison("eq", torch.eq, softbool_slack=1e-9, identities=(eq_ne,)),
        comparison("not_equal", torch.ne),
        comparison("isclose", torch.isclose, softbool=None),
        SoftOpCase(
            name="isclose[clip]",
            fn=L.isclose,
            inputs=_xy((3, 4)),
            kwargs={"clip": True},
            hard=lambda x, y, clip: torch.isclose(x, y).to(x.dtype),
            hard_inputs=_xy((3, 4), ties=True),
            softbool=_soft_bool_out,
        ),
        logical("logical_not", 1, torch.logical_not),
        logical(
            "logical_and",
            2,
            torch.logical_and,
            golden=(Golden((ag, bg), [0.07, 0.06, 0.08, 0.90]),),
            identities=(or_identity,),
        ),
        logical("logical_or", 2, torch.logical_or),
        logical("logical_xor", 2, torch.logical_xor),
        logical("logical_and", 2, None, kwargs={"use_geometric_mean": True}),
        logical("logical_xor", 2, None, kwargs={"use_geometric_mean": True}),
        logical(
            "all",
            1,
            torch.all,
            kwargs={"dim": -1},
            golden=(Golden((ag,), 0.0160),),
            bad_inputs=(BadInput((ag,), {"dim": 3}, "dim"),),
        ),
        logical("all", 1, None, kwargs={"dim": 0, "use_geometric_mean": True}),
        logical("any", 1, torch.any, kwargs={"dim": 0}),
        logical("any", 1, None, kwargs={"dim": -1, "use_geometric_mean": True}),
        selection("where", S.where, lambda c, x, y: torch.where(c.bool(), x, y)),
        selection(
            "take_along_dim",
            S.take_along_dim,
            _hard_take_along_dim,
            bad_inputs=(
                BadInput((x1, torch.ones(4) / 4), {"dim": 0}, "soft_index"),
                BadInput((x1.reshape(2, 2), torch.ones(2, 3, 3) / 3), {"dim": 1}, "soft_index"),
                BadInput((x1.reshape(2, 2), torch.ones(2, 3, 2) / 2), {"dim": 2}, "dim"),
                BadInput((x1.reshape(2, 2), torch.ones(3, 1, 2) / 2), {"dim": 1}, "soft_index"),
            ),
        ),
        selection(
            "take_along_dim[flat]",
            S.take_along_dim,
            _hard_take_along_dim,
            key="take_along_dim_flat",
            reference="take_along_dim",
        ),
        selection(
            "take",
            S.take,
            _hard_take,
            bad_inputs=(
                BadInput((x1, torch.ones(4) / 4), {}, "soft_index"),
                BadInput((x1, torch.ones(2, 3) / 3), {"dim": 0}, "soft_index"),
            ),
        ),
        selection(
            "index_select",
            S.index_select,
            _hard_index_select,
            bad_inputs=(
                BadInput((x1, torch.ones(3) / 3, 0), {}, "soft_index"),
                BadInput((x1, torch.ones(4) / 4, 1), {}, "dim"),
            ),
        ),
        selection(
            "narrow",
            S.narrow,
            _hard_narrow,
            bad_inputs=(
                BadInput((x1, torch.ones(4) / 4, 0), {}, "length"),
                BadInput((x1, torch.ones(4) / 4, 5), {}, "length"),
                BadInput((x1, torch.ones(3) / 3, 2), {}, "soft_start"),
            ),
        ),
    ]
    return cases
