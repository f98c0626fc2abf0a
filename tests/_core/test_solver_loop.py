"""SolverLoop: recording schedule, the stopping rules and their precedence, timing, the Result it builds."""

from __future__ import annotations

import math
import time

import pytest

from optarium._core.solver import SolverLoop


def _halving(loop: SolverLoop, x0: float = 1.0, factor: float = 0.5, sleep: float = 0.0):
    """x <- factor * x; records objective x^2 and residual |x|; returns the Result."""
    x = x0

    def evaluate(k: int) -> dict[str, float]:
        time.sleep(sleep)
        return {"objective": x * x, "residual": abs(x)}

    for _ in loop.iterate(evaluate):
        x = factor * x
    return loop.result(x, value=lambda: x * x)


def test_records_start_every_k_and_the_last_iteration() -> None:
    res = _halving(SolverLoop(10, record_every=4))
    assert res.status == "max_iter" and res.n_iter == 10
    assert res.history.steps == (0, 4, 8, 10)
    assert res.history.last("residual") == pytest.approx(2.0**-10) and res.value == pytest.approx(4.0**-10)


def test_converged_on_the_first_recorded_row_within_tol() -> None:
    res = _halving(SolverLoop(100, tol=1e-3, criterion="residual", record_every=3))
    assert res.status == "converged"
    assert res.n_iter == 12 and res.history.steps[-1] == 12  # 2^-9 > 1e-3 >= 2^-10, first record at 12
    assert res.history.last("residual") <= 1e-3
    assert _halving(SolverLoop(100, tol=2.0)).n_iter == 0  # the start already meets the tolerance


def test_diverged_on_non_finite_or_blow_up() -> None:
    res = _halving(SolverLoop(50), factor=100.0)
    assert res.status == "diverged" and res.n_iter == 4  # f_3 = 1e12 is not above 1e12 * f_0, f_4 is
    nan = _halving(SolverLoop(50, blowup=None), x0=math.nan)
    assert nan.status == "diverged" and nan.n_iter == 0 and nan.value == math.inf
    watched = SolverLoop(5, watch=("objective",), blowup=None)
    for _ in watched.iterate(lambda k: {"objective": 1.0, "other": math.nan}):
        pass
    assert watched.result(0.0, 1.0).status == "max_iter"  # "other" is not watched


def test_timeout_counts_solver_time_only() -> None:
    res = _halving(SolverLoop(10**6, time_limit_s=0.0))
    assert res.status == "timeout" and res.n_iter == 1 and res.history.steps == (0, 1)
    slow_eval = _halving(SolverLoop(5, time_limit_s=0.5), sleep=0.05)
    assert slow_eval.status == "max_iter" and slow_eval.wall_time_s < 0.05  # evaluation excluded
    calls: list[bool] = []
    agreed = _halving(SolverLoop(10, time_limit_s=1e9, agree=lambda f: calls.append(f) or True))
    assert agreed.status == "timeout" and agreed.n_iter == 1 and calls == [False]
    plain = _halving(SolverLoop(3, agree=lambda f: calls.append(f) or True))
    assert plain.status == "max_iter" and calls == [False]  # agree is only asked with a time budget


def test_a_row_decision_beats_the_budget_and_stop_requests_a_status() -> None:
    res = _halving(SolverLoop(4, tol=0.07))  # 2^-4 = 0.0625 <= 0.07 at the last iteration
    assert res.status == "converged" and res.n_iter == 4
    loop = SolverLoop(100, record_every=50)
    for k in loop.iterate(lambda k: {"objective": 1.0}):
        if k == 7:
            loop.stop("converged")
    res = loop.result(None, 1.0)
    assert res.status == "converged" and res.n_iter == 7 and res.history.steps == (0, 7)


def test_result_rules_and_misuse() -> None:
    loop = SolverLoop(0)
    for _ in loop.iterate():
        raise AssertionError("max_iter=0 runs no iteration")
    res = loop.result(1.0, math.nan)
    assert res.status == "diverged" and res.value == math.inf and res.n_iter == 0
    broken = SolverLoop(5)
    for _ in broken.iterate(lambda k: {"objective": 1.0}):
        break
    with pytest.raises(RuntimeError, match="stop"):
        broken.result(None, 0.0)
    missing = SolverLoop(5, tol=1e-3, criterion="gap")
    with pytest.raises(KeyError, match="criterion"):
        for _ in missing.iterate(lambda k: {"objective": 1.0}):
            pass


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"max_iter": -1}, "max_iter"),
        ({"max_iter": 1.5}, "max_iter"),
        ({"tol": -1.0}, "tol"),
        ({"record_every": 0}, "record_every"),
        ({"time_limit_s": -1.0}, "time_limit_s"),
        ({"blowup": 0.0}, "blowup"),
    ],
)
def test_bad_arguments_name_themselves(kwargs: dict[str, object], name: str) -> None:
    args = {"max_iter": 3, **kwargs}
    with pytest.raises((ValueError, TypeError), match=rf"^{name}\b"):
        SolverLoop(**args)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^status"):
        SolverLoop(3).stop("done")
