"""Stored runs as DataFrames: one row per record joined with its unit, failures kept, finals equal to the
runner's own summary, identifiers never treated as metrics."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from optarium.harness import experiment as experiment_mod
from optarium.harness.experiment import Experiment, Verdict
from optarium.harness.results import RUN_COLUMNS, final_values, is_identifier, load_runs, summarize_finals
from optarium.harness.runner import run_experiment

SLUG = "lion-vr"  # a registered slug; the toy experiment stands in for its experiment


def _run(ctx: Any, method: str, seed: int, config: Mapping[str, Any]) -> None:
    if method == "bad":
        raise RuntimeError("boom")
    for step in range(1, 4):
        ctx.log(step, check_finite=False, loss=1.0 / step + seed, eval_index=step)
    ctx.log(3, acc=0.5 + 0.1 * seed)  # a metric logged at one step only
    if method == "nan":
        ctx.log(4, check_finite=False, loss=math.nan)


def _decide(records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> Verdict:
    return Verdict("reproduced", {"n": len(records)}, "toy")


@pytest.fixture
def runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    exp = Experiment(
        slug=SLUG,
        claim="toy",
        rule="always reproduced",
        methods=["good", "nan", "bad"],
        baselines=[],
        configs={"smoke": {"seeds": 2}, "quick": {"seeds": 3}, "full": {"seeds": 3}},
        run=_run,
        decide=_decide,
    )
    monkeypatch.setitem(experiment_mod._REGISTRY, SLUG, exp)
    root = tmp_path / "runs"
    run_experiment(SLUG, "smoke", out=root)
    run_experiment(SLUG, "quick", out=root)
    return root


def test_rows_are_records_joined_with_their_units_and_failures_stay_visible(runs: Path) -> None:
    frame = load_runs(runs, scale="smoke")
    assert list(frame.columns[: len(RUN_COLUMNS)]) == list(RUN_COLUMNS)
    assert {"loss", "acc", "eval_index"} <= set(frame.columns)
    assert set(frame["scale"]) == {"smoke"} and set(frame["slug"]) == {SLUG}
    good = frame[(frame.method == "good") & (frame.seed == 1)]
    assert list(good.step) == [1, 2, 3, 3] and good.loss.iloc[0] == pytest.approx(2.0)
    assert set(good.unit_status) == {"done"}
    bad = frame[frame.method == "bad"]
    assert len(bad) == 2 and bad.step.isna().all() and set(bad.unit_status) == {"error"}
    assert str(frame["step"].dtype) == "Int64" and frame["seed"].dtype == "int64"
    nan = frame[(frame.method == "nan") & (frame.step == 4)]
    # a logged NaN is kept as measured, and is not confused with a metric the record did not log
    assert not nan.loss.isna().any() and np.isnan(nan.loss.to_numpy(dtype="float64")).all()
    assert good.acc.isna().tolist() == [True, True, True, False]


def test_filters_and_the_latest_run(runs: Path) -> None:
    both = load_runs(runs)
    assert set(both.scale) == {"smoke", "quick"}
    assert set(load_runs(runs, scale=["quick"]).seed) == {0, 1, 2}
    one_run = next((runs / SLUG / "quick").iterdir())
    assert load_runs(one_run).equals(load_runs(runs, scale="quick"))
    assert load_runs(runs, slug="gradpower").empty
    run_experiment(SLUG, "quick", out=runs, seeds=2)  # a second quick run (different config)
    assert load_runs(runs, scale="quick").run_id.nunique() == 1
    assert load_runs(runs, scale="quick", latest=False).run_id.nunique() == 2
    with pytest.raises(ValueError, match="path"):
        load_runs(runs / "missing")


def test_finals_match_the_runner_summary_and_skip_identifiers(runs: Path) -> None:
    frame = load_runs(runs, scale="quick")
    finals = final_values(frame)
    assert "eval_index" not in set(finals.metric)
    stats = summarize_finals(finals)
    run_dir = runs / SLUG / "quick" / frame.run_id.iloc[0]
    summary = pd.read_json(run_dir / "summary.json", typ="series")["methods"]
    for row in stats.to_dict("records"):
        ref = summary.get(row["method"], {}).get("final", {}).get(row["metric"])
        assert row["n"] == 0 or ref is not None, (row, summary)
        if row["n"] == 0:
            assert ref is None
            continue
        assert row["mean"] == pytest.approx(ref["mean"]) and row["n"] == ref["n"], row
    nan_loss = stats[(stats.method == "nan") & (stats.metric == "loss")].iloc[0]
    assert nan_loss.n == 0 and nan_loss.n_nonfinite == 3
    assert "bad" not in set(stats.method)  # a failed unit has no final value
    acc = stats[(stats.method == "good") & (stats.metric == "acc")].iloc[0]
    assert acc["mean"] == pytest.approx(0.6) and acc["n"] == 3


def test_identifier_names() -> None:
    for name in (
        "eval_index",
        "problem",
        "client_id",
        "seed",
        "step",
        "tuned_index",
        "idx",
        "final",
        "inner_final",
    ):
        assert is_identifier(name), name
    for name in ("loss", "index_error", "identity_gap", "ideal", "val_loss", "final_val_loss"):
        assert not is_identifier(name), name
