"""Statistics that verdicts are computed from: paired-seed effects and their standard errors.

The rules built on them (record queries, outcome combining, paired and slope verdicts) are in
:mod:`optarium.harness.verdicts`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from optarium._core.validation import check_choice, check_int, check_positive

__all__ = ["PairedEffect", "mean_sd", "mean_se", "paired_bootstrap", "paired_effect", "records_final"]


def mean_sd(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (ddof = 1; NaN for fewer than two values).

    Exact for any finite floats, however large: deviations are scaled by the largest before squaring, so a
    measured 1e200 (a diverging baseline's error) gives its true mean and spread instead of an
    ``OverflowError``. With a non-finite value the mean is that value (``inf``, ``-inf`` or NaN, as IEEE
    arithmetic gives it) and the spread is NaN.
    """
    n = len(values)
    if n == 0:
        return math.nan, math.nan
    vals = [float(v) for v in values]
    if not all(math.isfinite(v) for v in vals):
        return sum(vals) / n, math.nan
    big = max(abs(v) for v in vals)
    scale = big if big > 1e150 else 1.0  # fsum of values near the float limit would overflow
    m = math.fsum(v / scale for v in vals) / n * scale
    if n < 2:
        return m, math.nan
    dev = max(abs(v - m) for v in vals)
    if dev == 0.0:
        return m, 0.0
    var_scaled = math.fsum(((v - m) / dev) ** 2 for v in vals) / (n - 1)
    return m, dev * math.sqrt(var_scaled)


def mean_se(values: Sequence[float]) -> tuple[float, float]:
    """Mean and its standard error sd / sqrt(n) (NaN for fewer than two values)."""
    m, sd = mean_sd(values)
    return m, sd / math.sqrt(len(values)) if len(values) >= 2 else math.nan


@dataclass(frozen=True)
class PairedEffect:
    """A paired comparison over seeds: ``gap_s = baseline_s - method_s`` (or the reverse, see ``better``).

    A positive gap means the method did better in the claimed direction.
    """

    n: int
    mean: float
    se: float
    gaps: tuple[float, ...]
    seeds: tuple[int, ...]

    @property
    def t(self) -> float:
        """mean / SE (NaN when SE is zero or undefined)."""
        if self.n < 2 or not self.se > 0:
            return math.nan
        return self.mean / self.se

    def outcome(self, k: float = 2.0) -> str:
        """``reproduced`` if mean > k SE, ``not reproduced`` if mean < -k SE, else ``inconclusive``.

        Fewer than two pairs, or an undefined SE, is inconclusive: a sign alone decides nothing.
        """
        k = check_positive("k", k)
        if self.n < 2 or not math.isfinite(self.se):
            return "inconclusive"
        if self.mean > k * self.se:
            return "reproduced"
        if self.mean < -k * self.se:
            return "not reproduced"
        return "inconclusive"

    def figures(self, prefix: str = "") -> dict[str, Any]:
        """The deciding figures as a flat dict."""
        return {
            f"{prefix}mean_gap": self.mean,
            f"{prefix}se": self.se,
            f"{prefix}t": self.t,
            f"{prefix}n_pairs": self.n,
        }


def paired_effect(
    method: Mapping[int, float], baseline: Mapping[int, float], *, better: str = "lower"
) -> PairedEffect:
    """Paired effect of ``method`` against ``baseline`` over the seeds both have.

    Args:
        method, baseline: seed -> final metric.
        better: ``"lower"`` (gap = baseline - method) or ``"higher"`` (gap = method - baseline).
    """
    check_choice("better", better, ("lower", "higher"))
    seeds = tuple(sorted(set(method) & set(baseline)))
    sign = 1.0 if better == "lower" else -1.0
    gaps = tuple(sign * (float(baseline[s]) - float(method[s])) for s in seeds)
    m, se = mean_se(gaps)
    return PairedEffect(n=len(gaps), mean=m, se=se, gaps=gaps, seeds=seeds)


def paired_bootstrap(
    a: Sequence[float],
    b: Sequence[float],
    *,
    strata: Sequence[Any] | None = None,
    n_boot: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, float]:
    """Mean of the paired differences ``a_i - b_i`` and its percentile bootstrap interval.

    Each of the ``n_boot`` replicates resamples the pairs with replacement -- within each stratum, keeping
    its size, when ``strata`` (one label per pair, e.g. ``(seed, task)``) is given -- and takes the mean
    difference over all pairs. Seeded (``torch.Generator``), vectorised over replicates. Returns ``mean``
    (on the full sample), ``lo``/``hi`` (the ``level`` percentile interval) and ``n`` (pairs); all NaN
    but ``n`` when there are no pairs.
    """
    import torch

    if len(a) != len(b):
        raise ValueError(f"a and b must have the same length, got {len(a)} and {len(b)}")
    if strata is not None and len(strata) != len(a):
        raise ValueError(f"strata must have one label per pair ({len(a)}), got {len(strata)}")
    check_int("n_boot", n_boot, minimum=1)
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
    n = len(a)
    if n == 0:
        return {"mean": math.nan, "lo": math.nan, "hi": math.nan, "n": 0.0}
    d = torch.tensor([float(x) - float(y) for x, y in zip(a, b, strict=True)], dtype=torch.float64)
    labels = [0] * n if strata is None else list(strata)
    groups: dict[Any, list[int]] = {}
    for i, s in enumerate(labels):
        groups.setdefault(s, []).append(i)
    g = torch.Generator().manual_seed(int(seed))
    cols = []
    for members in groups.values():
        m = torch.tensor(members)
        cols.append(m[torch.randint(len(members), (n_boot, len(members)), generator=g)])
    boot = d[torch.cat(cols, 1)].mean(1)
    q = torch.tensor([(1 - level) / 2, (1 + level) / 2], dtype=torch.float64)
    lo, hi = torch.quantile(boot, q).tolist()
    return {"mean": float(d.mean()), "lo": lo, "hi": hi, "n": float(n)}


def records_final(records: Sequence[Mapping[str, Any]], metric: str, method: str) -> dict[int, float]:
    """seed -> the value of ``metric`` at the largest step recorded for ``method``.

    Only records of units whose ``status`` is ``"done"`` count (diverged, failed or timed-out units have no
    final value); values stored as ``null`` (non-finite numbers, see the storage) and non-numbers are skipped.
    """
    best: dict[int, tuple[int, float]] = {}
    for r in records:
        if r.get("method") != method or r.get(metric) is None or r.get("status", "done") != "done":
            continue
        if not isinstance(r[metric], (int, float)):
            continue
        seed, step = int(r["seed"]), int(r["step"])
        if seed not in best or step >= best[seed][0]:
            best[seed] = (step, float(r[metric]))
    return {s: v for s, (_, v) in best.items()}
