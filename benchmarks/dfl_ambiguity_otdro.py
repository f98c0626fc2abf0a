"""The hot path of learn_ambiguity_shape against peers: exact OT, the lower-level solve, one outer step.

Run: ``python benchmarks/dfl_ambiguity_otdro.py [--repeats 7] [--inner 20] [--threads 1]``.

On the quick experiment's instance (5 assets, N = 50, N_b = 20 bootstrap resamples):

(a) exact OT W_{c_L}(P̂, P̂_b) for all N_b resamples: :func:`mahalanobis_wasserstein` (batched cost matrix
    + ``linear_sum_assignment`` + envelope gradient) against POT's ``ot.emd2`` on the same cost matrices
    (value only, no gradient);
(b) the lower level: :meth:`OTDROProblem.solve` warm-started from the previous support (what every outer
    step does), cold (the simplex QP layer finds the support) and cvxpy + Clarabel on the same SOCP;
(c) one outer step: :func:`ambiguity_objective` (lower level + N_b OT + Danskin/envelope gradient) against
    the peer pipeline of the spec's cost estimate: cvxpy lower level + N_b ``ot.emd2`` (still without the
    differentiable conic solve the official code adds).

Blocks of ``--inner`` calls are interleaved over ``--repeats`` rounds; reported are per-call medians and the
ratio of medians (peer / ours). Measured, never asserted.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from optarium.bilevel.ot_ambiguity import (
    OTDROProblem,
    ambiguity_objective,
    bootstrap_indices,
    calibrate_radius,
    mahalanobis_wasserstein,
)
from optarium.experiments.dfl_ambiguity_otdro import CONFIGS, make_data


def _instance() -> tuple[OTDROProblem, torch.Tensor, torch.Tensor, float]:
    data = make_data("pf", 0, CONFIGS["quick"])
    prob = OTDROProblem("portfolio_w1", data["X"])
    idx = bootstrap_indices(50, 20, seed=0)
    g = torch.Generator().manual_seed(1)
    L = torch.eye(5, dtype=torch.float64) + 0.1 * torch.tril(
        torch.randn(5, 5, generator=g, dtype=torch.float64)
    )
    L = L.abs().tril()
    return prob, idx, L, calibrate_radius(prob.samples, idx, torch.eye(5, dtype=torch.float64), 0.1, 1)


def _cases() -> dict[str, dict[str, Callable[[], object]]]:
    import cvxpy as cp

    import ot

    prob, idx, L, eps = _instance()
    X = prob.samples
    Q = X[idx]
    w = torch.full((50,), 1 / 50, dtype=torch.float64).numpy()

    def pot_all() -> object:
        cost = torch.linalg.vector_norm((X[None, :, None] - Q[:, None]) @ L, dim=-1)
        return [ot.emd2(w, w, c.numpy()) for c in cost]

    mu = X.mean(0).numpy()
    z = cp.Variable(5)
    M = cp.Parameter((5, 5))
    socp = cp.Problem(cp.Minimize(-mu @ z + eps * cp.norm(M @ z)), [z >= 0, cp.sum(z) == 1])

    def cvx_solve() -> object:
        M.value = torch.linalg.inv(L).numpy()
        return socp.solve(solver="CLARABEL")

    _, _, warm = prob.solve(L, eps)
    return {
        "exact OT, all N_b (+ gradient) vs ot.emd2": {
            "ours": lambda: mahalanobis_wasserstein(X, Q, L, 1),
            "peer": pot_all,
        },
        "lower level, warm vs cvxpy/Clarabel": {
            "ours": lambda: prob.solve(L, eps, warm=warm),
            "peer": cvx_solve,
        },
        "lower level, cold (QP layer) vs cvxpy/Clarabel": {
            "ours": lambda: prob.solve(L, eps),
            "peer": cvx_solve,
        },
        "outer step vs cvxpy + ot.emd2": {
            "ours": lambda: ambiguity_objective(prob, L, eps, idx, warm=warm),
            "peer": lambda: (cvx_solve(), pot_all()),
        },
    }


def main() -> None:
    """Run the benchmark and print a table of medians and ratios."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--inner", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cases = _cases()
    for fns in cases.values():  # warm-up (cvxpy compiles once)
        for fn in fns.values():
            fn()
    print(f"{'comparison':50s} {'ours [ms]':>10s} {'peer [ms]':>10s} {'peer/ours':>10s}")
    for name, fns in cases.items():
        times: dict[str, list[float]] = {k: [] for k in fns}
        for _ in range(args.repeats):
            for k, fn in fns.items():
                t0 = time.perf_counter()
                for _ in range(args.inner):
                    fn()
                times[k].append((time.perf_counter() - t0) / args.inner * 1e3)
        ours, peer = statistics.median(times["ours"]), statistics.median(times["peer"])
        print(f"{name:50s} {ours:10.3f} {peer:10.3f} {peer / ours:10.2f}")


if __name__ == "__main__":
    main()
