"""The nhgd experiment's verdict rule on hand-built records (the smoke run is in test_all_smoke.py)."""

from __future__ import annotations

from typing import Any

from optarium.experiments.nhgd import CONFIGS, decide

METHODS = ["nhgd-full", "aid-cg", "random"]


def _records(red: dict[str, list[float]], cos_star: float = 0.99, gap: float = 0.0) -> list[dict[str, Any]]:
    recs: list[dict[str, Any]] = []
    for m, vals in red.items():
        for seed, r in enumerate(vals):
            recs.append(
                {
                    "method": m,
                    "seed": seed,
                    "step": 30,
                    "reduction": r,
                    "sec_per_outer": 0.1,
                    "status": "done",
                }
            )
            if m == "nhgd-full":
                recs.append(
                    {
                        "method": m,
                        "seed": seed,
                        "step": 0,
                        "cos_fisher_star": cos_star,
                        "cos_fisher_T": 0.99 - gap,
                        "cos_hessian_T": 0.99,
                        "status": "done",
                    }
                )
    return recs


def _cfg() -> dict[str, Any]:
    return {**CONFIGS["quick"], "methods": METHODS}


def test_reproduced_when_nhgd_matches_cg_and_the_control_fails() -> None:
    v = decide(
        _records(
            {"nhgd-full": [0.05, 0.045, 0.05], "aid-cg": [0.05, 0.05, 0.05], "random": [0.0, 0.05, -0.01]}
        ),
        _cfg(),
    )
    assert v.outcome == "reproduced", v.summary


def test_not_reproduced_when_nhgd_falls_below_half_in_most_seeds() -> None:
    v = decide(
        _records({"nhgd-full": [0.01, 0.02, 0.05], "aid-cg": [0.05, 0.05, 0.05], "random": [0.0, 0.0, 0.0]}),
        _cfg(),
    )
    assert v.outcome == "not reproduced"


def test_inconclusive_when_the_control_also_passes_or_the_fisher_is_poor() -> None:
    good = {"nhgd-full": [0.05, 0.05, 0.05], "aid-cg": [0.05, 0.05, 0.05]}
    assert decide(_records({**good, "random": [0.05, 0.05, 0.05]}), _cfg()).outcome == "inconclusive"
    assert decide(_records({**good, "random": [0.0] * 3}, cos_star=0.5), _cfg()).outcome == "inconclusive"
    assert decide(_records({**good, "random": [0.0] * 3}, gap=0.1), _cfg()).outcome == "inconclusive"
