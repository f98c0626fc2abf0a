"""The metasg-saea experiment's rule on hand-built records: each outcome, runs without a feasible point."""

from __future__ import annotations

import math
from typing import Any

import pytest

from optarium.experiments.metasg_saea import CONFIGS, decide

QUICK = CONFIGS["quick"]


def _records(igd: dict[str, list[float | None]]) -> list[dict[str, Any]]:
    out = []
    for m, vals in igd.items():
        for s, v in enumerate(vals):
            rec: dict[str, Any] = {"method": m, "seed": s, "step": 120, "status": "done"}
            rec["c2dtlz2_n_feasible"] = 0 if v is None else 5
            rec["c2dtlz2_first_feasible"] = -1 if v is None else 10 + s
            if v is not None:  # undefined IGD is not logged
                rec["c2dtlz2_igd"] = v
            out.append(rec)
    return out


def _base(linear: list[float | None], tau0: list[float | None]) -> dict[str, list[float | None]]:
    return {"saea-linear": linear, "saea-tau0": tau0, "nsga2": [0.2] * 5, "ctaea": [0.3] * 5}


@pytest.mark.parametrize(
    ("linear", "tau0", "outcome"),
    [
        ([0.01, 0.012, 0.011, 0.009, 0.01], [0.05, 0.06, 0.04, 0.05, 0.055], "reproduced"),
        ([0.05, 0.06, 0.04, 0.05, 0.055], [0.01, 0.012, 0.011, 0.009, 0.01], "not reproduced"),
        ([0.01, 0.05, 0.011, 0.06, 0.01], [0.05, 0.01, 0.04, 0.012, 0.011], "inconclusive"),
    ],
)
def test_rule_outcomes(linear: list[float], tau0: list[float], outcome: str) -> None:
    v = decide(_records(_base(linear, tau0)), QUICK)
    assert v.outcome == outcome
    assert v.figures["c2dtlz2_n_pairs"] == 5
    assert v.figures["c2dtlz2_linear_vs_nsga2_gap"] == pytest.approx(
        math.log(0.2) - sum(math.log(x) for x in linear) / 5
    )


def test_infeasible_runs_get_twice_the_worst_igd() -> None:
    v = decide(_records(_base([0.01] * 5, [None, 0.05, 0.06, 0.05, 0.04])), QUICK)
    assert v.figures["c2dtlz2_saea-tau0_runs_without_feasible"] == 1
    assert v.figures["c2dtlz2_n_pairs"] == 5
    worst = 2 * 0.3  # the largest IGD observed on the problem (C-TAEA's) doubled
    expected = (math.log(worst) + sum(math.log(x) for x in (0.05, 0.06, 0.05, 0.04))) / 5 - math.log(0.01)
    assert v.figures["c2dtlz2_mean_gap"] == pytest.approx(expected)
    assert v.outcome == "reproduced"


# --------------------------------------------------------------------------------------- full protocol
FULL = CONFIGS["full"]
_TEST_METHODS = ("saea-learned", "saea-learned-gauss", "saea-linear", "saea-tau0", "saea-random", "nsga2")


def _full_records(igd: dict[str, dict[str, list[float | None]]]) -> list[dict[str, Any]]:
    """problem -> method -> per-seed IGD (None: no feasible point), as the test units log them."""
    out = []
    for name, by_method in igd.items():
        for m, vals in by_method.items():
            for s, v in enumerate(vals):
                rec: dict[str, Any] = {"method": m, "seed": s, "step": 120, "status": "done"}
                rec[f"{name}_n_feasible"] = 0 if v is None else 5
                rec[f"{name}_first_feasible"] = -1 if v is None else 10
                if v is not None:
                    rec[f"{name}_igd"] = v
                out.append(rec)
    return out


def _problem(learned: float, linear: float, tau0: float, n: int = 10) -> dict[str, list[float | None]]:
    """Per-seed IGDs with a small seed-dependent wobble (so every paired SE is positive)."""
    wob = [1 + 0.05 * ((s * 7) % 5 - 2) for s in range(n)]
    arms = {"saea-learned": learned, "saea-linear": linear, "saea-tau0": tau0}
    out: dict[str, list[float | None]] = {
        m: [v * w ** (i + 1) for w in wob] for i, (m, v) in enumerate(arms.items())
    }
    for m in ("saea-learned-gauss", "saea-random", "nsga2"):
        out[m] = [0.5] * n
    return out


@pytest.mark.parametrize(
    ("problems", "outcome", "won", "lost"),
    [
        ([(0.01, 0.05, 0.05), (0.01, 0.05, 0.05), (0.05, 0.05, 0.05)], "reproduced", 2, 0),
        ([(0.01, 0.05, 0.05), (0.01, 0.05, 0.05), (0.05, 0.01, 0.05)], "inconclusive", 2, 1),
        ([(0.01, 0.05, 0.05), (0.01, 0.05, 0.01), (0.05, 0.05, 0.05)], "inconclusive", 1, 0),
        ([(0.05, 0.01, 0.05), (0.05, 0.05, 0.01), (0.01, 0.05, 0.05)], "not reproduced", 1, 2),
    ],
)
def test_full_rule_outcomes(
    problems: list[tuple[float, float, float]], outcome: str, won: int, lost: int
) -> None:
    """Win: better than linear and tau = 0 by > 2 SE; loss: > 2 SE worse than either; >= 2 wins and no loss
    reproduces, >= 2 losses refute."""
    names = FULL["problems"]
    v = decide(_full_records({n: _problem(*p) for n, p in zip(names, problems, strict=True)}), FULL)
    assert (v.outcome, v.figures["problems_won"], v.figures["problems_lost"]) == (outcome, won, lost)
    first = names[0]
    assert v.figures[f"{first}_learned_vs_linear_n_pairs"] == 10
    assert v.figures[f"{first}_learned_vs_nsga2_gap"] == pytest.approx(
        math.log(0.5) - v.figures[f"{first}_saea-learned_mean_log_igd"]
    )
    assert v.figures["learned_policy_matches_meta"] == 0  # no meta-training records here


def test_full_rule_counts_runs_without_feasible_point() -> None:
    names = FULL["problems"]
    recs = {n: _problem(0.01, 0.05, 0.05) for n in names}
    recs[names[0]]["saea-tau0"][3] = None
    v = decide(_full_records(recs), FULL)
    assert v.figures[f"{names[0]}_saea-tau0_runs_without_feasible"] == 1
    logs = [r for r in _full_records(recs) if r["method"] != "saea-tau0" or r["seed"] != 3]
    worst = max(r[f"{names[0]}_igd"] for r in logs if f"{names[0]}_igd" in r)
    assert worst == 0.5  # the largest IGD observed on the problem: the reported arms' 0.5
    # the infeasible run enters the paired difference at log(2 x 0.5)
    base = decide(_full_records({n: _problem(0.01, 0.05, 0.05) for n in names}), FULL)
    tau0 = _problem(0.01, 0.05, 0.05)["saea-tau0"]
    shift = (math.log(1.0) - math.log(tau0[3])) / 10  # type: ignore[arg-type]
    assert v.figures[f"{names[0]}_learned_vs_tau0_mean_gap"] == pytest.approx(
        base.figures[f"{names[0]}_learned_vs_tau0_mean_gap"] + shift
    )


def test_full_problems_are_held_out_and_eligibility_is_enforced() -> None:
    from optarium.experiments.metasg_saea import _eligible

    assert len(FULL["problems"]) == 3 and len(FULL["train_problems"]) == 4
    assert not set(FULL["problems"]) & set(FULL["train_problems"])
    cfg = {"feasible_samples": 20000, "feasible_range": [0.005, 0.6]}
    _, frac = _eligible("c2dtlz2", cfg)
    assert 0.05 < frac < 0.075  # 6.1 % at 1e5 samples
    with pytest.raises(ValueError, match="feasible fraction"):
        _eligible("c2dtlz2", {**cfg, "feasible_range": [0.1, 0.6]})


def test_meta_selection_penalises_infeasible_runs_and_breaks_ties_low() -> None:
    from optarium.experiments.metasg_saea import _meta_select

    cfg = {"train_problems": ["a", "b"], "meta_episodes": 1}
    runs = {
        0: {"a_e0_igd": 0.1, "b_e0_igd": 2.0},
        1: {"a_e0_igd": math.nan, "b_e0_igd": 1.0},  # a: no feasible point -> 2 x 0.3
        2: {"a_e0_igd": 0.3, "b_e0_igd": 0.5},
        3: {"a_e0_igd": 0.3, "b_e0_igd": 0.5},
    }
    best, scores, infeasible = _meta_select(runs, cfg)
    assert infeasible == 1 and best == 2
    assert scores[1] == pytest.approx((math.log(0.6) + math.log(1.0)) / 2)
    assert scores[0] == pytest.approx((math.log(0.1) + math.log(2.0)) / 2)


def test_meta_candidate_runs_are_cached_on_disk(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import optarium.experiments.metasg_saea as exp

    monkeypatch.setenv("OPTARIUM_CACHE_DIR", str(tmp_path))
    cfg = {
        **CONFIGS["smoke"],
        "max_evals": 14,
        "pop_size": 8,
        "generations": 1,
        "feasible_samples": 2000,
        "meta_cache": True,
    }
    first = exp._candidate_runs(cfg, 1)
    assert set(first) == {"dc1dtlz1_e0_igd", "dc1dtlz1_e0_n_feasible", "dc1dtlz1_e0_jitter_fallbacks"}
    assert list((tmp_path / "metasg-saea").glob("*.json"))
    exp._CANDIDATE_RUNS.clear()

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("recomputed despite the disk cache")

    monkeypatch.setattr(exp, "_run_saea", boom)
    again = exp._candidate_runs(cfg, 1)
    assert again.keys() == first.keys()
    assert all(again[k] == first[k] or (math.isnan(again[k]) and math.isnan(first[k])) for k in first)
    exp._CANDIDATE_RUNS.clear()


def test_smoke_runs_the_full_protocol(tmp_path: Any, check_smoke: Any) -> None:
    """The smoke scale is the full protocol at tiny size: meta-training units, the learned schedule chosen
    from them, every test arm; plus the generic smoke checks."""
    from optarium.bo.metasg_saea import schedule_candidates
    from optarium.experiments.metasg_saea import _CANDIDATE_RUNS
    from optarium.harness.runner import run_experiment

    _CANDIDATE_RUNS.clear()
    out = run_experiment("metasg-saea", "smoke", out=tmp_path, jobs=1)
    check_smoke("metasg-saea", out)
    f = out.verdict.figures
    smoke = CONFIGS["smoke"]
    assert f["meta_candidates_recorded"] == smoke["meta_candidates"]
    assert f["learned_policy_matches_meta"] == 1
    best = schedule_candidates(smoke["meta_candidates"], smoke["meta_seed"])[int(f["meta_best_candidate"])]
    assert (f["learned_tau0"], f["learned_p"], f["learned_rho"]) == (best.tau0, best.p, best.rho)
    for name in [*smoke["problems"], *smoke["train_problems"]]:
        assert 0.005 <= f[f"{name}_feasible_fraction"] <= 0.6
    assert "jitter_fallbacks_total" in f
    _CANDIDATE_RUNS.clear()
