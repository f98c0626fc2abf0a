"""MetaSG-SAEA's hot paths against their peers, as CPU-time ratios measured in one run.

Run: ``python benchmarks/metasg_saea.py [--repeats 5] [--threads 1]``.

1. The greedy infill's hypervolume improvements: :func:`~optarium.bo.metrics.hypervolume_improvement`
   (one vectorised exact 2-D computation for all candidates) against one BoTorch hypervolume per candidate
   (``HV(front + {c}) - HV(front)``, what the infill did before), for fronts of 10 and 40 points and 40 and
   400 candidates (the quick's inner population is 40).
2. One whole SAEA run of the quick (C2-DTLZ2, 120 evaluations, tau = 0) against pymoo's NSGA-II at the same
   120 evaluations: the price of the surrogate per true evaluation (context for "expensive" problems, not a
   speed claim).

CPU time (``time.process_time``), medians of interleaved repeats; ratios are measured, never asserted.
"""

from __future__ import annotations

import argparse
import time

import torch
from _timing import compare


def _loop_hvi(front: torch.Tensor, cand: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    from optarium.bo.metrics import hypervolume

    base = hypervolume(front, ref) if front.shape[0] else 0.0
    return torch.tensor(
        [hypervolume(torch.cat([front, c[None]]), ref) - base for c in cand], dtype=cand.dtype
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from optarium._core.pareto import non_dominated
    from optarium.bo.metrics import hypervolume_improvement

    g = torch.Generator().manual_seed(0)
    ref = torch.tensor([1.1, 1.1], dtype=torch.float64)
    for n_front, n_cand in ((10, 40), (40, 400)):
        t = torch.rand(4 * n_front, generator=g, dtype=torch.float64) * (torch.pi / 2)
        F = torch.stack([torch.cos(t), torch.sin(t)], 1)  # a concave front, all non-dominated
        F = F[non_dominated(F)][:n_front]
        C = torch.rand(n_cand, 2, generator=g, dtype=torch.float64)
        assert torch.allclose(hypervolume_improvement(F, C, ref), _loop_hvi(F, C, ref), atol=1e-12)
        compare(
            f"1. hypervolume improvement of {n_cand} candidates over a {F.shape[0]}-point front",
            {
                "hypervolume_improvement (vectorised)": lambda F=F, C=C: hypervolume_improvement(F, C, ref),
                "BoTorch hypervolume per candidate": lambda F=F, C=C: _loop_hvi(F, C, ref),
            },
            number=3,
            repeats=args.repeats,
            clock=time.process_time,
            unit="ms",
        )

    from optarium.experiments import metasg_saea as E

    cfg = E.CONFIGS["quick"]
    problem = E._pymoo_problem("c2dtlz2")
    compare(
        "2. one run at 120 evaluations on C2-DTLZ2 (n_var 5, 2 objectives)",
        {
            "pymoo NSGA-II (population 20)": lambda: E._run_pymoo(problem, "nsga2", 0, cfg),
            "SAEA (tau = 0, GP surrogates, q = 3)": lambda: E._run_saea(problem, "saea-tau0", 0, cfg),
        },
        number=1,
        repeats=max(1, args.repeats // 2),
        clock=time.process_time,
        unit="s",
    )


if __name__ == "__main__":
    main()
