"""APAPC + Chebyshev for decentralized mixed affine constraints: linear rate, fewest gradients, rounds.

Paper: Yarmoshik, Nguyen, Rogozin, Gasnikov, "Complexity of Decentralized Optimization with Mixed Affine
Constraints", ICML 2026 (arXiv:2602.04479). Claim: for smooth strongly convex nodes, an algorithm (APAPC with
Chebyshev acceleration on the reformulated problem) whose gradient, matrix-multiplication and communication
complexities match the lower bounds: linear convergence with :math:`O(\\sqrt{\\kappa_f}\\log\\frac1\\epsilon)`
gradient calls and communication growing like the square root of the graph condition number.

Problem (the spec's): ``n = 8`` nodes (ring; Erdős-Rényi p = 0.4 redrawn until connected, seeded by the
draw), ``d = 5`` local, ``dt = 3`` global variables, ``m = 4`` coupled rows, 2 local rows per node, one row
on the global variable on nodes 0 and 1; quadratic nodes with prescribed spectra (:math:`\\kappa_f = 20`),
:func:`optarium.distributed.decentralized_affine.make_mixed_affine`; ground truth from the centralized KKT
system. Metric: :math:`\\|u - u^*\\|/\\|u^*\\|` over the stacked node copies against gossip rounds (one round
= one multiplication by W, as ``comm.stats`` counts it), bits per node and gradient calls.

Units (method x seed; a seed is one problem draw, run on both graphs):

- ``apapc-cheb`` (the paper's), ``apapc`` (plain, no Chebyshev), ``primal-dual`` (decentralized primal-dual
  gradient method on the raw K): default parameters from the constants, no tuning for anyone.
- ``tracking-admm`` (Falsone et al. 2020) and ``dpmm`` (decentralized proximal method of multipliers, 2023),
  the predecessor's constraint-coupled baselines, on the mixed problem cast as a constraint-coupled one
  (:mod:`optarium.distributed.decentralized_affine_baselines`; the casting is reconstructed): the
  predecessor's default parameters (``c = 1e-3``; ``theta = alpha = gamma = 1``, ``beta`` half its bound),
  no tuning. They use an exact local solve per iteration (a stronger oracle than a gradient), so they enter
  the rounds comparison only, not the gradient-call one. The quick scale does not run ``primal-dual`` (a
  reconstructed baseline, not the paper's; full does). EXTRA (consensus-only problems) does not apply to
  the mixed problem and is not run.
- full only: ``kappa-sweep`` (APAPC+Cheb at kappa_f in ``kappa_grid``, ring-8, lam <= 0.1/kappa_f),
  ``chi-sweep`` (APAPC+Cheb on one ``chi_nodes``-node problem over the graphs ``chi_graphs``: complete,
  Erdős-Rényi, torus, ring, so chi = lambda_max(W)/lambda_min+(W) varies while the problem stays; default
  gossip degree ceil(sqrt(chi))) and ``chi-sweep-pred`` (the predecessor's degree ceil(chi)).

Caps: the baselines stop at ``cap`` gossip rounds (15,000 = ``cmp_cap / 2`` at the quick scale, to keep it
within its CPU budget: a baseline censored there still bounds the per-pair ratio by 2 for any APAPC+Cheb
crossing within ``cmp_cap``; 30,000 at full); APAPC+Cheb runs to 1e-8 within ``cheb_cap`` (its 1e-8
target is part of the rule) and its rounds-to-1e-6 are compared within ``cmp_cap`` (30,000). A censored
baseline enters the rounds ratio at its own cap (so the ratio is an upper bound) and its gradient calls at
the cap (a lower bound); both are counted and shown.

Runs use ``config["world_size"]`` (1: in process; more: :func:`optarium.distributed.launch` of the same SPMD
code, rank 0's results logged).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any

from optarium.harness.experiment import Experiment, Verdict, register
from optarium.harness.verdicts import mean_ci, ols_slope, select

__all__ = ["CONFIGS", "EXPERIMENT", "decide", "plot", "run"]

CLAIM = (
    "APAPC with Chebyshev acceleration solves decentralized problems with mixed affine constraints at a "
    "linear rate with the fewest gradient calls (O(sqrt(kappa_f) log 1/eps)) and communication within a "
    "constant of the best baseline, growing like sqrt of the graph condition number."
)
RULE = (
    "Quick (per problem draw and graph, 2 draws x {ring-8, ER-8}): reproduced if on every pair APAPC+Cheb "
    "reaches rel. error 1e-8 (within cheb_cap rounds) with a linear fit of log error over the last half of "
    "its run of R^2 > 0.95, needs fewer gradient calls to 1e-6 than every gradient-oracle baseline (plain "
    "APAPC, primal-dual; a baseline censored at the cap enters with its calls at the cap, a lower bound), "
    "and the geometric mean over pairs of its gossip rounds to 1e-6 divided by the best baseline's (every "
    "baseline that ran: plain APAPC, primal-dual (full only), Tracking-ADMM, DPMM; censored baselines at "
    "their cap, an upper "
    "bound on the ratio) is at most 2. Not reproduced if it fails to reach "
    "1e-8 on some pair, or needs more gradient calls than an uncensored plain APAPC. Otherwise inconclusive. "
    "Full adds: slopes of log(gradient calls to 1e-6) on log(kappa_f) and of log(gossip rounds to 1e-6) on "
    "log(chi) for APAPC+Cheb, pooled over draws; reproduced if both lie in [0.35, 0.65] (and the quick rule "
    "holds), not reproduced if either is >= 0.85, otherwise inconclusive."
)

GRADIENT_BASELINES = ("apapc", "primal-dual")
PROX_BASELINES = ("tracking-admm", "dpmm")
METHODS = ("apapc-cheb", *GRADIENT_BASELINES, *PROX_BASELINES)
SWEEPS = ("kappa-sweep", "chi-sweep", "chi-sweep-pred")
GRAPHS = ("ring", "erdos_renyi")

_BASE: dict[str, Any] = {
    "n": 8,
    "problem": {"d": 5, "dt": 3, "m": 4, "r": 2, "rt_nodes": [0, 1], "lam": 0.01},
    "kappa_f": 20.0,
    "er_p": 0.4,
    "tol": 1e-8,
    "tol_compare": 1e-6,
    "cap": 30_000,
    "cheb_cap": 60_000,
    "cmp_cap": 30_000,
    "record_every": {"apapc-cheb": 2, "apapc": 50, "primal-dual": 50, "tracking-admm": 50, "dpmm": 50},
    "curve_points": 40,
    "world_size": 1,
}

CONFIGS: dict[str, dict[str, Any]] = {
    "smoke": {
        **_BASE,
        "seeds": 1,
        "methods": list(METHODS),
        "n": 4,
        "problem": {"d": 3, "dt": 2, "m": 2, "r": 1, "rt_nodes": [0], "lam": 0.01},
        "kappa_f": 5.0,
        "cap": 400,
        "cheb_cap": 4000,
        "cmp_cap": 400,
        "tol": 1e-5,
        "tol_compare": 1e-3,
        "record_every": {"apapc-cheb": 1, "apapc": 5, "primal-dual": 5, "tracking-admm": 5, "dpmm": 5},
    },
    # quick: the reconstructed primal-dual baseline is left to full (the paper's Tracking-ADMM and DPMM now
    # run), and the baselines stop at cmp_cap / 2 rounds: a baseline censored there bounds the per-pair
    # rounds ratio by 2 for any APAPC+Cheb crossing within cmp_cap, as a censored one at cmp_cap would
    "quick": {
        **_BASE,
        "seeds": 2,
        "methods": [m for m in METHODS if m != "primal-dual"],
        "cap": 15_000,
    },
    "full": {
        **_BASE,
        "seeds": 3,
        "methods": list(METHODS + SWEEPS),
        "kappa_grid": [10.0, 30.0, 100.0, 300.0, 1000.0],
        "chi_nodes": 16,
        "chi_graphs": [
            ["complete", None],
            ["erdos_renyi", 0.5],
            ["torus", None],
            ["erdos_renyi", 0.25],
            ["ring", None],
        ],
        "sweep_tol": 1e-6,
        "sweep_cap": 2_000_000,
        "unit_timeout_s": 1500,
    },
}


# ---------------------------------------------------------------------------------------------------- runs


@functools.lru_cache(maxsize=64)
def _instance(seed: int, n: int, kappa_f: float, problem: tuple[Any, ...]) -> Any:
    from optarium.distributed.decentralized_affine import make_mixed_affine

    d, dt, m, r, rt_nodes, lam = problem
    p = make_mixed_affine(n, d=d, dt=dt, m=m, r=r, rt_nodes=rt_nodes, kappa_f=kappa_f, lam=lam, seed=seed)
    X, xt, f = p.solution()
    return p, X, xt, f


def _gossip_matrix(topology: str, n: int, seed: int, p: float) -> Any:
    import torch

    from optarium.distributed.topology import mixing_matrix

    kw = {"p": p, "generator": torch.Generator().manual_seed(seed)} if topology == "erdos_renyi" else {}
    return torch.eye(n, dtype=torch.float64) - mixing_matrix(topology, n, **kw)


def _problem_key(config: Mapping[str, Any]) -> tuple[Any, ...]:
    pc = config["problem"]
    return (int(pc["d"]), int(pc["dt"]), int(pc["m"]), int(pc["r"]), tuple(pc["rt_nodes"]), float(pc["lam"]))


def _execute(jobs: list[tuple[Any, Any, dict[str, Any]]], n: int, config: Mapping[str, Any]) -> list[Any]:
    """Run the jobs in this process (world size 1) or on ``world_size`` gloo processes; rank 0's results."""
    from optarium.distributed.comm import Communicator
    from optarium.distributed.decentralized_affine import spmd_solve
    from optarium.distributed.launch import launch

    ws = int(config.get("world_size", 1))
    if ws == 1:
        return spmd_solve(Communicator.local(n), jobs)
    return launch(spmd_solve, ws, jobs, n_clients=n, timeout_s=300.0)[0]


def _first(rows: Sequence[Mapping[str, float]], tol: float, key: str, cap: float | None = None) -> float:
    """``key`` at the first row with rel_err <= tol (and gossip_rounds <= cap), else NaN (censored)."""
    for row in rows:
        if cap is not None and row["gossip_rounds"] > cap:
            break
        if row.get("rel_err", math.inf) <= tol:
            return float(row[key])
    return math.nan


def _at_cap(rows: Sequence[Mapping[str, float]], cap: float, key: str) -> float:
    """``key`` at the last row within ``cap`` gossip rounds."""
    inside = [r for r in rows if r["gossip_rounds"] <= cap] or rows[:1]
    return float(inside[-1][key])


def _linear_fit(rows: Sequence[Mapping[str, float]]) -> tuple[float, float]:
    """(per-iteration contraction, R^2) of log rel_err on the iteration over the last half of the run."""
    pts = [(r["step"], math.log(r["rel_err"])) for r in rows if r.get("rel_err", 0) > 0]
    if len(pts) < 4:
        return math.nan, math.nan
    kmax = pts[-1][0]
    tail = [p for p in pts if p[0] >= kmax / 2]
    if len(tail) < 3:
        return math.nan, math.nan
    xs, ys = [p[0] for p in tail], [p[1] for p in tail]
    s = ols_slope(xs, ys)
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sst = sum((y - my) ** 2 for y in ys)
    sse = sum((y - (my + s * (x - mx))) ** 2 for x, y in zip(xs, ys, strict=True))
    return math.exp(s), (1 - sse / sst) if sst > 0 else math.nan


def _log(ctx: Any, res: Any, config: Mapping[str, Any], method: str, **tags: float) -> None:
    rows = res.history.as_rows()
    st = res.extras["setup"]
    run_cap = float(config["cheb_cap"] if method == "apapc-cheb" else config["cap"])
    cap = float(config.get("cmp_cap", config["cap"])) if method == "apapc-cheb" else run_cap
    tc = float(config["tol_compare"])
    with ctx.evaluating():
        k = int(config["curve_points"])
        n = len(rows)
        picks = sorted({min(n - 1, round((n - 1) * i / k)) for i in range(k + 1)}) if n else []
        for i in picks:
            row = rows[i]
            ctx.log(
                int(row["step"]),
                check_finite=False,
                curve=1,
                rel_err=row.get("rel_err", math.nan),
                residual=row["residual"],
                gossip_rounds=row["gossip_rounds"],
                uplink_bits=row["uplink_bits"],
                grad_calls=row["grad_calls"],
                **tags,
            )
        rate, r2 = _linear_fit(rows)
        final_err = rows[-1].get("rel_err", math.nan)
        ctx.log(
            int(res.n_iter),
            check_finite=False,
            final=1,
            reached_tol=float(final_err <= float(config["tol"])),
            final_err=final_err,
            final_residual=rows[-1]["residual"],
            rounds_to_cmp=_first(rows, tc, "gossip_rounds", cap),
            grads_to_cmp=_first(rows, tc, "grad_calls", cap),
            bits_to_cmp=_first(rows, tc, "uplink_bits", cap),
            rounds_to_tol=_first(rows, float(config["tol"]), "gossip_rounds"),
            rounds_to_sweep=_first(rows, float(config.get("sweep_tol", tc)), "gossip_rounds"),
            grads_to_sweep=_first(rows, float(config.get("sweep_tol", tc)), "grad_calls"),
            grads_at_cap=_at_cap(rows, cap, "grad_calls"),
            err_at_cap=_at_cap(rows, cap, "rel_err"),
            run_cap=cap,
            rate=rate,
            rate_r2=r2,
            kappa_f=st["L_f"] / st["mu_f"],
            kappa_G=st["L_G"] / st["mu_G"],
            chi=st["chi"],
            kappa_B=st["kappa_B"],
            kappa_B1=st["kappa_B1"],
            kappa_B2=st["kappa_B2"],
            w_degree=st["w_degree"],
            k_degree=st["k_degree"],
            rounds_per_iter=float(rows[-1]["gossip_rounds"]) / max(res.n_iter, 1),
            **tags,
        )


def run(ctx: Any, method: str, seed: int, config: Mapping[str, Any]) -> None:
    """Run unit (``method``, ``seed``): problem draw ``seed``, on every graph of the unit."""
    from optarium.distributed.decentralized_affine import mixed_affine_setup

    key = _problem_key(config)
    n = int(config["n"])
    jobs: list[tuple[Any, Any, dict[str, Any]]] = []
    tags: list[dict[str, float]] = []
    sizes: list[int] = []
    if method in METHODS:
        with ctx.untimed():
            p, X, xt, _ = _instance(int(seed), n, float(config["kappa_f"]), key)
        for g, topo in enumerate(GRAPHS):
            with ctx.untimed():
                W = _gossip_matrix(topo, n, int(seed), float(config["er_p"]))
                per = 1 if method in PROX_BASELINES else mixed_affine_setup(p, W, method).rounds_per_iteration
            cap = int(config["cheb_cap"] if method == "apapc-cheb" else config["cap"])
            kw = {
                "method": method,
                "tol": float(config["tol"]),
                "x_star": (X, xt),
                "max_iter": cap // per + 1,
                "max_rounds": cap,
                "record_every": int(config["record_every"][method]),
            }
            jobs.append((p, W, kw))
            tags.append({"graph": float(g)})
            sizes.append(n)
    elif method == "kappa-sweep":
        for kappa in config["kappa_grid"]:
            # lam <= 0.1 / kappa_f keeps every kappa_f of the grid reachable (s_min^2 > 0)
            kkey = (*key[:-1], min(key[-1], 0.1 / float(kappa)))
            with ctx.untimed():
                p, X, xt, _ = _instance(int(seed), n, float(kappa), kkey)
                W = _gossip_matrix("ring", n, int(seed), 0.0)
            kw = {"tol": float(config["sweep_tol"]), "x_star": (X, xt), "max_iter": 100_000}
            kw["max_rounds"] = int(config["sweep_cap"])
            jobs.append((p, W, kw))
            tags.append({"kappa_target": float(kappa)})
            sizes.append(n)
    elif method in ("chi-sweep", "chi-sweep-pred"):
        # one problem on chi_nodes nodes, several graphs: chi varies, the (normalised) K barely does
        size = int(config["chi_nodes"])
        with ctx.untimed():
            p, X, xt, _ = _instance(int(seed), size, float(config["kappa_f"]), key)
        for g, (topo, prob_edge) in enumerate(config["chi_graphs"]):
            with ctx.untimed():
                W = _gossip_matrix(topo, size, int(seed), float(prob_edge or 0.0))
            kw = {
                "tol": float(config["sweep_tol"]),
                "x_star": (X, xt),
                "max_iter": 100_000,
                "record_every": 2,
            }
            kw["max_rounds"] = int(config["sweep_cap"])
            if method == "chi-sweep-pred":
                kw["w_degree"] = "predecessor"
            jobs.append((p, W, kw))
            tags.append({"chi_graph": float(g)})
            sizes.append(size)
    else:
        raise ValueError(f"method: unknown {method!r}")
    for size in sorted(set(sizes)):
        idx = [i for i, s in enumerate(sizes) if s == size]
        outs = _execute([jobs[i] for i in idx], size, config)
        for i, res in zip(idx, outs, strict=True):
            _log(ctx, res, config, method, **tags[i])


# ---------------------------------------------------------------------------------------------------- verdict


def _pairs(records: Sequence[Mapping[str, Any]], method: str) -> dict[tuple[int, int], Mapping[str, Any]]:
    return {(int(r["seed"]), int(r["graph"])): r for r in select(records, method, final=1)}


def _geo_mean(xs: Sequence[float]) -> float:
    xs = [x for x in xs if x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else math.nan


def _rounds_or_cap(rec: Mapping[str, Any], cap: float) -> float:
    """A baseline's rounds to 1e-6, or its own cap when censored (older records: ``cap``)."""
    r = float(rec["rounds_to_cmp"])
    return r if math.isfinite(r) else float(rec.get("run_cap", cap))


def _quick(records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    cap = float(config.get("cap", 30_000))
    figs: dict[str, Any] = {}
    cheb = _pairs(records, "apapc-cheb")
    # the baselines that ran at this scale (quick does not run primal-dual)
    base = {m: _pairs(records, m) for m in GRADIENT_BASELINES if select(records, m, final=1)}
    prox = {m: _pairs(records, m) for m in PROX_BASELINES if select(records, m, final=1)}
    figs["pairs"] = len(cheb)
    reached = [bool(r["reached_tol"] == 1) for r in cheb.values()]
    linear = [bool(r["rate_r2"] is not None and r["rate_r2"] > 0.95) for r in cheb.values()]
    figs["cheb_reached_1e-8"] = sum(reached)
    figs["cheb_linear_fit_r2_gt_0.95"] = sum(linear)
    figs["cheb_r2_min"] = min((float(r["rate_r2"]) for r in cheb.values()), default=math.nan)
    figs["cheb_rate_max"] = max((float(r["rate"]) for r in cheb.values()), default=math.nan)
    fewer, more_than_plain, ratios = [], [], []
    for m, pairs in (*base.items(), *prox.items()):
        figs[f"{m}_censored"] = sum(1 for r in pairs.values() if not math.isfinite(float(r["rounds_to_cmp"])))
    grad_ratios: list[float] = []
    for key, c in cheb.items():
        cg = float(c["grads_to_cmp"])
        cr = float(c["rounds_to_cmp"])
        best = math.inf
        ok = math.isfinite(cg)
        for m, pairs in base.items():
            b = pairs.get(key)
            if b is None:
                ok = False
                continue
            bg = (
                float(b["grads_to_cmp"])
                if math.isfinite(float(b["grads_to_cmp"]))
                else float(b["grads_at_cap"])
            )
            ok = ok and cg < bg
            br = _rounds_or_cap(b, cap)
            best = min(best, br)
            if m == "apapc" and math.isfinite(float(b["grads_to_cmp"])) and math.isfinite(cg):
                more_than_plain.append(cg > float(b["grads_to_cmp"]))
        grad_ratios.append(cr / best if math.isfinite(cr) and math.isfinite(best) else math.nan)
        for pairs in prox.values():
            b = pairs.get(key)
            if b is not None:
                best = min(best, _rounds_or_cap(b, cap))
        fewer.append(ok)
        ratios.append(cr / best if math.isfinite(cr) and math.isfinite(best) else math.nan)
    figs["cheb_fewest_grads_pairs"] = sum(fewer)
    figs["cheb_rounds_ratio_geo_mean"] = (
        _geo_mean(ratios) if all(math.isfinite(x) for x in ratios) else math.nan
    )
    figs["cheb_rounds_ratio_max"] = max(ratios, default=math.nan)
    figs["cheb_rounds_ratio_vs_gradient_baselines_geo_mean"] = (
        _geo_mean(grad_ratios) if all(math.isfinite(x) for x in grad_ratios) else math.nan
    )
    for name, pairs in (("apapc-cheb", cheb), *base.items(), *prox.items()):
        vals = [float(r["grads_to_cmp"]) for r in pairs.values()]
        figs[f"{name}_grads_to_1e-6_mean"] = sum(vals) / len(vals) if vals else math.nan
        vals = [float(r["rounds_to_cmp"]) for r in pairs.values()]
        figs[f"{name}_rounds_to_1e-6_mean"] = sum(vals) / len(vals) if vals else math.nan
        vals = [float(r["bits_to_cmp"]) for r in pairs.values() if "bits_to_cmp" in r]
        figs[f"{name}_bits_to_1e-6_mean"] = sum(vals) / len(vals) if vals else math.nan
        errs = sorted(float(r["err_at_cap"]) for r in pairs.values())
        figs[f"{name}_err_at_cap_median"] = errs[len(errs) // 2] if errs else math.nan
    for q in ("kappa_f", "kappa_G", "chi", "kappa_B", "kappa_B1", "kappa_B2", "w_degree", "k_degree"):
        vals = [float(r[q]) for r in cheb.values()]
        figs[f"cheb_{q}_mean"] = sum(vals) / len(vals) if vals else math.nan
    n_pairs = len(cheb)
    if n_pairs == 0:
        return "inconclusive", figs
    if not all(reached) or any(more_than_plain):
        outcome = "not reproduced"
    elif (
        all(linear)
        and all(fewer)
        and len(fewer) == n_pairs
        and math.isfinite(figs["cheb_rounds_ratio_geo_mean"])
        and figs["cheb_rounds_ratio_geo_mean"] <= 2.0
    ):
        outcome = "reproduced"
    else:
        outcome = "inconclusive"
    return outcome, figs


def _sweep_slope(
    records: Sequence[Mapping[str, Any]], method: str, x: str, y: str
) -> tuple[float, float, int]:
    pts = [
        (math.log(float(r[x])), math.log(float(r[y])))
        for r in select(records, method, final=1)
        if r.get(y) is not None and math.isfinite(float(r[y])) and float(r[y]) > 0
    ]
    censored = sum(1 for r in select(records, method, final=1) if not math.isfinite(float(r[y])))
    if len(pts) < 2:
        return math.nan, math.nan, censored
    by_seed: dict[int, list[tuple[float, float]]] = {}
    for r in select(records, method, final=1):
        if math.isfinite(float(r[y])):
            by_seed.setdefault(int(r["seed"]), []).append((math.log(float(r[x])), math.log(float(r[y]))))
    per = [ols_slope([a for a, _ in v], [b for _, b in v]) for v in by_seed.values() if len(v) >= 2]
    m, _, half = mean_ci(per)
    return m, half, censored


def decide(records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> Verdict:
    """The rule of :data:`RULE`."""
    outcome, figs = _quick(records, config)
    full = bool(select(records, "kappa-sweep", final=1) or select(records, "chi-sweep", final=1))
    if full:
        sk, hk, ck = _sweep_slope(records, "kappa-sweep", "kappa_f", "grads_to_sweep")
        sc, hc, cc = _sweep_slope(records, "chi-sweep", "chi", "rounds_to_sweep")
        sp, hp, cp = _sweep_slope(records, "chi-sweep-pred", "chi", "rounds_to_sweep")
        figs.update(
            {
                "slope_grads_vs_kappa_f": sk,
                "slope_grads_vs_kappa_f_ci95": hk,
                "kappa_sweep_censored": ck,
                "slope_rounds_vs_chi": sc,
                "slope_rounds_vs_chi_ci95": hc,
                "chi_sweep_censored": cc,
                "slope_rounds_vs_chi_predecessor_degree": sp,
                "slope_rounds_vs_chi_predecessor_degree_ci95": hp,
                "chi_sweep_pred_censored": cp,
            }
        )
        slopes_ok = all(math.isfinite(s) and 0.35 <= s <= 0.65 for s in (sk, sc)) and ck == cc == 0
        if any(math.isfinite(s) and s >= 0.85 for s in (sk, sc)) or outcome == "not reproduced":
            outcome = "not reproduced"
        elif outcome == "reproduced" and slopes_ok:
            outcome = "reproduced"
        else:
            outcome = "inconclusive"
    summary = (
        f"APAPC+Cheb reached 1e-8 on {figs['cheb_reached_1e-8']}/{figs['pairs']} (graph, draw) pairs "
        f"(linear fit R^2 min {figs['cheb_r2_min']:.3f}); fewest gradient calls to 1e-6 on "
        f"{figs['cheb_fewest_grads_pairs']}/{figs['pairs']} (mean "
        f"{figs['apapc-cheb_grads_to_1e-6_mean']:.0f} vs "
        f"plain APAPC {figs.get('apapc_grads_to_1e-6_mean', math.nan):.0f}, censored "
        f"{figs.get('apapc_censored', 'not run')}; primal-dual "
        + (f"censored {figs['primal-dual_censored']}" if "primal-dual_censored" in figs else "not run")
        + "); rounds to 1e-6 mean "
        f"{figs['apapc-cheb_rounds_to_1e-6_mean']:.0f} vs Tracking-ADMM "
        f"{figs.get('tracking-admm_rounds_to_1e-6_mean', math.nan):.0f} (censored "
        f"{figs.get('tracking-admm_censored', 0)}), DPMM "
        f"{figs.get('dpmm_rounds_to_1e-6_mean', math.nan):.0f} "
        f"(censored {figs.get('dpmm_censored', 0)}); rounds ratio vs best baseline geo-mean "
        f"{figs['cheb_rounds_ratio_geo_mean']:.2f} (vs gradient baselines only "
        f"{figs['cheb_rounds_ratio_vs_gradient_baselines_geo_mean']:.2f})"
    )
    if full:
        summary += (
            f"; slopes: grads ~ kappa_f^{figs['slope_grads_vs_kappa_f']:.2f}, rounds ~ "
            f"chi^{figs['slope_rounds_vs_chi']:.2f} (predecessor degree "
            f"{figs['slope_rounds_vs_chi_predecessor_degree']:.2f})"
        )
    return Verdict(outcome, figs, summary + f" -> {outcome}")


# ---------------------------------------------------------------------------------------------------- plots

_COLORS = {
    "apapc-cheb": "tab:red",
    "apapc": "tab:blue",
    "primal-dual": "tab:gray",
    "tracking-admm": "tab:green",
    "dpmm": "tab:orange",
}


def plot(records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> dict[str, Any]:
    """Relative error against gossip rounds, bits per node and gradient calls; sweep scatter plots."""
    from matplotlib.figure import Figure

    figs: dict[str, Any] = {}
    from optarium.harness.figures import panel_grid

    fig, axes = panel_grid(3, panel=(4.4, 4.0))
    for m in METHODS:
        curves = select(records, m, curve=1)
        keys = sorted({(int(r["seed"]), int(r["graph"])) for r in curves})
        for j, (s, g) in enumerate(keys):
            rows = sorted(
                (r for r in curves if int(r["seed"]) == s and int(r["graph"]) == g), key=lambda r: r["step"]
            )
            ys = [max(float(r["rel_err"]), 1e-16) for r in rows]
            for ax, key in zip(axes, ("gossip_rounds", "uplink_bits", "grad_calls"), strict=True):
                ax.plot(
                    [max(float(r[key]), 1.0) for r in rows],
                    ys,
                    color=_COLORS[m],
                    ls="-" if g == 0 else "--",
                    lw=1,
                    alpha=0.8,
                    label=m if j == 0 else None,
                )
    for ax, xl in zip(
        axes,
        ("gossip rounds (W products)", "uplink bits per node", "gradient calls (local solves: ADMM, DPMM)"),
        strict=True,
    ):
        ax.set_yscale("log")
        ax.set_xlabel(xl)
        ax.set_ylabel("||u - u*|| / ||u*||")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[2].set_xscale("log")
    fig.suptitle("n=8, ring (solid) and Erdos-Renyi p=0.4 (dashed), kappa_f=20")
    figs["error_vs_communication"] = fig
    for method, x, y, xl in (
        ("kappa-sweep", "kappa_f", "grads_to_sweep", "kappa_f"),
        ("chi-sweep", "chi", "rounds_to_sweep", "chi = lambda_max(W)/lambda_min+(W)"),
    ):
        fin = select(records, method, final=1)
        if not fin:
            continue
        fig = Figure(figsize=(5.5, 4.0))
        ax = fig.subplots()
        ax.scatter([r[x] for r in fin], [r[y] for r in fin], s=14, color="tab:red", label=method)
        if method == "chi-sweep":
            pred = select(records, "chi-sweep-pred", final=1)
            ax.scatter(
                [r[x] for r in pred], [r[y] for r in pred], s=14, color="tab:purple", label="degree ceil(chi)"
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(xl)
        ax.set_ylabel(y.replace("_", " ").replace("sweep", "1e-6"))
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
        figs[method] = fig
    return figs


EXPERIMENT = register(
    Experiment(
        slug="decentralized-affine",
        claim=CLAIM,
        rule=RULE,
        methods=METHODS + SWEEPS,
        baselines=GRADIENT_BASELINES + PROX_BASELINES,
        distributed_methods=METHODS + SWEEPS,  # every unit runs through _execute (config["world_size"])
        configs=CONFIGS,
        run=run,
        decide=decide,
        plot=plot,
        scaled_down=(
            "quadratic nodes with prescribed spectra, n=8 (quick), 2 draws x {ring, Erdos-Renyi}; full adds "
            "kappa_f and graph (chi) sweeps on 16 nodes, 3 draws; quick caps the baselines at 15,000 gossip "
            "rounds and leaves primal-dual to full; Tracking-ADMM and DPMM run on the mixed problem cast as "
            "a constraint-coupled one (reconstructed), predecessor defaults; EXTRA (consensus only) and the "
            "HFL/VFL/MTL instances are not run"
        ),
    )
)
