"""The conformance suite for soft operators (:mod:`optarium.soft`): checks every soft function must pass.

An operator joins by adding a :class:`SoftOpCase` to :func:`soft_op_cases` (the elementwise, logic,
selection and straight-through cases here; the axis-wise ones from
``optarium.testing._soft_axiswise_cases.axiswise_cases``); ``tests/conformance/test_soft.py`` runs every
check on every case. The checks are public so a user can run them on a soft operator of their own.

Checks (numbers refer to the tests of the SoftTorch spec, Paulus et al., arXiv:2603.08824):

* ``hard_parity`` (1): ``mode="hard"`` equals the torch operation exactly (values and dtype), every method;
* ``st_forward`` (1, 5): the ``*_st`` variant's forward equals the hard output exactly (``torch.equal``) in
  every soft mode, and its gradient equals the soft function's gradient (catches an undetached hard);
* ``soft_index`` (3a): every SoftIndex is >= 0 with rows summing to 1 (1e-12 in float64, 1e-5 in float32);
  hard-mode indices are one-hot;
* ``softbool_range`` (3a): SoftBool outputs lie in [0, 1] (up to the case's slack, e.g. eps/s for ``eq``);
* ``limit`` (2): the error to the hard output at softness 1e-3 is below the error at 1e-1;
* ``gradcheck`` (5): ``torch.autograd.gradcheck`` in float64 (eps 1e-6, atol 1e-5) over the mode x method
  grid on small inputs away from ties and piecewise boundaries;
* ``identities`` (6, 7): the case's invariances and identities;
* ``golden`` (2 of the quick reproduction): the README's golden values to 1e-4;
* ``bad_input`` (9): each listed bad input raises the listed exception whose message starts with the
  argument's name;
* ``reference_parity``: agreement with the ``softtorch`` 0.1.1 wheel (when installed) in every mode and
  method (float64, allclose), minus the documented deliberate differences (``reference_skip``); ``*_st``
  forwards are compared with the wheel's ``*_st`` by allclose only (the wheel's ST forward is off by an ulp).
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from optarium.soft._common import SOFT_MODES

__all__ = [
    "CHECKS",
    "BadInput",
    "Golden",
    "SoftOpCase",
    "call",
    "check_bad_input",
    "check_golden",
    "check_gradcheck",
    "check_hard_parity",
    "check_identities",
    "check_limit",
    "check_reference_parity",
    "check_soft_index",
    "check_softbool_range",
    "check_st_forward",
    "elementwise_cases",
    "leaves",
    "soft_op_cases",
]

Inputs = Callable[[torch.Generator, torch.dtype], tuple[tuple[Any, ...], dict[str, Any]]]


@dataclass(frozen=True)
class Golden:
    """A golden value: ``select(fn(*args, **kwargs))`` must equal ``expected`` within ``atol``."""

    args: tuple[Any, ...]
    expected: Sequence[float] | float
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    atol: float = 1e-4
    select: Callable[[Any], torch.Tensor] | None = None


@dataclass(frozen=True)
class BadInput:
    """A bad call: ``fn(*args, **kwargs)`` must raise ``exc`` whose message starts with ``name``."""

    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]
    name: str
    exc: type[Exception] = ValueError


@dataclass(frozen=True)
class SoftOpCase:
    """How to exercise one soft operator in the conformance checks.

    Attributes:
        name: id in the test report (e.g. ``"sort[descending]"``).
        fn: the soft function.
        inputs: ``inputs(generator, dtype) -> (args, kwargs)``: small random inputs without ties and away
            from piecewise boundaries; the floating tensors among ``args`` are the differentiable inputs.
        hard: ``hard(*args, **kwargs)`` -> the exact expected output of ``fn(..., mode="hard")`` built from
            torch ops (indices as one-hot floats); ``None`` skips the hard-parity check.
        hard_inputs: inputs for the hard-parity check if they differ (e.g. one-hot indices for selection).
        st_fn: the ``*_st`` variant, if any.
        has_mode: ``fn`` takes ``mode`` (and ``softness``); False for logic/selection utilities.
        modes: the soft modes to sweep (``"hard"`` is always checked where ``has_mode``).
        methods: values of ``method=`` to sweep; ``(None,)`` when ``fn`` has no method argument.
        method_modes: per method, the subset of modes it supports (default: all of ``modes``).
        kwargs: extra keyword arguments for every call.
        method_kwargs: per method, extra keyword arguments (e.g. tight solver tolerances).
        softindex: picks the SoftIndex tensors out of an output (rows over the last axis).
        index_tol: (method, mode) or method -> float64 row-sum tolerance (default 1e-12).
        softbool: picks the tensors that must lie in [0, 1] out of an output.
        softbool_slack: allowed excursion outside [0, 1] (e.g. eps/s for ``eq`` at ties).
        limit: run the softness -> 0 check (``limit_pair`` = (large, small) softness).
        gradcheck_inputs: smaller inputs for gradcheck (default ``inputs``).
        identities: callables ``check(generator)`` asserting invariances / identities.
        golden: golden values.
        bad_inputs: bad calls with the argument they must name.
        reference: the ``softtorch`` function to compare with (``None``: no parity check).
        reference_st: the ``softtorch`` ``*_st`` function to compare ``st_fn`` with.
        reference_kwargs: extra kwargs for both sides in the parity check (e.g. ``sinkhorn_tol``).
        reference_skip: (method, mode) or mode or method -> why that combination is not compared.
        reference_atol: float64 tolerance of the parity check.
        exempt: check name -> reason (reported as a skip; say which test covers the property instead).
    """

    name: str
    fn: Callable[..., Any]
    inputs: Inputs
    hard: Callable[..., Any] | None = None
    hard_inputs: Inputs | None = None
    st_fn: Callable[..., Any] | None = None
    has_mode: bool = True
    modes: tuple[str, ...] = SOFT_MODES
    methods: tuple[str | None, ...] = (None,)
    method_modes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    method_kwargs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    softindex: Callable[[Any], list[torch.Tensor]] | None = None
    index_tol: Mapping[Any, float] = field(default_factory=dict)
    softbool: Callable[[Any], list[torch.Tensor]] | None = None
    softbool_slack: float = 0.0
    limit: bool = True
    limit_pair: tuple[float, float] = (1e-1, 1e-3)
    gradcheck_inputs: Inputs | None = None
    identities: Sequence[Callable[[torch.Generator], None]] = ()
    golden: Sequence[Golden] = ()
    bad_inputs: Sequence[BadInput] = ()
    reference: str | None = None
    reference_st: str | None = None
    reference_kwargs: Mapping[str, Any] = field(default_factory=dict)
    reference_skip: Mapping[Any, str] = field(default_factory=dict)
    reference_atol: float = 1e-5
    exempt: Mapping[str, str] = field(default_factory=dict)

    def grid(self) -> list[tuple[str | None, str]]:
        """The (method, mode) pairs of the soft sweep."""
        out = []
        for method in self.methods:
            modes = self.method_modes.get(method, self.modes) if method is not None else self.modes
            out.extend((method, mode) for mode in modes)
        return out


def call(
    case: SoftOpCase,
    fn: Callable[..., Any],
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    *,
    mode: str | None = None,
    method: str | None = None,
    softness: float | None = None,
    extra: Mapping[str, Any] | None = None,
) -> Any:
    """``fn(*args, **kwargs)`` with the case's kwargs, the method's kwargs, and mode/method/softness set."""
    kw: dict[str, Any] = {**case.kwargs, **kwargs}
    if method is not None:
        kw["method"] = method
        kw.update(case.method_kwargs.get(method, {}))
    if mode is not None and case.has_mode:
        kw["mode"] = mode
    if softness is not None and case.has_mode:
        kw["softness"] = softness
    if extra:
        kw.update(extra)
    return fn(*args, **kw)


def leaves(out: Any) -> list[Any]:
    """Flatten an output (tensor / None / tuple / namedtuple / list / dict) into its leaves."""
    if isinstance(out, dict):
        return [leaf for v in out.values() for leaf in leaves(v)]
    if isinstance(out, (tuple, list)):
        return [leaf for v in out for leaf in leaves(v)]
    return [out]


def _float_leaves(out: Any) -> list[torch.Tensor]:
    return [t for t in leaves(out) if isinstance(t, torch.Tensor) and t.is_floating_point()]


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _lookup(table: Mapping[Any, Any], method: str | None, mode: str) -> Any:
    for key in ((method, mode), mode, method):
        if key in table:
            return table[key]
    return None


def _assert_same(got: Any, want: Any, what: str) -> None:
    g, w = leaves(got), leaves(want)
    assert len(g) == len(w), f"{what}: {len(g)} output leaves, expected {len(w)}"
    for i, (a, b) in enumerate(zip(g, w, strict=True)):
        if b is None or a is None:
            assert a is None and b is None, (
                f"{what}[{i}]: got {type(a).__name__}, expected {type(b).__name__}"
            )
            continue
        assert isinstance(a, torch.Tensor), f"{what}[{i}]: not a tensor"
        b = torch.as_tensor(b)
        assert a.shape == b.shape, f"{what}[{i}]: shape {tuple(a.shape)} != {tuple(b.shape)}"
        assert a.dtype == b.dtype, f"{what}[{i}]: dtype {a.dtype} != {b.dtype}"
        if not torch.equal(a, b):
            diff = (a.double() - b.double()).abs().nan_to_num(nan=math.inf).max().item()
            raise AssertionError(f"{what}[{i}]: not exactly equal (max abs diff {diff:.3g})")


def check_hard_parity(case: SoftOpCase, seeds: Sequence[int] = (0, 1)) -> None:
    """``mode="hard"`` (or the utility itself) equals ``case.hard`` exactly, in float64 and float32."""
    if case.hard is None:
        return
    make = case.hard_inputs or case.inputs
    for dtype in (torch.float64, torch.float32):
        for seed in seeds:
            args, kwargs = make(_gen(seed), dtype)
            want = case.hard(*args, **{**case.kwargs, **kwargs})
            for method in case.methods:
                got = call(case, case.fn, args, kwargs, mode="hard", method=method)
                _assert_same(got, want, f"{case.name} hard method={method} {dtype} seed={seed}")


def _with_grad(args: Sequence[Any]) -> tuple[list[Any], list[torch.Tensor]]:
    out, diff = [], []
    for a in args:
        if isinstance(a, torch.Tensor) and a.is_floating_point():
            a = a.detach().clone().requires_grad_(True)
            diff.append(a)
        out.append(a)
    return out, diff


def _grads(out: Any, diff: Sequence[torch.Tensor], seed: int) -> list[torch.Tensor]:
    g = _gen(seed)
    total = None
    for leaf in _float_leaves(out):
        if not leaf.requires_grad:
            continue
        w = torch.randn(leaf.shape, generator=g, dtype=leaf.dtype)
        term = (leaf * w).sum()
        total = term if total is None else total + term
    if total is None:
        return [torch.zeros_like(d) for d in diff]
    gs = torch.autograd.grad(total, list(diff), allow_unused=True)
    return [torch.zeros_like(d) if gi is None else gi for d, gi in zip(diff, gs, strict=True)]


def check_st_forward(case: SoftOpCase, seeds: Sequence[int] = (0, 1)) -> None:
    """``*_st`` forward == hard output exactly; its gradient == the soft function's gradient."""
    if case.st_fn is None:
        return
    for seed in seeds:
        for dtype in (torch.float64, torch.float32):
            args, kwargs = case.inputs(_gen(seed), dtype)
            for method, mode in case.grid():
                gargs, diff = _with_grad(args)
                hard = call(case, case.fn, args, kwargs, mode="hard", method=method)
                out = call(case, case.st_fn, gargs, kwargs, mode=mode, method=method)
                what = f"{case.name}_st method={method} mode={mode} {dtype} seed={seed}"
                _assert_same(out, hard, what)
                if dtype != torch.float64 or not diff:
                    continue
                g_st = _grads(out, diff, seed + 100)
                sargs, sdiff = _with_grad(args)
                soft = call(case, case.fn, sargs, kwargs, mode=mode, method=method)
                g_soft = _grads(soft, sdiff, seed + 100)
                for a, b in zip(g_st, g_soft, strict=True):
                    torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12, msg=f"{what}: gradient")


def check_soft_index(case: SoftOpCase, seeds: Sequence[int] = (0, 1)) -> None:
    """Every SoftIndex is >= 0 and its rows sum to 1 (1e-12 float64 / 1e-5 float32); hard ones are one-hot."""
    if case.softindex is None:
        return
    for seed in seeds:
        for dtype in (torch.float64, torch.float32):
            args, kwargs = case.inputs(_gen(seed), dtype)
            grid = list(case.grid()) + ([(m, "hard") for m in case.methods] if case.has_mode else [])
            for method, mode in grid:
                out = call(case, case.fn, args, kwargs, mode=mode, method=method)
                tol64 = _lookup(case.index_tol, method, mode) or 1e-12
                tol = tol64 if dtype == torch.float64 else max(1e-5, tol64)
                what = f"{case.name} method={method} mode={mode} {dtype} seed={seed}"
                for p in case.softindex(out):
                    assert p.dtype == dtype, f"{what}: index dtype {p.dtype}"
                    assert bool(torch.isfinite(p).all()), f"{what}: non-finite index"
                    assert bool((p >= 0).all()), f"{what}: negative index entry {p.min().item():.3g}"
                    err = (p.sum(-1) - 1).abs().max().item()
                    assert err <= tol, f"{what}: rows sum to 1 only within {err:.3g} > {tol:.1g}"
                    if mode == "hard":
                        assert bool(((p == 0) | (p == 1)).all()), f"{what}: hard index is not one-hot"


def check_softbool_range(case: SoftOpCase, seeds: Sequence[int] = (0, 1)) -> None:
    """SoftBool outputs lie in [0, 1] up to ``case.softbool_slack``, every mode and method."""
    if case.softbool is None:
        return
    slack = case.softbool_slack
    for seed in seeds:
        for dtype in (torch.float64, torch.float32):
            args, kwargs = case.inputs(_gen(seed), dtype)
            grid = list(case.grid()) + ([(m, "hard") for m in case.methods] if case.has_mode else [])
            for method, mode in grid:
                out = call(case, case.fn, args, kwargs, mode=mode, method=method)
                for t in case.softbool(out):
                    lo, hi = t.min().item(), t.max().item()
                    assert lo >= -slack and hi <= 1 + slack, (
                        f"{case.name} method={method} mode={mode} {dtype}: range [{lo}, {hi}] not in [0, 1]"
                    )


def _dist(a: Any, b: Any) -> float:
    worst = 0.0
    for x, y in zip(leaves(a), leaves(b), strict=True):
        if x is None or y is None:
            continue
        worst = max(worst, (x.double() - y.double()).abs().max().item())
    return worst


def check_limit(case: SoftOpCase, seeds: Sequence[int] = (0, 1)) -> None:
    """Softness -> 0 approaches hard: error at the small softness < error at the large one.

    Piecewise modes can be exact already at the large softness; then the small one only has to be exact to
    solver/rounding noise (1e-8 relative to the output's magnitude).
    """
    if not (case.limit and case.has_mode):
        return
    big, small = case.limit_pair
    for seed in seeds:
        args, kwargs = case.inputs(_gen(seed), torch.float64)
        for method, mode in case.grid():
            hard = call(case, case.fn, args, kwargs, mode="hard", method=method)
            e_big = _dist(call(case, case.fn, args, kwargs, mode=mode, method=method, softness=big), hard)
            e_small = _dist(call(case, case.fn, args, kwargs, mode=mode, method=method, softness=small), hard)
            what = f"{case.name} method={method} mode={mode} seed={seed}"
            assert math.isfinite(e_small), f"{what}: non-finite output at softness {small}"
            mags = [t.abs().max().item() for t in _float_leaves(hard) if t.numel()]
            scale = max([1.0, *mags])
            assert e_small < e_big or e_small <= 1e-8 * scale, (
                f"{what}: error {e_small:.3g} at softness {small} not below {e_big:.3g} at {big}"
            )


def check_gradcheck(case: SoftOpCase, seed: int = 0) -> None:
    """float64 ``torch.autograd.gradcheck`` (eps 1e-6, atol 1e-5) over the mode x method grid."""
    if not case.has_mode:
        grid: list[tuple[str | None, str | None]] = [(m, None) for m in case.methods]
    else:
        grid = list(case.grid())
    make = case.gradcheck_inputs or case.inputs
    args, kwargs = make(_gen(seed), torch.float64)
    pos = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.is_floating_point()]
    if not pos:
        return
    for method, mode in grid:

        def f(*diff: torch.Tensor, method: str | None = method, mode: str | None = mode) -> tuple[Any, ...]:
            full = list(args)
            for i, d in zip(pos, diff, strict=True):
                full[i] = d
            out = call(case, case.fn, full, kwargs, mode=mode, method=method)
            return tuple(t for t in _float_leaves(out))

        inp = tuple(args[i].detach().clone().requires_grad_(True) for i in pos)
        ok = torch.autograd.gradcheck(f, inp, eps=1e-6, atol=1e-5, rtol=1e-4, raise_exception=False)
        assert ok, f"{case.name} method={method} mode={mode}: gradcheck failed"


def check_identities(case: SoftOpCase, seeds: Sequence[int] = (0, 1, 2)) -> None:
    """Run the case's invariance / identity checks on a few seeds."""
    for check in case.identities:
        for seed in seeds:
            check(_gen(seed))


def check_golden(case: SoftOpCase) -> None:
    """The case's golden values, to each value's ``atol``."""
    for gv in case.golden:
        out = case.fn(*gv.args, **gv.kwargs)
        got = gv.select(out) if gv.select is not None else out
        want = torch.as_tensor(gv.expected, dtype=got.dtype)
        assert torch.allclose(got, want, atol=gv.atol, rtol=0), (
            f"{case.name} golden {gv.kwargs}: got {got.tolist()}, expected {want.tolist()}"
        )


def check_bad_input(case: SoftOpCase) -> None:
    """Each bad call raises its exception type with a message starting with the argument's name."""
    for bad in case.bad_inputs:
        try:
            case.fn(*bad.args, **bad.kwargs)
        except bad.exc as err:
            msg = str(err)
            assert msg.startswith(bad.name), f"{case.name}: message {msg!r} does not start with {bad.name!r}"
        else:
            raise AssertionError(f"{case.name}: {bad.kwargs} did not raise {bad.exc.__name__}")


def check_reference_parity(case: SoftOpCase, seeds: Sequence[int] = (0, 1)) -> None:
    """Agreement with ``softtorch`` 0.1.1 (float64, allclose) in every mode and method not skipped.

    The caller must make sure ``softtorch`` is importable (the conformance test skips otherwise).
    """
    if case.reference is None:
        return
    import softtorch

    ref = getattr(softtorch, case.reference)
    ref_st = getattr(softtorch, case.reference_st) if case.reference_st else None
    grid: list[tuple[str | None, str | None]]
    if case.has_mode:
        grid = [(m, "hard") for m in case.methods] + list(case.grid())
    else:
        grid = [(m, None) for m in case.methods]
    for seed in seeds:
        args, kwargs = case.inputs(_gen(seed), torch.float64)
        for method, mode in grid:
            if _lookup(case.reference_skip, method, mode or "") is not None:
                continue
            what = f"{case.name} vs softtorch.{case.reference} method={method} mode={mode} seed={seed}"
            extra = dict(case.reference_kwargs)
            got = call(case, case.fn, args, kwargs, mode=mode, method=method, extra=extra)
            want = call(case, ref, args, kwargs, mode=mode, method=method, extra=extra)
            _assert_close_tree(got, want, case.reference_atol, what)
            if ref_st is None or case.st_fn is None or mode in (None, "hard"):
                continue
            gargs, diff = _with_grad(args)
            rargs, rdiff = _with_grad(args)
            got = call(case, case.st_fn, gargs, kwargs, mode=mode, method=method, extra=extra)
            want = call(case, ref_st, rargs, kwargs, mode=mode, method=method, extra=extra)
            _assert_close_tree(got, want, 1e-6, what + " (st forward)", relative=True)
            if diff:
                for a, b in zip(_grads(got, diff, seed), _grads(want, rdiff, seed), strict=True):
                    torch.testing.assert_close(
                        a, b, rtol=0, atol=case.reference_atol, msg=f"{what}: st gradient"
                    )


def _assert_close_tree(got: Any, want: Any, atol: float, what: str, relative: bool = False) -> None:
    g, w = leaves(got), leaves(want)
    assert len(g) == len(w), f"{what}: {len(g)} leaves vs {len(w)}"
    for i, (a, b) in enumerate(zip(g, w, strict=True)):
        if a is None or b is None:
            assert a is None and b is None, f"{what}[{i}]: None mismatch"
            continue
        a, b = a.detach().double(), b.detach().double()
        assert a.shape == b.shape, f"{what}[{i}]: shape {tuple(a.shape)} vs {tuple(b.shape)}"
        tol = atol * torch.clamp(b.abs(), min=1.0) if relative else torch.full_like(b, atol)
        err = (a - b).abs()
        assert bool((err <= tol).all()), f"{what}[{i}]: max abs diff {err.max().item():.3g} > {atol:g}"


CHECKS: Mapping[str, Callable[[SoftOpCase], Any]] = {
    "hard_parity": check_hard_parity,
    "st_forward": check_st_forward,
    "soft_index": check_soft_index,
    "softbool_range": check_softbool_range,
    "limit": check_limit,
    "gradcheck": check_gradcheck,
    "identities": check_identities,
    "golden": check_golden,
    "bad_input": check_bad_input,
    "reference_parity": check_reference_parity,
}


def _axiswise_present() -> bool:
    return importlib.util.find_spec("optarium.testing._soft_axiswise_cases") is not None


def soft_op_cases() -> list[SoftOpCase]:
    """Every soft operator's case: the elementwise / logic / selection ones and the axis-wise ones."""
    cases = elementwise_cases()
    if not _axiswise_present():
        return cases  # the axis-wise cases land separately; tolerated only until they do
    from optarium.testing._soft_axiswise_cases import axiswise_cases

    return cases + list(axiswise_cases())


# ---------------------------------------------------------------------------------------------------------
# Cases of the elementwise, comparison, logic and selection operators (and their *_st variants).


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
        SoftOpCase(
            name="where",
            fn=S.where,
            inputs=_sel_inputs("where", False),
            hard_inputs=_sel_inputs("where", True),
            hard=lambda c, x, y: torch.where(c.bool(), x, y),
            has_mode=False,
            limit=False,
            reference="where",
        ),
        SoftOpCase(
            name="take_along_dim",
            fn=S.take_along_dim,
            inputs=_sel_inputs("take_along_dim", False),
            hard_inputs=_sel_inputs("take_along_dim", True),
            hard=_hard_take_along_dim,
            has_mode=False,
            limit=False,
            bad_inputs=(
                BadInput((x1, torch.ones(4) / 4), {"dim": 0}, "soft_index"),
                BadInput((x1.reshape(2, 2), torch.ones(2, 3, 3) / 3), {"dim": 1}, "soft_index"),
                BadInput((x1.reshape(2, 2), torch.ones(2, 3, 2) / 2), {"dim": 2}, "dim"),
                BadInput((x1.reshape(2, 2), torch.ones(3, 1, 2) / 2), {"dim": 1}, "soft_index"),
            ),
            reference="take_along_dim",
        ),
        SoftOpCase(
            name="take_along_dim[flat]",
            fn=S.take_along_dim,
            inputs=_sel_inputs("take_along_dim_flat", False),
            hard_inputs=_sel_inputs("take_along_dim_flat", True),
            hard=_hard_take_along_dim,
            has_mode=False,
            limit=False,
            reference="take_along_dim",
        ),
        SoftOpCase(
            name="take",
            fn=S.take,
            inputs=_sel_inputs("take", False),
            hard_inputs=_sel_inputs("take", True),
            hard=_hard_take,
            has_mode=False,
            limit=False,
            bad_inputs=(
                BadInput((x1, torch.ones(4) / 4), {}, "soft_index"),
                BadInput((x1, torch.ones(2, 3) / 3), {"dim": 0}, "soft_index"),
            ),
            reference="take",
        ),
        SoftOpCase(
            name="index_select",
            fn=S.index_select,
            inputs=_sel_inputs("index_select", False),
            hard_inputs=_sel_inputs("index_select", True),
            hard=_hard_index_select,
            has_mode=False,
            limit=False,
            bad_inputs=(
                BadInput((x1, torch.ones(3) / 3, 0), {}, "soft_index"),
                BadInput((x1, torch.ones(4) / 4, 1), {}, "dim"),
            ),
            reference="index_select",
        ),
        SoftOpCase(
            name="narrow",
            fn=S.narrow,
            inputs=_sel_inputs("narrow", False),
            hard_inputs=_sel_inputs("narrow", True),
            hard=_hard_narrow,
            has_mode=False,
            limit=False,
            bad_inputs=(
                BadInput((x1, torch.ones(4) / 4, 0), {}, "length"),
                BadInput((x1, torch.ones(4) / 4, 5), {}, "length"),
                BadInput((x1, torch.ones(3) / 3, 2), {}, "soft_start"),
            ),
            reference="narrow",
        ),
    ]
    return cases
