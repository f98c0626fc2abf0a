"""Frozen result types shared by every solver: :class:`Trace` (per-iteration metrics) and :class:`Result`.

Both are frozen and read-only (``metrics`` and ``extras`` are read-only mappings), and both pickle: a result
can be returned from a spawned process, a ``multiprocessing`` queue or pool, or a
:func:`optarium.distributed.launch` rank. Equality compares contents (tensors by value, dtype and device;
NaN equal to NaN), so a pickle round trip gives an equal object. A solver builds its ``Result`` with
:class:`optarium._core.solver.SolverLoop` rather than by hand; ``Result.status`` is one of
:data:`optarium._core.status.SOLVER_STATUSES`.

>>> import pickle
>>> r = Result(x=1.0, value=0.5, status="converged", n_iter=3, extras={"duals": (1, 2)})
>>> pickle.loads(pickle.dumps(r)) == r
True
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import torch

from optarium._core.status import SOLVER_STATUSES
from optarium._core.validation import check_choice, check_int, check_nonnegative

__all__ = ["Result", "Trace", "same"]


def same(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` hold the same content: the equality of :class:`Result` and :class:`Trace`.

    Tensors are equal when dtype, device, shape and values agree (NaN equal to NaN); mappings when their keys
    and values are; lists and tuples elementwise; floats with NaN equal to NaN; ``torch.Generator`` objects
    by their state; objects of one class without an ``__eq__`` of their own by their attributes; anything
    else by ``==``.
    """
    return _same(a, b, set())


def _same(a: Any, b: Any, seen: set[tuple[int, int]]) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return False
        if a.dtype != b.dtype or a.device != b.device or a.shape != b.shape:
            return False
        if a.is_floating_point() or a.is_complex():
            na, nb = a.isnan(), b.isnan()
            return bool(torch.equal(na, nb)) and bool(torch.equal(a[~na], b[~nb]))
        return bool(torch.equal(a, b))
    if a is b:
        return True
    key = (id(a), id(b))
    if key in seen:  # a cycle: equal so far
        return True
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        seen.add(key)
        return set(a) == set(b) and all(_same(a[k], b[k], seen) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        seen.add(key)
        return (
            type(a) is type(b)
            and len(a) == len(b)
            and all(_same(x, y, seen) for x, y in zip(a, b, strict=True))
        )
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, torch.Generator) and isinstance(b, torch.Generator):
        return a.device == b.device and bool(torch.equal(a.get_state(), b.get_state()))
    if type(a) is type(b) and type(a).__eq__ is object.__eq__ and hasattr(a, "__dict__"):
        seen.add(key)
        return _same(vars(a), vars(b), seen)
    try:
        return bool(a == b)
    except Exception:  # objects whose == is not a truth value
        return False


@dataclass(frozen=True, eq=False)
class Trace:
    """Per-iteration metrics of a run: ``steps[i]`` is the iteration at which ``metrics[name][i]`` was taken.

    Every metric has one value per recorded step. Build incrementally with :meth:`from_rows`. Frozen, with a
    read-only ``metrics`` mapping; picklable; equal when steps and metrics are (NaN equal to NaN).
    """

    steps: tuple[int, ...] = ()
    metrics: Mapping[str, tuple[float, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        steps = tuple(int(s) for s in self.steps)
        metrics = {str(k): tuple(float(v) for v in vals) for k, vals in self.metrics.items()}
        for name, vals in metrics.items():
            if len(vals) != len(steps):
                raise ValueError(f"metrics: {name!r} has {len(vals)} values for {len(steps)} steps")
        object.__setattr__(self, "steps", steps)
        object.__setattr__(self, "metrics", MappingProxyType(metrics))

    def __reduce__(self) -> tuple[Any, ...]:
        return (Trace, (self.steps, dict(self.metrics)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Trace):
            return NotImplemented
        return self.steps == other.steps and same(dict(self.metrics), dict(other.metrics))

    __hash__ = None  # type: ignore[assignment]

    @classmethod
    def from_rows(cls, rows: Sequence[Mapping[str, Any]], step_key: str = "step") -> Trace:
        """A trace from dict rows that each carry ``step_key`` and the same metric names."""
        if not rows:
            return cls()
        names = [k for k in rows[0] if k != step_key]
        for i, row in enumerate(rows):
            if set(row) != set(rows[0]):
                raise ValueError(f"rows: row {i} has keys {sorted(row)}, expected {sorted(rows[0])}")
        return cls(
            steps=tuple(int(r[step_key]) for r in rows),
            metrics={n: tuple(float(r[n]) for r in rows) for n in names},
        )

    def __len__(self) -> int:
        return len(self.steps)

    def last(self, name: str) -> float:
        """The last recorded value of metric ``name``; ``KeyError`` if no such metric was recorded."""
        if name not in self.metrics:
            raise KeyError(f"unknown metric {name!r}; recorded: {sorted(self.metrics)}")
        vals = self.metrics[name]
        return vals[-1] if vals else math.nan

    def as_rows(self) -> list[dict[str, float]]:
        """The trace as a list of ``{"step": ..., metric: value}`` dicts."""
        return [{"step": s, **{n: v[i] for n, v in self.metrics.items()}} for i, s in enumerate(self.steps)]


@dataclass(frozen=True, eq=False)
class Result:
    """What a solver returns.

    Attributes:
        x: the solution (a tensor or a structure of tensors).
        value: the objective at ``x``.
        status: one of :data:`~optarium._core.status.SOLVER_STATUSES`: ``"converged"`` (the stated tolerance
            holds at ``x``), ``"max_iter"`` (``n_iter`` equals the iteration budget), ``"diverged"``
            (non-finite or exploding iterate) or ``"timeout"`` (the time budget ran out).
        n_iter: iterations performed.
        history: per-iteration metrics.
        wall_time_s: seconds spent in the solver (evaluation for the history excluded).
        extras: method-specific outputs (a transport plan, duals, ...), read-only.

    Frozen and picklable; equal when every field holds the same content (see :func:`same`).
    """

    x: Any
    value: float
    status: str
    n_iter: int
    history: Trace = field(default_factory=Trace)
    wall_time_s: float = 0.0
    extras: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_choice("status", self.status, SOLVER_STATUSES)
        check_int("n_iter", self.n_iter, minimum=0)
        check_nonnegative("wall_time_s", self.wall_time_s)
        if not isinstance(self.history, Trace):
            raise TypeError(f"history: must be a Trace, got {type(self.history).__name__}")
        object.__setattr__(self, "value", float(self.value))
        object.__setattr__(self, "n_iter", int(self.n_iter))
        object.__setattr__(self, "wall_time_s", float(self.wall_time_s))
        object.__setattr__(self, "extras", MappingProxyType(dict(self.extras)))

    def __reduce__(self) -> tuple[Any, ...]:
        fields = (self.x, self.value, self.status, self.n_iter, self.history, self.wall_time_s)
        return (Result, (*fields, dict(self.extras)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Result):
            return NotImplemented
        return (
            self.status == other.status
            and self.n_iter == other.n_iter
            and same(self.value, other.value)
            and same(self.wall_time_s, other.wall_time_s)
            and self.history == other.history
            and same(self.x, other.x)
            and same(dict(self.extras), dict(other.extras))
        )

    __hash__ = None  # type: ignore[assignment]

    @property
    def converged(self) -> bool:
        """Whether the solver met its stopping criterion."""
        return self.status == "converged"
