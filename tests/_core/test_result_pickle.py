"""Result and Trace: picklable (also through a spawned process), equal by content, still frozen."""

from __future__ import annotations

import copy
import math
import multiprocessing
import pickle
from dataclasses import FrozenInstanceError

import pytest
import torch

import optarium._core.result as result_mod
from optarium._core.result import Result, Trace, same


def _result(**kw: object) -> Result:
    trace = Trace.from_rows([{"step": 0, "loss": 3.0, "gap": math.nan}, {"step": 5, "loss": 1.0, "gap": 0.5}])
    base: dict[str, object] = {
        "x": torch.arange(4, dtype=torch.float64),
        "value": 1.0,
        "status": "timeout",
        "n_iter": 5,
        "history": trace,
        "wall_time_s": 0.25,
        "extras": {"plan": torch.eye(2), "comm": {"bits": 64.0}, "names": ("a", "b")},
    }
    base.update(kw)
    return Result(**base)  # type: ignore[arg-type]


def test_pickle_round_trip_is_equal() -> None:
    res = _result()
    back = pickle.loads(pickle.dumps(res))
    assert back == res and back is not res
    assert back.history == res.history and isinstance(back.extras["comm"], dict)
    assert copy.deepcopy(res) == res
    trace = pickle.loads(pickle.dumps(res.history))
    assert trace == res.history and math.isnan(trace.metrics["gap"][0])


def test_round_trip_through_a_spawned_process() -> None:
    res = _result()
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        (back,) = pool.map(copy.copy, [res])  # pickled to the child, copied there, pickled back
    assert back == res


def test_equality_compares_contents() -> None:
    a = _result()
    assert a == _result()
    assert a != _result(x=torch.arange(4, dtype=torch.float32))  # dtype counts
    assert a != _result(x=torch.arange(1, 5, dtype=torch.float64))
    assert a != _result(status="converged")
    assert a != _result(extras={"plan": torch.eye(2)})
    assert a != _result(history=Trace())
    assert same(torch.tensor([math.nan, 1.0]), torch.tensor([math.nan, 1.0]))
    assert not same(torch.tensor([math.nan, 1.0]), torch.tensor([1.0, math.nan]))
    assert not same(torch.zeros(2), [0.0, 0.0])
    with pytest.raises(TypeError):
        hash(a)


def test_still_frozen_and_read_only() -> None:
    res = _result()
    with pytest.raises(FrozenInstanceError):
        res.status = "converged"  # type: ignore[misc]
    with pytest.raises(TypeError):
        res.extras["plan"] = None  # type: ignore[index]
    with pytest.raises(TypeError):
        res.history.metrics["loss"] = (0.0, 0.0)  # type: ignore[index]
    with pytest.raises(FrozenInstanceError):
        res.history.steps = ()  # type: ignore[misc]


def test_status_vocabulary_is_the_solver_one() -> None:
    from optarium._core.status import SOLVER_STATUSES

    for status in SOLVER_STATUSES:
        assert _result(status=status).status == status
    with pytest.raises(ValueError, match=r"^status"):
        _result(status="done")  # a unit status, not a solver status
    with pytest.raises(TypeError, match=r"^history"):
        _result(history=[{"step": 0}])
    assert not hasattr(result_mod, "STATUSES")
