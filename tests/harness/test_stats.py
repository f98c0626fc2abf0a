"""Paired-seed statistics behind every verdict."""

from __future__ import annotations

import math

import pytest

from optarium.harness.stats import mean_sd, mean_se, paired_bootstrap, paired_effect, records_final


def test_mean_sd_matches_hand_computation() -> None:
    m, sd = mean_sd([1.0, 2.0, 4.0])
    assert m == pytest.approx(7 / 3)
    assert sd == pytest.approx(math.sqrt(((1 - 7 / 3) ** 2 + (2 - 7 / 3) ** 2 + (4 - 7 / 3) ** 2) / 2))
    assert math.isnan(mean_sd([1.0])[1])
    assert mean_se([1.0, 2.0, 4.0]) == pytest.approx((7 / 3, sd / math.sqrt(3)))
    assert math.isnan(mean_se([1.0])[1])


def test_paired_effect_gap_sign_and_se() -> None:
    method = {0: 1.0, 1: 2.0, 2: 3.0}
    baseline = {0: 1.5, 1: 2.7, 2: 3.4, 3: 9.0}  # seed 3 has no partner and is ignored
    eff = paired_effect(method, baseline, better="lower")
    assert eff.seeds == (0, 1, 2)
    assert eff.gaps == pytest.approx((0.5, 0.7, 0.4))
    m, sd = mean_sd([0.5, 0.7, 0.4])
    assert eff.mean == pytest.approx(m) and eff.se == pytest.approx(sd / math.sqrt(3))
    assert eff.outcome() == "reproduced"
    assert paired_effect(method, baseline, better="higher").outcome() == "not reproduced"


def test_outcome_rule_thresholds() -> None:
    # mean 0.1, se 0.1: within 2 SE -> inconclusive
    eff = paired_effect({0: 0.0, 1: 0.0}, {0: 0.2, 1: 0.0})
    assert eff.mean == pytest.approx(0.1) and eff.se == pytest.approx(0.1)
    assert eff.outcome(2.0) == "inconclusive"
    assert eff.outcome(0.5) == "reproduced"


def test_single_pair_is_inconclusive_even_with_large_effect() -> None:
    assert paired_effect({0: 0.0}, {0: 100.0}).outcome() == "inconclusive"


def test_invalid_arguments_name_themselves() -> None:
    with pytest.raises(ValueError, match="better"):
        paired_effect({}, {}, better="up")
    with pytest.raises(ValueError, match=r"^k:"):
        paired_effect({0: 1.0, 1: 2.0}, {0: 1.0, 1: 3.0}).outcome(0.0)


def test_records_final_takes_last_step_of_done_units_only() -> None:
    recs = [
        {"method": "a", "seed": 0, "step": 1, "loss": 5.0, "status": "done"},
        {"method": "a", "seed": 0, "step": 9, "loss": 1.0, "status": "done"},
        {"method": "a", "seed": 1, "step": 9, "loss": 7.0, "status": "diverged"},
        {"method": "b", "seed": 0, "step": 9, "loss": 3.0, "status": "done"},
    ]
    assert records_final(recs, "loss", "a") == {0: 1.0}


def test_mean_sd_of_huge_and_non_finite_values_does_not_raise() -> None:
    m, sd = mean_sd([2e243, 1.0, 3.0])  # a diverged baseline's finite error: (v - m)^2 would overflow
    assert m == pytest.approx(2e243 / 3, rel=1e-12)
    assert sd == pytest.approx(2e243 * math.sqrt(((2 / 3) ** 2 + 2 * (1 / 3) ** 2) / 2), rel=1e-12)
    m, sd = mean_sd([1e308, 1e308])
    assert m == pytest.approx(1e308) and sd == 0.0
    m, sd = mean_sd([1.0, math.inf])
    assert m == math.inf and math.isnan(sd)
    m, sd = mean_sd([1.0, math.nan, 2.0])
    assert math.isnan(m) and math.isnan(sd)
    m, sd = mean_sd([1.0, 2.0, 4.0])  # the scaled form changes nothing at ordinary magnitudes
    assert sd == pytest.approx(math.sqrt(7 / 3), rel=1e-15)


def test_paired_bootstrap_mean_interval_strata_and_seed() -> None:
    a = [1, 0, 1, 1, 0, 1, 1, 1, 0, 1] * 20
    b = [0, 0, 1, 0, 0, 1, 0, 1, 1, 0] * 20
    r = paired_bootstrap(a, b, n_boot=4000, seed=3)
    d = [x - y for x, y in zip(a, b, strict=True)]
    m, se = mean_se(d)
    assert r["mean"] == pytest.approx(m) and r["n"] == 200
    # a percentile interval of a mean of 200 pairs: close to mean -/+ 1.96 SE
    assert r["lo"] == pytest.approx(m - 1.96 * se, abs=0.25 * se)
    assert r["hi"] == pytest.approx(m + 1.96 * se, abs=0.25 * se)
    assert paired_bootstrap(a, b, n_boot=4000, seed=3) == r
    assert paired_bootstrap(a, b, n_boot=4000, seed=4) != r
    same = paired_bootstrap(a, a, n_boot=50)
    assert same["mean"] == same["lo"] == same["hi"] == 0.0
    # resampling within strata keeps each stratum's size: two constant strata give a zero-width interval
    a2, b2 = [1.0] * 10 + [0.0] * 10, [0.0] * 20
    strat = paired_bootstrap(a2, b2, strata=["x"] * 10 + ["y"] * 10, n_boot=500)
    assert strat["lo"] == pytest.approx(0.5) and strat["hi"] == pytest.approx(0.5)
    free = paired_bootstrap(a2, b2, n_boot=500)
    assert free["lo"] < 0.45 and free["hi"] > 0.55
    empty = paired_bootstrap([], [])
    assert empty["n"] == 0 and math.isnan(empty["mean"]) and math.isnan(empty["lo"])


def test_paired_bootstrap_bad_input() -> None:
    with pytest.raises(ValueError, match="same length"):
        paired_bootstrap([1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="strata"):
        paired_bootstrap([1.0, 2.0], [1.0, 2.0], strata=["a"])
    with pytest.raises(ValueError, match="n_boot"):
        paired_bootstrap([1.0], [1.0], n_boot=0)
    with pytest.raises(ValueError, match="level"):
        paired_bootstrap([1.0], [1.0], level=1.0)
