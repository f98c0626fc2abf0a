"""levy-mirror hot paths against peers: the α-stable sampler and the batched mirror-descent simulator.

Run: ``python benchmarks/levy_mirror.py [--repeats 5] [--threads 1]``.

1. **Sampler**: :func:`optarium.problems.heavy_tail.alpha_stable` (torch, Chambers–Mallows–Stuck) against
   ``scipy.stats.levy_stable.rvs`` (the reference) for 10⁶ symmetric draws at α ∈ {1.3, 1.6, 2.0}, and the
   common-random-number batch of the experiment (three α from one set of uniform/exponential draws) against
   three separate torch draws.
2. **Simulator**: :func:`optarium.optim.levy_mirror.mirror_descent` (entropic, lazy; rows = seeds as one
   batched program) against the same computation looped over the seeds with the
   :class:`optarium.optim.MirrorDescent` optimizer (one ``step`` per seed and iteration, the gradient set by
   hand), and against a loop of ``torch.optim.SGD`` steps for the Euclidean map, per row-step.

Timings are interleaved over ``--repeats`` rounds; reported are median times and ratios of medians. Ratios
are measured, never asserted. Measured numbers (with their date and the machine's load) go in the report of
the session that ran it, and the registry notes.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Callable

import torch


def _time(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def sampler_cases(n: int = 1_000_000) -> dict[str, Callable[[], object]]:
    """The sampler workloads by name."""
    import numpy as np
    import scipy.stats

    from optarium.problems.heavy_tail import alpha_stable, chambers_mallows_stuck

    cases: dict[str, Callable[[], object]] = {}
    for a in (1.3, 1.6, 2.0):
        gen = torch.Generator().manual_seed(0)
        rng = np.random.default_rng(0)
        cases[f"torch a={a}"] = lambda a=a, gen=gen: alpha_stable(n, a, generator=gen)
        cases[f"scipy a={a}"] = lambda a=a, rng=rng: scipy.stats.levy_stable.rvs(
            a, 0.0, size=n, random_state=rng
        )
    alphas = torch.tensor([1.3, 1.6, 2.0], dtype=torch.float64).view(3, 1)
    gen3 = torch.Generator().manual_seed(1)

    def crn() -> object:
        v = torch.rand(1, n, generator=gen3, dtype=torch.float64).sub_(0.5).mul_(math.pi)
        w = torch.empty(1, n, dtype=torch.float64).exponential_(generator=gen3)
        return chambers_mallows_stuck(v, w, alphas)

    cases["torch crn 3 alphas"] = crn
    cases["torch 3 separate"] = lambda: [alpha_stable(n, a, generator=gen3) for a in (1.3, 1.6, 2.0)]
    return cases


def simulator_cases(seeds: int = 64, steps: int = 200, d: int = 20) -> dict[str, Callable[[], object]]:
    """The simulator workloads by name (``seeds`` rows, ``steps`` iterations, noise drawn inside)."""
    from optarium.optim import MirrorDescent
    from optarium.optim.levy_mirror import mirror_descent
    from optarium.problems.heavy_tail import AlphaStableNoise

    g = torch.Generator().manual_seed(0)
    a = torch.randn(30, d, generator=g, dtype=torch.float64)
    b = torch.randn(30, generator=g, dtype=torch.float64)
    q, c = a.T @ a, a.T @ b
    noise = AlphaStableNoise(1.5)

    def f(x: torch.Tensor) -> torch.Tensor:
        return 0.5 * ((x @ a.T - b) ** 2).sum(-1)

    x0 = torch.full((d,), 1.0 / d, dtype=torch.float64)

    def batched(mirror: str) -> object:
        return mirror_descent(f, x0, steps, grad=lambda x: x @ q - c, mirror=mirror, variant="lazy",
                              step=0.01, noise=noise, n_seeds=seeds, seed=0, record_every=steps)  # fmt: skip

    def looped(mirror: str, sgd: bool = False) -> object:
        gen = torch.Generator().manual_seed(0)
        u = noise.sample((steps, seeds, d), gen)
        xs = [x0.clone().requires_grad_(True) for _ in range(seeds)]
        opts = [torch.optim.SGD([x], lr=0.01) if sgd else MirrorDescent([x], lr=0.01, mirror=mirror,
                variant="lazy") for x in xs]  # fmt: skip
        for t in range(steps):
            for j, (x, opt) in enumerate(zip(xs, opts, strict=True)):
                x.grad = x.detach() @ q - c + u[t, j]
                opt.step()
        return xs

    return {
        "batched entropic": lambda: batched("entropic"),
        "looped MirrorDescent entropic": lambda: looped("entropic"),
        "batched euclidean": lambda: batched("euclidean"),
        "looped torch SGD": lambda: looped("euclidean", sgd=True),
    }


def main(argv: list[str] | None = None) -> dict[str, float]:
    """Run both benchmarks; print medians and ratios; return the medians in seconds by name."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    cases = {**sampler_cases(), **simulator_cases()}
    times: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(args.repeats):
        for name, fn in cases.items():
            times[name].append(_time(fn))
    med = {k: statistics.median(v) for k, v in times.items()}
    for k, v in med.items():
        print(f"{k:34s} {v * 1e3:10.2f} ms")
    print("ratios (lower is faster for the first):")
    for a in (1.3, 1.6, 2.0):
        print(f"  torch / scipy sampler, a={a}: {med[f'torch a={a}'] / med[f'scipy a={a}']:.3f}")
    print(f"  crn 3 alphas / 3 separate draws: {med['torch crn 3 alphas'] / med['torch 3 separate']:.3f}")
    print(f"  batched / looped MirrorDescent (entropic): "
          f"{med['batched entropic'] / med['looped MirrorDescent entropic']:.4f}")  # fmt: skip
    sgd_ratio = med["batched euclidean"] / med["looped torch SGD"]
    print(f"  batched / looped torch SGD (euclidean): {sgd_ratio:.4f}")
    return med


if __name__ == "__main__":
    main()
