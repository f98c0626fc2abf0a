"""Step time of the weighted-Chebyshev penalty solver (mtbl-wc-penalty) against its floor and peers, one run.

Run: ``python benchmarks/mtbl_wc_penalty.py [--steps 500] [--repeats 5] [--threads 1]``.

On the quick quadratic instance (z in R^25, A 30 x 20 of rank 10, S = 2, 11 preferences) it times, per
iteration, interleaved over ``--repeats`` rounds so machine noise hits all alike (reported: median over the
rounds, and ratios of medians):

- ``wc_hard``: :func:`optarium.bilevel.wc_penalty` (hard), the 11 preferences as one batch, closed-form
  oracles (the problem's ``first_order_z`` / ``penalty_grad_z``);
- ``plain_loop``: the floor, a hand-written torch loop of the same update (argmax weight, one product with
  the task gradients, ``J^T J z``) with no validation, recording or stopping rules;
- ``wc_autograd``: the same solver on an :class:`~optarium.bilevel.ECMOProblem` built from the same callables,
  whose oracles use autograd (the penalty gradient is a double backward);
- ``wc_sequential``: the 11 preferences run one after the other (11 solver calls);
- ``wc_smooth``, ``linear``, ``mgda``: the other scalarisations and the MGDA-type baseline (S = 2 closed-form
  min-norm step);
- ``min_norm_enumerate`` vs ``min_norm_qp`` (S = 3, one call on 11 Gram matrices): the per-step face
  enumeration against :func:`optarium.convex.simplex_qp`.

Ratios are measured, never asserted. Measured (2026-12-02, ``--steps 500 --repeats 5``, the shared 2-core
CPU, one thread, load average 12-14 from other jobs, so absolute times are inflated about 10x and only ratios
within one run mean anything): wc_hard / plain_loop 1.28x, wc_autograd / wc_hard 13.5x, wc_sequential /
wc_hard 9.9x (batching the 11 preferences), wc_smooth / wc_hard 0.89x, linear / wc_hard 0.73x, mgda /
wc_hard 1.55x, min_norm_qp / min_norm_enumerate 30.8x (S = 3, 11 Gram matrices).
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from collections.abc import Callable

import torch


def _timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    """Time every variant and print per-step medians and ratios."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    warnings.simplefilter("ignore", UserWarning)

    from optarium.bilevel import ECMOProblem, mgda_penalty, min_norm_weights, simplex_grid, wc_penalty
    from optarium.problems.multiobjective_bilevel import quadratic_mtbl

    p = quadratic_mtbl(2, seed=0)
    auto = ECMOProblem([lambda x, y, i=i: p.objectives(x, y)[..., i] for i in range(2)], p.lower_level_value)
    W = simplex_grid(2, 11)
    rho = 100.0
    eta = 1.0 / (rho * p.jacobian_norm2 + 1.0)
    T = args.steps
    x0 = torch.zeros(11, p.dx, dtype=torch.float64)
    y0 = torch.zeros(11, p.dy, dtype=torch.float64)
    kw = {"penalty": rho, "lr": eta, "steps": T, "record_every": T}

    def plain() -> None:
        z = torch.zeros(11, p.dx + p.dy, dtype=torch.float64)
        JtJ = p.J.T @ p.J
        for _ in range(T):
            G = z.unsqueeze(-2) - p.c
            F = 0.5 * (G * G).sum(-1)
            c = W * (torch.arange(2) == (W * F).argmax(-1, keepdim=True))
            z = z - eta * ((c.unsqueeze(-2) @ G).squeeze(-2) + rho * z @ JtJ)

    def sequential() -> None:
        for i in range(11):
            wc_penalty(p, x0[i], y0[i], W[i], **kw)

    G3 = torch.randn(11, 3, 25, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    variants: dict[str, tuple[Callable[[], object], int]] = {
        "wc_hard": (lambda: wc_penalty(p, x0, y0, W, **kw), T),
        "plain_loop": (plain, T),
        "wc_autograd": (lambda: wc_penalty(auto, x0, y0, W, **kw), T),
        "wc_sequential": (sequential, T),
        "wc_smooth": (lambda: wc_penalty(p, x0, y0, W, scalarization="smooth", **kw), T),
        "linear": (lambda: wc_penalty(p, x0, y0, W, scalarization="linear", **kw), T),
        "mgda": (lambda: mgda_penalty(p, x0, y0, **kw), T),
        "min_norm_enumerate": (lambda: min_norm_weights(G3), 1),
        "min_norm_qp": (lambda: min_norm_weights(G3, method="qp"), 1),
    }
    times: dict[str, list[float]] = {k: [] for k in variants}
    for fn, _ in variants.values():  # warm-up
        fn()
    for _ in range(args.repeats):
        for name, (fn, n) in variants.items():
            times[name].append(_timed(fn) / n)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"per step (median of {args.repeats} rounds, {T} steps, threads {args.threads}):")
    for k, v in med.items():
        print(f"  {k:20s} {v * 1e6:10.1f} us")
    print("ratios:")
    for a, b in (
        ("wc_hard", "plain_loop"),
        ("wc_autograd", "wc_hard"),
        ("wc_sequential", "wc_hard"),
        ("wc_smooth", "wc_hard"),
        ("linear", "wc_hard"),
        ("mgda", "wc_hard"),
        ("min_norm_qp", "min_norm_enumerate"),
    ):
        print(f"  {a} / {b}: {med[a] / med[b]:.2f}x")


if __name__ == "__main__":
    main()
