r"""The solver loop: record metrics, apply the stopping rules, time the run and return a :class:`Result`.

Every iterative solver (bilevel, DRO, OT, stochastic, sparse, combinatorial, distributed) writes only its
iteration; :class:`SolverLoop` does the rest, the same way for all of them:

.. code-block:: python

    def gradient_descent(grad, f, x0, lr, *, max_iter=100, tol=1e-8, record_every=1, time_limit_s=None):
        x = x0.clone()
        loop = SolverLoop(max_iter, tol=tol, criterion="grad_norm", record_every=record_every,
                          time_limit_s=time_limit_s)

        def evaluate(k):  # reads the current x when called
            return {"objective": f(x), "grad_norm": grad(x).norm()}

        for _ in loop.iterate(evaluate):
            x = x - lr * grad(x)
        return loop.result(x, value=lambda: f(x))

The rules, applied in this order:

- **Recording.** ``evaluate(k)`` (a callable returning a mapping of metric name -> number or 0-d tensor)
  is called at iteration 0 (the starting point), every ``record_every`` iterations, and at the last
  iteration whatever its number, so the history always ends at ``n_iter``. It runs with the stopwatch
  paused (evaluation is not solver time). It reads the current iterate through its closure; values the
  iteration already computed (a duality gap, a marginal error) can be shared the same way.
- **Stopping**, decided on each recorded row: ``diverged`` if a watched metric (``watch``; default every
  metric) is NaN or infinite, or if the ``objective`` metric exceeds ``blowup`` times its first recorded
  magnitude, floored at ``blowup_floor`` (:math:`|f_k| > \text{blowup}\cdot\max(|f_0|, \text{floor})`, so an
  objective that starts at 0 is not "exploding" at its first move); else ``converged`` if the
  ``criterion`` metric is at most ``tol``. Between records nothing is decided, so ``record_every`` trades
  overhead for reaction time.
- **Budgets**, checked after every iteration: ``timeout`` once the solver's own seconds (the stopwatch,
  evaluation excluded) reach ``time_limit_s``; ``max_iter`` after iteration ``max_iter``. A stop decided on
  the final row (converged, diverged) takes precedence over a budget. ``loop.stop(status)`` ends the loop
  after the current iteration with a status of the solver's own choosing (an exact solution found, ...).
- **The result.** :meth:`SolverLoop.result` stops the stopwatch and builds the :class:`Result`; a
  non-finite final value is reported as ``value = inf`` with status ``diverged``.

SPMD solvers (every rank runs the same loop, see :mod:`optarium.distributed`) must take the same decision on
every rank: metrics reduced over ranks give the same rows everywhere, and ``agree`` (for example an
all-reduce of the flag with ``max``) makes the local time-budget flag common; it is called only when
``time_limit_s`` is set.

What each status promises is checked for every solver by :mod:`optarium.testing.solvers`. A solver joins
that suite by declaring :class:`SolverCase` objects beside its code: a module-level function
``solver_cases() -> list[SolverCase]`` in its module (the suite finds it in every module of the families in
the registry).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from optarium._core.result import Result, Trace
from optarium._core.status import SOLVER_STATUSES
from optarium._core.timing import Stopwatch
from optarium._core.validation import check_choice, check_int, check_nonnegative, check_positive

__all__ = ["Evaluate", "SolverCase", "SolverLoop"]

#: ``evaluate(k) -> {metric: value}``: the metrics of the current iterate, recorded at iteration ``k``.
Evaluate = Callable[[int], Mapping[str, Any]]


class SolverLoop:
    """Iteration counter, history recorder, stopping rules and stopwatch of one solver run.

    Args:
        max_iter: the iteration budget (``max_iter`` status after that many iterations; 0 runs none).
        tol: the tolerance of the ``criterion`` metric (``converged`` once it is ``<= tol``); ``None``
            disables convergence.
        criterion: the metric compared with ``tol``; it must be in every recorded row when ``tol`` is given.
        record_every: record every this many iterations (and always at iterations 0 and the last).
        time_limit_s: the time budget in solver seconds (evaluation excluded), or ``None``.
        objective: the metric watched for blow-up, or ``None``.
        blowup: ``diverged`` once ``|objective|`` exceeds ``blowup`` times its first recorded magnitude
            (``None`` disables the rule).
        blowup_floor: the smallest magnitude the blow-up bound is relative to.
        watch: the metrics that must stay finite (default: every recorded metric).
        agree: makes a local time-budget flag common to all ranks (SPMD solvers), e.g.
            ``lambda flag: bool(comm.all_reduce(torch.tensor([float(flag)]), "max")[0])``.

    The stopwatch starts when the loop is built. See the module docstring for the rules.
    """

    def __init__(
        self,
        max_iter: int,
        *,
        tol: float | None = None,
        criterion: str = "residual",
        record_every: int = 1,
        time_limit_s: float | None = None,
        objective: str | None = "objective",
        blowup: float | None = 1e12,
        blowup_floor: float = 1.0,
        watch: Sequence[str] | None = None,
        agree: Callable[[bool], bool] | None = None,
    ) -> None:
        self.max_iter = check_int("max_iter", max_iter, minimum=0)
        self.tol = None if tol is None else check_nonnegative("tol", tol)
        self.criterion = str(criterion)
        self.record_every = check_int("record_every", record_every, minimum=1)
        self.time_limit_s = None if time_limit_s is None else check_nonnegative("time_limit_s", time_limit_s)
        self.objective = objective
        self.blowup = None if blowup is None else check_positive("blowup", blowup)
        self.blowup_floor = check_positive("blowup_floor", blowup_floor)
        self.watch = None if watch is None else tuple(watch)
        self.agree = agree
        self.stopwatch = Stopwatch().start()
        self.rows: list[dict[str, float]] = []
        self.n_iter = 0
        self.status: str | None = None
        self._requested: str | None = None
        self._f0: float | None = None
        self._evaluate: Evaluate | None = None

    # -------------------------------------------------------------------------------------------- running

    def iterate(self, evaluate: Evaluate | None = None) -> Iterator[int]:
        """Yield the iteration numbers 1, 2, ... while no stopping rule fired; record with ``evaluate``.

        Iteration 0 (the starting point) is recorded before the first yield; the body of the ``for`` loop
        performs iteration ``k``. Leave the loop with :meth:`stop`, never with ``break`` (the result would
        have no status).
        """
        self._evaluate = evaluate
        self._record(0)
        if self.status is None and self.max_iter == 0:
            self.status = "max_iter"
        k = 0
        while self.status is None:
            k += 1
            yield k
            self.n_iter = k
            timed_out = self._timed_out()
            last = k == self.max_iter or timed_out or self._requested is not None
            if last or k % self.record_every == 0:
                self._record(k)
            if self.status is None:
                if self._requested is not None:
                    self.status = self._requested
                elif timed_out:
                    self.status = "timeout"
                elif k == self.max_iter:
                    self.status = "max_iter"

    def stop(self, status: str = "converged") -> None:
        """End the loop after the current iteration with ``status`` (the final row is still recorded)."""
        self._requested = check_choice("status", status, SOLVER_STATUSES)

    def evaluating(self) -> AbstractContextManager[None]:
        """Context in which time is not counted as solver time (evaluation outside ``evaluate``)."""
        return self.stopwatch.paused()

    @property
    def elapsed(self) -> float:
        """Solver seconds so far (evaluation excluded)."""
        return self.stopwatch.elapsed

    @property
    def history(self) -> Trace:
        """The rows recorded so far as a :class:`Trace`."""
        return Trace.from_rows(self.rows)

    @property
    def last(self) -> Mapping[str, float]:
        """The last recorded row (``{"step": k, metric: value}``); empty before the first record."""
        return self.rows[-1] if self.rows else {}

    def result(
        self, x: Any, value: float | Callable[[], float], *, extras: Mapping[str, Any] | None = None
    ) -> Result:
        """Stop the stopwatch and return the :class:`Result` of the run.

        ``value`` is the objective at ``x`` or a callable computing it (run with the stopwatch paused). A
        non-finite value makes the status ``diverged`` and is reported as ``inf``.
        """
        if self.status is None:
            raise RuntimeError("the loop has not finished (leave it with stop(), not break)")
        if callable(value):
            with self.evaluating():
                value = value()
        value = float(value)
        status = self.status
        if not math.isfinite(value):
            status, value = "diverged", math.inf
        seconds = self.stopwatch.stop()
        return Result(
            x=x,
            value=value,
            status=status,
            n_iter=self.n_iter,
            history=self.history,
            wall_time_s=seconds,
            extras=dict(extras or {}),
        )

    # -------------------------------------------------------------------------------------------- rules

    def _timed_out(self) -> bool:
        if self.time_limit_s is None:
            return False
        flag = self.stopwatch.elapsed >= self.time_limit_s
        if self.agree is not None:
            with self.evaluating():
                flag = bool(self.agree(flag))
        return flag

    def _record(self, k: int) -> None:
        row: dict[str, float] = {"step": k}
        if self._evaluate is not None:
            with self.evaluating():
                metrics = self._evaluate(k)
            for name, v in metrics.items():
                row[str(name)] = float(v)
        self.rows.append(row)
        decided = self._decide(row)
        if decided is not None:
            self.status = decided

    def _decide(self, row: Mapping[str, float]) -> str | None:
        names = [n for n in row if n != "step"] if self.watch is None else self.watch
        if any(n in row and not math.isfinite(row[n]) for n in names):
            return "diverged"
        if self.objective is not None and self.objective in row:
            f = row[self.objective]
            if self._f0 is None:
                self._f0 = f
            if self.blowup is not None and abs(f) > self.blowup * max(abs(self._f0), self.blowup_floor):
                return "diverged"
        if self.tol is not None:
            if self.criterion not in row:
                recorded = sorted(n for n in row if n != "step")
                raise KeyError(f"criterion: metric {self.criterion!r} is not recorded (metrics: {recorded})")
            if row[self.criterion] <= self.tol:
                return "converged"
        return None


@dataclass(frozen=True)
class SolverCase:
    """One solver on one small problem, declared beside the solver for :mod:`optarium.testing.solvers`.

    Attributes:
        name: an id for the test report.
        solve: ``solve(*, dtype, device, seed, **overrides) -> Result``: builds the small problem in
            ``dtype`` on ``device`` and runs the solver with its base arguments updated by ``overrides``.
        statuses: for each status of :data:`~optarium._core.status.SOLVER_STATUSES`, the overrides that end
            the run with it (a status left out needs an ``exempt`` reason). The ``timeout`` overrides give
            the budget as ``time_limit_s``.
        max_iter: the ``n_iter`` the run of ``statuses["max_iter"]`` must report.
        tolerance_holds: whether the tolerance stated in ``statuses["converged"]`` holds at a result's ``x``,
            computed independently of the solver's own bookkeeping.
        optimality: a residual of the optimality conditions (or the distance to a known optimum) at a
            result's ``x``; checked on the ``converged`` run.
        optimality_tol: the largest residual accepted.
        invalid: ``(overrides, argument name)`` pairs that must raise ``ValueError``/``TypeError`` whose
            message starts with the argument's name.
        determinism: overrides for the determinism check (turn the solver's randomness on).
        stochastic: whether two seeds must give different iterates under ``determinism``.
        dtypes: the floating dtypes the solver must follow.
        timing_metrics: history metrics that are clock readings (left out of the determinism check).
        exempt: check name -> why this solver is exempt (which of its own tests covers the property).
    """

    name: str
    solve: Callable[..., Result]
    statuses: Mapping[str, Mapping[str, Any]]
    max_iter: int
    tolerance_holds: Callable[[Result], bool]
    optimality: Callable[[Result], float]
    optimality_tol: float
    invalid: Sequence[tuple[Mapping[str, Any], str]] = ()
    determinism: Mapping[str, Any] = field(default_factory=dict)
    stochastic: bool = False
    dtypes: tuple[Any, ...] = ("float32", "float64")
    timing_metrics: tuple[str, ...] = ()
    exempt: Mapping[str, str] = field(default_factory=dict)

    def run(self, *, dtype: Any = None, device: Any = "cpu", seed: int = 0, **overrides: Any) -> Result:
        """``solve`` with ``dtype`` (default float64; names such as ``"float32"`` accepted)."""
        import torch

        dt = torch.float64 if dtype is None else (getattr(torch, dtype) if isinstance(dtype, str) else dtype)
        return self.solve(dtype=dt, device=device, seed=seed, **overrides)
