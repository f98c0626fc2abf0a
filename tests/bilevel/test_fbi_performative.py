"""FBi-RRM / FBi-SGD (federated bilevel performative prediction): falsifiable checks from the spec (1-8)."""

from __future__ import annotations

import math

import pytest
import torch

from optarium.bilevel.fbi_performative import (
    default_outer_schedule,
    fbi_batch,
    fbi_rrm,
    fbi_sgd,
    performative_fedavg,
    pooled_rrm,
    stability_threshold,
    stable_point,
)
from optarium.distributed.comm import Communicator
from optarium.problems.strategic_regression import StrategicMetaRegression, make_strategic_meta_regression

GRID = [0.1 * i for i in range(11)]


@pytest.fixture(scope="module")
def seed0() -> tuple[StrategicMetaRegression, float]:
    base = make_strategic_meta_regression(seed=0)
    eps_star, _ = stability_threshold(base, GRID)
    return base, eps_star


def _dists(res) -> list[float]:
    return [float(r["dist"]) for r in res.history.as_rows()]


# 0: the closed-form moments are the Gaussian moments (Monte Carlo, loose)
def test_moments_match_samples() -> None:
    p = make_strategic_meta_regression(eps=0.5, seed=3)
    U = 0.5 * torch.randn(10, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    cl = torch.arange(10)
    S, c, Ey2 = p.moments(U, cl)
    X, y = p.sample(U, cl, 40_000, torch.Generator().manual_seed(1))
    assert torch.allclose(S, X.transpose(1, 2) @ X / 4e4, atol=0.08)
    assert torch.allclose(c, (X.transpose(1, 2) @ y[..., None]).squeeze(-1) / 4e4, atol=0.2)
    assert torch.allclose(Ey2, (y * y).mean(1), rtol=0.05)


# 1: eps = 0: the FBPS point is the static bilevel solution
def test_eps_zero_is_static_bilevel_solution() -> None:
    p = make_strategic_meta_regression(seed=0)
    sp = stable_point(p)
    cl = torch.arange(10)
    S, c, _ = p.moments(torch.zeros(10, 5, dtype=torch.float64), cl)
    A = torch.linalg.inv(S + torch.eye(5, dtype=torch.float64))

    def F(theta: torch.Tensor) -> torch.Tensor:  # the UL objective of the static problem
        u = (A @ (c + theta)[:, :, None]).squeeze(-1)
        return 0.5 * ((u[:, None, :] @ S @ u[:, :, None]).reshape(-1) - 2 * (c * u).sum(-1)).mean()

    th = torch.zeros(5, dtype=torch.float64)
    H = torch.autograd.functional.hessian(F, th)
    g = torch.autograd.functional.jacobian(F, th)
    theta_star = th - torch.linalg.solve(H, g)
    assert torch.allclose(sp.theta, theta_star, atol=1e-8)
    assert torch.allclose(sp.U, (A @ (c + theta_star)[:, :, None]).squeeze(-1), atol=1e-8)
    assert sp.rho == pytest.approx(0.0, abs=1e-12)


# 2: lambda large, M = 1: FBi-RRM is centralised RRM (Perdomo et al.) on the same regression
def test_large_lambda_single_client_is_centralised_rrm() -> None:
    p = make_strategic_meta_regression(1, 4, eps=0.3, lam=1e6, seed=2)
    res = fbi_rrm(p, Communicator.local(1), 40)
    w = pooled_rrm(p, 200, tol=1e-13)
    assert w.status == "converged"
    assert float((res.extras["theta"] - w.x).norm() / w.x.norm()) < 1e-4
    # the closed-form fixed point of Perdomo's RRM: w = S(w)^{-1} c(w)
    assert float((p.pooled_response(w.x) - w.x).norm()) < 1e-10


# 3: linear rate equals the spectral radius of J_T; the norm bound holds
def test_linear_rate_is_spectral_radius(seed0) -> None:
    base, eps_star = seed0
    p = base.with_eps(0.5 * eps_star)
    sp = stable_point(p)
    assert sp.converged and sp.rho < 1
    ds = _dists(fbi_rrm(p, Communicator.local(10), 25, ref=(sp.theta, sp.U)))
    floor = 1e-9 * ds[0]  # the Newton point is exact to ~1e-12: ratios below this are round-off
    ratios = [ds[r + 1] / ds[r] for r in range(5, 20) if ds[r + 1] > floor]
    assert len(ratios) >= 5
    geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
    assert abs(geo - sp.rho) < 0.05, (geo, sp.rho)
    assert all(ds[r + 1] / ds[r] <= sp.norm + 0.05 for r in range(3, 20) if ds[r + 1] > floor)


# 4: above the threshold a tiny perturbation of the (unstable) FBPS point grows; below it dies out
def test_threshold_instability(seed0) -> None:
    base, eps_star = seed0
    gen = torch.Generator().manual_seed(0)
    out = {}
    for frac in (0.5, 2.0):
        _, scan = stability_threshold(base, [e * frac * eps_star / 2.0 for e in range(3)])
        sp = scan[-1][1]  # continued along eps from eps = 0: the branch RRM would follow
        p = base.with_eps(frac * eps_star)
        pert = torch.randn(5 + 50, generator=gen, dtype=torch.float64)
        pert = 1e-3 * pert / pert.norm()
        th0, U0 = sp.theta + pert[:5], sp.U + pert[5:].reshape(10, 5)
        ds = _dists(fbi_rrm(p, Communicator.local(10), 30, theta0=th0, U0=U0, ref=(sp.theta, sp.U)))
        out[frac] = (sp.rho, ds[0], ds[-1])
    rho, d0, d30 = out[2.0]
    assert rho > 1 and d30 > 100 * d0, out
    rho, d0, d30 = out[0.5]
    assert rho < 1 and d30 < 1e-6, out


# 5: the federated hypergradient with the exact Hessian inverse is the centralised one (finite differences)
def test_federated_hypergradient_matches_finite_differences() -> None:
    p = make_strategic_meta_regression(eps=0.4, seed=1)
    U = 0.3 * torch.randn(10, 5, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    cl = torch.arange(10)
    theta = torch.randn(5, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    S, c, _ = p.moments(U, cl)
    comm = Communicator.local(10)
    # per client: u*(theta), v = (S + lam I)^{-1} grad_u f, h = -d2_{theta u} g v = lam v
    u = p.lower_solution(theta, U, cl)
    gu = (S @ u[:, :, None]).squeeze(-1) - c
    v = torch.linalg.solve(S + p.lam * torch.eye(5, dtype=torch.float64), gu)
    h = comm.client_sum(p.weights[:, None] * (-p.cross_vjp(v)))

    def F(th: torch.Tensor) -> float:
        return float(p.risk(p.lower_solution(th, U, cl), U, cl).mul(p.weights).sum())

    fd = torch.stack(
        [
            torch.tensor((F(theta + 1e-5 * e) - F(theta - 1e-5 * e)) / 2e-5)
            for e in torch.eye(5, dtype=torch.float64)
        ]
    )
    assert torch.allclose(h, fd.to(h), atol=1e-5)
    # and the exact RRM step's theta is where it vanishes
    H, b = p.bilevel_terms(U, cl)
    th_plus = torch.linalg.solve(H.sum(0), b.sum(0))
    assert torch.allclose(H.sum(0) @ theta - b.sum(0), h, atol=1e-10)
    assert float(th_plus.norm()) > 0


def _sgd_case(seed0, seed: int) -> tuple[float, float, torch.Tensor]:
    base, eps_star = seed0
    p = base.with_eps(0.2 * eps_star)
    sp = stable_point(p)
    res = fbi_sgd(
        p,
        Communicator.local(10),
        3000,
        ref=(sp.theta, sp.U),
        seed=seed,
        record_every=300,
        lr_outer=default_outer_schedule(p, r0=10.0),
    )
    rows = res.history.as_rows()
    at = {int(r["step"]): float(r["dist_to_ref"]) for r in rows}
    return at[300], at[3000], res.extras["U"]


# 6: FBi-SGD converges with diminishing steps; personalised blocks are not averaged
def test_fbi_sgd_converges_seed0(seed0) -> None:
    e300, e3000, U = _sgd_case(seed0, 0)
    assert e3000 < 0.05 and e3000 < e300
    spread = float((U - U.mean(0)).norm(dim=-1).min())
    assert spread > 0.1  # w_i* differ, so do the blocks u_i


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_fbi_sgd_converges_more_seeds(seed0, seed: int) -> None:
    e300, e3000, _ = _sgd_case(seed0, seed)
    assert e3000 < 0.05 and e3000 < e300


# 7: communication counts
def test_communication_counts() -> None:
    p = make_strategic_meta_regression(eps=0.2, seed=0)
    d = p.dim
    comm = Communicator.local(10)
    res = fbi_sgd(p, comm, 40, record_every=7, lr_outer=0.5)
    st = res.extras["comm"]
    assert st["uplink_rounds"] == st["downlink_rounds"] == 40
    assert st["uplink_bits"] == 40 * d * 64 == st["uplink_bits_max"]  # no u_i uploaded
    comm = Communicator.local(10)
    st = fbi_rrm(p, comm, 6).extras["comm"]
    assert st["uplink_rounds"] == 6 and st["uplink_bits"] == 6 * (d * d + d) * 64
    comm = Communicator.local(10)
    res = fbi_rrm(p, comm, 3, inner_solver="fed_gd", inner_rounds=7, inner_tol=0.0)
    assert res.extras["comm"]["uplink_rounds"] == 21 and res.extras["comm"]["uplink_bits"] == 21 * d * 64
    # fed_gd to convergence reaches the exact RRM iterate
    exact = fbi_rrm(p, Communicator.local(10), 3)
    fed = fbi_rrm(p, Communicator.local(10), 3, inner_solver="fed_gd", inner_rounds=500, inner_tol=1e-12)
    assert torch.allclose(fed.extras["U"], exact.extras["U"], atol=1e-9)


@pytest.mark.distributed
def test_world_sizes_give_same_iterates_and_counts() -> None:
    from optarium.distributed.launch import launch

    p = make_strategic_meta_regression(5, 3, eps=0.3, seed=4)
    jobs = [
        ("fbi-sgd", p, 30, {"record_every": 10, "lr_outer": 0.5, "seed": 2}),
        ("fbi-rrm", p, 5, {}),
        ("fedavg", p, 10, {"seed": 1}),
    ]
    (one,) = launch(fbi_batch, 1, jobs, n_clients=5)
    two = launch(fbi_batch, 2, jobs, n_clients=5, timeout_s=60.0)  # blocks of 3 and 2 clients
    for rank_out in two:
        for a, b in zip(one, rank_out, strict=True):
            assert torch.allclose(a.x, b.x, atol=1e-12, rtol=0)
            if "U" in a.extras:
                assert torch.allclose(a.extras["U"], b.extras["U"], atol=1e-12, rtol=0)
            for key in ("uplink_rounds", "downlink_rounds", "uplink_bits", "downlink_bits"):
                assert a.extras["comm"][key] == b.extras["comm"][key], key


def test_fedavg_reaches_pooled_rrm_point() -> None:
    p = make_strategic_meta_regression(eps=0.2, seed=0)
    w = pooled_rrm(p, 100, tol=1e-12).x
    res = performative_fedavg(p, Communicator.local(10), 600, ref=w, record_every=100, batch_size=64)
    assert res.history.as_rows()[-1]["dist_to_ref"] < 0.05


def test_determinism_and_seed_dependence() -> None:
    p = make_strategic_meta_regression(eps=0.2, seed=0)
    a = fbi_sgd(p, Communicator.local(10), 20, lr_outer=0.5, seed=3)
    b = fbi_sgd(p, Communicator.local(10), 20, lr_outer=0.5, seed=3)
    c = fbi_sgd(p, Communicator.local(10), 20, lr_outer=0.5, seed=4)
    assert torch.equal(a.extras["U"], b.extras["U"]) and not torch.equal(a.extras["U"], c.extras["U"])


# 8: bad input
def test_bad_input() -> None:
    p = make_strategic_meta_regression(eps=0.2, seed=0)
    comm = Communicator.local(10)
    with pytest.raises(ValueError, match=r"^eps"):
        make_strategic_meta_regression(eps=-0.1)
    with pytest.raises(ValueError, match=r"^lam"):
        make_strategic_meta_regression(lam=0.0)
    with pytest.raises(ValueError, match=r"^U0"):
        fbi_sgd(p, comm, 3, U0=torch.zeros(7, 5), lr_outer=0.5)
    with pytest.raises(ValueError, match=r"^comm"):
        fbi_rrm(p, Communicator.local(4), 3)
    with pytest.raises(ValueError, match=r"^inner_solver"):
        fbi_rrm(p, comm, 3, inner_solver="newton")
    with pytest.raises(ValueError, match=r"^neumann_terms"):
        fbi_sgd(p, comm, 3, neumann_terms=0, lr_outer=0.5)
    with pytest.raises(ValueError, match=r"^tol"):
        fbi_sgd(p, comm, 3, tol=0.1, lr_outer=0.5)
    with pytest.raises(TypeError, match=r"^problem"):
        fbi_sgd(object(), comm, 3)
    # weights not summing to one: normalised with a warning, same iterates as the normalised problem
    import dataclasses

    q = dataclasses.replace(p)
    object.__setattr__(q, "weights", 2 * p.weights)
    with pytest.warns(UserWarning, match="normalised"):
        a = fbi_rrm(q, comm, 3)
    b = fbi_rrm(p, Communicator.local(10), 3)
    assert torch.allclose(a.extras["U"], b.extras["U"], atol=1e-12)
    assert torch.equal(q.weights, 2 * p.weights)  # the caller's problem is not modified
