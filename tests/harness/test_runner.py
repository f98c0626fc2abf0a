"""The runner: unit statuses, storage, reuse, timing that excludes evaluation, interruption, verdicts."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from optarium.harness import experiment as experiment_mod
from optarium.harness.experiment import Experiment, Verdict
from optarium.harness.runner import RunInterrupted, run_experiment
from optarium.harness.stats import paired_effect, records_final

CALLS: list[tuple[str, int]] = []
TOY_SLUG = "lion-vr"  # any registered slug without an experiment of its own


def _run(ctx: Any, method: str, seed: int, config: Mapping[str, Any]) -> None:
    CALLS.append((method, seed))
    if method == "interrupt" and seed == 1:
        raise KeyboardInterrupt
    for step in range(1, 4):
        if method == "bad" and step == 2:
            raise RuntimeError("boom in bad")
        if method == "slow":  # 0.3 CPU-s per step: past the 0.5 s limit in CPU and wall time at step 2
            t0 = time.process_time()
            while time.process_time() - t0 < 0.3:
                pass
        if method == "waits":  # little CPU: stands in for a unit on a loaded machine (wall time only grows)
            time.sleep(0.3)
        if method == "hangs":  # past the wall backstop (4 x 0.5 s) without using CPU
            time.sleep(0.8)
        value = (
            float("nan") if method == "nan" and step == 3 else 1.0 / step + (0.5 if method == "base" else 0.0)
        )
        ctx.log(step, loss=value + 0.01 * seed)
        with ctx.evaluating():
            time.sleep(0.05 if method == "good" else 0.0)


def _decide(records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> Verdict:
    eff = paired_effect(records_final(records, "loss", "good"), records_final(records, "loss", "base"))
    return Verdict(eff.outcome(), eff.figures(), "toy")


def _plot(records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> dict[str, Any]:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(2, 2))
    fig.subplots().plot([1, 2], [3, 4])
    return {"toy": fig}


def _toy(methods: Sequence[str], seeds: int = 2, **extra: Any) -> Experiment:
    cfg = {"seeds": seeds, "unit_timeout_s": 0.5, **extra}
    return Experiment(
        slug=TOY_SLUG,
        claim="good beats base",
        rule="paired 2 SE",
        methods=methods,
        baselines=["base"] if "base" in methods else [],
        configs={"smoke": cfg, "quick": cfg, "full": cfg},
        run=_run,
        decide=_decide,
        plot=_plot,
    )


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    CALLS.clear()

    def install(exp: Experiment) -> Experiment:
        monkeypatch.setitem(experiment_mod._REGISTRY, TOY_SLUG, exp)
        return exp

    yield install


def test_statuses_records_and_verdict(tmp_path: Path, toy: Any) -> None:
    toy(_toy(["good", "base", "bad", "nan", "slow"], seeds=3))
    out = run_experiment(TOY_SLUG, "quick", out=tmp_path)
    status = {(u["method"], u["seed"]): u["status"] for u in out.units}
    assert {status[("good", s)] for s in range(3)} == {"done"}
    assert {status[("bad", s)] for s in range(3)} == {"error"}
    assert {status[("nan", s)] for s in range(3)} == {"diverged"}
    assert {status[("slow", s)] for s in range(3)} == {"timeout"}
    bad = next(u for u in out.units if u["method"] == "bad")
    assert "boom in bad" in bad["error"] and "Traceback" in bad["error"]
    # the crash of one method loses nothing of the others
    assert out.summary["methods"]["good"]["final"]["loss"]["n"] == 3
    assert out.summary["methods"]["good"]["final"]["loss"]["mean"] == pytest.approx(1 / 3 + 0.01)
    # good is 0.5 lower than base on every seed, but units failed: never "reproduced" on incomplete runs
    assert out.verdict.outcome == "inconclusive"
    assert out.verdict.figures["units_not_done"] == 9
    assert "did not finish" in out.verdict.summary and out.verdict.summary.endswith("toy")
    for name in (
        "config.json",
        "environment.json",
        "records.jsonl",
        "units.jsonl",
        "summary.json",
        "verdict.json",
    ):
        assert (out.run_dir / name).exists(), name
    assert (out.run_dir / "figures" / "toy.png").stat().st_size > 100
    env = json.loads((out.run_dir / "environment.json").read_text())
    assert {"python", "cpu", "versions", "git_revision", "torch_threads"} <= set(env)


def test_time_limit_counts_cpu_time_with_a_wall_backstop(tmp_path: Path, toy: Any) -> None:
    # 0.9 s of wall time at almost no CPU (a loaded machine) is within the 0.5 s limit; 2.4 s of wall time is
    # past the backstop (4 x 0.5 s) whatever the CPU time; a unit burning CPU times out at the limit
    toy(_toy(["waits", "hangs", "slow"], seeds=1))
    out = run_experiment(TOY_SLUG, "quick", out=tmp_path)
    status = {u["method"]: u for u in out.units}
    assert status["waits"]["status"] == "done" and status["waits"]["wall_seconds"] > 0.5
    assert status["hangs"]["status"] == "timeout" and "backstop 2 s" in status["hangs"]["error"]
    assert status["slow"]["status"] == "timeout"
    assert status["slow"]["wall_seconds"] < 2.0  # stopped by CPU and wall time, not by the backstop


def test_complete_runs_reach_reproduced(tmp_path: Path, toy: Any) -> None:
    toy(_toy(["good", "base"], seeds=3))
    out = run_experiment(TOY_SLUG, "quick", out=tmp_path)
    assert out.verdict.outcome == "reproduced"


def test_training_time_excludes_evaluation(tmp_path: Path, toy: Any) -> None:
    toy(_toy(["good", "base"], seeds=1))
    out = run_experiment(TOY_SLUG, "quick", out=tmp_path)
    good = next(u for u in out.units if u["method"] == "good")
    assert good["wall_seconds"] >= 0.15  # three evaluations of 0.05 s
    assert good["seconds"] < 0.1


def test_rerun_reuses_finished_units_and_force_reruns_all(tmp_path: Path, toy: Any) -> None:
    toy(_toy(["good", "base", "bad", "nan"], seeds=2))
    first = run_experiment(TOY_SLUG, "quick", out=tmp_path)
    assert len(CALLS) == 8
    CALLS.clear()
    again = run_experiment(TOY_SLUG, "quick", out=tmp_path)
    assert again.run_dir == first.run_dir
    assert sorted(CALLS) == [("bad", 0), ("bad", 1)]  # done and diverged units are reused
    assert again.reused == 6
    lines = (first.run_dir / "records.jsonl").read_text().splitlines()
    good_lines = [json.loads(x) for x in lines if json.loads(x)["method"] == "good"]
    assert len(good_lines) == 6  # not duplicated by the re-run
    CALLS.clear()
    run_experiment(TOY_SLUG, "quick", out=tmp_path, force=True)
    assert len(CALLS) == 8


def test_changed_config_gets_a_new_run(tmp_path: Path, toy: Any) -> None:
    toy(_toy(["good", "base"], seeds=2))
    a = run_experiment(TOY_SLUG, "quick", out=tmp_path)
    b = run_experiment(TOY_SLUG, "quick", out=tmp_path, seeds=3)
    assert a.run_dir != b.run_dir
    assert len(b.units) == 6


def test_world_size_reaches_distributed_units_and_changes_the_run(tmp_path: Path, toy: Any) -> None:
    exp = _toy(["good", "base"], seeds=1)
    toy(Experiment(**{**exp.__dict__, "distributed_methods": ["good"]}))
    a = run_experiment(TOY_SLUG, "quick", out=tmp_path)
    b = run_experiment(TOY_SLUG, "quick", out=tmp_path, world_size=1)
    c = run_experiment(TOY_SLUG, "quick", out=tmp_path, world_size=3)
    assert a.run_dir == b.run_dir and a.run_dir != c.run_dir  # 1 process is the default run
    assert "world_size" not in json.loads((a.run_dir / "config.json").read_text())["config"]
    assert json.loads((c.run_dir / "config.json").read_text())["config"]["world_size"] == 3
    with pytest.raises(ValueError, match="distributed_methods"):
        Experiment(**{**exp.__dict__, "distributed_methods": ["nope"]})
    toy(exp)
    with pytest.raises(ValueError, match=r"^world_size: .* no distributed methods"):
        run_experiment(TOY_SLUG, "quick", out=tmp_path, world_size=2)


def test_smoke_never_claims_a_verdict(tmp_path: Path, toy: Any) -> None:
    toy(_toy(["good", "base"], seeds=2))
    out = run_experiment(TOY_SLUG, "smoke", out=tmp_path)
    assert out.verdict.outcome == "no verdict"
    assert "reproduced" in out.verdict.summary  # what the rule would have said is still shown


def test_interrupt_keeps_finished_units(tmp_path: Path, toy: Any) -> None:
    toy(_toy(["interrupt"], seeds=3))
    with pytest.raises(RunInterrupted) as info:
        run_experiment(TOY_SLUG, "quick", out=tmp_path)
    assert info.value.kept == 1
    units = [json.loads(x) for x in (info.value.run_dir / "units.jsonl").read_text().splitlines()]
    assert [(u["method"], u["seed"], u["status"]) for u in units] == [("interrupt", 0, "done")]


def test_experiment_definition_is_validated() -> None:
    with pytest.raises(ValueError, match="seeds"):
        Experiment(
            slug=TOY_SLUG,
            claim="c",
            rule="r",
            methods=["a"],
            baselines=[],
            configs={"smoke": {"seeds": 0}, "quick": {"seeds": 1}, "full": {"seeds": 1}},
            run=_run,
            decide=_decide,
        )
    with pytest.raises(KeyError):
        _toy(["a"]).__class__(
            slug="no-such-slug",
            claim="c",
            rule="r",
            methods=["a"],
            baselines=[],
            configs={"smoke": {"seeds": 1}, "quick": {"seeds": 1}, "full": {"seeds": 1}},
            run=_run,
            decide=_decide,
        )
    with pytest.raises(ValueError, match="baselines"):
        _toy(["a"]).__class__(
            slug=TOY_SLUG,
            claim="c",
            rule="r",
            methods=["a"],
            baselines=["zzz"],
            configs={"smoke": {"seeds": 1}, "quick": {"seeds": 1}, "full": {"seeds": 1}},
            run=_run,
            decide=_decide,
        )


def test_a_dying_worker_costs_only_its_own_unit() -> None:
    """A worker killed mid-unit breaks the pool; only that unit is recorded as an error, the rest finish."""
    from optarium.harness.runner import _run_pool
    from optarium.testing.faults import die_on_seed_one

    got: list[dict[str, Any]] = []
    _run_pool(
        TOY_SLUG, "smoke", {}, [("m", s) for s in range(4)], 2, lambda u, r: got.append(u), die_on_seed_one
    )
    status = {u["seed"]: u["status"] for u in got}
    assert status == {0: "done", 1: "error", 2: "done", 3: "done"}
    assert "worker process died" in next(u for u in got if u["seed"] == 1)["error"]


def test_log_result_logs_a_solver_trace_and_its_final_status_in_one_line() -> None:
    from optarium._core.result import Result, Trace
    from optarium.harness.runner import RunContext

    ctx = RunContext("dual", 3, "smoke", timeout_s=60.0)
    ctx.stopwatch.start()
    trace = Trace.from_rows([{"step": 0, "gap": 1.0}, {"step": 4, "gap": float("nan")}])
    res = Result(x=None, value=float("inf"), status="diverged", n_iter=4, history=trace, wall_time_s=0.5)
    ctx.log_result(res, prefix="acc_", kappa=10.0)
    assert [r["step"] for r in ctx.records] == [0, 4, 4]
    first, second, final = ctx.records
    assert first["acc_gap"] == 1.0 and first["kappa"] == 10.0 and first["method"] == "dual"
    assert second["acc_gap"] != second["acc_gap"]  # NaN kept, not raised as a divergence of the unit
    assert final["acc_solver_status"] == "diverged" and final["acc_n_iter"] == 4 and final["acc_final"] == 1
    assert final["acc_value"] == float("inf") and final["acc_wall_time_s"] == 0.5 and final["kappa"] == 10.0
    assert "status" not in final  # the unit's status is set by the runner, never by the solver
    with pytest.raises(TypeError, match=r"^result"):
        ctx.log_result({"x": 1})
