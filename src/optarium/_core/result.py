"""Frozen result types shared by every solver: :class:`Trace` (per-iteration metrics) and :class:`Result`."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from optarium._core.validation import check_choice, check_int, check_nonnegative

__all__ = ["STATUSES", "Result", "Trace"]

#: Terminal statuses of a solver run.
STATUSES: tuple[str, ...] = ("converged", "max_iter", "diverged")


@dataclass(frozen=True)
class Trace:
    """Per-iteration metrics of a run: ``steps[i]`` is the iteration at which ``metrics[name][i]`` was taken.

    Every metric has one value per recorded step. Build incrementally with :meth:`from_rows`.
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


@dataclass(frozen=True)
class Result:
    """What a solver returns.

    Attributes:
        x: the solution (a tensor or a structure of tensors).
        value: the objective at ``x``.
        status: ``"converged"``, ``"max_iter"`` or ``"diverged"``.
        n_iter: iterations performed.
        history: per-iteration metrics.
        wall_time_s: seconds spent in the solver.
        extras: method-specific outputs (a transport plan, duals, ...), read-only.
    """

    x: Any
    value: float
    status: str
    n_iter: int
    history: Trace = field(default_factory=Trace)
    wall_time_s: float = 0.0
    extras: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_choice("status", self.status, STATUSES)
        check_int("n_iter", self.n_iter, minimum=0)
        check_nonnegative("wall_time_s", self.wall_time_s)
        object.__setattr__(self, "value", float(self.value))
        object.__setattr__(self, "extras", MappingProxyType(dict(self.extras)))

    @property
    def converged(self) -> bool:
        """Whether the solver met its stopping criterion."""
        return self.status == "converged"
