r"""MoSSP: does the momentum single-loop stochastic penalty method find feasible KKT points of a DC problem?

Paper: Luxuan Li, Xiao Wang, Chunfeng Cui, "MoSSP: A Momentum-Based Single-Loop Stochastic Penalty Method for
Nonconvex Constrained DC-Regularized Optimization", ICML 2026, arXiv:2605.29635. Claim: a single-loop
stochastic
method (Polyak or recursive momentum) finds stochastic :math:`\varepsilon`-KKT points of nonconvex-constrained
DC-regularised problems (:math:`O(\varepsilon^{-4})` / :math:`O(\varepsilon^{-3})` oracle calls) and works
well
in practice. The method is :func:`optarium.stochastic.mossp` (its update rules are our reconstruction, see
that
module); the paper's experiments were not visible, so the problem and baselines are the spec's (``mossp.md``).

**Problem (quick and full).** Sparse PCA on the sphere with an :math:`\ell_1 - \ell_2` regulariser:
:math:`\min_x -E[(a^\top x)^2] + \tau(\|x\|_1 - \|x\|_2)` s.t. :math:`\|x\|^2 - 1 = 0`, with
:math:`a \sim N(0, I + \omega vv^\top)`, :math:`v` a 10-sparse unit vector in d = 100, :math:`\omega = 2`,
:math:`\tau = 0.1` (:math:`h = \tau\|\cdot\|_1`, :math:`g = \tau\|\cdot\|_2`, :math:`c(x) = \|x\|^2 - 1`);
minibatches of 16 samples; a budget of 2e5 per-sample stochastic-gradient evaluations (Polyak: 12 500
iterations; STORM: 6250, two evaluations per iteration). Per seed: v, the start :math:`x_0` (a random unit
vector) and the data stream are shared by every method (paired seeds).

**Methods** (defaults fixed up front, none tuned per method; :math:`\beta = 600`, :math:`\lambda_{max} = 3`):

- ``mossp-polyak`` / ``mossp-storm``: :func:`~optarium.stochastic.mossp`, :math:`\gamma = 1/12`,
  :math:`\alpha = 1/(4\beta + 2\lambda_{max} + 1/\gamma)`, :math:`\theta = 0.5`, :math:`a = 0.1`; output y;
- ``penalty-sgd`` (baseline 1): single-loop stochastic penalty prox-SGD with the gradient of g,
  step :math:`1/(4\beta + 2\lambda_{max})` (:func:`~optarium.stochastic.penalty_prox_sgd`);
- ``penalty-storm`` (baseline 2): the same with recursive momentum (a = 0.1) on the whole penalised gradient,
  Alacaoglu & Wright 2024 style; same step;
- ``projected-sgd`` (baseline 5): prox-SGD on :math:`f + h - g` without penalty, normalised onto the sphere
  after each step (a feasible heuristic); same step;
- ``penalty-dca`` (reference): deterministic penalty DCA with the exact gradient :math:`-2\Sigma x`
  (:func:`~optarium.stochastic.penalty_dca`, 100 outer x 50 inner steps), for the reference objective.

**Metrics** at the output point u, against oracle calls: overlap :math:`|\langle u, v\rangle|/\|u\|`, support
F1
(support of u = its nonzeros; every method's u is a prox output), :math:`|c(u)|`, the objective
:math:`\Phi(u)` with the population :math:`\Sigma`, and one KKT residual for every method
(:func:`~optarium.stochastic.kkt_residual`, exact gradient, unit prox step, :math:`\mu` by a 1-D search).

**Rule** (spec, stated before running). (a) Each MoSSP variant reaches overlap > 0.9 with :math:`|c(u)| <
10^{-2}`
in at least 90 % of the seeds (9 of 10); it fails (a) if it misses in at least 30 % of the seeds (3 of 10).
(b) Neither variant is worse than baseline 1 on
the final KKT residual: paired per-seed log-ratio :math:`\log(r_{MoSSP}/r_{SGD})`, mean + 2 SE < log 1.5
holds,
mean - 2 SE > log 1.5 fails, otherwise undecided. Reproduced if (a) and (b) hold for both variants; not
reproduced if either fails (a) or (b); otherwise inconclusive. Reported, not decided: whether MoSSP *beats*
baseline 1 (here g is smooth on the sphere, so the envelope treatment of -g has nothing to gain), STORM vs
Polyak, baselines 2 and 5, the objective gap to the DCA reference, and two controls: the overlap of the start
:math:`x_0` (a verdict could not pass from the initialisation), and the seeds where the deterministic DCA
reference itself misses v (the l1 - l2 term has spurious local minima near coordinate vectors e_i with
v_i = 0, where it vanishes; a start nearly orthogonal to v can fall there whatever the method).
Quick runs 10 seeds of every method but ``projected-sgd`` (full only), to fit 60 s of one core.

**Full** adds 10 seeds and the spec's test 7 (a report): oracle calls to reach KKT residual 1e-2 for STORM and
Polyak, each with its own best :math:`a \in \{0.03, 0.1, 0.3\}` (lowest mean log calls), paired over seeds.
Not done: the spec's second full problem (sparse logistic regression with capped-:math:`\ell_1` and a
nonconvex equality constraint, with decaying schedules and slope fits); the capped-:math:`\ell_1` prox is
shipped (:func:`~optarium.stochastic.prox_capped_excess`) but not exercised by an experiment.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from optarium._core.seeding import derive_seed
from optarium.harness.experiment import Experiment, Verdict, register
from optarium.harness.stats import mean_se, paired_effect
from optarium.harness.verdicts import combine_outcomes, finals, paired_verdict, select

__all__ = ["CONFIGS", "EXPERIMENT", "decide", "plot", "problem", "run"]

CLAIM = (
    "MoSSP (Polyak and recursive momentum) finds feasible, high-overlap KKT points of sparse PCA on the "
    "sphere with an l1 - l2 regulariser from minibatch gradients, no worse in KKT residual than the plain "
    "single-loop stochastic penalty method at the same oracle budget."
)
RULE = (
    "(a) each MoSSP variant reaches overlap > 0.9 with |c(u)| < 1e-2 in >= 90% of the seeds (fails if it "
    "misses in >= 30%); (b) neither variant is worse than penalty prox-SGD on the final KKT residual: paired "
    "log-ratio mean + 2 SE < log 1.5 holds, mean - 2 SE > log 1.5 fails, else undecided; reproduced if (a) "
    "and (b) hold for both variants, not reproduced if any fails, else inconclusive. Beating the baseline, "
    "STORM vs Polyak, baselines 2 and 5 and the DCA objective gap are reported only."
)

MOSSP = ("mossp-polyak", "mossp-storm")
BASELINES = ("penalty-sgd", "penalty-storm", "projected-sgd", "penalty-dca")
SWEEPS = ("sweep-polyak", "sweep-storm")
METHODS = (*MOSSP, *BASELINES, *SWEEPS)
CORE = [*MOSSP, *BASELINES]

_BASE: dict[str, Any] = {
    "d": 100,
    "k": 10,
    "omega": 2.0,
    "tau": 0.1,
    "batch": 16,
    "samples": 200_000,
    "beta": 600.0,
    "gamma": 1.0 / 12.0,
    "relax": 0.5,
    "momentum": 0.1,
    "rows": 10,
    "dca_outer": 100,
    "dca_inner": 50,
    "sweep_a": [0.03, 0.1, 0.3],
    "sweep_level": 1e-2,
    "sweep_rows": 40,
    "pass_fraction": 0.9,
    "fail_fraction": 0.3,
    "kkt_factor": 1.5,
}
CONFIGS: dict[str, dict[str, Any]] = {
    "smoke": {
        **_BASE,
        "seeds": 2,
        "samples": 2000,
        "rows": 4,
        "dca_outer": 5,
        "dca_inner": 5,
        "sweep_rows": 4,
        "sweep_a": [0.1],
        "methods": [*CORE, *SWEEPS],
    },
    # quick: the reported-only projected heuristic runs at full only, so that 10 seeds fit 60 s of one core
    "quick": {**_BASE, "seeds": 10, "methods": [m for m in CORE if m != "projected-sgd"]},
    "full": {**_BASE, "seeds": 10, "methods": [*CORE, *SWEEPS]},
}


# ------------------------------------------------------------------------------------------------ problem
def problem(config: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """The seed's sparse-PCA instance: v, Sigma, x0, the sampler, gradients, constraint and metrics."""
    from optarium.stochastic import kkt_residual, prox_l1, prox_l2_norm

    d, k, omega, tau = int(config["d"]), int(config["k"]), float(config["omega"]), float(config["tau"])
    batch = int(config["batch"])
    g = torch.Generator().manual_seed(derive_seed(seed, "mossp-problem"))
    v = torch.zeros(d, dtype=torch.float64)
    v[torch.randperm(d, generator=g)[:k]] = torch.randn(k, generator=g, dtype=torch.float64)
    v = v / v.norm()
    sigma = torch.eye(d, dtype=torch.float64) + omega * torch.outer(v, v)
    lmax = 1.0 + omega
    x0 = torch.randn(d, generator=g, dtype=torch.float64)
    x0 = x0 / x0.norm()
    sv = math.sqrt(omega) * v
    h, gg = prox_l1(tau), prox_l2_norm(tau)
    support = v != 0

    def sampler(gen: torch.Generator) -> torch.Tensor:
        # a = z + sqrt(omega) s v with z ~ N(0, I), s ~ N(0, 1): a ~ N(0, I + omega v v^T)
        zs = torch.randn(batch, d + 1, generator=gen, dtype=torch.float64)
        return torch.addr(zs[:, :d], zs[:, d], sv)

    def grad_f(x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        return a.T @ (a @ x) * (-2.0 / a.shape[0])

    def grad_full(x: torch.Tensor) -> torch.Tensor:
        return -2.0 * (sigma @ x)

    def constraint(x: torch.Tensor) -> torch.Tensor:
        return x @ x - 1.0

    def vjp(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        c = (x @ x - 1.0).reshape(1)
        return c, x * (2.0 * c)

    def objective(x: torch.Tensor) -> float:
        return float(-(x @ sigma @ x) + h.value(x) - gg.value(x))

    def metrics(u: torch.Tensor) -> dict[str, float]:
        nu = float(u.norm())
        overlap = float((u @ v).abs()) / nu if nu > 0 else 0.0
        sup = u != 0
        tp = float((sup & support).sum())
        f1 = 2 * tp / (float(sup.sum()) + float(support.sum())) if tp > 0 else 0.0
        c = float(constraint(u))
        r, stat, _ = kkt_residual(u, grad_full(u), c, 2.0 * u, h, gg.subgradient(u))
        return {
            "overlap": overlap,
            "f1": f1,
            "abs_c": abs(c),
            "kkt": r,
            "kkt_stat": stat,
            "objective": objective(u),
        }

    return {
        "v": v,
        "sigma": sigma,
        "lmax": lmax,
        "x0": x0,
        "sampler": sampler,
        "grad_f": grad_f,
        "grad_full": grad_full,
        "constraint": constraint,
        "vjp": vjp,
        "h": h,
        "g": gg,
        "metrics": metrics,
        "x0_overlap": float((x0 @ v).abs()),
    }


def _mossp(
    P: Mapping[str, Any], config: Mapping[str, Any], variant: str, a: float, rows: int, seed: int
) -> Any:
    from optarium.stochastic import mossp

    beta, gamma = float(config["beta"]), float(config["gamma"])
    iters = int(config["samples"]) // int(config["batch"]) // (2 if variant == "storm" else 1)
    return mossp(
        P["grad_f"],
        P["constraint"],
        P["h"],
        P["g"],
        P["x0"],
        P["sampler"],
        variant=variant,
        penalty=beta,
        gamma=gamma,
        lr="auto",
        relax=float(config["relax"]),
        momentum=a,
        curvature_bound=lambda b: 4.0 * b + 2.0 * P["lmax"],
        constraint_vjp=P["vjp"],
        max_iter=10**9,
        max_oracle_calls=int(config["samples"]),
        metrics=P["metrics"],
        record_every=max(1, iters // rows),
        seed=derive_seed(seed, "mossp-stream"),
    )


def run(ctx: Any, method: str, seed: int, config: Mapping[str, Any]) -> None:
    """One (method, seed) unit: build the seed's problem, run the method, log its trace (module docstring)."""
    from optarium.stochastic import penalty_dca, penalty_prox_sgd

    with ctx.untimed():
        P = problem(config, seed)
    beta = float(config["beta"])
    lr = 1.0 / (4.0 * beta + 2.0 * P["lmax"])
    rows = int(config["rows"])
    iters = int(config["samples"]) // int(config["batch"])
    a = float(config["momentum"])
    if method in MOSSP:
        res = _mossp(P, config, method.split("-")[1], a, rows, seed)
    elif method in ("penalty-sgd", "penalty-storm", "projected-sgd"):
        storm = method == "penalty-storm"
        res = penalty_prox_sgd(
            P["grad_f"],
            None if method == "projected-sgd" else P["constraint"],
            P["h"],
            P["g"].subgradient,
            P["x0"],
            P["sampler"],
            estimator="storm" if storm else "sgd",
            penalty=0.0 if method == "projected-sgd" else beta,
            lr=lr,
            momentum=a,
            project=(lambda x: x / x.norm()) if method == "projected-sgd" else None,
            constraint_vjp=P["vjp"],
            max_iter=10**9,
            max_oracle_calls=int(config["samples"]),
            metrics=P["metrics"],
            record_every=max(1, iters // (2 if storm else 1) // rows),
            seed=derive_seed(seed, "mossp-stream"),
        )
    elif method == "penalty-dca":
        res = penalty_dca(
            P["grad_full"],
            P["constraint"],
            P["h"],
            P["g"].subgradient,
            P["x0"],
            penalty=beta,
            lr=lr,
            inner_iter=int(config["dca_inner"]),
            max_iter=int(config["dca_outer"]),
            tol=1e-12,
            constraint_vjp=P["vjp"],
            metrics=P["metrics"],
            record_every=max(1, int(config["dca_outer"]) // rows),
        )
    else:  # the oracle-efficiency sweep of spec test 7: one unit runs every a of the grid
        variant = method.split("-")[1]
        for a_s in config["sweep_a"]:
            res = _mossp(P, config, variant, float(a_s), int(config["sweep_rows"]), seed)
            ctx.log_result(res, a=float(a_s))
            calls = _calls_to_reach(res.history, float(config["sweep_level"]))
            ctx.log(res.n_iter + 1, check_finite=False, a=float(a_s), calls_to_level=calls)
        return
    ctx.log_result(res)
    ctx.log(res.n_iter + 1, x0_overlap=P["x0_overlap"], solver_diverged=float(res.status == "diverged"))


def _calls_to_reach(history: Any, level: float) -> float:
    """The first recorded oracle-call count at which the KKT residual is <= level (inf if never)."""
    for calls, r in zip(history.metrics["oracle_calls"], history.metrics["kkt"], strict=True):
        if r <= level:
            return float(calls)
    return math.inf


# ------------------------------------------------------------------------------------------------ verdict
def _final(records: Sequence[Mapping[str, Any]], method: str, metric: str) -> dict[int, float]:
    return finals(records, metric, method)


def decide(records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> Verdict:
    """The rule of :data:`RULE` (see the module docstring)."""
    methods = list(config["methods"])
    figures: dict[str, Any] = {}
    outcomes: list[str] = []
    bits: list[str] = []
    for m in [x for x in methods if x in CORE]:
        for metric in ("overlap", "f1", "abs_c", "kkt", "objective"):
            vals = list(_final(records, m, metric).values())
            if vals:
                mean, se = mean_se(vals)
                figures[f"{m}:{metric}_mean"] = mean
                figures[f"{m}:{metric}_max" if metric in ("abs_c", "kkt") else f"{m}:{metric}_min"] = (
                    max(vals) if metric in ("abs_c", "kkt") else min(vals)
                )
    x0o = [float(r["x0_overlap"]) for r in select(records, has="x0_overlap")]
    figures["control:x0_overlap_max"] = max(x0o) if x0o else math.nan
    # landscape control (reported): seeds where the deterministic full-gradient reference misses v too
    ref_ov = _final(records, "penalty-dca", "overlap")
    ref_miss = sorted(s for s, o in ref_ov.items() if o <= 0.9)
    figures["control:dca_miss_seeds"] = ",".join(str(s) for s in ref_miss) if ref_miss else "none"
    figures["control:dca_miss_count"] = len(ref_miss)
    # objective gap to the DCA reference (reported)
    ref = _final(records, "penalty-dca", "objective")
    for m in [x for x in methods if x in CORE and x != "penalty-dca"]:
        obj = _final(records, m, "objective")
        gaps = [obj[s] - ref[s] for s in obj if s in ref]
        if gaps:
            figures[f"{m}:objective_gap_to_dca_mean"] = mean_se(gaps)[0]
    base = {s: v for s, v in _final(records, "penalty-sgd", "kkt").items() if v > 0 and math.isfinite(v)}
    log_tol = math.log(float(config["kkt_factor"]))
    for m in [x for x in methods if x in MOSSP]:
        ov, ac = _final(records, m, "overlap"), _final(records, m, "abs_c")
        seeds = sorted(set(ov) & set(ac))
        n = len(seeds)
        ok = sum(1 for s in seeds if ov[s] > 0.9 and ac[s] < 1e-2)
        figures[f"{m}:a_success"] = ok
        figures[f"{m}:a_seeds"] = n
        if n >= 2 and ok >= math.ceil(float(config["pass_fraction"]) * n - 1e-9):
            out_a = "reproduced"
        elif n >= 2 and n - ok >= math.ceil(float(config["fail_fraction"]) * n - 1e-9):
            out_a = "not reproduced"
        else:
            out_a = "inconclusive"
        figures[f"{m}:a_outcome"] = out_a
        if ref_ov:  # reported: success on the seeds where the reference itself reaches v
            hit = [s for s in seeds if s in ref_ov and ref_ov[s] > 0.9]
            figures[f"{m}:a_success_where_dca_succeeds"] = sum(1 for s in hit if ov[s] > 0.9 and ac[s] < 1e-2)
            figures[f"{m}:a_seeds_where_dca_succeeds"] = len(hit)
        kkt = _final(records, m, "kkt")
        ratios = {s: math.log(kkt[s] / base[s]) if kkt[s] > 0 else -50.0 for s in kkt if s in base}
        mean, se = mean_se(list(ratios.values())) if len(ratios) >= 2 else (math.nan, math.nan)
        figures[f"{m}:b_log_ratio_mean"] = mean
        figures[f"{m}:b_log_ratio_se"] = se
        figures[f"{m}:b_n_pairs"] = len(ratios)
        if len(ratios) >= 2 and mean + 2 * se < log_tol:
            out_b = "reproduced"
        elif len(ratios) >= 2 and mean - 2 * se > log_tol:
            out_b = "not reproduced"
        else:
            out_b = "inconclusive"
        figures[f"{m}:b_outcome"] = out_b
        beats = paired_verdict(
            {s: math.log(max(kkt[s], 1e-300)) for s in kkt}, {s: math.log(v) for s, v in base.items()}
        )
        figures[f"{m}:beats_sgd"] = beats.outcome
        outcomes += [out_a, out_b]
        bits.append(
            f"{m}: (a) {ok}/{n} seeds with overlap > 0.9 and |c| < 1e-2 -> {out_a}; (b) log KKT ratio vs "
            f"penalty-SGD {mean:+.3f} ± {se:.3f} (SE, n={len(ratios)}; threshold log 1.5 = {log_tol:.3f}) -> "
            f"{out_b}; beats it: {beats.outcome}"
        )
    if set(MOSSP) <= set(methods):
        kp, ks = _final(records, "mossp-polyak", "kkt"), _final(records, "mossp-storm", "kkt")
        eff = paired_effect({s: math.log(v) for s, v in ks.items()}, {s: math.log(v) for s, v in kp.items()})
        figures["storm_vs_polyak:log_kkt_gap_mean"] = eff.mean  # > 0: STORM lower residual
        figures["storm_vs_polyak:log_kkt_gap_se"] = eff.se
    _sweep_figures(records, config, methods, figures, bits)
    if not outcomes:
        return Verdict("inconclusive", figures, "no MoSSP variant ran")
    outcome = combine_outcomes(outcomes)
    bits.append(
        f"controls: start overlap max {figures['control:x0_overlap_max']:.3f}; seeds where the deterministic "
        f"DCA reference also misses v: {figures.get('control:dca_miss_seeds', 'not run')}"
    )
    return Verdict(outcome, figures, "; ".join(bits))


def _sweep_figures(
    records: Sequence[Mapping[str, Any]],
    config: Mapping[str, Any],
    methods: Sequence[str],
    figures: dict[str, Any],
    bits: list[str],
) -> None:
    """Spec test 7 (report only): oracle calls to the KKT level, each variant at its best a."""
    best: dict[str, dict[int, float]] = {}
    for m in [x for x in methods if x in SWEEPS]:
        choice, score = None, math.inf
        for a in config["sweep_a"]:
            calls = {
                int(r["seed"]): float(r["calls_to_level"])
                for r in select(records, m, has="calls_to_level", a=a)
            }
            vals = list(calls.values())
            reached = [c for c in vals if math.isfinite(c)]
            figures[f"{m}:a{a:g}:reached"] = len(reached)
            mlog = (
                sum(math.log(c) for c in vals) / len(vals) if vals and len(reached) == len(vals) else math.inf
            )
            figures[f"{m}:a{a:g}:mean_log_calls"] = mlog
            if mlog < score:
                choice, score = a, mlog
        figures[f"{m}:best_a"] = choice if choice is not None else math.nan
        if choice is not None:
            best[m] = {
                int(r["seed"]): float(r["calls_to_level"])
                for r in select(records, m, has="calls_to_level", a=choice)
            }
    if set(SWEEPS) <= set(best):
        eff = paired_effect(
            {s: math.log(c) for s, c in best["sweep-storm"].items()},
            {s: math.log(c) for s, c in best["sweep-polyak"].items()},
        )
        figures["sweep:log_calls_polyak_minus_storm_mean"] = eff.mean
        figures["sweep:log_calls_polyak_minus_storm_se"] = eff.se
        figures["sweep:n_pairs"] = eff.n
        bits.append(
            f"test 7 (report): log calls to KKT {config['sweep_level']:g}, Polyak - STORM at their best a "
            f"({figures['sweep-polyak:best_a']:g}, {figures['sweep-storm:best_a']:g}): {eff.mean:+.3f} ± "
            f"{eff.se:.3f} (SE, n={eff.n})"
        )


# ------------------------------------------------------------------------------------------------ figures
def plot(records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> dict[str, Any]:
    """KKT residual and overlap against oracle calls (median and range over seeds), and the paired ratios."""
    from matplotlib.figure import Figure

    from optarium.harness.figures import draw_band, draw_paired_gaps

    methods = [m for m in config["methods"] if m in CORE and m != "penalty-dca"]
    fig = Figure(figsize=(12, 8.5))
    (ax1, ax2), (ax3, ax4) = fig.subplots(2, 2)
    ax4.set_axis_off()
    for i, m in enumerate(methods):
        for ax, metric in ((ax1, "kkt"), (ax2, "overlap")):
            pts: dict[int, list[float]] = {}
            for r in select(records, m, has=(metric, "oracle_calls")):
                pts.setdefault(int(r["oracle_calls"]), []).append(float(r[metric]))
            if pts:
                draw_band(ax, pts, center="median", band="minmax", color=f"C{i}", label=m)
    ax1.set_yscale("log")
    ax1.set_ylabel("KKT residual")
    ax1.set_title("KKT residual (exact gradient, unit prox step)", fontsize=9)
    ax2.set_ylabel("overlap |<u, v>| / |u|")
    ax2.set_title("median and range over seeds", fontsize=9)
    for ax in (ax1, ax2):
        ax.set_xlabel("oracle calls (per-sample stochastic gradients)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    base = _final(records, "penalty-sgd", "kkt")
    effects = []
    for m in [x for x in methods if x != "penalty-sgd"]:
        kkt = _final(records, m, "kkt")
        effects.append(
            (
                m,
                paired_effect(
                    {s: math.log(v) for s, v in kkt.items() if v > 0},
                    {s: math.log(v) for s, v in base.items() if v > 0},
                ),
            )
        )
    if effects:
        draw_paired_gaps(ax3, effects)
    ax3.axhline(-math.log(float(config["kkt_factor"])), color="gray", ls="--", lw=0.8)
    ax3.set_ylabel("log KKT(penalty-SGD) - log KKT(method)")
    ax3.set_title("per seed, vs baseline 1 (> 0: lower residual; dashed: 1.5x worse)", fontsize=9)
    fig.suptitle("MoSSP on sparse PCA on the sphere (l1 - l2 regulariser)")
    fig.tight_layout()
    return {"kkt_overlap": fig}


EXPERIMENT = register(
    Experiment(
        slug="mossp",
        claim=CLAIM,
        rule=RULE,
        methods=METHODS,
        baselines=BASELINES,
        configs=CONFIGS,
        run=run,
        decide=decide,
        plot=plot,
        scaled_down=(
            "sparse PCA on the sphere, d = 100, 2e5 oracle calls, 10 seeds (quick without the projected "
            "heuristic; full adds it and the STORM-vs-Polyak sweep); the spec's sparse-logistic capped-l1 "
            "full problem is not run"
        ),
    )
)
