"""Where an experiment's units run: this process, a local process pool, a Ray cluster, or Slurm.

An *executor* runs pending (method, seed) units of one experiment run and hands every finished unit's status
line and records to ``finished`` as soon as it has them (the runner appends them to the run directory, so an
interrupted run keeps what finished). The runner, the storage, the verdict and the report are the same for
every executor, and so are the stored runs: a unit's records depend only on (experiment, scale,
configuration, method, seed), never on where it ran (timing fields and attempt ids aside).

- :class:`LocalExecutor` (``--executor local``, the default): ``jobs = 1`` runs the units one after another
  in this process; ``jobs > 1`` in a pool of spawned processes with one torch thread each, a unit that kills
  its worker re-run alone so only it is recorded as an error.
- :class:`RayExecutor` (``--executor ray``; Ray 2.60 from the ``cluster`` extra): every unit is a Ray task
  (``num_cpus=1``, one torch thread); ``address`` joins an existing cluster (``ray://...`` or
  ``host:port``), without it a local Ray instance with ``jobs`` CPUs is started on the loopback interface
  and stopped afterwards. A task whose worker dies is recorded as an ``error`` unit naming Ray's error.
- :class:`SlurmExecutor` (``--executor slurm``; submitit 1.5 from the ``cluster`` extra): one Slurm job
  array per experiment run, one array task per unit, through ``submitit.AutoExecutor`` (``folder`` keeps
  its logs and pickles, ``parameters`` go to ``update_parameters``: ``slurm_partition``, ``timeout_min``
  ...). ``cluster="local"`` runs the same array with submitit's local executor (what the tests use);
  ``cluster="debug"`` in this process.

Ctrl-C cancels what has not finished (Ray tasks, Slurm jobs) and raises ``KeyboardInterrupt`` to the runner,
which keeps the finished units. :func:`make_executor` builds one from the command line's options.
"""

from __future__ import annotations

import contextlib
import traceback
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from optarium._core.validation import check_choice, check_int

__all__ = [
    "EXECUTORS",
    "Executor",
    "Finished",
    "LocalExecutor",
    "RayExecutor",
    "SlurmExecutor",
    "error_unit",
    "make_executor",
]

#: Executor names accepted by :func:`make_executor` and the CLI's ``--executor``.
EXECUTORS: tuple[str, ...] = ("local", "ray", "slurm")

Finished = Callable[[dict[str, Any], list[dict[str, Any]]], None]
UnitFn = Callable[..., tuple[dict[str, Any], list[dict[str, Any]]]]


def error_unit(method: str, seed: int, error: str) -> dict[str, Any]:
    """The status line of a unit that could not report itself (its process or task died)."""
    return {
        "method": method,
        "seed": seed,
        "status": "error",
        "seconds": 0.0,
        "wall_seconds": 0.0,
        "n_records": 0,
        "error": error,
        "attempt": uuid.uuid4().hex[:12],
    }


def _unit_fn() -> UnitFn:
    from optarium.harness.runner import execute_unit

    return execute_unit


class Executor(ABC):
    """Runs pending units; see the module docstring."""

    #: Name in :data:`EXECUTORS`.
    name: str = ""

    @abstractmethod
    def run(
        self,
        slug: str,
        scale: str,
        config: Mapping[str, Any],
        pending: Sequence[tuple[str, int]],
        finished: Finished,
    ) -> None:
        """Run every ``(method, seed)`` of ``pending`` and call ``finished(unit, records)`` for each."""

    def describe(self) -> str:
        """One line for progress messages."""
        return self.name


class LocalExecutor(Executor):
    """This process (``jobs = 1``) or a pool of ``jobs`` spawned processes."""

    name = "local"

    def __init__(self, jobs: int = 1) -> None:
        self.jobs = check_int("jobs", jobs, minimum=1)

    def run(
        self,
        slug: str,
        scale: str,
        config: Mapping[str, Any],
        pending: Sequence[tuple[str, int]],
        finished: Finished,
    ) -> None:
        from optarium.harness.runner import _run_pool

        unit_fn = _unit_fn()
        if self.jobs == 1 or len(pending) <= 1:
            for m, s in pending:
                finished(*unit_fn(slug, scale, config, m, s))
        else:
            _run_pool(slug, scale, config, list(pending), self.jobs, finished)

    def describe(self) -> str:
        return f"local ({self.jobs} process{'es' if self.jobs > 1 else ''})"


def _remote_unit(slug: str, scale: str, config: Mapping[str, Any], method: str, seed: int) -> Any:
    """A unit inside a Ray worker or a Slurm array task (one torch thread, as in the local pool)."""
    return _unit_fn()(slug, scale, config, method, seed, threads=1)


class RayExecutor(Executor):
    """Every unit a Ray task; a local loopback instance unless ``address`` names a cluster."""

    name = "ray"

    def __init__(self, jobs: int = 1, address: str | None = None) -> None:
        self.jobs = check_int("jobs", jobs, minimum=1)
        if address is not None and (not isinstance(address, str) or not address):
            raise ValueError(f"address: must be a Ray address such as 'ray://host:10001', got {address!r}")
        self.address = address

    def _connect(self) -> tuple[Any, bool]:
        try:
            import ray
        except ImportError as exc:
            raise ImportError(
                "--executor ray needs Ray: pip install 'optarium[cluster]' (ray==2.60.0)"
            ) from exc
        if ray.is_initialized():
            return ray, False
        common = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
        if self.address is None:
            ray.init(num_cpus=self.jobs, _node_ip_address="127.0.0.1", **common)
        else:
            ray.init(address=self.address, **common)
        return ray, True

    def run(
        self,
        slug: str,
        scale: str,
        config: Mapping[str, Any],
        pending: Sequence[tuple[str, int]],
        finished: Finished,
    ) -> None:
        if not pending:
            return
        ray, started = self._connect()
        try:
            remote = ray.remote(num_cpus=1, max_retries=0)(_remote_unit)
            refs = {remote.remote(slug, scale, dict(config), m, s): (m, s) for m, s in pending}
            todo = list(refs)
            try:
                while todo:
                    done, todo = ray.wait(todo, num_returns=1)
                    for ref in done:
                        m, s = refs[ref]
                        try:
                            unit, records = ray.get(ref)
                        except Exception as exc:  # the task's worker died, or the result was lost
                            unit, records = error_unit(m, s, f"Ray task failed: {exc!r}"), []
                        finished(unit, records)
            except KeyboardInterrupt:
                for ref in todo:
                    with contextlib.suppress(Exception):
                        ray.cancel(ref, force=True)
                raise
        finally:
            if started:
                ray.shutdown()

    def describe(self) -> str:
        return f"ray ({self.address or f'local loopback instance, {self.jobs} CPUs'})"


class SlurmExecutor(Executor):
    """One submitit job array per experiment run (Slurm, or submitit's local/debug executors)."""

    name = "slurm"

    def __init__(
        self,
        folder: Path | str = "runs/.submitit",
        *,
        cluster: str | None = None,
        parameters: Mapping[str, Any] | None = None,
    ) -> None:
        self.folder = Path(folder)
        if cluster is not None:
            check_choice("cluster", cluster, ("slurm", "local", "debug"))
        self.cluster = cluster
        self.parameters = dict(parameters or {})

    def run(
        self,
        slug: str,
        scale: str,
        config: Mapping[str, Any],
        pending: Sequence[tuple[str, int]],
        finished: Finished,
    ) -> None:
        if not pending:
            return
        try:
            import submitit
        except ImportError as exc:
            raise ImportError(
                "--executor slurm needs submitit: pip install 'optarium[cluster]' (submitit==1.5.4)"
            ) from exc
        executor = submitit.AutoExecutor(folder=str(self.folder / slug / scale), cluster=self.cluster)
        params = {"name": f"optarium-{slug}-{scale}", **self.parameters}
        executor.update_parameters(**params)
        methods = [m for m, _ in pending]
        seeds = [s for _, s in pending]
        n = len(pending)
        jobs = executor.map_array(_remote_unit, [slug] * n, [scale] * n, [dict(config)] * n, methods, seeds)
        which = {job.job_id: unit for job, unit in zip(jobs, pending, strict=True)}
        try:
            for job in submitit.helpers.as_completed(jobs):
                m, s = which[job.job_id]
                try:
                    unit, records = job.result()
                except Exception:  # the array task died (killed, out of memory, node failure)
                    unit, records = error_unit(m, s, f"Slurm task failed:\n{traceback.format_exc()}"), []
                finished(unit, records)
        except KeyboardInterrupt:
            for job in jobs:
                with contextlib.suppress(Exception):
                    if not job.done():
                        job.cancel()
            raise

    def describe(self) -> str:
        return f"slurm ({self.cluster or 'auto'} cluster, submitit folder {self.folder})"


def make_executor(
    name: str = "local",
    *,
    jobs: int = 1,
    address: str | None = None,
    folder: Path | str | None = None,
    cluster: str | None = None,
    parameters: Mapping[str, Any] | None = None,
) -> Executor:
    """The executor ``name`` (one of :data:`EXECUTORS`) with its options; ``address`` is Ray's only,
    ``folder``/``cluster``/``parameters`` submitit's only (``ValueError`` naming a misplaced option)."""
    check_choice("executor", name, EXECUTORS)
    if name != "ray" and address is not None:
        raise ValueError("address: only --executor ray takes an address")
    if name != "slurm" and (folder is not None or cluster is not None or parameters):
        raise ValueError("executor options: folder, cluster and parameters are for --executor slurm only")
    if name == "local":
        return LocalExecutor(jobs)
    if name == "ray":
        return RayExecutor(jobs, address)
    return SlurmExecutor(folder or "runs/.submitit", cluster=cluster, parameters=parameters)
