"""Run an experiment over methods x seeds at one scale, store everything, and decide the verdict.

Each (method, seed) pair is a *unit*. A unit ends with one status of
:data:`optarium._core.status.UNIT_STATUSES`:

- ``done``: ``run`` returned;
- ``diverged``: a logged metric was NaN or infinite (or ``run`` raised :class:`Diverged`);
- ``error``: ``run`` raised; the traceback is stored;
- ``timeout``: the unit ran past ``unit_timeout_s`` (checked at every ``ctx.log`` and ``ctx.check``): both
  its CPU time and its wall time exceeded the limit, or its wall time exceeded :data:`WALL_BACKSTOP` times
  the limit. A unit of fixed cost therefore does not time out because other work shares the machine (wall
  time grows, CPU time does not), a multi-threaded unit is not cut short by its CPU time running ahead of
  the clock, and a unit that hangs or waits on other processes is still stopped by the backstop.

A crashing unit never loses the other units' records. Units run in this process (``jobs=1``) or in a pool of
``jobs`` spawned processes with one torch thread each, or on a Ray cluster or Slurm
(:mod:`optarium.harness.executors`). Finished units are appended to the run directory as
they finish, so Ctrl-C keeps them and a re-run reuses them.

An experiment reports through its :class:`RunContext`: ``ctx.log(step, **metrics)`` for its own metrics,
and ``ctx.log_result(result, prefix="", **tags)`` for a solver's :class:`~optarium._core.result.Result` in
one line (its trace, then a final record with the solver's status and iteration count).
"""

from __future__ import annotations

import math
import multiprocessing
import sys
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from optarium._core.seeding import seed_everything
from optarium._core.status import UNIT_STATUSES
from optarium._core.timing import Stopwatch
from optarium._core.validation import check_choice, check_int
from optarium.harness.environment import code_fingerprint, collect_environment
from optarium.harness.executors import Executor, LocalExecutor, error_unit
from optarium.harness.experiment import SCALES, Verdict, get_experiment, registered_experiments
from optarium.harness.figures import FIGURE_DPI, figure_problems
from optarium.harness.storage import REUSABLE, RunDir, run_id, summarize

__all__ = [
    "DEFAULT_UNIT_TIMEOUT_S",
    "WALL_BACKSTOP",
    "Diverged",
    "RunContext",
    "RunInterrupted",
    "RunOutcome",
    "UnitTimeout",
    "execute_unit",
    "run_experiment",
    "run_suite",
]

#: Wall-time multiple of ``unit_timeout_s`` after which a unit times out whatever its CPU time.
WALL_BACKSTOP = 4.0
#: Seconds one unit may run, per scale, unless the experiment's config sets ``unit_timeout_s``.
DEFAULT_UNIT_TIMEOUT_S: Mapping[str, float] = {"smoke": 120.0, "quick": 180.0, "full": 1800.0}


class Diverged(RuntimeError):
    """Raised (by ``ctx.log`` or by an experiment) when a run diverged."""


class UnitTimeout(RuntimeError):
    """Raised by ``ctx.check`` when a unit ran past its time limit."""


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during a run; ``run_dir`` keeps the ``kept`` units that had finished."""

    def __init__(self, run_dir: Path, kept: int) -> None:
        super().__init__(f"interrupted; {kept} finished units kept in {run_dir}")
        self.run_dir = run_dir
        self.kept = kept


class RunContext:
    """What an experiment's ``run`` reports through.

    ``log(step, **metrics)`` records metrics with the training seconds so far (evaluation excluded when done
    inside ``with ctx.evaluating():``), raises :class:`Diverged` on a non-finite metric and checks the time
    limit.
    """

    def __init__(self, method: str, seed: int, scale: str, timeout_s: float) -> None:
        self.method = method
        self.seed = seed
        self.scale = scale
        self.records: list[dict[str, Any]] = []
        self.stopwatch = Stopwatch()
        self._wall0, self._cpu0 = time.monotonic(), time.process_time()
        self._timeout_s = float(timeout_s)

    def log(self, step: int, *, check_finite: bool = True, **metrics: Any) -> None:
        """Record ``metrics`` (numbers or 0-d tensors) at ``step``."""
        rec: dict[str, Any] = {"method": self.method, "seed": self.seed, "step": int(step)}
        rec["seconds"] = self.stopwatch.elapsed
        for k, v in metrics.items():
            rec[k] = float(v)
        self.records.append(rec)
        if check_finite:
            bad = [k for k, v in metrics.items() if not math.isfinite(float(v))]
            if bad:
                raise Diverged(f"{', '.join(bad)} not finite at step {int(step)}")
        self.check()

    def log_result(self, result: Any, prefix: str = "", **tags: Any) -> None:
        """Log a solver's :class:`~optarium._core.result.Result`: its trace, then one final record.

        Each recorded step of ``result.history`` becomes a record at that step with its metrics, named
        ``prefix + name``; then a record at step ``result.n_iter`` carries ``prefix + "value"``,
        ``"n_iter"``, ``"wall_time_s"``, ``"solver_status"`` (the solver's status string, one of
        :data:`~optarium._core.status.SOLVER_STATUSES`; not the unit's ``status``) and ``"final"`` (1).
        ``tags`` (numbers, e.g. ``kappa=10``) go into every record. Non-finite metrics are stored, not
        raised: the solver's status already says whether it diverged.
        """
        from optarium._core.result import Result

        if not isinstance(result, Result):
            raise TypeError(f"result: must be an optarium Result, got {type(result).__name__}")
        for row in result.history.as_rows():
            step = int(row.pop("step"))
            self.log(step, check_finite=False, **{f"{prefix}{k}": v for k, v in row.items()}, **tags)
        rec: dict[str, Any] = {"method": self.method, "seed": self.seed, "step": int(result.n_iter)}
        rec["seconds"] = self.stopwatch.elapsed
        rec.update({k: float(v) for k, v in tags.items()})
        rec[f"{prefix}value"] = float(result.value)
        rec[f"{prefix}n_iter"] = int(result.n_iter)
        rec[f"{prefix}wall_time_s"] = float(result.wall_time_s)
        rec[f"{prefix}solver_status"] = str(result.status)
        rec[f"{prefix}final"] = 1
        self.records.append(rec)
        self.check()

    def check(self) -> None:
        """Raise :class:`UnitTimeout` if the unit ran past its time limit: CPU and wall time both above
        ``unit_timeout_s``, or wall time above :data:`WALL_BACKSTOP` times it."""
        wall = time.monotonic() - self._wall0
        cpu = time.process_time() - self._cpu0
        limit = self._timeout_s
        if min(wall, cpu) > limit or wall > WALL_BACKSTOP * limit:
            raise UnitTimeout(
                f"unit ran past its limit of {limit:.0f} s (CPU {cpu:.0f} s, wall {wall:.0f} s; "
                f"wall backstop {WALL_BACKSTOP * limit:.0f} s)"
            )

    def evaluating(self) -> Any:
        """Context in which time is not counted as training time (evaluation)."""
        return self.stopwatch.paused()

    def untimed(self) -> Any:
        """Context in which time is not counted as training time (set-up: data, model construction)."""
        return self.stopwatch.paused()


@contextmanager
def _torch_threads(n: int | None) -> Iterator[None]:
    import torch

    if n is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def execute_unit(
    slug: str, scale: str, config: Mapping[str, Any], method: str, seed: int, *, threads: int | None = 1
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run one (method, seed) unit; return its status line and its records. Never raises but Ctrl-C."""
    timeout = float(config.get("unit_timeout_s", DEFAULT_UNIT_TIMEOUT_S[scale]))
    ctx = RunContext(method, seed, scale, timeout)
    status, error = "done", None
    wall = time.perf_counter()
    with _torch_threads(threads):
        try:
            experiment = get_experiment(slug)
            seed_everything(seed)
            ctx.stopwatch.start()
            experiment.run(ctx, method, seed, config)
        except Diverged as exc:
            status, error = "diverged", str(exc)
        except UnitTimeout as exc:
            status, error = "timeout", str(exc)
        except KeyboardInterrupt:
            raise
        except Exception:
            status, error = "error", traceback.format_exc()
    check_choice("status", status, UNIT_STATUSES)
    seconds = ctx.stopwatch.stop()
    attempt = uuid.uuid4().hex[:12]
    for r in ctx.records:
        r["status"] = status
        r["attempt"] = attempt
    unit = {
        "method": method,
        "seed": seed,
        "status": status,
        "seconds": seconds,
        "wall_seconds": time.perf_counter() - wall,
        "n_records": len(ctx.records),
        "error": error,
        "attempt": attempt,
    }
    return unit, ctx.records


def _spawn_worker_init() -> None:
    import signal

    import torch

    torch.set_num_threads(1)
    # Ctrl-C goes to the parent, which cancels the pool; workers must not print a traceback each.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@dataclass(frozen=True)
class RunOutcome:
    """What :func:`run_experiment` returns."""

    slug: str
    scale: str
    run_dir: Path
    verdict: Verdict
    summary: Mapping[str, Any]
    units: list[dict[str, Any]] = field(default_factory=list)
    reused: int = 0
    claim: str = ""


UnitCallback = Callable[[str, dict[str, Any]], None]


def run_experiment(
    slug: str,
    scale: str = "quick",
    *,
    seeds: int | None = None,
    out: Path | str = "runs",
    jobs: int = 1,
    force: bool = False,
    world_size: int | None = None,
    on_start: Callable[[str, int], None] | None = None,
    on_unit: UnitCallback | None = None,
    on_wait: Callable[[Path], None] | None = None,
    executor: Executor | None = None,
) -> RunOutcome:
    """Run ``slug`` at ``scale`` over its methods x seeds, store the run, and return the outcome.

    The whole run holds the run directory's lock (:meth:`RunDir.lock`): a second, concurrent run of the same
    code, experiment, scale and configuration into the same ``out`` waits until the first has finished and
    then reuses its units (it runs only what the first left unfinished), instead of running every unit again.

    Args:
        slug: a registered experiment.
        scale: ``smoke``, ``quick`` or ``full``.
        seeds: number of seeds (default: the scale's).
        out: the runs root; the run goes to ``out/slug/scale/run-id``.
        jobs: processes to run units in (1 = this process), for the default local executor.
        force: discard stored units of an identical earlier run instead of reusing them.
        world_size: torch.distributed processes for the experiment's distributed methods (``None``/1: in
            process); a ``ValueError`` for an experiment without distributed methods.
        on_start: called with (slug, number of units still to run).
        on_unit: called with (slug, unit status line) as each unit finishes.
        on_wait: called with the run directory if another process holds its lock, before waiting (default:
            one line on stderr saying so).
        executor: where the units run (:mod:`optarium.harness.executors`: a Ray cluster, Slurm); default
            :class:`~optarium.harness.executors.LocalExecutor` with ``jobs`` processes. The stored run is
            the same whichever runs it.

    Raises:
        RunInterrupted: on Ctrl-C, after the finished units were stored.
    """
    check_choice("scale", scale, SCALES)
    jobs = check_int("jobs", jobs, minimum=1)
    if executor is None:
        executor = LocalExecutor(jobs)
    elif not isinstance(executor, Executor):
        raise TypeError(
            f"executor: must be an optarium.harness.executors.Executor, got {type(executor).__name__}"
        )
    experiment = get_experiment(slug)
    config = experiment.config(scale, seeds, world_size)
    fingerprint = code_fingerprint()
    run = RunDir.create(out, slug, scale, run_id(fingerprint, slug, scale, config))
    with run.lock(on_wait=on_wait if on_wait is not None else _say_waiting):
        return _run_locked(
            experiment, run, slug, scale, config, fingerprint, executor, force, on_start, on_unit
        )


def _say_waiting(path: Path) -> None:
    print(
        f"optarium: another run is writing {path}; waiting for it to finish, then reusing its units",
        file=sys.stderr,
        flush=True,
    )


def _run_locked(
    experiment: Any,
    run: RunDir,
    slug: str,
    scale: str,
    config: Mapping[str, Any],
    fingerprint: str,
    executor: Executor,
    force: bool,
    on_start: Callable[[str, int], None] | None,
    on_unit: UnitCallback | None,
) -> RunOutcome:
    """The body of :func:`run_experiment`, run while holding the run directory's lock."""
    if force:
        run.clear()
    run.write_json("config.json", {"slug": slug, "scale": scale, "config": config, "code": fingerprint})
    run.write_json("environment.json", collect_environment())

    stored = {(u["method"], int(u["seed"])) for u in run.units() if u["status"] in REUSABLE}
    pending = [(m, s) for m in config["methods"] for s in range(config["seeds"]) if (m, s) not in stored]
    reused = sum(1 for m in config["methods"] for s in range(config["seeds"]) if (m, s) in stored)
    if on_start is not None:
        on_start(slug, len(pending))

    def finished(unit: dict[str, Any], records: list[dict[str, Any]]) -> None:
        run.append_unit(unit, records)
        if on_unit is not None:
            on_unit(slug, unit)

    try:
        executor.run(slug, scale, config, pending, finished)
    except KeyboardInterrupt:
        raise RunInterrupted(run.path, len(run.units())) from None

    return _conclude(experiment, run, scale, config, reused)


def _run_pool(
    slug: str,
    scale: str,
    config: Mapping[str, Any],
    pending: list[tuple[str, int]],
    jobs: int,
    finished: Callable[[dict[str, Any], list[dict[str, Any]]], None],
    unit_fn: Callable[..., tuple[dict[str, Any], list[dict[str, Any]]]] = execute_unit,
) -> None:
    """Run ``pending`` units in a pool of ``jobs`` spawned workers (``unit_fn`` must be importable there).

    A worker that dies (killed, segfault, out of memory) breaks the whole pool, failing every unit still in
    it. Those units are then re-run one at a time, each in a fresh single-worker pool, so only the unit that
    really kills its process is recorded as an error and the others finish normally.
    """
    broken = _pool_pass(slug, scale, config, pending, jobs, finished, unit_fn)
    for unit in broken:
        again = _pool_pass(slug, scale, config, [unit], 1, finished, unit_fn)
        for m, s in again:
            finished(error_unit(m, s, "the worker process died while running this unit"), [])


def _pool_pass(
    slug: str,
    scale: str,
    config: Mapping[str, Any],
    pending: list[tuple[str, int]],
    jobs: int,
    finished: Callable[[dict[str, Any], list[dict[str, Any]]], None],
    unit_fn: Callable[..., tuple[dict[str, Any], list[dict[str, Any]]]],
) -> list[tuple[str, int]]:
    """One pool over ``pending``; returns the units lost to a broken pool (not recorded)."""
    ctx = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(
        max_workers=min(jobs, len(pending)), mp_context=ctx, initializer=_spawn_worker_init
    )
    futures: dict[Future[Any], tuple[str, int]] = {}
    broken: list[tuple[str, int]] = []
    try:
        for m, s in pending:
            futures[pool.submit(unit_fn, slug, scale, config, m, s, threads=1)] = (m, s)
        remaining = set(futures)
        while remaining:
            done, remaining = wait(remaining, return_when=FIRST_COMPLETED)
            for fut in done:
                m, s = futures[fut]
                try:
                    unit, records = fut.result()
                except BrokenProcessPool:
                    broken.append((m, s))
                    continue
                except Exception:  # the unit's result could not come back (e.g. not picklable)
                    unit, records = error_unit(m, s, traceback.format_exc()), []
                finished(unit, records)
    except KeyboardInterrupt:
        procs = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.join(timeout=10)
        manager = getattr(pool, "_executor_manager_thread", None)
        if manager is not None:
            manager.join(timeout=5)
        raise
    pool.shutdown(wait=True)
    return [u for u in pending if u in set(broken)]


def _conclude(experiment: Any, run: RunDir, scale: str, config: Mapping[str, Any], reused: int) -> RunOutcome:
    units = run.units()
    records = run.records()
    summary = summarize(records, units, config["methods"])
    try:
        verdict = experiment.decide(records, config)
    except Exception as exc:
        verdict = Verdict("inconclusive", summary=f"the verdict could not be computed: {exc!r}")
    # A claim is never "reproduced" on incomplete pairs: a method that crashes or diverges on the seeds where
    # it would lose must not win on the seeds that finished.
    not_done = [u for u in units if u["status"] != "done"]
    statuses = ", ".join(sorted({u["status"] for u in not_done}))
    if not_done and verdict.outcome == "reproduced":
        verdict = Verdict(
            "inconclusive",
            figures={**verdict.figures, "units_not_done": len(not_done)},
            summary=(
                f"{len(not_done)} unit(s) did not finish ({statuses}), "
                f"so the pairs are incomplete; the rule on the finished units alone said: {verdict.summary}"
            ),
        )
    if scale == "smoke":
        verdict = Verdict(
            "no verdict",
            figures=verdict.figures,
            summary=f"smoke runs never claim a verdict (the rule on these records gives: {verdict.outcome})",
        )
    figure_errors = _save_figures(experiment, run, records, config)
    summary = {"methods": summary, "figure_errors": figure_errors}
    run.write_json("summary.json", summary)
    run.write_json(
        "verdict.json",
        {**verdict.to_json(), "claim": experiment.claim, "rule": experiment.rule, "scale": scale},
    )
    return RunOutcome(
        slug=experiment.slug,
        scale=scale,
        run_dir=run.path,
        verdict=verdict,
        summary=summary,
        units=units,
        reused=reused,
        claim=experiment.claim,
    )


def _save_figures(
    experiment: Any, run: RunDir, records: list[dict[str, Any]], config: Mapping[str, Any]
) -> list[str]:
    if experiment.plot is None:
        return []
    errors: list[str] = []
    try:
        figures = experiment.plot(records, config)
    except Exception as exc:
        return [f"plot failed: {exc!r}"]
    fig_dir = run.path / "figures"
    fig_dir.mkdir(exist_ok=True)
    for name, fig in figures.items():
        try:
            fig.savefig(fig_dir / f"{name}.png", dpi=FIGURE_DPI, bbox_inches="tight")
        except Exception as exc:
            errors.append(f"{name}: {exc!r}")
            continue
        errors.extend(f"{name}: {p}" for p in figure_problems(fig, fig_dir / f"{name}.png"))
    return errors


def run_suite(
    scale: str = "quick",
    *,
    family: str | None = None,
    seeds: int | None = None,
    out: Path | str = "runs",
    jobs: int = 1,
    force: bool = False,
    on_start: Callable[[str, int], None] | None = None,
    on_unit: UnitCallback | None = None,
    executor: Executor | None = None,
) -> list[RunOutcome]:
    """Run every registered experiment (of ``family``, if given) at ``scale``; units in ``jobs`` processes
    (or on ``executor``, see :func:`run_experiment`)."""
    outcomes = []
    for slug in registered_experiments(family):
        outcomes.append(
            run_experiment(
                slug,
                scale,
                seeds=seeds,
                out=out,
                jobs=jobs,
                force=force,
                on_start=on_start,
                on_unit=on_unit,
                executor=executor,
            )
        )
    return outcomes
