"""anytime-coco hot paths against peers: the per-round update and the simplex projection, as CPU-time ratios.

Run: ``python benchmarks/anytime_coco.py [--repeats 5] [--rounds 2000] [--threads 1]``.

1. **Per round** (linear costs and constraints on the simplex, d = 4 and 81, ``--rounds`` rounds):
   :meth:`AnytimeCOCO.play_linear` (the numpy fast path the experiment uses) against the per-round
   ``update_gradients`` (numpy arrays in), the contract's ``update(loss_fn, constraint_fn)`` (autograd
   closures), the landed torch :class:`optarium.online.OnlineGradientDescent` (unconstrained, autograd:
   the family's reference learner), and the same anytime update written in torch ops (float64 tensors,
   the alternative the module docstring argues against); and the baselines' ``play_linear``
   (Sinha-Vaze, doubling trick, virtual-queue OGD, constraint-agnostic AdaGrad).
2. **Simplex projection**: :func:`project_simplex` on one vector (its short-loop path for d <= 32 and the
   sort path above), against its torch path and a bisection on the threshold; and batched (1024 vectors).

Blocks are interleaved over ``--repeats`` rounds; reported are median CPU times (``time.process_time``)
per round / per call and the ratio of medians to the first entry. Ratios are measured, never asserted.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable

import numpy as np
import torch
from _timing import compare


def _torch_anytime(F: torch.Tensor, Gm: torch.Tensor, off: torch.Tensor, beta: float) -> torch.Tensor:
    """The anytime update in torch ops (the peer implementation), sort-based simplex projection."""
    from optarium.online.anytime_coco import project_simplex

    d = F.shape[1]
    x = torch.full((d,), 1.0 / d, dtype=F.dtype)
    Q, S, lam_prev = 0.0, 0.0, 0.5
    D = math.sqrt(2.0)
    for i in range(F.shape[0]):
        t = i + 1
        lam = 0.5 / math.sqrt(t)
        gv = float(Gm[i] @ x) + float(off[i])
        viol = max(gv, 0.0)
        Q = lam_prev / lam * Q + beta * viol
        grad = beta * F[i]
        if viol > 0:
            grad = grad + lam * math.exp(min(lam * Q, 300.0)) * beta * Gm[i]
        S += float(grad @ grad)
        x = project_simplex(x - D / math.sqrt(2 * S) * grad)
        lam_prev = lam
    return x


def round_cases(d: int, rounds: int) -> dict[str, Callable[[], object]]:
    """The per-round workloads by name."""
    from optarium.online import (
        AnytimeCOCO,
        ConstraintAgnosticOGD,
        DoublingTrick,
        OnlineGradientDescent,
        Simplex,
        SinhaVazeCOCO,
        VirtualQueueOGD,
    )

    rng = np.random.default_rng(0)
    C, E = rng.random((rounds, d)), rng.random((rounds, d))
    F, Gm, off = C - C.mean(1, keepdims=True), E - E.mean(1, keepdims=True), E.mean(1) - 0.5
    x0 = torch.full((d,), 1.0 / d, dtype=torch.float64)
    dom = Simplex()

    def new(cls: type, **kw: object) -> object:
        return cls(x0, dom, lipschitz=1.0, **kw)

    def per_round() -> None:
        lrn = new(AnytimeCOCO, record=False)
        for i in range(rounds):
            x = lrn.predict_array()
            lrn.update_gradients(F[i], float(Gm[i] @ x) + off[i], Gm[i])

    Ft, Gt, ot = (torch.from_numpy(v) for v in (F, Gm, off))
    short = max(1, rounds // 10)  # the autograd paths are slow: time a tenth of the rounds

    def closures() -> None:
        lrn = new(AnytimeCOCO, record=False)
        for i in range(short):
            lrn.update(lambda z, i=i: (Ft[i] * z).sum(), lambda z, i=i: (Gt[i] * z).sum() + ot[i])

    def ogd() -> None:
        lrn = OnlineGradientDescent(x0, dom)
        for i in range(short):
            lrn.update(lambda z, i=i: (Ft[i] * z).sum())

    scale = rounds / short
    return {
        "AnytimeCOCO.play_linear (numpy)": lambda: new(AnytimeCOCO, record=False).play_linear(F, Gm, off),
        "AnytimeCOCO.update_gradients loop": per_round,
        "AnytimeCOCO.update(closures), autograd": lambda: [closures() for _ in range(round(scale))],
        "OnlineGradientDescent.update (torch)": lambda: [ogd() for _ in range(round(scale))],
        "anytime update in torch ops": lambda: _torch_anytime(Ft, Gt, ot, 1.0 / (2 * math.sqrt(2))),
        "SinhaVazeCOCO.play_linear": lambda: new(SinhaVazeCOCO, horizon=rounds, record=False).play_linear(
            F, Gm, off
        ),
        "DoublingTrick(SinhaVaze).play_linear": lambda: DoublingTrick(
            lambda x, h: SinhaVazeCOCO(x, dom, lipschitz=1.0, horizon=h, record=False), x0
        ).play_linear(F, Gm, off),
        "VirtualQueueOGD.play_linear": lambda: new(VirtualQueueOGD).play_linear(F, Gm, off),
        "ConstraintAgnosticOGD.play_linear": lambda: new(ConstraintAgnosticOGD, record=False).play_linear(
            F, Gm, off
        ),
    }


def projection_cases(d: int, number: int = 2000) -> dict[str, Callable[[], object]]:
    """The projection workloads by name (``number`` calls each, or one batched call)."""
    from optarium.online import project_simplex

    rng = np.random.default_rng(1)
    v = rng.standard_normal(d)
    vt = torch.from_numpy(v)
    V = rng.standard_normal((1024, d))
    Vt = torch.from_numpy(V)

    def bisect() -> None:
        for _ in range(number):
            lo, hi = v.min() - 1.0, v.max()
            for _ in range(60):
                mid = 0.5 * (lo + hi)
                if np.maximum(v - mid, 0.0).sum() > 1.0:
                    lo = mid
                else:
                    hi = mid

    return {
        "project_simplex numpy, one vector": lambda: [project_simplex(v) for _ in range(number)],
        "project_simplex torch, one vector": lambda: [project_simplex(vt) for _ in range(number)],
        "bisection (60 steps), one vector": bisect,
        "project_simplex numpy, 1024 batched (per vector)": lambda: [
            project_simplex(V) for _ in range(number // 1024 + 1)
        ],
        "project_simplex torch, 1024 batched (per vector)": lambda: [
            project_simplex(Vt) for _ in range(number // 1024 + 1)
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    for d in (4, 81):
        compare(
            f"per round, d = {d} (CPU time per round)",
            round_cases(d, args.rounds),
            1,
            args.repeats,
            per=args.rounds,
            clock=time.process_time,
            width=44,
        )
    for d in (4, 81, 1024):
        cases = projection_cases(d)
        n = 2000
        per = {k: (n if "batched" not in k else (n // 1024 + 1) * 1024) for k in cases}
        compare(
            f"simplex projection, d = {d} (CPU time per vector)",
            cases,
            1,
            args.repeats,
            warmup=0,
            per=per,
            clock=time.process_time,
            width=50,
        )


if __name__ == "__main__":
    main()
