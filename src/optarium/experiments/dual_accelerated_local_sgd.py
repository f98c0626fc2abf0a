"""Accelerated dual ascent with local SGD: convergence for any T and sqrt(kappa) scaling of the rounds.

Paper: Junchi Yang, Murat Yildirim, Qiu Feng, "Accelerated Dual Method for Distributed Optimization: An
Inexact-Gradient View of Local Updates", ICML 2026 (poster 64733); arXiv:2407.02689 (GA-MSGD). Claim: the
method converges for any number of local steps T and, when local computation is sufficient, needs
O(sqrt(kappa) log(1/eps)) communication rounds on heterogeneous strongly convex problems (the non-accelerated
dual method, GA-MSGD, needs O(kappa)).

Problem (the spec's): M = 8 clients, d = 20, quadratic clients F_m(x) = (x - c_m)^T H_m (x - c_m) / 2 with
every client's spectrum log-uniform on [1, kappa] (end points included, so kappa is exact) and c_m ~ N(0, 25
I) (:func:`optarium.distributed.federated.make_heterogeneous_ridge`); a seed is one problem draw. Metric:
relative gap (F(xbar) - F*)/(F(x0) - F*), F* from the normal equations; rounds to 1e-6. Every record also
carries the uplink bits per client, so the curves are available against rounds and against communicated bits.

Units (method x seed; the same problem draws for every method):

- ``acc-exact`` / ``ga-exact``: exact inner solves, eta = 1/L_d and Nesterov's beta from the exact kappa_d
  (accelerated) or beta = 0 (GA-MSGD), kappa in ``kappas``; rounds to 1e-6 (cap ``cap``).
- ``acc-tacc``: local gradient descent (gamma = 1/(2L)) with T = T_acc = ceil(ln(kappa_d)/(gamma mu)) and
  momentum="auto" (Nesterov there), kappa in ``tacc_kappas``.
- ``ga-local``: GA-MSGD with local GD, T in ``any_T["Ts"]``, kappa in ``any_T["kappas"]`` (the any-T claim).
- ``acc-smallT``: the exact-solve Nesterov beta with few local steps (T in ``small_T["Ts"]``, kappa = 100):
  the spec's expected divergence, measured by a run and by the spectral radius of the round map.
- ``acc-tuned``, ``ga-tuned``, ``fedavg``, ``scaffold``: T = 20 local GD steps at kappa = 100, each with the
  same budget of 4 configurations tuned on a separate tuning problem (seed 10000): acc-tuned tunes beta in
  {0.2, 0.4, 0.6, 0.8} (the paper's small-T momentum was not found), ga-tuned the dual step eta in {0.5, 1, 2,
  4} mu, FedAvg and SCAFFOLD the local step gamma in {0.25, 0.5, 1, 2}/(2L).
- ``noise`` (context): additive gradient noise sigma = 1, kappa = 10, T = 20, GA-MSGD and FedAvg at gamma in
  {1/(2L), 1/(4L)}; median relative gap over the last third of the rounds (the noise floor).

Runs use ``config.get("world_size", 1)``: 1 runs in process with ``Communicator.local``; more launches the
same SPMD code on that many gloo processes (:func:`optarium.distributed.launch`; rank 0's results are logged).

Censoring: a run that never reaches 1e-6 within the round cap has no rounds-to-tolerance; a seed with such an
acc-exact (ga-exact) run has no slope for that method. It is not silently dropped: the verdict counts it
(``acc_censored_seeds`` / ``ga_censored_seeds``) and treats it as a failure of condition (ii) for that method
(see :data:`RULE`), so no verdict can be "reproduced" while a seed is censored.

The paper's T-dependent dual step and momentum were not found; the parameters used are the spec's (module
docstring of :mod:`optarium.distributed.dual_accelerated_local_sgd`).
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from optarium.harness.experiment import Experiment, Verdict, register
from optarium.harness.verdicts import mean_ci, ols_slope, select

__all__ = ["CONFIGS", "EXPERIMENT", "decide", "plot", "run"]

CLAIM = (
    "Accelerated dual ascent with local SGD converges for any number of local steps and, with exact or "
    "sufficient local computation, needs rounds growing like sqrt(kappa) (GA-MSGD: like kappa)."
)
RULE = (
    "Per seed (problem draw), least-squares slope of log(rounds to 1e-6) on log(kappa_d) over the kappa grid "
    "for acc-exact and ga-exact. Reproduced if (i) every ga-local run (T in the any-T grid) reaches 1e-6 on "
    "every seed, (ii) the mean slopes lie in [0.35, 0.65] (acc) and [0.85, 1.15] (GA-MSGD), (iii) the "
    "paired slope difference GA - acc exceeds 2 SE, and (iv) acc-tacc needs at most 1.2 x the exact-solve "
    "rounds + 2. A seed whose acc-exact (ga-exact) run hit the round cap at some kappa is censored: it "
    "has no slope, is counted (acc_censored_seeds, ga_censored_seeds) and fails (ii) for that method, so the "
    "outcome cannot be reproduced while any seed is censored. Not reproduced if (i) fails, or the acc "
    "slope's mean - 2 SE lies above 0.65, or the "
    "difference is below -2 SE. Otherwise inconclusive. Small-T acceleration, the tuned T = 20 comparison "
    "with FedAvg and SCAFFOLD and the noise floors are reported as context, outside the verdict."
)

METHODS = (
    "acc-exact",
    "ga-exact",
    "acc-tacc",
    "ga-local",
    "acc-smallT",
    "acc-tuned",
    "ga-tuned",
    "fedavg",
    "scaffold",
    "noise",
)
TUNED = ("acc-tuned", "ga-tuned", "fedavg", "scaffold")
_TUNE_SEED = 10_000

_BASE: dict[str, Any] = {
    "problem": {"n_clients": 8, "dim": 20, "center_std": 5.0},
    "tol": 1e-6,
    "cap": 10_000,
    "kappas": [10.0, 31.6, 100.0, 316.0, 1000.0],
    "tacc_kappas": [10.0, 31.6, 100.0],
    "any_T": {"kappas": [10.0, 100.0], "Ts": [1, 5, 20, 100], "cap": 2000},
    "small_T": {"kappa": 100.0, "Ts": [1, 5, 20], "rounds": 300},
    "compare": {"kappa": 100.0, "T": 20, "rounds": 600},
    "noise": {"kappa": 10.0, "T": 20, "rounds": 300, "sigma": 1.0},
    "curve_points": 40,
    "world_size": 1,
}

CONFIGS: dict[str, dict[str, Any]] = {
    "smoke": {
        **_BASE,
        "seeds": 2,
        "problem": {"n_clients": 4, "dim": 6, "center_std": 5.0},
        "kappas": [10.0, 31.6],
        "tacc_kappas": [10.0],
        "cap": 2000,
        "any_T": {"kappas": [10.0], "Ts": [1, 5], "cap": 500},
        "small_T": {"kappa": 30.0, "Ts": [1], "rounds": 60},
        "compare": {"kappa": 10.0, "T": 5, "rounds": 60},
        "noise": {"kappa": 10.0, "T": 5, "rounds": 60, "sigma": 1.0},
    },
    "quick": {
        **_BASE,
        "seeds": 4,
        "kappas": [10.0, 31.6, 100.0, 316.0],
        "tacc_kappas": [10.0, 31.6],
        "any_T": {"kappas": [10.0, 100.0], "Ts": [1, 5, 20], "cap": 2000},
        "small_T": {"kappa": 100.0, "Ts": [1, 5, 20], "rounds": 150},
        "compare": {"kappa": 100.0, "T": 20, "rounds": 300},
        "noise": {"kappa": 10.0, "T": 20, "rounds": 100, "sigma": 1.0},
    },
    "full": {
        **_BASE,
        "seeds": 8,
        "tacc_kappas": [10.0, 31.6, 100.0, 316.0],
        "any_T": {"kappas": [10.0, 100.0, 1000.0], "Ts": [1, 5, 20, 100], "cap": 20_000},
        "unit_timeout_s": 1500,
    },
}


# ---------------------------------------------------------------------------------------------------- runs


@functools.lru_cache(maxsize=64)
def _problem(seed: int, kappa: float, n_clients: int, dim: int, center_std: float) -> Any:
    from optarium.distributed.federated import make_heterogeneous_ridge

    return make_heterogeneous_ridge(n_clients, dim, mu=1.0, L=kappa, center_std=center_std, seed=seed)


def _make(seed: int, kappa: float, config: Mapping[str, Any]) -> Any:
    pc = config["problem"]
    return _problem(int(seed), float(kappa), int(pc["n_clients"]), int(pc["dim"]), float(pc["center_std"]))


def _execute(jobs: list[tuple[str, Any, int, int, dict[str, Any]]], config: Mapping[str, Any]) -> list[Any]:
    """Run the jobs in this process (world size 1) or on ``world_size`` gloo processes; rank 0's results."""
    import warnings

    from optarium.distributed.comm import Communicator
    from optarium.distributed.launch import launch
    from optarium.distributed.spmd import spmd_batch

    ws = int(config.get("world_size", 1))
    m = int(config["problem"]["n_clients"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        if ws == 1:
            return spmd_batch(Communicator.local(m), jobs)
        return launch(spmd_batch, ws, jobs, n_clients=m, timeout_s=120.0)[0]


def _rounds_to_tol(out: Any, tol: float, cap: int) -> float:
    """First recorded round of the Result ``out`` with rel_gap <= tol, or cap + 1 (censored) if never."""
    for row in out.history.as_rows():
        if row.get("rel_gap", math.inf) <= tol:
            return float(row["step"])
    return float(cap + 1)


def _log_out(ctx: Any, out: Any, config: Mapping[str, Any], cap: int, **tags: float) -> None:
    """One summary record and a few curve records (rel_gap and bits against rounds) of one run's Result."""
    tol = float(config["tol"])
    hist = out.history.as_rows()
    with ctx.evaluating():
        n = len(hist)
        k = int(config["curve_points"])
        picks = sorted({min(n - 1, round((n - 1) * (i / k) ** 2)) for i in range(k + 1)}) if n else []
        for i in picks:
            row = hist[i]
            ctx.log(
                int(row["step"]),
                check_finite=False,
                curve=1,
                rel_gap=row.get("rel_gap", math.nan),
                uplink_bits=row["uplink_bits"],
                downlink_bits=row["downlink_bits"],
                **tags,
            )
        last = hist[-1] if hist else {}
        gaps = [r.get("rel_gap", math.nan) for r in hist]
        tail = gaps[-max(1, len(gaps) // 3) :]
        ctx.log(
            int(out.n_iter),
            check_finite=False,
            final=1,
            rounds_to_tol=_rounds_to_tol(out, tol, cap),
            converged=float(out.status == "converged"),
            diverged=float(out.status == "diverged"),
            final_gap=last.get("rel_gap", math.nan),
            floor_gap=statistics.median(tail) if tail else math.nan,
            uplink_bits=last.get("uplink_bits", math.nan),
            beta=float(out.extras["params"].get("beta", math.nan)),
            **tags,
        )


def _grid(method: str, p: Any) -> list[dict[str, Any]]:
    """The 4 configurations every tuned method gets."""
    if method == "acc-tuned":
        return [{"momentum": b} for b in (0.2, 0.4, 0.6, 0.8)]
    if method == "ga-tuned":
        return [{"accelerated": False, "dual_lr": s * p.mu} for s in (0.5, 1.0, 2.0, 4.0)]
    return [{"lr": s / (2 * p.L)} for s in (0.25, 0.5, 1.0, 2.0)]


def _kind(method: str) -> str:
    return {"fedavg": "fedavg", "scaffold": "scaffold"}.get(method, "dual")


@functools.lru_cache(maxsize=32)
def _tune(method: str, kappa: float, T: int, rounds: int, tol: float, problem: tuple[Any, ...]) -> int:
    """Index of the best of the 4 configurations on the tuning problem (fewest rounds, then smallest gap)."""
    import warnings

    from optarium.distributed.comm import Communicator
    from optarium.distributed.spmd import spmd_run

    p = _problem(_TUNE_SEED, kappa, *problem)
    _, f_star = p.optimum()
    scores = []
    for hp in _grid(method, p):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            out = spmd_run(
                Communicator.local(p.n_clients), _kind(method), p, rounds, T, f_star=f_star, tol=tol, **hp
            )
        gap = out.history.as_rows()[-1].get("rel_gap", math.inf)
        gap = gap if math.isfinite(gap) else math.inf
        scores.append((_rounds_to_tol(out, tol, rounds), gap))
    return min(range(len(scores)), key=lambda i: scores[i])


def run(ctx: Any, method: str, seed: int, config: Mapping[str, Any]) -> None:
    """Run unit (``method``, ``seed``): problem draw ``seed + 1`` (the tuning problem is seed 10000)."""
    from optarium.distributed.dual_accelerated_local_sgd import dual_parameters, round_spectral_radius

    pseed = seed + 1
    tol, cap = float(config["tol"]), int(config["cap"])
    jobs: list[tuple[str, Any, int, int, dict[str, Any]]] = []
    tags: list[dict[str, float]] = []
    caps: list[int] = []
    if method in ("acc-exact", "ga-exact", "acc-tacc"):
        kappas = config["tacc_kappas"] if method == "acc-tacc" else config["kappas"]
        for kappa in kappas:
            with ctx.untimed():
                p = _make(pseed, kappa, config)
                _, f_star = p.optimum()
                Ld, mud = p.dual_constants()
            kw: dict[str, Any] = {"f_star": f_star, "tol": tol}
            T = 1
            if method == "acc-tacc":
                T = int(dual_parameters(p.mu, p.L, 1, warn=False)["T_acc"])
            else:
                kw.update(
                    exact_inner=True, dual_lr=1 / Ld, kappa_d=Ld / mud, accelerated=method == "acc-exact"
                )
            jobs.append(("dual", p, cap, T, kw))
            tags.append({"kappa": kappa, "kappa_d": Ld / mud, "T": T, "L_d": Ld, "mu_d": mud})
            caps.append(cap)
    elif method == "ga-local":
        at = config["any_T"]
        for kappa in at["kappas"]:
            p = _make(pseed, kappa, config)
            _, f_star = p.optimum()
            for T in at["Ts"]:
                jobs.append(
                    ("dual", p, int(at["cap"]), int(T), {"accelerated": False, "f_star": f_star, "tol": tol})
                )
                tags.append({"kappa": kappa, "T": T})
                caps.append(int(at["cap"]))
    elif method == "acc-smallT":
        st = config["small_T"]
        p = _make(pseed, st["kappa"], config)
        _, f_star = p.optimum()
        for T in st["Ts"]:
            with ctx.evaluating():
                rho = round_spectral_radius(p, int(T), momentum="nesterov")
            jobs.append(
                ("dual", p, int(st["rounds"]), int(T), {"momentum": "nesterov", "f_star": f_star, "tol": tol})
            )
            tags.append({"kappa": st["kappa"], "T": T, "radius": rho})
            caps.append(int(st["rounds"]))
    elif method in TUNED:
        cp = config["compare"]
        pc = config["problem"]
        prob_key = (int(pc["n_clients"]), int(pc["dim"]), float(pc["center_std"]))
        with ctx.evaluating():
            best = _tune(method, float(cp["kappa"]), int(cp["T"]), int(cp["rounds"]), tol, prob_key)
        p = _make(pseed, cp["kappa"], config)
        _, f_star = p.optimum()
        hp = _grid(method, p)[best]
        jobs.append((_kind(method), p, int(cp["rounds"]), int(cp["T"]), {"f_star": f_star, "tol": tol, **hp}))
        with ctx.untimed():
            ev = torch.linalg.eigvalsh(p.H.sum(0))
        kappa_global = float(ev[-1] / ev[0])  # conditioning of F = sum_m F_m (drives SCAFFOLD / FedAvg)
        tags.append({"kappa": cp["kappa"], "T": cp["T"], "tuned_index": best, "kappa_global": kappa_global})
        caps.append(int(cp["rounds"]))
    elif method == "noise":
        nz = config["noise"]
        p = _make(pseed, nz["kappa"], config)
        _, f_star = p.optimum()
        for kind in ("dual", "fedavg"):
            for scale in (1.0, 0.5):
                kw = {"lr": scale / (2 * p.L), "noise_std": nz["sigma"], "seed": pseed, "f_star": f_star}
                if kind == "dual":
                    kw["accelerated"] = False
                jobs.append((kind, p, int(nz["rounds"]), int(nz["T"]), kw))
                tags.append(
                    {
                        "kappa": nz["kappa"],
                        "T": nz["T"],
                        "lr_scale": scale,
                        "is_fedavg": float(kind == "fedavg"),
                    }
                )
                caps.append(int(nz["rounds"]))
    else:
        raise ValueError(f"method: unknown {method!r}")
    outs = _execute(jobs, config)
    for out, tag, c in zip(outs, tags, caps, strict=True):
        _log_out(ctx, out, config, c, **tag)


# ---------------------------------------------------------------------------------------------------- verdict


def _finals(records: Sequence[Mapping[str, Any]], method: str) -> list[Mapping[str, Any]]:
    return select(records, method, final=1)


def _slopes(
    records: Sequence[Mapping[str, Any]], method: str, cap: int, key: str = "kappa_d"
) -> tuple[dict[int, float], set[int]]:
    """(seed -> slope of log(rounds to tol) on log(key), censored seeds).

    A seed with a run that hit the round cap (or lacks its figures) is censored: it gets no slope and is
    returned in the second set, so that the verdict can count it as a failure.
    """
    by: dict[int, list[tuple[float, float]]] = {}
    bad: set[int] = set()
    for r in _finals(records, method):
        s = int(r["seed"])
        if r.get("rounds_to_tol") is None or r["rounds_to_tol"] > cap or r.get(key) is None:
            bad.add(s)
            continue
        by.setdefault(s, []).append((math.log(float(r[key])), math.log(max(float(r["rounds_to_tol"]), 1.0))))
    slopes = {
        s: ols_slope([a for a, _ in v], [b for _, b in v])
        for s, v in by.items()
        if s not in bad and len(v) >= 2
    }
    return slopes, bad


def decide(records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> Verdict:
    """The rule of :data:`RULE`, with the context figures."""
    cap = int(config.get("cap", 10_000))
    figs: dict[str, Any] = {}
    acc, acc_cens = _slopes(records, "acc-exact", cap)
    ga, ga_cens = _slopes(records, "ga-exact", cap)
    for name, sl, cens in (("acc", acc, acc_cens), ("ga", ga, ga_cens)):
        m, se, half = mean_ci(list(sl.values()))
        figs.update(
            {f"{name}_slope": m, f"{name}_slope_se": se, f"{name}_slope_ci95": half, f"{name}_n": len(sl)}
        )
        figs[f"{name}_censored_seeds"] = len(cens)
        sk, _ = _slopes(records, f"{name}-exact", cap, key="kappa")
        figs[f"{name}_slope_vs_kappa"] = mean_ci(list(sk.values()))[0]
        figs[f"{name}_slope_vs_kappa_ci95"] = mean_ci(list(sk.values()))[2]
    paired = [ga[s] - acc[s] for s in sorted(set(acc) & set(ga))]
    dm, dse, _ = mean_ci(paired)
    figs.update({"slope_diff_ga_minus_acc": dm, "slope_diff_se": dse, "n_pairs": len(paired)})

    anyt = _finals(records, "ga-local")
    any_ok = bool(anyt) and all(r.get("converged") == 1 for r in anyt)
    figs["any_T_runs"] = len(anyt)
    figs["any_T_converged"] = sum(1 for r in anyt if r.get("converged") == 1)
    if anyt:
        figs["any_T_max_rounds"] = max(float(r["rounds_to_tol"]) for r in anyt)

    exact = {
        (int(r["seed"]), float(r["kappa"])): float(r["rounds_to_tol"]) for r in _finals(records, "acc-exact")
    }
    tacc = [
        (int(r["seed"]), float(r["kappa"]), float(r["rounds_to_tol"])) for r in _finals(records, "acc-tacc")
    ]
    ratios = [(rt, exact[(s, k)]) for s, k, rt in tacc if (s, k) in exact]
    tacc_ok = bool(ratios) and all(rt <= 1.2 * ex + 2 for rt, ex in ratios)
    figs["tacc_pairs"] = len(ratios)
    figs["tacc_within_1.2x_plus_2"] = sum(1 for rt, ex in ratios if rt <= 1.2 * ex + 2)
    if ratios:
        figs["tacc_max_ratio"] = max(rt / ex for rt, ex in ratios)

    # context: small-T with the exact-solve beta, the tuned T = 20 comparison, noise floors
    small = _finals(records, "acc-smallT")
    if small:
        figs["smallT_diverged_or_unconverged"] = sum(1 for r in small if r.get("converged") != 1)
        figs["smallT_runs"] = len(small)
        for T in sorted({int(r["T"]) for r in small}):
            radii = [float(r["radius"]) for r in small if int(r["T"]) == T]
            figs[f"smallT_T{T}_radius_mean"] = sum(radii) / len(radii)
    for m in TUNED:
        fin = _finals(records, m)
        if fin:
            figs[f"{m}_rounds_mean"] = sum(float(r["rounds_to_tol"]) for r in fin) / len(fin)
            figs[f"{m}_final_gap_median"] = statistics.median(float(r["final_gap"]) for r in fin)
            figs[f"{m}_uplink_bits_mean"] = sum(float(r["uplink_bits"]) for r in fin) / len(fin)
    kg = [float(r["kappa_global"]) for r in _finals(records, "scaffold") if r.get("kappa_global") is not None]
    if kg:
        figs["compare_kappa_global_mean"] = sum(kg) / len(kg)
    nz = _finals(records, "noise")
    for fed in (0.0, 1.0):
        floors = {
            float(r["lr_scale"]): [
                float(x["floor_gap"]) for x in nz if x["is_fedavg"] == fed and x["lr_scale"] == r["lr_scale"]
            ]
            for r in nz
            if r["is_fedavg"] == fed
        }
        name = "fedavg" if fed else "ga"
        if 1.0 in floors and 0.5 in floors:
            f1, f5 = statistics.median(floors[1.0]), statistics.median(floors[0.5])
            figs[f"noise_{name}_floor"] = f1
            figs[f"noise_{name}_floor_ratio_half_lr"] = f5 / f1 if f1 > 0 else math.nan

    a_m, g_m = figs["acc_slope"], figs["ga_slope"]
    a_se = figs["acc_slope_se"] if math.isfinite(figs["acc_slope_se"]) else math.inf
    # a censored seed (a run at the round cap) fails (ii) for its method
    in_acc = math.isfinite(a_m) and 0.35 <= a_m <= 0.65 and not acc_cens
    in_ga = math.isfinite(g_m) and 0.85 <= g_m <= 1.15 and not ga_cens
    diff_ok = len(paired) >= 2 and math.isfinite(dse) and dm > 2 * dse
    if anyt and not any_ok:
        outcome = "not reproduced"
    elif math.isfinite(a_m) and a_m - 2 * a_se > 0.65:
        outcome = "not reproduced"
    elif len(paired) >= 2 and math.isfinite(dse) and dm < -2 * dse:
        outcome = "not reproduced"
    elif any_ok and in_acc and in_ga and diff_ok and tacc_ok:
        outcome = "reproduced"
    else:
        outcome = "inconclusive"
    summary = (
        f"rounds ~ kappa_d^s: acc s = {a_m:.3f} ± {figs['acc_slope_ci95']:.3f} (95% CI, n={figs['acc_n']}), "
        f"GA-MSGD s = {g_m:.3f} ± {figs['ga_slope_ci95']:.3f}; censored seeds acc {len(acc_cens)}, "
        f"GA {len(ga_cens)}; GA - acc = {dm:.3f} ± {dse:.3f} (SE); "
        f"any-T GA-MSGD converged {figs['any_T_converged']}/{figs['any_T_runs']}; acc at T_acc within "
        f"1.2x+2 of exact {figs['tacc_within_1.2x_plus_2']}/{figs['tacc_pairs']}; exact-solve beta at "
        f"small T "
        f"failed {figs.get('smallT_diverged_or_unconverged', 0)}/{figs.get('smallT_runs', 0)} -> {outcome}"
    )
    return Verdict(outcome, figs, summary)


# ---------------------------------------------------------------------------------------------------- plots

_COLORS = {
    "acc-exact": "tab:red",
    "ga-exact": "tab:blue",
    "acc-tacc": "tab:orange",
    "acc-tuned": "tab:red",
    "ga-tuned": "tab:blue",
    "fedavg": "tab:gray",
    "scaffold": "tab:green",
}


def plot(records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> dict[str, Any]:
    """Rounds vs kappa_d (log-log), the tuned T = 20 curves against rounds and bits, GA-MSGD rounds vs T."""
    from matplotlib.figure import Figure

    figs: dict[str, Any] = {}
    fig = Figure(figsize=(6.0, 4.2))
    ax = fig.subplots()
    for m in ("acc-exact", "ga-exact", "acc-tacc"):
        fin = [r for r in _finals(records, m) if r.get("kappa_d") is not None]
        if fin:
            ax.scatter(
                [r["kappa_d"] for r in fin],
                [r["rounds_to_tol"] for r in fin],
                color=_COLORS[m],
                label=m,
                s=14,
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("exact dual condition number kappa_d")
    ax.set_ylabel(f"rounds to rel. gap {config.get('tol', 1e-6):g}")
    ax.set_title("round scaling (one point per seed and kappa)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    figs["rounds_vs_kappa"] = fig

    fig = Figure(figsize=(11.0, 4.0))
    axes = fig.subplots(1, 2)
    for m in TUNED:
        curves = select(records, m, curve=1)
        for s in sorted({int(r["seed"]) for r in curves}):
            rows = sorted((r for r in curves if int(r["seed"]) == s), key=lambda r: r["step"])
            ys = [max(float(r["rel_gap"]), 1e-16) if r.get("rel_gap") is not None else math.nan for r in rows]
            lab = m if s == 0 else None
            axes[0].plot([r["step"] for r in rows], ys, color=_COLORS[m], lw=1, alpha=0.7, label=lab)
            axes[1].plot([r["uplink_bits"] for r in rows], ys, color=_COLORS[m], lw=1, alpha=0.7, label=lab)
    for a, xl in zip(axes, ("communication rounds", "uplink bits per client"), strict=True):
        a.set_yscale("log")
        a.set_xlabel(xl)
        a.set_ylabel("relative gap")
        a.grid(alpha=0.3)
        a.legend(fontsize=8)
    fig.suptitle("T = 20 local steps, kappa = 100, tuned (4 configurations each)")
    figs["tuned_curves"] = fig

    fig = Figure(figsize=(6.0, 4.0))
    ax = fig.subplots()
    fin = _finals(records, "ga-local")
    for kappa in sorted({float(r["kappa"]) for r in fin}):
        pts = sorted((int(r["T"]), float(r["rounds_to_tol"])) for r in fin if float(r["kappa"]) == kappa)
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=14, label=f"GA-MSGD, kappa={kappa:g}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("local steps T")
    ax.set_ylabel("rounds to tolerance")
    ax.set_title("any T: GA-MSGD with local gradient descent")
    ax.grid(alpha=0.3, which="both")
    if fin:
        ax.legend(fontsize=8)
    figs["rounds_vs_T"] = fig
    return figs


EXPERIMENT = register(
    Experiment(
        slug="dual-accelerated-local-sgd",
        claim=CLAIM,
        rule=RULE,
        methods=METHODS,
        baselines=("ga-exact", "ga-local", "ga-tuned", "fedavg", "scaffold"),
        distributed_methods=METHODS,  # every unit runs through _execute, which honours config["world_size"]
        configs=CONFIGS,
        run=run,
        decide=decide,
        plot=plot,
        scaled_down=(
            "quadratic (ridge) clients with prescribed spectra, M=8, d=20, deterministic except the noise "
            "block; "
            "4 seeds (quick) / 8 (full); the paper's small-T parameters were not found, so acceleration is "
            "tested with exact solves or T >= T_acc and small-T acceleration is reported as context"
        ),
    )
)
