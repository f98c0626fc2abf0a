"""Recorded verdicts: one small committed file per slug and scale, the source of the verdicts the docs show.

``optarium run SLUG --scale full --record`` (any scale but ``smoke``) writes
``verdicts/<slug>/<scale>.json`` from the run it just finished: the outcome, the deciding figures and the
summary, the claim and rule, the number of seeds, the run id, the code version (git commit and whether the
tree was dirty, and the code fingerprint the runner computed), the date and the optarium version.
``docs/methods.md`` (``optarium docs``), ``optarium list`` and the report's index are generated from these
files, so a verdict is never copied by hand.

Where the folder is (:func:`default_verdicts_dir`): the ``OPTARIUM_VERDICTS`` environment variable if set,
else ``verdicts/`` at the root of the source checkout the package runs from (``src/optarium`` with a
``pyproject.toml`` two levels up), else ``verdicts/`` in the working directory. Every command that reads or
writes verdicts takes ``--verdicts DIR`` to override it.

A run is recorded only if it can stand as a verdict: not at smoke scale, every (method, seed) unit done, an
outcome other than ``no verdict``; otherwise :func:`record_from_run` raises ``ValueError`` naming
``run_dir``. Files transcribed from the hand-copied registry text of commit 8f6b32c carry
``"source": "transcribed"`` and the text itself under ``transcribed_from`` (no run id, no code version).

>>> rec = RecordedVerdict(slug="gradpower", scale="quick", outcome="inconclusive", summary="gap 0.01 ± 0.04")
>>> rec.describe()
'quick: inconclusive (gap 0.01 ± 0.04)'
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import math
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from optarium.harness.experiment import OUTCOMES

__all__ = [
    "FORMAT",
    "RECORD_SCALES",
    "SOURCES",
    "TRANSCRIBED_COMMIT",
    "VERDICTS_ENV",
    "RecordedVerdict",
    "default_verdicts_dir",
    "load_recorded",
    "record_from_run",
    "record_run",
    "verdict_path",
    "write_recorded",
]

#: Environment variable naming the verdicts folder (overrides the checkout's ``verdicts/``).
VERDICTS_ENV = "OPTARIUM_VERDICTS"
#: Scales a verdict can be recorded at (``smoke`` never claims one).
RECORD_SCALES: tuple[str, ...] = ("quick", "full")
#: ``run``: written by ``--record`` from a stored run; ``transcribed``: converted from the registry text.
SOURCES: tuple[str, ...] = ("run", "transcribed")
#: The commit whose hand-copied ``last_verdict`` texts the transcribed files were converted from.
TRANSCRIBED_COMMIT = "8f6b32c52797a712b46df054bd7b7ba5e3575f0d"
#: Version of the file layout.
FORMAT = 1

_RECORDED_OUTCOMES = tuple(o for o in OUTCOMES if o != "no verdict")
_KEYS = (
    "format",
    "slug",
    "scale",
    "outcome",
    "summary",
    "figures",
    "claim",
    "rule",
    "seeds",
    "units",
    "run_id",
    "code",
    "date",
    "optarium_version",
    "source",
    "transcribed_from",
)


@dataclass(frozen=True)
class RecordedVerdict:
    """One recorded verdict, the content of ``verdicts/<slug>/<scale>.json``.

    Attributes:
        slug: the registered method.
        scale: one of :data:`RECORD_SCALES`.
        outcome: ``reproduced``, ``not reproduced`` or ``inconclusive``.
        summary: why, in terms of the figures (a transcribed file: the registry text for this scale).
        figures: the deciding figures (name -> number, string, bool or ``None``).
        claim: the experiment's claim; rule: its verdict rule (empty when transcribed).
        seeds: the number of seeds (seeds are ``0 .. seeds-1``), ``None`` if not known.
        units: unit counts by status (``{"done": 16}``).
        run_id: the stored run's id (``runs/<slug>/<scale>/<run_id>``), ``None`` if transcribed.
        git_commit, git_dirty, code_fingerprint: the code version the run used (``None`` where unknown).
        date: when it was recorded (ISO 8601, UTC); transcribed: the date the text was first committed.
        optarium_version: the package version.
        source: one of :data:`SOURCES`.
        transcribed_from: for a transcribed file, the commit, path, field and full text it came from.
    """

    slug: str
    scale: str
    outcome: str
    summary: str = ""
    figures: Mapping[str, Any] = field(default_factory=dict)
    claim: str = ""
    rule: str = ""
    seeds: int | None = None
    units: Mapping[str, int] = field(default_factory=dict)
    run_id: str | None = None
    git_commit: str | None = None
    git_dirty: bool | None = None
    code_fingerprint: str | None = None
    date: str = ""
    optarium_version: str | None = None
    source: str = "run"
    transcribed_from: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.scale not in RECORD_SCALES:
            raise ValueError(f"scale: a verdict is recorded at {RECORD_SCALES}, got {self.scale!r}")
        if self.outcome not in _RECORDED_OUTCOMES:
            raise ValueError(f"outcome: must be one of {_RECORDED_OUTCOMES}, got {self.outcome!r}")
        if self.source not in SOURCES:
            raise ValueError(f"source: must be one of {SOURCES}, got {self.source!r}")
        if (self.source == "transcribed") != (self.transcribed_from is not None):
            raise ValueError("transcribed_from: given exactly when source is 'transcribed'")
        for k, v in self.figures.items():
            if not isinstance(v, (int, float, str, bool)) and v is not None:
                raise TypeError(
                    f"figures: {k!r} must be a number, string, bool or None, got {type(v).__name__}"
                )
        object.__setattr__(self, "figures", MappingProxyType(dict(self.figures)))
        object.__setattr__(self, "units", MappingProxyType(dict(self.units)))
        if self.transcribed_from is not None:
            object.__setattr__(self, "transcribed_from", MappingProxyType(dict(self.transcribed_from)))

    def provenance(self) -> str:
        """Where the verdict comes from, in a few words (``recorded 2026-12-01, 1a2b3c4``)."""
        if self.source == "transcribed":
            return f"transcribed from the registry text at {TRANSCRIBED_COMMIT[:7]}"
        parts = [f"recorded {self.date[:10]}" if self.date else "recorded"]
        if self.git_commit:
            parts.append(self.git_commit[:7] + ("+dirty" if self.git_dirty else ""))
        if self.seeds is not None:
            parts.append(f"{self.seeds} seeds")
        return ", ".join(parts)

    def describe(self) -> str:
        """``scale: outcome (summary)``: the one-line text the docs and ``optarium list`` show."""
        return f"{self.scale}: {self.outcome}" + (f" ({self.summary})" if self.summary else "")

    def to_json(self) -> dict[str, Any]:
        """The file's JSON object (keys in :data:`_KEYS` order)."""
        return {
            "format": FORMAT,
            "slug": self.slug,
            "scale": self.scale,
            "outcome": self.outcome,
            "summary": self.summary,
            "figures": {k: _finite_or_none(v) for k, v in self.figures.items()},
            "claim": self.claim,
            "rule": self.rule,
            "seeds": self.seeds,
            "units": dict(self.units),
            "run_id": self.run_id,
            "code": {
                "git_commit": self.git_commit,
                "git_dirty": self.git_dirty,
                "fingerprint": self.code_fingerprint,
            },
            "date": self.date,
            "optarium_version": self.optarium_version,
            "source": self.source,
            "transcribed_from": dict(self.transcribed_from) if self.transcribed_from is not None else None,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RecordedVerdict:
        """Inverse of :meth:`to_json`; ``ValueError`` naming the field on a bad or missing one."""
        if not isinstance(data, Mapping):
            raise ValueError(f"data: must be a JSON object, got {type(data).__name__}")
        missing = [k for k in _KEYS if k not in data]
        unknown = sorted(set(data) - set(_KEYS))
        if missing or unknown:
            raise ValueError(
                f"data: missing key(s) {missing or '-'}, unknown key(s) {unknown or '-'}; expected {_KEYS}"
            )
        if data["format"] != FORMAT:
            raise ValueError(f"format: this optarium reads format {FORMAT}, got {data['format']!r}")
        code = data["code"]
        if not isinstance(code, Mapping) or set(code) != {"git_commit", "git_dirty", "fingerprint"}:
            raise ValueError(f"code: must hold git_commit, git_dirty and fingerprint, got {code!r}")
        if data["seeds"] is not None and (not isinstance(data["seeds"], int) or data["seeds"] < 1):
            raise ValueError(f"seeds: must be a positive integer or null, got {data['seeds']!r}")
        if not isinstance(data["figures"], Mapping) or not isinstance(data["units"], Mapping):
            raise ValueError("figures: and units: must be JSON objects")
        return cls(
            slug=str(data["slug"]),
            scale=data["scale"],
            outcome=data["outcome"],
            summary=str(data["summary"]),
            figures=data["figures"],
            claim=str(data["claim"]),
            rule=str(data["rule"]),
            seeds=data["seeds"],
            units=data["units"],
            run_id=data["run_id"],
            git_commit=code["git_commit"],
            git_dirty=code["git_dirty"],
            code_fingerprint=code["fingerprint"],
            date=str(data["date"]),
            optarium_version=data["optarium_version"],
            source=data["source"],
            transcribed_from=data["transcribed_from"],
        )


def _finite_or_none(v: Any) -> Any:
    return None if isinstance(v, float) and not math.isfinite(v) else v


def default_verdicts_dir() -> Path:
    """``$OPTARIUM_VERDICTS`` if set, else the checkout's ``verdicts/``, else ``./verdicts``."""
    env = os.environ.get(VERDICTS_ENV)
    if env:
        return Path(env)
    package = Path(__file__).resolve().parents[1]  # .../src/optarium
    root = package.parents[1]
    if package.parent.name == "src" and (root / "pyproject.toml").is_file():
        return root / "verdicts"
    return Path.cwd() / "verdicts"


def verdict_path(verdicts_dir: Path | str, slug: str, scale: str) -> Path:
    """``verdicts_dir/slug/scale.json``."""
    return Path(verdicts_dir) / slug / f"{scale}.json"


def record_from_run(run_dir: Path | str) -> RecordedVerdict:
    """The :class:`RecordedVerdict` of a stored run directory (``runs/<slug>/<scale>/<run-id>``).

    Raises ``ValueError`` starting with ``run_dir`` when the run cannot stand as a verdict: a smoke run, a
    run without a verdict, or one whose units did not all finish (``done``) for every method and seed.
    """
    from importlib import metadata

    from optarium.harness.storage import RunDir

    run = RunDir(Path(run_dir))
    verdict = run.read_json("verdict.json")
    config = run.read_json("config.json")
    if verdict is None or config is None:
        raise ValueError(f"run_dir: {run.path} holds no finished run (no verdict.json or config.json)")
    scale = config.get("scale")
    if scale not in RECORD_SCALES:
        raise ValueError(f"run_dir: {scale} runs never claim a verdict; record a quick or full run")
    units = run.units()
    counts: dict[str, int] = {}
    for u in units:
        counts[u["status"]] = counts.get(u["status"], 0) + 1
    cfg = config.get("config", {})
    expected = len(cfg.get("methods", ())) * int(cfg.get("seeds", 0))
    not_done = len(units) - counts.get("done", 0)
    if not_done or len(units) < expected:
        statuses = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()) if s != "done")
        missing = expected - len(units)
        detail = "; ".join(x for x in (statuses, f"{missing} not run" if missing > 0 else "") if x)
        raise ValueError(
            f"run_dir: {counts.get('done', 0)} of {max(expected, len(units))} units finished ({detail}); "
            "a verdict is recorded only from a run whose units all finished"
        )
    if verdict.get("outcome") not in _RECORDED_OUTCOMES:
        raise ValueError(f"run_dir: the run's outcome {verdict.get('outcome')!r} is not a verdict")
    env = run.read_json("environment.json") or {}
    commit = env.get("git_revision")
    try:
        version = metadata.version("optarium")
    except metadata.PackageNotFoundError:
        version = None
    return RecordedVerdict(
        slug=config["slug"],
        scale=scale,
        outcome=verdict["outcome"],
        summary=verdict.get("summary", ""),
        figures=verdict.get("figures", {}),
        claim=verdict.get("claim", ""),
        rule=verdict.get("rule", ""),
        seeds=int(cfg["seeds"]) if "seeds" in cfg else None,
        units=counts,
        run_id=run.path.name,
        git_commit=commit if commit and commit != "unknown" else None,
        git_dirty=env.get("git_dirty"),
        code_fingerprint=config.get("code"),
        date=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        optarium_version=env.get("versions", {}).get("optarium") or version,
        source="run",
    )


def write_recorded(record: RecordedVerdict, verdicts_dir: Path | str | None = None) -> Path:
    """Write ``record`` to ``verdicts_dir/slug/scale.json`` atomically (replacing an earlier one).

    ``ValueError`` starting with ``verdicts_dir`` if the folder cannot be written.
    """
    folder = Path(verdicts_dir) if verdicts_dir is not None else default_verdicts_dir()
    path = verdict_path(folder, record.slug, record.scale)
    text = json.dumps(record.to_json(), indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise ValueError(f"verdicts_dir: cannot write to {path.parent}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return path


def record_run(run_dir: Path | str, verdicts_dir: Path | str | None = None) -> Path:
    """Record the verdict of the stored run ``run_dir`` (:func:`record_from_run`) and return the file."""
    return write_recorded(record_from_run(run_dir), verdicts_dir)


def load_recorded(verdicts_dir: Path | str | None = None) -> dict[tuple[str, str], RecordedVerdict]:
    """Every recorded verdict under ``verdicts_dir`` (default :func:`default_verdicts_dir`), by (slug, scale).

    A missing folder means no verdicts. A file whose content is bad, whose slug is not registered, or whose
    place (``<slug>/<scale>.json``) does not match its content raises ``ValueError`` naming the file.
    """
    from optarium._core.registry import get_method

    folder = Path(verdicts_dir) if verdicts_dir is not None else default_verdicts_dir()
    found: dict[tuple[str, str], RecordedVerdict] = {}
    if not folder.is_dir():
        return found
    for path in sorted(folder.glob("*/*.json")):
        try:
            rec = RecordedVerdict.from_json(json.loads(path.read_text(encoding="utf-8")))
            if (rec.slug, rec.scale) != (path.parent.name, path.stem):
                raise ValueError(f"slug/scale: the file holds {rec.slug}/{rec.scale}")
            get_method(rec.slug)
        except (ValueError, TypeError, KeyError) as exc:
            msg = exc.args[0] if isinstance(exc, KeyError) else str(exc)
            raise ValueError(f"verdicts_dir: {path}: {msg}") from None
        found[(rec.slug, rec.scale)] = rec
    return found
