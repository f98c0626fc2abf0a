"""TuRBO-ENN best values, optarium against ennbo 0.3.3 (the authors' package), paired by seed.

Run: ``nice -n 10 python benchmarks/bo_quality_vs_ennbo.py [--seeds 5] [--evals 600] [--quick] [--no-rust]``.

Comparison rule (stated before any run): per acquisition ("ucb", "pareto") and per ennbo configuration, the
paired difference over seeds is ``delta_s = best_ours_s - best_ennbo_s`` (best = the lowest Ackley value
found in the budget, so negative favours ours). Ours is **comparable** when the mean difference lies within
2 SE of 0 or favours ours (``mean(delta) <= 2 SE``, SE = sample sd / sqrt(n)); otherwise it is **worse**.
Both packages are seeded with the seed and the problem is deterministic; seeds are paired by index only (the
packages draw different random numbers).

Problem (the spec's "Quality sanity check", the only problem the spec names for a comparison with ennbo):
Ackley-10D on [-5, 10]^10 (BoTorch's Ackley via :func:`optarium.bo.problems.make_problem`, minimised; ennbo
maximises, so it is told ``-f``), batches of q = 10, ``--evals`` evaluations (600). The spec quotes ennbo
0.3.3 medians over 5 seeds of -0.70 (Pareto) and -1.22 (UCB) for -Ackley, i.e. 0.70 and 1.22 here.

Methods, each with its package's defaults:

- ``ours-ucb`` / ``ours-pareto``: :class:`optarium.bo.TurboENN` with ``acquisition="ucb"`` (K = 10, fitted
  with 30 candidate pairs and 10 fit samples, beta = 1) or ``"pareto"`` (no fit), ``num_init`` =
  max(2d, q) = 20, ``seed=seed``.
- ``ennbo-ucb`` / ``ennbo-pareto``: ``enn.create_optimizer(bounds, enn.turbo_enn_config(...),
  rng=numpy.random.default_rng(seed))``. Pareto is ``turbo_enn_config()`` as shipped; UCB is
  ``turbo_enn_config(acq_type=AcqType.UCB)`` with ``ENNSurrogateConfig(fit=ENNFitConfig(num_fit_samples=10))``
  (ennbo refuses UCB without ``num_fit_samples``; 10 is the paper's and ennbo's Rust default). With ``k`` left
  unset ennbo 0.3.3 takes its Python optimizer: K = 10, 30 fit candidates, beta = 1, initial design 2d = 20,
  the same settings as ours.
- ``ennbo-rs-ucb`` / ``ennbo-rs-pareto`` (skipped with ``--no-rust``): the same with ``k=10`` set (and
  ``num_fit_candidates=30`` for UCB), which sends ennbo 0.3.3 to its Rust core, whose defaults differ: initial
  design 10 points and UCB beta = 2.

Wall time per run includes the evaluations (negligible) and excludes imports. ``torch.set_num_threads(1)``.
``--quick`` runs 2 seeds and 100 evaluations (a smoke check of the script, not a comparison).
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Callable

import numpy as np
import torch

__all__ = ["METHODS", "main", "run_ennbo", "run_ours"]

DIM, Q, LOW, HIGH = 10, 10, -5.0, 10.0


def _problem() -> Callable[[torch.Tensor], torch.Tensor]:
    from optarium.bo.problems import make_problem

    return make_problem("ackley", DIM, bounds=(LOW, HIGH))


def run_ours(acq: str, seed: int, evals: int) -> float:
    """Best Ackley value found by :class:`optarium.bo.TurboENN` (``acquisition=acq``, defaults)."""
    from optarium.bo.turbo_enn import TurboENN

    prob = _problem()
    bounds = torch.tensor([[LOW] * DIM, [HIGH] * DIM], dtype=torch.float64)
    opt = TurboENN(bounds, batch_size=Q, acquisition=acq, seed=seed)
    for _ in range(evals // Q):
        x = opt.ask(Q)
        opt.tell(x, prob(x))
    return opt.best_y


def run_ennbo(acq: str, seed: int, evals: int, *, rust: bool = False) -> float:
    """Best Ackley value found by ennbo 0.3.3's TuRBO-ENN (``turbo_enn_config``; see the module docstring)."""
    import enn
    from enn.turbo.config.enn_fit_config import ENNFitConfig
    from enn.turbo.config.enn_surrogate_config import ENNSurrogateConfig

    prob = _problem()
    k = 10 if rust else None
    if acq == "ucb":
        fit = ENNFitConfig(num_fit_samples=10, num_fit_candidates=30 if rust else None)
        cfg = enn.turbo_enn_config(enn=ENNSurrogateConfig(k=k, fit=fit), acq_type=enn.AcqType.UCB)
    else:
        cfg = enn.turbo_enn_config(enn=ENNSurrogateConfig(k=k)) if rust else enn.turbo_enn_config()
    bounds = np.array([[LOW, HIGH]] * DIM)
    opt = enn.create_optimizer(bounds=bounds, config=cfg, rng=np.random.default_rng(seed))
    want = "RustOptimizer" if rust else "Optimizer"
    if type(opt).__name__ != want:
        raise RuntimeError(f"ennbo built {type(opt).__name__}, expected {want}")
    best = math.inf
    for _ in range(evals // Q):
        x = opt.ask(Q)
        y = prob(torch.as_tensor(x, dtype=torch.float64)).numpy()
        best = min(best, float(y.min()))
        opt.tell(x, -y)
    return best


#: name -> (acquisition, runner)
METHODS: dict[str, tuple[str, Callable[[int, int], float]]] = {
    "ours-ucb": ("ucb", lambda s, n: run_ours("ucb", s, n)),
    "ours-pareto": ("pareto", lambda s, n: run_ours("pareto", s, n)),
    "ennbo-ucb": ("ucb", lambda s, n: run_ennbo("ucb", s, n)),
    "ennbo-pareto": ("pareto", lambda s, n: run_ennbo("pareto", s, n)),
    "ennbo-rs-ucb": ("ucb", lambda s, n: run_ennbo("ucb", s, n, rust=True)),
    "ennbo-rs-pareto": ("pareto", lambda s, n: run_ennbo("pareto", s, n, rust=True)),
}


def _mean_se(v: list[float]) -> tuple[float, float]:
    m = statistics.fmean(v)
    return m, (statistics.stdev(v) / math.sqrt(len(v)) if len(v) > 1 else math.nan)


def main() -> None:
    """Run every method on every seed (seed-major, so load drifts hit all methods alike) and print the
    table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--evals", type=int, default=600)
    ap.add_argument("--quick", action="store_true", help="2 seeds, 100 evaluations")
    ap.add_argument("--no-rust", action="store_true", help="skip ennbo's Rust-core configurations")
    args = ap.parse_args()
    if args.quick:
        args.seeds, args.evals = 2, 100
    torch.set_num_threads(1)
    methods = [m for m in METHODS if not (args.no_rust and "-rs-" in m)]
    import enn  # noqa: F401  (import cost outside the timings)

    _problem()
    best: dict[str, list[float]] = {m: [] for m in methods}
    secs: dict[str, list[float]] = {m: [] for m in methods}
    print(
        f"Ackley-{DIM}D on [{LOW:g}, {HIGH:g}]^{DIM}, q={Q}, {args.evals} evaluations, "
        f"seeds 0..{args.seeds - 1}"
    )
    for seed in range(args.seeds):
        for m in methods:
            t = time.perf_counter()
            best[m].append(METHODS[m][1](seed, args.evals))
            secs[m].append(time.perf_counter() - t)
        print(f"  seed {seed}: " + "  ".join(f"{m} {best[m][-1]:.3f}" for m in methods), flush=True)

    print()
    print(f"{'method':<16} {'median best f':>13} {'mean ± SE':>17} {'s/run (mean)':>13}")
    for m in methods:
        mu, se = _mean_se(best[m])
        print(
            f"{m:<16} {statistics.median(best[m]):>13.3f} {f'{mu:.3f} ± {se:.3f}':>17} "
            f"{statistics.fmean(secs[m]):>13.2f}"
        )
    print()
    print("paired differences ours - ennbo (best f; negative favours ours); comparable if mean <= 2 SE")
    print(f"{'ours vs ennbo':<32} {'mean ± SE':>17} {'wins/ties/losses':>17} {'verdict':>11}")
    for ours in ("ours-ucb", "ours-pareto"):
        acq = METHODS[ours][0]
        for ref in methods:
            if not ref.startswith("ennbo") or METHODS[ref][0] != acq:
                continue
            d = [a - b for a, b in zip(best[ours], best[ref], strict=True)]
            mu, se = _mean_se(d)
            verdict = "comparable" if (mu <= 0 or (not math.isnan(se) and mu <= 2 * se)) else "worse"
            wtl = f"{sum(x < 0 for x in d)}/{sum(x == 0 for x in d)}/{sum(x > 0 for x in d)}"
            print(f"{ours + ' - ' + ref:<32} {f'{mu:+.3f} ± {se:.3f}':>17} {wtl:>17} {verdict:>11}")


if __name__ == "__main__":
    main()
