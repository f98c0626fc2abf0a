"""FBi-SGD's round (all clients batched) against a per-client autograd loop, as measured ratios.

Run: ``python benchmarks/fbi_performative.py [--repeats 5] [--threads 1] [--clients 10 40]``.

On the experiment's strategic meta regression (d = 5, float64, batch 32, tau = 5 LL steps, N = 10 Neumann
terms), for M clients:

1. :func:`optarium.bilevel.fbi_performative.fbi_sgd` (clients stacked on a leading axis, closed-form batch
   HVPs, one client sum per round), per round;
2. the same round written naively: a Python loop over clients, each with ``torch.autograd`` LL gradients and
   Hessian-vector products (double backward) on its own batch;
3. one FBi-RRM round with the exact inner solve (:func:`fbi_rrm`), for scale.

Blocks are interleaved over ``--repeats`` rounds; reported are per-round medians and ratios to the first.
Ratios are measured, never asserted.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from optarium.bilevel.fbi_performative import fbi_rrm, fbi_sgd
from optarium.distributed.comm import Communicator
from optarium.problems.strategic_regression import make_strategic_meta_regression


def _naive(p: object, rounds: int, tau: int = 5, N: int = 10, B: int = 32) -> None:
    M, d, lam = p.n_clients, p.dim, p.lam
    theta = torch.zeros(d, dtype=torch.float64)
    U = [torch.zeros(d, dtype=torch.float64) for _ in range(M)]
    gen = torch.Generator().manual_seed(0)
    allc = torch.arange(M)
    for r in range(rounds):
        Ust = torch.stack(U)
        Xtr, ytr = p.sample(Ust, allc, B, gen)
        Xva, yva = p.sample(Ust, allc, B, gen)
        L = p.inner_smoothness(Ust, allc)
        b = min(0.1 / (1 + r / 10), 1.0)
        hs = []
        for i in range(M):
            u = U[i].clone().requires_grad_(True)

            def g(
                u: torch.Tensor, X: torch.Tensor = Xtr[i], y: torch.Tensor = ytr[i], th: torch.Tensor = theta
            ) -> torch.Tensor:
                return 0.5 * ((y - X @ u) ** 2).mean() + 0.5 * lam * ((u - th) ** 2).sum()

            for _ in range(tau):
                (gr,) = torch.autograd.grad(g(u), u)
                u = (u - min(b, 1 / float(L[i])) * gr).detach().requires_grad_(True)
            f = 0.5 * ((yva[i] - Xva[i] @ u) ** 2).mean()
            (gu,) = torch.autograd.grad(f, u)
            (gg,) = torch.autograd.grad(g(u), u, create_graph=True)
            k = 1 / float(L[i])
            v, acc = gu.clone(), gu.clone()
            for _ in range(N - 1):
                (hv,) = torch.autograd.grad(gg, u, v, retain_graph=True)
                v = v - k * hv
                acc = acc + v
            hs.append(lam * k * acc / M)
            U[i] = u.detach()
        theta = theta - 1.0 / (r + 10) * torch.stack(hs).sum(0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--clients", type=int, nargs="+", default=[10, 40])
    ap.add_argument("--rounds", type=int, default=20)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    for M in a.clients:
        p = make_strategic_meta_regression(M, 5, eps=0.2, seed=0)
        R = a.rounds
        cases: dict[str, Callable[[], object]] = {
            "fbi_sgd (batched, per round)": lambda p=p, R=R: fbi_sgd(
                p, Communicator.local(p.n_clients), R, lr_outer=1.0, record_every=R
            ),
            "per-client autograd loop (per round)": lambda p=p, R=R: _naive(p, R),
            "fbi_rrm exact (per round)": lambda p=p, R=R: fbi_rrm(
                p, Communicator.local(p.n_clients), R, record_every=R
            ),
        }
        times: dict[str, list[float]] = {k: [] for k in cases}
        for fn in cases.values():
            fn()
        for _ in range(a.repeats):
            for k, fn in cases.items():
                t = time.process_time()
                fn()
                times[k].append((time.process_time() - t) / R)
        med = {k: statistics.median(v) for k, v in times.items()}
        base = next(iter(med.values()))
        print(f"\nM = {M} clients, d = 5 (CPU time per round)")
        for k, m in med.items():
            print(f"  {k:<40} {m * 1e3:9.3f} ms   ratio to first {m / base:6.2f}x")


if __name__ == "__main__":
    main()
