"""The static HTML report: one self-contained file (inline CSS, figures embedded as base64 PNG, no scripts).

It has an index of all 51 registered methods with their status, contract, the verdicts of the newest runs
under the runs folder and the recorded verdicts (``verdicts/<slug>/<scale>.json``, see
:mod:`optarium.harness.recorded`; never hand-copied text), and per experiment and scale the latest stored
run: claim, verdict rule, verdict with its deciding figures, per-method summary, unit statuses (with
tracebacks of failures), figures, configuration and environment.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from optarium._core.registry import all_methods
from optarium.harness.experiment import SCALES
from optarium.harness.recorded import RECORD_SCALES, RecordedVerdict, load_recorded
from optarium.harness.storage import RunDir, find_runs

__all__ = ["latest_runs", "render_report", "unreadable_runs", "write_report"]

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:72rem;
color:#1d1d1f;line-height:1.45;padding:0 1rem}
h1{margin-bottom:.2rem}h2{border-top:1px solid #ddd;padding-top:1.2rem;margin-top:2rem}
table{border-collapse:collapse;margin:.6rem 0;font-size:.92rem}
th,td{border:1px solid #d0d0d5;padding:.25rem .55rem;text-align:left;vertical-align:top}
th{background:#f3f3f6}td.num{text-align:right;font-variant-numeric:tabular-nums}
.badge{display:inline-block;padding:.1rem .5rem;border-radius:.7rem;font-weight:600;font-size:.85rem}
.reproduced{background:#d7f5dd;color:#10561f}.not-reproduced{background:#fbd9d6;color:#7a1b12}
.inconclusive{background:#fdf0c8;color:#6b5000}.no-verdict{background:#e5e5ea;color:#333}
.muted{color:#666}.small{font-size:.8rem}
pre{background:#f6f6f8;padding:.6rem;overflow-x:auto;white-space:pre-wrap;word-break:break-word;font-size:.82rem}
td{overflow-wrap:anywhere}
img{max-width:100%;border:1px solid #e0e0e5;margin:.4rem 0}
"""


def _esc(x: Any) -> str:
    return html.escape(str(x))


def _fmt(x: Any) -> str:
    if isinstance(x, bool) or x is None:
        return _esc(x)
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        if math.isnan(x):
            return "nan"
        if x != 0 and (abs(x) < 1e-3 or abs(x) >= 1e5):
            return f"{x:.3e}"
        return f"{x:.4f}"
    return _esc(x)


def _badge(outcome: str) -> str:
    return f'<span class="badge {outcome.replace(" ", "-")}">{_esc(outcome)}</span>'


def _read(run: RunDir, name: str) -> Any:
    """``run``'s stored JSON file ``name`` (``None`` if absent); ``ValueError`` naming the file if it cannot
    be read (truncated by a kill, not UTF-8, not JSON)."""
    try:
        return run.read_json(name)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{run.path / name}: cannot be read ({exc})") from None


def _scan(runs_root: Path | str) -> tuple[dict[tuple[str, str], RunDir], list[str]]:
    """The newest run with a readable verdict per (slug, scale), and a line per run whose verdict is not."""
    latest: dict[tuple[str, str], RunDir] = {}
    bad: list[str] = []
    for run in find_runs(runs_root):  # newest first
        try:
            verdict = _read(run, "verdict.json")
            if not isinstance(verdict, dict) or "outcome" not in verdict:
                raise ValueError(f"{run.path / 'verdict.json'}: has no outcome")
        except ValueError as exc:
            bad.append(str(exc))
            continue
        latest.setdefault((run.path.parent.parent.name, run.path.parent.name), run)
    return latest, bad


def unreadable_runs(runs_root: Path | str) -> list[str]:
    """One line per stored run whose ``verdict.json`` cannot be read (the report leaves those runs out)."""
    return _scan(runs_root)[1]


def latest_runs(runs_root: Path | str) -> dict[tuple[str, str], RunDir]:
    """The newest run with a readable verdict for each (slug, scale); see :func:`unreadable_runs`."""
    return _scan(runs_root)[0]


def _recorded_cell(slug: str, recorded: Mapping[tuple[str, str], RecordedVerdict]) -> str:
    parts = []
    for scale in RECORD_SCALES:
        rec = recorded.get((slug, scale))
        if rec is not None:
            parts.append(
                f"<div>{_esc(scale)} {_badge(rec.outcome)} <span class='muted small'>{_esc(rec.summary)} "
                f"({_esc(rec.provenance())})</span></div>"
            )
    return "".join(parts) or '<span class="muted">-</span>'


def _index(
    latest: Mapping[tuple[str, str], RunDir], recorded: Mapping[tuple[str, str], RecordedVerdict]
) -> str:
    rows = []
    for m in all_methods():
        cells = []
        for scale in ("quick", "full"):
            run = latest.get((m.slug, scale))
            badge = _badge(_read(run, "verdict.json")["outcome"]) if run else None
            cells.append(badge or '<span class="muted">-</span>')
        has_run = any((m.slug, s) in latest for s in SCALES)
        name = f'<a href="#{_esc(m.slug)}">{_esc(m.slug)}</a>' if has_run else _esc(m.slug)
        rows.append(
            f"<tr><td>{name}</td><td>{_esc(m.family)}</td><td>{_esc(m.method)}</td>"
            f"<td>{_esc(m.status)}</td><td>{_esc(m.contract)}</td><td>{cells[0]}</td><td>{cells[1]}</td>"
            f"<td>{_recorded_cell(m.slug, recorded)}</td></tr>"
        )
    return (
        "<h2>All methods</h2><p class='muted'>Quick and full columns: the newest run stored under this "
        "report's runs folder. Last column: the recorded verdicts (verdicts/&lt;slug&gt;/&lt;scale&gt;.json, "
        "written by <code>optarium run SLUG --scale full --record</code>; also in docs/methods.md).</p>"
        "<table><tr><th>slug</th><th>family</th><th>method</th><th>status</th><th>contract</th>"
        "<th>quick run</th><th>full run</th><th>recorded verdicts</th></tr>" + "".join(rows) + "</table>"
    )


def _kv_table(d: Mapping[str, Any]) -> str:
    rows = "".join(f"<tr><th>{_esc(k)}</th><td class='num'>{_fmt(v)}</td></tr>" for k, v in d.items())
    return f"<table>{rows}</table>"


def _summary_table(summary: Mapping[str, Any]) -> str:
    methods = summary.get("methods", {})
    metrics = sorted({name for m in methods.values() for name in m.get("final", {})})
    head = "".join(f"<th>{_esc(n)} (mean &plusmn; sd, n)</th>" for n in metrics)
    rows = []
    for method, info in methods.items():
        units = ", ".join(f"{k}: {v}" for k, v in sorted(info.get("units", {}).items()))
        cells = []
        for n in metrics:
            s = info.get("final", {}).get(n)
            cells.append(
                f"<td class='num'>{_fmt(s['mean'])} &plusmn; {_fmt(s['sd'])} ({s['n']})</td>"
                if s
                else "<td>-</td>"
            )
        rows.append(f"<tr><td>{_esc(method)}</td><td>{_esc(units)}</td>{''.join(cells)}</tr>")
    return f"<table><tr><th>method</th><th>units</th>{head}</tr>{''.join(rows)}</table>"


def _failures(run: RunDir) -> str:
    bad = [u for u in run.units() if u["status"] != "done"]
    if not bad:
        return ""
    items = "".join(
        f"<details><summary>{_esc(u['method'])} seed {u['seed']}: {_esc(u['status'])}</summary>"
        f"<pre>{_esc(u.get('error') or '')}</pre></details>"
        for u in bad
    )
    return f"<h4>Units that did not finish</h4>{items}"


def _run_section(scale: str, run: RunDir) -> str:
    verdict = _read(run, "verdict.json") or {}
    problems = []
    parts: dict[str, Any] = {}
    for name in ("summary.json", "config.json", "environment.json"):
        try:
            parts[name] = _read(run, name) or {}
        except ValueError as exc:
            parts[name] = {}
            problems.append(str(exc))
    summary, config, env = parts["summary.json"], parts["config.json"], parts["environment.json"]
    warn = "".join(f"<p class='not-reproduced'>{_esc(p)}</p>" for p in problems)
    figs = "".join(
        f'<figure><img alt="{_esc(p.stem)}" src="data:image/png;base64,'
        f'{base64.b64encode(p.read_bytes()).decode()}">'
        f'<figcaption class="muted">{_esc(p.stem)}</figcaption></figure>'
        for p in run.figure_paths()
    )
    return (
        f"<h3>{_esc(scale)} scale {_badge(verdict.get('outcome', 'no verdict'))}</h3>{warn}"
        f"<p>{_esc(verdict.get('summary', ''))}</p>"
        f"<h4>Deciding figures</h4>{_kv_table(verdict.get('figures', {}))}"
        f"<h4>Final values per method</h4>{_summary_table(summary)}{_failures(run)}{figs}"
        f"<details><summary>Configuration</summary><pre>{_esc(json.dumps(config, indent=2))}</pre></details>"
        f"<details><summary>Environment</summary><pre>{_esc(json.dumps(env, indent=2))}</pre></details>"
        f"<p class='muted'>stored in {_esc(run.path)}</p>"
    )


def render_report(runs_root: Path | str = "runs", verdicts_dir: Path | str | None = None) -> str:
    """The report's HTML text for the runs stored under ``runs_root`` and the verdicts recorded in
    ``verdicts_dir`` (default :func:`optarium.harness.recorded.default_verdicts_dir`)."""
    latest, unreadable = _scan(runs_root)
    recorded = load_recorded(verdicts_dir)
    sections = []
    by_slug = {m.slug: m for m in all_methods()}
    for slug in [m.slug for m in all_methods()]:
        scales = [s for s in ("full", "quick", "smoke") if (slug, s) in latest]
        if not scales:
            continue
        first = _read(latest[(slug, scales[0])], "verdict.json") or {}
        info = by_slug[slug]
        sections.append(
            f'<h2 id="{_esc(slug)}">{_esc(slug)}: {_esc(info.title)}</h2>'
            f"<p class='muted'>{_esc(info.paper)} &middot; family {_esc(info.family)} &middot; "
            f"module <code>{_esc(info.module)}</code></p>"
            f"<p><b>Claim.</b> {_esc(first.get('claim', ''))}</p>"
            f"<p><b>Verdict rule (stated before running).</b> {_esc(first.get('rule', ''))}</p>"
            + "".join(_run_section(s, latest[(slug, s)]) for s in scales)
        )
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    n_impl = sum(m.status == "implemented" for m in all_methods())
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width,initial-scale=1'>"
        f"<title>optarium report</title><style>{_CSS}</style></head><body>"
        f"<h1>optarium report</h1><p class='muted'>generated {stamp} &middot; {len(all_methods())} methods, "
        f"{n_impl} implemented &middot; runs from {_esc(Path(runs_root).resolve())}</p>"
        + _index(latest, recorded)
        + ("".join(sections) or "<p>No runs stored yet: <code>optarium run SLUG</code> makes one.</p>")
        + _unreadable_section(unreadable)
        + "</body></html>"
    )


def _unreadable_section(bad: list[str]) -> str:
    if not bad:
        return ""
    items = "".join(f"<li><code>{_esc(line)}</code></li>" for line in bad)
    return f"<h2>Stored runs that could not be read</h2><p>Left out of this report:</p><ul>{items}</ul>"


def write_report(
    runs_root: Path | str = "runs",
    out: Path | str = "runs/report.html",
    verdicts_dir: Path | str | None = None,
) -> Path:
    """Write the report to ``out`` (parents created) and return its path."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_report(runs_root, verdicts_dir), encoding="utf-8")
    return out
