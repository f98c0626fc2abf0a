"""The gcon-neural-co experiment: its verdict rule on hand-built records, the bootstrap, and a smoke run."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from optarium.experiments.gcon_neural_co import CONFIGS, bootstrap_ci, decide, make_graphs
from optarium.harness.runner import run_experiment

pytest.importorskip("ortools", reason="CP-SAT is the exact reference (combinatorial extra)")

CONF = {**CONFIGS["quick"], "n_boot": 300}


def _recs(gain: float) -> list[dict[str, Any]]:
    out = []
    for s in range(3):
        for g in range(8):
            opt = 20.0 + g % 3
            jit = 0.2 * ((g * 7 + s) % 5 - 2)
            row_a = {f"scratch:e{e}": opt - 4 + jit for e in CONF["decode_epochs"]}
            row_c = {f"fresh:e{e}": opt - 4 - jit for e in CONF["decode_epochs"]}
            row_b = {f"inv:e{e}": opt - 4 + gain + jit * 0.5 for e in CONF["decode_epochs"]}
            out += [
                {"method": "exact", "seed": s, "step": g, "opt": opt, "optimal": 1.0},
                {"method": "greedy", "seed": s, "step": g, "greedy": opt - 1},
                {"method": "scratch", "seed": s, "step": g, **row_a},
                {"method": "reduction-transfer", "seed": s, "step": g, **row_b, **row_c},
            ]
    return out


def test_rule_outcomes() -> None:
    v = decide(_recs(2.0), CONF)
    assert v.outcome == "reproduced"
    assert v.figures["e1:b-c:ci_lo"] > 0 and v.figures["e1:b-c:n"] == 24
    assert v.figures["greedy:ratio"] < 1 and v.figures["exact:optimal_frac"] == 1.0
    assert decide(_recs(-2.0), CONF).outcome == "not reproduced"
    assert decide(_recs(0.0), CONF).outcome == "inconclusive"


def test_bootstrap_ci_covers_mean_and_shrinks_to_point() -> None:
    vals = {(s, g): float(s + g) for s in range(3) for g in range(5)}
    mu, lo, hi = bootstrap_ci(vals, 500, 0)
    assert lo <= mu <= hi and lo < hi
    const = {(s, g): 1.5 for s in range(3) for g in range(5)}
    assert bootstrap_ci(const, 100, 0) == (1.5, 1.5, 1.5)


def test_graphs_are_deterministic_and_splits_differ() -> None:
    a, b = make_graphs(CONF, 0, "test"), make_graphs(CONF, 0, "test")
    assert [sorted(g.edges) for g in a] == [sorted(g.edges) for g in b]
    assert sorted(make_graphs(CONF, 0, "train")[0].edges) != sorted(a[0].edges)
    assert all(30 <= g.number_of_nodes() <= 60 for g in a)


def test_smoke_run(tmp_path: Path, check_smoke: Callable[[str, Any], None]) -> None:
    out = run_experiment("gcon-neural-co", "smoke", out=tmp_path, jobs=1)
    check_smoke("gcon-neural-co", out)
    assert "inv:ratio_e0" in out.verdict.figures
