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


FULL = CONFIGS["full"]


def _sweep_records(acc: dict[str, dict[str, list[float]]]) -> list[dict[str, Any]]:
    """Final records of a sweep: acc[rank][variant] = accuracies per seed."""
    recs: list[dict[str, Any]] = []
    for rank, by_variant in acc.items():
        for v, vals in by_variant.items():
            for seed, a in enumerate(vals):
                recs.append(
                    {
                        "method": f"{v}@{rank}",
                        "seed": seed,
                        "step": 300,
                        "acc": a,
                        "fe": 1200.0,
                        "trainable": 2210.0 if rank == "r1" else 104898.0,
                        "instability": 0.0,
                        "loss_spikes": 0.0,
                    }
                )
    return recs


def _sweep_config(variants: list[str]) -> dict[str, Any]:
    return {**FULL, "methods": [f"{v}@{r}" for r in ("r1", "full") for v in variants]}


def test_sweep_rule_needs_growth_and_a_gap_at_every_rank() -> None:
    vs = ["bp_checkpoint", "fmad_k1", "zo_k1"]
    cfg = _sweep_config(vs)
    grow = {
        "r1": {
            "bp_checkpoint": [0.90, 0.91, 0.89],
            "fmad_k1": [0.80, 0.82, 0.79],
            "zo_k1": [0.70, 0.71, 0.69],
        },
        "full": {
            "bp_checkpoint": [0.92, 0.93, 0.91],
            "fmad_k1": [0.60, 0.63, 0.61],
            "zo_k1": [0.55, 0.5, 0.52],
        },
    }
    v = decide(_sweep_records(grow), cfg)
    assert v.outcome == "reproduced", v.summary
    assert abs(v.figures["G@r1"] - (0.90 - 0.80 + 0.91 - 0.82 + 0.89 - 0.79) / 3) < 1e-12  # max is FmAD
    assert v.figures["growth_ok"] and v.figures["all_ranks_gap_ok"]
    flat = {r: {k: list(x) for k, x in d.items()} for r, d in grow.items()}
    flat["full"]["fmad_k1"] = [0.81, 0.83, 0.80]  # the same gap at both ends: no growth
    flat["full"]["bp_checkpoint"] = [0.91, 0.92, 0.90]
    assert decide(_sweep_records(flat), cfg).outcome == "inconclusive"
    beat = {r: {k: list(x) for k, x in d.items()} for r, d in grow.items()}
    beat["r1"]["zo_k1"] = [0.97, 0.98, 0.97]  # a variant above BP-ckpt by far more than 2 SE
    out = decide(_sweep_records(beat), cfg)
    assert out.outcome == "not reproduced" and out.figures["beats_bp"] == "zo_k1@r1"


def test_a_sweep_unit_stops_at_the_forward_equivalent_budget() -> None:
    from optarium.harness.runner import execute_unit

    cfg = {
        **FULL,
        "model": CONFIGS["smoke"]["model"],
        "seq_len": 32,
        "batch_size": 8,
        "pretrain_steps": 3,
        "budget_fe": 60.0,
        "n_test": 32,
        "n_curve": 16,
        "svrg_period": 4,
        "svrg_anchor_batches": 2,
        "pretrain_cache": False,
    }
    steps = {}
    for v, cost in (("bp_checkpoint", 4.0), ("zo_k4", 8.0), ("zo_svrg", 4.0)):
        unit, recs = execute_unit("fmad-zo-bp", "full", cfg, f"{v}@r1", 0)
        assert unit["status"] == "done", unit["error"]
        final = recs[-1]
        assert final["fe"] <= 60.0 and final["fe"] > 60.0 - cost - 2 * 2.0 * 2  # no room for one more step
        assert final["instability"] == 0.0 and 0.0 <= final["acc"] <= 1.0
        assert len([r for r in recs if "curve_acc" in r]) == cfg["curve_points"]
        steps[v] = final["steps"]
    assert steps["bp_checkpoint"] == 15 and steps["zo_k4"] == 7
    # ZO-SVRG: anchors of 2 x 2 = 4 at steps 0, 4, 8: 4 + 4 + 4 per 4 steps ... 60 = 3 * (4 + 16) -> 12 steps
    assert steps["zo_svrg"] == 12
