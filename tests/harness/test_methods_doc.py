"""docs/methods.md is generated from the registry's data files and the recorded verdict files only."""

from __future__ import annotations

from pathlib import Path

from optarium._core.registry import all_methods
from optarium.harness.methods_doc import render_methods_md, verdict_cell
from optarium.harness.recorded import RecordedVerdict, load_recorded, write_recorded

ROOT = Path(__file__).resolve().parents[2]


def _row(text: str, slug: str) -> list[str]:
    line = next(x for x in text.splitlines() if x.startswith(f"| {slug} |"))
    return [c.strip() for c in line.strip("|").split(" | ")]


def test_every_method_has_a_row_with_its_contract_and_module(tmp_path: Path) -> None:
    text = render_methods_md(tmp_path / "none")
    for m in all_methods():
        cells = _row(text, m.slug)
        assert cells[3:5] == [m.status, m.contract], m.slug
        assert cells[5] == (f"`{m.module}`" if m.module else "-"), m.slug
        assert cells[7] == "-", f"{m.slug}: a verdict shown although none is recorded"
    assert "0 recorded verdicts" in text


def test_verdict_column_comes_from_the_files(tmp_path: Path) -> None:
    write_recorded(
        RecordedVerdict(
            slug="rewa",
            scale="quick",
            outcome="reproduced",
            summary="gap +0.04",
            git_commit="a" * 40,
            seeds=3,
        ),
        tmp_path,
    )
    write_recorded(
        RecordedVerdict(slug="rewa", scale="full", outcome="not reproduced", summary="x"), tmp_path
    )
    text = render_methods_md(tmp_path)
    cell = _row(text, "rewa")[7]
    assert cell.startswith("**quick**: reproduced (gap +0.04; recorded, aaaaaaa, 3 seeds)")
    assert cell.endswith("<br>**full**: not reproduced (x; recorded)")
    assert "2 recorded verdicts" in text
    assert (
        verdict_cell(next(m for m in all_methods() if m.slug == "gradpower"), load_recorded(tmp_path)) == "-"
    )


def test_checked_in_file_is_the_rendering_of_the_checkout() -> None:
    text = render_methods_md()
    assert (ROOT / "docs" / "methods.md").read_text(encoding="utf-8") == text, "run `optarium docs`"
    for (slug, scale), rec in load_recorded(ROOT / "verdicts").items():
        assert f"**{scale}**: {rec.outcome} (" in _row(text, slug)[7], (slug, scale)
