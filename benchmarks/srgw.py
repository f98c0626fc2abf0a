"""Structurally robust GW against POT's ``ot.gromov.gromov_wasserstein``: time per solve, as ratios.

Run: ``python benchmarks/srgw.py [--sizes 100 300 1000] [--max-iter 20] [--repeats 3] [--threads 1]``.

Problem per size n: two point clouds of n uniform points in [0, 1]^2 (the target a noisy permutation of the
source), Euclidean distance matrices, uniform masses, float64. Compared, each capped at ``--max-iter``
conditional-gradient iterations from p q^T:

1. POT ``gromov_wasserstein`` (numpy; exact LP ``ot.emd`` per iteration; square loss);
2. :func:`optarium.ot.srgw.structurally_robust_gw` with ``masks="none"`` (the same algorithm: with n = m
   and uniform masses its LMO is ``scipy.optimize.linear_sum_assignment``; torch tensor products);
3. the same with the dual budget masks (``keep_ratio=0.9``, the method as used in the experiment), which
   adds the two residual products and the two top-k mask steps per iteration.

Reported: the median seconds per solve and per iteration over ``--repeats`` interleaved rounds, the
iteration counts (equal for 1 and 2 when neither hits the cap: the same trajectory), and the ratio of
medians to POT. Ratios are measured, never asserted.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
import warnings
from typing import Any

import numpy as np
import torch


def _pot(ot: Any, C1: np.ndarray, C2: np.ndarray, max_iter: int, iters: dict[str, int]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, log = ot.gromov.gromov_wasserstein(C1, C2, max_iter=max_iter, log=True)
    iters["pot"] = len(log["loss"]) - 1


def _ours(t1: torch.Tensor, t2: torch.Tensor, max_iter: int, iters: dict[str, int], masks: str) -> None:
    from optarium.ot.srgw import structurally_robust_gw

    res = structurally_robust_gw(t1, t2, masks=masks, max_iter=max_iter)
    iters["srgw-nomask" if masks == "none" else "srgw-masked"] = res.n_iter


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 300, 1000])
    parser.add_argument("--max-iter", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    import ot

    print(f"threads {args.threads}, max_iter {args.max_iter}, repeats {args.repeats}")
    for n in args.sizes:
        rng = np.random.default_rng(n)
        x = rng.random((n, 2))
        y = x[rng.permutation(n)] + 0.02 * rng.standard_normal((n, 2))
        C1 = np.linalg.norm(x[:, None] - x[None], axis=-1)
        C2 = np.linalg.norm(y[:, None] - y[None], axis=-1)
        t1, t2 = torch.from_numpy(C1), torch.from_numpy(C2)
        iters: dict[str, int] = {}
        cases = {
            "pot": functools.partial(_pot, ot, C1, C2, args.max_iter, iters),
            "srgw-nomask": functools.partial(_ours, t1, t2, args.max_iter, iters, "none"),
            "srgw-masked": functools.partial(_ours, t1, t2, args.max_iter, iters, "both"),
        }
        times: dict[str, list[float]] = {k: [] for k in cases}
        for _ in range(args.repeats):
            for k, fn in cases.items():
                start = time.perf_counter()
                fn()
                times[k].append(time.perf_counter() - start)
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"\nn = {n}")
        for k, m in med.items():
            per = m / max(iters[k], 1)
            per_pot = med["pot"] / max(iters["pot"], 1)
            print(
                f"  {k:<12} {m:9.3f} s/solve  {iters[k]:4d} it  {per * 1e3:9.2f} ms/it  "
                f"ratio to POT {m / med['pot']:5.2f}x (per it {per / per_pot:5.2f}x)"
            )


if __name__ == "__main__":
    main()
