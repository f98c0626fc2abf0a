"""The standard verdict figures: paired gaps with SE bars, and curves with seed bands (matplotlib).

Functions draw onto a given matplotlib ``Axes`` (from ``matplotlib.figure.Figure``, which needs no display
and no pyplot state, so figures are made safely in worker processes; the runner saves them with the Agg
canvas). An experiment's ``plot(records, config)`` builds its figures, lays out the axes and titles, and
calls:

- :func:`draw_paired_gaps`: per comparison, the per-seed gaps (gray points) and their mean ± k SE (a
  diamond with error bars), a zero line and one tick label per comparison;
- :func:`band_stats` and :func:`draw_band`: a curve over steps summarising seeds (mean, geometric mean or
  median) and its band (min-max or quartiles).

The records these figures read come from the queries of :mod:`optarium.harness.verdicts`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from optarium._core.validation import check_choice
from optarium.harness.stats import PairedEffect

__all__ = ["BANDS", "CENTERS", "band_stats", "draw_band", "draw_paired_gaps"]

#: How :func:`band_stats` summarises the seeds at a step.
CENTERS: tuple[str, ...] = ("mean", "geomean", "median")
#: Which band :func:`band_stats` draws around the centre (``none``: no band).
BANDS: tuple[str, ...] = ("minmax", "quartiles", "none")


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
    ``band``: ``minmax``, ``quartiles`` (linear-interpolation quartiles, as ``torch.quantile``) or ``none``
    (lower and upper are the centre).
    """
    check_choice("center", center, CENTERS)
    check_choice("band", band, BANDS)
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
