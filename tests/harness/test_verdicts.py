"""The verdict toolkit: record queries, combining, the paired and slope rules, and the standard figures."""

from __future__ import annotations

import math

import pytest

from optarium.harness import figures as vf
from optarium.harness import verdicts as v
from optarium.harness.stats import paired_effect, records_final

RECORDS = [
    {"method": "a", "seed": 0, "step": 1, "loss": 3.0, "problem": 0, "status": "done"},
    {"method": "a", "seed": 0, "step": 2, "loss": 2.0, "problem": 0, "status": "done"},
    {"method": "a", "seed": 0, "step": 2, "loss": 1.5, "problem": 1, "status": "done"},
    {"method": "a", "seed": 1, "step": 1, "loss": 4.0, "problem": 0, "status": "done"},
    {"method": "a", "seed": 1, "step": 2, "loss": None, "problem": 0, "status": "done"},
    {"method": "a", "seed": 2, "step": 2, "loss": 0.1, "problem": 0, "status": "diverged"},
    {"method": "b", "seed": 0, "step": 2, "loss": 2.5, "problem": 0.0, "status": "done"},
]


def test_select_filters_method_metric_status_and_tags() -> None:
    assert len(v.select(RECORDS, "a")) == 5
    assert len(v.select(RECORDS, "a", done=False)) == 6
    assert len(v.select(RECORDS, "a", has="loss")) == 4
    assert [r["step"] for r in v.select(RECORDS, "a", problem=1)] == [2]
    assert len(v.select(RECORDS, None, problem=0)) == 5  # 0 == 0.0
    assert v.is_done({"method": "a"}) and not v.is_done({"status": "failed"})


def test_finals_match_records_final_and_filter_tags() -> None:
    assert v.finals(RECORDS, "loss", "a") == records_final(RECORDS, "loss", "a") == {0: 1.5, 1: 4.0}
    assert v.finals(RECORDS, "loss", "a", problem=0) == {0: 2.0, 1: 4.0}
    assert v.last_values(RECORDS, "loss", "a", problem=0) == {0: 2.0, 1: 4.0}
    assert v.values(RECORDS, "loss", "a", problem=0) == [3.0, 2.0, 4.0]
    assert v.by_step(RECORDS, "loss", "a", problem=0) == {1: [3.0, 4.0], 2: [2.0]}
    assert v.curves(RECORDS, "loss", "a", problem=0) == {0: [(1, 3.0), (2, 2.0)], 1: [(1, 4.0)]}
    assert v.units_not_done(RECORDS) == 1


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        (["reproduced", "reproduced"], "reproduced"),
        (["reproduced", "inconclusive"], "inconclusive"),
        (["inconclusive", "not reproduced", "reproduced"], "not reproduced"),
        ([], "inconclusive"),
    ],
)
def test_combine_outcomes_default_rule(parts: list[str], expected: str) -> None:
    assert v.combine_outcomes(parts) == expected


def test_combine_outcomes_units_not_done_and_custom_rule() -> None:
    assert v.combine_outcomes(["reproduced"], units_not_done=1) == "inconclusive"
    assert v.combine_outcomes(["not reproduced"], units_not_done=2) == "not reproduced"

    def any_part(parts: list[str]) -> str:
        return "reproduced" if "reproduced" in parts else "inconclusive"

    assert v.combine_outcomes(["inconclusive", "reproduced"], rule=any_part) == "reproduced"
    with pytest.raises(ValueError, match=r"^outcomes"):
        v.combine_outcomes(["maybe"])
    with pytest.raises(ValueError, match=r"^units_not_done"):
        v.combine_outcomes(["reproduced"], units_not_done=-1)


def test_paired_verdict_figures_and_rule() -> None:
    m = {0: 1.0, 1: 1.1, 2: 0.9}
    b = {0: 2.0, 1: 2.2, 2: 1.9}
    res = v.paired_verdict(m, b, better="lower", prefix="x_", outcome_figure=True)
    eff = paired_effect(m, b, better="lower")
    assert res.outcome == "reproduced" == res.figures["x_outcome"]
    assert res.figures["x_mean_gap"] == eff.mean and res.figures["x_se"] == eff.se
    assert res.figures["x_n_pairs"] == 3 and res.figures["x_t"] == eff.t
    assert v.paired_verdict(b, m).outcome == "not reproduced"
    assert v.paired_verdict({0: 1.0}, {0: 2.0}).outcome == "inconclusive"
    assert v.side("reproduced") == "better" and v.side("not reproduced") == "worse"
    assert v.side("inconclusive") == "inconclusive"


def test_slopes() -> None:
    xs = [0.0, 1.0, 2.0, 3.0]
    assert v.ols_slope(xs, [1.0, 3.0, 5.0, 7.0]) == pytest.approx(2.0)
    assert math.isnan(v.ols_slope([1.0, 1.0], [0.0, 1.0]))
    with pytest.raises(ValueError, match=r"^ys"):
        v.ols_slope(xs, [1.0])
    fit = v.slope_fit(xs, [1.0, 2.9, 5.2, 6.9])
    assert fit.lo < fit.slope < fit.hi and fit.n == 4
    assert v.slope_verdict(fit, above=0.0).outcome == "reproduced"
    assert v.slope_verdict(fit, below=0.0).outcome == "not reproduced"
    assert v.slope_verdict(fit, below=fit.slope).outcome == "inconclusive"
    assert v.slope_verdict(v.slope_fit([0.0, 1.0], [0.0, 1.0]), below=0.0).outcome == "inconclusive"
    with pytest.raises(ValueError, match=r"^below"):
        v.slope_verdict(fit)
    m, se, half = v.mean_ci([1.0, 2.0, 3.0])
    assert m == 2.0 and half == pytest.approx(4.302652729911275 * se)
    assert math.isnan(v.mean_ci([1.0])[2])


def test_band_stats_and_figures() -> None:
    from matplotlib.figure import Figure

    data = {2: [1.0, 4.0], 1: [2.0, 2.0, 8.0]}
    steps, mid, lo, hi = vf.band_stats(data, center="geomean", band="minmax")
    assert steps == [1, 2] and mid[1] == pytest.approx(2.0) and (lo, hi) == ([2.0, 1.0], [8.0, 4.0])
    _, med, q1, q3 = vf.band_stats({0: [1.0, 2.0, 3.0, 4.0]}, center="median", band="quartiles")
    assert (med, q1, q3) == ([2.5], [1.75], [3.25])
    _, m, lo, hi = vf.band_stats({0: [1.0, 3.0], 1: [5.0]}, band="se")
    assert (m, lo, hi) == ([2.0, 5.0], [1.0, 5.0], [3.0, 5.0])  # sd sqrt(2) / sqrt(2); one seed: no band
    with pytest.raises(ValueError, match=r"^band='se'"):
        vf.band_stats(data, center="median", band="se")
    with pytest.raises(ValueError, match=r"^center"):
        vf.band_stats(data, center="mode")
    ax = Figure().subplots()
    vf.draw_band(ax, data, color="tab:blue", label="a")
    eff = paired_effect({0: 1.0, 1: 2.0}, {0: 2.0, 1: 2.5})
    vf.draw_paired_gaps(ax, [("a", eff), ("b", paired_effect({}, {}))], tick_fontsize=6)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b"]
    with pytest.raises(ValueError, match=r"^colors"):
        vf.draw_paired_gaps(ax, [("a", eff)], colors=["r", "g"])


def test_finite_mean_se_leaves_out_and_counts_non_finite_finals() -> None:
    recs = [
        {"method": "m", "seed": s, "step": 1, "x": x}
        for s, x in enumerate([1.0, 3.0, math.inf, math.nan, 2.0])
    ] + [{"method": "m", "seed": 0, "step": 0, "x": 100.0}]  # an earlier step: not a final
    m, se, n, dropped = v.finite_mean_se(recs, "x", "m")
    assert (m, n, dropped) == (2.0, 3, 2)
    assert se == pytest.approx(1.0 / math.sqrt(3))
    assert v.finite_mean_se(recs, "x", "other")[2:] == (0, 0)
