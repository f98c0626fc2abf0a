"""Communicator: client collectives, gossip, bit packing and communication accounting; world size 1 vs 2."""

from __future__ import annotations

import pytest
import torch

from optarium.distributed import _testing
from optarium.distributed.comm import Communicator, block_range, pack_signs, unpack_signs
from optarium.distributed.launch import launch
from optarium.distributed.topology import mixing_matrix


def _data(n: int = 6, d: int = 5) -> torch.Tensor:
    return torch.randn(n, d, dtype=torch.float64, generator=torch.Generator().manual_seed(0))


def test_block_range_partitions_clients() -> None:
    for n, ws in [(5, 2), (8, 3), (4, 4), (7, 1)]:
        blocks = [block_range(n, ws, r) for r in range(ws)]
        assert [i for b in blocks for i in b] == list(range(n))
        assert max(map(len, blocks)) - min(map(len, blocks)) <= 1


def test_local_collectives_are_exact() -> None:
    X = _data()
    comm = Communicator.local(6)
    assert comm.rank == 0 and comm.world_size == 1 and comm.n_local == 6 and comm.local_clients == range(6)
    torch.testing.assert_close(comm.client_sum(X), X.sum(0), rtol=0, atol=0)
    torch.testing.assert_close(comm.client_mean(X), X.mean(0), rtol=1e-15, atol=1e-15)
    torch.testing.assert_close(comm.client_max(X), X.amax(0), rtol=0, atol=0)
    torch.testing.assert_close(comm.all_gather_clients(X), X, rtol=0, atol=0)
    torch.testing.assert_close(comm.gather_clients(X), X, rtol=0, atol=0)
    W = mixing_matrix("ring", 6)
    torch.testing.assert_close(comm.gossip(X, W), W @ X, rtol=1e-15, atol=1e-15)
    # gossip keeps the clients' average (W doubly stochastic) and accepts any trailing shape
    Y = X.reshape(6, 5, 1)
    torch.testing.assert_close(comm.gossip(Y, W).mean(0), Y.mean(0), rtol=1e-12, atol=1e-12)


def test_gathers_return_copies_at_world_size_one() -> None:
    """Mutating a gathered result never changes the input (as across processes, where it cannot)."""
    X = _data()
    keep = X.clone()
    comm = Communicator.local(6)
    for out in (comm.all_gather_clients(X), comm.gather_clients(X)):
        assert out is not None and out.data_ptr() != X.data_ptr()
        out += 1.0
        assert torch.equal(X, keep)


def test_accounting_per_client_and_direction() -> None:
    d = 40
    comm = Communicator.local(4)
    x32 = torch.zeros(4, d)
    comm.client_mean(x32)
    s = comm.stats.as_dict()
    assert s["uplink_bits"] == 32 * d and s["downlink_bits"] == 32 * d
    assert s["uplink_rounds"] == 1 and s["downlink_rounds"] == 1 and s["wire_bytes"] == 0
    comm.stats.reset()
    packed = pack_signs(torch.randn(4, d))  # 1 bit per coordinate on the wire
    assert packed.dtype == torch.uint8 and packed.shape == (4, d // 8)
    comm.gather_clients(packed)
    comm.broadcast(packed[0].clone())
    s = comm.stats.as_dict()
    assert (s["uplink_bits"], s["downlink_bits"]) == (d, d)
    assert (s["uplink_rounds"], s["downlink_rounds"]) == (1, 1)
    comm.stats.reset()
    comm.client_max(torch.zeros(4, 1, dtype=torch.float64), bits_per_element=32)  # override the dtype width
    assert comm.stats.as_dict()["uplink_bits"] == 32
    comm.stats.reset()
    # gossip on a star: the hub sends to / receives from 3 neighbours, each leaf 1
    comm.gossip(torch.zeros(4, d), mixing_matrix("star", 4))
    assert comm.stats.uplink_bits.tolist() == [3 * 32 * d, 32 * d, 32 * d, 32 * d]
    assert comm.stats.downlink_bits.tolist() == [3 * 32 * d, 32 * d, 32 * d, 32 * d]
    assert comm.stats.as_dict()["uplink_bits_max"] == 3 * 32 * d
    comm.all_gather_clients(torch.zeros(4, 2))
    assert comm.stats.ops == {"gossip": 1, "all_gather_clients": 1}


@pytest.mark.parametrize("d", [1, 7, 8, 13, 200])
def test_pack_unpack_round_trip(d: int) -> None:
    s = torch.randn(3, 2, d, generator=torch.Generator().manual_seed(d)).sign()
    s[s == 0] = 1
    packed = pack_signs(s)
    assert packed.shape == (3, 2, (d + 7) // 8) and packed.dtype == torch.uint8
    torch.testing.assert_close(unpack_signs(packed, d, torch.float64), s.double(), rtol=0, atol=0)


def test_bad_input_raises() -> None:
    comm = Communicator.local(3)
    with pytest.raises(ValueError, match=r"^x: leading axis"):
        comm.client_sum(torch.zeros(2, 4))
    with pytest.raises(ValueError, match=r"^op:"):
        comm.client_reduce(torch.zeros(3, 4), "prod")
    with pytest.raises(ValueError, match=r"^W:"):
        comm.gossip(torch.zeros(3, 4), torch.eye(4, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"^n_clients:"):
        Communicator(0)
    with pytest.raises(ValueError, match=r"^rank:"):
        Communicator(4, rank=2, world_size=2)
    with pytest.raises(TypeError, match=r"^packed:"):
        unpack_signs(torch.zeros(2), 2)


def test_from_env_without_torchrun_is_local(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    comm = Communicator.from_env(3)
    assert comm.world_size == 1 and comm.n_local == 3


@pytest.mark.distributed
def test_two_processes_match_world_size_one() -> None:
    (ref,) = launch(_testing.collectives_probe, 1, n_clients=5)
    ranks = launch(_testing.collectives_probe, 2, n_clients=5, timeout_s=20)
    assert [r["local"] for r in ranks] == [[0, 1, 2], [3, 4]]
    for r in ranks:
        for key in ("sum", "mean", "max", "all_gather", "rank_max"):
            torch.testing.assert_close(r[key], ref[key] if key != "rank_max" else torch.tensor([1.0]))
        torch.testing.assert_close(r["broadcast"], torch.full((2,), 11.0))  # from the last rank
    torch.testing.assert_close(torch.cat([r["gossip"] for r in ranks]), ref["gossip"])
    assert torch.equal(ranks[0]["gather"], ref["gather"]) and ranks[1]["gather"] is None
    # logical accounting does not depend on the split; wire bytes are measured only across processes
    torch.testing.assert_close(torch.cat([r["up_per_client"] for r in ranks]), ref["up_per_client"])
    assert ref["stats"]["wire_bytes"] == 0 and all(r["stats"]["wire_bytes"] > 0 for r in ranks)


def test_paused_stats_leave_counters_untouched_and_nest() -> None:
    comm = Communicator.local(3)
    x = torch.ones(3, 4)
    comm.client_mean(x)
    before = (comm.stats.uplink_rounds, comm.stats.uplink_bits.clone(), dict(comm.stats.ops))
    with comm.stats.paused():
        comm.client_mean(x)
        with comm.stats.paused():
            comm.all_gather_clients(x)
        comm.client_sum(x)
    assert comm.stats.uplink_rounds == before[0] and torch.equal(comm.stats.uplink_bits, before[1])
    assert comm.stats.ops == before[2]
    comm.client_mean(x)
    assert comm.stats.uplink_rounds == before[0] + 1
