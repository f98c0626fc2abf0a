r"""FBi-RRM / FBi-SGD: federated bilevel performative prediction on federated meta strategic regression.

Paper: Qian, Liu, Cao, Zhao, Lam, "Federated Bilevel Performative Prediction", arXiv:2606.19734 (ICML 2026).
Claims: (i) FBi-RRM converges linearly to the federated bilevel performatively stable (FBPS) point below a
predicted sensitivity threshold and fails above it; (ii) FBi-SGD converges with diminishing steps for small
sensitivities; (iii) performative-aware training gives a lower post-deployment meta loss than
non-performative training.

Problem (:mod:`optarium.problems.strategic_regression`, the spec's closed-form quick instance): M = 10
clients, d = 5, features :math:`x \sim N(\mu_i, I)`, labels from :math:`w_i^\star = \bar w + 0.5\delta_i`,
strategic response :math:`x' = x - \varepsilon u_i` to the deployed personalised model, LL ridge towards the
meta-model :math:`\theta` (:math:`\lambda = 1`), UL meta validation loss. A seed is one instance draw
(:math:`\mu_i, \bar w, \delta_i`) and, for the sampled methods, the sample stream.

Per seed: the exact map :math:`T`, the FBPS point by Newton's method, :math:`\rho(J_T)` and
:math:`\|J_T\|_2`, and the predicted threshold :math:`\varepsilon^\star` (:math:`\rho = 1`, scan of
:math:`\varepsilon \in \{0, 0.1, \dots, 2\}` then bisection).

Units:

- ``fbi-rrm`` (exact inner solve, 30 rounds) at every scanned :math:`\varepsilon`: from :math:`\phi_0 = 0`
  (curves against rounds and bytes), and from the FBPS point (continued along :math:`\varepsilon`) plus a
  perturbation of norm 1e-6, whose per-round growth ratio (geometric mean over the second half of the rounds
  where the error is in [1e-11, 1e-2], the linear regime above round-off) is the *empirical rate* (the first
  full run averaged over all rounds, so the fast initial decay of the perturbation biased it below rho and
  the threshold part failed on one seed, 0.13 > 0.1 from eps*; see the registry notes); plus the spec's
  tests 3 and 4
  (rate at :math:`0.5\varepsilon^\star` against :math:`\rho`; a 1e-3 perturbation at
  :math:`2\varepsilon^\star`, control at :math:`0.5\varepsilon^\star`).
- ``fbi-sgd`` (sampled, batch 32, :math:`\tau = 5`, N = 10, :math:`a_r = (2/\mu_F)/(r + 10)`,
  :math:`b_r = 0.1/(1 + r/10)`) at :math:`\{0.2, 0.5\}\varepsilon^\star`, relative error to the FBPS point.
- ``non-performative``: the bilevel solution trained once on :math:`D(\phi_0)`, :math:`\phi_0 = 0` (one
  FBi-RRM round), deployed unchanged; ``central-rrm``: Perdomo et al.'s RRM on pooled data (one shared model,
  to its fixed point); ``fedavg``: FedAvg on the single-level problem under the same shifts (sampled, one
  shared model); all three scored by the post-deployment loss :math:`F(\phi; D(\phi))` at
  :math:`\{0.25, 0.5, 0.75\}\varepsilon^\star` against that of the FBPS point.

Rule (:data:`RULE`), four parts, all must hold. Rate: for every seed the geometric-mean ratio
:math:`\|\phi_{r+1} - \phi_{PS}\|/\|\phi_r - \phi_{PS}\|`, r = 5..20 (above round-off), is within 0.05 of
:math:`\rho(J_T(\phi_{PS}))` at :math:`0.5\varepsilon^\star`. Threshold: for every seed the 1e-3 perturbation
grows > 100x in 30 rounds at :math:`2\varepsilon^\star` (with :math:`\rho > 1` at the point), the control at
:math:`0.5\varepsilon^\star` ends below 1e-6, and the empirical threshold (the first scanned
:math:`\varepsilon` with empirical rate >= 1) lies within one grid step of :math:`\varepsilon^\star`.
FBi-SGD: relative error <= 5 % at :math:`0.2\varepsilon^\star` for every seed. Post-deployment: the paired gap
loss(non-performative) - loss(FBPS) exceeds 2 SE at each of the three :math:`\varepsilon`, and its per-seed
slope against :math:`\varepsilon/\varepsilon^\star` has mean > 2 SE; a gap below -2 SE is "not reproduced",
otherwise "inconclusive". Control: at :math:`\varepsilon = 0` the two coincide (gap < 1e-10), else the part is
inconclusive. The rate/threshold/FBi-SGD parts are "not reproduced" when they fail.

Scaled down / not done: the quick runs FBi-SGD for 1500 rounds (the full 3000); the full scale is the same
synthetic experiment with 10 seeds, not the spec's digits-based meta strategic classification nor the paper's
CNN on federated MNIST (not built).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any

from optarium.harness.experiment import Experiment, Verdict, register
from optarium.harness.stats import mean_se
from optarium.harness.verdicts import combine_outcomes, ols_slope, select

__all__ = ["CONFIGS", "EXPERIMENT", "decide", "plot", "run"]

CLAIM = (
    "FBi-RRM converges linearly to the federated bilevel performatively stable point at rate rho(J_T) below "
    "the predicted sensitivity threshold and is unstable above it; FBi-SGD converges for small "
    "sensitivities; the stable point's post-deployment meta loss beats non-performative training."
)
RULE = (
    "All seeds: RRM geometric-mean ratio (r=5..20) within 0.05 of rho(J_T) at 0.5 eps*; 1e-3 perturbation "
    "grows >100x at 2 eps* (rho>1) and the 0.5 eps* control ends <1e-6; empirical threshold (first scanned "
    "eps with empirical rate >= 1) within one grid step of eps*; FBi-SGD relative error <= 5% at 0.2 eps*. "
    "Post-deployment: paired gap loss(non-performative) - loss(FBPS) > 2 SE at each of 0.25/0.5/0.75 eps* "
    "and "
    "mean per-seed slope of the gap vs eps/eps* > 2 SE (a gap < -2 SE: not reproduced; else inconclusive; "
    "control: gap at eps=0 below 1e-10). Reproduced if all parts are."
)

METHODS = ("fbi-rrm", "fbi-sgd", "non-performative", "central-rrm", "fedavg")
BASELINES = ("non-performative", "central-rrm", "fedavg")
_COMPARE_FRACS = (0.25, 0.5, 0.75)
_SGD_FRACS = (0.2, 0.5)

_BASE: dict[str, Any] = {
    "n_clients": 10,
    "dim": 5,
    "lam": 1.0,
    "noise_sd": 0.1,
    "heterogeneity": 0.5,
    "grid": [round(0.1 * i, 10) for i in range(21)],
    "rrm_rounds": 30,
    "sgd": {
        "rounds": 1500,
        "local_steps": 5,
        "lr_inner": 0.1,
        "lr_inner_decay": 10.0,
        "r0": 10.0,
        "a0_factor": 2.0,
        "neumann_terms": 10,
        "batch_size": 32,
        "record_every": 50,
    },
    "fedavg": {
        "rounds": 500,
        "local_steps": 5,
        "lr": 0.05,
        "lr_decay": 100.0,
        "batch_size": 32,
        "record_every": 50,
    },
    "world_size": 1,
}

CONFIGS: dict[str, dict[str, Any]] = {
    "smoke": {
        **_BASE,
        "seeds": 2,
        "grid": [round(0.5 * i, 10) for i in range(5)],
        "sgd": {**_BASE["sgd"], "rounds": 100, "record_every": 20},
        "fedavg": {**_BASE["fedavg"], "rounds": 40, "record_every": 20},
    },
    "quick": {**_BASE, "seeds": 5},
    "full": {**_BASE, "seeds": 10, "sgd": {**_BASE["sgd"], "rounds": 3000}},
}


# ------------------------------------------------------------------------------------------------ analysis
def _problem(config: Mapping[str, Any], seed: int) -> Any:
    from optarium.problems.strategic_regression import make_strategic_meta_regression

    return make_strategic_meta_regression(
        int(config["n_clients"]),
        int(config["dim"]),
        lam=float(config["lam"]),
        noise_sd=float(config["noise_sd"]),
        heterogeneity=float(config["heterogeneity"]),
        seed=int(seed),
    )


@functools.lru_cache(maxsize=32)
def _analysis_cached(key: tuple[Any, ...], seed: int) -> tuple[Any, float, list[tuple[float, Any]]]:
    from optarium.bilevel.fbi_performative import stability_threshold

    config = dict(key)
    config["grid"] = list(config["grid"])
    base = _problem(config, seed)
    eps_star, scan = stability_threshold(base, config["grid"])
    return base, eps_star, scan


def _analysis(config: Mapping[str, Any], seed: int) -> tuple[Any, float, list[tuple[float, Any]]]:
    keys = ("n_clients", "dim", "lam", "noise_sd", "heterogeneity")
    key = (*((k, config[k]) for k in keys), ("grid", tuple(config["grid"])))
    return _analysis_cached(key, int(seed))


def _continued(base: Any, eps: float, scan: Sequence[tuple[float, Any]], steps: int = 2) -> Any:
    """The FBPS point at ``eps`` on the branch RRM follows:
    Newton continued from the scan point just below."""
    from optarium.bilevel.fbi_performative import stable_point

    below = [(e, sp) for e, sp in scan if e <= eps + 1e-12]
    e0, sp = below[-1] if below else (0.0, None)
    if abs(eps - e0) < 1e-12 and sp is not None:
        return sp
    for j in range(1, steps + 1):
        sp = stable_point(base.with_eps(e0 + (eps - e0) * j / steps), None if sp is None else sp.U)
    return sp


def _execute(
    jobs: list[tuple[str, Any, int, dict[str, Any]]], n_clients: int, config: Mapping[str, Any]
) -> list[Any]:
    """Run the jobs in this process (world size 1) or on ``world_size`` gloo processes; rank 0's results."""
    from optarium.bilevel.fbi_performative import fbi_batch
    from optarium.distributed.comm import Communicator
    from optarium.distributed.launch import launch

    ws = min(int(config.get("world_size", 1)), n_clients)
    if ws == 1:
        return fbi_batch(Communicator.local(n_clients), jobs)
    return launch(fbi_batch, ws, jobs, n_clients=n_clients, timeout_s=300.0)[0]


def _dists(res: Any) -> list[float]:
    return [float(r["dist"]) for r in res.history.as_rows()]


def _emp_rate(ds: Sequence[float], lo: float = 1e-11, hi: float = 1e-2) -> float:
    """Asymptotic per-round growth ratio: geometric mean over the second half of the rounds, in the linear
    regime (errors in [lo, hi]); the first rounds are left out because a random perturbation decays along
    the fast modes first (seed 9 at rho = 1.064 gave 0.997 over all 30 rounds, 1.05-1.06 over the last half).
    """
    half = len(ds) // 2
    ratios = [
        ds[i + 1] / ds[i] for i in range(half, len(ds) - 1) if lo <= ds[i] <= hi and lo <= ds[i + 1] <= hi
    ]
    if not ratios:
        return 0.0 if ds[-1] < ds[0] else math.inf
    return math.exp(sum(math.log(r) for r in ratios) / len(ratios))


# ------------------------------------------------------------------------------------------------ units
def _run_rrm(ctx: Any, seed: int, config: Mapping[str, Any]) -> None:
    import torch

    from optarium.bilevel.fbi_performative import fbi_rrm
    from optarium.distributed.comm import Communicator

    with ctx.untimed():
        base, eps_star, scan = _analysis(config, seed)
    M, d = base.n_clients, base.dim
    R = int(config["rrm_rounds"])
    gen = torch.Generator().manual_seed(1000 + seed)
    for eps, sp in scan:
        p = base.with_eps(eps)
        ref = (sp.theta, sp.U)
        far = fbi_rrm(p, Communicator.local(M), R, ref=ref)
        pert = torch.randn(d + M * d, generator=gen, dtype=torch.float64)
        pert = 1e-6 * pert / pert.norm()
        near = fbi_rrm(
            p, Communicator.local(M), R, theta0=sp.theta + pert[:d], U0=sp.U + pert[d:].reshape(M, d), ref=ref
        )
        with ctx.evaluating():
            ds = _dists(far)
            ctx.log(
                R,
                check_finite=False,
                scan=1,
                eps=eps,
                eps_frac=eps / eps_star,
                rho=sp.rho,
                jnorm=sp.norm,
                newton_converged=float(sp.converged),
                emp_rate=_emp_rate(_dists(near)),
                far_final=ds[-1],
                far_first=ds[0],
                eps_star=eps_star,
            )
    # curves, the rate test (3) and the threshold test (4)
    for frac in (0.25, 0.5, 0.75, 0.95):
        sp = _continued(base, frac * eps_star, scan)
        p = base.with_eps(frac * eps_star)
        res = fbi_rrm(p, Communicator.local(M), R, ref=(sp.theta, sp.U))
        with ctx.evaluating():
            rows = res.history.as_rows()
            for r in rows:
                ctx.log(
                    int(r["step"]),
                    check_finite=False,
                    curve=1,
                    eps_frac=frac,
                    dist=r["dist"],
                    rel=r["dist_to_ref"],
                    bytes=r["bytes"],
                    comm_rounds=r["comm_rounds"],
                )
            if frac == 0.5:
                ds = _dists(res)
                floor = 1e-9 * ds[0]
                ratios = [ds[r + 1] / ds[r] for r in range(5, 20) if ds[r + 1] > floor]
                geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios)) if ratios else math.nan
                worst = max((ds[r + 1] / ds[r] for r in range(3, R) if ds[r + 1] > floor), default=math.nan)
                ctx.log(
                    R,
                    check_finite=False,
                    rate_test=1,
                    geo_ratio=geo,
                    rho=sp.rho,
                    jnorm=sp.norm,
                    worst_ratio=worst,
                    n_ratios=len(ratios),
                    eps_star=eps_star,
                )
    out = {}
    for frac in (0.5, 2.0):
        sp = _continued(base, frac * eps_star, scan, steps=4)
        p = base.with_eps(frac * eps_star)
        pert = torch.randn(d + M * d, generator=gen, dtype=torch.float64)
        pert = 1e-3 * pert / pert.norm()
        res = fbi_rrm(
            p,
            Communicator.local(M),
            R,
            theta0=sp.theta + pert[:d],
            U0=sp.U + pert[d:].reshape(M, d),
            ref=(sp.theta, sp.U),
        )
        ds = _dists(res)
        out[frac] = (sp.rho, ds[0], ds[-1])
    with ctx.evaluating():
        ctx.log(
            R,
            check_finite=False,
            threshold_test=1,
            rho_above=out[2.0][0],
            growth_above=out[2.0][2] / out[2.0][1],
            rho_control=out[0.5][0],
            control_final=out[0.5][2],
            eps_star=eps_star,
        )


def _run_sgd(ctx: Any, seed: int, config: Mapping[str, Any]) -> None:
    from optarium.bilevel.fbi_performative import default_outer_schedule

    with ctx.untimed():
        base, eps_star, scan = _analysis(config, seed)
    sc = config["sgd"]
    for frac in _SGD_FRACS:
        with ctx.untimed():
            sp = _continued(base, frac * eps_star, scan)
            p = base.with_eps(frac * eps_star)
            kw = {
                "local_steps": int(sc["local_steps"]),
                "lr_inner": float(sc["lr_inner"]),
                "lr_inner_decay": float(sc["lr_inner_decay"]),
                "lr_outer": default_outer_schedule(p, r0=float(sc["r0"]), factor=float(sc["a0_factor"])),
                "neumann_terms": int(sc["neumann_terms"]),
                "batch_size": int(sc["batch_size"]),
                "record_every": int(sc["record_every"]),
                "seed": int(seed),
                "ref": (sp.theta, sp.U),
            }
        (res,) = _execute([("fbi-sgd", p, int(sc["rounds"]), kw)], p.n_clients, config)
        with ctx.evaluating():
            rows = res.history.as_rows()
            for r in rows:
                ctx.log(
                    int(r["step"]),
                    check_finite=False,
                    curve=1,
                    eps_frac=frac,
                    rel=r["dist_to_ref"],
                    bytes=r["bytes"],
                    comm_rounds=r["comm_rounds"],
                    objective=r["objective"],
                )
            ctx.log(
                int(res.n_iter),
                check_finite=False,
                final=1,
                eps_frac=frac,
                rel_err=rows[-1]["dist_to_ref"],
                rel_err_300=next((float(r["dist_to_ref"]) for r in rows if int(r["step"]) >= 300), math.nan),
                bytes=rows[-1]["bytes"],
                comm_rounds=rows[-1]["comm_rounds"],
                diverged=float(res.status == "diverged"),
                post_loss=res.value,
            )


def _post_loss(base: Any, eps: float, theta: Any, U: Any) -> float:
    import torch

    p = base.with_eps(eps)
    return float(p.deployed_loss(theta, U, torch.arange(p.n_clients)).sum())


def _run_baseline(ctx: Any, method: str, seed: int, config: Mapping[str, Any]) -> None:
    import torch

    from optarium.bilevel.fbi_performative import pooled_rrm

    with ctx.untimed():
        base, eps_star, scan = _analysis(config, seed)
    M = base.n_clients
    for frac in (0.0, *_COMPARE_FRACS):
        eps = frac * eps_star
        with ctx.untimed():
            sp = _continued(base, eps, scan)
            ps_loss = _post_loss(base, eps, sp.theta, sp.U)
        extra: dict[str, float] = {}
        if method == "non-performative":
            th, U = base.with_eps(eps).best_response(torch.zeros(M, base.dim, dtype=torch.float64))
            loss = _post_loss(base, eps, th, U)
        elif method == "central-rrm":
            res = pooled_rrm(base.with_eps(eps), 200, tol=1e-12)
            loss = _post_loss(base, eps, res.x, res.x.expand(M, -1))
            extra["rrm_status_converged"] = float(res.status == "converged")
        else:  # fedavg
            fc = config["fedavg"]
            p = base.with_eps(eps)
            w_ref = pooled_rrm(p, 200, tol=1e-12).x
            kw = {k: fc[k] for k in ("local_steps", "lr", "lr_decay", "batch_size", "record_every")}
            (res,) = _execute(
                [("fedavg", p, int(fc["rounds"]), {**kw, "seed": int(seed), "ref": w_ref})], M, config
            )
            loss = _post_loss(base, eps, res.x, res.x.expand(M, -1))
            rows = res.history.as_rows()
            extra = {"dist_to_pooled_rrm": rows[-1]["dist_to_ref"], "bytes": rows[-1]["bytes"]}
        with ctx.evaluating():
            ctx.log(
                0,
                check_finite=False,
                compare=1,
                eps_frac=frac,
                eps=eps,
                loss=loss,
                ps_loss=ps_loss,
                gap=loss - ps_loss,
                **extra,
            )


def run(ctx: Any, method: str, seed: int, config: Mapping[str, Any]) -> None:
    """Run unit (``method``, ``seed``): instance ``seed`` (and sample stream ``seed``)."""
    if method == "fbi-rrm":
        _run_rrm(ctx, seed, config)
    elif method == "fbi-sgd":
        _run_sgd(ctx, seed, config)
    else:
        _run_baseline(ctx, method, seed, config)


# ------------------------------------------------------------------------------------------------ verdict
def _by_seed(records: Sequence[Mapping[str, Any]], method: str, key: str, **tags: Any) -> dict[int, float]:
    return {int(r["seed"]): float(r[key]) for r in select(records, method, has=key, **tags)}


def decide(records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> Verdict:
    """The rule of :data:`RULE`."""
    figs: dict[str, Any] = {}
    parts: dict[str, str] = {}
    grid = sorted(float(e) for e in config["grid"])
    step = grid[1] - grid[0] if len(grid) > 1 else math.inf

    # rate
    geo = _by_seed(records, "fbi-rrm", "geo_ratio", rate_test=1)
    rho = _by_seed(records, "fbi-rrm", "rho", rate_test=1)
    diffs = [abs(geo[s] - rho[s]) for s in geo if s in rho]
    figs["rate_max_abs_diff"] = max(diffs) if diffs else math.nan
    figs["rate_rho_mean"] = mean_se(list(rho.values()))[0] if rho else math.nan
    figs["rate_geo_mean"] = mean_se(list(geo.values()))[0] if geo else math.nan
    figs["rate_n_seeds"] = len(diffs)
    parts["rate"] = (
        "reproduced" if diffs and max(diffs) < 0.05 else ("not reproduced" if diffs else "inconclusive")
    )

    # threshold
    th = select(records, "fbi-rrm", threshold_test=1)
    eps_star = _by_seed(records, "fbi-rrm", "eps_star", threshold_test=1)
    ok_th = [
        float(r["rho_above"]) > 1 and float(r["growth_above"]) > 100 and float(r["control_final"]) < 1e-6
        for r in th
    ]
    emp_gaps = []
    for s, es in eps_star.items():
        scan = sorted(select(records, "fbi-rrm", scan=1, seed=s), key=lambda r: float(r["eps"]))
        emp = next((float(r["eps"]) for r in scan if float(r["emp_rate"]) >= 1.0), math.inf)
        figs[f"seed{s}_eps_star"] = es
        figs[f"seed{s}_empirical_threshold"] = emp
        emp_gaps.append(abs(emp - es) if math.isfinite(emp) or math.isfinite(es) else 0.0)
    figs["threshold_min_growth"] = min((float(r["growth_above"]) for r in th), default=math.nan)
    figs["threshold_max_control_final"] = max((float(r["control_final"]) for r in th), default=math.nan)
    figs["threshold_max_abs_gap_emp_vs_pred"] = max(emp_gaps) if emp_gaps else math.nan
    figs["eps_star_mean"] = mean_se(list(eps_star.values()))[0] if eps_star else math.nan
    good = bool(th) and all(ok_th) and emp_gaps and max(emp_gaps) <= step + 1e-9
    parts["threshold"] = "reproduced" if good else ("not reproduced" if th else "inconclusive")

    # FBi-SGD
    for frac in _SGD_FRACS:
        errs = _by_seed(records, "fbi-sgd", "rel_err", final=1, eps_frac=frac)
        figs[f"sgd_rel_err_max_{frac}"] = (
            max(e if math.isfinite(e) else math.inf for e in errs.values()) if errs else math.nan
        )
        figs[f"sgd_diverged_{frac}"] = sum(1 for e in errs.values() if not math.isfinite(e))
        figs[f"sgd_rel_err_mean_{frac}"] = mean_se(list(errs.values()))[0] if errs else math.nan
        if frac == _SGD_FRACS[0]:
            ok = bool(errs) and all(math.isfinite(e) and e <= 0.05 for e in errs.values())
            parts["fbi_sgd"] = "reproduced" if ok else ("not reproduced" if errs else "inconclusive")
    bytes_ = _by_seed(records, "fbi-sgd", "bytes", final=1, eps_frac=_SGD_FRACS[0])
    if bytes_:
        figs["sgd_bytes_per_client"] = mean_se(list(bytes_.values()))[0]

    # post-deployment
    outs = []
    seeds_gaps: dict[int, list[tuple[float, float]]] = {}
    for frac in _COMPARE_FRACS:
        gaps = _by_seed(records, "non-performative", "gap", compare=1, eps_frac=frac)
        m, se = mean_se(list(gaps.values()))
        figs[f"post_gap_{frac}"] = m
        figs[f"post_gap_{frac}_se"] = se
        figs[f"post_gap_{frac}_n"] = len(gaps)
        for s, g in gaps.items():
            seeds_gaps.setdefault(s, []).append((frac, g))
        outs.append(
            "inconclusive"
            if not (len(gaps) >= 2 and se > 0)
            else "reproduced"
            if m > 2 * se
            else "not reproduced"
            if m < -2 * se
            else "inconclusive"
        )
        for b in ("central-rrm", "fedavg"):
            bg = _by_seed(records, b, "gap", compare=1, eps_frac=frac)
            if bg:
                bm, bse = mean_se(list(bg.values()))
                figs[f"{b}_gap_{frac}"] = bm
                figs[f"{b}_gap_{frac}_se"] = bse
    slopes = [ols_slope([f for f, _ in v], [g for _, g in v]) for v in seeds_gaps.values() if len(v) >= 2]
    sm, sse = mean_se(slopes)
    figs["post_gap_slope"] = sm
    figs["post_gap_slope_se"] = sse
    ctrl = _by_seed(records, "non-performative", "gap", compare=1, eps_frac=0.0)
    figs["post_gap_control_eps0_max"] = max((abs(g) for g in ctrl.values()), default=math.nan)
    post = combine_outcomes(outs)
    if post == "reproduced" and not (len(slopes) >= 2 and sm > 2 * sse):
        post = "inconclusive"
    if not ctrl or figs["post_gap_control_eps0_max"] > 1e-10:
        post = "inconclusive" if post == "reproduced" else post
    parts["post_deployment"] = post
    for k, v in parts.items():
        figs[f"part_{k}"] = v
    outcome = combine_outcomes(list(parts.values()))
    summary = (
        f"rate |geo-rho| max {figs['rate_max_abs_diff']:.3g} ({parts['rate']}); threshold growth min "
        f"{figs['threshold_min_growth']:.3g}x, |emp-pred| max "
        f"{figs['threshold_max_abs_gap_emp_vs_pred']:.3g} "
        f"({parts['threshold']}); FBi-SGD rel err max {figs['sgd_rel_err_max_0.2']:.3g} at 0.2 eps* "
        f"({parts['fbi_sgd']}); post-deployment gap {figs['post_gap_0.5']:.3g} ± "
        f"{figs['post_gap_0.5_se']:.3g} at "
        f"0.5 eps*, slope {sm:.3g} ± {sse:.3g} ({post}) -> {outcome}"
    )
    return Verdict(outcome, figs, summary)


# ------------------------------------------------------------------------------------------------ plots
def plot(records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> dict[str, Any]:
    """RRM and FBi-SGD error against rounds and bytes; rho and empirical rate against eps; post gaps."""
    from matplotlib.figure import Figure

    from optarium.harness.figures import draw_band

    figs: dict[str, Any] = {}
    fig = Figure(figsize=(12.0, 4.2))
    axes = fig.subplots(1, 3)
    colors = {0.25: "tab:green", 0.5: "tab:blue", 0.75: "tab:orange", 0.95: "tab:red"}
    for frac, c in colors.items():
        by_r: dict[int, list[float]] = {}
        by_b: dict[int, list[float]] = {}
        for r in select(records, "fbi-rrm", curve=1, eps_frac=frac):
            v = float(r["rel"])
            if v > 0 and math.isfinite(v):
                by_r.setdefault(int(r["comm_rounds"]), []).append(v)
                by_b.setdefault(int(r["bytes"]), []).append(v)
        draw_band(axes[0], by_r, center="geomean", color=c, label=f"FBi-RRM eps={frac} eps*", lw=1.2)
    for frac, c in zip(_SGD_FRACS, ("tab:purple", "tab:brown"), strict=True):
        by_r = {}
        by_b = {}
        for r in select(records, "fbi-sgd", curve=1, eps_frac=frac):
            v = float(r["rel"])
            if v > 0 and math.isfinite(v):
                by_r.setdefault(int(r["comm_rounds"]), []).append(v)
                by_b.setdefault(int(r["bytes"]), []).append(v)
        draw_band(axes[1], by_r, center="geomean", color=c, label=f"FBi-SGD eps={frac} eps*", lw=1.2)
        draw_band(axes[2], by_b, center="geomean", color=c, label=f"FBi-SGD eps={frac} eps*", lw=1.2)
    for a, xl in zip(axes, ("communication rounds", "communication rounds", "bytes per client"), strict=True):
        a.set_yscale("log")
        a.set_xlabel(xl)
        a.grid(alpha=0.3)
        a.legend(fontsize=7)
    axes[1].set_xscale("log")
    axes[0].set_ylabel("||phi - phi_PS|| / ||phi_PS|| (geo-mean, min-max band)")
    fig.suptitle("distance to the FBPS point (exact FBi-RRM; sampled FBi-SGD)")
    figs["distance_vs_rounds_and_bytes"] = fig

    fig = Figure(figsize=(6.0, 4.2))
    ax = fig.subplots()
    for s in sorted({int(r["seed"]) for r in select(records, "fbi-rrm", scan=1)}):
        rows = sorted(select(records, "fbi-rrm", scan=1, seed=s), key=lambda r: float(r["eps"]))
        xs = [float(r["eps_frac"]) for r in rows]
        ax.plot(
            xs,
            [float(r["rho"]) for r in rows],
            color="tab:blue",
            alpha=0.6,
            lw=1,
            label="rho(J_T) (predicted)" if s == 0 else None,
        )
        ax.plot(
            xs,
            [min(float(r["emp_rate"]), 10.0) for r in rows],
            ls="none",
            marker=".",
            color="tab:red",
            alpha=0.6,
            label="empirical RRM rate" if s == 0 else None,
        )
    ax.axhline(1.0, color="k", lw=0.8, ls="--")
    ax.axvline(1.0, color="k", lw=0.8, ls=":")
    ax.set_yscale("log")
    ax.set_xlabel("eps / eps* (per seed)")
    ax.set_ylabel("contraction rate")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    figs["rate_vs_sensitivity"] = fig

    fig = Figure(figsize=(6.0, 4.2))
    ax = fig.subplots()
    for m, c in (("non-performative", "tab:gray"), ("central-rrm", "tab:blue"), ("fedavg", "tab:green")):
        fr = (0.0, *_COMPARE_FRACS)
        means, ses = [], []
        for f in fr:
            m_, se_ = mean_se(list(_by_seed(records, m, "gap", compare=1, eps_frac=f).values()))
            means.append(m_)
            ses.append(0.0 if not math.isfinite(se_) else se_)
        ax.errorbar(fr, means, yerr=[2 * s for s in ses], marker="o", color=c, capsize=3, label=m)
    ax.axhline(0.0, color="k", lw=0.8)
    ax.set_xlabel("eps / eps*")
    ax.set_ylabel("post-deployment loss(baseline) - loss(FBPS), ±2 SE")
    ax.set_title("paired over seeds: above 0 = FBPS better")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    figs["post_deployment_gap"] = fig
    return figs


EXPERIMENT = register(
    Experiment(
        slug="fbi-performative",
        claim=CLAIM,
        rule=RULE,
        methods=METHODS,
        baselines=BASELINES,
        distributed_methods=("fbi-sgd", "fedavg"),
        configs=CONFIGS,
        run=run,
        decide=decide,
        plot=plot,
        scaled_down=(
            "closed-form federated meta strategic regression (M=10, d=5) instead of the paper's meta "
            "strategic "
            "classification and CNN on federated MNIST; FBi-SGD 1500 rounds in the quick (3000 in full); the "
            "digits-based full experiment of the spec is not done"
        ),
    )
)
