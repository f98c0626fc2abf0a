"""Figure layout and legibility: panel grids fit the report's column; empty or too-wide figures are flagged
(and a run stores the flags with its figure errors)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from matplotlib.figure import Figure

from optarium.harness import experiment as experiment_mod
from optarium.harness.experiment import Experiment, Verdict
from optarium.harness.figures import FIGURE_DPI, MAX_FIGURE_WIDTH_PX, figure_problems, panel_grid
from optarium.harness.runner import run_experiment


def _saved_width(fig: Any, path: Path) -> int:
    fig.savefig(path, dpi=FIGURE_DPI, bbox_inches="tight")
    return int.from_bytes(path.read_bytes()[16:20], "big")


@pytest.mark.parametrize("n", [1, 2, 3, 7])
def test_panel_grid_fits_the_width_and_hides_only_the_spare_cells(n: int, tmp_path: Path) -> None:
    fig, axes = panel_grid(n, panel=(5.0, 3.5))
    assert len(axes) == n and all(ax.get_visible() for ax in axes)
    hidden = [ax for ax in fig.get_axes() if not ax.get_visible()]
    cols = min(n, 2)
    assert len(fig.get_axes()) == cols * -(-n // cols) and len(hidden) == len(fig.get_axes()) - n
    for ax in axes:
        ax.plot([0, 1], [0, 1])
        ax.set_title("a title of some length")
    assert _saved_width(fig, tmp_path / "f.png") <= MAX_FIGURE_WIDTH_PX
    assert figure_problems(fig, tmp_path / "f.png") == []


def test_panel_grid_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="n"):
        panel_grid(0)
    with pytest.raises(ValueError, match="panel"):
        panel_grid(2, panel=(0.0, 3.0))


def test_problems_name_empty_axes_and_a_strip_too_wide(tmp_path: Path) -> None:
    fig = Figure(figsize=(16, 3))
    ax1, ax2 = fig.subplots(1, 2)
    ax1.plot([0, 1], [1, 0])
    ax2.set_title("quality")
    assert _saved_width(fig, tmp_path / "w.png") > MAX_FIGURE_WIDTH_PX
    problems = figure_problems(fig, tmp_path / "w.png")
    assert any("'quality' has no data" in p for p in problems)
    assert any("px wide" in p for p in problems)
    ax2.plot([3.0], [1.0])  # one point and no marker draws nothing
    assert any("'quality' has no data" in p for p in figure_problems(fig))
    ax2.lines[0].set_marker("o")
    assert not any("no data" in p for p in figure_problems(fig))
    ax2.axis("off")  # an axes used for text only is not a problem
    ax2.text(0.5, 0.5, "note")
    assert not any("no data" in p for p in figure_problems(fig))


def test_a_run_stores_figure_problems_with_its_figure_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def run(ctx: Any, method: str, seed: int, config: Mapping[str, Any]) -> None:
        ctx.log(1, loss=1.0)

    def plot(records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> dict[str, Any]:
        fig = Figure(figsize=(4, 3))
        fig.subplots().set_title("empty")
        return {"empty": fig}

    def decide(records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> Verdict:
        return Verdict("inconclusive", {"n": 1}, "toy")

    exp = Experiment(
        slug="lion-vr",
        claim="toy",
        rule="toy",
        methods=["a"],
        baselines=[],
        configs={"smoke": {"seeds": 1}, "quick": {"seeds": 1}, "full": {"seeds": 1}},
        run=run,
        decide=decide,
        plot=plot,
    )
    monkeypatch.setitem(experiment_mod._REGISTRY, "lion-vr", exp)
    out = run_experiment("lion-vr", "smoke", out=tmp_path)
    assert out.summary["figure_errors"] == ["empty: axes 'empty' has no data drawn on it"]
