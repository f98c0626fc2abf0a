r"""ASAP (asap-co): does selection-only online adaptation over the top-k proposals of a frozen base policy
close the out-of-distribution gap faster than fine-tuning the whole model?

Paper: Fang, Weng, Ban, arXiv:2501.17377 (ICML 2026); see :mod:`optarium.combinatorial.asap` for the method
and its reconstructions.

**Problem** (spec ``asap-co.md``, quick): TSP with n = 10 cities, where Held-Karp gives exact optima (every
gap is exact). One base policy (attention model, 2 encoder layers, width 64) is trained by POMO REINFORCE
on uniform instances for a fixed number of steps (``train_steps``, about 18 CPU-s; the spec's 20 s, fixed as
a step count for determinism); that checkpoint is built once per process and shared by every arm and seed
(the verdict is conditional on it; its cost is paid, timed, by the first unit that needs it). Shift:
Gaussian mixtures, validation 5 clusters, test 3 clusters (sigma = 0.05); 200 test instances, the same for
every arm.

**Methods**: ``asap-selection`` (selection head over the top-3 proposals, only the head adapted),
``full-finetune`` (every parameter adapted), both by POMO REINFORCE on fresh unlabeled test-distribution
batches of 32; lr per arm chosen from {3e-4, 1e-3, 3e-3} by the validation gap after 20 steps (one
selection run per arm, shared by the seeds); then ``steps`` = 30 adaptation steps per seed. Baselines
without adaptation: ``base`` (the base greedy policy; it also logs the satisficing-edge descriptives
err@1 = 1 - top-1 accuracy and err@3 = 1 - top-3 recall against the exact optimal-next-node sets along its
own greedy rollout, uniform vs shifted), ``pomo-aug`` (best of 10 POMO starts x 8 symmetry augmentations),
``nn-2opt`` and ``nearest-neighbour``. Gaps are single-start greedy (start city 0) gaps to the Held-Karp
optimum, averaged over the 200 test instances.

**Rule** (stated up front): Delta = gap(asap-selection) - gap(full-finetune) at the last step, paired over
adaptation seeds: reproduced if Delta < -2 SE, not reproduced if Delta > 2 SE, else inconclusive (the
spec's bootstrap over instances and seeds is replaced by the harness's paired-over-seeds rule; the
per-seed gap already averages the 200 shared instances). Delta at step 10 is reported. Full scale: TSP-20,
200 steps, 3 seeds, lr grid {1e-4, 3e-4, 1e-3, 3e-3} with 50 validation steps, OR-Tools references (1 s
guided local search) instead of Held-Karp; the verdict at step 50 (the same rule).

**Full-only parts, reported beside the rule** (smoke runs tiny versions):

- arm (c) ``asap-maml``: the spec's ASAP with a MAML-primed selection head: a copy of the checkpoint whose
  head is meta-trained by first-order MAML (:func:`~optarium.combinatorial.asap.fomaml_selection`: proposal
  frozen, 1 inner SGD step at 1e-3, outer Adam 1e-4, 4 tasks per meta-step, the spec's suggested settings)
  for ``maml_steps`` = 200 meta-steps over the training distributions uniform, gmm2 and gmm4 (sigma 0.05;
  neither the validation nor the test distribution), then adapted and lr-selected exactly as arm (a);
  TSP only. Reported: gap(a) - gap(c) and gap(b) - gap(c) at the verdict step, paired over seeds.
- the satisficing edge with exact labels at n = ``edge_n`` = 10 (Held-Karp stops at n = 16, so TSP-20's own
  checkpoint cannot be labelled): a second checkpoint trained by the quick recipe at n = 10, 1000 uniform and
  1000 shifted instances, err@1 / err@3 as in quick, and the spec's **matched-degradation control**:
  Gaussian noise s z on the uniform instances' logits (one fixed draw z per state; the rollout follows the
  noisy argmax), s bisected (12 halvings) until err@1 equals the shifted err@1; the edge is supported if
  err@3(shift) - err@3(matched) has a 95 % bootstrap CI below 0 (the two instance sets are resampled
  independently: they are different instances, so the spec's "paired" bootstrap is unpaired here).

**CVRP** (full and smoke, not quick: the TSP quick alone takes 51-61 of the 60 CPU-s): the same classes
with ``problem="cvrp"`` (capacity 30, demands 1..9), a second checkpoint trained by POMO on uniform
CVRP-20 (``cvrp_train_steps`` = 600 steps of batch 32, fixed in advance: the spec's ~5 CPU-min), and the
spec's *scale shift*: validation (lr choice) on CVRP-25, test on CVRP-30 (100 instances, the same for
every arm), gaps to OR-Tools routing
(guided local search, 1 s per instance). Arms and rule as for TSP (single-start greedy gap, the policy
choosing the first customer from the depot; 100 adaptation steps of batch 16, verdict at step 50);
baselines ``base`` and ``pomo-aug`` (no nearest-neighbour / 2-opt for CVRP). Metrics are logged as
``cvrp:<name>``; the full verdict combines the TSP and CVRP outcomes with ``combine_outcomes``
(reproduced only if both are). The CVRP block's cost was estimated from measured single-core step times
before the full ran: training 0.52 CPU-s per step (~5 min), selection / full adaptation steps 0.19 / 0.37 s
(lr choice ~2 min, adaptation ~3 min), OR-Tools references 150 s: ~13 CPU-min per process that builds the
checkpoint; the recorded full (2026-12-03, TSP and CVRP) took 28 CPU-min in one process.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from optarium._core.seeding import derive_seed
from optarium.harness.experiment import Experiment, Verdict, register
from optarium.harness.stats import mean_se, paired_effect, records_final
from optarium.harness.verdicts import by_step, combine_outcomes

__all__ = ["CONFIGS", "EXPERIMENT", "decide", "plot", "run"]

CLAIM = (
    "Adapting only a selection policy over the top-k proposals of a frozen neural TSP solver (ASAP) "
    "reduces the optimality gap on out-of-distribution (clustered) instances faster than fine-tuning the "
    "whole model, because top-k proposals generalise better than the top-1 choice."
)
RULE = (
    "Delta = gap(asap-selection) - gap(full-finetune) at the verdict step, paired over adaptation seeds "
    "(lr per arm chosen on a validation distribution): reproduced if Delta < -2 SE, not reproduced if "
    "Delta > 2 SE, otherwise inconclusive."
)
ARMS = ("asap-selection", "full-finetune")
MAML_ARM = "asap-maml"
BASELINES = ("full-finetune", "base", "pomo-aug", "nn-2opt", "nearest-neighbour")
METHODS = ("asap-selection", MAML_ARM, *BASELINES)

_QUICK: dict[str, Any] = {
    "n": 10,
    "embed_dim": 64,
    "layers": 2,
    "train_steps": 400,
    "train_batch": 64,
    "train_lr": 1e-3,
    "k": 3,
    "val_dist": "gmm5",
    "test_dist": "gmm3",
    "sigma": 0.05,
    "n_test": 200,
    "n_val": 100,
    "lr_grid": [3e-4, 1e-3, 3e-3],
    "val_steps": 20,
    "steps": 30,
    "verdict_step": 30,
    "report_step": 10,
    "eval_every": 10,
    "batch": 32,
    "reference": "held-karp",
}
CONFIGS: dict[str, dict[str, Any]] = {
    "smoke": {
        **_QUICK,
        "embed_dim": 16,
        "layers": 1,
        "n": 7,
        "train_steps": 10,
        "train_batch": 16,
        "n_test": 20,
        "n_val": 10,
        "lr_grid": [1e-3, 3e-3],
        "val_steps": 2,
        "steps": 4,
        "verdict_step": 4,
        "report_step": 2,
        "eval_every": 2,
        "batch": 8,
        "seeds": 2,
        "problems": ["tsp", "cvrp"],
        "cvrp_n": 6,
        "cvrp_capacity": 30,
        "cvrp_train_steps": 6,
        "cvrp_train_batch": 8,
        "cvrp_val_n": 7,
        "cvrp_test_n": 8,
        "cvrp_val_dist": "uniform",
        "cvrp_test_dist": "uniform",
        "cvrp_n_val": 6,
        "cvrp_n_test": 8,
        "cvrp_steps": 4,
        "cvrp_batch": 4,
        "cvrp_ref_time_s": 0.02,
        "matched_control": True,
        "matched_iters": 3,
        "maml_tasks": ["uniform", "gmm2"],
        "maml_steps": 2,
    },
    "quick": {**_QUICK, "seeds": 6, "methods": [m for m in METHODS if m != MAML_ARM]},
    "full": {
        **_QUICK,
        "n": 20,
        "train_steps": 3000,
        "lr_grid": [1e-4, 3e-4, 1e-3, 3e-3],
        "val_steps": 50,
        "steps": 200,
        "verdict_step": 50,
        "report_step": 10,
        "eval_every": 10,
        "reference": "ortools",
        "seeds": 3,
        # the first unit of a process also trains the TSP-20 and CVRP-20 checkpoints (~18 CPU-min); 1500 s
        # timed that unit out on a loaded 2-core machine (2026-12-03)
        "unit_timeout_s": 3600.0,
        "edge_n": 10,
        "edge_train_steps": 400,
        "edge_instances": 1000,
        "matched_control": True,
        "matched_iters": 12,
        "maml_tasks": ["uniform", "gmm2", "gmm4"],
        "maml_steps": 200,
        "problems": ["tsp", "cvrp"],
        "cvrp_n": 20,
        "cvrp_capacity": 30,
        "cvrp_train_steps": 600,
        "cvrp_train_batch": 32,
        "cvrp_val_n": 25,
        "cvrp_test_n": 30,
        "cvrp_val_dist": "uniform",
        "cvrp_test_dist": "uniform",
        "cvrp_n_val": 50,
        "cvrp_n_test": 100,
        "cvrp_steps": 100,
        "cvrp_batch": 16,
        "cvrp_ref_time_s": 1.0,
    },
}


def _key(config: Mapping[str, Any], *names: str) -> tuple:
    """A hashable cache key of ``names`` (lists as tuples; a name the scale lacks as None)."""
    vals = {k: config.get(k) for k in names}
    return tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in vals.items())


_CKPT = ("problem", "n", "embed_dim", "layers", "train_steps", "train_batch", "train_lr", "k", "capacity")
_VAL = ("val_dist", "val_n", "n_val", "sigma", "lr_grid", "val_steps", "batch", "reference")
_MAML = ("maml_tasks", "maml_steps", "sigma", "batch")
#: the spec's suggested first-order MAML settings (n_in = 1, alpha_in = 1e-3, outer Adam 1e-4, 4 tasks)
_MAML_FIXED = {"inner_steps": 1, "inner_lr": 1e-3, "outer_lr": 1e-4, "tasks_per_step": 4}


def _view(config: Mapping[str, Any], problem: str) -> dict[str, Any]:
    """The configuration of one problem under the TSP key names: TSP keeps the config (val/test on n
    cities); CVRP takes the ``cvrp_*`` keys (train on ``cvrp_n`` customers, validate / test on
    ``cvrp_val_n`` / ``cvrp_test_n``: the scale shift), with OR-Tools references."""
    c = {**config, "problem": problem, "capacity": None, "val_n": config["n"], "test_n": config["n"]}
    if problem == "cvrp":
        for k in ("n", "capacity", "train_steps", "train_batch", "val_n", "test_n", "val_dist", "test_dist"):
            c[k] = config[f"cvrp_{k}"]
        for k in ("n_val", "n_test", "steps", "batch"):
            c[k] = config[f"cvrp_{k}"]
        c["reference"] = ("ortools-cvrp", float(config["cvrp_ref_time_s"]))
    return c


def _draw(problem: str, b: int, n: int, dist: str, sigma: float, capacity: Any, g: torch.Generator) -> Any:
    from optarium.combinatorial.routing import cvrp_instances, tsp_instances

    if problem == "tsp":
        return tsp_instances(b, n, dist, sigma=sigma, generator=g)
    return cvrp_instances(b, n, dist, capacity=int(capacity), sigma=sigma, generator=g)


def _tag(problem: str) -> tuple[str, ...]:
    return () if problem == "tsp" else (problem,)


@functools.lru_cache(maxsize=2)
def _checkpoint(key: tuple) -> Any:
    from optarium.combinatorial.asap import ASAPPolicy, AttentionPolicy, SelectionHead, train_pomo

    c = dict(key)
    pr = c["problem"]
    torch.manual_seed(derive_seed(0, "asap-co-init", *_tag(pr)))
    pol = ASAPPolicy(
        AttentionPolicy(c["embed_dim"], c["layers"], problem=pr), SelectionHead(c["embed_dim"]), k=c["k"]
    )
    n, cap = c["n"], c["capacity"]
    train_pomo(
        pol,
        lambda b, g: _draw(pr, b, n, "uniform", 0.05, cap, g),
        steps=c["train_steps"],
        batch=c["train_batch"],
        lr=c["train_lr"],
        generator=torch.Generator().manual_seed(derive_seed(0, "asap-co-train", *_tag(pr))),
    )
    return pol


def _reference(inst: Any, how: Any) -> torch.Tensor:
    from optarium.combinatorial.routing import distance_matrix, held_karp, ortools_cvrp, ortools_tsp

    if how == "held-karp":
        return torch.tensor([held_karp(distance_matrix(x.double()))[0] for x in inst], dtype=inst.dtype)
    if how == "ortools":
        return torch.tensor([ortools_tsp(x.double(), 1.0)[0] for x in inst], dtype=inst.dtype)
    t = float(how[1])
    return torch.tensor(
        [
            ortools_cvrp(
                inst["depot"][i], inst["coords"][i], inst["demands"][i], int(inst["capacity"][i]), t
            )[0]
            for i in range(inst["coords"].shape[0])
        ],
        dtype=inst["coords"].dtype,
    )


@functools.lru_cache(maxsize=8)
def _instances(
    n: int,
    dist: str,
    count: int,
    sigma: float,
    tag: str,
    reference: Any,
    problem: str = "tsp",
    capacity: Any = None,
) -> tuple[Any, Any]:
    g = torch.Generator().manual_seed(
        derive_seed(0, "asap-co", tag, dist, *_tag(problem), *((n,) if problem != "tsp" else ()))
    )
    inst = _draw(problem, count, n, dist, sigma, capacity, g)
    return inst, _reference(inst, reference)


def _sampler(n: int, dist: str, sigma: float, problem: str = "tsp", capacity: Any = None) -> Any:
    return lambda b, g: _draw(problem, b, n, dist, sigma, capacity, g)


@functools.lru_cache(maxsize=1)
def _primed(key: tuple) -> Any:
    """Arm (c): a copy of the TSP checkpoint whose selection head is primed by first-order MAML over the
    training distributions ``maml_tasks`` (proposal frozen; the spec's suggested settings)."""
    import copy

    from optarium.combinatorial.asap import fomaml_selection

    c = dict(key)
    pol = copy.deepcopy(_checkpoint(_key(c, *_CKPT)))
    n, sigma = int(c["n"]), float(c["sigma"])
    fomaml_selection(
        pol,
        [_sampler(n, dist, sigma) for dist in c["maml_tasks"]],
        meta_steps=int(c["maml_steps"]),
        batch=int(c["batch"]),
        generator=torch.Generator().manual_seed(derive_seed(0, "asap-co-maml")),
        **_MAML_FIXED,
    )
    return pol


def _policy_for(arm: str, config: Mapping[str, Any]) -> Any:
    if arm == MAML_ARM:
        return _primed(_key(config, *_CKPT, *_MAML))
    return _checkpoint(_key(config, *_CKPT))


@functools.lru_cache(maxsize=4)
def _chosen_lr(arm: str, key: tuple) -> float:
    from optarium.combinatorial.asap import adapt

    c = dict(key)
    pr, cap = c["problem"], c["capacity"]
    pol = _policy_for(arm, c)
    vc, vo = _instances(c["val_n"], c["val_dist"], c["n_val"], c["sigma"], "val", c["reference"], pr, cap)
    best, best_gap = None, math.inf
    for lr in c["lr_grid"]:
        res = adapt(
            pol,
            _sampler(c["val_n"], c["val_dist"], c["sigma"], pr, cap),
            steps=c["val_steps"],
            lr=float(lr),
            only="all" if arm == "full-finetune" else "selection",
            batch=c["batch"],
            generator=torch.Generator().manual_seed(derive_seed(0, "asap-co-val", arm, *_tag(pr))),
            eval_coords=vc,
            eval_opt=vo,
            eval_every=c["val_steps"],
        )
        if res.value < best_gap:
            best, best_gap = float(lr), res.value
    return float(best)  # type: ignore[arg-type]


def _hk_tables(coords: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Distance matrices (B, n, n) and Held-Karp cost-to-go tables C(S, j) (B, 2^n, n), float64."""
    from optarium.combinatorial.routing import distance_matrix, held_karp

    ds = [distance_matrix(x.double()) for x in coords]
    return torch.stack(ds), torch.stack([torch.as_tensor(held_karp(d)[2], dtype=torch.float64) for d in ds])


def _edge_errors(
    pol: Any,
    coords: torch.Tensor,
    tables: tuple[torch.Tensor, torch.Tensor],
    logit_noise: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-instance err@1 and err@3 (B,) of the base policy along its own greedy rollout from city 0:
    the fraction of decisions whose argmax (top-3 among the feasible moves) misses (holds no node of) the
    exact optimal-next-node set O(S, j) = argmin_k d(j, k) + C(S | {k}, k) (ties within 1e-9).
    ``logit_noise`` perturbs the policy (the rollout follows the perturbed argmax)."""
    from optarium.combinatorial.asap import ASAPPolicy

    base = ASAPPolicy(pol.proposal, None)
    with torch.no_grad():
        out = base.rollout(coords, starts=0, record=True, logit_noise=logit_noise)
    logits, vis, cur = out["proposal_logits"][:, 0], out["visited"][:, 0], out["current"][:, 0]
    d, C = tables
    b, _, n = logits.shape
    k = torch.arange(n)
    masks = (vis.long() * (1 << k)).sum(-1)  # (B, S) visited bitmask before each decision
    rows = torch.arange(b)[:, None, None]
    cost = d[rows, cur[..., None], k] + C[rows, masks[..., None] | (1 << k), k]
    cost = cost.masked_fill(vis, math.inf)
    opt = cost <= cost.min(-1, keepdim=True).values + 1e-9  # (B, S, n)
    top = logits.topk(min(3, n - 1), -1).indices
    feasible_rank = torch.arange(top.shape[-1]) < (~vis).sum(-1, keepdim=True)
    hit1 = opt.gather(-1, top[..., :1]).squeeze(-1)
    hit3 = (opt.gather(-1, top) & feasible_rank).any(-1)
    return 1.0 - hit1.double().mean(-1), 1.0 - hit3.double().mean(-1)


def _matched_degradation(
    pol: Any,
    coords: torch.Tensor,
    tables: tuple[torch.Tensor, torch.Tensor],
    target_err1: float,
    *,
    iters: int,
    generator: torch.Generator,
) -> tuple[float, torch.Tensor, torch.Tensor]:
    """The spec's matched-degradation control: Gaussian noise s z on the uniform instances' logits (one
    fixed draw z per state, so err@1 is a deterministic function of s), s found by bisection so that err@1
    equals ``target_err1`` (the shifted err@1). Returns s and the per-instance err@1 and err@3 at s."""
    b, n = coords.shape[:2]
    z = torch.randn(b, 1, n - 1, n, generator=generator, dtype=torch.float64).to(coords.dtype)

    def err1(scale: float) -> float:
        return float(_edge_errors(pol, coords, tables, scale * z)[0].mean())

    lo, hi = 0.0, 1.0
    while err1(hi) < target_err1 and hi < 1e4:
        lo, hi = hi, 2.0 * hi
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if err1(mid) < target_err1 else (lo, mid)
    scale = 0.5 * (lo + hi)
    e1, e3 = _edge_errors(pol, coords, tables, scale * z)
    return scale, e1, e3


def _bootstrap_diff_ci(
    a: torch.Tensor, b: torch.Tensor, *, reps: int = 2000, generator: torch.Generator
) -> tuple[float, float, float]:
    """mean(a) - mean(b) and its 95 % percentile-bootstrap CI, resampling the two instance sets
    independently (they are different instances: uniform vs shifted)."""
    ia = torch.randint(a.numel(), (reps, a.numel()), generator=generator)
    ib = torch.randint(b.numel(), (reps, b.numel()), generator=generator)
    diffs = a[ia].mean(-1) - b[ib].mean(-1)
    q = torch.quantile(diffs, torch.tensor([0.025, 0.975], dtype=diffs.dtype))
    return float(a.mean() - b.mean()), float(q[0]), float(q[1])


def _gaps(lengths: torch.Tensor, opt: torch.Tensor) -> float:
    return float((lengths / opt - 1.0).mean())


def _augment(inst: Any, flip: bool, fx: bool, fy: bool) -> Any:
    """One of the 8 symmetries of the unit square, applied to every point (TSP coords or CVRP dict)."""

    def f(x: torch.Tensor) -> torch.Tensor:
        c = x.flip(-1) if flip else x.clone()
        if fx:
            c[..., 0] = 1 - c[..., 0]
        if fy:
            c[..., 1] = 1 - c[..., 1]
        return c

    if isinstance(inst, dict):
        return {**inst, "coords": f(inst["coords"]), "depot": f(inst["depot"])}
    return f(inst)


_EDGE = (
    "edge_n", "edge_train_steps", "edge_instances", "test_dist", "n_test", "sigma", "reference",
    "matched_control", "matched_iters",
)  # fmt: skip


@functools.lru_cache(maxsize=2)
def _edge_metrics(key: tuple) -> dict[str, float]:
    """The base policy's satisficing-edge descriptives (and the matched-degradation control when
    configured): they do not depend on the seed, so every base unit of a process shares one computation.
    Exact labels need Held-Karp (n <= 16): full's TSP-20 runs them on an ``edge_n`` checkpoint trained by
    the quick recipe; quick uses its main checkpoint (and adds the uniform gap)."""
    c = dict(key)
    n_main, sigma = int(c["n"]), float(c["sigma"])
    en = int(c["edge_n"]) if c.get("edge_n") is not None else n_main
    steps_e = int(c["edge_train_steps"]) if c.get("edge_train_steps") is not None else int(c["train_steps"])
    epol = _checkpoint(_key({**c, "n": en, "train_steps": steps_e}, *_CKPT))
    count = int(c["edge_instances"]) if c.get("edge_instances") is not None else int(c["n_test"])
    uc, uo = _instances(en, "uniform", count, sigma, "test", "held-karp")
    sc, _ = _instances(en, c["test_dist"], count, sigma, "test", "held-karp")
    utab, stab = _hk_tables(uc), _hk_tables(sc)
    e1u_b, e3u_b = _edge_errors(epol, uc, utab)
    e1s_b, e3s_b = _edge_errors(epol, sc, stab)
    out = {
        "err1_uniform": float(e1u_b.mean()),
        "err3_uniform": float(e3u_b.mean()),
        "err1_shift": float(e1s_b.mean()),
        "err3_shift": float(e3s_b.mean()),
    }
    if en == n_main and c["reference"] == "held-karp":
        from optarium.combinatorial.asap import ASAPPolicy

        with torch.no_grad():
            lengths = ASAPPolicy(epol.proposal, None).rollout(uc, starts=0)["length"][:, 0]
        out["gap_uniform"] = _gaps(lengths, uo)
    if c.get("matched_control"):
        g = torch.Generator().manual_seed(derive_seed(0, "asap-co-matched"))
        iters = int(c["matched_iters"]) if c.get("matched_iters") is not None else 12
        scale, e1m_b, e3m_b = _matched_degradation(
            epol, uc, utab, out["err1_shift"], iters=iters, generator=g
        )
        d, lo_ci, hi_ci = _bootstrap_diff_ci(e3s_b, e3m_b, generator=g)
        out.update(
            matched_scale=scale,
            err1_matched=float(e1m_b.mean()),
            err3_matched=float(e3m_b.mean()),
            err3_shift_minus_matched=d,
            err3_shift_minus_matched_lo=lo_ci,
            err3_shift_minus_matched_hi=hi_ci,
        )
    return out


def run(ctx: Any, method: str, seed: int, config: Mapping[str, Any]) -> None:
    """One (method, seed), for each problem of the scale (TSP; full and smoke add CVRP, whose metrics are
    logged as ``cvrp:<name>``). The checkpoints, instance sets and lr choices are shared (cached per
    process)."""
    for problem in config.get("problems", ["tsp"]):
        _run_problem(ctx, method, seed, _view(config, problem))


def _run_problem(ctx: Any, method: str, seed: int, config: Mapping[str, Any]) -> None:
    from optarium.combinatorial.asap import ASAPPolicy, adapt
    from optarium.combinatorial.routing import nearest_neighbour, tour_length, two_opt

    pr, cap = config["problem"], config["capacity"]
    pre = "" if pr == "tsp" else f"{pr}:"
    n_test, sigma = int(config["test_n"]), float(config["sigma"])
    with ctx.untimed():
        tc, to = _instances(
            n_test, config["test_dist"], int(config["n_test"]), sigma, "test", config["reference"], pr, cap
        )
    pol = _checkpoint(_key(config, *_CKPT))  # timed: the first unit pays for training
    # single-start greedy: TSP from city 0; CVRP from the depot, the policy choosing the first customer
    start = 0

    def log(step: int, **metrics: Any) -> None:
        ctx.log(step, **{pre + k: v for k, v in metrics.items()})

    if method == MAML_ARM and pr != "tsp":
        return  # arm (c) is TSP-only (the spec's CVRP block has arms (a) and (b))
    if method in (*ARMS, MAML_ARM):
        maml = _MAML if method == MAML_ARM else ()
        lr = _chosen_lr(method, _key(config, *_CKPT, *_VAL, *maml))
        res = adapt(
            _policy_for(method, config),
            _sampler(n_test, config["test_dist"], sigma, pr, cap),
            steps=int(config["steps"]),
            lr=lr,
            only="all" if method == "full-finetune" else "selection",
            batch=int(config["batch"]),
            generator=torch.Generator().manual_seed(derive_seed(seed, "asap-co-adapt", *_tag(pr))),
            eval_coords=tc,
            eval_opt=to,
            eval_every=int(config["eval_every"]),
        )
        with ctx.evaluating():
            for step, gap in zip(res.history.steps, res.history.metrics["gap"], strict=True):
                log(step, gap=gap)
            same = float(res.extras["hash_before"]["proposal"] == res.extras["hash_after"]["proposal"])
            with torch.no_grad():
                pomo = res.extras["policy"].rollout(tc)["length"].min(-1).values
            log(res.n_iter, gap=res.value, lr=lr, proposal_unchanged=same, gap_pomo=_gaps(pomo, to))
        return
    with ctx.evaluating():
        if method == "base":
            base = ASAPPolicy(pol.proposal, None)
            with torch.no_grad():
                out = base.rollout(tc)["length"]
                single = out[:, 0] if pr == "tsp" else base.rollout(tc, starts=start)["length"][:, 0]
            if pr != "tsp":
                log(int(config["steps"]), gap=_gaps(single, to), gap_pomo=_gaps(out.min(-1).values, to))
                return
            edge = _edge_metrics(_key(config, *_CKPT, *_EDGE))  # deterministic: cached per process
            rates = ("err1_uniform", "err3_uniform", "err1_shift", "err3_shift")
            e1u, e3u, e1s, e3s = (edge[k] for k in rates)
            extra = {k: v for k, v in edge.items() if k not in rates}
            lo = lambda e: math.log(max(e, 1e-6) / max(1 - e, 1e-6))  # noqa: E731
            log(
                int(config["steps"]),
                gap=_gaps(single, to),
                gap_pomo=_gaps(out.min(-1).values, to),
                err1_uniform=e1u,
                err3_uniform=e3u,
                err1_shift=e1s,
                err3_shift=e3s,
                err1_ratio=e1s / max(e1u, 1e-9),
                err3_ratio=e3s / max(e3u, 1e-9),
                err1_dlogodds=lo(e1s) - lo(e1u),
                err3_dlogodds=lo(e3s) - lo(e3u),
                **extra,
            )
        elif method == "pomo-aug":
            base = ASAPPolicy(pol.proposal, None)
            best = None
            for flip in (False, True):
                for fx in (False, True):
                    for fy in (False, True):
                        with torch.no_grad():
                            o = base.rollout(_augment(tc, flip, fx, fy))
                        # TSP lengths on the original points (bit-stable); CVRP: the isometric copy's
                        length = (tour_length(tc, o["tours"]) if pr == "tsp" else o["length"]).min(-1).values
                        best = length if best is None else torch.minimum(best, length)
            log(int(config["steps"]), gap=_gaps(best, to))
        elif method in ("nn-2opt", "nearest-neighbour"):
            if pr != "tsp":
                return  # TSP heuristics; no CVRP counterpart here
            t = nearest_neighbour(tc)
            if method == "nn-2opt":
                t = two_opt(tc, t)
            log(int(config["steps"]), gap=_gaps(tour_length(tc, t), to))
        else:  # pragma: no cover - the harness only passes registered methods
            raise ValueError(f"method: unknown {method!r}")


def _at(
    records: Sequence[Mapping[str, Any]], method: str, step: int, metric: str = "gap"
) -> dict[int, float]:
    return {
        int(r["seed"]): float(r[metric])
        for r in records
        if r.get("method") == method
        and int(r["step"]) == step
        and r.get(metric) is not None
        and r.get("status", "done") == "done"
    }


def _decide_cvrp(
    records: Sequence[Mapping[str, Any]], config: Mapping[str, Any], figures: dict[str, Any]
) -> tuple[str, list[str]]:
    """The same rule on the CVRP gaps (metrics ``cvrp:*``); figures prefixed ``cvrp:``."""
    for m in METHODS:
        for extra in ("gap", "lr", "gap_pomo", "proposal_unchanged"):
            v = records_final(records, f"cvrp:{extra}", m)
            if v:
                figures[f"cvrp:{m}:{extra}"] = mean_se(list(v.values()))[0]
    bits = []
    rep = int(config["report_step"])
    ra = _at(records, "asap-selection", rep, "cvrp:gap")
    rb = _at(records, "full-finetune", rep, "cvrp:gap")
    if ra and rb:
        e = paired_effect(ra, rb, better="lower")
        figures.update(e.figures(f"cvrp:step{rep}_"))
        bits.append(f"CVRP step {rep}: {e.mean:+.4f} ± {e.se:.4f}")
    vs = int(config["verdict_step"])
    eff = paired_effect(
        _at(records, "asap-selection", vs, "cvrp:gap"),
        _at(records, "full-finetune", vs, "cvrp:gap"),
        better="lower",
    )
    figures.update(eff.figures("cvrp:verdict_"))
    outcome = eff.outcome(2.0)
    bits.insert(
        0,
        f"CVRP step {vs}: gap(full-finetune) - gap(asap-selection) {eff.mean:+.4f} ± {eff.se:.4f} "
        f"(n={eff.n}) -> {outcome}",
    )
    return outcome, bits


def decide(records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> Verdict:
    """The stated rule (see the module docstring)."""
    figures: dict[str, Any] = {}
    for m in METHODS:
        g = records_final(records, "gap", m)
        if g:
            figures[f"{m}:gap"] = mean_se(list(g.values()))[0]
        for extra in ("lr", "gap_pomo", "proposal_unchanged"):
            v = records_final(records, extra, m)
            if v:
                figures[f"{m}:{extra}"] = mean_se(list(v.values()))[0]
    for name in (
        "err1_uniform",
        "err3_uniform",
        "err1_shift",
        "err3_shift",
        "err1_dlogodds",
        "err3_dlogodds",
        "matched_scale",
        "err1_matched",
        "err3_matched",
        "err3_shift_minus_matched",
        "err3_shift_minus_matched_lo",
        "err3_shift_minus_matched_hi",
    ):
        v = records_final(records, name, "base")
        if v:
            figures[f"base:{name}"] = mean_se(list(v.values()))[0]
    bits = []
    rep = _at(records, "asap-selection", int(config["report_step"]))
    rep_b = _at(records, "full-finetune", int(config["report_step"]))
    if rep and rep_b:
        e = paired_effect(rep, rep_b, better="lower")
        figures.update(e.figures(f"step{config['report_step']}_"))
        bits.append(f"step {config['report_step']}: gap(full) - gap(ASAP) {e.mean:+.4f} ± {e.se:.4f}")
    a = _at(records, "asap-selection", int(config["verdict_step"]))
    b = _at(records, "full-finetune", int(config["verdict_step"]))
    eff = paired_effect(a, b, better="lower")
    figures.update(eff.figures("verdict_"))
    outcome = eff.outcome(2.0)
    bits.insert(
        0,
        f"step {config['verdict_step']}: gap(full-finetune) - gap(asap-selection) {eff.mean:+.4f} ± "
        f"{eff.se:.4f} (n={eff.n}) -> {outcome}",
    )
    maml = _at(records, MAML_ARM, int(config["verdict_step"]))
    if maml:  # arm (c), reported beside the rule
        for other in ARMS:
            e = paired_effect(maml, _at(records, other, int(config["verdict_step"])), better="lower")
            figures.update(e.figures(f"maml_vs_{other}_"))
            bits.append(f"arm (c) gap({other}) - gap({MAML_ARM}) {e.mean:+.4f} ± {e.se:.4f} (reported)")
    if "base:err1_uniform" in figures:
        bits.append(
            "err@1 {:.3f} -> {:.3f}, err@3 {:.3f} -> {:.3f} (uniform -> shift)".format(
                figures["base:err1_uniform"],
                figures["base:err1_shift"],
                figures["base:err3_uniform"],
                figures["base:err3_shift"],
            )
        )
    if "base:err3_matched" in figures:
        lo, hi = figures["base:err3_shift_minus_matched_lo"], figures["base:err3_shift_minus_matched_hi"]
        edge = "supported" if hi < 0 else ("contradicted" if lo > 0 else "undecided")
        bits.append(
            f"matched-degradation control (reported): err@1 {figures['base:err1_matched']:.3f} at noise "
            f"{figures['base:matched_scale']:.3g}, err@3 shift - matched "
            f"{figures['base:err3_shift_minus_matched']:+.3f} [{lo:+.3f}, {hi:+.3f}] -> edge {edge}"
        )
    if "cvrp" in config.get("problems", ["tsp"]):
        c_out, c_bits = _decide_cvrp(records, config, figures)
        figures["tsp:outcome"], figures["cvrp:outcome"] = outcome, c_out
        outcome = combine_outcomes([outcome, c_out])
        bits = ["TSP " + bits[0], *bits[1:], *c_bits, f"combined -> {outcome}"]
    return Verdict(outcome, figures, "; ".join(bits))


def _curves(ax1: Any, records: Sequence[Mapping[str, Any]], gap: str) -> None:
    """Gap vs adaptation steps of both arms (mean ± SE over seeds), the fixed baselines as lines."""
    from optarium.harness.figures import draw_band

    for m, color in zip((*ARMS, MAML_ARM), ("C0", "C1", "C6"), strict=True):
        g = by_step(records, gap, m)
        if not g:
            continue
        draw_band(ax1, g, band="se", color=color, label=m, alpha=0.2, marker=".")
    for j, m in enumerate(BASELINES[1:]):
        g = records_final(records, gap, m)
        if g:
            ax1.axhline(sum(g.values()) / len(g), color=f"C{j + 2}", ls="--", label=m)
    ax1.set_xlabel("adaptation steps (test distribution)")
    ax1.set_ylabel("greedy optimality gap (mean ± SE over seeds)")
    lows = [ln.get_ydata() for ln in ax1.get_lines()]
    if lows and min(float(min(y)) for y in lows) > 0:
        ax1.set_yscale("log")
    ax1.legend(fontsize=7)
    ax1.grid(alpha=0.3)


def plot(records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> dict[str, Any]:
    """Gap vs adaptation steps for both arms (mean ± SE over seeds) with the fixed baselines as lines; the
    satisficing-edge descriptives of the base policy."""
    from optarium.harness.figures import panel_grid

    fig, (ax1, ax2) = panel_grid(2)
    _curves(ax1, records, "gap")
    names = ["err1_uniform", "err1_shift", "err3_uniform", "err3_shift"]
    vals = []
    for nm in names:
        v = records_final(records, nm, "base")
        vals.append(sum(v.values()) / len(v) if v else float("nan"))
    ax2.bar(range(4), vals, color=["C0", "C1", "C0", "C1"])
    ax2.set_xticks(range(4), ["err@1\nuniform", "err@1\nshift", "err@3\nuniform", "err@3\nshift"])
    ax2.set_ylabel("error rate along the greedy rollout")
    ax2.set_title("satisficing edge (base policy, exact labels)")
    ax2.grid(alpha=0.3, axis="y")
    figs = {"adaptation": fig}
    if "cvrp" in config.get("problems", ["tsp"]):
        fig2, (ax,) = panel_grid(1)
        _curves(ax, records, "cvrp:gap")
        ax.set_title(f"CVRP: train n={config['cvrp_n']}, test n={config['cvrp_test_n']} (OR-Tools reference)")
        ax.set_ylabel("greedy gap to OR-Tools (mean ± SE over seeds)")
        figs["adaptation_cvrp"] = fig2
    return figs


EXPERIMENT = register(
    Experiment(
        slug="asap-co",
        claim=CLAIM,
        rule=RULE,
        methods=METHODS,
        baselines=BASELINES,
        configs=CONFIGS,
        run=run,
        decide=decide,
        plot=plot,
        scaled_down=(
            "TSP-10 (quick) / TSP-20 (full) with a width-64 2-layer attention policy trained on CPU for "
            "400 / 3000 POMO steps; CVRP-20 -> CVRP-30 scale shift only in the full scale (600 POMO steps); "
            "no 3D bin packing; MAML-primed arm not in the experiment"
        ),
    )
)
