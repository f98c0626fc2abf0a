"""Stored runs as pandas DataFrames, for analysis in a notebook instead of parsing JSONL by hand.

Example (the README runs the same lines on a smoke run)::

    from optarium.harness.results import final_values, load_runs, summarize_finals
    frame = load_runs("runs")                     # every stored run, the newest per (slug, scale)
    frame[frame.slug == "gradpower"].groupby("method").val_loss.min()
    summarize_finals(final_values(frame))         # mean, sd, min, max, n of the final values per method

:func:`load_runs` reads ``records.jsonl`` and ``units.jsonl`` of each run directory (see
:mod:`optarium.harness.storage`) into one row per logged record, joined with the unit it belongs to
(``unit_status``, ``unit_seconds``) and the run (``slug``, ``scale``, ``run_id``); a unit that logged
nothing (a failure before its first record) still gets one row, with a missing ``step``, so failures stay
visible. Metric columns are the records' own keys, as nullable ``Float64`` columns: a metric a record did
not log is ``<NA>`` there, while non-finite values a run logged (``NaN``, ``inf``) are kept as measured
(``frame.loss.isna()`` is "not logged", ``numpy.isnan`` of the values is "logged NaN").

:func:`final_values` takes the final value of every metric of every finished (``done``) unit, the value at
the largest step that logged it, as :func:`optarium.harness.stats.records_final` does; identifier columns
(:func:`is_identifier`: ``problem``, ``setting``, names ending in ``_index``, ``_idx``, ``_id`` or
``_final``) are tags, not metrics, and are left out. :func:`summarize_finals` aggregates them per method with
:func:`optarium.harness.stats.mean_sd` and counts non-finite finals separately. The HTML report
(:mod:`optarium.harness.report`) builds its per-method tables with these functions.

pandas is imported only when these functions run (``import optarium`` stays cheap).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from optarium.harness.stats import mean_sd
from optarium.harness.storage import RunDir, is_identifier

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["RUN_COLUMNS", "final_values", "is_identifier", "load_runs", "summarize_finals"]

#: The columns every frame of :func:`load_runs` starts with, in this order; metric columns follow, sorted.
RUN_COLUMNS: tuple[str, ...] = (
    "slug",
    "scale",
    "run_id",
    "method",
    "seed",
    "step",
    "unit_status",
    "unit_seconds",
    "seconds",
)


def _pandas() -> Any:
    try:
        import pandas
    except ImportError as exc:  # pragma: no cover - pandas is a core dependency
        raise ImportError("optarium.harness.results needs pandas (pip install 'pandas==3.1.1')") from exc
    return pandas


def _run_dirs(path: Path) -> list[RunDir]:
    """``path`` itself if it is a run directory, else every run directory one to three levels below."""
    if (path / "config.json").exists() or (path / "units.jsonl").exists():
        return [RunDir(path)]
    found: set[Path] = set()
    for depth in ("*", "*/*", "*/*/*"):
        for marker in ("config.json", "units.jsonl"):
            found.update(p.parent for p in path.glob(f"{depth}/{marker}"))
    return [RunDir(p) for p in sorted(found)]


def _run_meta(run: RunDir) -> tuple[str, str, float]:
    """(slug, scale, modification time) of a run: from its config, else from its path."""
    try:
        config = run.read_json("config.json") or {}
    except (OSError, ValueError):
        config = {}
    slug = str(config.get("slug") or run.path.parent.parent.name)
    scale = str(config.get("scale") or run.path.parent.name)
    files = [run.path / n for n in ("verdict.json", "units.jsonl")]
    stamps = [f.stat().st_mtime for f in files if f.exists()]
    return slug, scale, max(stamps, default=0.0)


def load_runs(
    path: Path | str = "runs",
    *,
    slug: str | Iterable[str] | None = None,
    scale: str | Iterable[str] | None = None,
    latest: bool = True,
) -> pd.DataFrame:
    """The stored runs under ``path`` as one DataFrame, a row per logged record (see the module docstring).

    Args:
        path: a runs folder (``runs/``), one experiment's folder (``runs/<slug>``) or one run directory.
        slug: keep only these experiments (a slug or several).
        scale: keep only these scales (``smoke``, ``quick``, ``full`` or several).
        latest: keep only the newest run of each (slug, scale); ``False`` keeps every stored run.

    Returns:
        Columns :data:`RUN_COLUMNS` then the metrics, sorted by name; ``seed`` is an integer column and
        ``step`` a nullable integer column. An empty frame (with those columns) if nothing matches.

    Raises:
        ValueError: ``path`` does not exist.
    """
    pandas = _pandas()
    root = Path(path)
    if not root.exists():
        raise ValueError(f"path: {root} does not exist")
    slugs = {slug} if isinstance(slug, str) else (set(slug) if slug is not None else None)
    scales = {scale} if isinstance(scale, str) else (set(scale) if scale is not None else None)
    chosen: dict[tuple[str, str], list[tuple[float, RunDir]]] = {}
    for run in _run_dirs(root):
        s, sc, stamp = _run_meta(run)
        if (slugs is None or s in slugs) and (scales is None or sc in scales):
            chosen.setdefault((s, sc), []).append((stamp, run))
    rows: list[dict[str, Any]] = []
    for (s, sc), runs in sorted(chosen.items()):
        runs.sort(key=lambda t: t[0], reverse=True)
        for _, run in runs[:1] if latest else runs:
            rows.extend(_rows(run, s, sc))
    metrics = sorted({k for r in rows for k in r} - set(RUN_COLUMNS))
    frame = pandas.DataFrame([{k: r.get(k) for k in RUN_COLUMNS} for r in rows], columns=list(RUN_COLUMNS))
    columns = {m: _metric_column(pandas, [r.get(m, _MISSING) for r in rows]) for m in metrics}
    frame = pandas.concat([frame, pandas.DataFrame(columns, index=frame.index)], axis=1)
    frame["seed"] = frame["seed"].astype("int64")
    frame["step"] = frame["step"].astype("Int64")
    for col in ("unit_seconds", "seconds"):
        frame[col] = frame[col].astype("float64")
    return frame


_MISSING = object()


def _metric_column(pandas: Any, values: list[Any]) -> Any:
    """A nullable ``Float64`` column when every logged value is a number: a measured NaN stays NaN and a
    value the record did not log is ``<NA>``, so the two never mix; otherwise an object column."""
    import numpy as np

    logged = [v for v in values if v is not _MISSING and v is not None]
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in logged):
        mask = np.array([v is _MISSING or v is None for v in values], dtype=bool)
        data = np.array([0.0 if m else float(v) for v, m in zip(values, mask, strict=True)], dtype=np.float64)
        return pandas.arrays.FloatingArray(data, mask)
    return pandas.array([None if v is _MISSING else v for v in values], dtype=object)


def _rows(run: RunDir, slug: str, scale: str) -> list[dict[str, Any]]:
    units = {(u["method"], int(u["seed"])): u for u in run.units()}
    base = {"slug": slug, "scale": scale, "run_id": run.path.name}
    rows, seen = [], set()
    for r in run.records():
        key = (r["method"], int(r["seed"]))
        seen.add(key)
        unit = units.get(key, {})
        row = {**base, "unit_status": unit.get("status"), "unit_seconds": unit.get("seconds")}
        row.update({k: v for k, v in r.items() if k not in ("status", "attempt")})
        rows.append(row)
    for key, unit in units.items():
        if key not in seen:
            rows.append(
                {
                    **base,
                    "method": key[0],
                    "seed": key[1],
                    "step": None,
                    "unit_status": unit.get("status"),
                    "unit_seconds": unit.get("seconds"),
                }
            )
    return rows


def final_values(frame: pd.DataFrame) -> pd.DataFrame:
    """Long frame (slug, scale, run_id, method, seed, metric, value) of the final value of every numeric,
    non-identifier metric of every ``done`` unit: its value at the largest step that logged it.

    Non-finite finals are kept (a NaN or an inf that a run ended on is a result, counted by
    :func:`summarize_finals`); a metric whose records are all missing has no final value.
    """
    pandas = _pandas()
    cols = ["slug", "scale", "run_id", "method", "seed", "metric", "value"]
    done = frame[(frame["unit_status"] == "done") & frame["step"].notna()]
    metrics = [c for c in frame.columns if c not in RUN_COLUMNS and not is_identifier(c)]
    metrics.append("seconds")
    parts = []
    keys = ["slug", "scale", "run_id", "method", "seed"]
    for m in metrics:
        if m not in done or str(done[m].dtype) not in ("Float64", "float64"):
            continue  # strings (a solver's status) are not metrics
        col = done[m]
        logged = col.notna()
        values = col[logged].to_numpy(dtype="float64")
        sub = done.loc[logged, [*keys, "step"]].assign(value=values)
        if sub.empty:
            continue
        last = sub.sort_values("step", kind="stable").groupby(keys, sort=True).tail(1)
        parts.append(last.drop(columns="step").assign(metric=m))
    if not parts:
        return pandas.DataFrame(columns=cols)
    frame = pandas.concat(parts, ignore_index=True)[cols]
    return frame.sort_values(cols[:6], kind="stable", ignore_index=True)


def summarize_finals(finals: pd.DataFrame) -> pd.DataFrame:
    """Per (slug, scale, run_id, method, metric): mean, sd (NaN for one seed), min, max and ``n`` over the
    finite final values, and ``n_nonfinite``, the seeds whose final value was NaN or infinite."""
    pandas = _pandas()
    keys = ["slug", "scale", "run_id", "method", "metric"]
    out = []
    for key, group in finals.groupby(keys, sort=False):
        vals = [float(v) for v in group["value"]]
        finite = [v for v in vals if math.isfinite(v)]
        mu, sd = mean_sd(finite) if finite else (math.nan, math.nan)
        out.append(
            {
                **dict(zip(keys, key, strict=True)),
                "mean": mu,
                "sd": sd,
                "min": min(finite, default=math.nan),
                "max": max(finite, default=math.nan),
                "n": len(finite),
                "n_nonfinite": len(vals) - len(finite),
            }
        )
    return pandas.DataFrame(out, columns=[*keys, "mean", "sd", "min", "max", "n", "n_nonfinite"])
