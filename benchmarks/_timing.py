"""Timing helpers shared by the benchmark scripts: medians of interleaved repeats, printed as ratios.

Every benchmark compares cases measured in one run (never a wall-clock limit). ``medians`` times each case
``number`` times per block, ``repeats`` blocks, with the cases interleaved block by block so a load spike on
a shared machine hits every case alike; the median block is reported per call (or per item with ``per``).
``clock`` is ``time.perf_counter`` (wall) by default; pass ``time.process_time`` for CPU seconds on a
machine that other work shares. The scripts import this module as ``_timing`` (they run as
``python benchmarks/<name>.py``, which puts this folder on ``sys.path``).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping

__all__ = ["compare", "median_seconds", "medians"]

Clock = Callable[[], float]
_UNITS = {"s": 1.0, "ms": 1e3, "us": 1e6}


def _check(number: int, repeats: int, warmup: int) -> None:
    if not isinstance(number, int) or number < 1:
        raise ValueError(f"number must be a positive int, got {number!r}")
    if not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be a positive int, got {repeats!r}")
    if not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be a non-negative int, got {warmup!r}")


def medians(
    cases: Mapping[str, Callable[[], object]],
    repeats: int,
    *,
    number: int = 1,
    warmup: int = 1,
    per: float | Mapping[str, float] | None = None,
    setup: Callable[[], object] | None = None,
    clock: Clock = time.perf_counter,
) -> dict[str, float]:
    """Median seconds per call of each case (per item when ``per`` gives the items one call handles).

    ``setup`` runs untimed before every timed block (to restore a state that a call mutates).
    """
    _check(number, repeats, warmup)
    if not cases:
        raise ValueError("cases must name at least one callable")
    for fn in cases.values():
        for _ in range(warmup):
            if setup is not None:
                setup()
            fn()
    times: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(repeats):
        for k, fn in cases.items():
            if setup is not None:
                setup()
            t0 = clock()
            for _ in range(number):
                fn()
            times[k].append((clock() - t0) / number)
    out = {k: statistics.median(v) for k, v in times.items()}
    if per is not None:
        out = {k: v / (per[k] if isinstance(per, Mapping) else per) for k, v in out.items()}
    return out


def median_seconds(
    fn: Callable[[], object],
    repeats: int,
    *,
    number: int = 1,
    warmup: int = 1,
    setup: Callable[[], object] | None = None,
    clock: Clock = time.perf_counter,
) -> float:
    """Median seconds per call of one callable (see :func:`medians`)."""
    return medians({"fn": fn}, repeats, number=number, warmup=warmup, setup=setup, clock=clock)["fn"]


def compare(
    label: str,
    cases: Mapping[str, Callable[[], object]],
    number: int,
    repeats: int,
    *,
    warmup: int = 1,
    per: float | Mapping[str, float] | None = None,
    clock: Clock = time.perf_counter,
    unit: str = "us",
    width: int = 40,
) -> dict[str, float]:
    """Time the cases with :func:`medians`, print each with its ratio to the first, return the medians."""
    if unit not in _UNITS:
        raise ValueError(f"unit must be one of {sorted(_UNITS)}, got {unit!r}")
    med = medians(cases, repeats, number=number, warmup=warmup, per=per, clock=clock)
    base = next(iter(med.values()))
    print(f"\n{label}")
    for k, m in med.items():
        ratio = m / base if base > 0 else float("nan")
        print(f"  {k:<{width}} {m * _UNITS[unit]:10.2f} {unit:<2}   ratio to first {ratio:7.2f}x")
    return med
