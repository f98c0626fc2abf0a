"""The Lion-VR experiment at smoke scale: it runs, records, plots and decides by its stated rule."""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

import optarium.experiments.lion_vr as exp
import optarium.experiments.lion_vr_distributed as dist
from optarium.distributed import _testing
from optarium.distributed.comm import Communicator
from optarium.distributed.launch import launch
from optarium.harness.runner import run_experiment


def _records(gaps: list[float], budget: int = 4000) -> list[dict[str, object]]:
    """Final scores where log(score_Lion) - log(score_LionVR) equals the given gap per seed."""
    recs: list[dict[str, object]] = []
    for seed, gap in enumerate(gaps):
        for method, score in (("lion", 0.7 * math.exp(gap)), ("lion-vr", 0.7)):
            recs.append(
                {
                    "method": method,
                    "seed": seed,
                    "step": budget,
                    "budget": budget,
                    "final_score": score,
                    "status": "done",
                }
            )
    return recs


def _config() -> dict[str, object]:
    return {"methods": ["lion", "lion-vr"], "budgets": [4000], "verdict_budget": 4000}


def test_smoke_run_records_plots_and_withholds_verdict(
    tmp_path: Path, check_smoke: Callable[[str, Any], None]
) -> None:
    out = run_experiment("lion-vr", "smoke", out=tmp_path, jobs=1)
    check_smoke("lion-vr", out)  # the generic checks; test_all_smoke skips this slug
    assert all(u["status"] == "done" for u in out.units), [u.get("error") for u in out.units]
    assert len(out.units) == len(exp.METHODS) * exp.CONFIGS["smoke"]["seeds"]
    assert out.verdict.outcome == "no verdict"
    assert {"vr_vs_lion_mean_gap", "vr_vs_lion_se", "vr_vs_lion_n_pairs"} <= set(out.verdict.figures)
    assert sorted(p.name for p in (out.run_dir / "figures").iterdir()) == [
        "distributed.png",
        "grad_l1_curves.png",
        "grad_l2_curves.png",
        "paired_gaps.png",
    ]
    records = [json.loads(x) for x in (out.run_dir / "records.jsonl").read_text().splitlines()]
    finals = [r for r in records if "final_score" in r]
    assert len(finals) == len(exp.CENTRAL_METHODS) * exp.CONFIGS["smoke"]["seeds"]
    # part (c): one final record per (distributed method, seed, n), carrying n and the measured bits
    dist = [r for r in records if "dist_score" in r]
    clients = exp.CONFIGS["smoke"]["dist"]["clients"]
    assert len(dist) == len(exp.DIST_METHODS) * exp.CONFIGS["smoke"]["dist"]["seeds"] * len(clients)
    d = exp.CONFIGS["smoke"]["dist"]["problem"]["dim"]
    bits = {r["method"]: r["uplink_bits_per_step"] for r in dist}
    assert bits["dist-lion"] == 32 * d and bits["dist-lion-1bit"] == d + 32 and bits["dist-adamw"] == 32 * d
    assert {r["n"] for r in dist} == set(clients)
    # equal budgets: every method ends within the budget of gradient evaluations, Lion-VR at 2T' - 1
    budget = exp.CONFIGS["smoke"]["budgets"][0]
    ends = {r["method"]: r["step"] for r in finals}
    assert ends["lion"] == budget and ends["lion-vr"] == 2 * ((budget + 1) // 2) - 1
    # the 8-configuration tuning table is logged once per method (seed 0)
    tunes = [r for r in records if "tune_score" in r]
    assert len(tunes) == 8 * len(exp.CENTRAL_METHODS)
    assert len([r for r in records if "dist_tune_score" in r]) == 4 * len(exp.DIST_METHODS)


def test_every_method_gets_the_same_tuning_budget_and_the_schedules_follow_the_spec() -> None:
    for method in exp.CENTRAL_METHODS:
        assert len(exp.hyperparameter_grid(method, 4000)) == 8
    for method in exp.DIST_METHODS:
        assert len(exp.dist_grid(method)) == 4
    steps = 2000  # Lion-VR's own step count at T = 4000
    for hp in exp.hyperparameter_grid("lion-vr-sched", 4000):
        assert hp["lr"] == pytest.approx(hp["eta0"] * steps ** (-2 / 3))
        assert 1 - hp["beta2"] == pytest.approx(min(0.5, hp["c"] * steps ** (-2 / 3)))
        assert 1 - hp["beta1"] == pytest.approx(min(1.0, 10 * (1 - hp["beta2"])))
    for hp in exp.hyperparameter_grid("lion-sched", 4000):
        assert hp["lr"] == pytest.approx(hp["eta0"] * 4000**-0.75)
        assert 1 - hp["beta2"] == pytest.approx(min(0.5, hp["c"] * 4000**-0.5))


def test_lion_and_lion_vr_units_draw_the_same_batch_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: dict[str, list[tuple[int, ...]]] = {}
    real = exp._batches

    def spy(stream_seed: int, n: int, steps: int, batch_size: int) -> torch.Tensor:
        calls.setdefault(current, []).append((stream_seed, n, steps, batch_size))
        return real(stream_seed, n, steps, batch_size)

    class Ctx:
        def log(self, *args: object, **kwargs: object) -> None:
            pass

        def evaluating(self) -> contextlib.AbstractContextManager[None]:
            return contextlib.nullcontext()

    monkeypatch.setattr(exp, "_batches", spy)
    exp._tune.cache_clear()
    config = dict(exp.CONFIGS["smoke"])
    for current in ("lion", "lion-vr"):
        exp.run(Ctx(), current, 1, config)
    assert calls["lion"] == calls["lion-vr"]  # tuning stream (seed 0), then held-out stream seed 2
    assert [c[0] for c in calls["lion"]] == [0, 2]
    assert not real(1, 100, 40, 8).equal(real(2, 100, 40, 8))
    exp._tune.cache_clear()


def test_rule_reproduced_when_lion_vr_is_lower_on_every_pair() -> None:
    v = exp.decide(_records([0.10, 0.12, 0.09, 0.11, 0.10]), _config())
    assert v.outcome == "reproduced"
    assert v.figures["vr_vs_lion_mean_gap"] == pytest.approx(0.104)


def test_rule_not_reproduced_when_lion_is_lower() -> None:
    v = exp.decide(_records([-0.20, -0.25, -0.18, -0.22, -0.21]), _config())
    assert v.outcome == "not reproduced"


def test_rule_inconclusive_for_noise_and_for_one_pair() -> None:
    assert exp.decide(_records([0.10, -0.12, 0.05, -0.02, 0.01]), _config()).outcome == "inconclusive"
    assert exp.decide(_records([0.5]), _config()).outcome == "inconclusive"
    # units that did not finish do not count
    recs = _records([0.1, 0.1, 0.1])
    for r in recs:
        r["status"] = "diverged"
    assert exp.decide(recs, _config()).figures["vr_vs_lion_n_pairs"] == 0


def test_full_scale_reports_log_log_slopes() -> None:
    budgets = [1000, 4000, 16000]
    recs: list[dict[str, object]] = []
    for seed in range(3):
        for budget in budgets:
            for method, rate in (("lion", -0.25), ("lion-vr", -1 / 3)):
                score = (1 + 0.01 * seed) * budget**rate
                recs.append(
                    {"method": method, "seed": seed, "step": budget, "budget": budget, "final_score": score}
                )
    config = {"methods": ["lion", "lion-vr"], "budgets": budgets, "verdict_budget": 4000}
    v = exp.decide(recs, config)
    assert v.figures["lion_slope"] == pytest.approx(-0.25, abs=1e-9)
    assert v.figures["lion-vr_slope"] == pytest.approx(-1 / 3, abs=1e-9)
    assert v.outcome == "reproduced"  # Lion-VR's score is lower on every seed at T = 4000


def _dist_records(rate: float, ratio: float, noise: float, up_fp: float = 6400.0) -> list[dict[str, object]]:
    """Part (c) finals: full-precision score n^rate (times seeded noise), 1-bit = ratio x full precision."""
    gen = torch.Generator().manual_seed(0)
    recs: list[dict[str, object]] = []
    for seed in range(3):
        for n in (1, 2, 4, 8, 16):
            for fp, comp in (("dist-lion", "dist-lion-1bit"), ("dist-lion-vr", "dist-lion-vr-1bit")):
                score = n**rate * math.exp(noise * float(torch.randn((), generator=gen)))
                for m, v, bits in ((fp, score, up_fp), (comp, ratio * score, 232.0)):
                    recs.append(
                        {
                            "method": m,
                            "seed": seed,
                            "step": 200,
                            "n": n,
                            "dist_score": v,
                            "uplink_bits_per_step": bits,
                            "status": "done",
                        }
                    )
    return recs


def _both_config() -> dict[str, object]:
    return {
        "methods": ["lion", "lion-vr", *exp.DIST_METHODS],
        "budgets": [4000],
        "verdict_budget": 4000,
        "dist": {"problem": {"dim": 200}},
    }


def test_distributed_rule_reproduced_not_reproduced_inconclusive() -> None:
    cfg = _both_config()
    outcome, figs, _ = exp.decide_dist(_dist_records(-0.3, 1.3, 0.05), cfg)
    assert outcome == "reproduced"
    assert (
        figs["dist-lion_slope_n"] == pytest.approx(-0.3, abs=0.05) and figs["dist-lion_slope_n_ci95_hi"] < 0
    )
    assert figs["bit_saving_lion"] == pytest.approx(6400 / 232) and figs[
        "bit_saving_expected"
    ] == pytest.approx(6400 / 232)
    assert figs["dist-lion-1bit_over_dist-lion_n16"] == pytest.approx(1.3)
    assert "accounting check" in exp.decide_dist(_dist_records(-0.3, 1.3, 0.05), cfg)[2]
    assert exp.decide_dist(_dist_records(-0.3, 3.0, 0.05), cfg)[0] == "not reproduced"  # 1-bit > 2x worse
    assert exp.decide_dist(_dist_records(+0.3, 1.3, 0.05), cfg)[0] == "not reproduced"  # error grows with n
    assert exp.decide_dist(_dist_records(-0.3, 1.3, 0.05, up_fp=1000.0), cfg)[0] == "not reproduced"  # saving
    assert exp.decide_dist(_dist_records(-0.02, 1.3, 0.5), cfg)[0] == "inconclusive"  # slope CI covers 0
    assert exp.decide_dist([], cfg)[0] == "inconclusive"


def test_overall_outcome_needs_both_parts() -> None:
    cfg = _both_config()
    central_yes = _records([0.10, 0.12, 0.09, 0.11, 0.10])
    central_no = _records([-0.20, -0.25, -0.18, -0.22, -0.21])
    central_unsure = _records([0.10, -0.12, 0.05, -0.02, 0.01])
    dist_yes = _dist_records(-0.3, 1.3, 0.05)
    dist_no = _dist_records(-0.3, 3.0, 0.05)
    v = exp.decide(central_yes + dist_yes, cfg)
    assert v.outcome == "reproduced"
    assert (
        v.figures["centralised_outcome"] == "reproduced" and v.figures["distributed_outcome"] == "reproduced"
    )
    assert exp.decide(central_yes + dist_no, cfg).outcome == "not reproduced"
    assert exp.decide(central_no + dist_yes, cfg).outcome == "not reproduced"
    assert exp.decide(central_unsure + dist_yes, cfg).outcome == "inconclusive"
    # the centralised figures keep their names and values
    assert v.figures["vr_vs_lion_mean_gap"] == pytest.approx(0.104)


@pytest.mark.parametrize("method", ["dist-lion-1bit", "dist-adamw"])
def test_distributed_tuning_runs_each_configuration_alone(method: str) -> None:
    """Each lr is tuned with its own optimizer (no shared radius or random stream): the tuning scores are
    those of the single runs that the held-out units perform."""
    dc = exp.CONFIGS["smoke"]["dist"]
    pc = dc["problem"]
    problem = (pc["n"], pc["dim"], pc["alpha"], pc["flip"], pc["data_seed"])
    run = (int(dc["steps"]), int(dc["batch_size"]), int(dc["record_every"]))
    best, scores = dist._dist_tune.__wrapped__(method, 2, problem, *run)
    single = []
    for hp in exp.dist_grid(method):
        res = dist._dist_train(Communicator.local(2), method, [hp], problem, 0, *run)
        single.append(sum(v[0] for v in res["grad_l1"][-3:]) / 3)
    assert len(scores) == 4 == len(single)
    assert list(scores) == pytest.approx(single, rel=1e-12)
    assert best == min(range(4), key=single.__getitem__)


@pytest.mark.distributed
def test_two_processes_give_the_same_iterates_and_bits() -> None:
    """The experiment's SPMD unit at world size 1 and 2 (gloo): same scores and bits (VR, full and 1-bit)."""
    problem = (60, 16, 0.1, 0.1, 0)
    plan = [(n, dist.dist_grid("dist-lion")[2]) for n in (3, 4)]  # 3: uneven blocks (2 + 1)
    methods = ("dist-lion-vr", "dist-lion-vr-1bit")  # full-precision and 1-bit paths, both with VR
    ref = {m: dist._dist_unit(Communicator.local(1), m, plan, problem, 1, 15, 4, 5) for m in methods}
    calls = [(dist._dist_unit, (m, plan, problem, 1, 15, 4, 5)) for m in methods]
    calls.append((_testing.lion_probe, (1,)))  # the 1-bit server on rank 1 instead of rank 0
    two = launch(_testing.run_many, 2, calls, n_clients=2, timeout_s=30)
    server0 = _testing.lion_probe(Communicator.local(2), 0)
    for rank in range(2):
        assert torch.equal(two[rank][-1], server0)
        for i, m in enumerate(methods):
            for a, b in zip(ref[m], two[rank][i], strict=True):
                torch.testing.assert_close(
                    torch.tensor(a["grad_l1"]), torch.tensor(b["grad_l1"]), rtol=1e-5, atol=1e-6
                )
                assert a["uplink_bits_per_step"] == b["uplink_bits_per_step"]
