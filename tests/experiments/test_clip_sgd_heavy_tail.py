"""The clip-sgd-heavy-tail experiment at smoke scale, and its verdict rule on synthetic records."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optarium.experiments.clip_sgd_heavy_tail  # noqa: F401  (registers the experiment)
from optarium.experiments.clip_sgd_heavy_tail import CONFIGS, decide, quantile
from optarium.harness.runner import run_experiment

TAG = "ls-t1.5-T2000"
QUICK = {**CONFIGS["quick"]}


def _records(sgd: list[float], clip: list[float], start: float = 2.0) -> list[dict[str, object]]:
    recs: list[dict[str, object]] = []
    for method, vals in (("sgd", sgd), ("clip-sgd", clip)):
        for j, v in enumerate(vals):
            recs.append({"method": method, "seed": 0, "step": 2000, "status": "done", "eval_index": j,
                         f"{TAG}:last": v})  # fmt: skip
        recs.append({"method": method, "seed": 0, "step": 2000, "status": "done", f"{TAG}:start": start})
    return recs


def _heavy(n: int, median: float) -> list[float]:
    """A deterministic Pareto(1.2)-like sample: quantile u -> median * (0.5 / (1 - u)) ** (1 / 1.2)."""
    return [median * (0.5 / (1 - (i + 0.5) / n)) ** (1 / 1.2) for i in range(n)]


def _flat(n: int, median: float) -> list[float]:
    return [median * (0.9 + 0.2 * (i + 0.5) / n) for i in range(n)]


def test_smoke_run_records_plots_and_withholds_verdict(
    tmp_path: Path, check_smoke: Callable[[str, Any], None]
) -> None:
    out = run_experiment("clip-sgd-heavy-tail", "smoke", out=tmp_path, jobs=1)
    check_smoke("clip-sgd-heavy-tail", out)  # the generic checks; test_all_smoke skips this slug
    assert all(u["status"] == "done" for u in out.units), [u.get("error") for u in out.units]
    assert len(out.units) == 3 * CONFIGS["smoke"]["seeds"]
    assert out.verdict.outcome == "no verdict"
    assert "ls-t1.5-T60:clip-sgd:q99.9" in out.verdict.figures
    assert sorted(p.name for p in (out.run_dir / "figures").iterdir()) == [
        "failure_probability.png",
        "tuning.png",
    ]
    records = [json.loads(x) for x in (out.run_dir / "records.jsonl").read_text().splitlines()]
    per_seed = [r for r in records if r["method"] == "clip-sgd" and "ls-t1.5-T60:last" in r]
    assert len(per_seed) == CONFIGS["smoke"]["eval_seeds"]
    tuned = [r for r in records if r["method"] == "sgd" and "ls-t1.5-T60:tune_median" in r]
    assert len(tuned) == len(CONFIGS["smoke"]["sgd_grid"])  # same 12-setting budget as Clip-SGD
    tuned_clip = [r for r in records if r["method"] == "clip-sgd" and "ls-t1.5-T60:tune_median" in r]
    assert len(tuned_clip) == len(tuned)


def test_rule_reproduced_for_flat_clip_and_heavy_sgd() -> None:
    v = decide(_records(_heavy(1000, 0.7), _flat(1000, 0.25)), QUICK)
    assert v.outcome == "reproduced", v.summary
    assert v.figures[f"{TAG}:clip-sgd:ratio"] < 2 < 5 < v.figures[f"{TAG}:sgd:ratio"]


def test_rule_not_reproduced_when_clip_barely_moves_or_has_heavy_tails() -> None:
    # flat quantiles, but the median sits near the start: the movement control rejects it
    v = decide(_records(_heavy(1000, 0.7), _flat(1000, 1.9)), QUICK)
    assert v.outcome == "not reproduced" and v.figures[f"{TAG}:moved"] is False
    # clip has heavy tails too
    v = decide(_records(_heavy(1000, 0.7), _heavy(1000, 0.3)), QUICK)
    assert v.outcome == "not reproduced" and v.figures[f"{TAG}:flat_vs_heavy"] is False
    # SGD light-tailed: no tail gap to explain
    v = decide(_records(_flat(1000, 0.3), _flat(1000, 0.25)), QUICK)
    assert v.outcome == "not reproduced"


def test_rule_counts_divergence_and_is_inconclusive_on_small_samples() -> None:
    sgd = _flat(1000, 0.7)
    sgd[-15:] = [math.inf] * 15  # divergent runs count as +inf (1.5 % of the seeds)
    v = decide(_records(sgd, _flat(1000, 0.25)), QUICK)
    assert v.figures[f"{TAG}:sgd:n_inf"] == 15 and v.outcome == "reproduced"
    v = decide(_records(_heavy(200, 0.7), _flat(200, 0.25)), QUICK)
    assert v.outcome == "inconclusive"


def test_quantile_is_inverted_cdf_and_handles_inf() -> None:
    vals = list(range(1, 1001))
    assert quantile(vals, 0.5) == 500 and quantile(vals, 0.999) == 999 and quantile(vals, 1.0) == 1000
    assert quantile([1.0, math.inf], 0.9) == math.inf
