"""Recorded verdicts: written from a stored run with its code version, refused for runs that cannot stand as a
verdict, validated on load; the transcribed files keep every word of the registry text they came from; the
report shows them."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from optarium._core.registry import all_methods
from optarium.harness import experiment as experiment_mod
from optarium.harness.experiment import Experiment, Verdict
from optarium.harness.recorded import (
    TRANSCRIBED_COMMIT,
    VERDICTS_ENV,
    RecordedVerdict,
    default_verdicts_dir,
    load_recorded,
    record_from_run,
    record_run,
    verdict_path,
    write_recorded,
)
from optarium.harness.report import render_report
from optarium.harness.runner import run_experiment

ROOT = Path(__file__).resolve().parents[2]
SLUG = "lion-vr"  # a registered slug; the toy experiment stands in for its experiment


def _run(ctx: Any, method: str, seed: int, config: Mapping[str, Any]) -> None:
    if method == "bad":
        raise RuntimeError("boom")
    for step in range(1, 3):
        ctx.log(step, loss=1.0 / step + (0.5 if method == "base" else 0.0) + 0.01 * seed)


def _decide(records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> Verdict:
    return Verdict("reproduced", {"gap": 0.5, "n": config["seeds"], "nan": float("nan")}, "good beats base")


def _toy(methods: Sequence[str]) -> Experiment:
    cfg = {"seeds": 2}
    return Experiment(
        slug=SLUG,
        claim="good beats base",
        rule="always reproduced",
        methods=methods,
        baselines=["base"],
        configs={"smoke": cfg, "quick": cfg, "full": {"seeds": 3}},
        run=_run,
        decide=_decide,
    )


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> Any:
    def install(methods: Sequence[str] = ("good", "base")) -> None:
        monkeypatch.setitem(experiment_mod._REGISTRY, SLUG, _toy(methods))

    return install


def test_a_finished_run_is_recorded_with_its_code_version(tmp_path: Path, toy: Any) -> None:
    toy()
    out = run_experiment(SLUG, "full", out=tmp_path / "runs")
    path = record_run(out.run_dir, tmp_path / "verdicts")
    assert (
        path
        == verdict_path(tmp_path / "verdicts", SLUG, "full")
        == tmp_path / "verdicts" / SLUG / "full.json"
    )
    data = json.loads(path.read_text(encoding="utf-8"))
    config = json.loads((out.run_dir / "config.json").read_text())
    env = json.loads((out.run_dir / "environment.json").read_text())
    assert data["outcome"] == "reproduced" and data["summary"] == "good beats base"
    assert data["figures"] == {"gap": 0.5, "n": 3, "nan": None}  # strict JSON: a NaN figure is null
    assert (data["claim"], data["rule"]) == ("good beats base", "always reproduced")
    assert data["seeds"] == 3 and data["units"] == {"done": 6}
    assert data["run_id"] == out.run_dir.name
    assert data["code"]["fingerprint"] == config["code"]
    assert data["code"]["git_commit"] == (env["git_revision"] if env["git_revision"] != "unknown" else None)
    assert data["optarium_version"] == env["versions"]["optarium"]
    assert data["source"] == "run" and data["transcribed_from"] is None
    when = dt.datetime.fromisoformat(data["date"])
    assert abs((dt.datetime.now(dt.UTC) - when).total_seconds()) < 600
    rec = RecordedVerdict.from_json(data)
    assert rec.to_json() == data
    assert load_recorded(tmp_path / "verdicts") == {(SLUG, "full"): rec}
    assert "recorded" in rec.provenance() and "3 seeds" in rec.provenance()
    # a second recording of the same slug and scale replaces the first
    again = run_experiment(SLUG, "full", out=tmp_path / "runs", seeds=2)
    record_run(again.run_dir, tmp_path / "verdicts")
    assert load_recorded(tmp_path / "verdicts")[(SLUG, "full")].seeds == 2


def test_runs_that_cannot_stand_as_a_verdict_are_refused(tmp_path: Path, toy: Any) -> None:
    toy()
    smoke = run_experiment(SLUG, "smoke", out=tmp_path / "runs")
    with pytest.raises(ValueError, match=r"^run_dir: smoke runs never claim a verdict"):
        record_from_run(smoke.run_dir)
    toy(("good", "base", "bad"))
    failed = run_experiment(SLUG, "quick", out=tmp_path / "runs")
    with pytest.raises(ValueError, match=r"^run_dir: 4 of 6 units finished \(2 error\)"):
        record_from_run(failed.run_dir)
    with pytest.raises(ValueError, match=r"^run_dir: .* holds no finished run"):
        record_from_run(tmp_path / "empty")
    assert not (tmp_path / "verdicts").exists()


def test_an_unwritable_folder_is_refused(tmp_path: Path, toy: Any) -> None:
    toy()
    out = run_experiment(SLUG, "quick", out=tmp_path / "runs")
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(ValueError, match=r"^verdicts_dir: cannot write to"):
        record_run(out.run_dir, blocker / "verdicts")


def _valid() -> dict[str, Any]:
    return RecordedVerdict(slug="gradpower", scale="quick", outcome="inconclusive", summary="s").to_json()


@pytest.mark.parametrize(
    ("where", "change", "needle"),
    [
        ("gradpower/quick.json", {"outcome": "no verdict"}, "outcome: must be one of"),
        ("gradpower/quick.json", {"scale": "full"}, "slug/scale: the file holds gradpower/full"),
        ("gradpower/smoke.json", {"scale": "smoke"}, "scale: a verdict is recorded at"),
        ("no-such/quick.json", {"slug": "no-such"}, "unknown slug 'no-such'"),
        ("gradpower/quick.json", {"format": 2}, "format: this optarium reads format 1"),
        ("gradpower/quick.json", {"seeds": 0}, "seeds: must be a positive integer"),
        ("gradpower/quick.json", {"extra": 1}, r"unknown key\(s\) \['extra'\]"),
        ("gradpower/quick.json", {"source": "typed"}, "source: must be one of"),
        ("gradpower/quick.json", {"figures": {"x": [1, 2]}}, "figures: 'x' must be a number"),
    ],
)
def test_bad_files_are_named_on_load(tmp_path: Path, where: str, change: dict[str, Any], needle: str) -> None:
    path = tmp_path / where
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({**_valid(), **change}), encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^verdicts_dir: {re.escape(str(path))}: .*{needle}"):
        load_recorded(tmp_path)


def test_missing_folder_means_no_verdicts_and_the_env_variable_moves_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert load_recorded(tmp_path / "none") == {}
    monkeypatch.delenv(VERDICTS_ENV, raising=False)
    assert default_verdicts_dir() == ROOT / "verdicts"
    monkeypatch.setenv(VERDICTS_ENV, str(tmp_path / "elsewhere"))
    assert default_verdicts_dir() == tmp_path / "elsewhere"
    write_recorded(RecordedVerdict(slug="rewa", scale="full", outcome="not reproduced"))
    assert list(load_recorded()) == [("rewa", "full")]


def _number_texts(v: float) -> set[str]:
    texts = {repr(v), f"{v:g}", f"{abs(v):g}", f"{v:.1e}".replace("e-0", "e-").replace("e+0", "e")}
    return texts | {t.replace("-", "") for t in texts}


def test_transcribed_files_keep_the_registry_text() -> None:
    """Every verdict the registry text of 8f6b32c held is a file until a recorded run replaces it; a
    transcribed file loses no word of its scale's text and invents no figure."""
    recorded = load_recorded(ROOT / "verdicts")
    transcribed = {k: r for k, r in recorded.items() if r.source == "transcribed"}
    implemented = {m.slug for m in all_methods() if m.status == "implemented"}
    assert {s for s, _ in recorded} >= implemented  # every implemented method has a recorded verdict
    # 20 were transcribed (11 quick, 9 full); runs recorded with --record replace them one by one
    assert len(transcribed) <= 20 and all(r.source in ("transcribed", "run") for r in recorded.values())
    for slug in {s for s, _ in transcribed}:
        recs = [transcribed[(slug, s)] for s in ("quick", "full") if (slug, s) in transcribed]
        text = recs[0].transcribed_from["text"]
        assert all(r.transcribed_from["text"] == text for r in recs), slug
        pieces = [r.transcribed_from["scale_text"] for r in recs]
        assert all(p in text for p in pieces), slug
        if all((slug, s) in transcribed for s in ("quick", "full")):
            assert sum(map(len, pieces)) >= len(text) - 2, f"{slug}: part of the text is in no file"
        for r in recs:
            assert r.transcribed_from["commit"] == TRANSCRIBED_COMMIT
            assert r.transcribed_from["path"] == "src/optarium/_core/_methods.py"
            assert r.summary and r.summary[-25:] in r.transcribed_from["scale_text"], slug
            assert r.outcome in r.transcribed_from["scale_text"].lower(), slug
            plain = r.transcribed_from["scale_text"].replace("−", "-")
            for name, v in r.figures.items():
                assert isinstance(v, (int, float)), (slug, name)
                assert any(t in plain for t in _number_texts(float(v)) | {str(v)}), (slug, name, v)
            assert r.run_id is None and r.git_commit is None and r.code_fingerprint is None
            dt.datetime.fromisoformat(r.date)


def test_report_index_shows_the_recorded_verdicts(tmp_path: Path) -> None:
    write_recorded(
        RecordedVerdict(
            slug="tcgp", scale="full", outcome="not reproduced", summary="KS worse on Dixon-Price"
        ),
        tmp_path / "v",
    )
    text = render_report(tmp_path / "no-runs", tmp_path / "v")
    row = next(r for r in text.split("<tr>") if r.startswith('<td class="slug"><a href="#tcgp">'))
    assert 'class="badge not-reproduced"' in row and "ask-tell" in row
    section = text.split('id="tcgp"')[1].split("<h2")[0]
    assert 'class="badge not-reproduced"' in section and "KS worse on Dixon-Price" in section
    empty = render_report(tmp_path / "no-runs", tmp_path / "none")
    assert "KS worse on Dixon-Price" not in empty and empty.count('class="badge') == 0
    checked_in = render_report(tmp_path / "no-runs")  # the checkout's verdicts
    assert "transcribed from the registry text at 8f6b32c" in checked_in
