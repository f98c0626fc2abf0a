"""scripts/regen_verdict_fixture.py rebuilds a fixture that the regression test accepts, byte-stable, and
refuses incomplete runs."""

from __future__ import annotations

import gzip
import importlib.util
import json
import math
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data" / "verdict_regression"


def _script():
    spec = importlib.util.spec_from_file_location(
        "regen_verdict_fixture", ROOT / "scripts" / "regen_verdict_fixture.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _close(a: object, b: object) -> bool:
    """Equal JSON values, numbers to 1e-12 relative as the regression test compares them, NaN equal to NaN."""
    if isinstance(a, dict) and isinstance(b, dict):
        return sorted(a) == sorted(b) and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, (int, float)) and not isinstance(b, bool):
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-12, abs_tol=0.0)
    return a == b


def _run_dir(tmp_path: Path, case: str, statuses: list[str]) -> Path:
    """A run directory as ``optarium run`` writes it, made from a stored fixture."""
    src = DATA / case
    expected = json.loads((src / "expected.json").read_text())
    run = tmp_path / "run"
    run.mkdir()
    config = json.loads((src / "config.json").read_text())
    cfg = {"slug": expected["slug"], "scale": expected["scale"], "config": config}
    (run / "config.json").write_text(json.dumps(cfg))
    plain = src / "records.jsonl"
    text = plain.read_text() if plain.exists() else gzip.open(src / "records.jsonl.gz", "rt").read()
    (run / "records.jsonl").write_text(text)
    units = [{"method": "m", "seed": i, "status": s} for i, s in enumerate(statuses)]
    (run / "units.jsonl").write_text("".join(json.dumps(u) + "\n" for u in units))
    return run


@pytest.mark.parametrize("case", ["turbo-enn__smoke", "safe-kl__smoke"])
def test_rebuild_reproduces_the_stored_fixture(tmp_path: Path, case: str) -> None:
    mod = _script()
    dest = tmp_path / "fixture"
    shutil.copytree(DATA / case, dest)
    before = {p.name: p.read_bytes() for p in dest.iterdir()}
    mod.rebuild(_run_dir(tmp_path, case, ["done", "done"]), dest)
    after = {p.name: p.read_bytes() for p in dest.iterdir()}
    assert sorted(after) == sorted(before)
    for name in ("expected.json", "config.json"):  # decide may move the last bit of a float between runs
        assert _close(json.loads(after[name]), json.loads(before[name])), name
    rec = "records.jsonl" if "records.jsonl" in after else "records.jsonl.gz"
    second = tmp_path / "second"
    second.mkdir()
    mod.rebuild(_run_dir(second, case, ["done"]), dest)
    assert (dest / rec).read_bytes() == after[rec]  # byte-stable (gzip without a timestamp)


def test_rebuild_refuses_a_run_with_failed_units(tmp_path: Path) -> None:
    mod = _script()
    with pytest.raises(ValueError, match=r"run: .*error"):
        mod.rebuild(_run_dir(tmp_path, "basis-rotation__smoke", ["done", "error"]), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_rebuild_names_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"units\.jsonl"):
        run = tmp_path / "run"
        run.mkdir()
        (run / "config.json").write_text("{}")
        (run / "records.jsonl").write_text("")
        _script().rebuild(run, tmp_path / "out")
