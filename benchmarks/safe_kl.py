"""Safe KL's hot paths against their peers, as ratios measured in one run.

Run: ``python benchmarks/safe_kl.py [--repeats 7] [--threads 1]``.

1. The stochastic LogSumExp objective, forward + backward in (phi, t), at batch sizes 16, 256 and 4096
   (float64): :func:`optarium.dro.safe_kl.safe_logsumexp_surrogate` (Safe KL, ``softplus``) against the
   same function with ``dual="exp"`` and against the biased minibatch ``torch.logsumexp`` (the peers an
   SGD step would use instead).
2. :class:`~optarium.dro.safe_kl.SafeKLDROLoss` (penalised, batch 16 of logistic losses, d = 20, forward +
   backward through the model) against the plain minibatch-LSE criterion on the same losses.
3. :func:`~optarium.dro.safe_kl.mlmc_logsumexp` (64 independent MLMC estimates, one level each, expected
   16 samples each but padded to the top level's 258) against the Safe-KL surrogate and the minibatch LSE on
   64 x 16 samples.
4. One step of :func:`~optarium.dro.safe_kl.entropic_ot_dual_sgd` (vector potentials, N = 1000 points,
   64 x 64 pairs) against one iteration of POT's ``ot.stochastic.solve_dual_entropic`` (numpy, same batch),
   each timed over 300 steps.

Blocks are interleaved over ``--repeats`` rounds; reported are per-call medians and the ratio of medians.
Ratios are measured, never asserted.
"""

from __future__ import annotations

import argparse
import math

import torch
from _timing import compare


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from optarium.dro.safe_kl import (
        SafeKLDROLoss,
        entropic_ot_dual_sgd,
        mlmc_draw_levels,
        mlmc_logsumexp,
        safe_logsumexp_surrogate,
    )

    g = torch.Generator().manual_seed(0)
    for b in (16, 256, 4096):
        phi = torch.randn(b, generator=g, dtype=torch.float64).requires_grad_(True)
        t = torch.zeros((), dtype=torch.float64, requires_grad=True)

        def safe(phi: torch.Tensor = phi, t: torch.Tensor = t) -> None:
            safe_logsumexp_surrogate(phi, t, 1e-2).backward()

        def expd(phi: torch.Tensor = phi, t: torch.Tensor = t) -> None:
            safe_logsumexp_surrogate(phi, t, None, dual="exp").backward()

        def lse(phi: torch.Tensor = phi, b: int = b) -> None:
            (torch.logsumexp(phi, 0) - math.log(b)).backward()

        compare(
            f"surrogate forward+backward, batch {b}",
            {"safe_kl": safe, "exp dual": expd, "minibatch logsumexp": lse},
            200,
            args.repeats,
        )

    X = torch.randn(16, 20, generator=g, dtype=torch.float64)
    y = torch.where(torch.randn(16, generator=g) > 0, 1.0, -1.0).to(torch.float64)
    theta = torch.zeros(20, dtype=torch.float64, requires_grad=True)
    crit = SafeKLDROLoss(rho=1e-2, lam=0.1, dtype=torch.float64)

    def dro_safe() -> None:
        crit(torch.nn.functional.softplus(-y * (X @ theta))).backward()

    def dro_lse() -> None:
        ell = torch.nn.functional.softplus(-y * (X @ theta))
        (0.1 * (torch.logsumexp(ell / 0.1, 0) - math.log(16))).backward()

    compare(
        "KL-DRO criterion forward+backward (batch 16, d 20)",
        {"SafeKLDROLoss": dro_safe, "minibatch LSE": dro_lse},
        200,
        args.repeats,
    )

    # MLMC: 64 independent estimates per call (one level each, base 2, top level 7: expected 16 samples
    # each, padded to 2 + 256), against the Safe-KL surrogate and the minibatch LSE on 64 x 16 samples
    levels = mlmc_draw_levels(64, 7, generator=g)
    pool = torch.randn(64, 2 + 2 * 2**7, generator=g, dtype=torch.float64).requires_grad_(True)
    phi16 = torch.randn(64, 16, generator=g, dtype=torch.float64).requires_grad_(True)
    t64 = torch.zeros(64, dtype=torch.float64, requires_grad=True)

    def mlmc() -> None:
        mlmc_logsumexp(pool, levels, base=2, max_level=7, lam=0.1).sum().backward()

    def safe64() -> None:
        (0.1 * safe_logsumexp_surrogate(phi16 / 0.1, t64, 1e-2)).sum().backward()

    def lse64() -> None:
        (0.1 * (torch.logsumexp(phi16 / 0.1, -1) - math.log(16))).sum().backward()

    compare(
        "64 LogSumExp estimates forward+backward (16 samples each; MLMC padded to 258)",
        {"safe_kl surrogate": safe64, "minibatch logsumexp": lse64, "mlmc_logsumexp": mlmc},
        200,
        args.repeats,
    )

    import numpy as np

    import ot as pot

    xs = torch.randn(1000, 2, generator=g, dtype=torch.float64)
    ys = torch.randn(1000, 2, generator=g, dtype=torch.float64) + 1.0
    C = ((xs[:, None] - ys[None]) ** 2).sum(-1)
    a = np.full(1000, 1e-3)
    Cn = C.numpy()

    def ours() -> None:
        entropic_ot_dual_sgd(xs, ys, eps=0.1, steps=300, batch_size=64, lr=1.0, record_every=300)

    def pots() -> None:
        pot.stochastic.solve_dual_entropic(a, a, Cn, 0.1, 64, numItermax=300, lr=1.0)

    compare(
        "entropic OT dual SGD, 300 steps (N = 1000, 64 x 64 pairs)",
        {"entropic_ot_dual_sgd": ours, "POT solve_dual_entropic": pots},
        1,
        args.repeats,
    )


if __name__ == "__main__":
    main()
