"""The asap-co experiment: its smoke run, and its rule on hand-built records (every side)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from optarium.experiments.asap_co import CONFIGS, decide
from optarium.harness.runner import run_experiment

QUICK = CONFIGS["quick"]


def _records(asap: float, full: float) -> list[dict[str, Any]]:
    jitter = [0.001 * ((3 * s) % 5 - 2) for s in range(6)]
    rec = []
    for m, g in (("asap-selection", asap), ("full-finetune", full)):
        for s, j in enumerate(jitter):
            for step in (0, 10, 30):
                rec.append({"method": m, "seed": s, "step": step, "status": "done", "gap": g + j})
    return rec


def test_smoke_run_records_plots_and_withholds_verdict(
    tmp_path: Path, check_smoke: Callable[[str, Any], None]
) -> None:
    out = run_experiment("asap-co", "smoke", out=tmp_path, jobs=1)
    check_smoke("asap-co", out)
    f = out.verdict.figures
    assert f["asap-selection:proposal_unchanged"] == 1.0 and f["full-finetune:proposal_unchanged"] == 0.0
    assert 0.0 <= f["base:err3_uniform"] <= f["base:err1_uniform"] <= 1.0
    # the smoke scale also runs the CVRP block (full's second problem)
    assert (
        f["cvrp:asap-selection:proposal_unchanged"] == 1.0
        and f["cvrp:full-finetune:proposal_unchanged"] == 0.0
    )
    assert f["cvrp:base:gap"] >= -1e-3 and f["cvrp:verdict_n_pairs"] == 2
    assert (out.run_dir / "figures" / "adaptation_cvrp.png").exists()


def test_rule_sides() -> None:
    assert decide(_records(0.02, 0.03), QUICK).outcome == "reproduced"
    assert decide(_records(0.03, 0.02), QUICK).outcome == "not reproduced"
    assert decide(_records(0.03, 0.03), QUICK).outcome == "inconclusive"


def test_rule_with_cvrp_combines_both_problems() -> None:
    full = CONFIGS["full"]
    steps = (full["report_step"], full["verdict_step"])

    def both(tsp: tuple[float, float], cvrp: tuple[float, float]) -> list[dict[str, Any]]:
        rec = []
        for key, (asap, ff) in (("gap", tsp), ("cvrp:gap", cvrp)):
            for m, g in (("asap-selection", asap), ("full-finetune", ff)):
                for s in range(3):
                    for step in steps:
                        rec.append(
                            {"method": m, "seed": s, "step": step, "status": "done", key: g + 0.001 * s}
                        )
        return rec

    assert decide(both((0.02, 0.03), (0.02, 0.03)), full).outcome == "reproduced"
    assert decide(both((0.02, 0.03), (0.03, 0.03)), full).outcome == "inconclusive"
    v = decide(both((0.02, 0.03), (0.04, 0.03)), full)
    assert v.outcome == "not reproduced" and v.figures["cvrp:outcome"] == "not reproduced"
    assert v.figures["tsp:outcome"] == "reproduced"


def test_edge_errors_equal_the_per_state_exact_labels() -> None:
    """The vectorised err@1 / err@3 equal a per-state loop over routing.optimal_next_sets (the definition),
    with and without logit noise; noise of a huge scale drives err@1 towards a random guess."""
    from optarium.combinatorial.asap import ASAPPolicy, AttentionPolicy
    from optarium.combinatorial.routing import distance_matrix, held_karp, optimal_next_sets, tsp_instances
    from optarium.experiments.asap_co import _edge_errors, _hk_tables

    torch.manual_seed(0)
    pol = ASAPPolicy(AttentionPolicy(16, 1), None)
    coords = tsp_instances(6, 7, "uniform", generator=torch.Generator().manual_seed(1))
    tables = _hk_tables(coords)
    for noise in (None, 0.7 * torch.randn(6, 1, 6, 7, generator=torch.Generator().manual_seed(2))):
        e1, e3 = _edge_errors(pol, coords, tables, noise)
        with torch.no_grad():
            out = pol.rollout(coords, starts=0, record=True, logit_noise=noise)
        logits, vis, cur = out["proposal_logits"][:, 0], out["visited"][:, 0], out["current"][:, 0]
        for b in range(6):
            d = distance_matrix(coords[b].double())
            C = held_karp(d)[2]
            miss1 = miss3 = 0
            for t in range(6):
                mask = int(sum(1 << j for j in range(7) if vis[b, t, j]))
                opt = set(optimal_next_sets(d, C, mask, int(cur[b, t])))
                cand = logits[b, t].topk(min(3, 6 - t)).indices.tolist()
                miss1 += cand[0] not in opt
                miss3 += not opt.intersection(cand)
            assert float(e1[b]) == pytest.approx(miss1 / 6) and float(e3[b]) == pytest.approx(miss3 / 6)
    with pytest.raises(ValueError, match=r"^logit_noise"):
        pol.rollout(coords, starts=0, logit_noise=torch.zeros(6, 1, 2, 7))


def test_matched_degradation_hits_its_err1_target() -> None:
    from optarium.combinatorial.asap import ASAPPolicy, AttentionPolicy
    from optarium.combinatorial.routing import tsp_instances
    from optarium.experiments.asap_co import _edge_errors, _hk_tables, _matched_degradation

    torch.manual_seed(0)
    pol = ASAPPolicy(AttentionPolicy(16, 1), None)
    coords = tsp_instances(40, 7, "uniform", generator=torch.Generator().manual_seed(3))
    tables = _hk_tables(coords)
    base1 = float(_edge_errors(pol, coords, tables)[0].mean())
    target = min(base1 + 0.15, 0.6)
    scale, e1, e3 = _matched_degradation(
        pol, coords, tables, target, iters=14, generator=torch.Generator().manual_seed(4)
    )
    assert scale > 0 and abs(float(e1.mean()) - target) < 0.03  # err@1 is a step function of the scale
    assert float(e3.mean()) <= float(e1.mean()) + 1e-12  # top-3 contains the argmax
