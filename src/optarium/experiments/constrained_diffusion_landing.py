r"""Constrained diffusion via landing: does one landing step per step match Newton projections at lower cost?

Paper: Jeon, Muehlebach, Tao, "Efficient Diffusion Models under Nonconvex Equality and Inequality Constraints
via Landing", ICML 2026 (method: :mod:`optarium.generative.landing`, rules from the official code as restated
by the spec). Claim: landing-based samplers keep feasibility without Newton projections or projection
failures and cost fewer function evaluations at comparable sample quality.

**Problem** (the spec's quick part (b), without training). Nonconvex mixed set in R^3: the torus
:math:`h(x) = (\sqrt{x_1^2+x_2^2}-1)^2 + x_3^2 - 0.4^2 = 0` with the ball :math:`\|x-c\|\le 0.3` around
``c = (1, 0, 0.4)`` (a point of the torus) excluded, :math:`g(x) = 0.3^2-\|x-c\|^2\le 0`. With
:math:`s_\theta\equiv0` every sampler simulates the same constrained Brownian motion, so landing and
projection are compared against a fine reference: ``n`` particles start at one point of the torus at chord
distance 0.35 from ``c`` (next to the excluded ball), constant :math:`\sigma = 0.4`, horizon ``T = 0.5``
(mean displacement :math:`\sigma\sqrt{2T} = 0.4`, the tube radius: the law is far from stationary and
particles meet the ball), ``N = 50`` steps.

**Methods** (paired: common Brownian increments for ``olla`` and ``olla-p`` within a seed): ``olla``
(implicit landing, one terminal Gauss-Newton projection) and ``olla-p`` (Gauss-Newton projection every
step, <= 30 iterations, tol 1e-6), both with the code's boundary repulsion 0.1; reported only (not in the
rule): ``olla-eb0``, OLLA with boundary repulsion 0 (added after the first quick run showed OLLA's gap and a
one-seed check traced it to the repulsion, which pushes landed points to g = -0.1, i.e. to distance 0.44
instead of 0.3 from the ball's centre). Reference: ``olla-p`` with ``N = 400`` (independent noise); floor: the
sliced-W2 between two independent reference runs of the seed.

**Metrics**: sliced-W2 to the reference (POT, 200 projections, fixed projection seed), max violation along
the path, per-particle constraint-Jacobian evaluations, Newton iterations, their sum (``cost``), dropped
trajectories (projection failures).

**Quick rule** (stated up front, the spec's quick (b)): paired gap = sw2(olla) - sw2(olla-p) over seeds
(mean, SE).
Reproduced if mean gap <= max(mean floor, 2 SE) and olla's cost < olla-p's on every seed with zero olla
failures; not reproduced if mean gap > mean floor + 2 SE, or olla is not cheaper on some seed, or olla drops
a trajectory; otherwise inconclusive.

**Trained parts** (``s2-olla``, ``s2-ulla``, ``torus-olla``, ``torus-ulla``; one unit per trained net, which
is then sampled with its landing and its -P sampler from the same prior points with the same random numbers,
so the pair isolates the sampler). Data: S^2, 4 vMF clusters (kappa 50) at the vertices of a regular
tetrahedron (a 2-design, so the forward process reaches the uniform prior); torus minus ball, 4 von Mises
clusters in the angles on top of the tube (:func:`torus_data`; cluster 0 is centred on the excluded ball, so
the hole cuts it). Schedules (the code's S^2 defaults, on both sets): OLLA sigma 0.01 -> 1, T = 4, N = 100;
ULLA sigma 0.1 -> 2, T = 2, N = 50, gamma = 5; implicit landing, boundary repulsion 0.1. Nets: MLP 3 x 128
(SiLU, float32), Adam lr 2e-3, batch 256, EMA 0.99 (scaled down from the code's 0.999, whose 1000-step memory
would leave ~20% of the initial weights in a 1500-step run), 1500 iterations (S^2: full path sum; torus:
``time_subsample = 10``). Metrics: S^2 JSD (natural log) of 36 x 18 lon/lat histograms vs 5000 held-out
points; torus sliced-W2 (200 projections) vs 3000 held-out points; floor = held-out A vs held-out B; trivial
= uniform on S^2 / area-uniform on the feasible torus; an untrained (initial) net is reported. Costs per
sampler: per-particle Jacobian evaluations, Newton iterations, network evaluations, failures (dropped
trajectories), max violation along the path, wall time, and peak tensor memory
(:class:`optarium.generative.landing.PeakTensorMemory`, a dispatch-mode tracker of tensor storage; tracemalloc
does not see torch's CPU allocations) of sampling ``n_memory`` = 1000 particles and of one training step
(forward paths of a batch, loss, backward). A kept sample with violation > 1e-5 or a non-finite training
loss fails the unit.

**Full rule** (:data:`RULE_TRAINED`, the spec's full verdict): the s = 0 comparison is reported there, not
used.
**Quick**: the s = 0 rule above (3 seeds x 1000 particles) plus the spec's quick (a) S^2 mechanics, reported
only: one seed, OLLA and ULLA nets with 400 iterations, ``time_subsample = 10``, 2000 training / sample /
held-out points. Full: s = 0 on 10 seeds x 2000 particles; S^2 3 seeds, torus 2 seeds (a part's units on the
scale's further seeds log ``beyond_part_seeds`` and nothing else). Cost estimate of full from 1-seed runs at
full size: see the registry notes. Not done: the paper's Earth / mesh / SO(10) / robot benchmarks (data not
available offline).

**SO(3) block** (``so3``; smoke and full only, reported beside the rule as ``reported:so3:*`` figures; it
changes neither rule nor outcome, and the quick does not run it). SO(3) in R^9 with the 6 equations ``triu(R^T
R - I) = 0`` and ``det R > 0`` kept by continuity (checked each step, violations dropped and counted;
:mod:`optarium.generative.landing_so3`). Data: equal-weight mixture of 3 isotropic matrix-Fisher laws (kappa
8) around ``{I, Q, Q^2}``, ``Q`` the 120 degree rotation about (1, 1, 1) (exact sampler). No net is trained
(the reverse diffusion needs the score of the noised law, which has no closed form): every sampler uses the
**exact data score** at a constant sigma = 1 from Haar-uniform starts, i.e. a landing- or
projection-discretised Langevin chain for the data law; OLLA / OLLA-P with T = 2, N = 200 (drift +score,
relaxation rate sigma^2 kappa / 2 = 4), ULLA / ULLA-P with T = 4, N = 400, gamma = 2 (drift -score: the spec's
signed-dt reverse step moves the position against the drift). Each landing sampler and its -P counterpart take
the same steps (equal network / score evaluations) on common random numbers, 2000 particles, 3 seeds; a coarse
pair OLLA / OLLA-P with N = 20 (large steps, discretisation bias visible) is added. Figures per sampler:
squared MMD (Gaussian kernel on the Frobenius distance, bandwidth 0.5) to 2000 held-out data points, the KS
statistic of the angle to the nearest centre against the exact angle law, floor (held-out vs held-out) and
trivial (Haar) values of both, Jacobian evaluations, Newton iterations, cost, NFE, failures, wrong-component
drops, min det, max violation along the path, final violation, wall time, peak tensor memory of 100 particles
over the first 20 steps (the per-step working set; not for the coarse pair); paired landing - (-P) gaps and
cost ratios.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from optarium._core.seeding import derive_seed
from optarium.harness.experiment import Experiment, Verdict, register
from optarium.harness.stats import paired_effect
from optarium.harness.verdicts import last_values

__all__ = [
    "CONFIGS",
    "EXPERIMENT",
    "RULE",
    "decide",
    "make_constraints",
    "plot",
    "run",
    "torus_data",
    "torus_uniform",
]

CLAIM = (
    "Landing-based constrained diffusion keeps feasibility without Newton projections or projection "
    "failures and needs fewer constraint evaluations at comparable sample quality."
)
RULE_QUICK = (
    "Quick: torus with an excluded ball, s = 0, 1000 particles from one point next to the ball, sigma = 0.4, "
    "T = 0.5, N = 50: paired gap = sw2(olla) - sw2(olla-p) to an OLLA-P N = 400 reference. Reproduced if "
    "mean gap <= max(floor, 2 SE), olla cheaper (Jacobian evals + Newton iterations) on every seed and no "
    "olla failure; not reproduced if gap > floor + 2 SE, or not cheaper, or an olla failure; else "
    "inconclusive (the S^2 mechanics units are reported, not used)."
)
RULE_TRAINED = (
    "Full (the spec's full verdict). S^2: 4 vMF clusters (kappa 50, tetrahedron centres), OLLA (N = 100) and "
    "ULLA (N = 50) nets (MLP 3x128, 1500 iterations, full path sum), each sampled with its landing and -P "
    "sampler (same net, common random numbers); metric JSD of 36x18 lon/lat histograms vs 5000 held-out "
    "points. Torus minus ball: same, nets trained with time_subsample = 10; metric sliced-W2 (POT, 200 "
    "projections) vs held-out. Gate: every sampler's mean metric <= 0.2 x the trivial (uniform) sampler's, "
    "else inconclusive. "
    "Non-inferior = paired mean difference + 2 SE <= max(floor, 0.25 x comparator's mean metric). Reproduced "
    "if on the torus OLLA and ULLA each have zero failures, lower cost (Jacobian evaluations + Newton "
    "iterations) than OLLA-P / ULLA-P on every seed and are non-inferior to them, and ULLA (N = 50) is "
    "non-inferior to OLLA (N = 100) on S^2; not reproduced if on the torus a landing sampler is worse than "
    "its -P counterpart by more than margin + 2 SE or not cheaper on some seed; else inconclusive. The s = 0 "
    "comparison, memory and wall time are reported, not used."
)
#: both scales' rules (quick: :data:`RULE_QUICK`; full: :data:`RULE_TRAINED`)
RULE = RULE_QUICK + " Full: " + RULE_TRAINED
S0_METHODS = ("olla", "olla-p", "olla-eb0")
TRAINED = ("s2-olla", "s2-ulla", "torus-olla", "torus-ulla")
#: the SO(3) block (smoke and full only, reported beside the rule: not used by it, not in the quick)
SO3 = "so3"
METHODS = (*S0_METHODS, *TRAINED, SO3)
BASELINES = ("olla-p",)
SAMPLER = {"olla": "OLLA", "olla-p": "OLLA-P", "olla-eb0": "OLLA"}
#: boundary repulsion per method (code default 0.1; ``olla-eb0`` is a reported diagnostic, not in the rule)
REPULSION = {"olla": 0.1, "olla-p": 0.1, "olla-eb0": 0.0}

_BASE: dict[str, Any] = {
    "n": 1000,
    "sigma": 0.4,
    "T": 0.5,
    "N": 50,
    "N_ref": 400,
    "rho": 0.3,
    "start_chord": 0.35,
    "n_projections": 200,
    "methods": list(S0_METHODS),
    "rule": "s0",
}
#: the trained parts (``seeds`` caps a part's seeds below the scale's; units beyond it log
#: ``beyond_part_seeds``)
_S2_FULL: dict[str, Any] = {
    "seeds": 3,
    "kappa": 50.0,
    "n_train": 5000,
    "n_samples": 5000,
    "width": 128,
    "depth": 3,
    "iters": 1500,
    "batch_size": 256,
    "lr": 2e-3,
    "ema": 0.99,
    "time_subsample": None,
    "N_olla": 100,
    "N_ulla": 50,
    "n_memory": 1000,
}
_TORUS_FULL: dict[str, Any] = {
    **_S2_FULL,
    "seeds": 2,
    "rho": 0.3,
    "n_samples": 3000,
    "time_subsample": 10,
    "n_projections": 200,
}
_SMOKE_PART: dict[str, Any] = {
    "seeds": 2,
    "n_train": 64,
    "n_samples": 64,
    "width": 16,
    "depth": 1,
    "iters": 4,
    "batch_size": 16,
    "time_subsample": 2,
    "N_olla": 10,
    "N_ulla": 5,
    "n_memory": 16,
}
#: the SO(3) block: exact-score Langevin sampling of a 3-component matrix-Fisher mixture
#: (see :func:`_so3_unit`)
_SO3_FULL: dict[str, Any] = {
    "seeds": 3,
    "kappa": 8.0,
    "n_samples": 2000,
    "sigma": 1.0,
    "T_olla": 2.0,
    "N_olla": 200,
    "T_ulla": 4.0,
    "N_ulla": 400,
    "gamma": 2.0,
    "N_coarse": 20,
    "bandwidth": 0.5,
    "n_memory": 100,
}
CONFIGS: dict[str, dict[str, Any]] = {
    "smoke": {
        **_BASE,
        "n": 100,
        "N": 10,
        "N_ref": 40,
        "seeds": 2,
        "methods": list(METHODS),
        "rule": "trained",
        "s2": {**_S2_FULL, **_SMOKE_PART},
        "torus": {**_TORUS_FULL, **_SMOKE_PART},
        "so3": {
            **_SO3_FULL,
            "n_samples": 64,
            "T_olla": 0.5,
            "N_olla": 10,
            "T_ulla": 1.0,
            "N_ulla": 10,
            "N_coarse": 5,
            "n_memory": 16,
        },
    },
    "quick": {
        **_BASE,
        "seeds": 3,
        "methods": [*S0_METHODS, "s2-olla", "s2-ulla"],
        # the spec's quick (a): S^2 mechanics, reported only (one seed, 400 iterations, time_subsample 10)
        "s2": {
            **_S2_FULL,
            "seeds": 1,
            "n_train": 2000,
            "n_samples": 2000,
            "iters": 400,
            "time_subsample": 10,
            "n_memory": 200,
        },
    },
    "full": {
        **_BASE,
        "n": 2000,
        "seeds": 10,
        "methods": list(METHODS),
        "rule": "trained",
        "s2": _S2_FULL,
        "torus": _TORUS_FULL,
        "so3": _SO3_FULL,
    },
}


def make_constraints(rho: float = 0.3) -> Any:
    """The torus (R = 1, r = 0.4) with the ball of radius ``rho`` around (1, 0, 0.4) excluded."""
    from optarium.generative.landing import Constraints

    def h(x: torch.Tensor) -> torch.Tensor:
        rad = torch.sqrt(x[..., 0] ** 2 + x[..., 1] ** 2)
        return ((rad - 1.0) ** 2 + x[..., 2] ** 2 - 0.16).unsqueeze(-1)

    def g(x: torch.Tensor) -> torch.Tensor:
        c = torch.tensor([1.0, 0.0, 0.4], dtype=x.dtype, device=x.device)
        return (rho**2 - ((x - c) ** 2).sum(-1)).unsqueeze(-1)

    return Constraints(3, h=h, g=g)


def _start(config: Mapping[str, Any]) -> torch.Tensor:
    phi = 2.0 * math.asin(float(config["start_chord"]) / (2 * 0.4))
    x = torch.tensor([[1.0 + 0.4 * math.sin(phi), 0.0, 0.4 * math.cos(phi)]], dtype=torch.float64)
    return x.repeat(int(config["n"]), 1)


def _simulate(
    sampler: str, N: int, noise_seed: int, config: Mapping[str, Any], repulsion: float = 0.1
) -> Any:
    from optarium.generative.landing import LandingDiffusion, NoiseSchedule

    sig, T = float(config["sigma"]), float(config["T"])
    model = LandingDiffusion(
        make_constraints(float(config["rho"])),
        NoiseSchedule(sig, sig, T, N),
        sampler,
        boundary_repulsion=repulsion,
    )
    gen = torch.Generator().manual_seed(noise_seed)
    noise = torch.randn(N, int(config["n"]), 3, dtype=torch.float64, generator=gen)
    return model.sample(prior=_start(config), noise=noise, reverse=False)


def _key(config: Mapping[str, Any]) -> tuple:
    return tuple(float(config[k]) for k in ("n", "sigma", "T", "N_ref", "rho", "start_chord"))


@functools.lru_cache(maxsize=8)
def _reference(seed: int, key: tuple) -> tuple[np.ndarray, np.ndarray]:
    n, sigma, T, N_ref, rho, chord = key
    cfg = {"n": int(n), "sigma": sigma, "T": T, "rho": rho, "start_chord": chord}
    a = _simulate("OLLA-P", int(N_ref), derive_seed(seed, "cdl-reference-a"), cfg).x.numpy()
    b = _simulate("OLLA-P", int(N_ref), derive_seed(seed, "cdl-reference-b"), cfg).x.numpy()
    return a, b


def _sw2(x: np.ndarray, y: np.ndarray, n_proj: int, seed: int) -> float:
    import ot as pot

    return float(pot.sliced_wasserstein_distance(x, y, n_projections=n_proj, seed=seed))


def run(ctx: Any, method: str, seed: int, config: Mapping[str, Any]) -> None:
    """One (method, seed) unit: an s = 0 sampler on this seed's noise scored against the reference, or a
    trained-net unit (:data:`TRAINED`)."""
    if method in TRAINED:
        _trained_unit(ctx, method, seed, config)
        return
    if method == SO3:
        _so3_unit(ctx, seed, config)
        return
    with ctx.untimed():
        ref_a, ref_b = _reference(seed, _key(config))
    res = _simulate(
        SAMPLER[method], int(config["N"]), derive_seed(seed, "cdl-noise"), config, REPULSION[method]
    )
    with ctx.evaluating():
        npj = int(config["n_projections"])
        pseed = derive_seed(seed, "cdl-projections") % (2**31)
        x = res.x.numpy()
        jac, newton = float(res.extras["jacobian_evals"]), float(res.extras["newton_iters"])
        ctx.log(
            int(config["N"]),
            sw2=_sw2(x, ref_a, npj, pseed),
            floor=_sw2(ref_b, ref_a, npj, pseed),
            max_violation_path=float(res.extras["max_violation_path"]),
            final_violation=float(res.value),
            jacobian_evals=jac,
            newton_iters=newton,
            cost=jac + newton,
            failures=float(res.extras["dropped"]),
        )


# ------------------------------------------------------------------------------- trained parts (S^2, torus)
#: the samplers each trained-net unit draws with (same net, common random numbers within a unit)
NET_SAMPLERS = {"olla": ("OLLA", "OLLA-P"), "ulla": ("ULLA", "ULLA-P")}


def _schedule(kind: str, cfg: Mapping[str, Any]) -> Any:
    from optarium.generative.landing import NoiseSchedule

    if kind == "olla":  # the code's S^2 overdamped defaults
        return NoiseSchedule(0.01, 1.0, 4.0, int(cfg["N_olla"]))
    return NoiseSchedule(0.1, 2.0, 2.0, int(cfg["N_ulla"]))  # underdamped, gamma = 5


def _torus_point(theta: torch.Tensor, phi: torch.Tensor) -> torch.Tensor:
    rad = 1.0 + 0.4 * torch.cos(phi)
    return torch.stack([rad * torch.cos(theta), rad * torch.sin(theta), 0.4 * torch.sin(phi)], dim=-1)


def torus_uniform(n: int, rho: float, generator: torch.Generator) -> torch.Tensor:
    """``n`` points uniform (area measure) on the torus minus the ball: rejection on phi and on g."""
    C = make_constraints(rho)
    out: list[torch.Tensor] = []
    have = 0
    while have < n:
        m = 2 * (n - have) + 64
        th = 2 * math.pi * torch.rand(m, dtype=torch.float64, generator=generator)
        ph = 2 * math.pi * torch.rand(m, dtype=torch.float64, generator=generator)
        keep = torch.rand(m, dtype=torch.float64, generator=generator) < (1 + 0.4 * torch.cos(ph)) / 1.4
        x = _torus_point(th[keep], ph[keep])
        x = x[C.values(x)[1][:, 0] <= 0]
        out.append(x)
        have += x.shape[0]
    return torch.cat(out)[:n]


def torus_data(n: int, rho: float, generator: torch.Generator) -> torch.Tensor:
    """The generated torus data: 4 von Mises clusters in the angles (theta_k = k pi / 2, phi = pi / 2, i.e.
    the top of the tube; concentrations 8 in theta, 4 in phi), points in the excluded ball rejected. Cluster 0
    is centred on the ball's centre, so the hole cuts it. The 4-fold symmetry removes the slow theta modes,
    so the forward process nearly reaches the uniform prior."""
    C = make_constraints(rho)
    vm_t = torch.distributions.VonMises(torch.tensor(0.0, dtype=torch.float64), torch.tensor(8.0))
    vm_p = torch.distributions.VonMises(torch.tensor(math.pi / 2, dtype=torch.float64), torch.tensor(4.0))
    out: list[torch.Tensor] = []
    have = 0
    state = torch.random.get_rng_state()
    torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=generator)))
    try:  # torch.distributions samples from the global generator: seed it from ``generator``, then restore
        while have < n:
            m = 2 * (n - have) + 64
            comp = torch.randint(0, 4, (m,), generator=generator).to(torch.float64)
            th = vm_t.sample((m,)).to(torch.float64) + comp * math.pi / 2
            ph = vm_p.sample((m,)).to(torch.float64)
            x = _torus_point(th, ph)
            x = x[C.values(x)[1][:, 0] <= 0]
            out.append(x)
            have += x.shape[0]
    finally:
        torch.random.set_rng_state(state)
    return torch.cat(out)[:n]


def _part_data(part: str, seed: int, cfg: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    """Training set, two disjoint held-out sets, a trivial-sampler set and the prior for one seed."""
    from optarium.generative.landing import sphere_uniform, tetrahedron, vmf_mixture

    g = torch.Generator().manual_seed(derive_seed(seed, "cdl-data", part))
    n_tr, n_s = int(cfg["n_train"]), int(cfg["n_samples"])
    if part == "s2":
        draw = lambda n: vmf_mixture(tetrahedron(), float(cfg["kappa"]), n, generator=g)  # noqa: E731
        uni = lambda n: sphere_uniform(n, generator=g)  # noqa: E731
    else:
        draw = lambda n: torus_data(n, float(cfg["rho"]), g)  # noqa: E731
        uni = lambda n: torus_uniform(n, float(cfg["rho"]), g)  # noqa: E731
    return {
        "train": draw(n_tr),
        "held_a": draw(n_s),
        "held_b": draw(n_s),
        "trivial": uni(n_s),
        "prior": uni(n_s),
    }


def _quality(part: str, x: torch.Tensor, y: torch.Tensor, cfg: Mapping[str, Any], seed: int) -> float:
    if part == "s2":
        from optarium.generative.landing import latlon_jsd

        return latlon_jsd(x, y)
    pseed = derive_seed(seed, "cdl-projections") % (2**31)
    return _sw2(x.numpy(), y.numpy(), int(cfg["n_projections"]), pseed)


def _cost_figures(name: str, res: Any) -> dict[str, float]:
    """A sampler run's cost and feasibility figures, named ``<name>_*``: constraint cost (Jacobian evaluations
    plus Gauss-Newton iterations, the cost the claim is about), its parts, network evaluations, dropped
    trajectories, the largest violation along the path, the final violation and the sampling wall time."""
    jac, newton = float(res.extras["jacobian_evals"]), float(res.extras["newton_iters"])
    return {
        f"{name}_cost": jac + newton,
        f"{name}_jacobian_evals": jac,
        f"{name}_newton_iters": newton,
        f"{name}_nfe": float(res.extras["nfe"]),
        f"{name}_failures": float(res.extras["dropped"]),
        f"{name}_max_violation_path": float(res.extras["max_violation_path"]),
        f"{name}_final_violation": float(res.value),
        f"{name}_wall_s": float(res.wall_time_s),
    }


def _trained_unit(ctx: Any, method: str, seed: int, config: Mapping[str, Any]) -> None:
    """Train one net (OLLA or ULLA path loss) on the part's data, then sample with its landing and its -P
    sampler."""
    import copy

    from optarium.generative.landing import LandingDiffusion, PeakTensorMemory, mlp, sphere_constraints

    part, kind = method.split("-")
    cfg = config[part]
    if seed >= int(cfg["seeds"]):
        ctx.log(0, beyond_part_seeds=1.0)  # this part runs fewer seeds than the scale (reported in decide)
        return
    with ctx.untimed():
        data = _part_data(part, seed, cfg)
        C = sphere_constraints() if part == "s2" else make_constraints(float(cfg["rho"]))
        sched = _schedule(kind, cfg)
        torch.manual_seed(derive_seed(seed, "cdl-init", method) % (2**31))
        width, depth = int(cfg["width"]), int(cfg["depth"])
        net = mlp([7 if kind == "ulla" else 4, *([width] * depth), 3], dtype=torch.float32)
        untrained = copy.deepcopy(net)
    land, proj = NET_SAMPLERS[kind]
    model = LandingDiffusion(C, sched, land, gamma=5.0, net=net)
    gen = torch.Generator().manual_seed(derive_seed(seed, "cdl-train", method))
    ts = cfg.get("time_subsample")
    fit = model.fit(
        data["train"],
        iters=int(cfg["iters"]),
        batch_size=int(cfg["batch_size"]),
        lr=float(cfg["lr"]),
        ema=float(cfg["ema"]),
        time_subsample=None if ts is None else int(ts),
        generator=gen,
        record_every=max(1, int(cfg["iters"]) // 10),
    )
    losses = [float(r["loss"]) for r in fit.history.as_rows() if "loss" in r]
    if not all(math.isfinite(v) for v in losses):
        raise RuntimeError(f"{method}: non-finite training loss {losses}")
    ctx.log_result(fit, prefix="train_")
    with ctx.evaluating():
        figures: dict[str, float] = {}
        held_a, held_b = data["held_a"], data["held_b"]
        figures["floor"] = _quality(part, held_b, held_a, cfg, seed)
        figures["trivial"] = _quality(part, data["trivial"], held_a, cfg, seed)
        n_mem = int(cfg["n_memory"])
        # training memory: one path-loss step (forward paths of one batch + loss + backward), tensor bytes
        with PeakTensorMemory() as pm:
            paths = model.forward_paths(data["train"][: int(cfg["batch_size"])], gen)
            loss = model.path_loss(paths, time_subsample=None if ts is None else int(ts), generator=gen)
            loss.backward()
        figures["train_peak_mem"] = float(pm.peak_bytes)
        figures["train_path_bytes"] = float(fit.extras["path_bytes"])
        for name, sampler, nets in (
            (land.lower(), land, None),
            (proj.lower(), proj, None),
            ("untrained", land, untrained),
        ):
            m = LandingDiffusion(C, sched, sampler, gamma=5.0, net=model.net if nets is None else nets)
            m.ema = model.ema if nets is None else None
            sg = torch.Generator().manual_seed(derive_seed(seed, "cdl-sample", part))  # common numbers
            res = m.sample(prior=data["prior"], generator=sg)
            if res.x.shape[0] and float(res.value) > 1e-5:
                raise RuntimeError(
                    f"{method}/{name}: kept sample infeasible, violation {float(res.value):.3g}"
                )
            q = _quality(part, res.x, held_a, cfg, seed) if res.x.shape[0] else math.nan
            figures[f"{name}_q"] = q
            if nets is not None:
                continue
            figures.update(_cost_figures(name, res))
            with PeakTensorMemory() as pm:
                m.sample(prior=data["prior"][:n_mem], generator=torch.Generator().manual_seed(seed))
            figures[f"{name}_peak_mem"] = float(pm.peak_bytes)
        ctx.log(int(cfg["iters"]), **figures)


# ------------------------------------------------------------------------------------------- SO(3) block
#: the runs of the SO(3) block: name -> (sampler, steps key, horizon key); each landing run is paired with
#: its -P run (same steps, common random numbers); the ``-coarse`` pair takes ``N_coarse`` overdamped steps
#: (discretisation-bias regime: large steps, where one landing step leaves a larger residual)
SO3_RUNS = {
    "olla": ("OLLA", "N_olla", "T_olla"),
    "olla-p": ("OLLA-P", "N_olla", "T_olla"),
    "ulla": ("ULLA", "N_ulla", "T_ulla"),
    "ulla-p": ("ULLA-P", "N_ulla", "T_ulla"),
    "olla-coarse": ("OLLA", "N_coarse", "T_olla"),
    "olla-p-coarse": ("OLLA-P", "N_coarse", "T_olla"),
}
SO3_PAIRS = (("olla", "olla-p"), ("ulla", "ulla-p"), ("olla-coarse", "olla-p-coarse"))


def _so3_angle_ks(x: torch.Tensor, centres: torch.Tensor, kappa: float) -> float:
    """KS statistic of the angle to the nearest centre against the exact matrix-Fisher angle law (the
    centres are 120 degrees apart, so with kappa = 8 the mixture overlap is ~1e-4 and the law is the
    component's; the held-out floor measures what is left)."""
    from scipy import stats

    from optarium.generative.landing_so3 import matrix_fisher_angle_cdf, rotation_angle

    w = torch.stack([rotation_angle(x, c) for c in centres]).amin(0)
    cdf = lambda a: matrix_fisher_angle_cdf(torch.as_tensor(a), kappa).numpy()  # noqa: E731
    return float(stats.kstest(w.numpy(), cdf).statistic)


def _so3_unit(ctx: Any, seed: int, config: Mapping[str, Any]) -> None:
    """The SO(3) block (reported, not in the rule): Langevin sampling with the exact score of an equal-weight
    mixture of 3 isotropic matrix-Fisher laws (kappa 8, centres the cyclic group C3 about (1, 1, 1)) from
    Haar-uniform starts, constant sigma; OLLA / OLLA-P (drift +score) and ULLA / ULLA-P (drift -score, the
    spec's signed-dt reverse step) at equal steps N (equal score evaluations), each pair on common random
    numbers. No net is trained: the reverse diffusion would need the score of the noised law, which has no
    closed form, and the S^2 / torus parts already test training."""
    from optarium.generative.landing import LandingDiffusion, NoiseSchedule, PeakTensorMemory
    from optarium.generative.landing_so3 import (
        MatrixFisherScore,
        haar_rotations,
        matrix_fisher_sample,
        rotation_mmd,
        so3_constraints,
        triad_centres,
    )

    cfg = config["so3"]
    if seed >= int(cfg["seeds"]):
        ctx.log(0, beyond_part_seeds=1.0)  # this part runs fewer seeds than the scale (reported in decide)
        return
    kappa, n, bw = float(cfg["kappa"]), int(cfg["n_samples"]), float(cfg["bandwidth"])
    sig, n_mem = float(cfg["sigma"]), int(cfg["n_memory"])
    with ctx.untimed():
        g = torch.Generator().manual_seed(derive_seed(seed, "cdl-data", "so3"))
        centres = triad_centres()
        held_a = matrix_fisher_sample(centres, kappa, n, generator=g)
        held_b = matrix_fisher_sample(centres, kappa, n, generator=g)
        trivial, prior = haar_rotations(n, generator=g), haar_rotations(n, generator=g)
    with ctx.evaluating():
        figures: dict[str, float] = {
            "floor": rotation_mmd(held_b, held_a, bandwidth=bw),
            "trivial": rotation_mmd(trivial, held_a, bandwidth=bw),
            "floor_angle_ks": _so3_angle_ks(held_b, centres, kappa),
            "trivial_angle_ks": _so3_angle_ks(trivial, centres, kappa),
        }
    for name, (smp, n_key, t_key) in SO3_RUNS.items():  # sampling is timed; metrics, memory pass are not
        N, T = int(cfg[n_key]), float(cfg[t_key])
        net = MatrixFisherScore(centres, kappa, sign=1.0 if smp.startswith("OLLA") else -1.0)
        model = LandingDiffusion(
            so3_constraints(), NoiseSchedule(sig, sig, T, N), smp, gamma=float(cfg["gamma"]), net=net
        )
        pair = name.replace("-p", "")  # the landing run and its -P run share the noise
        gen = torch.Generator().manual_seed(derive_seed(seed, "cdl-so3-noise", pair))
        noise = torch.randn(N + 1, n, 9, dtype=torch.float64, generator=gen)
        res = model.sample(prior=prior, noise=noise)
        if res.x.shape[0] and float(res.value) > 1e-5:
            raise RuntimeError(f"so3/{name}: kept sample infeasible, violation {float(res.value):.3g}")
        with ctx.evaluating():
            ok = res.x.shape[0] >= 2
            det = torch.linalg.det(res.x.reshape(-1, 3, 3))
            figures.update(
                {
                    f"{name}_q": rotation_mmd(res.x, held_a, bandwidth=bw) if ok else math.nan,
                    f"{name}_angle_ks": _so3_angle_ks(res.x, centres, kappa) if ok else math.nan,
                    f"{name}_wrong_component": float(res.extras["wrong_component"]),
                    f"{name}_min_det": float(det.min()) if ok else math.nan,
                    **_cost_figures(name, res),
                }
            )
            if name.endswith("coarse"):
                continue
            # memory: the per-step working set (no path is kept), so the first <= 20 steps at the same dt
            # give the peak; the dispatch-mode tracker costs ~30x the run it watches
            n_steps = min(N, 20)
            mem_model = LandingDiffusion(
                so3_constraints(),
                NoiseSchedule(sig, sig, T * n_steps / N, n_steps),
                smp,
                gamma=float(cfg["gamma"]),
                net=net,
            )
            with PeakTensorMemory() as pm:
                mem_model.sample(prior=prior[:n_mem], noise=noise[: n_steps + 1, :n_mem])
            figures[f"{name}_peak_mem"] = float(pm.peak_bytes)
    ctx.log(int(cfg["N_olla"]), **figures)


def _so3_figures(records: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Reported-only figures of the SO(3) block (means over its seeds, paired landing - (-P) gaps)."""
    out: dict[str, float] = {}
    if not last_values(records, "floor", SO3):
        return out
    mean = lambda d: float(np.mean(list(d.values()))) if d else math.nan  # noqa: E731
    for key in ("floor", "trivial", "floor_angle_ks", "trivial_angle_ks"):
        out[f"reported:so3:{key}_mean"] = mean(last_values(records, key, SO3))
    out["reported:so3:beyond_part_seeds"] = float(len(last_values(records, "beyond_part_seeds", SO3)))
    metrics = (
        "q",
        "angle_ks",
        "cost",
        "jacobian_evals",
        "newton_iters",
        "nfe",
        "failures",
        "wrong_component",
    )
    metrics += ("min_det", "max_violation_path", "final_violation", "wall_s", "peak_mem")
    for name in SO3_RUNS:
        for metric in metrics:
            if metric == "peak_mem" and name.endswith("coarse"):
                continue
            out[f"reported:so3:{name}:{metric}_mean"] = mean(last_values(records, f"{name}_{metric}", SO3))
    for land, proj in SO3_PAIRS:
        for metric in ("q", "angle_ks"):
            eff = paired_effect(
                last_values(records, f"{proj}_{metric}", SO3),
                last_values(records, f"{land}_{metric}", SO3),
                better="lower",
            )  # gap = landing - projected
            out[f"reported:so3:{land}_vs_p:{metric}_gap_mean"] = eff.mean
            out[f"reported:so3:{land}_vs_p:{metric}_gap_se"] = eff.se
        cl = last_values(records, f"{land}_cost", SO3)
        cp = last_values(records, f"{proj}_cost", SO3)
        seeds = sorted(set(cl) & set(cp))
        if seeds:
            out[f"reported:so3:{land}_cost_ratio_mean"] = float(np.mean([cl[s] / cp[s] for s in seeds]))
    return out


def _decide_s0(records: Sequence[Mapping[str, Any]]) -> Verdict:
    """The quick (s = 0) rule of :data:`RULE`."""
    figures: dict[str, Any] = {}
    for m in S0_METHODS:
        for metric in ("sw2", "cost", "jacobian_evals", "newton_iters", "failures", "max_violation_path"):
            v = list(last_values(records, metric, m).values())
            figures[f"{m}:{metric}_mean"] = float(np.mean(v)) if v else math.nan
    land, proj = last_values(records, "sw2", "olla"), last_values(records, "sw2", "olla-p")
    eff = paired_effect(proj, land, better="lower")  # gap = sw2(olla) - sw2(olla-p)
    floors = list(last_values(records, "floor", "olla").values())
    floor = float(np.mean(floors)) if floors else math.nan
    figures.update({"gap_mean": eff.mean, "gap_se": eff.se, "n_pairs": eff.n, "floor_mean": floor})
    eb0 = paired_effect(proj, last_values(records, "sw2", "olla-eb0"), better="lower")
    figures.update({"reported:eb0_gap_mean": eb0.mean, "reported:eb0_gap_se": eb0.se})
    cl, cp = last_values(records, "cost", "olla"), last_values(records, "cost", "olla-p")
    seeds = sorted(set(cl) & set(cp))
    cheaper = bool(seeds) and all(cl[s] < cp[s] for s in seeds)
    fails = sum(last_values(records, "failures", "olla").values())
    figures.update({"olla_cheaper_every_seed": float(cheaper), "olla_failures_total": float(fails)})
    if seeds:
        figures["cost_ratio_mean"] = float(np.mean([cl[s] / cp[s] for s in seeds]))
    if eff.n < 2 or not math.isfinite(eff.se) or not math.isfinite(floor):
        return Verdict("inconclusive", figures, f"only {eff.n} paired seeds")
    worse = eff.mean > floor + 2 * eff.se
    if worse or not cheaper or fails > 0:
        outcome = "not reproduced"
    elif eff.mean <= max(floor, 2 * eff.se):
        outcome = "reproduced"
    else:
        outcome = "inconclusive"
    summary = (
        f"sw2 gap olla - olla-p {eff.mean:+.4f} ± {eff.se:.4f} (SE, n={eff.n}), floor {floor:.4f}; "
        f"cost ratio olla/olla-p {figures.get('cost_ratio_mean', math.nan):.3f}, "
        f"cheaper on every seed: {cheaper}, olla failures {fails:g} -> {outcome}"
    )
    return Verdict(outcome, figures, summary)


def _ni(land: Mapping[int, float], comp: Mapping[int, float], floor: float) -> dict[str, float]:
    """Non-inferiority of ``land`` against ``comp`` (paired by seed; lower is better)."""
    eff = paired_effect(comp, land, better="lower")  # gap = land - comp
    cv = [comp[s] for s in eff.seeds]
    margin = max(floor, 0.25 * float(np.mean(cv))) if cv else math.nan
    ok = eff.n >= 2 and math.isfinite(eff.se) and math.isfinite(margin)
    return {
        "gap_mean": eff.mean,
        "gap_se": eff.se,
        "n_pairs": float(eff.n),
        "margin": margin,
        "non_inferior": float(ok and eff.mean + 2 * eff.se <= margin),
        "worse": float(ok and eff.mean > margin + 2 * eff.se),
        "valid": float(ok),
    }


def _decide_trained(records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> Verdict:
    """The full rule of :data:`RULE_TRAINED` (the spec's full verdict)."""
    fig: dict[str, Any] = {}
    mean = lambda d: float(np.mean(list(d.values()))) if d else math.nan  # noqa: E731
    gate_ok, valid = True, True
    for part in ("s2", "torus"):
        floor = mean(last_values(records, "floor", f"{part}-olla"))
        trivial = mean(last_values(records, "trivial", f"{part}-olla"))
        fig[f"{part}:floor_mean"], fig[f"{part}:trivial_mean"] = floor, trivial
        for kind in ("olla", "ulla"):
            unit = f"{part}-{kind}"
            fig[f"{part}:{kind}:beyond_part_seeds"] = float(
                len(last_values(records, "beyond_part_seeds", unit))
            )
            for key in ("train_peak_mem", "train_path_bytes", "untrained_q"):
                fig[f"{part}:{kind}:{key}_mean"] = mean(last_values(records, key, unit))
            for smp in NET_SAMPLERS[kind]:
                name = smp.lower()
                for metric in (
                    "q",
                    "cost",
                    "jacobian_evals",
                    "newton_iters",
                    "nfe",
                    "failures",
                    "peak_mem",
                    "max_violation_path",
                    "wall_s",
                ):
                    fig[f"{part}:{name}:{metric}_mean"] = mean(last_values(records, f"{name}_{metric}", unit))
                q = fig[f"{part}:{name}:q_mean"]
                fig[f"{part}:{name}:q_over_floor"] = q / floor if floor > 0 else math.nan
                fig[f"{part}:{name}:q_over_trivial"] = q / trivial if trivial > 0 else math.nan
                passed = math.isfinite(q) and math.isfinite(trivial) and q <= 0.2 * trivial
                valid &= math.isfinite(q)
                gate_ok &= passed
    fig["gate_passed"] = float(gate_ok)
    # torus: landing vs its -P counterpart on the same net
    torus_floor = fig["torus:floor_mean"]
    worse, not_cheaper, all_good = False, False, True
    for kind, (land, proj) in NET_SAMPLERS.items():
        unit = f"torus-{kind}"
        ql = last_values(records, f"{land.lower()}_q", unit)
        qp = last_values(records, f"{proj.lower()}_q", unit)
        r = _ni(ql, qp, torus_floor)
        fig.update({f"torus:{kind}_vs_p:{k}": v for k, v in r.items()})
        cl = last_values(records, f"{land.lower()}_cost", unit)
        cp = last_values(records, f"{proj.lower()}_cost", unit)
        seeds = sorted(set(cl) & set(cp))
        cheaper = bool(seeds) and all(cl[s] < cp[s] for s in seeds)
        fails = sum(last_values(records, f"{land.lower()}_failures", unit).values())
        fig[f"torus:{kind}_cheaper_every_seed"] = float(cheaper)
        fig[f"torus:{kind}_landing_failures"] = float(fails)
        if seeds:
            fig[f"torus:{kind}_cost_ratio_mean"] = float(np.mean([cl[s] / cp[s] for s in seeds]))
        valid &= bool(r["valid"]) and bool(seeds)
        worse |= bool(r["worse"])
        not_cheaper |= bool(seeds) and not cheaper
        all_good &= bool(r["non_inferior"]) and cheaper and fails == 0
    # S^2: ULLA (N_ulla steps) non-inferior to OLLA (N_olla steps)
    s2 = _ni(
        last_values(records, "ulla_q", "s2-ulla"),
        last_values(records, "olla_q", "s2-olla"),
        fig["s2:floor_mean"],
    )
    fig.update({f"s2:ulla_vs_olla:{k}": v for k, v in s2.items()})
    valid &= bool(s2["valid"])
    s0 = _decide_s0(records)
    fig.update({f"reported:s0:{k}": v for k, v in s0.figures.items()})
    fig.update(_so3_figures(records))  # the SO(3) block: reported beside the rule, not used by it
    if not valid:
        outcome, why = (
            "inconclusive",
            "missing or non-finite trained-part figures (fewer than 2 paired seeds?)",
        )
    elif not gate_ok:
        outcome, why = (
            "inconclusive",
            "quality gate failed (some sampler's metric > 0.2 x the trivial sampler's)",
        )
    elif worse or not_cheaper:
        outcome, why = "not reproduced", "a landing sampler is worse than its -P counterpart or not cheaper"
    elif all_good and bool(s2["non_inferior"]):
        outcome, why = (
            "reproduced",
            "gate passed, landing non-inferior and cheaper with no failures, ULLA ~ OLLA",
        )
    else:
        outcome, why = "inconclusive", "neither clause holds"
    summary = (
        f"gate {'passed' if gate_ok else 'failed'}; torus OLLA-OLLA-P sw2 gap "
        f"{fig['torus:olla_vs_p:gap_mean']:+.4f} +- {fig['torus:olla_vs_p:gap_se']:.4f} (margin "
        f"{fig['torus:olla_vs_p:margin']:.4f}), ULLA-ULLA-P {fig['torus:ulla_vs_p:gap_mean']:+.4f} +- "
        f"{fig['torus:ulla_vs_p:gap_se']:.4f}; cost ratios "
        f"{fig.get('torus:olla_cost_ratio_mean', math.nan):.3f} / "
        f"{fig.get('torus:ulla_cost_ratio_mean', math.nan):.3f}; S^2 JSD ULLA-OLLA {s2['gap_mean']:+.4f} +- "
        f"{s2['gap_se']:.4f} (margin {s2['margin']:.4f}); s = 0 part (reported): {s0.outcome} -> "
        f"{outcome} ({why})"
    )
    return Verdict(outcome, fig, summary)


def _s2_mechanics(records: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Reported-only figures of the quick S^2 mechanics units."""
    out: dict[str, float] = {}
    for kind in ("olla", "ulla"):
        unit = f"s2-{kind}"
        for key in ("floor", "trivial", "untrained_q", "train_peak_mem"):
            v = list(last_values(records, key, unit).values())
            if v:
                out[f"reported:s2:{kind}:{key}"] = float(np.mean(v))
        for smp in NET_SAMPLERS[kind]:
            for metric in ("q", "failures", "final_violation", "max_violation_path", "cost", "peak_mem"):
                v = list(last_values(records, f"{smp.lower()}_{metric}", unit).values())
                if v:
                    out[f"reported:s2:{smp.lower()}:{metric}"] = float(np.mean(v))
    return out


def decide(records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> Verdict:
    """``config["rule"] == "s0"`` (quick): the s = 0 rule of :data:`RULE` (the S^2 mechanics figures are
    reported, not used); ``"trained"`` (full, smoke): the spec's full rule, :data:`RULE_TRAINED`."""
    if config.get("rule", "s0") == "trained":
        return _decide_trained(records, config)
    v = _decide_s0(records)
    return Verdict(v.outcome, {**v.figures, **_s2_mechanics(records)}, v.summary)


def plot(records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> dict[str, Any]:
    """Sliced-W2 to the reference (with the floor), and the cost per method, per seed; with trained-net
    records also each part's per-sampler metric (per seed) against its floor and trivial sampler."""
    from optarium.harness.figures import panel_grid

    out = {"quality_and_cost": _plot_s0(records, panel_grid)}
    parts = [p for p in ("s2", "torus") if last_values(records, "floor", f"{p}-olla")]
    if parts:
        fig, axes = panel_grid(len(parts))
        for ax, part in zip(axes, parts, strict=True):
            names = [smp.lower() for kind in ("olla", "ulla") for smp in NET_SAMPLERS[kind]]
            for i, name in enumerate(names):
                unit = f"{part}-{name.split('-')[0]}"
                q = last_values(records, f"{name}_q", unit)
                ax.scatter([i + 0.05 * s for s in q], list(q.values()), color="C0")
            for key, style in (("floor", ":"), ("trivial", "--")):
                v = list(last_values(records, key, f"{part}-olla").values())
                if v:
                    ax.axhline(float(np.mean(v)), ls=style, color="k", label=f"{key} (mean)")
                    if key == "trivial":
                        ax.axhline(0.2 * float(np.mean(v)), ls="-.", color="r", label="gate 0.2 x trivial")
            ax.set_xticks(range(len(names)), names)
            ax.set_ylabel("JSD (36x18 lon/lat)" if part == "s2" else "sliced-W2 to held-out")
            ax.set_title(f"{part}: trained nets, per seed")
            ax.set_yscale("log")
            ax.legend(fontsize=7)
        out["trained_quality"] = fig
    if last_values(records, "floor", SO3):  # the SO(3) block (reported beside the rule)
        fig, (ax, ax2) = panel_grid(2)
        names = list(SO3_RUNS)
        for i, name in enumerate(names):
            for a_, metric in ((ax, "q"), (ax2, "cost")):
                v = last_values(records, f"{name}_{metric}", SO3)
                a_.scatter([i + 0.05 * s for s in v], list(v.values()), color="C0")
        for key, style in (("floor", ":"), ("trivial", "--")):
            v = list(last_values(records, key, SO3).values())
            ax.axhline(float(np.mean(v)), ls=style, color="k", label=f"{key} (mean)")
        for a_, label in (
            (ax, "MMD^2 to held-out (Gaussian kernel, l = 0.5)"),
            (ax2, "Jacobian evals + Newton"),
        ):
            a_.set_xticks(range(len(names)), names)
            a_.set_ylabel(label)
        ax.set_title("SO(3), exact-score Langevin, per seed (reported)")
        ax.legend(fontsize=7)
        out["so3"] = fig
    return out


def _plot_s0(records: Sequence[Mapping[str, Any]], panel_grid: Any) -> Any:
    fig, (ax, ax2) = panel_grid(2)
    for i, m in enumerate(S0_METHODS):
        sw = last_values(records, "sw2", m)
        ax.scatter([s + 0.1 * i for s in sw], list(sw.values()), label=m)
        cost = last_values(records, "cost", m)
        ax2.bar([s + 0.28 * i for s in cost], list(cost.values()), width=0.28, label=m)
    fl = last_values(records, "floor", "olla")
    ax.scatter(list(fl), list(fl.values()), marker="x", color="k", label="floor (ref vs ref)")
    ax.set_xlabel("seed")
    ax.set_ylabel("sliced-W2 to the N = 400 reference")
    ax.set_title("sample quality (s = 0, torus minus ball)")
    ax.legend(fontsize=7)
    ax2.set_xlabel("seed")
    ax2.set_ylabel("Jacobian evaluations + Newton iterations")
    ax2.set_title("cost per run (per-particle counts)")
    ax2.legend(fontsize=7)
    return fig


EXPERIMENT = register(
    Experiment(
        slug="constrained-diffusion-landing",
        claim=CLAIM,
        rule=RULE,
        methods=METHODS,
        baselines=BASELINES,
        configs=CONFIGS,
        run=run,
        decide=decide,
        plot=plot,
        scaled_down=(
            "quick: the verdict from the untrained (s = 0) torus-minus-ball comparison (3 seeds x 1000 "
            "particles) plus reported S^2 mechanics (1 seed, nets trained 400 iterations with time_subsample "
            "10, 2000 points); full: trained S^2 (3 seeds) and torus (2 seeds) comparisons with MLP 3x128 "
            "(code: 5x512), 1500 iterations (code: 20k epochs), EMA 0.99 (code: 0.999), generated data "
            "instead "
            "of the Earth / mesh benchmarks; SO(3) (full only, reported) with the exact score of a generated "
            "matrix-Fisher mixture instead of a trained net (SO(10) in the paper)"
        ),
    )
)
