"""sapo-prompts experiment: the smoke run (sweep + the full path on a tiny Llama) and both verdict rules."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers")
pytest.importorskip("peft")

from optarium.experiments import sapo_prompts as ex
from optarium.harness.runner import run_experiment


def test_smoke_run(tmp_path: Path, check_smoke: Callable[[str, Any], None]) -> None:
    out = run_experiment("sapo-prompts", "smoke", out=tmp_path, jobs=1)
    check_smoke("sapo-prompts", out)
    cfg = ex.EXPERIMENT.config("smoke")
    recs = [json.loads(line) for line in (out.run_dir / "records.jsonl").read_text().splitlines() if line]
    sweep = [r for r in recs if r["method"] == "candidate_sweep" and "pre_loss" in r]
    assert len(sweep) == cfg["n_candidates_sweep"]
    n_cols = len(cfg["tasks"]) + len(cfg["heldout"])
    for m in ("sapo", "original", "random"):
        items = [r for r in recs if r["method"] == m and "score" in r]
        assert len(items) == n_cols * (len(cfg["tasks"]) + 1) * cfg["n_test"]
        assert [r for r in recs if r["method"] == m and "bwt" in r]
    assert {"sweep:rho", "sweep:p_greater", "sapo-original:bwt_lo"} <= set(out.verdict.figures)


def _sweep_records(sign: float, n_seeds: int = 3, n_c: int = 12) -> list[dict[str, Any]]:
    recs = []
    for s in range(n_seeds):
        for c in range(n_c):
            pre = 10.0 + 0.1 * ((c * 7 + s) % n_c)
            recs.append(
                {
                    "method": "candidate_sweep",
                    "seed": s,
                    "step": 1 + c,
                    "candidate": c,
                    "seen_overlap": 0.0,
                    "pre_loss": pre,
                    "forgetting": sign * pre + 0.001 * c,
                    "t4_test_loss": 3.0,
                }
            )
    return recs


@pytest.mark.parametrize(("sign", "outcome"), [(1.0, "reproduced"), (-1.0, "not reproduced")])
def test_sweep_rule(sign: float, outcome: str) -> None:
    cfg = ex.EXPERIMENT.config("quick")
    cfg["n_perm"] = 2000
    v = ex.decide(_sweep_records(sign), cfg)
    assert v.outcome == outcome
    assert v.figures["sweep:rho"] == pytest.approx(sign, abs=0.01)


def test_sweep_rule_inconclusive_without_relation() -> None:
    cfg = ex.EXPERIMENT.config("quick")
    cfg["n_perm"] = 2000
    recs = _sweep_records(0.0)
    for r in recs:  # forgetting unrelated to the pre-update loss: constant up to a tiny rank-neutral jitter
        r["forgetting"] = 1.0 + 0.001 * ((r["candidate"] * 5 + 3 * r["seed"]) % 12)
    v = ex.decide(recs, cfg)
    assert abs(v.figures["sweep:rho"]) < 0.29
    assert v.outcome == "inconclusive"


def _full_records(gain: float) -> list[dict[str, Any]]:
    """Per-item scores of 3 trained tasks + 1 held out; SAPO remembers task 1 on ``gain`` of the items."""
    import random

    rng = random.Random(0)
    base = {(j, t): rng.random() < 0.5 for j in range(4) for t in range(40)}
    recs = []
    for m, seeds in (("original", 2), ("sapo", 2), ("random", 1)):
        for s in range(seeds):
            k = 0
            for j in range(4):
                for i in range(4):
                    for t in range(40):
                        v = float(base[(j, t)])
                        if m == "sapo" and j == 0 and i >= 2 and t < int(40 * abs(gain)):
                            v = 1.0 if gain > 0 else 0.0
                        recs.append(
                            {"method": m, "seed": s, "step": k, "stage": i, "col": j, "item": t, "score": v}
                        )
                        k += 1
    return recs


@pytest.mark.parametrize(("gain", "outcome"), [(0.5, "reproduced"), (-0.5, "not reproduced")])
def test_full_rule(gain: float, outcome: str) -> None:
    cfg = ex.EXPERIMENT.config("full")
    cfg["n_boot"] = 300
    v = ex.decide(_full_records(gain), cfg)
    assert v.outcome == outcome
    assert (v.figures["sapo-original:bwt"] > 0) == (gain > 0)
