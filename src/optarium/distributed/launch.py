"""Run an SPMD function on ``world_size`` ranks: in this process, or as spawned gloo processes.

``launch(fn, world_size, *args, n_clients=..., **kwargs)`` calls ``fn(comm, *args, **kwargs)`` once per rank,
with ``comm`` the rank's :class:`~optarium.distributed.comm.Communicator`, and returns the per-rank return
values in rank order.

- ``world_size == 1``: in this process, ``comm = Communicator.local(n_clients)``, no process group.
- ``world_size > 1``: ``world_size`` fresh processes (``torch.multiprocessing``, spawn start method).
  Each sets the ``torchrun`` environment variables (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
  ``MASTER_ADDR=127.0.0.1``, a free ``MASTER_PORT``) and joins with :meth:`Communicator.from_env`, exactly
  as under ``torchrun``; the backend defaults to gloo on loopback. ``fn``, ``args`` and ``kwargs`` must be
  picklable (``fn`` a module-level function of an importable module); return values come back through
  ``torch.save`` files in a private temporary directory (no queues or sockets of ours).

Faults. The process group has a timeout of ``timeout_s`` seconds, so a rank blocked in a collective whose
peer is gone or stuck fails within that time. When a rank raises or dies (``os._exit``, a signal), ``launch``
gives the others a short grace period to report, terminates (then kills) every remaining process, and raises
:class:`~optarium.distributed.comm.DistributedError` naming the rank that failed first for a reason of its own
(ranks that only lost their peer in a collective are listed as consequences), with its exception type,
message and traceback, or its exit code. When every recorded failure is only a peer or timeout error, the
ranks that were still running and never raised are named as the likely cause ("rank 1 did not reach the
collective within timeout_s"). A rank still running ``timeout_s`` after every other rank exited cleanly is
treated as stuck (killed and named), and ``deadline_s`` bounds the whole run (the ranks still running then
are killed and named). No process is left behind, also on ``KeyboardInterrupt``.

Ranks are ordinary (non-daemon) processes, so they may start workers of their own (``DataLoader(num_workers=
...)``); ``launch`` still terminates them all. Each rank runs ``max(1, cpus // world_size)`` torch threads
unless ``OMP_NUM_THREADS`` is set (then torch's default, which honours it). If rank 0 cannot bind the
rendezvous port (another process took it between the choice and the bind), the run is retried once on a
fresh port.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing.connection
import os
import pickle
import socket
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from optarium._core.validation import check_choice, check_int, check_positive
from optarium.distributed.comm import Communicator, DistributedError

__all__ = ["DistributedError", "launch"]

#: Substrings of errors that a rank gets because a *peer* failed (not a fault of its own).
_PEER_ERRORS = (
    "connection closed",
    "connection reset",
    "broken pipe",
    "timed out",
    "timeout",
    "gloo",
    "nccl",
    "socket",
    "peer",
)
_GRACE_S = 1.5
#: Substrings of the error rank 0 gets when the rendezvous port was taken (the port race; retried once).
_PORT_TAKEN = ("eaddrinuse", "address already in use")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _is_peer_error(exc: BaseException) -> bool:
    if isinstance(exc, getattr(dist, "DistBackendError", ())) or isinstance(
        exc, getattr(dist, "DistError", ())
    ):
        return True
    text = f"{type(exc).__name__} {exc}".lower()
    return isinstance(exc, RuntimeError) and any(s in text for s in _PEER_ERRORS)


def _worker(
    rank: int,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    world_size: int,
    n_clients: int,
    backend: str,
    timeout_s: float,
    port: int,
    tmp: str,
    threads: int | None,
) -> None:
    """Entry point of a spawned rank (module level so that spawn can pickle it)."""
    os.environ.update(
        {
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": str(world_size),
            "LOCAL_WORLD_SIZE": str(world_size),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
        }
    )
    if backend == "gloo" and "GLOO_SOCKET_IFNAME" not in os.environ and os.path.exists("/sys/class/net/lo"):
        os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    if threads is not None:
        torch.set_num_threads(threads)
    out = Path(tmp)
    try:
        comm = Communicator.from_env(n_clients, backend=backend, timeout_s=timeout_s)
        result = fn(comm, *args, **kwargs)
        torch.save(result, out / f"rank{rank}.pt.tmp")
        os.replace(out / f"rank{rank}.pt.tmp", out / f"rank{rank}.pt")
    except BaseException as exc:
        info = {
            "time": time.time(),
            "type": type(exc).__name__,
            "message": str(exc),
            "traceback": traceback.format_exc(),
            "peer": _is_peer_error(exc),
        }
        (out / f"rank{rank}.err.tmp").write_text(json.dumps(info))
        os.replace(out / f"rank{rank}.err.tmp", out / f"rank{rank}.err")
        os._exit(1)  # skip interpreter teardown (it can block on a broken process group)
    _exit_cleanly()


def _exit_cleanly() -> None:
    """End a rank whose result is written: no rank tears its process group down while a peer still uses it.

    The ranks meet at a barrier first (bounded by the group's timeout), then destroy the group and leave with
    ``os._exit(0)``, skipping interpreter teardown: C++ destructors and ``atexit`` handlers run there while
    gloo's background threads may still see a peer's socket close, and a native abort at that point killed
    ranks whose work was done with signal 6 and no Python exception (issue 12). A rank's result is on disk
    before this runs, so nothing of the computation depends on teardown.
    """
    with contextlib.suppress(Exception):
        if dist.is_initialized():
            dist.barrier()
            dist.destroy_process_group()
    with contextlib.suppress(Exception):
        import sys

        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(0)


def _stop(procs: list[Any]) -> None:
    for p in procs:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + 3.0
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join(2.0)


def _diagnose(
    procs: list[Any],
    tmp: Path,
    noticed: dict[int, float],
    stopped: set[int],
    timeout_s: float,
    stuck: dict[int, str] | None = None,
) -> str:
    """The error message: the likely culprit first, then the other failures.

    Own faults (a Python exception that is not a peer error, a death) come before peer errors, earliest
    first. When every recorded failure is a peer or timeout error, the ranks that were still running and
    never raised (stopped by ``launch``) are the likely cause: they did not reach the collective their peers
    waited in. ``stuck`` maps ranks that ``launch`` itself declared stuck (deadline, or alive long after
    every peer finished) to the reason.
    """
    stuck = stuck or {}
    failures = []
    silent = []  # stopped by launch without an error of their own
    for rank, p in enumerate(procs):
        err = tmp / f"rank{rank}.err"
        if err.exists():
            info = json.loads(err.read_text())
            failures.append(
                (
                    bool(info["peer"]),
                    float(info["time"]),
                    rank,
                    f"rank {rank} raised {info['type']}: {info['message']}",
                    info["traceback"],
                )
            )
        elif rank in stuck:
            failures.append((False, noticed.get(rank, time.time()), rank, f"rank {rank} {stuck[rank]}", ""))
        elif rank in stopped:
            silent.append(rank)
        elif rank in noticed:
            code = p.exitcode
            how = (
                f"was killed by signal {-code}"
                if code is not None and code < 0
                else f"died with exit code {code}"
            )
            failures.append((False, noticed[rank], rank, f"rank {rank} {how} (no Python exception)", ""))
    if failures and silent and all(f[0] for f in failures):
        # only peer/timeout errors: the ranks that were still running never reached the collective
        waiting = ", ".join(str(f[2]) for f in sorted(failures, key=lambda f: f[2]))
        for rank in silent:
            failures.append(
                (
                    False,
                    -1.0,
                    rank,
                    f"rank {rank} did not reach the collective within timeout_s={timeout_s:g} "
                    f"(still running when rank(s) {waiting} failed waiting for it; stopped by launch)",
                    "",
                )
            )
    else:
        for rank in silent:
            failures.append(
                (True, noticed.get(rank, time.time()), rank, f"rank {rank} was stopped by launch", "")
            )
    if not failures:
        return "a rank failed without a diagnosis"
    if all(f[0] for f in failures):
        done = [r for r, p in enumerate(procs) if p.exitcode == 0 and r not in noticed]
        if done:
            ranks = ", ".join(map(str, done))
            failures.append(
                (
                    False,
                    -1.0,
                    done[0],
                    f"rank(s) {ranks} finished while the others still waited in a collective "
                    "(mismatched collectives?)",
                    "",
                )
            )
    failures.sort(key=lambda f: (f[0], f[1]))
    _, _, _, head, tb = failures[0]
    lines = [head]
    others = [f[3] for f in failures[1:]]
    if others:
        lines.append("other ranks: " + "; ".join(others))
    if tb:
        lines.append(tb.rstrip())
    return "\n".join(lines)


def _threads(world_size: int) -> int | None:
    """Torch threads per rank: ``max(1, cpus // world_size)``, or ``None`` if ``OMP_NUM_THREADS`` is set."""
    if os.environ.get("OMP_NUM_THREADS"):
        return None
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, cpus // world_size)


def _port_taken(tmp: Path) -> bool:
    """Whether rank 0 failed because its rendezvous port was already in use (the port race)."""
    err = tmp / "rank0.err"
    if not err.exists():
        return False
    text = json.loads(err.read_text())["message"].lower()
    return any(s in text for s in _PORT_TAKEN)


def _attempt(
    fn: Callable[..., Any],
    world_size: int,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    n_clients: int,
    backend: str,
    timeout_s: float,
    deadline: float | None,
    deadline_s: float | None,
    tmp: Path,
) -> tuple[list[Any], dict[int, float], set[int], dict[int, str]]:
    """Spawn the ranks once and watch them; every process has ended when this returns."""
    ctx = mp.get_context("spawn")
    port = _free_port()
    threads = _threads(world_size)
    procs: list[Any] = []
    noticed: dict[int, float] = {}
    stuck: dict[int, str] = {}
    stopped: set[int] = set()
    try:
        for rank in range(world_size):
            p = ctx.Process(
                target=_worker,
                args=(
                    rank,
                    fn,
                    args,
                    kwargs,
                    world_size,
                    n_clients,
                    backend,
                    timeout_s,
                    port,
                    str(tmp),
                    threads,
                ),
                daemon=False,  # a rank may start processes of its own (DataLoader workers)
            )
            p.start()
            procs.append(p)
        failed_at = None
        peers_done_at = None
        while True:
            now = time.monotonic()
            for rank, p in enumerate(procs):
                if p.exitcode not in (None, 0) and rank not in noticed:
                    noticed[rank] = time.time()
            if noticed and failed_at is None:
                failed_at = now
            alive = [r for r, p in enumerate(procs) if p.exitcode is None]
            if not alive:
                break
            if failed_at is not None and now - failed_at > _GRACE_S:
                break
            if deadline is not None and now > deadline:
                for r in alive:
                    stuck[r] = (
                        f"was still running at the deadline (deadline_s={deadline_s:g}); killed by launch"
                    )
                    noticed[r] = time.time()
                break
            if not noticed and len(alive) == 1:
                # every peer exited cleanly; the last rank gets timeout_s to finish
                if peers_done_at is None:
                    peers_done_at = now
                elif now - peers_done_at > timeout_s:
                    if not (tmp / f"rank{alive[0]}.pt").exists():
                        stuck[alive[0]] = (
                            f"was still running timeout_s={timeout_s:g} s after every other rank had "
                            "finished; killed by launch"
                        )
                        noticed[alive[0]] = time.time()
                    break  # (with its result written, it is only slow to exit: stopped, not a failure)
            multiprocessing.connection.wait([procs[r].sentinel for r in alive], timeout=0.05)
    finally:
        stopped = {rank for rank, p in enumerate(procs) if p.exitcode is None}
        _stop(procs)
    for rank, p in enumerate(procs):
        if p.exitcode != 0 and rank not in noticed and rank not in stopped:
            noticed[rank] = time.time()
    # a rank stopped after writing its result (e.g. slow in teardown) did not fail
    stopped = {r for r in stopped if r in stuck or not (tmp / f"rank{r}.pt").exists()}
    if stopped and noticed:
        for r in stopped:
            noticed.setdefault(r, time.time())
    return procs, noticed, stopped, stuck


def _check_picklable(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Spawned ranks receive ``fn`` and its arguments by pickling: say so, naming what fails, before any
    process starts (a lambda or a function defined inside another one cannot be sent)."""
    for name, obj in (("fn", fn), ("args", args), ("kwargs", kwargs)):
        try:
            pickle.dumps(obj)
        except (pickle.PicklingError, AttributeError, TypeError) as exc:
            hint = " (use a function defined at module level, not a lambda or a nested function)"
            raise TypeError(
                f"{name}: must be picklable to reach spawned ranks{hint if name == 'fn' else ''}: {exc}"
            ) from None


def launch(
    fn: Callable[..., Any],
    world_size: int,
    *args: Any,
    n_clients: int,
    backend: str = "gloo",
    timeout_s: float = 60.0,
    deadline_s: float | None = None,
    **kwargs: Any,
) -> list[Any]:
    """Run ``fn(comm, *args, **kwargs)`` on ``world_size`` ranks; return the per-rank results in rank order.

    Args:
        fn: the SPMD function; its first argument is the rank's ``Communicator``.
        world_size: number of processes (1: in this process, no process group).
        n_clients: number of logical clients, split in contiguous blocks over the ranks (>= world_size).
        backend: ``"gloo"`` (default, CPU) or ``"nccl"`` (one GPU per rank).
        timeout_s: process-group timeout (seconds): the bound on how long a rank waits for a failed peer,
            and how long the last running rank may outlive its peers that all finished cleanly.
        deadline_s: optional wall-clock limit of the whole run (seconds; ``None``: no limit). Ranks still
            running then are killed and named. Not applied at world size 1 (nothing to kill).

    Raises:
        DistributedError: a rank raised, died, or was stuck; the message names the rank and its error.
    """
    world_size = check_int("world_size", world_size, minimum=1)
    n_clients = check_int("n_clients", n_clients, minimum=1)
    check_choice("backend", backend, ("gloo", "nccl"))
    timeout_s = check_positive("timeout_s", timeout_s)
    if deadline_s is not None:
        deadline_s = check_positive("deadline_s", deadline_s)
    if not callable(fn):
        raise TypeError(f"fn: must be callable, got {type(fn).__name__}")
    if world_size == 1:
        return [fn(Communicator.local(n_clients), *args, **kwargs)]
    if n_clients < world_size:
        raise ValueError(f"n_clients: must be >= world_size ({world_size}), got {n_clients}")
    _check_picklable(fn, args, kwargs)
    deadline = None if deadline_s is None else time.monotonic() + deadline_s
    for attempt in range(2):
        with tempfile.TemporaryDirectory(prefix="optarium-launch-") as tmp_name:
            tmp = Path(tmp_name)
            procs, noticed, stopped, stuck = _attempt(
                fn, world_size, args, kwargs, n_clients, backend, timeout_s, deadline, deadline_s, tmp
            )
            if noticed:
                if attempt == 0 and _port_taken(tmp) and not stuck:
                    continue  # the rendezvous port was taken between the choice and the bind: retry once
                raise DistributedError(_diagnose(procs, tmp, noticed, stopped, timeout_s, stuck))
            results = []
            for rank in range(world_size):
                path = tmp / f"rank{rank}.pt"
                if not path.exists():
                    raise DistributedError(f"rank {rank} exited without a result")
                results.append(torch.load(path, weights_only=False))
            return results
    raise AssertionError("unreachable")  # pragma: no cover
