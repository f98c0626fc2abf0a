"""The standard verdict figures: paired gaps with SE bars, and curves with seed bands (matplotlib).

Functions draw onto a given matplotlib ``Axes`` (from ``matplotlib.figure.Figure``, which needs no display
and no pyplot state, so figures are made safely in worker processes; the runner saves them with the Agg
canvas). An experiment's ``plot(records, config)`` builds its figures, lays out the axes and titles, and
calls:

- :func:`draw_paired_gaps`: per comparison, the per-seed gaps (gray points) and their mean ± k SE (a
  diamond with error bars), a zero line and one tick label per comparison;
- :func:`band_stats` and :func:`draw_band`: a curve over steps summarising seeds (mean, geometric mean or
  median) and its band (min-max, quartiles, or ± one standard error of the mean).

The records these figures read come from the queries of :mod:`optarium.harness.verdicts`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from optarium._core.validation import check_choice
from optarium.harness.stats import PairedEffect, mean_se

__all__ = [
    "BANDS",
    "CENTERS",
    "FIGURE_DPI",
    "MAX_FIGURE_WIDTH_PX",
    "band_stats",
    "draw_band",
    "draw_paired_gaps",
    "figure_problems",
    "panel_grid",
]

#: Resolution the runner saves figures at.
FIGURE_DPI = 110
#: Widest saved figure (pixels) that the report's ~1150-px column shows at >= 80 % of its size, so 10-pt text
#: stays >= 12 px at 100 % zoom; wider figures are reported by :func:`figure_problems` (lay panels out in
#: rows instead of one long strip).
MAX_FIGURE_WIDTH_PX = 1400

#: How :func:`band_stats` summarises the seeds at a step.
CENTERS: tuple[str, ...] = ("mean", "geomean", "median")
#: Which band :func:`band_stats` draws around the centre (``none``: no band).
BANDS: tuple[str, ...] = ("minmax", "quartiles", "se", "none")


def draw_paired_gaps(
    ax: Any,
    effects: Sequence[tuple[str, PairedEffect]],
    *,
    k: float = 2.0,
    offset: float = 0.15,
    point_size: float | None = None,
    colors: Sequence[str] | None = None,
    tick_fontsize: float | None = None,
) -> None:
    """Draw paired comparisons at x = 0, 1, ...: the gaps of every seed and the mean ± ``k`` SE.

    Args:
        ax: a matplotlib Axes.
        effects: (tick label, paired effect) per comparison, in drawing order.
        k: the error bar's half-length in SEs (an undefined SE draws a bar of length 0).
        offset: the x shift of the mean's diamond from the seed points.
        point_size: marker size of the seed points (matplotlib's default if ``None``).
        colors: one colour per comparison for the mean (default all ``tab:red``).
        tick_fontsize: font size of the tick labels (matplotlib's default if ``None``).
    """
    if colors is not None and len(colors) != len(effects):
        raise ValueError(f"colors: {len(colors)} colours for {len(effects)} comparisons")
    for i, (_, eff) in enumerate(effects):
        ax.scatter([i] * eff.n, eff.gaps, color="tab:gray", zorder=3, s=point_size)
        if eff.n:
            se = eff.se if math.isfinite(eff.se) else 0.0
            color = colors[i] if colors is not None else "tab:red"
            ax.errorbar([i + offset], [eff.mean], yerr=[[k * se], [k * se]], fmt="D", color=color, capsize=4)
    ax.axhline(0.0, color="black", lw=0.8)
    labels = [label for label, _ in effects]
    if tick_fontsize is None:
        ax.set_xticks(range(len(labels)), labels)
    else:
        ax.set_xticks(range(len(labels)), labels, fontsize=tick_fontsize)


def band_stats(
    by_step: Mapping[int, Sequence[float]], *, center: str = "mean", band: str = "minmax"
) -> tuple[list[int], list[float], list[float], list[float]]:
    """(steps, centre, lower, upper) over the seeds' values at each step (steps sorted).

    ``center``: ``mean``, ``geomean`` (exp of the mean log; for positive metrics on log axes) or ``median``.
    ``band``: ``minmax``, ``quartiles`` (linear-interpolation quartiles, as ``torch.quantile``), ``se``
    (centre ± the standard error of the mean, :func:`optarium.harness.stats.mean_se`; zero width at a step
    with one seed, whose SE is undefined; only with ``center="mean"``) or ``none`` (lower and upper are the
    centre).
    """
    check_choice("center", center, CENTERS)
    check_choice("band", band, BANDS)
    if band == "se" and center != "mean":
        raise ValueError(f"band='se' is the SE of the mean: it needs center='mean', got {center!r}")
    steps = sorted(by_step)
    mid, lo, hi = [], [], []
    for s in steps:
        vals = list(by_step[s])
        if center == "mean":
            c = sum(vals) / len(vals)
        elif center == "geomean":
            c = math.exp(sum(math.log(v) for v in vals) / len(vals))
        else:
            c = statistics.median(vals)
        if band == "minmax":
            a, b = min(vals), max(vals)
        elif band == "quartiles":
            a, b = _quantile(vals, 0.25), _quantile(vals, 0.75)
        elif band == "se":
            se = mean_se(vals)[1]
            se = se if math.isfinite(se) else 0.0
            a, b = c - se, c + se
        else:
            a = b = c
        mid.append(c)
        lo.append(a)
        hi.append(b)
    return steps, mid, lo, hi


def _quantile(vals: Sequence[float], q: float) -> float:
    xs = sorted(vals)
    pos = q * (len(xs) - 1)
    i = math.floor(pos)
    j = min(i + 1, len(xs) - 1)
    return xs[i] + (xs[j] - xs[i]) * (pos - i)


def draw_band(
    ax: Any,
    by_step: Mapping[int, Sequence[float]],
    *,
    center: str = "mean",
    band: str = "minmax",
    color: str | None = None,
    label: str | None = None,
    alpha: float = 0.12,
    **plot_kw: Any,
) -> None:
    """Draw the centre curve of :func:`band_stats` and, unless ``band="none"``, its shaded band.

    ``plot_kw`` go to ``ax.plot`` (line width, marker). Nothing is drawn for an empty ``by_step``.
    """
    if not by_step:
        return
    steps, mid, lo, hi = band_stats(by_step, center=center, band=band)
    ax.plot(steps, mid, color=color, label=label, **plot_kw)
    if band != "none":
        ax.fill_between(steps, lo, hi, color=color, alpha=alpha)


def _shows_data(ax: Any) -> bool:
    """Whether anything data-like is visible: a collection, patch or image, or a line with two finite points
    or with markers (a one-point line without markers draws nothing)."""
    if ax.collections or ax.images or any(p.get_visible() for p in ax.patches) or ax.tables:
        return True
    for line in ax.get_lines():
        if not line.get_visible():
            continue
        x, y = (list(v) if hasattr(v, "__len__") else [v] for v in line.get_data())
        finite = sum(1 for a, b in zip(x, y, strict=False) if _finite(a) and _finite(b))
        marker = line.get_marker()
        if finite >= 2 or (finite >= 1 and marker not in (None, "", "None", " ")):
            return True
    return False


def _finite(v: Any) -> bool:
    try:
        return math.isfinite(float(v))
    except (TypeError, ValueError):
        return True  # dates, categories: drawn


def figure_problems(fig: Any, png: Path | str | None = None) -> list[str]:
    """What makes a figure unreadable, one line each (empty if none): a visible Axes with nothing visible
    drawn on it (no collection, patch or image, and no line with two finite points or with markers: the
    plot had no data at this scale), and a saved PNG wider than
    :data:`MAX_FIGURE_WIDTH_PX`. The runner adds these lines to a run's ``figure_errors``."""
    problems = []
    for i, ax in enumerate(fig.get_axes()):
        if ax.get_visible() and ax.axison and not _shows_data(ax):
            title = ax.get_title() or ax.get_ylabel() or f"axes {i}"
            problems.append(f"axes {title!r} has no data drawn on it")
    if png is not None:
        head = Path(png).read_bytes()[:24]
        if head[:8] == b"\x89PNG\r\n\x1a\n":
            width = int.from_bytes(head[16:20], "big")
            if width > MAX_FIGURE_WIDTH_PX:
                problems.append(
                    f"{width} px wide (> {MAX_FIGURE_WIDTH_PX}): its text would be shrunk in the report; "
                    "put the panels in rows"
                )
    return problems


def panel_grid(
    n: int, *, panel: tuple[float, float] = (5.0, 3.8), **subplot_kw: Any
) -> tuple[Any, list[Any]]:
    """A matplotlib ``Figure`` with ``n`` panels of ``panel`` = (width, height) inches each, laid out in as
    many columns as fit :data:`MAX_FIGURE_WIDTH_PX` at :data:`FIGURE_DPI` and as many rows as needed
    (constrained layout; unused cells of the last row hidden), and its ``n`` Axes in reading order.

    Use it instead of ``Figure(figsize=(w * n, h)).subplots(1, n)``, whose text shrinks below legibility in
    the report once ``n`` panels no longer fit its column. ``subplot_kw`` goes to ``Figure.subplots``
    (``sharey=True``, say).
    """
    from matplotlib.figure import Figure

    n = int(n)
    if n < 1:
        raise ValueError(f"n: need at least one panel, got {n}")
    width, height = (float(v) for v in panel)
    if not (width > 0 and height > 0):
        raise ValueError(f"panel: width and height must be positive, got {panel}")
    fits = int((MAX_FIGURE_WIDTH_PX / FIGURE_DPI - 0.6) // width)  # 0.6 in for the tight bounding box
    ncols = max(1, min(n, fits))
    nrows = -(-n // ncols)
    fig = Figure(figsize=(width * ncols, height * nrows), layout="constrained")
    axes = list(fig.subplots(nrows, ncols, squeeze=False, **subplot_kw).flat)
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes[:n]
