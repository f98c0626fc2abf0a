"""Lion-VR part (c), distributed: error against the number of clients, full precision against 1-bit.

This module holds the distributed part of the ``lion-vr`` experiment (:mod:`optarium.experiments.lion_vr`
registers the experiment and composes these pieces): :func:`run_dist` (one unit), :func:`decide_dist`
(part (c)'s rule) and :func:`plot_dist` (its figure).

**Part (c), distributed** (the spec's, on :mod:`optarium.distributed`). The same logistic problem in float32,
split into n iid shards (a seeded permutation), n in {1, 2, 4, 8, 16}; each client samples batches of 8 from
its shard; :class:`~optarium.distributed.lion.DistributedLion` with full precision (``dist-lion``,
``dist-lion-vr``: gradient all-reduce, then Lion / Lion-VR on the shared x) and with bidirectional 1-bit
unbiased sign compression and the adaptive radius (``dist-lion-1bit``, ``dist-lion-vr-1bit``: per-client
momentum, S_R uplink, majority-vote downlink), against ``dist-adamw`` (gradient all-reduce + AdamW). Each
method tunes its lr over 4 values (betas fixed at the defaults; one run with its own optimizer per value) on
seed 0's stream with 4 clients, and keeps it for every n; held-out seeds 1.. then run every n for T steps
(quick 200, full 2000; 3 seeds). Score: the mean of the last 3 recorded full-batch ||grad f||_1. Bits per
client per step are read from the communicator's counters (what was handed to torch.distributed). With
``config["world_size"] > 1`` (CLI ``--world-size``) each unit runs its clients across that many spawned gloo
processes (:func:`~optarium.distributed.launch`); the iterates do not depend on the world size.

Rule of part (c): reproduced if the OLS slope of log score on log n (all (n, seed) points) has a 95 %
t-interval below 0 for both full-precision variants, the 1-bit variants' scores are within 2x of their
full-precision twins at every n >= 4 (geometric mean over seeds), and the measured uplink saving of
``dist-lion-1bit`` is at least 0.99 x 32d/(d+32) (this condition checks the bit accounting of the counters,
which cannot fail on this problem; it is not evidence for the claim); not reproduced if a slope's interval
lies above 0, a ratio exceeds 2 or the saving falls short; else inconclusive.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from optarium._core.seeding import derive_seed
from optarium.harness.verdicts import select, slope_fit, values

__all__ = [
    "DIST_METHODS",
    "decide_dist",
    "dist_bits",
    "dist_grid",
    "dist_scores",
    "dist_slope",
    "plot_dist",
    "record_steps",
    "run_dist",
]


def record_steps(steps: int, every: int) -> list[int]:
    """The optimizer steps at which a run records: every ``every`` steps, and the last step."""
    out = list(range(every, steps + 1, every))
    if not out or out[-1] != steps:
        out.append(steps)
    return out


DIST_METHODS = ("dist-lion", "dist-lion-vr", "dist-lion-1bit", "dist-lion-vr-1bit", "dist-adamw")

_DIST_KIND: dict[str, dict[str, Any]] = {
    "dist-lion": {"compression": "none", "variance_reduction": False},
    "dist-lion-vr": {"compression": "none", "variance_reduction": True},
    "dist-lion-1bit": {"compression": "unbiased_sign", "variance_reduction": False},
    "dist-lion-vr-1bit": {"compression": "unbiased_sign", "variance_reduction": True},
}
#: (compressed, full-precision) pairs that the 2x rule compares.
_DIST_PAIRS = (("dist-lion-1bit", "dist-lion"), ("dist-lion-vr-1bit", "dist-lion-vr"))
_DIST_FP = ("dist-lion", "dist-lion-vr")


def dist_grid(method: str) -> list[dict[str, float]]:
    """The 4 configurations tuned for a part-(c) method (the same budget for every method)."""
    if method == "dist-adamw":
        return [{"lr": lr, "beta1": 0.9, "beta2": 0.999} for lr in (1e-3, 3e-3, 1e-2, 3e-2)]
    if method in _DIST_KIND:
        return [{"lr": lr, "beta1": 0.9, "beta2": 0.99} for lr in (3e-4, 1e-3, 3e-3, 1e-2)]
    raise ValueError(f"method: unknown distributed method {method!r}")


@functools.lru_cache(maxsize=4)
def _dist_problem(n: int, dim: int, alpha: float, flip: float, data_seed: int) -> Any:
    """The logistic problem in float32 (gradients cross the wire as 32-bit floats)."""
    from optarium.problems.nonconvex_logistic import make_nonconvex_logistic

    return make_nonconvex_logistic(n=n, dim=dim, alpha=alpha, flip=flip, seed=data_seed, dtype=torch.float32)


def _dist_train(
    comm: Any,
    method: str,
    hps: Sequence[Mapping[str, float]],
    problem: tuple[Any, ...],
    stream_seed: int,
    steps: int,
    batch_size: int,
    every: int,
) -> dict[str, Any]:
    """Run ``len(hps)`` copies of ``method`` (one param group each) with ``comm.n_clients`` clients (SPMD).

    Client i samples ``batch_size`` points per step from its iid shard (a seeded split of the data); the
    draws of all clients come from one generator on every rank, so the run does not depend on the world
    size. Returns the full-batch ||grad f||_1 / ||grad f||_2 / loss of every copy at the recorded steps and
    the communication per client per step.
    """
    from optarium.distributed.lion import DistributedLion

    prob = _dist_problem(*problem)
    n = comm.n_clients
    k = len(hps)
    perm = torch.randperm(prob.n, generator=torch.Generator().manual_seed(derive_seed(problem[-1], "shards")))
    shards = torch.tensor_split(perm, n)
    sizes = torch.tensor([len(s) for s in shards], dtype=torch.float32)
    owner = torch.cat(shards)  # position -> sample; shard i occupies [start_i, start_i + size_i)
    starts = torch.cumsum(torch.cat([torch.zeros(1), sizes[:-1]]), 0).long()
    stream = torch.Generator().manual_seed(derive_seed(stream_seed, "lion-vr-dist", n))
    params = [torch.zeros(prob.dim, dtype=prob.a.dtype) for _ in range(k)]
    batch: list[torch.Tensor] = []

    def grad_fn(xs: list[torch.Tensor]) -> list[torch.Tensor]:
        x = torch.stack(xs)  # (k, d)
        nl = comm.n_local
        rows = x.unsqueeze(0).expand(nl, k, prob.dim).reshape(nl * k, prob.dim)
        idx = batch[0].unsqueeze(1).expand(nl, k, batch_size).reshape(nl * k, batch_size)
        g = prob.grad(rows, idx).reshape(nl, k, prob.dim)
        return list(g.unbind(1))

    if method == "dist-adamw":
        for p in params:
            p.requires_grad_(True)
        opt: Any = torch.optim.AdamW(
            [
                {"params": [p], "lr": h["lr"], "betas": (h["beta1"], h["beta2"])}
                for p, h in zip(params, hps, strict=True)
            ],
            lr=hps[0]["lr"],
            weight_decay=0.0,
        )
    else:
        opt = DistributedLion(
            [
                {"params": [p], "lr": h["lr"], "betas": (h["beta1"], h["beta2"])}
                for p, h in zip(params, hps, strict=True)
            ],
            comm,
            lr=hps[0]["lr"],
            seed=derive_seed(stream_seed, "lion-vr-dist-sign", n),
            **_DIST_KIND[method],
        )
    rec = record_steps(steps, every)
    wanted = set(rec)
    out: dict[str, Any] = {"steps": [], "grad_l1": [], "grad_l2": [], "loss": []}
    for t in range(1, steps + 1):
        u = torch.rand((n, batch_size), generator=stream)
        idx_all = owner[starts[:, None] + (u * sizes[:, None]).long()]
        batch[:] = [comm.shard(idx_all)]
        if method == "dist-adamw":
            with torch.no_grad():
                g = grad_fn([p.detach() for p in params])
                mean = comm.client_mean(torch.cat(g, dim=1))
                for p, gi in zip(params, mean.split(prob.dim), strict=True):
                    p.grad = gi
            opt.step()
        else:
            opt.step(grad_fn)
        if t in wanted:
            with torch.no_grad():
                x = torch.stack([p.detach() for p in params])
                gf = prob.grad(x)
                out["steps"].append(t)
                out["grad_l1"].append(gf.abs().sum(-1).tolist())
                out["grad_l2"].append(gf.norm(dim=-1).tolist())
                out["loss"].append(prob.loss(x).tolist())
    stats = comm.stats.as_dict()
    out["uplink_bits_per_step"] = stats["uplink_bits"] / steps
    out["downlink_bits_per_step"] = stats["downlink_bits"] / steps
    out["uplink_rounds"] = stats["uplink_rounds"]
    return out


def _dist_unit(
    comm: Any,
    method: str,
    plan: Sequence[tuple[int, Mapping[str, float]]],
    problem: tuple[Any, ...],
    stream_seed: int,
    steps: int,
    batch_size: int,
    every: int,
) -> list[dict[str, Any]]:
    """SPMD body of one unit: for each (n, tuned config) in ``plan``, one run with n clients.

    Under ``launch`` every n >= world size gets its own :class:`Communicator` over the same process group;
    n below the world size runs whole on every rank (identical results).
    """
    from optarium.distributed.comm import Communicator

    results = []
    for n, hp in plan:
        if comm.world_size > 1 and n >= comm.world_size:
            c = Communicator(n, comm.rank, comm.world_size, comm.group)
        else:
            c = Communicator.local(n)
        results.append(_dist_train(c, method, [hp], problem, stream_seed, steps, batch_size, every))
    return results


@functools.lru_cache(maxsize=128)
def _dist_tune(
    method: str, n: int, problem: tuple[Any, ...], steps: int, batch_size: int, every: int
) -> tuple[Any, ...]:
    """(best index, scores) of :func:`dist_grid` with n clients on seed 0's stream (in-process, memoised).

    Every configuration runs with its own optimizer instance, exactly as the held-out runs do: packing the 4
    lrs into one :class:`~optarium.distributed.lion.DistributedLion` as param groups would couple the 1-bit
    variants' copies (one adaptive radius and one random stream for all of them), so the tuned algorithm
    would not be the one that is run. The same 4 runs for every method.
    """
    from optarium.distributed.comm import Communicator

    scores = []
    for hp in dist_grid(method):
        res = _dist_train(Communicator.local(n), method, [hp], problem, 0, steps, batch_size, every)
        tail = [v[0] for v in res["grad_l1"][-3:]]
        sc = sum(tail) / len(tail)
        scores.append(sc if math.isfinite(sc) else math.inf)
    return min(range(len(scores)), key=scores.__getitem__), tuple(scores)


def run_dist(ctx: Any, method: str, seed: int, config: Mapping[str, Any]) -> None:
    """Part (c) unit: lr tuned with ``tune_clients`` clients (seed 0); held-out seed ``seed + 1``, all n."""
    from optarium.distributed.launch import launch

    dc = config["dist"]
    pc = dc["problem"]
    problem = (pc["n"], pc["dim"], pc["alpha"], pc["flip"], pc["data_seed"])
    steps, batch_size, every = int(dc["steps"]), int(dc["batch_size"]), int(dc["record_every"])
    if seed >= int(dc["seeds"]):
        return  # part (c) uses fewer seeds than part (a)
    with ctx.evaluating():  # tuning is bookkeeping (and identical at every world size)
        best, scores = _dist_tune(method, int(dc["tune_clients"]), problem, steps, batch_size, every)
    if seed == 0:
        for i, sc in enumerate(scores):
            ctx.log(steps, check_finite=False, n=int(dc["tune_clients"]), tune_index=i, dist_tune_score=sc)
    plan = [(int(n), dist_grid(method)[best]) for n in dc["clients"]]
    world_size = int(config.get("world_size", 1))
    results = launch(
        _dist_unit,
        world_size,
        method,
        plan,
        problem,
        seed + 1,
        steps,
        batch_size,
        every,
        n_clients=world_size,
    )[0]
    for (n, hp), res in zip(plan, results, strict=True):
        for i, t in enumerate(res["steps"]):
            ctx.log(
                t, n=n, grad_l1=res["grad_l1"][i][0], grad_l2=res["grad_l2"][i][0], loss=res["loss"][i][0]
            )
        tail = [v[0] for v in res["grad_l1"][-3:]]
        ctx.log(
            steps,
            n=n,
            dist_score=sum(tail) / len(tail),
            uplink_bits_per_step=res["uplink_bits_per_step"],
            downlink_bits_per_step=res["downlink_bits_per_step"],
            tuned_lr=hp["lr"],
            world_size=world_size,
        )


def dist_scores(records: Sequence[Mapping[str, Any]], method: str) -> dict[int, dict[int, float]]:
    """n -> seed -> part-(c) score of ``method`` (finished units only)."""
    out: dict[int, dict[int, float]] = {}
    for r in select(records, method, has="dist_score"):
        out.setdefault(int(r["n"]), {})[int(r["seed"])] = float(r["dist_score"])
    return out


def dist_bits(records: Sequence[Mapping[str, Any]], method: str) -> float:
    """The largest measured uplink bits per client per step of ``method`` (NaN without records)."""
    vals = values(records, "uplink_bits_per_step", method)
    return max(vals) if vals else math.nan


def dist_slope(records: Sequence[Mapping[str, Any]], method: str) -> tuple[float, float, float, int]:
    """OLS slope of log(score) on log(n) over all (n, seed) points: (slope, 95 % t-CI lo, hi, points)."""
    pts = [
        (math.log(n), math.log(v))
        for n, by in dist_scores(records, method).items()
        for v in by.values()
        if v > 0
    ]
    fit = slope_fit([x for x, _ in pts], [y for _, y in pts])
    return fit.slope, fit.lo, fit.hi, fit.n


def decide_dist(
    records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]
) -> tuple[str, dict[str, Any], str]:
    """Part (c)'s rule (:data:`RULE`): outcome, figures and a one-line summary."""
    figures: dict[str, Any] = {}
    dim = int(config.get("dist", {}).get("problem", {}).get("dim", 0)) or None
    slopes_ok, slopes_bad = True, False
    for m in _DIST_FP:
        b, lo, hi, npts = dist_slope(records, m)
        figures.update(
            {f"{m}_slope_n": b, f"{m}_slope_n_ci95_lo": lo, f"{m}_slope_n_ci95_hi": hi, f"{m}_points": npts}
        )
        slopes_ok &= math.isfinite(hi) and hi < 0
        slopes_bad |= math.isfinite(lo) and lo > 0
    ratios_ok, ratios_bad, any_ratio = True, False, False
    for comp, fp in _DIST_PAIRS:
        sc, sf = dist_scores(records, comp), dist_scores(records, fp)
        for n in sorted(set(sc) & set(sf)):
            seeds = sorted(set(sc[n]) & set(sf[n]))
            if n < 4 or not seeds:
                continue
            ratio = math.exp(sum(math.log(sc[n][s] / sf[n][s]) for s in seeds) / len(seeds))
            figures[f"{comp}_over_{fp}_n{n}"] = ratio
            any_ratio = True
            ratios_ok &= ratio <= 2.0
            ratios_bad |= ratio > 2.0
    savings = []
    for comp, fp in _DIST_PAIRS:
        bc, bf = dist_bits(records, comp), dist_bits(records, fp)
        figures[f"{comp}_uplink_bits_per_step"] = bc
        figures[f"{fp}_uplink_bits_per_step"] = bf
        if comp == "dist-lion-1bit" and math.isfinite(bc) and bc > 0:
            savings.append(bf / bc)
            figures["bit_saving_lion"] = bf / bc
    if dim:
        figures["bit_saving_expected"] = 32 * dim / (dim + 32)
    saving_ok = bool(savings) and dim is not None and savings[0] >= 0.99 * 32 * dim / (dim + 32)
    if not any_ratio or not all(math.isfinite(figures[f"{m}_slope_n"]) for m in _DIST_FP):
        outcome = "inconclusive"
    elif slopes_bad or ratios_bad or (savings and not saving_ok):
        outcome = "not reproduced"
    elif slopes_ok and ratios_ok and saving_ok:
        outcome = "reproduced"
    else:
        outcome = "inconclusive"
    max_ratio = max([v for k, v in figures.items() if "_over_" in k], default=math.nan)
    summary = (
        "distributed: slope of log ||grad f||_1 in log n "
        + ", ".join(
            f"{m} {figures[f'{m}_slope_n']:+.3f} [{figures[f'{m}_slope_n_ci95_lo']:+.3f}, "
            f"{figures[f'{m}_slope_n_ci95_hi']:+.3f}]"
            for m in _DIST_FP
        )
        + f"; 1-bit/full ratios at n>=4 max {max_ratio:.2f}"
        + f"; measured bit saving {figures.get('bit_saving_lion', math.nan):.1f}x (an accounting check of "
        "the counters, d bits + 32 for R vs 32 d: it cannot fail on this problem and is not evidence for the "
        f"claim) -> {outcome}"
    )
    return outcome, figures, summary


def plot_dist(
    records: Sequence[Mapping[str, Any]], methods: Sequence[str], colors: Mapping[str, str]
) -> dict[str, Any]:
    """Part (c)'s figure ``distributed``: error vs n and error vs measured bits (none without ``dist-*``)."""
    from matplotlib.figure import Figure

    figs: dict[str, Any] = {}
    dist = [m for m in methods if m in DIST_METHODS]
    if not dist:
        return figs
    fig = Figure(figsize=(11.0, 4.0))
    ax1, ax2 = fig.subplots(1, 2)
    for m in dist:
        by_n = dist_scores(records, m)
        if not by_n:
            continue
        ns = sorted(by_n)
        geo = [math.exp(sum(math.log(v) for v in by_n[n].values()) / len(by_n[n])) for n in ns]
        ax1.plot(ns, geo, "o-", color=colors.get(m), label=m)
        bits = dist_bits(records, m)
        ax2.scatter([bits], [geo[-1]], color=colors.get(m), label=f"{m} (n={ns[-1]})")
    ax1.set_xscale("log", base=2)
    ax1.set_yscale("log")
    ax1.set_xlabel("clients n")
    ax1.set_ylabel("final ||grad f||_1 (geometric mean over seeds)")
    ax1.set_title("distributed: error vs n at fixed T")
    ax2.set_xscale("log")
    ax2.set_yscale("log")
    ax2.set_xlabel("uplink bits per client per step (measured)")
    ax2.set_ylabel("final ||grad f||_1")
    ax2.set_title("error vs communication")
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    figs["distributed"] = fig
    return figs
