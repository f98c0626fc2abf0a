"""MoSSP's iteration against its peers, as ratios measured in one run.

Run: ``python benchmarks/mossp.py [--repeats 5] [--threads 1] [--iters 2000] [--d 100]``.

On the quick experiment's problem (sparse PCA on the sphere, minibatch 16, float64), seconds per iteration of

1. :func:`optarium.stochastic.mossp` (Polyak; STORM, which evaluates two stochastic gradients per iteration),
2. :func:`optarium.stochastic.penalty_prox_sgd` (the plain single-loop penalty baseline, the cheapest peer),
3. a bare NumPy loop of the same MoSSP-Polyak iteration (no validation, no recording: the floor a hand-written
   script reaches; the spec's own check ran such a loop),
4. :func:`~optarium.stochastic.mossp` on CUDA when available (the same iteration on the GPU: small d is
   launch-bound, so this shows the overhead, not a speed-up).

Blocks are interleaved over ``--repeats`` rounds; reported are per-iteration medians and the ratio to the
first
row; timed as process CPU time (the GPU row then counts only host time). Ratios are measured, never asserted.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np
import torch


def _numpy_mossp(d: int, iters: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    v = np.zeros(d)
    v[:10] = 1 / np.sqrt(10)
    sv = np.sqrt(2.0) * v
    beta, gamma, tau, theta, a = 600.0, 1 / 12, 0.1, 0.5, 0.1
    alpha = 1 / (4 * beta + 6 + 1 / gamma)
    x = rng.standard_normal(d)
    x /= np.linalg.norm(x)
    y, m = x.copy(), None
    for _ in range(iters):
        zs = rng.standard_normal((16, d + 1))
        A = zs[:, :d] + np.outer(zs[:, d], sv)
        gy = -2.0 / 16 * (A.T @ (A @ y))
        m = gy if m is None else (1 - a) * m + a * gy
        dk = m + beta * 2 * y * (y @ y - 1)
        w = y - alpha * (dk + (y - x) / gamma)
        y = w - np.clip(w, -alpha * tau, alpha * tau)
        nx = np.linalg.norm(x)
        z = x * max(0.0, 1 - gamma * tau / nx)
        x = x - theta * (z - y)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--iters", type=int, default=2000)
    parser.add_argument("--d", type=int, default=100)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from optarium.experiments.mossp import CONFIGS, problem
    from optarium.stochastic import mossp, penalty_prox_sgd

    cfg = {**CONFIGS["quick"], "d": args.d}
    P = problem(cfg, 0)
    beta, gamma, n = 600.0, 1 / 12, args.iters

    def run_mossp(variant: str, Q: dict = P) -> Callable[[], object]:
        def go() -> object:
            return mossp(
                Q["grad_f"],
                Q["constraint"],
                Q["h"],
                Q["g"],
                Q["x0"],
                Q["sampler"],
                variant=variant,
                penalty=beta,
                gamma=gamma,
                curvature_bound=lambda b: 4 * b + 6,
                constraint_vjp=Q["vjp"],
                max_iter=n,
                record_every=n,
            )

        return go

    def run_sgd() -> object:
        return penalty_prox_sgd(
            P["grad_f"],
            P["constraint"],
            P["h"],
            P["g"].subgradient,
            P["x0"],
            P["sampler"],
            penalty=beta,
            lr=1 / (4 * beta + 6),
            constraint_vjp=P["vjp"],
            max_iter=n,
            record_every=n,
        )

    cases: dict[str, Callable[[], object]] = {
        "mossp polyak (torch, cpu)": run_mossp("polyak"),
        "mossp storm (torch, cpu, 2 grads/it)": run_mossp("storm"),
        "penalty prox-SGD baseline (torch)": run_sgd,
        "bare numpy MoSSP-Polyak loop": lambda: _numpy_mossp(args.d, n),
    }
    if torch.cuda.is_available():
        Q = {k: (v.cuda() if isinstance(v, torch.Tensor) else v) for k, v in P.items()}
        dev = "cuda"

        def sampler(gen: torch.Generator, d: int = args.d, sv=Q["v"] * 2**0.5) -> torch.Tensor:
            zs = torch.randn(16, d + 1, dtype=torch.float64, device=dev)
            return torch.addr(zs[:, :d], zs[:, d], sv)

        Q["sampler"] = sampler
        Q["grad_f"] = lambda x, A: A.T @ (A @ x) * (-2.0 / A.shape[0])
        Q["constraint"] = lambda x: x @ x - 1.0
        Q["vjp"] = lambda x: ((x @ x - 1.0).reshape(1), x * (2.0 * (x @ x - 1.0)))
        cases["mossp polyak (torch, cuda)"] = run_mossp("polyak", Q)
    times: dict[str, list[float]] = {k: [] for k in cases}
    for fn in cases.values():
        fn()  # warm up
    for _ in range(args.repeats):
        for k, fn in cases.items():
            start = time.process_time()  # CPU seconds: the machine may be shared (one thread by default)
            fn()
            times[k].append((time.process_time() - start) / n)
    med = {k: statistics.median(v) for k, v in times.items()}
    base = next(iter(med.values()))
    print(f"\nseconds per iteration, d = {args.d}, batch 16, {n} iterations, threads {args.threads}")
    for k, m in med.items():
        print(f"  {k:<40} {m * 1e6:9.1f} us   ratio to first {m / base:6.2f}x")


if __name__ == "__main__":
    main()
