"""Two concurrent runs into one --out (issue 12): the second waits for the first, then reuses its units.

Before the fix both processes ran every unit (each unit's status line appeared twice in ``units.jsonl`` and
each unit's body ran twice). The processes are real (``subprocess``), sharing only the runs folder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

SCRIPT = textwrap.dedent(
    """
    import json, os, sys, time
    from optarium.harness import experiment as experiment_mod
    from optarium.harness.experiment import Experiment, Verdict
    from optarium.harness import runner
    from optarium.harness.runner import run_experiment

    runner.code_fingerprint = lambda: "fixed"  # one run id even while the working tree is being edited

    calls, role, ready = sys.argv[2], sys.argv[3], sys.argv[4]

    def run(ctx, method, seed, config):
        with open(calls, "a") as f:
            f.write(f"{os.getpid()} {method} {seed}\\n")
        if role == "first" and (method, seed) == ("a", 0):
            deadline = time.monotonic() + 60  # hold the first unit until the second run is about to start
            while not os.path.exists(ready) and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(1.0)
        ctx.log(1, loss=1.0 + seed)

    def decide(records, config):
        return Verdict("inconclusive", {}, "toy")

    cfg = {"seeds": 3, "unit_timeout_s": 30}
    exp = Experiment(
        slug="lion-vr", claim="toy", rule="toy", methods=["a", "b"], baselines=[],
        configs={"smoke": cfg, "quick": cfg, "full": cfg}, run=run, decide=decide,
    )
    experiment_mod._REGISTRY["lion-vr"] = exp
    if role == "second":
        open(ready, "w").close()
    out = run_experiment("lion-vr", "quick", out=sys.argv[1])
    print(json.dumps({"reused": out.reused, "run_dir": str(out.run_dir), "n_units": len(out.units)}))
    """
)


@pytest.mark.timeout(120)
def test_second_concurrent_run_waits_then_reuses(tmp_path: Path) -> None:
    script = tmp_path / "toy_run.py"
    script.write_text(SCRIPT)
    calls = tmp_path / "calls.txt"
    runs = tmp_path / "runs"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    ready = tmp_path / "second_ready"
    cmd = [sys.executable, str(script), str(runs), str(calls)]
    first = subprocess.Popen(
        [*cmd, "first", str(ready)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    deadline = time.monotonic() + 60
    while not (calls.exists() and calls.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)  # the first run is inside its first unit (and holds the lock, once fixed)
    second = subprocess.Popen(
        [*cmd, "second", str(ready)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    out1, err1 = first.communicate(timeout=90)
    out2, err2 = second.communicate(timeout=90)
    assert first.returncode == 0, err1
    assert second.returncode == 0, err2
    r1, r2 = json.loads(out1.strip().splitlines()[-1]), json.loads(out2.strip().splitlines()[-1])
    assert r1["run_dir"] == r2["run_dir"]
    lines = calls.read_text().split("\n")[:-1]
    assert len(lines) == 6, f"6 units, but unit bodies ran {len(lines)} times:\n" + "\n".join(lines)
    assert len({line.split()[0] for line in lines}) == 1, "units of one run were split over two processes"
    units = [json.loads(u) for u in (Path(r1["run_dir"]) / "units.jsonl").read_text().splitlines()]
    assert sorted((u["method"], u["seed"]) for u in units) == [(m, s) for m in "ab" for s in range(3)]
    assert r2["reused"] == 6 and r1["reused"] == 0
    assert "waiting" in err2, f"the waiting run said nothing: {err2!r}"
