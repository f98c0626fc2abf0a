"""norm-sharpness hot paths against peers, in one run: GD on the DLN over an η grid, and the sharpness.

Run: ``python benchmarks/norm_sharpness.py [--steps 2000] [--rows 12] [--repeats 5] [--threads 1]``.

Timed (interleaved over ``--repeats`` rounds so machine noise hits all alike; medians reported):

- ``batched``: :func:`optarium.optim.implicit_bias.dln_gd`, one batched program for all ``--rows`` step
  sizes (analytic gradient, no autograd), the experiment's path;
- ``looped_rows``: the same function called once per step size (what batching saves);
- ``torch_sgd``: the same runs as :class:`DiagonalLinearNet` + ``torch.optim.SGD`` with autograd, looped
  over the step sizes (the plain PyTorch peer; identical iterates, tested);
- ``sharpness``: the exact λ_max of the dense 2d x 2d Hessian (``eigvalsh``) of all rows at once, against
  Lanczos on HVPs (:func:`optarium.optim.diagnostics.top_eigenvalue`, tol 1e-6) per row.

Ratios are measured, never asserted (the tests do not depend on them). Measured on the shared 2-core CPU
machine (2026-12-02, one thread, load average about 2.4; absolute times are inflated by other jobs, so
only the ratios inside one run mean anything), ``--steps 1000 --repeats 3``: batched 19.9 ms (19.9 us per
step for all 12 rows), looped_rows 10.3x, torch_sgd 109x; sharpness: Lanczos 26x the exact eigvalsh, equal
to 1.7e-15 relative (at load about 8: 8.7x, 139x and 36x).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from optarium.optim.diagnostics import top_eigenvalue
from optarium.optim.implicit_bias import DiagonalLinearNet, dln_gd, dln_loss, dln_sharpness


def _problem(d: int = 100, n: int = 40) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    w = torch.zeros(d, dtype=torch.float64)
    w[:20] = 0.5
    return x, x @ w + 0.1 * torch.randn(n, generator=g, dtype=torch.float64)


def _time(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    """Parse the arguments, time the paths, print medians and ratios."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--rows", type=int, default=12)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    x, y = _problem()
    alpha, steps = 0.1, args.steps
    lrs = [0.05 + 0.6 * i / max(args.rows - 1, 1) for i in range(args.rows)]

    def batched() -> object:
        return dln_gd(x, y, lrs, alpha, max_steps=steps, tol=1e-300)

    def looped_rows() -> object:
        return [dln_gd(x, y, [lr], alpha, max_steps=steps, tol=1e-300) for lr in lrs]

    def torch_sgd() -> object:
        out = []
        for lr in lrs:
            net = DiagonalLinearNet(x.shape[1], alpha)
            opt = torch.optim.SGD(net.parameters(), lr=lr)
            for _ in range(steps):
                opt.zero_grad()
                net.loss(x, y).backward()
                opt.step()
            out.append(net)
        return out

    runs = batched()
    u, v = runs.u, runs.v  # type: ignore[attr-defined]
    d = x.shape[1]

    def exact() -> object:
        return dln_sharpness(u, v, x, y)

    def lanczos() -> object:
        f = lambda th: dln_loss(th[:d], th[d:], x, y)  # noqa: E731
        return [top_eigenvalue(f, torch.cat([u[i], v[i]]), tol=1e-6).value for i in range(u.shape[0])]

    ex, la = exact(), lanczos()
    err = max(abs(float(a) - b) / abs(b) for a, b in zip(ex.tolist(), la, strict=True))  # type: ignore[union-attr]
    paths = {"batched": batched, "looped_rows": looped_rows, "torch_sgd": torch_sgd,
             "sharpness_exact": exact, "sharpness_lanczos": lanczos}  # fmt: skip
    times: dict[str, list[float]] = {k: [] for k in paths}
    for _ in range(args.repeats):
        for k, fn in paths.items():
            times[k].append(_time(fn))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"DLN d=100 n=40, {args.rows} step sizes x {steps} steps, {args.threads} thread(s), "
          f"{args.repeats} rounds")  # fmt: skip
    for k, m in med.items():
        lo, hi = min(times[k]) * 1e3, max(times[k]) * 1e3
        print(f"  {k:18s} median {m * 1e3:9.1f} ms  (min {lo:.1f}, max {hi:.1f})")
    per_step = med["batched"] / steps * 1e6
    print(f"  batched: {per_step:.1f} us per step for all {args.rows} rows")
    print(f"  looped_rows / batched = {med['looped_rows'] / med['batched']:.2f}x")
    print(f"  torch_sgd / batched   = {med['torch_sgd'] / med['batched']:.2f}x")
    print(f"  lanczos / exact       = {med['sharpness_lanczos'] / med['sharpness_exact']:.2f}x "
          f"(max relative difference {err:.2e})")  # fmt: skip


if __name__ == "__main__":
    main()
