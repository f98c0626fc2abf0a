"""The static HTML report: one self-contained file (inline CSS, figures embedded as base64 PNG, no scripts).

Written for a researcher who opens it in a browser window (1280 px is the width the tests check):

1. a scoreboard: per family, the implemented methods and the counts of reproduced / not reproduced /
   inconclusive recorded verdicts at quick and at full scale (``verdicts/<slug>/<scale>.json``, see
   :mod:`optarium.harness.recorded`; never hand-copied text);
2. a table of contents by family, and an overview table of the implemented methods with their recorded
   verdicts and the verdicts of the newest runs stored under the report's runs folder;
3. the planned (not yet implemented) methods in a short list of their own;
4. one section per implemented method: the claim, the verdict rule stated before running, the recorded
   verdicts in words, and per stored scale the newest run's verdict, its summary, its deciding figures (a
   short table, or folded away when there are many), the final values per method (built with
   :mod:`optarium.harness.results`: mean ± sd over seeds, a single seed shown as one number, non-finite
   finals counted, identifiers never averaged), the units that did not finish with their tracebacks, the
   figures at their own size, and the configuration and environment folded away.

Tables are kept narrow enough for the page: the final values are split into tables of at most
:data:`METRICS_PER_TABLE` metrics, words never break inside (long identifiers wrap at underscores).
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import json
import math
import struct
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from optarium._core.registry import MethodInfo, all_methods
from optarium.harness.recorded import RECORD_SCALES, RecordedVerdict, load_recorded
from optarium.harness.storage import RunDir, find_runs

__all__ = [
    "FIGURES_SHOWN",
    "METRICS_PER_TABLE",
    "latest_runs",
    "render_report",
    "unreadable_runs",
    "write_report",
]

#: At most this many deciding figures are shown open; more are folded into a ``<details>`` element.
FIGURES_SHOWN = 10
#: The final-values table of a run is split into tables of at most this many metrics (columns).
METRICS_PER_TABLE = 4
_OUTCOMES = ("reproduced", "not reproduced", "inconclusive")

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:1.5rem auto;max-width:74rem;
color:#1d1d1f;line-height:1.45;padding:0 1rem;font-size:15px}
h1{margin-bottom:.2rem}h2{border-top:1px solid #ddd;padding-top:1.2rem;margin-top:2.2rem}
h3{margin-top:1.4rem}h4{margin:.9rem 0 .3rem}
table{border-collapse:collapse;margin:.5rem 0;font-size:.9rem;max-width:100%}
th,td{border:1px solid #d0d0d5;padding:.22rem .5rem;text-align:left;vertical-align:top;
overflow-wrap:break-word;word-break:normal;hyphens:none}
th{background:#f3f3f6;font-weight:600}td.num{text-align:right;font-variant-numeric:tabular-nums;
white-space:nowrap}
td.slug,th.slug{white-space:nowrap}
.badge{display:inline-block;padding:.05rem .45rem;border-radius:.7rem;font-weight:600;font-size:.8rem;
white-space:nowrap}
.reproduced{background:#d7f5dd;color:#10561f}.not-reproduced{background:#fbd9d6;color:#7a1b12}
.inconclusive{background:#fdf0c8;color:#6b5000}.no-verdict{background:#e5e5ea;color:#333}
.count-reproduced{color:#10561f;font-weight:600}.count-not-reproduced{color:#7a1b12;font-weight:600}
.count-inconclusive{color:#6b5000;font-weight:600}
.muted{color:#666}.small{font-size:.82rem}.warn{color:#7a1b12}
nav.toc{columns:3 18rem;font-size:.9rem;background:#f8f8fa;padding:.6rem 1rem;border:1px solid #e3e3e8}
nav.toc div{break-inside:avoid;margin-bottom:.5rem}nav.toc a{margin-right:.4rem}
ul.planned{columns:2 24rem;font-size:.88rem}
pre{background:#f6f6f8;padding:.6rem;overflow-x:auto;white-space:pre-wrap;word-break:break-word;font-size:.8rem}
img{max-width:100%;height:auto;border:1px solid #e0e0e5;margin:.4rem 0}
figure{margin:.4rem 0}figcaption{font-size:.85rem}
details{margin:.3rem 0}summary{cursor:pointer}
"""


def _esc(x: Any) -> str:
    return html.escape(str(x))


def _wrap(name: str) -> str:
    """An identifier (``dense_cosine_mean_gap``) escaped, with break opportunities after its underscores,
    so it wraps between its parts and never inside a word."""
    return "_<wbr>".join(_esc(part) for part in str(name).split("_"))


def _fmt(x: Any) -> str:
    if isinstance(x, bool) or x is None:
        return _esc(x)
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        if math.isnan(x):
            return "nan"
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        if x != 0 and (abs(x) < 1e-3 or abs(x) >= 1e5):
            return f"{x:.3e}"
        return f"{x:.4g}" if abs(x) >= 1 else f"{x:.4f}"
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


# ------------------------------------------------------------------------------------- top of the report


def _scoreboard(methods: Sequence[MethodInfo], recorded: Mapping[tuple[str, str], RecordedVerdict]) -> str:
    families: dict[str, list[MethodInfo]] = {}
    for m in methods:
        families.setdefault(m.family, []).append(m)
    head = "".join(f"<th colspan='4'>{s} (recorded)</th>" for s in RECORD_SCALES)
    sub = "".join(
        "<th>reproduced</th><th>not reproduced</th><th>inconclusive</th><th>none</th>" for _ in RECORD_SCALES
    )
    rows = []
    totals = [0] * (2 + 4 * len(RECORD_SCALES))

    def cells(ms: Sequence[MethodInfo]) -> list[int]:
        impl = [m for m in ms if m.status == "implemented"]
        out = [len(ms), len(impl)]
        for scale in RECORD_SCALES:
            got = [recorded[(m.slug, scale)].outcome for m in impl if (m.slug, scale) in recorded]
            out += [got.count(o) for o in _OUTCOMES] + [len(impl) - len(got)]
        return out

    def row(label: str, values: list[int], bold: bool = False) -> str:
        tds = []
        for i, v in enumerate(values):
            k = (i - 2) % 4 if i >= 2 else -1
            cls = f" count-{_OUTCOMES[k].replace(' ', '-')}" if 0 <= k < 3 and v else ""
            tds.append(f"<td class='num{cls}'>{v}</td>")
        label = f"<b>{_esc(label)}</b>" if bold else _esc(label)
        return f"<tr><td class='slug'>{label}</td>{''.join(tds)}</tr>"

    for fam, ms in sorted(families.items()):
        values = cells(ms)
        totals = [a + b for a, b in zip(totals, values, strict=True)]
        rows.append(row(fam, values))
    rows.append(row("all families", totals, bold=True))
    return (
        "<h2 id='scoreboard'>Scoreboard</h2><p class='muted'>Recorded verdicts of the implemented methods "
        "(verdicts/&lt;slug&gt;/&lt;scale&gt;.json, written by <code>optarium run SLUG --scale full "
        "--record</code>), counted per family; <i>none</i>: implemented but not recorded at that scale.</p>"
        f"<table><tr><th rowspan='2'>family</th><th rowspan='2'>methods</th><th rowspan='2'>implemented</th>"
        f"{head}</tr><tr>{sub}</tr>{''.join(rows)}</table>"
    )


def _toc(implemented: Sequence[MethodInfo], *, any_planned: bool) -> str:
    families: dict[str, list[str]] = {}
    for m in implemented:
        families.setdefault(m.family, []).append(m.slug)
    blocks = "".join(
        f"<div><b>{_esc(fam)}</b><br>"
        + " ".join(f'<a href="#{_esc(s)}">{_esc(s)}</a>' for s in slugs)
        + "</div>"
        for fam, slugs in sorted(families.items())
    )
    return (
        "<h2 id='contents'>Contents</h2><nav class='toc'>"
        "<div><a href='#scoreboard'>Scoreboard</a> <a href='#overview'>Overview</a>"
        + (" <a href='#planned'>Planned methods</a>" if any_planned else "")
        + "</div>"
        + blocks
        + "</nav>"
    )


def _verdict_cell(slug: str, scale: str, recorded: Mapping[tuple[str, str], RecordedVerdict]) -> str:
    rec = recorded.get((slug, scale))
    return _badge(rec.outcome) if rec is not None else '<span class="muted">-</span>'


def _overview(
    implemented: Sequence[MethodInfo],
    latest: Mapping[tuple[str, str], RunDir],
    recorded: Mapping[tuple[str, str], RecordedVerdict],
) -> str:
    rows = []
    for m in implemented:
        runs = []
        for scale in ("quick", "full"):
            run = latest.get((m.slug, scale))
            none = '<span class="muted">-</span>'
            runs.append(_badge(_read(run, "verdict.json")["outcome"]) if run else none)
        rows.append(
            f'<tr><td class="slug"><a href="#{_esc(m.slug)}">{_esc(m.slug)}</a></td><td>{_esc(m.family)}</td>'
            f"<td>{_esc(m.method)}</td><td>{_esc(m.contract)}</td>"
            f"<td>{_verdict_cell(m.slug, 'quick', recorded)}</td>"
            f"<td>{_verdict_cell(m.slug, 'full', recorded)}</td>"
            f"<td>{runs[0]}</td><td>{runs[1]}</td></tr>"
        )
    return (
        "<h2 id='overview'>Overview of the implemented methods</h2><p class='muted'>Recorded: the committed "
        "verdicts. Newest run: the newest run stored under this report's runs folder (may differ from the "
        "recorded one, e.g. after a code change).</p>"
        "<table><tr><th class='slug'>slug</th><th>family</th><th>method</th><th>contract</th>"
        "<th>recorded quick</th><th>recorded full</th><th>newest run quick</th><th>newest run full</th></tr>"
        + "".join(rows)
        + "</table>"
    )


def _planned(planned: Sequence[MethodInfo]) -> str:
    if not planned:
        return ""
    items = "".join(
        f"<li><code>{_esc(m.slug)}</code> <span class='muted'>({_esc(m.family)})</span>: "
        f"{_esc(m.method)}</li>"
        for m in planned
    )
    return f"<h2 id='planned'>Planned methods ({len(planned)})</h2><ul class='planned'>{items}</ul>"


# ---------------------------------------------------------------------------------------- one method


def _figures_table(figures: Mapping[str, Any]) -> str:
    def table(items: Sequence[tuple[str, Any]]) -> str:
        rows = "".join(f"<tr><th>{_wrap(k)}</th><td class='num'>{_fmt(v)}</td></tr>" for k, v in items)
        return f"<table>{rows}</table>"

    items = list(figures.items())
    if not items:
        return "<p class='muted'>No deciding figures.</p>"
    if len(items) <= FIGURES_SHOWN:
        return table(items)
    return (
        f"<details><summary>All {len(items)} deciding figures (the summary above states the deciding "
        f"ones in words)</summary>{table(items)}</details>"
    )


def _value_cell(row: Mapping[str, Any]) -> str:
    n, bad = int(row["n"]), int(row["n_nonfinite"])
    if n == 0:
        text = "-"
    elif n == 1:
        text = f"{_fmt(float(row['mean']))} <span class='muted small'>(1 seed)</span>"
    else:
        text = (
            f"{_fmt(float(row['mean']))} &plusmn; {_fmt(float(row['sd']))} "
            f"<span class='muted small'>({n})</span>"
        )
    if bad:
        text += f" <span class='warn small'>+{bad} non-finite</span>"
    return f"<td class='num'>{text}</td>"


def _final_values(run: RunDir) -> str:
    from optarium.harness.results import final_values, load_runs, summarize_finals

    stats = summarize_finals(final_values(load_runs(run.path)))
    if stats.empty:
        return "<p class='muted'>No finished unit logged a metric.</p>"
    methods = list(dict.fromkeys(stats["method"]))
    metrics = sorted(set(stats["metric"]), key=lambda m: (m == "seconds", m))
    cell = {(r["method"], r["metric"]): r for r in stats.to_dict("records")}
    tables = []
    for i in range(0, len(metrics), METRICS_PER_TABLE):
        chunk = metrics[i : i + METRICS_PER_TABLE]
        head = "".join(f"<th>{_wrap(m)}</th>" for m in chunk)
        rows = "".join(
            f"<tr><td class='slug'>{_esc(meth)}</td>"
            + "".join(_value_cell(cell[(meth, m)]) if (meth, m) in cell else "<td>-</td>" for m in chunk)
            + "</tr>"
            for meth in methods
        )
        tables.append(f"<table><tr><th>method</th>{head}</tr>{rows}</table>")
    return (
        "<p class='muted small'>Final value of each metric per finished unit, mean &plusmn; sd over seeds "
        "(number of seeds).</p>" + "".join(tables)
    )


def _units(run: RunDir) -> str:
    units = run.units()
    counts: dict[str, int] = {}
    for u in units:
        counts[u["status"]] = counts.get(u["status"], 0) + 1
    line = ", ".join(f"{v} {k}" for k, v in sorted(counts.items())) or "none"
    bad = [u for u in units if u["status"] != "done"]
    items = "".join(
        f"<details><summary>{_esc(u['method'])} seed {u['seed']}: {_esc(u['status'])}</summary>"
        f"<pre>{_esc(u.get('error') or '')}</pre></details>"
        for u in bad
    )
    warn = " warn" if bad else ""
    return f"<p class='small{warn}'>Units: {_esc(line)}.</p>" + (
        f"<h4>Units that did not finish</h4>{items}" if bad else ""
    )


def _png_width(data: bytes) -> int | None:
    if data[:8] != b"\x89PNG\r\n\x1a\n" or len(data) < 24:
        return None
    return int(struct.unpack(">I", data[16:20])[0])


def _figures(run: RunDir) -> str:
    out = []
    for p in run.figure_paths():
        data = p.read_bytes()
        width = _png_width(data)
        size = f' width="{width}"' if width else ""
        out.append(
            f'<figure><img alt="{_esc(p.stem)}"{size} src="data:image/png;base64,'
            f'{base64.b64encode(data).decode()}">'
            f'<figcaption class="muted">{_esc(p.stem)}</figcaption></figure>'
        )
    return "".join(out)


def _run_section(scale: str, run: RunDir) -> str:
    verdict = _read(run, "verdict.json") or {}
    problems = []
    parts: dict[str, Any] = {}
    for name in ("config.json", "environment.json"):
        try:
            parts[name] = _read(run, name) or {}
        except ValueError as exc:
            parts[name] = {}
            problems.append(str(exc))
    warn = "".join(f"<p class='warn'>{_esc(p)}</p>" for p in problems)
    return (
        f"<h3>Newest {_esc(scale)} run {_badge(verdict.get('outcome', 'no verdict'))}</h3>{warn}"
        f"<p>{_esc(verdict.get('summary', ''))}</p>"
        f"<h4>Deciding figures</h4>{_figures_table(verdict.get('figures', {}))}"
        f"<h4>Final values per method</h4>{_final_values(run)}{_units(run)}{_figures(run)}"
        f"<details><summary>Configuration</summary><pre>{_esc(json.dumps(parts['config.json'], indent=2))}"
        f"</pre></details><details><summary>Environment</summary>"
        f"<pre>{_esc(json.dumps(parts['environment.json'], indent=2))}</pre></details>"
        f"<p class='muted small'>stored in {_esc(run.path)}</p>"
    )


def _recorded_block(slug: str, recorded: Mapping[tuple[str, str], RecordedVerdict]) -> str:
    items = []
    for scale in RECORD_SCALES:
        rec = recorded.get((slug, scale))
        if rec is not None:
            items.append(
                f"<li><b>{_esc(scale)}</b> {_badge(rec.outcome)} {_esc(rec.summary)} "
                f"<span class='muted small'>({_esc(rec.provenance())})</span></li>"
            )
    if not items:
        return "<p class='muted'>No verdict recorded yet.</p>"
    return f"<h4>Recorded verdicts</h4><ul>{''.join(items)}</ul>"


def _method_section(
    info: MethodInfo,
    latest: Mapping[tuple[str, str], RunDir],
    recorded: Mapping[tuple[str, str], RecordedVerdict],
) -> str:
    scales = [s for s in ("full", "quick", "smoke") if (info.slug, s) in latest]
    claim = rule = ""
    if scales:
        first = _read(latest[(info.slug, scales[0])], "verdict.json") or {}
        claim, rule = first.get("claim", ""), first.get("rule", "")
    for scale in RECORD_SCALES:
        rec = recorded.get((info.slug, scale))
        if rec is not None:
            claim, rule = claim or rec.claim, rule or rec.rule
    text = (
        f'<h2 id="{_esc(info.slug)}">{_esc(info.slug)}: {_esc(info.title)}</h2>'
        f"<p class='muted'>{_esc(info.paper)} &middot; family {_esc(info.family)} &middot; contract "
        f"{_esc(info.contract)} &middot; module <code>{_esc(info.module)}</code></p>"
    )
    if claim:
        text += f"<p><b>Claim.</b> {_esc(claim)}</p>"
    if rule:
        text += f"<p><b>Verdict rule (stated before running).</b> {_esc(rule)}</p>"
    text += _recorded_block(info.slug, recorded)
    if not scales:
        text += "<p class='muted'>No run stored under this report's runs folder.</p>"
    return text + "".join(_run_section(s, latest[(info.slug, s)]) for s in scales)


# --------------------------------------------------------------------------------------------- the page


def render_report(runs_root: Path | str = "runs", verdicts_dir: Path | str | None = None) -> str:
    """The report's HTML text for the runs stored under ``runs_root`` and the verdicts recorded in
    ``verdicts_dir`` (default :func:`optarium.harness.recorded.default_verdicts_dir`)."""
    latest, unreadable = _scan(runs_root)
    recorded = load_recorded(verdicts_dir)
    methods = all_methods()
    implemented = [m for m in methods if m.status == "implemented"]
    planned = [m for m in methods if m.status != "implemented"]
    sections = "".join(_method_section(m, latest, recorded) for m in implemented)
    stray = sorted({slug for slug, _ in latest} - {m.slug for m in implemented})
    if stray:  # runs of a method the registry lists as planned (work in progress) still show
        by_slug = {m.slug: m for m in methods}
        sections += "".join(_method_section(by_slug[s], latest, recorded) for s in stray if s in by_slug)
    if not latest:
        sections += "<p>No runs stored yet: <code>optarium run SLUG</code> makes one.</p>"
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width,initial-scale=1'>"
        f"<title>optarium report</title><style>{_CSS}</style></head><body>"
        f"<h1>optarium report</h1><p class='muted'>generated {stamp} &middot; {len(methods)} methods, "
        f"{len(implemented)} implemented &middot; runs from {_esc(Path(runs_root).resolve())}</p>"
        + _scoreboard(methods, recorded)
        + _toc(implemented, any_planned=bool(planned))
        + _overview(implemented, latest, recorded)
        + _planned(planned)
        + sections
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
