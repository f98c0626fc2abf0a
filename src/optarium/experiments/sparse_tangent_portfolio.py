"""Decision-focused sparse tangent portfolios vs historical and prediction-focused pipelines.

Paper: H. Jeon, S. Choi, H. Bae, Y. Lee, W. C. Kim, "Decision-focused Sparse Tangent Portfolio Optimization",
ICML 2026, arXiv:2607.00581. Claim: end-to-end DFL through a smooth exact-k top-k and a convex Sharpe layer
gives competitive and often higher out-of-sample Sharpe ratios than historical and prediction-focused
pipelines, with larger gains in larger universes. The pipeline is our reconstruction (see
:mod:`optarium.soft.sparse_tangent_portfolio`); the paper's markets are replaced by the S&P-20 prices that
skfolio ships (no download) and by synthetic factor universes.

Methods (same data, dates and seeds; one unit per method and seed, looping over the scale's settings):
``dfl`` (DecisionFocusedPortfolio, objective "dfl"), ``pf`` (the same predictor trained by MSE on the next
21-day mean, then hard top-k + the same QP), ``historical`` (rolling 252-day mean as mu-hat, top-k by
historical Sharpe mean/std, the same QP on Ledoit-Wolf covariance), ``equal-weight`` (1/N, constant weights).
Monthly (21-day) rebalancing, risk-free 0, no transaction costs, annualised Sharpe sqrt(252) mean/std.

Settings. S&P-20: train 2000-2012, validate 2013-2014, test 2015-2022. Synthetic (full only), the spec's
shared-loading model (:func:`optarium.problems.portfolio.synthetic_universe`): r_t = B f_t + alpha(z_t) +
eps_t, 5 factors, alpha_i = 2e-4 tanh(a' z_{i,t}) with three AR(1) signals per asset (persistence 0.95)
and one unit loading vector a shared by all assets; every predictor (dfl and pf) sees the signals z_{i,t-1}
as extra per-asset features beside the return features; a fresh draw per seed; 20 years train (last 2
validate), 10 years test (121 rebalances); metric: the model-implied (population) Sharpe of each decision
averaged over test rebalances.

Noise calibration of the shared-loading universe (2026-12-01, done before any method was run on it; no
DFL/baseline result on it was looked at). Rule, as in the earlier calibration: one common factor
``NOISE_SCALE`` = c multiplies both noise levels (factor vol 0.4 % and idiosyncratic vol 0.8 % daily at c =
1), the same for every n. The oracle is the spec's: the exact-k (k = 10) long-only max-Sharpe portfolio on
the true model (the true mean drift over each holding period, the true covariance), scored by the
model-implied annualised Sharpe and averaged over the 121 test rebalances and seeds 0-4.
:func:`~optarium.problems.portfolio.oracle_sharpe_bounds` brackets it (upper: the long-only tangency on all
n; lower: the long-only tangency re-solved on the top k of those weights or of alpha/sigma). Measured at c
= 1 (script /tmp/H_calib.py of the session, ``oracle_sharpe_bounds`` per seed): n = 20: 0.4275 (the bounds
coincide; exact enumeration with :func:`tangent_oracle` on 15 (seed, date) pairs equals them), n = 50:
0.5915-0.5949, n = 100: 0.7315-0.7647. Model Sharpe scales exactly as 1/c, and the oracle rises 1.75x from
n = 20 to n = 100, so no single c puts all three inside [1, 1.5]; c is the log-centre fit c = sqrt(O_20
O_100 / 1.5) with O_100 the midpoint of its bounds (0.748): 0.4617, rounded to 0.46 (factor vol 0.184 %,
idiosyncratic 0.368 %). Measured again at c = 0.46 (same script, before any method ran): 0.9294
(n = 20), 1.2859-1.2932 (n = 50), 1.5903-1.6624 (n = 100), as 1/c predicts. Quick and smoke: quick is
S&P-only and unchanged; the smoke synthetic check (n = 8) uses the same c.

The earlier universe (a loading a_i per asset that no feature revealed, 2 signals, persistence 0.98,
c = 0.52) is replaced because with it a permutation-equivariant predictor had nothing to learn (every
learned method sat near zero model Sharpe; its full verdict was inconclusive); the verdict rule is unchanged.

Full-scale budget (measured on the earlier universe, same sizes): one DFL fit at n = 100 (30 epochs x 7
batches of 32 plus validation) took 143 s of CPU, the pf fit 7.6 s; the full run took 11 min 36 s wall
(``jobs=2``), so epochs and batches are the spec's for every method. On the shared-loading universe
(2026-12-01, ``jobs=2``, 18 min wall on a shared machine) DFL units took 308-621 s of unit time, pf 8-18 s;
two DFL units (seed 1 at n = 100, seed 4 at n = 50) crashed in :func:`optarium.convex.capped_qp`
(``torch.linalg.lu_factor`` on a singular interior-point KKT matrix, batch of 32 with soft-mask entries of
1e-11-1e-10 just above the 1e-12 pin; pinning entries <= 1e-10 avoided it on the saved batch), so that
run recorded no full verdict.

Verdict rule (the spec's, stated before running). Per setting and baseline b: dSR_b = SR(dfl) - SR(b)
averaged over seeds; real data: SE by a stationary block bootstrap of the paired test days (mean block 21,
1,000 resamples, the same days for every method and seed); synthetic: SE across seeds. "better" if dSR >
2 SE, "worse" if < -2 SE, else "tie". Quick (S&P-20, k = 5, 2 seeds, 10 epochs): any "worse" against pf or
historical -> not reproduced; at least one "better" and no "worse" -> reproduced; ties -> inconclusive.
Full: not reproduced if any setting is "worse" against pf or historical; reproduced if none is and
G = dSR_pf(n = 100) - dSR_pf(n = 20) > 2 SE(G) on the synthetic universes; G < -2 SE(G) -> not reproduced;
otherwise inconclusive.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from optarium._core.seeding import derive_seed
from optarium.harness.experiment import Experiment, Verdict, register
from optarium.harness.verdicts import select
from optarium.problems.portfolio import sp500_returns, synthetic_universe

__all__ = [
    "EXPERIMENT",
    "block_bootstrap_indices",
    "decide",
    "paired_sharpe_gap",
    "plot",
    "run",
    "sp500_returns",
    "synthetic_universe",
]

CLAIM = (
    "Decision-focused learning through a smooth exact-k top-k and a convex Sharpe layer gives out-of-sample "
    "Sharpe ratios competitive with or above historical and prediction-focused sparse tangency pipelines, "
    "with larger gains in larger universes."
)
RULE = (
    "Per setting and baseline b, dSR_b = SR(dfl) - SR(b) (annualised, same test days, mean over seeds); SE "
    "from a stationary block bootstrap of paired test days (mean block 21, 1000 resamples, same days for all "
    "methods and seeds) on S&P-20, across seeds (model-implied Sharpe) on synthetic universes; better if "
    "dSR > 2 SE, worse if dSR < -2 SE, else tie. Quick: any worse vs pf or historical -> not reproduced; "
    ">= 1 better and no worse -> reproduced; else inconclusive. Full: any worse vs pf/historical -> not "
    "reproduced; else G = dSR_pf(n=100) - dSR_pf(n=20) on synthetic > 2 SE(G) -> reproduced, < -2 SE(G) -> "
    "not reproduced, else inconclusive."
)
METHODS = ("dfl", "pf", "historical", "equal-weight")
BASELINES = ("pf", "historical", "equal-weight")
_DECIDING = ("pf", "historical")

_SP = {"data": "sp500", "k": 5, "train": (2000, 2012), "val": (2013, 2014), "test": (2015, 2022)}
_TRAIN = {"epochs": 10, "lr": 1e-3, "batch_size": 32}

CONFIGS: dict[str, dict[str, Any]] = {
    "smoke": {
        "seeds": 2,
        "settings": [
            {"data": "sp500", "k": 3, "train": (2010, 2011), "val": (2012, 2012), "test": (2013, 2013)},
            {"data": "synthetic", "n": 8, "k": 3, "years_train": 2, "years_test": 1},
        ],
        "train": {"epochs": 1, "lr": 1e-3, "batch_size": 16},
        "bootstrap": 50,
    },
    "quick": {"seeds": 2, "settings": [_SP], "train": _TRAIN, "bootstrap": 1000},
    "full": {
        "seeds": 5,
        "sp500_seeds": 3,
        "settings": [
            {**_SP, "k": 3},
            _SP,
            {**_SP, "k": 10},
            *(
                {"data": "synthetic", "n": n, "k": 10, "years_train": 20, "years_test": 10}
                for n in (20, 50, 100)
            ),
        ],
        "train": {"epochs": 30, "lr": 1e-3, "batch_size": 32},
        "bootstrap": 1000,
        "unit_timeout_s": 1700,
    },
}
HORIZON = 21
#: The synthetic noise calibration and the data live in :mod:`optarium.problems.portfolio`.


# ==========================================================================================================
# data
# ==========================================================================================================


def _rebalance(first: int, last: int) -> torch.Tensor:
    return torch.arange(first, last + 1, HORIZON)


def _sp_dates(setting: Mapping[str, Any]) -> tuple[torch.Tensor, ...]:
    _, years = sp500_returns()
    yrs = torch.tensor(years)

    def span(lo: int, hi: int, tail: int) -> torch.Tensor:
        idx = ((yrs >= lo) & (yrs <= hi)).nonzero().squeeze(-1)
        return _rebalance(int(idx[0]), int(idx[-1]) - tail)

    tr, va, te = setting["train"], setting["val"], setting["test"]
    return span(*tr, HORIZON), span(*va, HORIZON), span(*te, 0)


# ==========================================================================================================
# methods
# ==========================================================================================================


def _historical_weights(returns: torch.Tensor, dates: torch.Tensor, k: int) -> torch.Tensor:
    from optarium.soft.sparse_tangent_portfolio import hard_topk_mask, ledoit_wolf, sparse_tangent_weights

    win = returns[dates.unsqueeze(-1) + torch.arange(-252, 0)]
    mu = win.mean(1)
    mask = hard_topk_mask(mu / win.std(1), k)
    chol = torch.linalg.cholesky(ledoit_wolf(win))
    return sparse_tangent_weights(mu, chol, mask)


def _weights(
    method: str,
    returns: torch.Tensor,
    dates: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    k: int,
    seed: int,
    train: Mapping[str, Any],
    extra: torch.Tensor | None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Test-date weights (len(test), n) of ``method`` and diagnostics."""
    from optarium.soft.sparse_tangent_portfolio import DecisionFocusedPortfolio

    tr, va, te = dates
    n = returns.shape[1]
    if method == "equal-weight":
        return torch.full((len(te), n), 1.0 / n, dtype=torch.float64), {}
    if method == "historical":
        return _historical_weights(returns, te, k), {}
    model = DecisionFocusedPortfolio(
        k,
        objective="dfl" if method == "dfl" else "mse",
        lr=float(train["lr"]),
        epochs=int(train["epochs"]),
        batch_size=int(train["batch_size"]),
        seed=derive_seed(seed, "stp-model"),
        extra=extra,
    )
    model.fit(returns, tr, va)
    best = max((h.get("val_sharpe", -math.inf) for h in model.history), default=math.nan)
    return model.weights(returns, te), {
        "val_sharpe": best,
        "fallback_rate": model.layer.last_info.fallback_rate,
    }


def run(ctx: Any, method: str, seed: int, config: Mapping[str, Any]) -> None:
    """One (method, seed) unit over every setting of the scale: log test-day returns and the final Sharpe."""
    from optarium.soft.sparse_tangent_portfolio import hold_returns

    if method not in METHODS:
        raise ValueError(f"method: unknown {method!r}")
    for si, setting in enumerate(config["settings"]):
        k = int(setting["k"])
        if setting["data"] == "sp500":
            if seed >= int(config.get("sp500_seeds", config["seeds"])):
                continue
            with ctx.untimed():
                returns, _ = sp500_returns()
                dates = _sp_dates(setting)
            w, diag = _weights(method, returns, dates, k, seed, config["train"], None)
            with ctx.evaluating():
                daily = hold_returns(returns, dates[2], w, HORIZON)
                sr = float(daily.mean() / daily.std()) * math.sqrt(252)
                for d, r in enumerate(daily.tolist()):
                    ctx.log(d, setting=si, day_return=r)
                ctx.log(len(daily), setting=si, test_sharpe=sr, k=k, n=returns.shape[1], **diag)
        else:
            n = int(setting["n"])
            ytr, yte = int(setting["years_train"]), int(setting["years_test"])
            days = 252 * (1 + ytr + yte) + HORIZON
            with ctx.untimed():
                uni = synthetic_universe(seed, n, days)
                returns = uni["returns"]
                t_val = 252 * (1 + ytr - max(1, ytr // 10))
                t_test = 252 * (1 + ytr)
                tr = _rebalance(252, t_val - HORIZON)
                va = _rebalance(t_val, t_test - HORIZON)
                te = _rebalance(t_test, days - HORIZON)
            w, diag = _weights(method, returns, (tr, va, te), k, seed, config["train"], uni["signals"])
            with ctx.evaluating():
                alpha_bar = uni["alpha"][te.unsqueeze(-1) + torch.arange(HORIZON)].mean(1)
                sig = uni["sigma"]
                pop = (w * alpha_bar).sum(-1) / (w @ sig * w).sum(-1).sqrt() * math.sqrt(252)
                daily = hold_returns(returns, te, w, HORIZON)
                ctx.log(
                    len(te),
                    setting=si,
                    model_sharpe=float(pop.mean()),
                    test_sharpe=float(daily.mean() / daily.std()) * math.sqrt(252),
                    k=k,
                    n=n,
                    **diag,
                )


# ==========================================================================================================
# statistics and verdict
# ==========================================================================================================


def block_bootstrap_indices(t: int, resamples: int, mean_block: float = 21.0, seed: int = 0) -> torch.Tensor:
    """Stationary (Politis-Romano) bootstrap day indices (resamples, t): blocks of geometric length with
    mean ``mean_block``, wrapping around the end."""
    g = torch.Generator().manual_seed(derive_seed(seed, "stp-bootstrap", t))
    start = torch.randint(t, (resamples, t), generator=g)
    new_block = torch.rand(resamples, t, generator=g) < 1.0 / mean_block
    new_block[:, 0] = True
    # position within the current block: days since the last block start
    pos = torch.arange(t).expand(resamples, t)
    last = torch.where(new_block, pos, torch.zeros_like(pos)).cummax(-1).values
    return (torch.gather(start, 1, last) + (pos - last)) % t


def _sharpe(x: torch.Tensor) -> torch.Tensor:
    return x.mean(-1) / x.std(-1) * math.sqrt(252)


def paired_sharpe_gap(
    method: Mapping[int, torch.Tensor], baseline: Mapping[int, torch.Tensor], idx: torch.Tensor
) -> tuple[float, float, int]:
    """(mean over seeds of SR(method) - SR(baseline), bootstrap SE, n seeds) on paired daily returns."""
    seeds = sorted(set(method) & set(baseline))
    if not seeds:
        return math.nan, math.nan, 0
    gap = sum(float(_sharpe(method[s]) - _sharpe(baseline[s])) for s in seeds) / len(seeds)
    boot = torch.stack([_sharpe(method[s][idx]) - _sharpe(baseline[s][idx]) for s in seeds]).mean(0)
    return gap, float(boot.std()), len(seeds)


def _label(gap: float, se: float) -> str:
    if not (math.isfinite(gap) and math.isfinite(se)):
        return "tie"
    return "better" if gap > 2 * se else "worse" if gap < -2 * se else "tie"


def decide(records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> Verdict:
    """The verdict by :data:`RULE`."""
    figures: dict[str, Any] = {}
    labels: dict[tuple[int, str], str] = {}
    synth: dict[int, dict[str, float]] = {}
    for si, setting in enumerate(config["settings"]):
        tag = f"s{si}_{setting['data']}_k{setting['k']}" + (f"_n{setting['n']}" if "n" in setting else "")
        if setting["data"] == "sp500":
            series: dict[str, dict[int, list[tuple[int, float]]]] = {}
            for r in select(records, has="day_return", setting=si):
                series.setdefault(r["method"], {}).setdefault(int(r["seed"]), []).append(
                    (int(r["step"]), float(r["day_return"]))
                )
            ret = {
                m: {
                    s: torch.tensor([v for _, v in sorted(pts)], dtype=torch.float64) for s, pts in by.items()
                }
                for m, by in series.items()
            }
            if "dfl" not in ret:
                continue
            t = min(len(x) for by in ret.values() for x in by.values())
            idx = block_bootstrap_indices(t, int(config.get("bootstrap", 1000)))
            for b in BASELINES:
                if b not in ret:
                    continue
                dfl = {s: x[:t] for s, x in ret["dfl"].items()}
                base = {s: x[:t] for s, x in ret[b].items()}
                gap, se, _ = paired_sharpe_gap(dfl, base, idx)
                labels[(si, b)] = _label(gap, se)
                figures.update(
                    {f"{tag}_dSR_{b}": gap, f"{tag}_se_{b}": se, f"{tag}_label_{b}": labels[(si, b)]}
                )
            figures[f"{tag}_sr_dfl"] = sum(float(_sharpe(x)) for x in ret["dfl"].values()) / len(ret["dfl"])
        else:
            finals: dict[str, dict[int, float]] = {}
            for r in select(records, has="model_sharpe", setting=si):
                finals.setdefault(r["method"], {})[int(r["seed"])] = float(r["model_sharpe"])
            if "dfl" not in finals:
                continue
            for b in BASELINES:
                seeds = sorted(set(finals["dfl"]) & set(finals.get(b, {})))
                diffs = [finals["dfl"][s] - finals[b][s] for s in seeds]
                if len(diffs) < 2:
                    continue
                mean = sum(diffs) / len(diffs)
                se = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1) / len(diffs))
                labels[(si, b)] = _label(mean, se)
                figures.update(
                    {f"{tag}_dSR_{b}": mean, f"{tag}_se_{b}": se, f"{tag}_label_{b}": labels[(si, b)]}
                )
                if b == "pf":
                    synth[int(setting["n"])] = {"mean": mean, "se": se}
    worse = [key for key, lab in labels.items() if key[1] in _DECIDING and lab == "worse"]
    better = [key for key, lab in labels.items() if lab == "better"]
    figures["n_worse_vs_pf_or_historical"] = len(worse)
    figures["n_better"] = len(better)
    has_synth = any(s["data"] == "synthetic" for s in config["settings"])
    g = se_g = math.nan
    if has_synth and len(synth) >= 2:  # reported even when a "worse" label decides the verdict
        ns = sorted(synth)
        g = synth[ns[-1]]["mean"] - synth[ns[0]]["mean"]
        se_g = math.sqrt(synth[ns[-1]]["se"] ** 2 + synth[ns[0]]["se"] ** 2)  # independent draws per n
        figures.update({"G_universe_effect": g, "G_se": se_g})
    if not labels:
        return Verdict("inconclusive", figures, "no paired comparison could be formed")
    if worse:
        return Verdict(
            "not reproduced", figures, f"DFL worse than pf/historical in {len(worse)} comparison(s)"
        )
    if math.isfinite(g):
        if g > 2 * se_g:
            return Verdict("reproduced", figures, f"no worse; G = {g:.3f} > 2 SE ({se_g:.3f})")
        if g < -2 * se_g:
            return Verdict("not reproduced", figures, f"G = {g:.3f} < -2 SE ({se_g:.3f})")
        return Verdict("inconclusive", figures, f"no worse; G = {g:.3f} within 2 SE ({se_g:.3f})")
    if better:
        return Verdict("reproduced", figures, f"{len(better)} better, none worse")
    return Verdict("inconclusive", figures, "ties throughout (a pipeline check at this power)")


def plot(records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> dict[str, Any]:
    """Cumulative test returns per method (S&P settings, seed 0) and the test Sharpe ratios."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.0, 4.0))
    ax = fig.subplots()
    for m in METHODS:
        pts = sorted(
            (int(r["step"]), float(r["day_return"]))
            for r in records
            if r.get("method") == m and r.get("seed") == 0 and r.get("setting") == 0 and "day_return" in r
        )
        if pts:
            cum = torch.tensor([v for _, v in pts]).add(1).cumprod(0)
            ax.plot(cum.tolist(), label=m)
    ax.set_xlabel("test day")
    ax.set_ylabel("wealth")
    ax.set_title("setting 0, seed 0: cumulative test returns")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig2 = Figure(figsize=(7.0, 4.0))
    ax2 = fig2.subplots()
    for i, m in enumerate(METHODS):
        vals = [float(r["test_sharpe"]) for r in records if r.get("method") == m and "test_sharpe" in r]
        ax2.scatter([i] * len(vals), vals, s=14)
    ax2.set_xticks(range(len(METHODS)), list(METHODS))
    ax2.set_ylabel("annualised test Sharpe (all settings and seeds)")
    ax2.grid(alpha=0.3)
    return {"cumulative_returns": fig, "test_sharpe": fig2}


EXPERIMENT = register(
    Experiment(
        slug="sparse-tangent-portfolio",
        claim=CLAIM,
        rule=RULE,
        methods=METHODS,
        baselines=BASELINES,
        configs=CONFIGS,
        run=run,
        decide=decide,
        plot=plot,
        scaled_down=(
            "S&P-20 from skfolio instead of four markets; synthetic factor universes n in {20, 50, 100} for "
            "the universe-size effect (full only; drift from observable signals with one shared loading, the "
            "signals in the features); predictor, top-k operator, solver and hyperparameters are "
            "the spec's reconstruction (paper details not found); quick: k=5, 2 seeds, 10 epochs; synthetic "
            "noise x0.46 so the exact-k population oracle Sharpe is 0.93 / 1.29 / 1.59-1.66 (n = 20/50/100); "
            "full uses the spec's 30 epochs and batch 32 (not shrunk)"
        ),
    )
)
