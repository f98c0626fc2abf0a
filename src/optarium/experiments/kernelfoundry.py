r"""KernelFoundry: does quality-diversity kernel search find fitter kernels than greedy and random search?

Paper: "KernelFoundry: Hardware-Aware Evolutionary GPU Kernel Optimization", ICML 2026 (arXiv:2603.12440;
the CPU analogue of :mod:`optarium.kernels.kernelfoundry`, with a rule-based mutator in place of the LLM).
Claim: MAP-Elites over kernel-specific behaviour dimensions, meta-prompt evolution and template tuning
together find faster correct kernels than prior LLM-driven loops.

**Problem** (spec ``kernelfoundry.md``, quick). Tasks matmul 256^3 and row softmax 2048 x 1024 (float32);
budget 60 evaluations per run; the same seed kernel (naive C) for every method; 10 paired seeds. Search
comparisons use the deterministic :class:`~optarium.kernels.kernelfoundry.CostModelEvaluator` (our
roofline-style landscape, constants fixed before any search was run). Plus one real-timing smoke run
(seed 0 of the kernelfoundry unit): gcc -O3 -march=native -fopenmp, ctypes, correctness on odd and
power-of-two shapes, median of 7 timings, ``OMP_NUM_THREADS=1``, 8 evaluations; logged, not decided on.

**Methods**: ``kernelfoundry`` (full: 4 islands, migration every 10 generations at rate 0.1, ratios
0.7/0.2/0.1, 2 inspirations, 4 branches, meta-prompts, template tuning with 20 % of the budget),
``greedy`` (single-lineage hill climbing, same mutator) and ``random`` (uniform random IRs); the same bug
injection rate 0.05 for all.

**Rule.** Per task and baseline b: the paired difference of final best fitness kernelfoundry - b over
seeds; "beats" if mean > 2 SE, "loses" if mean < -2 SE, else inconclusive. Reproduced if it beats both
baselines on both tasks; not reproduced if it loses to either on either task; otherwise inconclusive.

Scaled down: 2 of the 4 tasks (no layer norm, no convolution), 60 evaluations, cost model instead of
real timing for the search comparison (real timing only in the smoke run); the full scale runs 250
evaluations on the same two tasks (the ablations and the real-timing confirmation are not implemented).
"""

from __future__ import annotations

import math
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

from optarium.harness.experiment import Experiment, Verdict, register
from optarium.harness.verdicts import combine_outcomes, last_values, paired_verdict

__all__ = ["CONFIGS", "EXPERIMENT", "decide", "run"]

CLAIM = (
    "MAP-Elites quality-diversity search with meta-prompt evolution and template tuning finds fitter "
    "(faster correct) kernels than greedy evolution and random search at the same evaluation budget."
)
RULE = (
    "Cost-model landscape, tasks matmul 256^3 and softmax 2048x1024, budget B evaluations, paired seeds. "
    "Per task and baseline b in (greedy, random): paired gap of final best fitness kernelfoundry - b; "
    "beats if > 2 SE, loses if < -2 SE. Reproduced if it beats both on both tasks; not reproduced if it "
    "loses to either on either task; otherwise inconclusive."
)
METHODS = ("kernelfoundry", "greedy", "random")
BASELINES = ("greedy", "random")

_BASE: dict[str, Any] = {
    "tasks": ["matmul", "softmax"],
    "budget": 60,
    "methods": list(METHODS),
    "smoke_evals": 8,
}
CONFIGS: dict[str, dict[str, Any]] = {
    "smoke": {**_BASE, "budget": 12, "seeds": 2, "smoke_evals": 0},
    "quick": {**_BASE, "seeds": 10},
    "full": {**_BASE, "budget": 250, "seeds": 10},
}


def _task(name: str):
    from optarium.kernels import kernelfoundry as kf

    return kf.tasks.matmul(256) if name == "matmul" else kf.tasks.softmax(2048, 1024)


def run(ctx: Any, method: str, seed: int, config: Mapping[str, Any]) -> None:
    """One (method, seed) unit: every task on the cost model (and the real-timing smoke run)."""
    from optarium._core.seeding import derive_seed
    from optarium.kernels import kernelfoundry as kf

    budget = int(config["budget"])
    for name in config["tasks"]:
        task = _task(name)
        s = derive_seed(seed, "kernelfoundry", name)
        if method == "kernelfoundry":
            res = kf.KernelFoundry(task, seed=s).run(budget)
        elif method == "greedy":
            res = kf.greedy_hill_climb(task, budget=budget, seed=s)
        else:
            res = kf.random_search(task, budget=budget, seed=s)
        with ctx.evaluating():
            h = res.history
            ctx.log(
                budget,
                **{
                    f"{name}:best_fitness": res.value,
                    f"{name}:speedup": res.extras["speedup"],
                    f"{name}:cells": float(len(res.extras["archive"])),
                    f"{name}:qd_score": res.extras["archive"].qd_score(),
                    f"{name}:frac_correct": float(sum(p == 5 for p in h.metrics["perf_score"]) / len(h)),
                },
            )
    if method == "kernelfoundry" and seed == 0 and int(config["smoke_evals"]) > 0 and shutil.which("gcc"):
        work = tempfile.mkdtemp(prefix="kf-smoke-")
        try:
            task = _task("matmul")
            ev = kf.CEvaluator(task, threads=1, workdir=work)
            res = kf.KernelFoundry(task, evaluator=ev, seed=0, template_tuning=False).run(
                int(config["smoke_evals"])
            )
            ps = list(res.history.metrics["perf_score"])
            with ctx.evaluating():
                ctx.log(
                    0,
                    **{
                        "smoke:best_speedup_real": float(res.extras["speedup"]),
                        "smoke:n_evals": float(len(ps)),
                        "smoke:n_correct": float(sum(p == 5 for p in ps)),
                        "smoke:seed_ms": float(ev.t_ref or math.nan),
                    },
                )
        finally:
            shutil.rmtree(work, ignore_errors=True)


def decide(records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> Verdict:
    """The rule of :data:`RULE`."""
    figures: dict[str, Any] = {}
    outcomes, bits = [], []
    for name in config["tasks"]:
        kfv = last_values(records, f"{name}:best_fitness", "kernelfoundry")
        for m in METHODS:
            v = list(last_values(records, f"{name}:best_fitness", m).values())
            figures[f"{name}:{m}:best_fitness_mean"] = sum(v) / len(v) if v else math.nan
        for b in BASELINES:
            pre = f"{name}:vs_{b}:"
            v = paired_verdict(
                kfv, last_values(records, f"{name}:best_fitness", b), better="higher", prefix=pre
            )
            figures.update(v.figures)
            figures[f"{pre}outcome"] = v.outcome
            outcomes.append(v.outcome)
            bits.append(
                f"{name} kf-{b}: {v.figures[f'{pre}mean_gap']:+.3f} ± {v.figures[f'{pre}se']:.3f} "
                f"(SE) -> {v.outcome}"
            )
    for r in records:
        for k in ("smoke:best_speedup_real", "smoke:n_evals", "smoke:n_correct", "smoke:seed_ms"):
            if k in r:
                figures[k] = float(r[k])
    return Verdict(combine_outcomes(outcomes), figures, "; ".join(bits))


EXPERIMENT = register(
    Experiment(
        slug="kernelfoundry",
        claim=CLAIM,
        rule=RULE,
        methods=METHODS,
        baselines=BASELINES,
        configs=CONFIGS,
        run=run,
        decide=decide,
        plot=None,
        scaled_down=(
            "CPU C kernels instead of SYCL/CUDA, rule-based mutator instead of an LLM, 2 tasks "
            "(matmul, softmax), budget 60 (quick) / 250 (full), cost-model landscape for the verdict, "
            "real timing only in a smoke run"
        ),
    )
)
