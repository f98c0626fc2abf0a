"""Run storage: ``runs/<slug>/<scale>/<run-id>/`` with config, records, units, summary, environment, verdict
and figures.

Files of a run directory:

- ``config.json``: slug, scale, the configuration, the code fingerprint.
- ``environment.json``: see :func:`optarium.harness.environment.collect_environment`.
- ``records.jsonl``: one JSON object per logged step (method, seed, step, seconds, status, metrics);
  non-finite metrics are written as ``NaN``/``Infinity`` (Python's and pandas' JSON readers accept them).
- ``units.jsonl``: one JSON object per finished (method, seed) unit: status, seconds, error traceback.
- ``summary.json``: per method and metric, mean, sd, min, max and n over seeds of the final values
  (this and the other ``.json`` files are strict JSON: non-finite numbers are ``null``).
- ``verdict.json``: the verdict with its deciding figures.
- ``figures/*.png``.

The run id is a hash of the code fingerprint, slug, scale and configuration, so a re-run with identical
code and configuration finds the stored units and reuses them. Records are appended one finished unit at a
time, so an interrupted run keeps what it finished.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from optarium.harness.stats import mean_sd, records_final

__all__ = [
    "RunDir",
    "find_runs",
    "is_identifier",
    "run_id",
    "summarize",
]

#: Unit statuses that are final: such units are reused by a re-run.
REUSABLE = ("done", "diverged")


def _finite_or_none(obj: Any) -> Any:
    """Replace NaN and infinities by ``None`` (JSON has no such numbers; ``jq`` and browsers reject them)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite_or_none(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite_or_none(v) for v in obj]
    return obj


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "item"):
        return obj.item()
    if isinstance(obj, (set, tuple)):
        return list(obj)
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def _dumps(obj: Any, *, strict: bool = True, **kw: Any) -> str:
    """JSON text; ``strict`` writes non-finite numbers as ``null`` (standard JSON), otherwise as Python's
    ``NaN``/``Infinity`` extension (records keep the difference between a diverged +inf and a NaN)."""
    if strict:
        return json.dumps(_finite_or_none(obj), default=_json_default, allow_nan=False, **kw)
    return json.dumps(obj, default=_json_default, allow_nan=True, **kw)


def run_id(fingerprint: str, slug: str, scale: str, config: Mapping[str, Any]) -> str:
    """A 12-hex-digit id for (code, slug, scale, config)."""
    text = _dumps({"code": fingerprint, "slug": slug, "scale": scale, "config": config}, sort_keys=True)
    return hashlib.blake2b(text.encode(), digest_size=6).hexdigest()


@dataclass(frozen=True)
class RunDir:
    """One run directory and its files."""

    path: Path

    @classmethod
    def create(cls, root: Path | str, slug: str, scale: str, rid: str) -> RunDir:
        """Make ``root/slug/scale/rid`` (parents included)."""
        path = Path(root) / slug / scale / rid
        path.mkdir(parents=True, exist_ok=True)
        return cls(path)

    def clear(self) -> None:
        """Remove everything stored in this run (``--force``), except the lock file of :meth:`lock`."""
        for child in self.path.iterdir():
            if child.name == ".lock":
                continue
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    child.unlink()

    def write_json(self, name: str, obj: Any) -> None:
        """Write ``name`` atomically: a temporary file of its own (unique per writer), then ``os.replace``.

        Concurrent writers of the same name never share a temporary file, so each replace installs one
        writer's complete text and a reader sees either the old or a new file, never a partial one.
        """
        text = _dumps(obj, indent=2, sort_keys=True) + "\n"
        fd, tmp = tempfile.mkstemp(dir=self.path, prefix=f".{name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path / name)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise

    @contextlib.contextmanager
    def lock(self, on_wait: Callable[[Path], None] | None = None) -> Iterator[None]:
        """Hold this run directory's lock (``.lock``, an OS file lock via ``filelock``) for the block.

        A second run of the same (code, experiment, scale, configuration) waits here until the first has
        finished and then reuses its units instead of running them again. ``on_wait(path)`` is called once
        if the lock is held by someone else, before waiting.
        """
        from filelock import FileLock, Timeout

        lk = FileLock(str(self.path / ".lock"))
        try:
            lk.acquire(timeout=0)
        except Timeout:
            if on_wait is not None:
                on_wait(self.path)
            lk.acquire()
        try:
            yield
        finally:
            lk.release()

    def read_json(self, name: str) -> Any:
        """Read ``name``; ``None`` if it does not exist."""
        f = self.path / name
        return json.loads(f.read_text()) if f.exists() else None

    def append_unit(self, unit: Mapping[str, Any], records: Iterable[Mapping[str, Any]]) -> None:
        """Append one finished unit's records, then its status line (so a status implies its records).

        Each file gets one write; a line cut short by an earlier kill is first closed with a newline, so it
        costs only itself, never the next unit's first line.
        """
        self._append("records.jsonl", "".join(_dumps(r, strict=False) + "\n" for r in records))
        self._append("units.jsonl", _dumps(unit, strict=False) + "\n")

    def _append(self, name: str, text: str) -> None:
        path = self.path / name
        with open(path, "a+b") as f:
            if f.tell() > 0:
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":
                    text = "\n" + text
            f.write(text.encode())
            f.flush()
            os.fsync(f.fileno())

    def _read_lines(self, name: str) -> list[dict[str, Any]]:
        f = self.path / name
        if not f.exists():
            return []
        out = []
        for line in f.read_text().splitlines():
            if line.strip():
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:  # a line cut short by a kill: ignore it
                    continue
        return out

    def units(self) -> list[dict[str, Any]]:
        """The last status line of every unit (a re-run unit supersedes an earlier failure)."""
        latest: dict[tuple[str, int], dict[str, Any]] = {}
        for u in self._read_lines("units.jsonl"):
            latest[(u["method"], int(u["seed"]))] = u
        return list(latest.values())

    def records(self) -> list[dict[str, Any]]:
        """Records of the units in :meth:`units`, each from the attempt that gave the unit its status."""
        attempts = {(u["method"], int(u["seed"])): u.get("attempt") for u in self.units()}
        return [
            r
            for r in self._read_lines("records.jsonl")
            if attempts.get((r["method"], int(r["seed"])), object()) == r.get("attempt")
        ]

    def figure_paths(self) -> list[Path]:
        """The PNG figures of this run, sorted by name."""
        d = self.path / "figures"
        return sorted(d.glob("*.png")) if d.exists() else []


def summarize(
    records: Sequence[Mapping[str, Any]], units: Sequence[Mapping[str, Any]], methods: Sequence[str]
) -> dict[str, Any]:
    """Per method: unit status counts, and per metric the mean, sd, min, max and n over seeds of final values.

    The final value of a metric in a finished (``done``) unit is its value at the largest step that logged
    that metric, so metrics logged at different steps each keep their own last value. Training seconds are
    summarised the same way.
    """
    out: dict[str, Any] = {}
    for m in methods:
        statuses: dict[str, int] = {}
        for u in units:
            if u["method"] == m:
                statuses[u["status"]] = statuses.get(u["status"], 0) + 1
        mine = [r for r in records if r["method"] == m]
        names = sorted(k for k in {k for r in mine for k in r} if not is_identifier(k))
        metrics: dict[str, Any] = {}
        for name in names:
            vals = [v for v in records_final(mine, name, m).values() if math.isfinite(v)]
            if not vals:
                continue
            mu, sd = mean_sd(vals)
            metrics[name] = {"mean": mu, "sd": sd, "min": min(vals), "max": max(vals), "n": len(vals)}
        out[m] = {"units": statuses, "final": metrics}
    return out


#: Record keys that are bookkeeping, never metrics.
_NOT_METRICS = frozenset({"method", "seed", "step", "status", "attempt"})
#: Record keys that name a problem or setting rather than measure anything.
_TAG_NAMES = frozenset({"problem", "setting", "unit", "run_id", "slug", "scale"})
_TAG_PATTERN = re.compile(r"(^|_)(index|idx|id|final)$")  # `final`: log_result's flag


def is_identifier(name: str) -> bool:
    """Whether a record key is bookkeeping or a tag (``problem``, ``eval_index``, ``client_id`` ...), not a
    metric: :func:`summarize` and the report never average it."""
    return name in _NOT_METRICS or name in _TAG_NAMES or bool(_TAG_PATTERN.search(name))


def find_runs(root: Path | str) -> list[RunDir]:
    """Every run directory under ``root`` that has a verdict, newest first."""
    root = Path(root)
    if not root.exists():
        return []
    found = [RunDir(p.parent) for p in root.glob("*/*/*/verdict.json")]
    return sorted(found, key=lambda r: (r.path / "verdict.json").stat().st_mtime, reverse=True)
