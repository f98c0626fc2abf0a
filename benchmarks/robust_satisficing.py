"""Per-step cost of IRS and the DRO baselines against ERM, and the loss kernels against plain torch peers.

Run: ``python benchmarks/robust_satisficing.py [--repeats 7] [--steps 200] [--batch 64] [--threads 1]``.

(a) One training step (forward of the 16-64-2 MLP of the quick experiment, per-sample cross-entropy, the
method's loss, backward, torch SGD with momentum) for ERM, the paper's IRS (``IterativeRobustSatisficing``
over the 4 groups, ``irs_group``, and over the batch's samples, ``irs_sample``), the reconstruction
(``RobustSatisficingLoss`` + ``update``, ``irs_recon``), TERM, CVaR, chi^2-DRO and Group DRO, as ratios to
ERM's step. (b) The loss kernels alone (forward + backward on a batch of losses): ``tilted_loss`` against
the naive ``k * (logsumexp(l/k) - log B)``, ``chi2_dro_loss`` (exact, all candidates at once) against an
80-step bisection on the dual's derivative (the first version of this module), and the IRS inner problem,
``kl_fragility`` (one vectorised grid + interpolation, the class's default) against ``rs_fragility`` (100
bisection steps, the reference) on the batch's samples. Blocks of ``--steps`` steps are interleaved over
``--repeats`` rounds; reported are per-step medians and the ratio of medians. Measured, never asserted.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from _timing import medians

from optarium.optim.robust_satisficing import (
    GroupDROLoss,
    IterativeRobustSatisficing,
    RobustSatisficingLoss,
    chi2_dro_loss,
    cvar_loss,
    kl_fragility,
    rs_fragility,
    tilted_loss,
)


def _chi2_bisection(losses: torch.Tensor, rho: float, iters: int = 80) -> torch.Tensor:
    """The peer: the chi^2 dual solved by bisection on its derivative (python loop)."""
    c = math.sqrt(1 + 2 * rho)
    x = losses.detach().double()

    def deriv(eta: float) -> float:
        r = (x - eta).clamp_min(0.0)
        s = float(torch.sqrt((r * r).mean()))
        return 1.0 - c * float(r.mean()) / s if s > 0 else 1.0

    lo, hi = float(x.min()) - 10 * float(x.max() - x.min()) - 1, float(x.max())
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if deriv(mid) < 0 else (lo, mid)
    r = (losses - 0.5 * (lo + hi)).clamp_min(0.0)
    return 0.5 * (lo + hi) + c * torch.sqrt((r * r).mean())


def _step_bench(batch: int) -> dict[str, Callable[[], None]]:
    gen = torch.Generator().manual_seed(0)
    x, y = torch.randn(4096, 16, generator=gen), torch.randint(0, 2, (4096,), generator=gen)
    g = torch.randint(0, 4, (4096,), generator=gen)
    out: dict[str, Callable[[], None]] = {}
    prior = torch.tensor([0.475, 0.025, 0.025, 0.475], dtype=torch.float64)
    for name in ("erm", "irs_group", "irs_sample", "irs_recon", "term", "cvar", "chi2", "gdro"):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        irs = RobustSatisficingLoss(target=0.5)
        paper_g = IterativeRobustSatisficing(0.1, prior=prior)
        paper_s = IterativeRobustSatisficing(0.1)
        gdro = GroupDROLoss(4, 0.1)
        state = {"i": 0}

        def step(  # type: ignore[no-untyped-def]
            model=model, opt=opt, irs=irs, gdro=gdro, state=state, name=name, pg=paper_g, ps=paper_s
        ) -> None:
            i = state["i"] = (state["i"] + batch) % (4096 - batch)
            xb, yb, gb = x[i : i + batch], y[i : i + batch], g[i : i + batch]
            ls = F.cross_entropy(model(xb), yb, reduction="none")
            loss = {
                "erm": lambda: ls.mean(),
                "irs_group": lambda: pg(ls, gb),
                "irs_sample": lambda: ps(ls),
                "irs_recon": lambda: irs(ls),
                "term": lambda: tilted_loss(ls, 10.0),
                "cvar": lambda: cvar_loss(ls, 0.2),
                "chi2": lambda: chi2_dro_loss(ls, 0.5),
                "gdro": lambda: gdro(ls, gb),
            }[name]()
            opt.zero_grad()
            loss.backward()
            opt.step()
            if name == "irs_recon":
                irs.update(loss)

        out[name] = step
    return out


def _kernel_bench(batch: int) -> dict[str, Callable[[], None]]:
    base = torch.rand(batch, generator=torch.Generator().manual_seed(1)) * 3

    def run(fn: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[], None]:
        def f() -> None:
            ls = base.clone().requires_grad_(True)
            fn(ls).backward()

        return f

    return {
        "tilted": run(lambda ls: tilted_loss(ls, 10.0)),
        "tilted_naive": run(lambda ls: 10.0 * (torch.logsumexp(ls / 10.0, 0) - math.log(ls.numel()))),
        "chi2_exact": run(lambda ls: chi2_dro_loss(ls, 0.5)),
        "chi2_bisection": run(lambda ls: _chi2_bisection(ls, 0.5)),
        "kl_fragility": lambda: kl_fragility(base, 1.01 * float(base.mean()), grid=256, rounds=0),
        "rs_fragility": lambda: rs_fragility(base, 1.01 * float(base.mean()), k_bounds=(0.02, 1e3)),
    }


def main() -> None:
    """Time the step and kernel benchmarks and print medians and ratios."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    step = medians(_step_bench(a.batch), a.repeats, number=a.steps, warmup=5)
    print(f"(a) training step, batch {a.batch} (median us/step, ratio to ERM)")
    for k, v in step.items():
        print(f"  {k:10s} {1e6 * v:8.1f}  {v / step['erm']:.2f}x")
    ker = medians(_kernel_bench(a.batch), a.repeats, number=a.steps, warmup=5)
    print(f"(b) loss kernels, forward + backward, batch {a.batch} (median us)")
    for k, v in ker.items():
        print(f"  {k:14s} {1e6 * v:8.1f}")
    print(f"  tilted / naive logsumexp: {ker['tilted'] / ker['tilted_naive']:.2f}x")
    print(f"  chi2 exact / bisection:   {ker['chi2_exact'] / ker['chi2_bisection']:.2f}x")
    print(f"  kl_fragility / rs_fragility (bisection): {ker['kl_fragility'] / ker['rs_fragility']:.2f}x")


if __name__ == "__main__":
    main()
