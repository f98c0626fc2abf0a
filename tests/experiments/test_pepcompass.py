"""The pepcompass experiment at smoke scale, and its verdict rule on hand-built records."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

import optarium.experiments.pepcompass as exp
from optarium.bo.latent import AMINO_ACIDS, decode_sequences, edit_distance
from optarium.experiments.pepcompass_data import load_artifacts, load_peptides, one_hot
from optarium.harness.runner import run_experiment

QUICK = exp.CONFIGS["quick"]


def test_smoke_run_records_plots_and_withholds_verdict(
    tmp_path: Path, check_smoke: Callable[[str, Any], None]
) -> None:
    out = run_experiment("pepcompass", "smoke", out=tmp_path, jobs=1)
    check_smoke("pepcompass", out)
    records = [json.loads(x) for x in (out.run_dir / "records.jsonl").read_text().splitlines()]
    rounds = exp.CONFIGS["smoke"]["rounds"] * exp.CONFIGS["smoke"]["q"]
    finals = [r for r in records if r["step"] == rounds]
    assert len(finals) == len(out.units)
    assert {u["method"] for u in out.units} == set(exp.CONFIGS["smoke"]["methods"])
    for m in exp.CONFIGS["smoke"]["methods"]:  # every round of every unit was evaluated and logged
        for seed in range(exp.CONFIGS["smoke"]["seeds"]):
            steps = sorted(r["step"] for r in records if r["method"] == m and r["seed"] == seed)
            assert steps == [exp.CONFIGS["smoke"]["q"] * k for k in range(exp.CONFIGS["smoke"]["rounds"] + 1)]
    pools = [r["pool_size"] for r in records if r["method"] in ("lebo", "latent-bo") and r["step"] > 0]
    assert pools and min(pools) >= exp.CONFIGS["smoke"]["q"]
    figs = set(out.verdict.figures)
    assert {"lebo_vs_euclidean:mean_gap", "lebo_vs_random:mean_gap"} <= figs
    assert {"lebo_vs_latent_bo:mean_gap", "lebo_vs_ga:mean_gap", "ga:best_improvement_mean"} <= figs
    assert sorted(p.name for p in (out.run_dir / "figures").iterdir()) == ["best_improvement.png"]


def test_seed_peptides_are_middling_and_initial_data_is_shared() -> None:
    seeds = exp.seed_peptides((0.4, 0.6), 10)
    assert len(set(seeds)) == 10
    all_logits = exp._problem()["logits"]
    lo, hi = torch.quantile(all_logits, 0.39), torch.quantile(all_logits, 0.61)
    y = exp.assay_logit(seeds)
    assert bool(((y >= lo) & (y <= hi)).all())
    a, b = exp.initial_data(seeds[0], 0, 4), exp.initial_data(seeds[0], 0, 4)
    assert a == b and a[0] == seeds[0] and len(set(a)) == 5
    assert all(sum(x != y for x, y in zip(m, seeds[0], strict=True)) == 1 for m in a[1:])


def test_the_cached_vae_decodes_its_training_peptides() -> None:
    vae, _, _ = load_artifacts()
    seqs, _ = load_peptides()
    sub = seqs[::40]
    mu, _ = vae.encode(one_hot(sub, torch.float64))
    dec = decode_sequences(vae.decode(mu))  # greedy, pad-suffix validity
    assert sum(d == s for d, s in zip(dec, sub, strict=True)) >= 0.9 * len(sub)


def _ga(observed: list[str], seed_seq: str, q: int, seed: int = 0, **kw: Any) -> list[str]:
    values = [float(s.count("K")) for s in observed]
    return exp.ga_batch(observed, values, seed_seq, q, torch.Generator().manual_seed(seed), **kw)


def test_ga_children_are_new_local_and_deterministic() -> None:
    seed_seq = "GLFDIVKKVVGALGSL"
    observed = [seed_seq] + [seed_seq[:p] + "K" + seed_seq[p + 1 :] for p in (1, 4, 9, 12)]
    for max_edit in (1, 2, 3):
        kids = _ga(observed, seed_seq, 8, max_edit=max_edit)
        assert len(kids) == len(set(kids)) == 8
        assert not set(kids) & set(observed)  # no re-evaluation
        assert all(edit_distance(k, seed_seq) <= max_edit for k in kids)
        assert all(set(k) <= set(AMINO_ACIDS) for k in kids)
    assert _ga(observed, seed_seq, 8) == _ga(observed, seed_seq, 8)
    assert _ga(observed, seed_seq, 8) != _ga(observed, seed_seq, 8, seed=1)


def test_ga_child_is_a_single_point_crossover_plus_one_point_mutation() -> None:
    a, b = "AAAAAAAA", "CCCCCCCC"
    crossings = {x[:c] + y[c:] for x, y in ((a, b), (b, a)) for c in range(9)}  # c = 0, 8: equal parents
    kids = _ga([a, b], a, 20, max_edit=8, tournament=1)
    for k in kids:  # one point mutation away from some crossover of the two parents
        assert any(sum(x != y for x, y in zip(k, c, strict=True)) == 1 for c in crossings), k
        assert sum(x not in "AC" for x in k) <= 1, k
    # tournament selection: with size 8 the better parent (more K) nearly always wins both draws
    kids = exp.ga_batch(
        ["KKKKKKKK", "AAAAAAAA"],
        [8.0, 0.0],
        "KKKKKKKK",
        10,
        torch.Generator().manual_seed(0),
        max_edit=8,
        tournament=8,
    )
    assert sum(k.count("K") == 7 for k in kids) >= 8


def test_ga_raises_when_no_admissible_child_is_left() -> None:
    observed = list(AMINO_ACIDS)  # every length-1 sequence already evaluated
    with pytest.raises(ValueError, match=r"^ga:"):
        _ga(observed, "A", 1, max_edit=1, max_blocks=3)
    with pytest.raises(ValueError, match=r"^values:"):
        exp.ga_batch(["AK"], [], "AK", 1, torch.Generator())


def _recs(gaps: dict[str, list[float]]) -> list[dict[str, Any]]:
    out = []
    for seed in range(len(next(iter(gaps.values())))):
        base = 1.0 + 0.1 * seed
        out.append({"method": "lebo", "seed": seed, "step": 20, "best_improvement": base, "status": "done"})
        for m, g in gaps.items():
            out.append({"method": m, "seed": seed, "step": 20, "best_improvement": base - g[seed]})
    return out


def test_rule_reproduced_when_lebo_beats_both_baselines() -> None:
    v = exp.decide(
        _recs({"lebo-euclidean": [0.5, 0.6, 0.4, 0.5], "random-mutants": [1.0, 0.9, 1.1, 1.0]}), QUICK
    )
    assert v.outcome == "reproduced"
    assert v.figures["lebo_vs_euclidean:mean_gap"] == pytest.approx(0.5)


def test_rule_not_reproduced_when_lebo_loses_to_euclidean() -> None:
    v = exp.decide(
        _recs({"lebo-euclidean": [-0.5, -0.6, -0.4, -0.5], "random-mutants": [1.0, 0.9, 1.1, 1.0]}), QUICK
    )
    assert v.outcome == "not reproduced"


def test_rule_inconclusive_for_noise_or_only_beating_random() -> None:
    noisy = {"lebo-euclidean": [0.5, -0.6, 0.4, -0.5], "random-mutants": [1.0, 0.9, 1.1, 1.0]}
    assert exp.decide(_recs(noisy), QUICK).outcome == "inconclusive"
    one = {"lebo-euclidean": [0.5], "random-mutants": [1.0]}
    assert exp.decide(_recs(one), QUICK).outcome == "inconclusive"


def test_references_are_reported_but_do_not_change_the_outcome() -> None:
    base = {"lebo-euclidean": [0.5, 0.6, 0.4, 0.5], "random-mutants": [1.0, 0.9, 1.1, 1.0]}
    config = {**QUICK, "methods": list(exp.LEBO_METHODS + exp.REFERENCE_METHODS)}
    for ref_gap in (-5.0, 5.0):  # LE-BO far worse / far better than both references
        v = exp.decide(
            _recs({**base, "latent-bo": [ref_gap] * 4, "ga": [ref_gap + 0.1, ref_gap] * 2}), config
        )
        assert v.outcome == "reproduced"
        assert v.figures["lebo_vs_latent_bo:mean_gap"] == pytest.approx(ref_gap)
        side = "loses" if ref_gap < 0 else "beats"
        assert f"references, not in the rule: LE-BO vs latent-bo: {side}, ga: {side}" in v.summary
    assert "references" not in exp.decide(_recs(base), QUICK).summary


def test_full_rule_needs_pogs_to_beat_euclidean_pogs() -> None:
    full = exp.CONFIGS["full"]
    recs = _recs({"lebo-euclidean": [0.5, 0.6, 0.4, 0.5], "random-mutants": [1.0, 0.9, 1.1, 1.0]})
    for seed in range(4):
        for m, logit in (("pogs", 2.0 + 0.1 * seed), ("pogs-euclidean", 1.0), ("straight", 0.5)):
            recs.append({"method": m, "seed": seed, "step": 0, "mean_assay_logit": logit, "validity": 1.0})
    assert exp.decide(recs, full).outcome == "reproduced"
    for r in recs:
        if r["method"] == "pogs":
            r["mean_assay_logit"] = 0.0 - 0.1 * r["seed"]
    assert exp.decide(recs, full).outcome == "not reproduced"


@pytest.mark.slow
def test_setup_script_rebuilds_the_committed_networks(tmp_path: Path) -> None:
    """``scripts/pepcompass_setup.py``'s recipe is deterministic: retraining (about 40 CPU-s) gives the
    committed state dicts."""
    from optarium.experiments.pepcompass_data import artifact_dir, build_artifacts

    meta = build_artifacts(tmp_path)
    assert meta["n_sequences"] == 1819 and meta["n_amp"] == 1114
    for name in ("vae", "assay", "predictor"):
        new = torch.load(tmp_path / f"{name}.pt", weights_only=True)
        old = torch.load(artifact_dir() / f"{name}.pt", weights_only=True)
        assert sorted(new) == sorted(old)
        for k in old:
            assert old[k].dtype == torch.float32
            torch.testing.assert_close(new[k], old[k], rtol=1e-5, atol=1e-6)


class _Ctx:
    """The slice of the harness context that ``run`` uses, keeping the logged records."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def untimed(self) -> Any:
        return contextlib.nullcontext()

    evaluating = untimed

    def log(self, step: int, check_finite: bool = True, **metrics: Any) -> None:
        self.records.append({"step": step, **metrics})


def test_a_dry_reference_pool_is_counted_and_a_short_rule_arm_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    """Euclidean-latent BO evaluates a short pool, stops on an empty one and logs the shortfall; an arm of the
    rule (LE-BO) with a short pool fails its unit instead of spending less budget."""
    from optarium.bo import latent

    config = exp.CONFIGS["smoke"]
    q = int(config["q"])
    original = latent.LatentBO.candidate_pool
    sizes = iter([1, 0])  # one round with a single candidate, then nothing left

    def dry_pool(self: Any) -> list[str]:
        return original(self)[: next(sizes)]

    monkeypatch.setattr(latent.LatentBO, "candidate_pool", dry_pool)
    ctx = _Ctx()
    exp.run(ctx, "latent-bo", 0, config)
    assert [r["step"] for r in ctx.records] == [0, 1, 1]
    assert [r["short_rounds"] for r in ctx.records] == [0.0, 1.0, 2.0]
    assert ctx.records[-1]["evaluated"] == 1.0 and ctx.records[-1]["pool_size"] == 0.0

    lebo_pool = latent.LEBO.candidate_pool
    monkeypatch.setattr(latent.LEBO, "candidate_pool", lambda self: lebo_pool(self)[: q - 1])
    with pytest.raises(ValueError, match="pool held"):
        exp.run(_Ctx(), "lebo", 0, config)
