r"""cvar-quantile-pg: does the quantile-gradient augmentation reach the CVaR optimum with fewer episodes?

Paper: Luo & Delage, "Boosting CVaR Policy Optimization with Quantile Gradients", ICML 2026,
arXiv:2601.22100 (method: :mod:`optarium.rl.cvar_quantile`, a reconstruction, see its docstring).

**Problem** (spec, ours): the guarded-shortcut gridworld :class:`optarium.rl.cvar_envs.GuardedGrid`
(short route: mean -8 - 90p, CVaR_0.1 = -40.2 at p = 0.05; long route: -14 surely), tabular softmax policy,
SGD lr 0.1, N episodes per iteration. Exact CVaR_alpha of the stochastic policy (forward DP) every
``eval_every`` iterations.

**Methods** (same seed -> same rollout stream): ours (``cvar-qpg``, lam = 1, local quantile advantage from
a tabular quantile critic over (cell, remaining time) on a 32-level grid), CVaR-PG (lam = 0), REINFORCE;
full adds ours with the history-aware budget advantage (``cvar-qpg-budget``), the Monte-Carlo quantile PG
over the tail (QPO-style, no critic) and the CVaR methods the paper positions itself against: CeSoR
(soft risk + cross-entropy sampling of the guard, Greenberg et al. 2022), MIX (mixture policy, Luo et al.
2024) and predictive CVaR PG (Kim & Min 2024), each with its source's defaults and the same (untuned)
step size as ours (see :mod:`optarium.rl.cvar_quantile`).

**Rule** (stated up front, the spec's): per run, E = episodes until the exact CVaR_alpha closes 75% of the gap
from the short route's CVaR_alpha to -14 and the safe-route probability (reach G without entering a guarded
cell) is >= 0.9, both holding at all later checkpoints (censored at the budget). Per (p, alpha) setting,
d = log2(E_CVaR-PG / E_ours) per paired seed. Reproduced if mean d >= 1 and mean d > 2 s.e. in >= 2/3 of the
settings and ours' final exact CVaR >= CVaR-PG's - 2 s.e. (paired) in every setting; not reproduced if mean
d <= 0 in >= 2/3 of the settings or ours fails the criterion on most seeds; else inconclusive. Control: the
exact laws show the short route has the higher mean and the long route the higher CVaR_alpha in every
setting. Reported beside the rule (not part of it): the same paired d of every other CVaR method against
ours (``s{i}:d_vs_<method>``).

**Scaled down / missing**: quick is the single setting (p, alpha) = (0.05, 0.1), 200 iterations, 5 seeds,
methods ours / CVaR-PG / REINFORCE (the other baselines would take quick past its 60 CPU-s budget; they run
in full). Full adds RiskyPointNav (:mod:`optarium.rl.cvar_pointnav`: continuous 2-D navigation, MLP policy
over 8 headings, MLP quantile critic with a cosine level embedding; ours / CVaR-PG / REINFORCE, N = 64,
300 Adam iterations, 3 seeds, CVaR by Monte Carlo on 2048 episodes); its final CVaR difference (ours -
CVaR-PG, paired) is reported beside the rule, not part of it (the spec gives no criterion there). The
paper's own domains are unknown.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any

from optarium.harness.experiment import Experiment, Verdict, register
from optarium.harness.stats import mean_se, records_final
from optarium.harness.verdicts import by_step

__all__ = ["CONFIGS", "EXPERIMENT", "decide", "plot", "run"]

CLAIM = (
    "Augmenting CVaR-PG with a dynamic-programming quantile gradient from a state-only quantile critic "
    "reaches "
    "the CVaR-optimal (safe) behaviour with substantially fewer sampled trajectories than CVaR-PG."
)
RULE = (
    "E = episodes until exact CVaR_alpha closes 75% of the gap from the short route's CVaR to -14 with "
    "safe-route probability >= 0.9, holding thereafter (censored at the budget); d = log2(E_CVaR-PG/E_ours) "
    "per paired seed. Reproduced if mean d >= 1 and > 2 s.e. in >= 2/3 of settings and ours' final CVaR >= "
    "CVaR-PG's - 2 s.e. everywhere; not reproduced if mean d <= 0 in >= 2/3 of settings or ours fails the "
    "criterion on most seeds; otherwise inconclusive."
)
PRIMARY = "cvar-qpg"
METHODS = ("cvar-qpg", "cvar-pg", "reinforce", "qpo", "cvar-qpg-budget", "cesor", "mix", "pcvar")
BASELINES = ("cvar-pg", "reinforce", "qpo", "cesor", "mix", "pcvar")
OTHER_CVAR = ("cvar-qpg-budget", "qpo", "cesor", "mix", "pcvar")
PN_METHODS = ("cvar-qpg", "cvar-pg", "reinforce")
_BASE: dict[str, Any] = {"n_episodes": 32, "eval_every": 10, "lam": 1.0, "horizon": 40, "actor_lr": 0.1}
CONFIGS: dict[str, dict[str, Any]] = {
    "smoke": {
        **_BASE,
        "settings": [[0.05, 0.1]],
        "iters": 4,
        "seeds": 2,
        "methods": list(METHODS),
        "pointnav": {"n_episodes": 16, "iters": 2, "seeds": 1, "alpha": 0.1, "eval_every": 2, "n_eval": 64},
    },
    "quick": {**_BASE, "settings": [[0.05, 0.1]], "iters": 200, "seeds": 5, "methods": list(METHODS[:3])},
    "full": {
        **_BASE,
        "n_episodes": 64,
        "settings": [[p, a] for p in (0.03, 0.05) for a in (0.05, 0.1, 0.2)],
        "iters": 400,
        "seeds": 5,
        "methods": list(METHODS),
        "pointnav": {
            "n_episodes": 64,
            "iters": 300,
            "seeds": 3,
            "alpha": 0.1,
            "eval_every": 25,
            "n_eval": 2048,
        },
    },
}


@functools.lru_cache(maxsize=32)
def _route_stats(p: float, alpha: float, horizon: int) -> dict[str, float]:
    """Exact short-route mean and CVaR_alpha and the criterion's threshold (cached: every unit asks)."""
    import torch

    from optarium.rl.cvar_envs import GuardedGrid, exact_return_law
    from optarium.rl.cvar_quantile import law_cvar

    env = GuardedGrid(p=p, horizon=horizon)
    short = torch.zeros(env.n_cells, 4, dtype=torch.float64)
    short[:, 1] = 1.0
    v, q = exact_return_law(env, short)
    s_cvar = float(law_cvar(v, q, alpha))
    return {
        "short_mean": float((v * q).sum()),
        "short_cvar": s_cvar,
        "long": -14.0,
        "threshold": s_cvar + 0.75 * (-14.0 - s_cvar),
    }


def run(ctx: Any, method: str, seed: int, config: Mapping[str, Any]) -> None:
    """One method and seed on every (p, alpha) setting: the exact-CVaR curve and the episodes-to-criterion."""
    from optarium.rl.cvar_envs import GuardedGrid
    from optarium.rl.cvar_quantile import train

    n, iters = int(config["n_episodes"]), int(config["iters"])
    for i, (p, alpha) in enumerate(config["settings"]):
        with ctx.untimed():
            env = GuardedGrid(p=float(p), horizon=int(config["horizon"]))
            thr = _route_stats(float(p), float(alpha), int(config["horizon"]))["threshold"]
        name = "cvar-qpg" if method in ("cvar-qpg", "cvar-pg", "cvar-qpg-budget") else method
        lam = float(config["lam"]) if method in ("cvar-qpg", "cvar-qpg-budget") else 0.0
        res = train(
            env,
            name,
            alpha=float(alpha),
            lam=lam,
            quantile_advantage="budget" if method == "cvar-qpg-budget" else "local",
            n_episodes=n,
            iters=iters,
            actor_lr=float(config["actor_lr"]),
            eval_every=int(config["eval_every"]),
            seed=seed,
        )
        with ctx.evaluating():
            evals = res.extras["evals"]
            ok = [e[1] >= thr and e[3] >= 0.9 for e in evals]
            first = len(ok)
            for j in range(len(ok) - 1, -1, -1):
                if not ok[j]:
                    break
                first = j
            E = evals[first][0] * n if first < len(ok) else float(iters * n)
            for e in evals:
                ctx.log(int(e[0]) * n, **{f"cvar_s{i}": e[1], f"mean_s{i}": e[2], f"safe_s{i}": e[3]})
            ctx.log(
                iters * n + 1,
                **{f"E_s{i}": E, f"final_cvar_s{i}": evals[-1][1], f"met_s{i}": float(first < len(ok))},
            )
    pn = config.get("pointnav")
    if pn and method in PN_METHODS and seed < int(pn["seeds"]):
        _run_pointnav(ctx, method, seed, config, pn)


def _run_pointnav(ctx: Any, method: str, seed: int, config: Mapping[str, Any], pn: Mapping[str, Any]) -> None:
    """RiskyPointNav (MLP policy and critic): Monte-Carlo CVaR / mean / safe fraction curves and finals."""
    from optarium.rl.cvar_pointnav import RiskyPointNav, train_pointnav

    n, iters = int(pn["n_episodes"]), int(pn["iters"])
    res = train_pointnav(
        RiskyPointNav(),
        "reinforce" if method == "reinforce" else "cvar-qpg",
        alpha=float(pn["alpha"]),
        lam=float(config["lam"]) if method == "cvar-qpg" else 0.0,
        n_episodes=n,
        iters=iters,
        eval_every=int(pn["eval_every"]),
        n_eval=int(pn["n_eval"]),
        seed=seed,
    )
    with ctx.evaluating():
        evals = res.extras["evals"]
        for e in evals:
            ctx.log(int(e[0]) * n, pn_cvar=e[1], pn_mean=e[2], pn_safe=e[3])
        ctx.log(
            iters * n + 1, pn_final_cvar=evals[-1][1], pn_final_mean=evals[-1][2], pn_final_safe=evals[-1][3]
        )


def decide(records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> Verdict:
    """The stated rule (module docstring)."""
    figures: dict[str, Any] = {}
    n_set = len(config["settings"])
    wins = losses = 0
    cvar_ok = control_ok = True
    fails_most = False
    for i, (p, alpha) in enumerate(config["settings"]):
        rs = _route_stats(float(p), float(alpha), int(config["horizon"]))
        figures[f"s{i}:short_mean"] = rs["short_mean"]
        figures[f"s{i}:short_cvar"] = rs["short_cvar"]
        control_ok &= rs["short_mean"] > -14.0 and rs["short_cvar"] < -14.0
        for m in config["methods"]:
            Ev = records_final(records, f"E_s{i}", m)
            if Ev:
                figures[f"s{i}:{m}:E_mean"] = sum(Ev.values()) / len(Ev)
                fc = records_final(records, f"final_cvar_s{i}", m)
                figures[f"s{i}:{m}:final_cvar"] = sum(fc.values()) / len(fc)
                met = records_final(records, f"met_s{i}", m)
                figures[f"s{i}:{m}:met"] = sum(met.values())
        eo, ec = records_final(records, f"E_s{i}", PRIMARY), records_final(records, f"E_s{i}", "cvar-pg")
        seeds = sorted(set(eo) & set(ec))
        d = [math.log2(ec[s] / eo[s]) for s in seeds]
        md, se = mean_se(d)
        figures[f"s{i}:d_mean"], figures[f"s{i}:d_se"] = md, se
        for m in OTHER_CVAR:
            em = records_final(records, f"E_s{i}", m) if m in config["methods"] else {}
            dm = [math.log2(em[s] / eo[s]) for s in sorted(set(eo) & set(em))]
            if dm:
                figures[f"s{i}:d_vs_{m}"], figures[f"s{i}:d_vs_{m}_se"] = mean_se(dm)
        if d and md >= 1 and (se != se or md > 2 * se):
            wins += 1
        if d and md <= 0:
            losses += 1
        fo = records_final(records, f"final_cvar_s{i}", PRIMARY)
        fp = records_final(records, f"final_cvar_s{i}", "cvar-pg")
        diff = [fo[s] - fp[s] for s in sorted(set(fo) & set(fp))]
        mdiff, sediff = mean_se(diff)
        figures[f"s{i}:final_cvar_diff"], figures[f"s{i}:final_cvar_diff_se"] = mdiff, sediff
        cvar_ok &= bool(diff) and mdiff >= -2 * (sediff if sediff == sediff else 0.0)
        met = records_final(records, f"met_s{i}", PRIMARY)
        if met and sum(met.values()) < len(met) / 2:
            fails_most = True
    figures["settings_won"], figures["settings_lost"] = wins, losses
    figures["control_ok"] = bool(control_ok)
    if config.get("pointnav"):
        for m in PN_METHODS:
            for key in ("cvar", "mean", "safe"):
                vals = records_final(records, f"pn_final_{key}", m)
                if vals:
                    figures[f"pn:{m}:final_{key}"] = sum(vals.values()) / len(vals)
        fo, fp = (
            records_final(records, "pn_final_cvar", PRIMARY),
            records_final(records, "pn_final_cvar", "cvar-pg"),
        )
        diff = [fo[s] - fp[s] for s in sorted(set(fo) & set(fp))]
        if diff:
            figures["pn:final_cvar_diff"], figures["pn:final_cvar_diff_se"] = mean_se(diff)
    if not control_ok:
        outcome = "inconclusive"
    elif losses >= 2 * n_set / 3 or fails_most:
        outcome = "not reproduced"
    elif wins >= 2 * n_set / 3 and cvar_ok:
        outcome = "reproduced"
    else:
        outcome = "inconclusive"
    parts = []
    for i in range(n_set):
        parts.append(
            f"setting {config['settings'][i]}: d = {figures[f's{i}:d_mean']:.2f} +- "
            f"{figures[f's{i}:d_se']:.2f}, "
            f"E ours {figures.get(f's{i}:{PRIMARY}:E_mean', math.nan):.0f} vs CVaR-PG "
            f"{figures.get(f's{i}:cvar-pg:E_mean', math.nan):.0f} episodes, final CVaR ours "
            f"{figures.get(f's{i}:{PRIMARY}:final_cvar', math.nan):.2f} vs "
            f"{figures.get(f's{i}:cvar-pg:final_cvar', math.nan):.2f}"
        )
        others = [f"{m} {figures[f's{i}:d_vs_{m}']:.2f}" for m in OTHER_CVAR if f"s{i}:d_vs_{m}" in figures]
        if others:
            parts[-1] += " (d of ours vs " + ", ".join(others) + ")"
    if "pn:final_cvar_diff" in figures:
        parts.append(
            f"RiskyPointNav (reported, not in the rule): final MC CVaR ours "
            f"{figures.get(f'pn:{PRIMARY}:final_cvar', math.nan):.2f} vs CVaR-PG "
            f"{figures.get('pn:cvar-pg:final_cvar', math.nan):.2f} (paired diff "
            f"{figures['pn:final_cvar_diff']:.2f} +- {figures['pn:final_cvar_diff_se']:.2f})"
        )
    return Verdict(outcome, figures, "; ".join(parts))


def plot(records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> dict[str, Any]:
    """Exact CVaR_alpha of the stochastic policy vs episodes, mean over seeds, one panel per setting."""
    from optarium.harness.figures import panel_grid

    n_set = len(config["settings"])
    fig, axes = panel_grid(n_set)
    for i, ax in enumerate(axes[:n_set]):
        for c, m in enumerate(config["methods"]):
            pts = by_step(records, f"cvar_s{i}", m)
            xs = sorted(pts)
            ax.plot(xs, [sum(pts[x]) / len(pts[x]) for x in xs], color=f"C{c}", label=m)
        p, a = config["settings"][i]
        ax.axhline(-14.0, color="k", ls=":", lw=0.8)
        ax.set_title(f"p = {p}, alpha = {a}")
        ax.set_xlabel("episodes sampled")
        ax.set_ylabel("exact CVaR_alpha")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    return {"cvar_curves": fig}


EXPERIMENT = register(
    Experiment(
        slug="cvar-quantile-pg",
        claim=CLAIM,
        rule=RULE,
        methods=METHODS,
        baselines=BASELINES,
        configs=CONFIGS,
        run=run,
        decide=decide,
        plot=plot,
        scaled_down=(
            "quick: the guarded-shortcut gridworld (tabular) only, one (p, alpha) setting, 200 iterations, "
            "5 seeds, ours / CVaR-PG / REINFORCE (budget advantage, QPO, CeSoR, MIX, predictive CVaR-PG in "
            "full only; RiskyPointNav in full only, reported beside the rule)"
        ),
    )
)
