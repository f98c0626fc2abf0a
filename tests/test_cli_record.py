"""``optarium run SLUG --record`` end to end on a tiny registered experiment, its refusals (one line, exit 2),
and the commands that show recorded verdicts (``list``, ``docs``, ``report``)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from optarium.cli import main
from optarium.harness import experiment as experiment_mod
from optarium.harness import runner as runner_mod
from optarium.harness.experiment import Experiment, Verdict

SLUG = "lion-vr"  # a registered slug; the toy experiment stands in for its experiment
CALLS: list[tuple[str, int]] = []


def _run(ctx: Any, method: str, seed: int, config: Mapping[str, Any]) -> None:
    CALLS.append((method, seed))
    if method == "bad":
        raise RuntimeError("boom")
    ctx.log(1, loss=1.0 + (0.5 if method == "base" else 0.0) + 0.01 * seed)


def _decide(records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> Verdict:
    return Verdict("reproduced", {"gap": 0.5}, "good beats base by 0.5")


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> Any:
    CALLS.clear()
    monkeypatch.setenv("COLUMNS", "250")  # rich folds table cells to the terminal width (narrow under xdist)

    def install(methods: Sequence[str] = ("good", "base"), slug: str = SLUG) -> None:
        cfg = {"seeds": 2}
        exp = Experiment(
            slug=slug,
            claim="good beats base",
            rule="always reproduced",
            methods=methods,
            baselines=["base"],
            configs={"smoke": cfg, "quick": cfg, "full": cfg},
            run=_run,
            decide=_decide,
        )
        monkeypatch.setitem(experiment_mod._REGISTRY, slug, exp)

    return install


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    out = capsys.readouterr()
    return int(exc.value.code or 0), out.out, out.err


def test_run_record_writes_the_verdict_file(tmp_path: Path, toy: Any, capsys: Any) -> None:
    toy()
    verdicts = tmp_path / "verdicts"
    code, out, err = cli(
        capsys,
        "run",
        SLUG,
        "--scale",
        "full",
        "--record",
        "--verdicts",
        str(verdicts),
        "--out",
        str(tmp_path),
    )
    assert code == 0, err
    path = verdicts / SLUG / "full.json"
    assert f"recorded {path}" in out
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["outcome"] == "reproduced" and data["figures"] == {"gap": 0.5} and data["seeds"] == 2
    run_dir = next((tmp_path / SLUG / "full").iterdir())
    assert data["run_id"] == run_dir.name and data["source"] == "run"
    # the recorded verdict now shows in list, docs and report
    code, out, _ = cli(capsys, "list", "--verdicts", str(verdicts), "--family", "optim")
    assert code == 0 and "full: reproduced" in out
    md = tmp_path / "methods.md"
    assert cli(capsys, "docs", "--out", str(md), "--verdicts", str(verdicts))[0] == 0
    assert "**full**: reproduced (good beats base by 0.5; recorded " in md.read_text(encoding="utf-8")
    code, out, err = cli(capsys, "docs", "--check", "--out", str(md), "--verdicts", str(verdicts))
    assert code == 0 and "up to date" in out, err
    html = tmp_path / "r.html"
    assert (
        cli(capsys, "report", "--runs", str(tmp_path), "--out", str(html), "--verdicts", str(verdicts))[0]
        == 0
    )
    assert "good beats base by 0.5" in html.read_text(encoding="utf-8")


def test_environment_variable_chooses_the_folder(
    tmp_path: Path, toy: Any, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    toy()
    monkeypatch.setenv("OPTARIUM_VERDICTS", str(tmp_path / "env-verdicts"))
    code, _, err = cli(capsys, "run", SLUG, "--scale", "quick", "--record", "--out", str(tmp_path / "runs"))
    assert code == 0, err
    assert (tmp_path / "env-verdicts" / SLUG / "quick.json").exists()


def _one_line_exit_2(code: int, err: str, needle: str) -> None:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("optarium: error: ") and needle in lines[0], lines[0]
    assert "Traceback" not in err


def test_smoke_record_is_refused_before_running(tmp_path: Path, toy: Any, capsys: Any) -> None:
    toy()
    code, _, err = cli(
        capsys,
        "run",
        SLUG,
        "--scale",
        "smoke",
        "--record",
        "--verdicts",
        str(tmp_path / "v"),
        "--out",
        str(tmp_path),
    )
    _one_line_exit_2(code, err, "--record: smoke runs never claim a verdict")
    assert CALLS == [] and not (tmp_path / "v").exists()


def test_record_of_a_run_with_failed_units_is_refused(tmp_path: Path, toy: Any, capsys: Any) -> None:
    toy(("good", "base", "bad"))
    code, out, err = cli(
        capsys,
        "run",
        SLUG,
        "--scale",
        "quick",
        "--record",
        "--verdicts",
        str(tmp_path / "v"),
        "--out",
        str(tmp_path),
    )
    _one_line_exit_2(code, err, "--record: nothing recorded: 4 of 6 units finished (2 error)")
    assert "inconclusive" in out  # the run itself was stored and shown
    assert not (tmp_path / "v" / SLUG).exists()


def test_record_into_an_unwritable_folder_is_refused_before_running(
    tmp_path: Path, toy: Any, capsys: Any
) -> None:
    toy()
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    code, _, err = cli(
        capsys,
        "run",
        SLUG,
        "--scale",
        "quick",
        "--record",
        "--verdicts",
        str(blocker / "v"),
        "--out",
        str(tmp_path),
    )
    _one_line_exit_2(code, err, "--verdicts: cannot write to")
    assert CALLS == []


def test_a_bad_verdict_file_is_one_line(tmp_path: Path, capsys: Any) -> None:
    bad = tmp_path / "v" / "gradpower" / "quick.json"
    bad.parent.mkdir(parents=True)
    bad.write_text("{not json", encoding="utf-8")
    for args in (
        ("docs", "--check"),
        ("list",),
        ("report", "--runs", str(tmp_path), "--out", str(tmp_path / "r.html")),
    ):
        code, _, err = cli(capsys, *args, "--verdicts", str(tmp_path / "v"))
        _one_line_exit_2(code, err, f"--verdicts: {bad}")


def test_list_filters_by_contract_and_shows_the_contract(capsys: Any) -> None:
    code, out, _ = cli(capsys, "list", "--contract", "ask-tell")
    assert code == 0 and "turbo-enn" in out and "gradpower" not in out and "ask-tell" in out
    code, _, err = cli(capsys, "list", "--contract", "nope")
    _one_line_exit_2(code, err, "--contract")
    code, _, err = cli(capsys, "list", "--status", "done")
    _one_line_exit_2(code, err, "--status")


def test_docs_check_of_the_checkout_passes_and_a_stale_file_fails(tmp_path: Path, capsys: Any) -> None:
    root = Path(__file__).resolve().parents[1]
    code, out, err = cli(capsys, "docs", "--check", "--out", str(root / "docs" / "methods.md"))
    assert code == 0 and "up to date" in out, err
    stale = tmp_path / "methods.md"
    stale.write_text((root / "docs" / "methods.md").read_text(encoding="utf-8") + "edited by hand\n")
    code, _, err = cli(capsys, "docs", "--check", "--out", str(stale))
    assert code == 1 and "stale" in err
    code, _, err = cli(
        capsys, "docs", "--check", "--out", str(root / "docs" / "methods.md"), "--verdicts", str(tmp_path)
    )
    assert code == 1 and "stale" in err  # the checked-in file shows the checkout's verdicts, not none


def test_suite_record_records_each_run_and_names_the_refused_ones(
    tmp_path: Path, toy: Any, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    toy()
    toy(("good", "base", "bad"), slug="rewa")
    slugs = [SLUG, "rewa"]
    monkeypatch.setattr(experiment_mod, "registered_experiments", lambda family=None: slugs)

    def suite(scale: str, *, out: Path, **kw: Any) -> list[Any]:  # the two toy experiments, in this process
        hooks = {k: kw[k] for k in ("on_start", "on_unit") if k in kw}
        return [runner_mod.run_experiment(s, scale, out=out, **hooks) for s in slugs]

    monkeypatch.setattr(runner_mod, "run_suite", suite)
    verdicts = tmp_path / "v"
    code, out, err = cli(
        capsys,
        "suite",
        "--scale",
        "quick",
        "--jobs",
        "1",
        "--record",
        "--verdicts",
        str(verdicts),
        "--out",
        str(tmp_path),
    )
    _one_line_exit_2(code, err, "--record: 1 of 2 runs not recorded: rewa: 4 of 6 units finished (2 error)")
    assert f"recorded {verdicts / SLUG / 'quick.json'}" in out
    assert sorted(p.relative_to(verdicts).as_posix() for p in verdicts.rglob("*.json")) == [
        f"{SLUG}/quick.json"
    ]
    code, _, err = cli(capsys, "suite", "--scale", "smoke", "--record", "--out", str(tmp_path))
    _one_line_exit_2(code, err, "--record: smoke runs never claim a verdict")
