"""The verdict toolkit: record queries, outcome combining, paired and slope rules.

An experiment's ``decide(records, config)`` reads the records of its units and applies its stated rule. The
pieces every rule needs live here, so that an experiment writes only what is particular to its claim:

- **Record queries.** :func:`is_done` (a record of a finished unit), :func:`select` (records of a method,
  filtered by the metrics they carry and by config tags such as ``problem=0, q=5``), :func:`finals` (seed ->
  value at the largest step), :func:`last_values` (seed -> the last value logged), :func:`values` (every
  value, in record order), :func:`by_step` (step -> the values over seeds) and :func:`curves` (seed ->
  sorted ``(step, value)`` points).
- **Combining.** :func:`combine_outcomes` merges the outcomes of a claim's parts by the rule spelled out in
  its docstring (all parts reproduced -> reproduced; any not reproduced -> not reproduced; else
  inconclusive), or by a rule the experiment passes; :func:`units_not_done` counts the units that did not
  finish, the figure that the runner's own rule uses (a claim is never reproduced on incomplete pairs).
- **Paired rule.** :func:`paired_verdict`: the paired-seed rule (mean gap > k SE reproduced, < -k SE not
  reproduced) as a :class:`~optarium.harness.experiment.Verdict` with its figures (mean gap, SE, t, n);
  :func:`side` names an outcome ``better`` / ``worse`` / ``inconclusive`` for comparisons that are parts of
  a larger rule.
- **Slopes.** :func:`ols_slope` (the least-squares slope), :func:`slope_fit` (slope with its t-interval, a
  :class:`SlopeFit`), :func:`slope_verdict` (reproduced when the interval lies on the claimed side of a
  bound) and :func:`mean_ci` (mean, SE and the t half-width of a sample, e.g. of per-seed slopes).

The standard figures (paired gaps with SE bars, curves with seed bands) are in
:mod:`optarium.harness.figures`; paired effects themselves in :mod:`optarium.harness.stats`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from optarium._core.validation import check_choice, check_positive
from optarium.harness.experiment import OUTCOMES, Verdict
from optarium.harness.stats import mean_se, paired_effect, records_final

__all__ = [
    "SlopeFit",
    "by_step",
    "combine_outcomes",
    "curves",
    "finals",
    "finite_mean_se",
    "is_done",
    "last_values",
    "mean_ci",
    "ols_slope",
    "paired_verdict",
    "select",
    "side",
    "slope_fit",
    "slope_verdict",
    "t_quantile",
    "units_not_done",
    "values",
]

Record = Mapping[str, Any]


# ------------------------------------------------------------------------------------------ record queries
def is_done(record: Record) -> bool:
    """Whether ``record`` belongs to a unit that finished (``status`` ``"done"``; a record without a status
    counts as done, as records built by hand in tests have none)."""
    return record.get("status", "done") == "done"


def select(
    records: Iterable[Record],
    method: str | None = None,
    *,
    has: str | Sequence[str] = (),
    done: bool = True,
    **tags: Any,
) -> list[Record]:
    """The records of ``method`` (any method if ``None``), in their order.

    Args:
        has: metric name(s) a record must carry (present, value not ``None``).
        done: keep only records of finished units (:func:`is_done`).
        tags: ``name=value`` equalities a record must satisfy, e.g. ``problem=0, q=5`` (``1 == 1.0``, so
            integer tags match the floats that JSON may give back).
    """
    keys = (has,) if isinstance(has, str) else tuple(has)
    out = []
    for r in records:
        if method is not None and r.get("method") != method:
            continue
        if done and not is_done(r):
            continue
        if any(r.get(k) is None for k in keys):
            continue
        if any(r.get(k) != v for k, v in tags.items()):
            continue
        out.append(r)
    return out


def finals(records: Iterable[Record], metric: str, method: str, **tags: Any) -> dict[int, float]:
    """seed -> the value of ``metric`` at the largest step recorded for ``method`` (finished units only).

    The same rule as :func:`optarium.harness.stats.records_final`, with ``tags`` filtering as in
    :func:`select`; values stored as ``null`` and non-numbers are skipped, and of two records at the same
    step the later one wins.
    """
    return records_final(select(records, method, has=metric, **tags), metric, method)


def finite_mean_se(
    records: Iterable[Record], metric: str, method: str, **tags: Any
) -> tuple[float, float, int, int]:
    """Mean and standard error over seeds of the finite :func:`finals` of ``metric``.

    Returns ``(mean, se, n_finite, n_nonfinite)``: a seed whose final value is NaN or infinite is left out of
    the mean and counted in ``n_nonfinite``, so an experiment can show how many it dropped.
    """
    vals = list(finals(records, metric, method, **tags).values())
    kept = [v for v in vals if math.isfinite(v)]
    m, se = mean_se(kept)
    return m, se, len(kept), len(vals) - len(kept)


def last_values(records: Iterable[Record], metric: str, method: str, **tags: Any) -> dict[int, float]:
    """seed -> the value of ``metric`` in the last record (in record order) of ``method`` that carries it.

    For metrics logged once per unit (a final score), where the record order is the only order that matters.
    """
    return {int(r["seed"]): float(r[metric]) for r in select(records, method, has=metric, **tags)}


def values(records: Iterable[Record], metric: str, method: str, **tags: Any) -> list[float]:
    """Every value of ``metric`` logged by ``method``'s finished units, in record order."""
    return [float(r[metric]) for r in select(records, method, has=metric, **tags)]


def by_step(records: Iterable[Record], metric: str, method: str, **tags: Any) -> dict[int, list[float]]:
    """step -> the values of ``metric`` over ``method``'s finished units at that step (record order)."""
    out: dict[int, list[float]] = {}
    for r in select(records, method, has=metric, **tags):
        out.setdefault(int(r["step"]), []).append(float(r[metric]))
    return out


def curves(
    records: Iterable[Record], metric: str, method: str, **tags: Any
) -> dict[int, list[tuple[int, float]]]:
    """seed -> the ``(step, value)`` points of ``metric`` of that seed's finished unit, sorted by step."""
    out: dict[int, list[tuple[int, float]]] = {}
    for r in select(records, method, has=metric, **tags):
        out.setdefault(int(r["seed"]), []).append((int(r["step"]), float(r[metric])))
    return {s: sorted(pts) for s, pts in out.items()}


def units_not_done(records: Iterable[Record]) -> int:
    """How many (method, seed) units have records from an attempt that did not finish (``status`` other than
    ``"done"``). Units that logged nothing are not visible in records; the runner counts those itself."""
    return len({(r.get("method"), int(r["seed"])) for r in records if not is_done(r) and "seed" in r})


# ------------------------------------------------------------------------------------------------ combining
def _all_parts(outcomes: Sequence[str]) -> str:
    if outcomes and all(o == "reproduced" for o in outcomes):
        return "reproduced"
    if any(o == "not reproduced" for o in outcomes):
        return "not reproduced"
    return "inconclusive"


def combine_outcomes(
    outcomes: Iterable[str],
    *,
    rule: Callable[[Sequence[str]], str] | None = None,
    units_not_done: int = 0,
) -> str:
    """The outcome of a claim from the outcomes of its parts.

    The default rule: **reproduced** if there is at least one part and every part is reproduced; **not
    reproduced** if any part is not reproduced; else (some part inconclusive, or no part at all)
    **inconclusive**. An experiment whose stated rule differs passes it as ``rule`` (a function of the list
    of outcomes).

    ``units_not_done`` > 0 (see :func:`units_not_done`) turns a ``reproduced`` into ``inconclusive``, as the
    runner's generic rule does: a claim is never reproduced on incomplete pairs.

    >>> combine_outcomes(["reproduced", "inconclusive"])
    'inconclusive'
    >>> combine_outcomes(["reproduced", "not reproduced", "inconclusive"])
    'not reproduced'
    >>> combine_outcomes(["reproduced", "reproduced"], units_not_done=1)
    'inconclusive'
    """
    parts = list(outcomes)
    for o in parts:
        check_choice("outcomes", o, OUTCOMES)
    if units_not_done < 0:
        raise ValueError(f"units_not_done: must be >= 0, got {units_not_done}")
    out = (rule or _all_parts)(parts)
    check_choice("rule", out, OUTCOMES)
    if units_not_done and out == "reproduced":
        return "inconclusive"
    return out


# --------------------------------------------------------------------------------------------- paired rule
def paired_verdict(
    method: Mapping[int, float],
    baseline: Mapping[int, float],
    *,
    better: str = "lower",
    k: float = 2.0,
    prefix: str = "",
    outcome_figure: bool = False,
) -> Verdict:
    """The paired-seed rule as a :class:`Verdict`.

    gap_s = baseline_s - method_s (``better="lower"``) or method_s - baseline_s (``"higher"``) over the
    seeds both have; **reproduced** if mean(gap) > k SE, **not reproduced** if mean(gap) < -k SE, else
    (or with fewer than two pairs) **inconclusive** (:meth:`~optarium.harness.stats.PairedEffect.outcome`).

    Figures: ``{prefix}mean_gap``, ``{prefix}se``, ``{prefix}t``, ``{prefix}n_pairs`` (and
    ``{prefix}outcome`` if ``outcome_figure``). Summary: ``gap +m ± se (SE, n=N) -> outcome``.

    >>> v = paired_verdict({0: 1.0, 1: 1.2, 2: 0.9}, {0: 2.0, 1: 2.1, 2: 2.0}, prefix="loss_")
    >>> v.outcome, v.figures["loss_n_pairs"], round(v.figures["loss_mean_gap"], 3)
    ('reproduced', 3, 1.0)
    """
    k = check_positive("k", k)
    eff = paired_effect(method, baseline, better=better)
    outcome = eff.outcome(k)
    figures = eff.figures(prefix=prefix)
    if outcome_figure:
        figures[f"{prefix}outcome"] = outcome
    return Verdict(outcome, figures, f"gap {eff.mean:+.4g} ± {eff.se:.4g} (SE, n={eff.n}) -> {outcome}")


def side(outcome: str) -> str:
    """``better`` for a reproduced comparison, ``worse`` for a not-reproduced one, else ``inconclusive``."""
    check_choice("outcome", outcome, OUTCOMES)
    return {"reproduced": "better", "not reproduced": "worse"}.get(outcome, "inconclusive")


# --------------------------------------------------------------------------------------------------- slopes
def ols_slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """The least-squares slope of ``ys`` on ``xs``: sum((x - x̄)(y - ȳ)) / sum((x - x̄)²).

    NaN when the xs do not vary (or are empty). Fit on logs for a log-log slope.
    """
    if len(xs) != len(ys):
        raise ValueError(f"ys: length {len(ys)} differs from xs' {len(xs)}")
    if not xs:
        return math.nan
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den > 0 else math.nan


def t_quantile(df: int, q: float = 0.975) -> float:
    """The ``q`` quantile of Student's t with ``df`` degrees of freedom (scipy, imported here)."""
    from scipy.stats import t

    return float(t.ppf(q, df))


@dataclass(frozen=True)
class SlopeFit:
    """A least-squares slope with its t-interval.

    Attributes:
        slope: the OLS slope; se: its standard error sqrt(RSS / (n - 2) / Sxx); lo, hi: the interval
        slope ∓ t_{(1+level)/2, n-2} se; n: the number of points. NaN figures when the fit is undefined.
    """

    slope: float
    se: float
    lo: float
    hi: float
    n: int

    def figures(self, prefix: str = "") -> dict[str, Any]:
        """The fit as a flat dict: ``{prefix}slope``, ``_se``, ``_ci_lo``, ``_ci_hi``, ``_n``."""
        return {
            f"{prefix}slope": self.slope,
            f"{prefix}slope_se": self.se,
            f"{prefix}slope_ci_lo": self.lo,
            f"{prefix}slope_ci_hi": self.hi,
            f"{prefix}slope_n": self.n,
        }


def slope_fit(xs: Sequence[float], ys: Sequence[float], *, level: float = 0.95) -> SlopeFit:
    """OLS slope of ``ys`` on ``xs`` with its t-interval at ``level`` (n - 2 degrees of freedom).

    Undefined (NaN slope and interval) with fewer than three points or fewer than two distinct xs.
    """
    if not 0 < level < 1:
        raise ValueError(f"level: must lie in (0, 1), got {level}")
    if len(xs) != len(ys):
        raise ValueError(f"ys: length {len(ys)} differs from xs' {len(xs)}")
    n = len(xs)
    if len(set(xs)) < 2 or n < 3:
        return SlopeFit(math.nan, math.nan, math.nan, math.nan, n)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    resid = sum((y - my - b * (x - mx)) ** 2 for x, y in zip(xs, ys, strict=True))
    se = math.sqrt(resid / (n - 2) / sxx)
    half = t_quantile(n - 2, (1 + level) / 2) * se
    return SlopeFit(b, se, b - half, b + half, n)


def slope_verdict(fit: SlopeFit, *, below: float | None = None, above: float | None = None) -> Verdict:
    """The slope rule: the claim is that the slope lies below ``below`` (or above ``above``; give one).

    **Reproduced** if the whole interval lies on the claimed side, **not reproduced** if it lies wholly on
    the other side, else (or for an undefined fit) **inconclusive**. Figures: :meth:`SlopeFit.figures`.
    """
    if (below is None) == (above is None):
        raise ValueError("below: give exactly one of below and above")
    figures = fit.figures()
    if not (math.isfinite(fit.lo) and math.isfinite(fit.hi)):
        outcome = "inconclusive"
    elif below is not None:
        outcome = "reproduced" if fit.hi < below else "not reproduced" if fit.lo > below else "inconclusive"
    else:
        assert above is not None
        outcome = "reproduced" if fit.lo > above else "not reproduced" if fit.hi < above else "inconclusive"
    side_text = f"< {below:g}" if below is not None else f"> {above:g}"
    return Verdict(
        outcome,
        figures,
        f"slope {fit.slope:+.3f} [{fit.lo:+.3f}, {fit.hi:+.3f}] (n={fit.n}; claimed {side_text}) "
        f"-> {outcome}",
    )


def mean_ci(values: Sequence[float], *, level: float = 0.95) -> tuple[float, float, float]:
    """Mean, SE and the t half-width at ``level`` of a sample (e.g. of per-seed slopes).

    The half-width is NaN with fewer than two values or an undefined SE.
    """
    if not 0 < level < 1:
        raise ValueError(f"level: must lie in (0, 1), got {level}")
    m, se = mean_se(list(values))
    if len(values) < 2 or not math.isfinite(se):
        return m, se, math.nan
    return m, se, t_quantile(len(values) - 1, (1 + level) / 2) * se
