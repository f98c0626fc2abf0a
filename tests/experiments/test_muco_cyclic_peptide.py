"""The muco-cyclic-peptide experiment's verdict rule on hand-built records (smoke run: test_all_smoke)."""

from __future__ import annotations

from typing import Any

from optarium.experiments.muco_cyclic_peptide import CONFIGS, decide, sequence_for


def _recs(e: dict[str, list[float]], s: dict[str, list[float]]) -> list[dict[str, Any]]:
    out = []
    for m in e:
        for seed, (be, su) in enumerate(zip(e[m], s[m], strict=True)):
            out.append(
                {"method": m, "seed": seed, "step": 0, "best_energy": be, "success": su, "status": "done"}
            )
    return out


BASE_E = [10.0, 20.0, 30.0, 40.0]
ONES = [1.0] * 4


def test_equal_arms_are_reproduced() -> None:
    e = {"muco-9x1": BASE_E, "muco-3x3": BASE_E, "etkdg": BASE_E}
    v = decide(_recs(e, {m: ONES for m in e}), CONFIGS["quick"])
    assert v.outcome == "reproduced"
    assert v.figures["a:energy_diff"] == 0.0 and v.figures["b:success_diff"] == 0.0


def test_higher_energy_than_etkdg_is_not_reproduced() -> None:
    worse = [x + 5.0 + 0.1 * i for i, x in enumerate(BASE_E)]
    e = {"muco-9x1": worse, "muco-3x3": worse, "etkdg": BASE_E}
    v = decide(_recs(e, {m: ONES for m in e}), CONFIGS["quick"])
    assert v.outcome == "not reproduced"
    assert v.figures["a:energy_diff"] > 5.0


def test_lower_success_of_the_tree_is_not_reproduced() -> None:
    e = {"muco-9x1": BASE_E, "muco-3x3": BASE_E, "etkdg": BASE_E}
    s = {"muco-9x1": ONES, "muco-3x3": [0.5, 0.6, 0.5, 0.55], "etkdg": ONES}
    assert decide(_recs(e, s), CONFIGS["quick"]).outcome == "not reproduced"


def test_noisy_difference_is_inconclusive() -> None:
    e = {"muco-9x1": [10.0, 30.0, 30.0, 50.0], "muco-3x3": [10.0, 30.0, 30.0, 50.0], "etkdg": BASE_E}
    # diffs 0, +10, 0, +10: mean 5, SE 2.9 -> neither non-inferior (5 + 5.8 > 2) nor worse (5 - 5.8 < 2)
    v = decide(_recs(e, {m: ONES for m in e}), CONFIGS["quick"])
    assert v.outcome == "inconclusive"


def test_too_few_sequences_is_inconclusive() -> None:
    e = {"muco-9x1": BASE_E[:1], "muco-3x3": BASE_E[:1], "etkdg": BASE_E[:1]}
    assert decide(_recs(e, {m: [1.0] for m in e}), CONFIGS["quick"]).outcome == "inconclusive"


def test_sequences_are_canonical_and_deterministic() -> None:
    a = sequence_for(3, 5)
    assert a == sequence_for(3, 5) and len(a) == 5 and "P" not in a and "C" not in a
