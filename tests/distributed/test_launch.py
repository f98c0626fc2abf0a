"""launch: world size 1 in-process, spawned gloo ranks joining via the torchrun env vars, fault handling."""

from __future__ import annotations

import multiprocessing
import time

import pytest

from optarium.distributed import _testing
from optarium.distributed.comm import DistributedError
from optarium.distributed.launch import launch


def test_world_size_one_runs_in_process() -> None:
    assert launch(_testing.fail_at, 1, 99, n_clients=3) == [0]
    with pytest.raises(ValueError, match="injected"):  # in-process errors propagate unchanged
        launch(_testing.fail_at, 1, 2, rank=0, n_clients=3)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match=r"^world_size:"):
        launch(_testing.fail_at, 0, 1, n_clients=2)
    with pytest.raises(ValueError, match=r"^n_clients:"):
        launch(_testing.fail_at, 3, 1, n_clients=2)
    with pytest.raises(ValueError, match=r"^backend:"):
        launch(_testing.fail_at, 2, 1, n_clients=2, backend="mpi")
    with pytest.raises(ValueError, match=r"^timeout_s:"):
        launch(_testing.fail_at, 2, 1, n_clients=2, timeout_s=0)


@pytest.mark.distributed
@pytest.mark.parametrize(
    ("mode", "pattern"),
    [
        ("raise", r"^rank 1 raised ValueError: injected failure at step 3"),
        ("exit", r"^rank 1 died with exit code 3"),
    ],
)
def test_failing_rank_is_named_and_nothing_is_left(mode: str, pattern: str) -> None:
    start = time.monotonic()
    with pytest.raises(DistributedError, match=pattern):
        launch(_testing.fail_at, 2, 3, mode, n_clients=4, timeout_s=10)
    assert time.monotonic() - start < 12.0  # bounded by the process-group timeout, never a hang
    assert multiprocessing.active_children() == []
