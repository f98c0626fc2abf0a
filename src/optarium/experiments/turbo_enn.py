"""TuRBO-ENN: proposal time against GP-TuRBO over the number of observations N, and solution quality.

Paper: M. Bafna, S. A. Jadhav, D. Sweet, "Taking the GP Out of the Loop", ICML 2026, arXiv:2506.12818.
Claim: replacing TuRBO's GP by ENN cuts proposal time (fit + acquisition) by 10x-100x at up to 50,000
observations, without loss in the best value found.

Measurements (the spec's laptop-scale plan; every strategy is :mod:`optarium.bo.turbo_enn`, all sharing the
same trust-region loop, so only the surrogate/acquisition differs):

- Timing (seed 0 units of the timed methods): N uniform points in [0,1]^d with y = Ackley (minimised), then
  one proposal of q points from a strategy holding all N points in its TR run; proposal seconds = fit +
  candidates + acquisition (the strategy's own timings). ENN: median of ``enn_repeats`` proposals; GP: one
  proposal per N (GP fits are slow), L-BFGS capped at ``gp_maxiter`` iterations.
- Quality: Ackley on [-5, 10]^d (and, at full scale, Rastrigin and a shifted sphere), q per config, a fixed
  evaluation budget; TuRBO-ENN (UCB, fitted), TuRBO-ENN (Pareto, no fit), TuRBO-zero, random search (and at
  full scale GP-TuRBO on Ackley only, capped fits); paired seeds.

Scales: ``smoke`` (d = 4, N in {50, 100}, 40 evaluations, 2 seeds); ``quick`` (timing d = 10, N in {100, 300,
1000}, GP capped at 50 L-BFGS iterations; quality Ackley-10D, q = 10, 600 evaluations, 3 seeds; no GP quality
runs); ``full`` (timing d = 20, ENN N up to 50,000 and GP N up to 2,000 capped at 50 iterations; quality the
three 20-D problems, q = 20, 1,500 evaluations, 5 seeds; GP-TuRBO on Ackley-20D, 1,000 evaluations, 3 seeds).

Measurement fix of the full scale (issue 11, before its second run; the rule is unchanged): the rule pairs
ENN and GP timings at the same N, and the first full run timed ENN at N in {1e3, 3e3, 1e4, 3e4, 5e4} and the
GP at {250, 500, 1000, 2000}, so the only paired N was 1,000 and "r grows with N" could not hold by
construction (recorded "not reproduced" with r = 305 at N = 1,000). ENN is now also timed at the GP's N.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from optarium._core.seeding import derive_seed
from optarium.harness.experiment import Experiment, Verdict, register
from optarium.harness.verdicts import by_step, last_values, select

__all__ = ["CONFIGS", "EXPERIMENT", "METHODS", "decide", "plot", "proposal_time", "run"]

CLAIM = (
    "TuRBO-ENN cuts TuRBO's proposal time (fit + acquisition) by 10x-100x versus the GP surrogate, with no "
    "loss in the best value found."
)
RULE = (
    "Timing: ratio r(N) = GP-TuRBO proposal seconds / TuRBO-ENN (UCB, fitted) proposal seconds (median of "
    "repeats) at each N. Quality sanity: median final best of each ENN variant over the paired seeds on the "
    "first problem (Ackley). Reproduced if r >= 10 at the largest N, r grows with N (r at the largest N > "
    "r at the smallest), and both ENN variants have a lower (better) median than TuRBO-zero and random "
    "search; at full scale also the spec's non-inferiority check: median ENN-UCB best at 1,000 evaluations "
    "on Ackley is not worse than GP-TuRBO's median by more than GP's seed range, with >= 10x less total "
    "proposal time. "
    "Not reproduced if r < 10 at the largest N or r does not grow; inconclusive otherwise (a failed quality "
    "check or missing records)."
)

METHODS = ("turbo-enn-ucb", "turbo-enn-pareto", "turbo-zero", "random", "turbo-gp")
TIMED = ("turbo-enn-ucb", "turbo-enn-pareto", "turbo-gp")

CONFIGS: dict[str, dict[str, Any]] = {
    "smoke": {
        "seeds": 2,
        "timing_dim": 4,
        "timing_n": [50, 100],
        "gp_timing_n": [50, 100],
        "enn_repeats": 1,
        "gp_maxiter": 5,
        "q": 4,
        "problems": [["ackley", 4]],
        "evaluations": 40,
        "gp_quality": False,
    },
    "quick": {
        "seeds": 3,
        "timing_dim": 10,
        "timing_n": [100, 300, 1000],
        "gp_timing_n": [100, 300, 1000],
        "enn_repeats": 3,
        "gp_maxiter": 50,
        "q": 10,
        "problems": [["ackley", 10]],
        "evaluations": 600,
        "gp_quality": False,
    },
    "full": {
        "seeds": 5,
        "timing_dim": 20,
        "timing_n": [250, 500, 1000, 2000, 3000, 10000, 30000, 50000],
        "gp_timing_n": [250, 500, 1000, 2000],
        "enn_repeats": 3,
        "gp_maxiter": 50,
        "q": 20,
        "problems": [["ackley", 20], ["rastrigin", 20], ["sphere", 20]],
        "evaluations": 1500,
        "gp_quality": True,
        "gp_seeds": 3,
        "gp_evaluations": 1000,
        "unit_timeout_s": 1800,
    },
}


def _strategy(method: str, bounds: torch.Tensor, q: int, seed: int, gp_maxiter: int | None) -> Any:
    from optarium.bo.turbo_enn import RandomSearch, TurboENN, TurboGP, TurboZero

    if method == "turbo-enn-ucb":
        return TurboENN(bounds, batch_size=q, acquisition="ucb", fit=True, seed=seed)
    if method == "turbo-enn-pareto":
        return TurboENN(bounds, batch_size=q, acquisition="pareto", seed=seed)
    if method == "turbo-zero":
        return TurboZero(bounds, batch_size=q, seed=seed)
    if method == "turbo-gp":
        return TurboGP(bounds, batch_size=q, seed=seed, gp_maxiter=gp_maxiter)
    if method == "random":
        return RandomSearch(bounds, seed=seed)
    raise ValueError(f"method: unknown {method!r}")


def _problem(name: str, dim: int, seed: int) -> Any:
    from optarium.bo.problems import make_problem

    if name == "ackley":
        return make_problem("ackley", dim, bounds=(-5.0, 10.0))
    if name == "sphere":
        g = torch.Generator().manual_seed(derive_seed(seed, "turbo-enn-shift"))
        return make_problem("sphere", dim, shift=torch.rand(dim, generator=g, dtype=torch.float64) * 4 - 2)
    return make_problem(name, dim)


def proposal_time(
    method: str, n: int, dim: int, q: int, *, repeats: int = 1, gp_maxiter: int | None = 50
) -> float:
    """Median seconds of one proposal (fit + candidates + acquisition) of ``q`` points with ``n`` observations
    of Ackley in ``[0,1]^dim`` (mapped to [-5, 10]) held in the strategy's trust-region run."""
    bounds = torch.tensor([[0.0] * dim, [1.0] * dim], dtype=torch.float64)
    g = torch.Generator().manual_seed(derive_seed(0, "turbo-enn-timing", n, dim))
    x = torch.rand(n, dim, generator=g, dtype=torch.float64)
    prob = _problem("ackley", dim, 0)
    y = prob(-5.0 + 15.0 * x)
    if method == "turbo-gp":  # import BoTorch outside the timed region
        import botorch.fit
        import botorch.generation
        import botorch.models  # noqa: F401
    strat = _strategy(method, bounds, q, 0, gp_maxiter)
    strat.num_init = 1
    strat._queue = strat._queue[:0]
    strat.tell(x, y)
    times = []
    for _ in range(repeats):
        strat.ask(q)
        times.append(strat.timings["fit"][-1] + strat.timings["acquisition"][-1])
    return statistics.median(times)


def run(ctx: Any, method: str, seed: int, config: Mapping[str, Any]) -> None:
    """Timing curve (seed 0 of the timed methods), then the quality runs of ``method`` on ``seed``."""
    q = int(config["q"])
    if seed == 0 and method in TIMED:
        ns = config["gp_timing_n"] if method == "turbo-gp" else config["timing_n"]
        reps = 1 if method == "turbo-gp" else int(config["enn_repeats"])
        for n in ns:
            t = proposal_time(
                method, int(n), int(config["timing_dim"]), q, repeats=reps, gp_maxiter=config["gp_maxiter"]
            )
            ctx.log(int(n), n_obs=int(n), proposal_s=t)
    evaluations = int(config["evaluations"])
    problems = list(enumerate(config["problems"]))
    if method == "turbo-gp":
        if not config.get("gp_quality") or seed >= int(config.get("gp_seeds", 0)):
            return
        evaluations = int(config["gp_evaluations"])
        problems = problems[:1]
    for pi, (name, dim) in problems:
        with ctx.untimed():
            prob = _problem(name, int(dim), seed)
        strat = _strategy(
            method, prob.bounds, q, derive_seed(seed, "turbo-enn-quality", pi), config["gp_maxiter"]
        )
        used, t0 = 0, time.perf_counter()
        while used < evaluations:
            x = strat.ask(min(q, evaluations - used))
            with ctx.evaluating():
                y = prob(x)
            strat.tell(x, y)
            used += x.shape[0]
            if used % (10 * q) == 0 or used >= evaluations:
                ctx.log(used, problem=pi, best=strat.best_y)
        timings = getattr(strat, "timings", {"fit": [], "acquisition": []})
        ctx.log(
            used,
            problem=pi,
            final_best=strat.best_y,
            total_proposal_s=sum(timings["fit"]) + sum(timings["acquisition"]),
            run_s=time.perf_counter() - t0,
        )


def _timing(records: Sequence[Mapping[str, Any]], method: str) -> dict[int, float]:
    return {int(r["n_obs"]): float(r["proposal_s"]) for r in select(records, method, has="proposal_s")}


def _finals(
    records: Sequence[Mapping[str, Any]], method: str, problem: int = 0, key: str = "final_best"
) -> dict[int, float]:
    return last_values(records, key, method, problem=problem)


def _ratio_curve(records: Sequence[Mapping[str, Any]]) -> dict[int, float]:
    enn, gp = _timing(records, "turbo-enn-ucb"), _timing(records, "turbo-gp")
    return {n: gp[n] / enn[n] for n in sorted(set(enn) & set(gp)) if enn[n] > 0}


def decide(records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> Verdict:
    """The rule of :data:`RULE`."""
    figures: dict[str, Any] = {}
    ratios = _ratio_curve(records)
    for n, r in ratios.items():
        figures[f"gp_over_enn_N{n}"] = r
    for m in TIMED:
        for n, t in _timing(records, m).items():
            figures[f"{m}_proposal_s_N{n}"] = t
    medians: dict[str, float] = {}
    for m in ("turbo-enn-ucb", "turbo-enn-pareto", "turbo-zero", "random", "turbo-gp"):
        vals = list(_finals(records, m).values())
        if vals:
            medians[m] = statistics.median(vals)
            figures[f"{m}_median_best"] = medians[m]
            figures[f"{m}_n_seeds"] = len(vals)
    if not ratios:
        return Verdict("inconclusive", figures, "no paired timing records of TuRBO-ENN and GP-TuRBO")
    ns = sorted(ratios)
    top = ratios[ns[-1]]
    grows = len(ns) >= 2 and ratios[ns[-1]] > ratios[ns[0]]
    figures["ratio_at_largest_N"] = top
    figures["ratio_grows"] = grows
    if top < 10 or not grows:
        return Verdict(
            "not reproduced",
            figures,
            f"GP/ENN proposal-time ratio {top:.1f}x at N={ns[-1]} "
            f"(needs >= 10x and growth with N; grows={grows})",
        )
    need = ("turbo-enn-ucb", "turbo-enn-pareto", "turbo-zero", "random")
    if not all(m in medians for m in need):
        return Verdict("inconclusive", figures, f"speed passes ({top:.1f}x) but quality records are missing")
    sanity = all(medians[e] < min(medians["turbo-zero"], medians["random"]) for e in need[:2])
    figures["quality_sanity"] = sanity
    if not sanity:
        return Verdict(
            "inconclusive",
            figures,
            f"speed passes ({top:.1f}x at N={ns[-1]}) but an ENN variant does not beat TuRBO-zero and random",
        )
    if config.get("gp_quality"):
        gp = list(_finals(records, "turbo-gp").values())
        enn_at = [
            _best_at(records, "turbo-enn-ucb", s, int(config["gp_evaluations"]))
            for s in range(int(config["seeds"]))
        ]
        enn_at = [v for v in enn_at if v is not None]
        gp_t = list(_finals(records, "turbo-gp", key="total_proposal_s").values())
        enn_t = list(_finals(records, "turbo-enn-ucb", key="total_proposal_s").values())
        if len(gp) < 2 or not enn_at or not gp_t or not enn_t:
            return Verdict("inconclusive", figures, "GP quality records missing at full scale")
        margin = max(gp) - min(gp)
        enn_med, gp_med = statistics.median(enn_at), statistics.median(gp)
        time_ratio = statistics.mean(gp_t) / max(statistics.mean(enn_t), 1e-12)
        figures.update(
            enn_ucb_median_at_gp_budget=enn_med,
            gp_median=gp_med,
            gp_range=margin,
            total_time_ratio=time_ratio,
        )
        if enn_med > gp_med + margin or time_ratio < 10:
            return Verdict(
                "inconclusive",
                figures,
                f"speed passes but non-inferiority fails: ENN {enn_med:.3g} vs GP {gp_med:.3g} "
                f"+- {margin:.3g}, "
                f"time ratio {time_ratio:.1f}x",
            )
    return Verdict(
        "reproduced",
        figures,
        f"GP/ENN proposal time {top:.1f}x at N={ns[-1]} (grows from {ratios[ns[0]]:.1f}x at N={ns[0]}); "
        f"median best "
        f"Ackley: ENN-UCB {medians['turbo-enn-ucb']:.3g}, ENN-Pareto {medians['turbo-enn-pareto']:.3g}, "
        f"TuRBO-zero {medians['turbo-zero']:.3g}, random {medians['random']:.3g}",
    )


def _best_at(records: Sequence[Mapping[str, Any]], method: str, seed: int, evals: int) -> float | None:
    vals = [
        (int(r["step"]), float(r["best"]))
        for r in records
        if r.get("method") == method
        and int(r["seed"]) == seed
        and "best" in r
        and int(r.get("problem", -1)) == 0
        and int(r["step"]) <= evals
    ]
    return max(vals)[1] if vals else None


def plot(records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> dict[str, Any]:
    """Proposal time against N (log-log) and best-so-far curves on the first problem."""
    from matplotlib.figure import Figure

    figs: dict[str, Any] = {}
    fig = Figure(figsize=(6, 4))
    ax = fig.subplots()
    for m in TIMED:
        t = _timing(records, m)
        if t:
            ns = sorted(t)
            ax.plot(ns, [t[n] for n in ns], "o-", label=m)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("observations N")
    ax.set_ylabel("proposal seconds (fit + acquisition)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    figs["proposal_time"] = fig
    fig = Figure(figsize=(6, 4))
    ax = fig.subplots()
    for m in METHODS:
        best = by_step(records, "best", m, problem=0)
        if best:
            steps = sorted(best)
            ax.plot(steps, [statistics.median(best[s]) for s in steps], marker="o", ms=3, label=m)
    ax.set_yscale("symlog", linthresh=1e-2)
    ax.set_xlabel("evaluations")
    ax.set_ylabel("best Ackley value (median over seeds)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    figs["quality"] = fig
    return figs


EXPERIMENT = register(
    Experiment(
        slug="turbo-enn",
        claim=CLAIM,
        rule=RULE,
        methods=METHODS,
        baselines=("turbo-zero", "random", "turbo-gp"),
        configs=CONFIGS,
        run=run,
        decide=decide,
        plot=plot,
        scaled_down=(
            "quick: timing in 10-D up to N=1000 (GP one run per N, L-BFGS capped at 50 iterations), quality "
            "on Ackley-10D, 600 evaluations, 3 seeds, no GP quality runs; full: ENN timing to N=50,000 in "
            "20-D, GP to N=2,000 (capped), GP quality on Ackley-20D only with capped fits"
        ),
    )
)
