"""The qubo-ot-sampling experiment: smoke run, and its verdict rule on hand-built records."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from optarium.experiments.qubo_ot_sampling import CONFIGS, decide, make_graphs
from optarium.harness.runner import run_experiment

pytest.importorskip("ortools", reason="CP-SAT is the exact reference (combinatorial extra)")
pytest.importorskip("neal", reason="dwave-neal runs the SA baseline (combinatorial extra)")

CONF = {**CONFIGS["quick"], "methods": ["qubo-ot", "untrained", "random-order", "exact"]}


def _recs(k1: dict[str, list[float]], best: dict[str, list[float]]) -> list[dict[str, Any]]:
    out = []
    for m in k1:
        for g, (a, b) in enumerate(zip(k1[m], best[m], strict=True)):
            out.append({"method": m, "seed": 0, "step": g, "mis:k1": a, "mis:best": b, "status": "done"})
    return out


def _case(gain: float, best_gap: float) -> list[dict[str, Any]]:
    base = [14.0, 15.0, 13.0, 14.0, 16.0, 15.0]
    jit = [0.0, 1.0, -1.0, 0.0, 1.0, -1.0]
    tr = [b + gain + j * 0.5 for b, j in zip(base, jit, strict=True)]
    exact = [b + 3 for b in base]
    rb = [e - 1 for e in exact]
    return _recs(
        {"qubo-ot": tr, "untrained": base, "random-order": base, "exact": exact},
        {"qubo-ot": [r + best_gap for r in rb], "untrained": rb, "random-order": rb, "exact": exact},
    )


def test_rule_outcomes() -> None:
    assert decide(_case(1.0, 0.0), CONF).outcome == "reproduced"
    assert decide(_case(0.0, 0.0), CONF).outcome == "inconclusive"
    assert decide(_case(-1.0, 0.0), CONF).outcome == "not reproduced"
    v = decide(_case(1.0, -2.0), CONF)  # best-of-KT far below the non-inferiority margin
    assert v.outcome == "not reproduced" and v.figures["mis:best_vs_random:outcome"] == "not reproduced"
    assert v.figures["mis:k1_vs_untrained:n"] == 6
    assert v.figures["mis:qubo-ot:ratio_mean"] < 1


def test_graphs_are_deterministic_and_splits_differ() -> None:
    a, b = make_graphs("mis", 3, 0, "test"), make_graphs("mis", 3, 0, "test")
    assert [sorted(g.edges) for g in a] == [sorted(g.edges) for g in b]
    assert sorted(make_graphs("mis", 1, 0, "train")[0].edges) != sorted(a[0].edges)
    assert all(40 <= g.number_of_nodes() <= 60 for g in a)


def test_smoke_run(tmp_path: Path, check_smoke: Callable[[str, Any], None]) -> None:
    out = run_experiment("qubo-ot-sampling", "smoke", out=tmp_path, jobs=1)
    check_smoke("qubo-ot-sampling", out)
    f = out.verdict.figures
    assert "mis:exact:best_mean" in f
    # smoke also runs full's RB problem (small RB graphs) and the quality-against-T grid
    assert f["mis-rb:exact:best_mean"] > 0 and f["mis-rb:qubo-ot:feasible_mean"] == 1.0
    for m in ("qubo-ot", "untrained", "random-order"):
        for t in CONFIGS["smoke"]["t_grid"]:
            assert 0 < f[f"mis-rb:{m}:ratio_T{t}"] <= 1 + 1e-9


def test_rb_graphs_planted_optimum_and_sizes() -> None:
    from optarium.combinatorial import cpsat_solve

    full = make_graphs("mis-rb", 3, 0, "test", CONFIGS["full"])
    assert all(100 <= g.number_of_nodes() <= 150 and g.number_of_nodes() % 5 == 0 for g in full)
    small = make_graphs("mis-rb", 3, 0, "test", CONFIGS["smoke"])
    for g in small:
        groups = g.graph["groups"][0]
        assert 4 <= groups <= 6 and g.number_of_nodes() == 3 * groups
        sol = cpsat_solve(g, "mis", time_limit_s=5.0)
        assert sol.optimal and sol.value == groups == len(g.graph["planted"])
