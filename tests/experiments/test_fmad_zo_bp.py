"""The fmad-zo-bp experiment: its tasks, its verdict rule on constructed records, and the memory probe."""

from __future__ import annotations

from typing import Any

import torch

from optarium.experiments.fmad_zo_bp import CONFIGS, decide, make_task_a, make_task_b, memory_probe

QUICK = CONFIGS["quick"]


def _records(acc: dict[str, tuple[float, float]], seeds: int = 1) -> list[dict[str, Any]]:
    recs: list[dict[str, Any]] = []
    for seed in range(seeds):
        for m, (a_steps, a_time) in acc.items():
            recs.append({"method": m, "seed": seed, "step": 300, "acc_steps": a_steps, "fe": 1200.0})
            recs.append({"method": m, "seed": seed, "step": 400, "acc_time": a_time, "fe_time": 1600.0})
    return recs


def test_rule_reproduced_not_reproduced_inconclusive_and_control() -> None:
    good = decide(_records({"bp_checkpoint": (0.9, 0.9), "fmad": (0.6, 0.62), "zo": (0.55, 0.5)}), QUICK)
    assert good.outcome == "reproduced"
    assert abs(good.figures["gap_steps_fmad"] - 0.3) < 1e-12
    small = decide(_records({"bp_checkpoint": (0.9, 0.9), "fmad": (0.85, 0.6), "zo": (0.5, 0.5)}), QUICK)
    assert small.outcome == "inconclusive"  # a 5-point gap is below the 10-point threshold
    bad = decide(_records({"bp_checkpoint": (0.8, 0.8), "fmad": (0.95, 0.95), "zo": (0.5, 0.5)}), QUICK)
    assert bad.outcome == "not reproduced"
    ctrl = decide(_records({"bp_checkpoint": (0.7, 0.9), "fmad": (0.5, 0.5), "zo": (0.5, 0.5)}), QUICK)
    assert ctrl.outcome == "inconclusive" and ctrl.figures["control_ok"] is False


def test_tasks_are_what_they_claim() -> None:
    gen = torch.Generator().manual_seed(0)
    x, y = make_task_a(200, 64, 64, gen)
    counts = torch.stack([(x == t).sum(1) for t in range(64)], 1)
    assert torch.equal(counts.argmax(1), y) and bool((counts.gather(1, y[:, None]) >= 19).all())
    x, y = make_task_b(2000, 64, 64, gen)
    c0, c1 = (x == 0).sum(1), (x == 1).sum(1)
    assert torch.equal((c0 > c1).long(), y)
    diff = (c0 - c1).abs()
    assert bool((diff >= 1).all() and (diff <= 5).all()) and bool(((x == 2) | (x == 3)).sum() == 0)
    assert 0.4 < float(y.float().mean()) < 0.6


def test_memory_probe_orders_the_methods() -> None:
    cfg = {**CONFIGS["smoke"], "probe_batch": 8, "probe_seq": 32}
    res = {m: memory_probe(m, cfg) for m in ("bp", "bp_checkpoint", "zo")}
    assert res["bp_checkpoint"]["saved_bytes"] < 0.5 * res["bp"]["saved_bytes"]
    assert res["zo"]["saved_bytes"] == 0.0
    assert res["zo"]["peak_bytes"] < res["bp_checkpoint"]["peak_bytes"] < res["bp"]["peak_bytes"]
