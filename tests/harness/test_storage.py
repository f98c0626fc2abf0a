"""The run store under concurrency: atomic JSON writes from several real processes, the run-directory lock."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from optarium.harness.storage import RunDir

_WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from optarium.harness.storage import RunDir
    run, tag, n = RunDir(Path(sys.argv[1])), sys.argv[2], int(sys.argv[3])
    errors = 0
    for i in range(n):
        try:
            run.write_json("summary.json", {"writer": tag, "i": i, "pad": "x" * 2000})
        except Exception:
            errors += 1
    print(errors)
    """
)


def test_concurrent_writers_never_collide(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path, "slug", "quick", "rid")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(run.path), tag, "1500"], stdout=subprocess.PIPE, text=True
        )
        for tag in ("a", "b")
    ]
    errors = [int(p.communicate(timeout=120)[0].strip()) for p in procs]
    assert errors == [0, 0]
    final = run.read_json("summary.json")
    assert final["writer"] in {"a", "b"} and final["i"] == 1499
    assert not list(run.path.glob(".*.tmp")), "temporary files left behind"


def test_write_json_is_complete_or_absent(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path, "slug", "quick", "rid")
    run.write_json("verdict.json", {"outcome": "reproduced", "x": float("nan")})
    assert json.loads((run.path / "verdict.json").read_text()) == {"outcome": "reproduced", "x": None}


_HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from optarium.harness.storage import RunDir
    run = RunDir(Path(sys.argv[1]))
    with run.lock():
        print("held", flush=True)
        time.sleep(float(sys.argv[2]))
    """
)


def test_lock_makes_a_second_process_wait(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path, "slug", "quick", "rid")
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(run.path), "1.5"], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    waited: list[Path] = []
    t0 = time.monotonic()
    with run.lock(on_wait=waited.append):
        elapsed = time.monotonic() - t0
    holder.wait(timeout=60)
    assert waited == [run.path], "the waiting side was not told that the lock was held"
    assert elapsed > 0.5, "the lock was acquired while another process held it"


def test_clear_keeps_the_lock_file(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path, "slug", "quick", "rid")
    run.write_json("config.json", {"a": 1})
    (run.path / "figures").mkdir()
    (run.path / "figures" / "f.png").write_bytes(b"png")
    with run.lock():
        run.clear()
        assert sorted(p.name for p in run.path.iterdir()) == [".lock"]
