"""The command line: listing, runs, one-line errors with exit 2, clean Ctrl-C, the report."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from optarium._core.registry import all_methods

ENV = {**os.environ, "COLUMNS": "250", "PYTHONUNBUFFERED": "1"}


def optarium(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "optarium.cli", *args],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=timeout,
    )


def test_list_shows_all_51_slugs() -> None:
    res = optarium("list")
    assert res.returncode == 0, res.stderr
    assert len(all_methods()) == 51
    for m in all_methods():
        assert m.slug in res.stdout, m.slug


def test_list_filters_by_family_and_status() -> None:
    res = optarium("list", "--family", "bo")
    assert "turbo-enn" in res.stdout and "gradpower" not in res.stdout
    res = optarium("list", "--status", "implemented")
    assert "gradpower" in res.stdout
    for m in all_methods():
        if m.status != "implemented":
            assert m.slug not in res.stdout, m.slug


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("run", "no-such-slug"), "unknown slug 'no-such-slug'"),
        (("run", "gradpower", "--scale", "huge"), "--scale"),
        (("run", "gradpower", "--seeds", "0"), "--seeds"),
        (("suite", "--jobs", "0"), "--jobs"),
        (("list", "--family", "nope"), "--family"),
        (("run", "gradpower", "--world-size", "0"), "--world-size"),
        (("run", "gradpower", "--world-size", "2"), "no distributed methods"),
        (("run", "gradpower", "--address", "ray://head:10001"), "--executor local: address"),
        (("suite", "--executor", "slurm", "--slurm", "partition"), "--slurm: expected KEY=VALUE"),
        (("run", "gradpower", "--executor", "dask"), "--executor"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: tuple[str, ...], needle: str) -> None:
    res = optarium(*args)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert needle in lines[0]
    assert "Traceback" not in res.stderr + res.stdout


def test_slug_without_experiment_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A registered method that has no experiment yet gets the one-line error (in-process, so that the
    check does not depend on some slug still being planned)."""
    import dataclasses

    import optarium.cli as cli_module

    planned = dataclasses.replace(
        cli_module.get_method("gradpower"), status="planned", module=None, experiment=None
    )
    monkeypatch.setattr(cli_module, "get_method", lambda slug: planned)
    with pytest.raises(SystemExit) as exc:
        cli_module.main(["run", "gradpower"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'gradpower' has no experiment yet (status: planned)" in err[0]


def test_unwritable_out_dir_is_exit_2(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    res = optarium("run", "gradpower", "--scale", "smoke", "--out", str(blocker / "runs"))
    assert res.returncode == 2
    assert len(res.stderr.strip().splitlines()) == 1 and "--out" in res.stderr


def test_run_smoke_then_report(tmp_path: Path) -> None:
    res = optarium("run", "gradpower", "--scale", "smoke", "--out", str(tmp_path / "runs"), "--jobs", "2")
    assert res.returncode == 0, res.stderr + res.stdout
    assert "no verdict" in res.stdout and "16/16 done" in res.stdout
    runs = list((tmp_path / "runs" / "gradpower" / "smoke").iterdir())
    assert len(runs) == 1 and (runs[0] / "verdict.json").exists()
    res = optarium("report", "--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "r.html"))
    assert res.returncode == 0 and (tmp_path / "r.html").stat().st_size > 1000


def _children(pid: int) -> set[int]:
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found |= {int(c) for c in (task / "children").read_text().split()}
        except OSError:
            continue
    return found


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_ctrl_c_stops_cleanly_and_keeps_finished_units(tmp_path: Path, jobs: str) -> None:
    out = tmp_path / "runs"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "optarium.cli",
            "run",
            "gradpower",
            "--scale",
            "smoke",
            "--seeds",
            "400",
            "--jobs",
            jobs,
            "--out",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    deadline = time.monotonic() + 120
    units = None
    while time.monotonic() < deadline:
        found = list(out.glob("gradpower/smoke/*/units.jsonl"))
        if found and found[0].read_text().count("\n") >= 2:
            units = found[0]
            break
        time.sleep(0.2)
    assert units is not None, "no unit finished in time"
    workers = _children(proc.pid)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert "interrupted: kept" in err
    assert units.read_text().count("\n") >= 2
    time.sleep(0.5)
    alive = [w for w in workers if Path(f"/proc/{w}").exists() and "zombie" not in _state(w)]
    assert not alive, f"worker processes left running: {alive}"


def _state(pid: int) -> str:
    try:
        return (Path(f"/proc/{pid}/status").read_text().split("State:")[1].split("\n")[0]).lower()
    except (OSError, IndexError):
        return "gone"
