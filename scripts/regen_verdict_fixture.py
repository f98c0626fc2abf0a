"""Rebuild a verdict regression fixture from a stored run directory.

``tests/harness/test_verdict_regression.py`` checks that each experiment's ``decide`` and ``plot`` still give
the outcome, summary, figures and figure names stored in ``tests/harness/data/verdict_regression/
<slug>__<scale>/``. When an experiment's verdict legitimately changes (a new quick protocol, a re-recorded
run), rebuild its fixture from the run that was recorded::

    python scripts/regen_verdict_fixture.py runs/<slug>/<run id>            # -> <slug>__<scale>/
    python scripts/regen_verdict_fixture.py RUN_DIR --dest some/other/dir

The run directory must hold ``config.json``, ``records.jsonl`` and ``units.jsonl`` (as ``optarium run``
writes them). Records are stored gzipped unless the existing fixture keeps them as plain text. The script
refuses a run with units that errored or timed out (``diverged`` units are measurements and are kept), since a
fixture must come from a complete run.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "harness" / "data" / "verdict_regression"


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _default(o: Any) -> Any:
    return o.item() if hasattr(o, "item") else list(o)


def rebuild(run: Path, dest: Path | None = None) -> Path:
    """Write ``config.json``, ``expected.json`` and the records of ``run`` into ``dest``; return ``dest``."""
    import matplotlib

    matplotlib.use("Agg")
    from optarium.harness.experiment import get_experiment
    from optarium.harness.storage import REUSABLE

    for name in ("config.json", "records.jsonl", "units.jsonl"):
        if not (run / name).is_file():
            raise FileNotFoundError(f"run: {run} has no {name}")
    cfg = json.loads((run / "config.json").read_text())
    slug, scale, config = cfg["slug"], cfg["scale"], cfg["config"]
    units = _jsonl(run / "units.jsonl")
    unfinished = sorted({u["status"] for u in units} - set(REUSABLE))
    if unfinished:
        raise ValueError(f"run: {run} has units with status {unfinished}; a fixture needs a complete run")
    recs_text = (run / "records.jsonl").read_text()
    records = [json.loads(line) for line in recs_text.splitlines() if line.strip()]
    experiment = get_experiment(slug)
    verdict = experiment.decide(records, config)
    figs = experiment.plot(records, config) if experiment.plot else {}
    dest = dest if dest is not None else FIXTURES / f"{slug}__{scale}"
    old = json.loads((dest / "expected.json").read_text()) if (dest / "expected.json").exists() else {}
    statuses = sorted({u["status"] for u in units})
    expected = {
        "figures": json.loads(json.dumps(dict(verdict.figures), allow_nan=True, default=_default)),
        "outcome": verdict.outcome,
        "plot": sorted(figs),
        "scale": scale,
        "slug": slug,
        "summary": verdict.summary,
    }
    if "unit_statuses" in old or not old:  # older fixtures were stored without the unit statuses
        expected["unit_statuses"] = statuses
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "config.json").write_text(json.dumps(config, indent=1, sort_keys=True) + "\n")
    (dest / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True, allow_nan=True) + "\n")
    if (dest / "records.jsonl").exists():
        (dest / "records.jsonl").write_text(recs_text)
    else:
        with gzip.GzipFile(dest / "records.jsonl.gz", "wb", mtime=0) as f:  # mtime 0: same bytes each time
            f.write(recs_text.encode())
    return dest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a run directory written by `optarium run`")
    parser.add_argument(
        "--dest", type=Path, default=None, help="fixture directory (default: <slug>__<scale>)"
    )
    args = parser.parse_args(argv)
    dest = rebuild(args.run, args.dest)
    print(f"wrote {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
