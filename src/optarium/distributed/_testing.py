"""SPMD probe functions for the multi-process tests (importable, so that spawned ranks can unpickle them).

Not public API.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from optarium.distributed.comm import Communicator, pack_signs
from optarium.distributed.topology import mixing_matrix

__all__ = ["collectives_probe", "fail_at", "run_many"]


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
