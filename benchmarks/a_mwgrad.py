"""A-MWGraD's hot paths against their peers, as ratios measured in one run.

Run: ``python benchmarks/a_mwgrad.py [--repeats 5] [--threads 1]``.

1. One sampler step (K = 3 Gaussian targets, blob score, median bandwidth, exact min-norm weights, float64)
   at n = 100, 500, 2000 particles in d = 2 and d = 20: :class:`~optarium.ot.a_mwgrad.AcceleratedMWGraD`
   against :class:`~optarium.ot.a_mwgrad.MWGraD`, one SVGD step on the averaged potential (linear
   scalarisation) and one MOO-SVGD step (per-particle MGDA,
   :func:`optarium.experiments.a_mwgrad.moo_svgd_step`).
2. The min-norm weights of a (K, n, d) field: the exact solver (:func:`optarium.bilevel.min_norm_weights`)
   against Frank-Wolfe (relative tolerance 1e-4) and cvxpy (Clarabel) on the same Gram matrix, K = 3 and 5.

Blocks are interleaved over ``--repeats`` rounds; reported are per-call medians and the ratio of medians.
Ratios are measured, never asserted.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
from _timing import compare


def _targets(means: torch.Tensor) -> tuple[list, list]:
    def lp(m: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
        return lambda x: -0.5 * ((x - m) ** 2).sum(-1)

    def sc(m: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
        return lambda x: m - x

    return [lp(m) for m in means], [sc(m) for m in means]


def _step_cases(lps: list, scs: list, X0: torch.Tensor) -> dict[str, Callable[[], object]]:
    from optarium.experiments.a_mwgrad import moo_svgd_step
    from optarium.ot.a_mwgrad import AcceleratedMWGraD, MWGraD

    acc = AcceleratedMWGraD(lps, scores=scs, step_size=0.05)
    mw = MWGraD(lps, scores=scs, step_size=0.05)
    ls = MWGraD(lps, scores=scs, score_estimator="svgd", weights="uniform", step_size=0.05)
    return {
        "A-MWGraD (heavy ball + restart)": lambda: acc.step(X0.clone()),
        "MWGraD": lambda: mw.step(X0.clone()),
        "LS-SVGD (uniform weights)": lambda: ls.step(X0.clone()),
        "MOO-SVGD": lambda: moo_svgd_step(X0.clone(), mw.grad_potentials(X0), 0.05),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from optarium.ot.a_mwgrad import frank_wolfe_min_norm, min_norm_gram

    g = torch.Generator().manual_seed(0)
    for d in (2, 20):
        means = torch.randn(3, d, generator=g, dtype=torch.float64)
        lps, scs = _targets(means)
        for n in (100, 500, 2000):
            X0 = 3 * torch.randn(n, d, generator=g, dtype=torch.float64)
            number = max(3, 2000 // n)
            compare(f"one step, K = 3, n = {n}, d = {d}", _step_cases(lps, scs, X0), number, args.repeats)
    import cvxpy as cp

    from optarium.bilevel import min_norm_weights

    for K in (3, 5):
        xi = torch.randn(K, 500, 2, generator=g, dtype=torch.float64) + 0.5
        Q = min_norm_gram(xi)
        G = xi.reshape(K, -1) / 500**0.5

        def qp(Q: torch.Tensor = Q, K: int = K) -> object:
            w = cp.Variable(K)
            prob = cp.Problem(cp.Minimize(cp.quad_form(w, cp.psd_wrap(Q.numpy()))), [w >= 0, cp.sum(w) == 1])
            prob.solve(solver=cp.CLARABEL)
            return w.value

        compare(
            f"min-norm weights, K = {K}, n = 500, d = 2",
            {
                "exact (face enumeration)": lambda G=G: min_norm_weights(G),
                "Frank-Wolfe (rtol 1e-4)": lambda Q=Q: frank_wolfe_min_norm(Q),
                "cvxpy + Clarabel": qp,
            },
            10,
            args.repeats,
        )


if __name__ == "__main__":
    main()
