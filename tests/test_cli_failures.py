"""The CLI never hides a failure: failed units make `run` exit 1 with one line; broken stored runs and wrong
folders give a warning or a one-line error instead of a traceback or a silently wrong file."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from optarium.cli import main
from optarium.harness import experiment as experiment_mod
from optarium.harness.experiment import Experiment, Verdict
from optarium.harness.storage import RunDir

SLUG = "lion-vr"  # a registered slug; the toy experiment stands in for its experiment


def _run(ctx: Any, method: str, seed: int, config: Mapping[str, Any]) -> None:
    if method == "bad" and seed == 1:
        raise RuntimeError("boom")
    ctx.log(1, loss=float("inf") if method == "blowup" else 1.0 + 0.01 * seed)


def _decide(records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> Verdict:
    return Verdict("inconclusive", {}, "toy")


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> Any:
    def install(methods: Sequence[str]) -> None:
        cfg = {"seeds": 2}
        exp = Experiment(
            slug=SLUG,
            claim="toy",
            rule="toy",
            methods=methods,
            baselines=[],
            configs={"smoke": cfg, "quick": cfg, "full": cfg},
            run=_run,
            decide=_decide,
        )
        monkeypatch.setitem(experiment_mod._REGISTRY, SLUG, exp)

    return install


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    out = capsys.readouterr()
    return int(exc.value.code or 0), out.out, out.err


def test_a_failed_unit_makes_run_exit_1_with_one_line(tmp_path: Path, toy: Any, capsys: Any) -> None:
    toy(["good", "bad"])
    code, _out, err = cli(capsys, "run", SLUG, "--scale", "smoke", "--out", str(tmp_path))
    assert code == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "units failed" in lines[0] and "1 of 4 (error: 1" in lines[0], err
    assert "Traceback" not in err


def test_diverged_units_are_results_not_failures(tmp_path: Path, toy: Any, capsys: Any) -> None:
    toy(["good", "blowup"])
    code, _, err = cli(capsys, "run", SLUG, "--scale", "smoke", "--out", str(tmp_path))
    assert code == 0, err


def _stored_run(root: Path, slug: str, verdict_text: str) -> RunDir:
    run = RunDir.create(root, slug, "quick", "0123456789ab")
    (run.path / "verdict.json").write_text(verdict_text, encoding="utf-8")
    return run


def test_report_skips_a_truncated_verdict_with_a_warning(tmp_path: Path, capsys: Any) -> None:
    runs = tmp_path / "runs"
    _stored_run(runs, "rewa", '{"outcome": "reproduced", "figures": {}, "summary": "ok", "claim": "c"}')
    _stored_run(runs, "gradpower", '{"outcome": "reprod')
    code, _out, err = cli(capsys, "report", "--runs", str(runs), "--verdicts", str(tmp_path / "none"))
    assert code == 0, err
    assert "could not be read" in err and "gradpower" in err and len(err.strip().splitlines()) == 1
    html = (runs / "report.html").read_text(encoding="utf-8")  # --out defaults to RUNS/report.html
    assert 'id="rewa"' in html and "could not be read" in html
    rewa = html.split('id="rewa"')[1].split("<h2")[0]
    gradpower = html.split('id="gradpower"')[1].split("<h2")[0]  # its section, without the unreadable run
    assert "Newest quick run" in rewa and "No run stored under this report's runs folder" in gradpower


def test_report_of_a_missing_runs_folder_is_exit_2(tmp_path: Path, capsys: Any) -> None:
    code, _, err = cli(capsys, "report", "--runs", str(tmp_path / "nowhere"))
    assert code == 2 and err.count("\n") == 1 and "--runs" in err
    assert not (tmp_path / "nowhere").exists()


def test_docs_check_of_a_missing_file_is_exit_2(tmp_path: Path, capsys: Any) -> None:
    code, _, err = cli(capsys, "docs", "--check", "--out", str(tmp_path / "methods.md"))
    assert code == 2 and "does not exist" in err and "stale" not in err
