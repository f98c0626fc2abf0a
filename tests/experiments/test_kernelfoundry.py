"""The kernelfoundry experiment: its verdict rules on hand-built records (each outcome reachable), and the
full scale's real-timing confirmation path on tiny tasks."""

from __future__ import annotations

import contextlib
import math
import shutil
from typing import Any

import pytest

from optarium.experiments import kernelfoundry as exp
from optarium.experiments.kernelfoundry import CONFIGS, decide
from optarium.kernels import kernelfoundry as kf

CONF = CONFIGS["quick"]
FULL = CONFIGS["full"]


def _recs(gain: dict[str, float], jitter: float = 0.01, tasks=None) -> list[dict[str, Any]]:
    out = []
    for task in tasks or CONF["tasks"]:
        for seed in range(5):
            base = 6.0 + 0.1 * seed
            j = jitter if seed % 2 else -jitter
            vals = {"kernelfoundry": base + gain[task] + j, "greedy": base, "random": base - 0.01}
            for m, v in vals.items():
                out.append({"method": m, "seed": seed, "step": 60, f"{task}:best_fitness": v})
    return out


def _real(ms: dict[str, dict[str, float]]) -> list[dict[str, Any]]:
    rec: dict[str, Any] = {"method": "kernelfoundry", "seed": 0, "step": 0}
    for task, t in ms.items():
        rec[f"{task}:real:naive_ms"] = 100.0
        for m in ("kernelfoundry", "greedy", "random"):
            rec[f"{task}:real:{m}_ms"] = t.get(m, 20.0)
    return [rec]


def test_quick_covers_all_four_tasks_and_full_confirms() -> None:
    assert CONF["tasks"] == ["matmul", "softmax", "layernorm", "conv2d"] == FULL["tasks"]
    assert FULL["confirm"] and not CONF["confirm"] and FULL["budget"] == 250
    for name in CONF["tasks"]:
        assert exp._task(name).name == name
    with pytest.raises(ValueError, match="tasks"):
        exp._task("attention")


def test_quick_rule_outcomes() -> None:
    up = dict.fromkeys(CONF["tasks"], 0.5)
    assert decide(_recs(up), CONF).outcome == "reproduced"
    assert decide(_recs({**up, "conv2d": 0.0}, jitter=0.2), CONF).outcome == "inconclusive"
    v = decide(_recs({**up, "layernorm": -0.5}), CONF)
    assert v.outcome == "not reproduced" and v.figures["layernorm:vs_greedy:outcome"] == "not reproduced"
    assert v.figures["matmul:vs_random:n_pairs"] == 5


def test_full_rule_outcomes() -> None:
    up = dict.fromkeys(FULL["tasks"], 0.5)
    fast = {t: {"kernelfoundry": 10.0} for t in FULL["tasks"]}
    v = decide(_recs(up) + _real(fast), FULL)
    assert v.outcome == "reproduced" and v.figures["real_tasks_first_or_tied"] == 4
    assert v.figures["conv2d:real:kf_speedup_vs_naive"] == pytest.approx(10.0)
    # 3 of 4 tasks beaten and the fourth inconclusive, timing tied (within 5 %) on one: still reproduced
    tied = {**fast, "matmul": {"kernelfoundry": 20.9}}
    v = decide(_recs({**up, "conv2d": 0.0}, jitter=0.2) + _real(tied), FULL)
    assert v.outcome == "reproduced" and v.figures["tasks_beating_both"] == 3
    # slower beyond the band on 2 tasks (one of them an incorrect kernel, NaN): not reproduced
    slow = {**fast, "matmul": {"kernelfoundry": 21.5}, "softmax": {"kernelfoundry": math.nan}}
    assert decide(_recs(up) + _real(slow), FULL).outcome == "not reproduced"
    # slower on one task only: 3 of 4 first, still reproduced; beating both on only 2 tasks: inconclusive
    one_slow = _real({**fast, "matmul": {"kernelfoundry": 30.0}})
    assert decide(_recs(up) + one_slow, FULL).outcome == "reproduced"
    two = {**up, "conv2d": 0.0, "layernorm": 0.0}
    v = decide(_recs(two, jitter=0.2) + _real(fast), FULL)
    assert v.outcome == "inconclusive" and v.figures["tasks_losing"] == 0
    lose = {**up, "matmul": -0.5, "softmax": -0.5}
    assert decide(_recs(lose) + _real(fast), FULL).outcome == "not reproduced"
    # without the timing records the full rule cannot reproduce
    assert decide(_recs(up), FULL).outcome == "inconclusive"


class _Ctx:
    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def evaluating(self):
        return contextlib.nullcontext()

    def log(self, step: int, check_finite: bool = True, **metrics: Any) -> None:
        self.records.append({"method": "kernelfoundry", "seed": 0, "step": step, **metrics})


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not on PATH: nothing to compile")
def test_confirmation_gates_and_times_the_median_seed_kernels(monkeypatch) -> None:
    tiny = kf.KernelTask("layernorm", (32, 64), ((31, 33),), 1e-4, 1e-5)
    monkeypatch.setattr(exp, "_task", lambda name: tiny)
    ctx = _Ctx()
    config = {**FULL, "tasks": ["layernorm"], "budget": 12, "seeds": 3}
    exp._confirm(ctx, "layernorm", config)
    (rec,) = ctx.records
    fit = {s: exp._search("kernelfoundry", tiny, s, 12).value for s in range(3)}
    assert fit[int(rec["layernorm:real:median_seed"])] == sorted(fit.values())[1]
    for m in ("kernelfoundry", "greedy", "random"):
        assert rec[f"layernorm:real:{m}_perf_score"] == 5.0 and rec[f"layernorm:real:{m}_ms"] > 0
    assert rec["layernorm:real:naive_ms"] > 0
    v = decide(
        _recs(dict.fromkeys(["layernorm"], 0.5), tasks=["layernorm"]) + ctx.records,
        {**config, "tasks": ["layernorm"]},
    )
    assert v.figures["real_tasks_timed"] == 1 and "layernorm:real:kf_vs_best_other" in v.figures
