"""``docs/methods.md``, generated from the registry by ``optarium docs`` (``--check``: is it stale?)."""

from __future__ import annotations

from pathlib import Path

from optarium._core.registry import FAMILIES, all_methods

__all__ = ["render_methods_md", "write_methods_md"]


def _cell(text: str | None) -> str:
    return (text or "-").replace("|", "\\|").replace("\n", " ")


def render_methods_md() -> str:
    """The Markdown text of ``docs/methods.md``."""
    methods = all_methods()
    counts = {s: sum(m.status == s for m in methods) for s in ("implemented", "planned", "blocked")}
    lines = [
        "# Methods",
        "",
        "Generated from the registry (`src/optarium/_core/_methods.py`) by `optarium docs`; "
        "do not edit by hand.",
        "",
        f"{len(methods)} methods: {counts['implemented']} implemented, {counts['planned']} planned, "
        f"{counts['blocked']} blocked. `optarium run SLUG` reproduces a method's claim; "
        "`optarium list` shows this table in the terminal.",
        "",
    ]
    for family in FAMILIES:
        rows = [m for m in methods if m.family == family]
        if not rows:
            continue
        lines += [
            f"## {family}",
            "",
            "| slug | method | paper | status | module | experiment | last verdict | notes |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for m in rows:
            lines.append(
                f"| {m.slug} | {_cell(m.method)} | {_cell(m.title)} ({_cell(m.paper)}) | {m.status} | "
                f"{_cell(f'`{m.module}`' if m.module else None)} | "
                f"{_cell(f'`{m.experiment}`' if m.experiment else None)} | {_cell(m.last_verdict)} | "
                f"{_cell(m.notes)} |"
            )
        lines.append("")
    return "\n".join(lines)


def write_methods_md(path: Path | str) -> Path:
    """Write :func:`render_methods_md` to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_methods_md(), encoding="utf-8")
    return path
