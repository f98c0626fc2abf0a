"""Missing-covariate DRO: one robust decision by the dual LP against the exhaustive grid of inner LPs.

Run: ``python benchmarks/dro_incomplete_covariates.py [--repeats 5] [--n 100]``.

The hot path of the experiment is :meth:`MissingCovariateDRO.decide` (the dualised single LP over a
continuous decision, then one or two inner LPs to snap to the grid). Its peers, timed on the same fitted
model (the spec's quick instance: 6 cells, outcomes 0..30, X2 missing MNAR, bootstrap W1 radii, bounded
mechanism) and interleaved over ``--repeats`` rounds so that machine noise hits all alike:

- ``grid_highs``: :func:`robust_grid_search` with HiGHS (one inner LP per grid point, 31 LPs);
- ``grid_cvxpy``: the same with cvxpy/Clarabel (``solver="cvxpy"``), the test reference;
- ``fit``: fitting the model (blocks and 200 bootstrap resamples per block), for scale.

Reported: CPU seconds (``time.process_time``) per call, min / median over rounds, and the ratio of medians
to ``decide``. Ratios are measured, never asserted. Measured on 2026-12-02 (shared 2-core CPU, load 10-14):
see the report of issue 16 (dro-incomplete-covariates).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np


def _model(n: int, solver: str = "linprog") -> object:
    from optarium.dro.missing_covariates import MissingCovariateDRO, newsvendor_cost
    from optarium.experiments.dro_incomplete_covariates import sample

    d = sample(0, n, "mnar", 0.4)
    grid = np.arange(31.0)
    model = MissingCovariateDRO(
        newsvendor_cost(1.0, 4.0), decisions=grid, outcomes=grid, levels=[[0.0, 1.0, 2.0], [0.0, 1.0]],
        propensity_bounds=(0.1, 0.7), solver=solver,
    )  # fmt: skip
    return model.fit(d["X"], d["y"])


def main() -> None:
    """Time the three paths and print the table."""
    from optarium.dro.missing_covariates import robust_grid_search

    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--n", type=int, default=100)
    args = ap.parse_args()
    highs = _model(args.n)
    ref = _model(args.n, "cvxpy")
    ctx = [1.0, 0.0]
    calls: dict[str, Callable[[], object]] = {
        "decide": lambda: highs.decide(ctx),  # type: ignore[attr-defined]
        "grid_highs": lambda: robust_grid_search(highs, ctx),  # type: ignore[arg-type]
        "grid_cvxpy": lambda: robust_grid_search(ref, ctx),  # type: ignore[arg-type]
        "fit": lambda: _model(args.n),
    }
    for f in calls.values():  # warm-up (LP caches, cvxpy import)
        f()
    times: dict[str, list[float]] = {k: [] for k in calls}
    for _ in range(args.repeats):
        for name, f in calls.items():
            t = time.process_time()
            f()
            times[name].append(time.process_time() - t)
    base = statistics.median(times["decide"])
    print(f"{'path':<12} {'min s':>9} {'median s':>9} {'/ decide':>9}")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:<12} {min(ts):9.4f} {med:9.4f} {med / base:9.2f}")
    z1, z2 = highs.decide(ctx), robust_grid_search(highs, ctx)  # type: ignore[attr-defined, arg-type]
    print(f"decide z = {z1.z}, grid z = {float(z2.x)}; values {z1.worst_case_cost:.9f} vs {z2.value:.9f}")


if __name__ == "__main__":
    main()
