"""The basis-rotation experiment's hot path: the batched simulator against the same runs looped with torch.

Run: ``python benchmarks/basis_rotation.py [--rows 21] [--steps 400] [--threads 1]``.

One (delay, step size, seed) run is one row of the batched float64 program of
:func:`optarium.experiments.basis_rotation.simulate`; the peer computes the same rows one at a time with the
library's optimizers (``torch.optim.Adam`` for the coordinate-wise arm, :class:`optarium.optim.RotatedAdamW`
for the estimated-basis arm; x as a d x 1 parameter, delayed exact gradients from a ring of past iterates).
Reported: seconds per run and the ratio looped / batched (the speed-up the batching buys). Ratios are
measured, never asserted.
"""

from __future__ import annotations

import argparse
import time

import torch

from optarium.experiments.basis_rotation import CONFIGS, problem, simulate
from optarium.optim import RotatedAdamW


def _looped(method: str, tau: int, lrs: list[float], seeds: list[int], cfg: dict) -> float:
    t0 = time.perf_counter()
    for lr in lrs:
        for seed in seeds:
            q, lam, x0 = problem(seed, int(cfg["d"]), float(cfg["lam_max"]))
            h = q @ torch.diag(lam) @ q.T
            x = x0.clone().reshape(-1, 1).requires_grad_(True)
            if method == "estimated":
                opt: torch.optim.Optimizer = RotatedAdamW([x], lr=lr, betas=(0.9, 0.95), refresh="eigh")
            else:
                opt = torch.optim.Adam([x], lr=lr, betas=(0.9, 0.95))
            hist = [x.detach().clone()]
            f0 = float(0.5 * x0 @ h @ x0)
            for t in range(int(cfg["cap"])):
                x.grad = h @ hist[max(t - tau, 0)]
                opt.step()
                hist.append(x.detach().clone())
                if float(0.5 * (x.detach().T @ h @ x.detach())) <= cfg["target"] * f0:
                    break
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    cfg = {**CONFIGS["quick"], "cap": args.steps, "sigma": 0.0, "target": 0.0}
    lrs = list(cfg["grid_delay"])
    seeds = list(range(args.seeds))
    rows = len(lrs) * len(seeds)
    out: dict[str, float] = {}
    for method in ("adam", "estimated"):
        t0 = time.perf_counter()
        simulate(method, [8], [lrs], seeds, cfg)
        batched = time.perf_counter() - t0
        looped = _looped(method, 8, lrs, seeds, cfg)
        out[f"{method}_batched_s_per_run"] = batched / rows
        out[f"{method}_looped_s_per_run"] = looped / rows
        out[f"{method}_looped/batched"] = looped / batched
        print(
            f"{method:>10}: {rows} runs x {args.steps} steps: batched {batched:.2f} s, "
            f"looped {looped:.2f} s, ratio looped / batched {looped / batched:.1f}x"
        )
    return out


if __name__ == "__main__":
    main()
