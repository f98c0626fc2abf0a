"""Tracking-ADMM and DPMM on the mixed affine problem: optimum, one-node limits, rounds, parity, bad input."""

from __future__ import annotations

import pytest
import torch

from optarium.distributed.comm import Communicator
from optarium.distributed.decentralized_affine import InfeasibleProblemError, make_mixed_affine
from optarium.distributed.decentralized_affine_baselines import (
    BASELINES,
    coupled_form,
    solve_coupled_baseline,
    spmd_solve,
)
from optarium.distributed.topology import mixing_matrix

N = 6


def _gossip(topology: str = "ring", n: int = N, seed: int = 0) -> torch.Tensor:
    kw = {"p": 0.5, "generator": torch.Generator().manual_seed(seed)} if topology == "erdos_renyi" else {}
    return torch.eye(n, dtype=torch.float64) - mixing_matrix(topology, n, **kw)


def _small(n: int = N, seed: int = 0, **kw: object):
    base = {"d": 3, "dt": 2, "m": 2, "r": 1, "rt_nodes": (0, 1), "kappa_f": 5.0}
    base.update(kw)
    return make_mixed_affine(n, seed=seed, **base)  # type: ignore[arg-type]


@pytest.mark.parametrize("method,kw", [("tracking-admm", {"c": 1.0}), ("dpmm", {})])
@pytest.mark.parametrize("topology", ["ring", "erdos_renyi"])
def test_reaches_the_centralized_kkt_solution(method: str, kw: dict, topology: str) -> None:
    p = _small(seed=1)
    X, xt, f = p.solution()
    W = _gossip(topology, seed=3)
    res = solve_coupled_baseline(
        p,
        Communicator.local(N),
        W,
        method=method,
        x_star=(X, xt),
        tol=1e-9,
        max_iter=4000,
        record_every=10,
        **kw,
    )
    assert res.status == "converged"
    assert res.history.last("rel_err") <= 1e-9
    assert res.history.last("residual") < 1e-7
    assert res.value == pytest.approx(f, rel=1e-7, abs=1e-9)


def _alm_reference(p, method: str, iters: int, c: float, alpha: float, gamma: float) -> torch.Tensor:
    """One node: the (proximal) method of multipliers, written densely with an equality-constrained solve."""
    H, h = p.H[0], p.h[0]
    d, dt = p.d, p.dt
    A = torch.cat([p.A[0], torch.zeros(p.m, dt, dtype=H.dtype)], 1)
    b = p.b[0]
    E = torch.block_diag(p.C[0], p.Ct[0])
    e = torch.cat([p.c[0], p.ct[0]])
    rho = c if method == "tracking-admm" else gamma
    Q = H + rho * A.T @ A + (torch.eye(d + dt, dtype=H.dtype) / alpha if method == "dpmm" else 0.0)
    K = torch.cat([torch.cat([Q, E.T], 1), torch.cat([E, torch.zeros(E.shape[0], E.shape[0])], 1)], 0)
    z = torch.zeros(d + dt, dtype=H.dtype)
    lam = torch.zeros(p.m, dtype=H.dtype)
    for _ in range(iters):
        prox = z / alpha if method == "dpmm" else 0.0
        rhs = h - A.T @ lam + rho * A.T @ b + prox
        z = torch.linalg.solve(K, torch.cat([rhs, e]))[: d + dt]
        lam = lam + rho * (A @ z - b)
    return z


@pytest.mark.parametrize("method", BASELINES)
def test_one_node_is_the_method_of_multipliers(method: str) -> None:
    """n = 1 (W = 0, no consensus rows): Tracking-ADMM is the augmented-Lagrangian method of multipliers
    with penalty c, DPMM the proximal method of multipliers (penalty gamma, proximal weight alpha)."""
    p = make_mixed_affine(1, d=4, dt=2, m=2, r=1, rt_nodes=(0,), kappa_f=6.0, seed=4)
    W = torch.zeros(1, 1, dtype=torch.float64)
    kw = {"c": 0.7} if method == "tracking-admm" else {"alpha": 0.8, "gamma": 0.6, "beta": 1.0}
    res = solve_coupled_baseline(p, Communicator.local(1), W, method=method, max_iter=9, **kw)
    ref = _alm_reference(p, method, 9, c=0.7, alpha=0.8, gamma=0.6)
    got = torch.cat([res.x["x"][0], res.x["xt"][0]])
    assert torch.allclose(got, ref, atol=1e-12, rtol=1e-10)


def test_coupled_form_is_the_coupled_constraint_plus_consensus() -> None:
    p = _small(seed=2)
    W = _gossip("erdos_renyi", seed=5)
    Ap, bp = coupled_form(p, W)
    n_edges = int(((W != 0).sum() - N) // 2)
    assert Ap.shape == (N, p.m + n_edges * p.dt, p.d + p.dt)
    X, xt, _ = p.solution()
    Z = torch.cat([X, xt.expand(N, p.dt)], 1)
    assert (torch.einsum("nij,nj->i", Ap, Z) - bp.sum(0)).abs().max() < 1e-10
    Z2 = Z.clone()
    Z2[3, p.d :] += 0.1  # copies disagree: a consensus row is violated
    assert (torch.einsum("nij,nj->i", Ap, Z2) - bp.sum(0)).abs().max() > 1e-3


@pytest.mark.parametrize("method", BASELINES)
def test_one_gossip_round_per_iteration_and_evaluation_uncounted(method: str) -> None:
    p = _small(seed=0)
    W = _gossip()
    comm = Communicator.local(N)
    X, xt, _ = p.solution()
    a = solve_coupled_baseline(p, comm, W, method=method, max_iter=12, x_star=(X, xt), record_every=1)
    b = solve_coupled_baseline(p, Communicator.local(N), W, method=method, max_iter=12, record_every=12)
    assert a.history.last("gossip_rounds") == 12 == b.history.last("gossip_rounds")
    assert a.history.last("uplink_bits") == pytest.approx(b.history.last("uplink_bits"))
    assert torch.equal(a.extras["U"], b.extras["U"])
    assert a.history.last("grad_calls") == 12


def test_float32_follows_the_input_and_max_rounds_stops() -> None:
    p = _small(seed=0).to(dtype=torch.float32)
    res = solve_coupled_baseline(p, Communicator.local(N), _gossip().float(), method="dpmm", max_rounds=5)
    assert res.x["x"].dtype == torch.float32
    assert res.status == "max_iter" and res.n_iter == 5


def test_spmd_solve_dispatches_both_families() -> None:
    p = _small(seed=0)
    W = _gossip()
    jobs = [(p, W, {"method": "dpmm", "max_iter": 3}), (p, W, {"method": "apapc", "max_iter": 3})]
    out = spmd_solve(Communicator.local(N), jobs)
    assert [r.history.last("gossip_rounds") for r in out] == [3, 12]
    with pytest.raises(ValueError, match="method"):
        spmd_solve(Communicator.local(N), [(p, W, {"method": "admm"})])


def test_bad_input_names_the_argument() -> None:
    p = _small(seed=0)
    W = _gossip()
    comm = Communicator.local(N)
    for kw, name in (
        ({"method": "admm"}, "method"),
        ({"c": 0.0}, "c"),
        ({"theta": 2.0}, "theta"),
        ({"alpha": -1.0}, "alpha"),
        ({"method": "dpmm", "beta": 10.0}, "beta"),
        ({"max_iter": -1}, "max_iter"),
        ({"max_rounds": 0}, "max_rounds"),
    ):
        with pytest.raises(ValueError, match=name):
            solve_coupled_baseline(p, comm, W, **kw)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="W"):
        solve_coupled_baseline(p, comm, torch.eye(N, dtype=torch.float64))
    with pytest.raises(TypeError, match="problem"):
        solve_coupled_baseline("p", comm, W)  # type: ignore[arg-type]
    bad = make_mixed_affine(N, d=3, dt=2, m=2, r=1, rt_nodes=(0,), kappa_f=5.0, seed=0)
    bad = type(bad)(**{**bad.__dict__, "c": bad.c + 1.0, "C": bad.C.new_zeros(bad.C.shape)})
    with pytest.raises(InfeasibleProblemError):
        solve_coupled_baseline(bad, comm, W)


@pytest.mark.distributed
def test_one_and_two_gloo_processes_give_the_same_iterates_and_counts() -> None:
    """World size 1 vs 2 (uneven blocks 3, 2 of 5 nodes): same iterates and communication counts."""
    from optarium.distributed.launch import launch

    p = make_mixed_affine(5, d=3, dt=2, m=2, r=1, rt_nodes=(0, 3), kappa_f=8.0, seed=7)
    W = _gossip("ring", n=5)
    jobs = [(p, W, {"method": "tracking-admm", "max_iter": 6}), (p, W, {"method": "dpmm", "max_iter": 6})]
    (one,) = launch(spmd_solve, 1, jobs, n_clients=5)
    two = launch(spmd_solve, 2, jobs, n_clients=5, timeout_s=60.0)
    for rank_out in two:
        for a, b in zip(one, rank_out, strict=True):
            assert torch.allclose(b.extras["U"], a.extras["U"], atol=1e-10, rtol=1e-10)
            assert b.history.last("gossip_rounds") == a.history.last("gossip_rounds") == 6
            assert b.history.last("uplink_bits") == pytest.approx(a.history.last("uplink_bits"), rel=1e-12)
            assert b.history.last("objective") == pytest.approx(a.history.last("objective"), rel=1e-9)
