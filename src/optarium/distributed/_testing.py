"""SPMD probe functions for the multi-process tests (importable, so that spawned ranks can unpickle them).

Not public API.
"""

from __future__ import annotations

import os
import time
from typing import Any

import torch

from optarium.distributed.comm import Communicator, pack_signs
from optarium.distributed.topology import mixing_matrix

__all__ = [
    "abort_at_exit",
    "collectives_probe",
    "fail_at",
    "loader_sum",
    "run_many",
    "sleep_after",
    "sleep_before",
    "torch_threads",
]


def collectives_probe(comm: Communicator, topology: str = "star", seed: int = 0) -> dict[str, Any]:
    """Run every collective once on seeded client data; return the results and the communication stats."""
    gen = torch.Generator().manual_seed(seed)
    X = torch.randn(comm.n_clients, 3, 2, generator=gen, dtype=torch.float64)
    x = comm.shard(X)
    W = mixing_matrix(topology, comm.n_clients)
    signs = pack_signs(torch.randn(comm.n_clients, 16, generator=gen))
    return {
        "local": list(comm.local_clients),
        "sum": comm.client_sum(x),
        "mean": comm.client_mean(x),
        "max": comm.client_max(x),
        "all_gather": comm.all_gather_clients(x),
        "gossip": comm.gossip(x, W),
        "gather": comm.gather_clients(comm.shard(signs)),
        "broadcast": comm.broadcast(torch.full((2,), 10.0 + comm.rank), src=comm.world_size - 1),
        "rank_max": comm.all_reduce(torch.tensor([float(comm.rank)]), "max"),
        "stats": comm.stats.as_dict(),
        "up_per_client": comm.stats.uplink_bits.clone(),
    }


def fail_at(comm: Communicator, step: int, mode: str = "raise", rank: int = 1) -> int:
    """10 client sums; rank ``rank`` raises (``mode="raise"``) or dies (``"exit"``) at step ``step``."""
    for t in range(10):
        if comm.rank == rank and t == step:
            if mode == "exit":
                os._exit(3)
            raise ValueError(f"injected failure at step {t}")
        comm.client_sum(torch.ones(comm.n_local, 4))
    return comm.rank


def run_many(comm: Communicator, calls: list[tuple[Any, tuple[Any, ...]]]) -> list[Any]:
    """``[fn(comm, *args) for fn, args in calls]``: several SPMD functions in one launch."""
    return [fn(comm, *args) for fn, args in calls]


def sleep_before(comm: Communicator, step: int, secs: float, rank: int = 1) -> int:
    """6 client sums; rank ``rank`` sleeps ``secs`` seconds before the one of step ``step`` (a hung rank)."""
    for t in range(6):
        if comm.rank == rank and t == step:
            time.sleep(secs)
        comm.client_sum(torch.ones(comm.n_local, 4))
    return comm.rank


def sleep_after(comm: Communicator, secs: float, rank: int = 1) -> int:
    """One client sum, then rank ``rank`` sleeps ``secs`` seconds (outlives its peers, no collective)."""
    comm.client_sum(torch.ones(comm.n_local, 4))
    if comm.rank == rank:
        time.sleep(secs)
    return comm.rank


def loader_sum(comm: Communicator) -> float:
    """Sum over a ``DataLoader`` with one worker process (a rank that starts processes of its own)."""
    import torch.utils.data as tud

    ds = tud.TensorDataset(torch.arange(8.0))
    total = sum(float(b[0].sum()) for b in tud.DataLoader(ds, batch_size=4, num_workers=1))
    return float(comm.all_reduce(torch.tensor([total]))[0])


def torch_threads(comm: Communicator) -> int:
    """This rank's ``torch.get_num_threads()``."""
    return torch.get_num_threads()


def lion_probe(comm: Communicator, server_rank: int = 0, steps: int = 8, seed: int = 3) -> torch.Tensor:
    """``steps`` of 1-bit :class:`~optarium.distributed.lion.DistributedLion` (adaptive R, majority vote with
    random ties) with the server on ``server_rank``; client i's gradient is ``x - t_i`` (seeded targets)."""
    from optarium.distributed.lion import DistributedLion

    targets = comm.shard(torch.randn(comm.n_clients, 13, generator=torch.Generator().manual_seed(seed)))
    x = torch.zeros(13)
    opt = DistributedLion([x], comm, lr=0.05, compression="unbiased_sign", server_rank=server_rank, seed=seed)
    for _ in range(steps):
        opt.step(lambda xs: [xs[0].expand(comm.n_local, -1) - targets])
    return x


def abort_at_exit(comm: Communicator) -> int:
    """Finish normally, leaving an ``atexit`` handler that aborts the process (a native teardown crash)."""
    import atexit

    atexit.register(os.abort)
    return comm.rank
