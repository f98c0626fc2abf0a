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
message and traceback, or its exit code. No process is left behind, also on ``KeyboardInterrupt``.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing.connection
import os
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
    threads: int,
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
    torch.set_num_threads(threads)
    out = Path(tmp)
    try:
        comm = Communicator.from_env(n_clients, backend=backend, timeout_s=timeout_s)
        result = fn(comm, *args, **kwargs)
        torch.save(result, out / f"rank{rank}.pt")
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
    with contextlib.suppress(Exception):
        if dist.is_initialized():
            dist.destroy_process_group()


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


def _diagnose(procs: list[Any], tmp: Path, noticed: dict[int, float], stopped: set[int]) -> str:
    """The error message: first-failing rank (own fault before peer errors), then the other failures."""
    failures = []
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
        elif rank in stopped:
            failures.append(
                (True, noticed.get(rank, time.time()), rank, f"rank {rank} was stopped by launch", "")
            )
        elif rank in noticed:
            code = p.exitcode
            how = (
                f"was killed by signal {-code}"
                if code is not None and code < 0
                else f"died with exit code {code}"
            )
            failures.append((False, noticed[rank], rank, f"rank {rank} {how} (no Python exception)", ""))
    if not failures:
        return "a rank failed without a diagnosis"
    failures.sort(key=lambda f: (f[0], f[1]))
    _, _, _, head, tb = failures[0]
    lines = [head]
    others = [f[3] for f in failures[1:]]
    if others:
        lines.append("other ranks: " + "; ".join(others))
    if tb:
        lines.append(tb.rstrip())
    return "\n".join(lines)


def launch(
    fn: Callable[..., Any],
    world_size: int,
    *args: Any,
    n_clients: int,
    backend: str = "gloo",
    timeout_s: float = 60.0,
    **kwargs: Any,
) -> list[Any]:
    """Run ``fn(comm, *args, **kwargs)`` on ``world_size`` ranks; return the per-rank results in rank order.

    Args:
        fn: the SPMD function; its first argument is the rank's ``Communicator``.
        world_size: number of processes (1: in this process, no process group).
        n_clients: number of logical clients, split in contiguous blocks over the ranks (>= world_size).
        backend: ``"gloo"`` (default, CPU) or ``"nccl"`` (one GPU per rank).
        timeout_s: process-group timeout (seconds): the bound on how long a rank waits for a failed peer.

    Raises:
        DistributedError: a rank raised or died; the message names the rank and its error.
    """
    world_size = check_int("world_size", world_size, minimum=1)
    n_clients = check_int("n_clients", n_clients, minimum=1)
    check_choice("backend", backend, ("gloo", "nccl"))
    timeout_s = check_positive("timeout_s", timeout_s)
    if not callable(fn):
        raise TypeError(f"fn: must be callable, got {type(fn).__name__}")
    if world_size == 1:
        return [fn(Communicator.local(n_clients), *args, **kwargs)]
    if n_clients < world_size:
        raise ValueError(f"n_clients: must be >= world_size ({world_size}), got {n_clients}")
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="optarium-launch-") as tmp_name:
        tmp = Path(tmp_name)
        port = _free_port()
        procs = []
        noticed: dict[int, float] = {}
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
                        tmp_name,
                        torch.get_num_threads(),
                    ),
                    daemon=True,
                )
                p.start()
                procs.append(p)
            failed_at = None
            while True:
                now = time.monotonic()
                for rank, p in enumerate(procs):
                    if p.exitcode not in (None, 0) and rank not in noticed:
                        noticed[rank] = time.time()
                if noticed and failed_at is None:
                    failed_at = now
                alive = [p for p in procs if p.exitcode is None]
                if not alive:
                    break
                if failed_at is not None and now - failed_at > _GRACE_S:
                    break
                multiprocessing.connection.wait([p.sentinel for p in alive], timeout=0.05)
        finally:
            stopped = {rank for rank, p in enumerate(procs) if p.exitcode is None}
            _stop(procs)
        for rank, p in enumerate(procs):
            if p.exitcode != 0 and rank not in noticed:
                noticed[rank] = time.time()
        if noticed:
            raise DistributedError(_diagnose(procs, tmp, noticed, stopped))
        results = []
        for rank in range(world_size):
            path = tmp / f"rank{rank}.pt"
            if not path.exists():
                raise DistributedError(f"rank {rank} exited without a result")
            results.append(torch.load(path, weights_only=False))
        return results
