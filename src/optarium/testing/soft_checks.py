"""The checks of the soft-operator conformance suite and the case type they run on (:class:`SoftOpCase`).

A case declares an operator, its input generators, its hard reference and what to check; the case tables
are :mod:`optarium.testing._soft_elementwise_cases` and :mod:`optarium.testing._soft_axiswise_cases`,
collected by :func:`optarium.testing.soft.soft_op_cases`. The checks are public so a user can run them on a
soft operator of their own.

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
* ``nan_input`` (the NaN policy of :mod:`optarium.soft`): a NaN in any floating tensor argument raises
  ``ValueError`` whose message starts with that argument's name and says ``contains NaN``, in every mode
  (``"hard"`` included), every method and the ``*_st`` variant; under ``nan_policy("propagate")`` the
  NaN check is off;
* ``reference_parity``: agreement with the ``softtorch`` 0.1.1 wheel (when installed) in every mode and
  method (float64, allclose), minus the documented deliberate differences (``reference_skip``); ``*_st``
  forwards are compared with the wheel's ``*_st`` by allclose only (the wheel's ST forward is off by an ulp).
"""

from __future__ import annotations

import inspect
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
    "Inputs",
    "SoftOpCase",
    "call",
    "check_bad_input",
    "check_golden",
    "check_gradcheck",
    "check_hard_parity",
    "check_identities",
    "check_limit",
    "check_nan_input",
    "check_reference_parity",
    "check_soft_index",
    "check_softbool_range",
    "check_st_forward",
    "leaves",
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


def _positional_names(fn: Callable[..., Any], n: int) -> list[str]:
    params = [
        p.name
        for p in inspect.signature(fn).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    return params[:n]


def check_nan_input(case: SoftOpCase) -> None:
    """A NaN in each floating tensor argument raises ``ValueError("<arg>: contains NaN ...")`` everywhere.

    Every mode (``"hard"`` included), every method and the ``*_st`` variant; ``nan_policy("propagate")``
    turns the check off (the call then returns whatever the arithmetic gives).
    """
    from optarium.soft import nan_policy

    args, kwargs = case.inputs(_gen(0), torch.float64)
    names = _positional_names(case.fn, len(args))
    grid: list[tuple[str | None, str | None]]
    if case.has_mode:
        grid = [(m, "hard") for m in case.methods] + list(case.grid())
    else:
        grid = [(m, None) for m in case.methods]
    fns = [case.fn] + ([case.st_fn] if case.st_fn is not None else [])
    for i, a in enumerate(args):
        if not (isinstance(a, torch.Tensor) and a.is_floating_point() and a.numel() > 0):
            continue
        bad = a.detach().clone()
        bad.view(-1)[bad.numel() // 2] = math.nan
        full = list(args)
        full[i] = bad
        for fn in fns:
            for method, mode in grid:
                fname = getattr(fn, "__name__", repr(fn))
                what = f"{case.name} ({fname}) NaN in {names[i]} method={method} mode={mode}"
                try:
                    call(case, fn, full, kwargs, mode=mode, method=method)
                except ValueError as err:
                    msg = str(err)
                    assert msg.startswith(f"{names[i]}: contains NaN"), f"{what}: message {msg!r}"
                except Exception as err:
                    raise AssertionError(f"{what}: raised {type(err).__name__}: {err}") from err
                else:
                    raise AssertionError(f"{what}: returned without raising ValueError")
        with nan_policy("propagate"):
            try:
                call(
                    case,
                    case.fn,
                    full,
                    kwargs,
                    mode="hard" if case.has_mode else None,
                    method=case.methods[0],
                )
            except ValueError as err:  # an argument's own range check (e.g. q in [0, 1]) may still refuse NaN
                assert "contains NaN" not in str(err), (
                    f"{case.name}: nan_policy('propagate') still raised {err}"
                )


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
    "nan_input": check_nan_input,
    "reference_parity": check_reference_parity,
}
