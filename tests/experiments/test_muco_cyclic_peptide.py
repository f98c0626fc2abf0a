"""The muco-cyclic-peptide experiment's verdict rule on hand-built records (smoke run: test_all_smoke)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from optarium.experiments.muco_cyclic_peptide import (
    CONFIGS,
    MODES,
    decide,
    full_test_sequence,
    reference_ensemble,
    sequence_for,
    train_sequences,
)


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


# ---------------------------------------------------------------------------------------- full-scale path
def _full_recs(e: dict[str, list[float]], extra: dict[str, dict[str, float]] | None = None) -> list[dict]:
    out = []
    for m, vals in e.items():
        for seed, be in enumerate(vals):
            mode = MODES[seed % 3]
            r = {"method": m, "seed": seed, "step": 0, "best_energy": be, "success": 1.0, "status": "done"}
            r.update({"mode_index": float(seed % 3), "length": 6.0, "cpu_per_conformer": 0.5})
            # every successful conformer is coil except one helix residue per etkdg unit; modes as built
            r.update({"n_ss_H": 1.0 if m == "etkdg" else 0.0, "n_ss_E": 0.0, "n_ss_C": 24.0})
            r.update({f"n_mode_{x}": 4.0 if x == mode else 0.0 for x in MODES})
            r.update({"ref_n_ss_H": 0.0, "ref_n_ss_E": 0.0, "ref_n_ss_C": 60.0, "ref_best_energy": -5.0})
            r.update({f"ref_n_mode_{x}": 10.0 for x in MODES})
            r.update((extra or {}).get(m, {}))
            out.append(r)
    return out


def test_full_decide_reports_table_one_metrics() -> None:
    cfg = CONFIGS["full"]
    e = {"muco-indep": BASE_E * 3, "muco-tree": BASE_E * 3, "etkdg": BASE_E * 3}
    v = decide(_full_recs(e), cfg)
    assert v.outcome == "reproduced"
    f = v.figures
    # H_C over the three modes, equally often -> ln 3; H_SS of all-coil -> 0 (not -0.0)
    assert math.isclose(f["muco-indep:H_C"], math.log(3)) and f["muco-indep:H_SS"] == 0.0
    assert math.copysign(1.0, f["muco-indep:H_SS"]) == 1.0
    p = 12 / (12 * 25)
    assert math.isclose(f["etkdg:H_SS"], -(p * math.log(p) + (1 - p) * math.log(1 - p)))
    assert math.isclose(f["etkdg:ss_helix"], p) and f["etkdg:ss_sheet"] == 0.0
    assert all(math.isclose(f[f"muco-tree:mode_{x}"], 1 / 3) for x in MODES)
    assert math.isclose(f["reference:H_C"], math.log(3)) and f["reference:H_SS"] == 0.0
    assert f["a[K2DE]:n"] == 4 and f["muco-indep:cpu_ms_per_conformer"] == 500.0
    assert "H_SS" in v.summary and "H_C" in v.summary


def test_full_decide_uses_the_quick_rule() -> None:
    cfg = CONFIGS["full"]
    worse = [x + 5.0 + 0.1 * i for i, x in enumerate(BASE_E * 3)]
    v = decide(_full_recs({"muco-indep": worse, "muco-tree": worse, "etkdg": BASE_E * 3}), cfg)
    assert v.outcome == "not reproduced" and v.figures["a:energy_diff"] > 5.0
    v = decide(_full_recs({"muco-indep": BASE_E * 3, "muco-tree": worse, "etkdg": BASE_E * 3}), cfg)
    assert v.outcome == "not reproduced" and v.figures["b:energy_diff"] > 5.0


def test_full_sequences_encode_their_mode_and_are_held_out() -> None:
    cfg = CONFIGS["full"]
    tests = [full_test_sequence(s, cfg) for s in range(cfg["seeds"])]
    assert len(set(tests)) == len(tests)
    for seq, mode in tests:
        assert 6 <= len(seq) <= 8 and "P" not in seq and "W" not in seq
        if mode == "C2C":
            assert seq[0] == seq[-1] == "C" and seq.count("C") == 2
        elif mode == "K2DE":
            assert seq[0] == "K" and seq[-1] in "DE" and "C" not in seq
        else:
            assert "C" not in seq and not (seq[0] == "K" and seq[-1] in "DE")
    assert {m for _, m in tests} == set(MODES)
    for L in cfg["lengths"]:
        train = train_sequences(cfg, L)
        assert len(train) == 3 * cfg["n_train"] and not set(train) & set(tests)
        assert train == train_sequences(cfg, L)  # deterministic


def test_reference_cache_round_trip(tmp_path: Any, monkeypatch: Any) -> None:
    pytest.importorskip("rdkit", reason="rdkit is in the science extra")
    monkeypatch.setenv("OPTARIUM_CACHE_DIR", str(tmp_path))
    reference_ensemble.cache_clear()
    a = reference_ensemble("CAGC", "C2C", 2, 50, True)
    files = list((tmp_path / "muco-cyclic-peptide").glob("ref-*.npz"))
    assert len(files) == 1
    reference_ensemble.cache_clear()
    b = reference_ensemble("CAGC", "C2C", 2, 50, True)  # read back from disk
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) and a[2] == b[2] == 2
    assert list(np.sort(a[1])) == list(a[1])  # sorted by energy
    # a different mode or size is a different file
    reference_ensemble("CAGC", "H2T", 2, 50, True)
    assert len(list((tmp_path / "muco-cyclic-peptide").glob("ref-*.npz"))) == 2
    reference_ensemble.cache_clear()
