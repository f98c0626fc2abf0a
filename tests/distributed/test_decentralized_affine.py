"""Falsifiable checks of APAPC + Chebyshev for decentralized mixed affine constraints (spec tests 1-9)."""

from __future__ import annotations

import math

import pytest
import torch

from optarium.distributed.comm import Communicator
from optarium.distributed.decentralized_affine import (
    CHEB_HIGH,
    CHEB_LOW,
    InfeasibleProblemError,
    MixedAffineProblem,
    chebyshev_apply,
    chebyshev_matrix,
    check_gossip_matrix,
    make_mixed_affine,
    mixed_affine_setup,
    solve_mixed_affine,
    spmd_solve,
)
from optarium.distributed.topology import mixing_matrix

N = 6


def _gossip(topology: str = "ring", n: int = N, seed: int = 0) -> torch.Tensor:
    kw = {"p": 0.5, "generator": torch.Generator().manual_seed(seed)} if topology == "erdos_renyi" else {}
    return torch.eye(n, dtype=torch.float64) - mixing_matrix(topology, n, **kw)


def _small(seed: int = 0, **kw: object) -> MixedAffineProblem:
    base = {"d": 3, "dt": 2, "m": 2, "r": 1, "rt_nodes": (0, 1), "kappa_f": 5.0}
    base.update(kw)
    return make_mixed_affine(N, seed=seed, **base)  # type: ignore[arg-type]


def _solve(p: MixedAffineProblem, W: torch.Tensor, **kw: object):
    X, xt, _ = p.solution()
    kw = {"x_star": (X, xt), "tol": 1e-9, "max_iter": 3000, "record_every": 5, **kw}
    return solve_mixed_affine(p, Communicator.local(p.n), W, **kw)  # type: ignore[arg-type]


def test_solution_satisfies_every_original_constraint_and_copies_agree() -> None:
    p = _small(2)
    res = _solve(p, _gossip())
    assert res.status == "converged"
    X, Xt = res.x["x"], res.x["xt"]
    assert float((torch.einsum("nmd,nd->m", p.A, X) - p.b.sum(0)).norm()) < 1e-8
    assert float((torch.einsum("nrd,nd->nr", p.C, X) - p.c).norm()) < 1e-8
    assert float((torch.einsum("nrd,nd->nr", p.Ct, Xt) - p.ct).norm()) < 1e-8
    assert float((Xt - Xt.mean(0)).norm()) < 1e-8
    Xs, xts, f = p.solution()
    assert torch.allclose(X, Xs, atol=1e-8) and torch.allclose(Xt, xts.expand_as(Xt), atol=1e-8)
    assert res.value == pytest.approx(f, rel=1e-8, abs=1e-8)


def test_centralized_kkt_solution_is_stationary_on_the_feasible_set() -> None:
    p = _small(3)
    X, xt, _ = p.solution()
    E, e = p._global_constraints()
    w = torch.cat([X.flatten(), xt])
    assert float((E @ w - e).norm()) < 1e-10
    # gradient of sum_i f_i lies in the row space of E (stationarity)
    g = torch.zeros_like(w)
    Z = torch.cat([X, xt.expand(N, -1)], 1)
    G = p.grad(Z, range(N))
    g[: N * p.d] = G[:, : p.d].flatten()
    g[N * p.d :] = G[:, p.d :].sum(0)
    lam = torch.linalg.pinv(E.T) @ g
    assert float((E.T @ lam - g).norm()) < 1e-9 * max(1.0, float(g.norm()))


def test_kkt_residual_of_the_final_iterate_is_below_1e8() -> None:
    p = _small(1, r=0, rt_nodes=(0,))
    res = _solve(p, _gossip("erdos_renyi", seed=2), tol=1e-9, criterion="kkt", x_star=None)
    assert res.status == "converged"
    assert res.history.last("kkt") < 1e-8 * 10  # the recorded row is the stopping row
    assert res.history.last("residual") < 1e-8


def test_coupled_only_reduction_is_the_coupled_constraints_algorithm() -> None:
    """No xt, no C: the mixed method reduces to the predecessor's (only the coupled block, one polynomial)."""
    p = make_mixed_affine(N, d=4, dt=0, m=3, r=0, rt_nodes=(), kappa_f=10.0, seed=4)
    W = _gossip()
    st = mixed_affine_setup(p, W, "apapc-cheb")
    assert st.k2_degree == 0 and st.k1_degree >= 1 and st.kappa_B == pytest.approx(st.kappa_B1)
    assert st.rounds_per_iteration == 2 * st.w_degree * (st.k1_degree + 1)
    res = _solve(p, W)
    assert res.status == "converged"
    Xs, _, _ = p.solution()
    assert torch.allclose(res.x["x"], Xs, atol=1e-8)
    assert res.x["xt"].shape == (N, 0)


def test_consensus_only_reduction_matches_centralized_minimization() -> None:
    """No x_i, no Ct: consensus optimization; every method reaches argmin sum_i f_i."""
    p = make_mixed_affine(N, d=0, dt=4, m=0, r=0, rt_nodes=(), kappa_f=10.0, seed=5)
    x_central = torch.linalg.solve(p.H.sum(0), p.h.sum(0))
    W = _gossip("torus")
    for method in ("apapc-cheb", "apapc", "extra"):
        res = _solve(p, W, method=method, max_iter=20_000)
        assert res.status == "converged", method
        assert torch.allclose(res.x["xt"], x_central.expand(N, -1), atol=1e-8), method


def test_chebyshev_recurrence_equals_the_dense_polynomial_and_squeezes_the_spectrum() -> None:
    torch.manual_seed(0)
    Q, _ = torch.linalg.qr(torch.randn(12, 12, dtype=torch.float64))
    lam = torch.cat([torch.zeros(2, dtype=torch.float64), torch.logspace(-2, 1, 10, dtype=torch.float64)])
    S = Q @ torch.diag(lam) @ Q.T
    mu, L = 1e-2, 10.0
    deg = math.ceil(math.sqrt(L / mu))
    P = chebyshev_matrix(S, mu, L, deg)
    t = (L + mu - 2 * lam) / (L - mu)
    t0 = (L + mu) / (L - mu)

    def cheb_t(n: int, x: torch.Tensor) -> torch.Tensor:
        return torch.where(
            x.abs() <= 1,
            torch.cos(n * torch.arccos(x.clamp(-1, 1))),
            torch.cosh(n * torch.arccosh(x.abs().clamp(min=1))) * torch.sign(x) ** n,
        )

    expect = Q @ torch.diag(1 - cheb_t(deg, t) / cheb_t(deg, torch.tensor(t0, dtype=torch.float64))) @ Q.T
    assert float((P - expect).abs().max()) < 1e-10
    img = torch.linalg.eigvalsh(0.5 * (P + P.T))
    nz = img[img.abs() > 1e-9]
    assert nz.numel() == 10 and float(nz.min()) >= CHEB_LOW - 1e-12 and float(nz.max()) <= CHEB_HIGH + 1e-12
    # affine residual: v0 - v_n = P (v0 - v*), v* the least-squares solution
    v0 = torch.randn(12, dtype=torch.float64)
    s = S @ torch.randn(12, dtype=torch.float64)
    out = chebyshev_apply(lambda v: S @ v - s, v0, mu, L, deg)
    vstar = torch.linalg.lstsq(S, s.unsqueeze(1)).solution.squeeze(1)
    assert torch.allclose(out, P @ (v0 - vstar), atol=1e-9)


@pytest.mark.parametrize("topology", ["ring", "torus", "erdos_renyi"])
def test_gossip_polynomial_spectrum_lies_in_the_nominal_interval(topology: str) -> None:
    W = _gossip(topology, n=16, seed=1)
    check_gossip_matrix(W, 16)
    ev = torch.linalg.eigvalsh(W)
    assert abs(float(ev[0])) < 1e-12 and float(ev[1]) > 1e-6  # kernel = span(1)
    p = make_mixed_affine(16, d=2, dt=1, m=1, r=0, rt_nodes=(0,), seed=0)
    for degree in ("sqrt", "predecessor"):
        st = mixed_affine_setup(p, W, "apapc-cheb", w_degree=degree)
        expected = math.ceil(math.sqrt(st.chi) - 1e-9) if degree == "sqrt" else math.ceil(st.chi - 1e-9)
        assert st.w_degree == expected
        Wp = chebyshev_matrix(W, st.w_mu, st.w_L, st.w_degree)
        img = torch.linalg.eigvalsh(0.5 * (Wp + Wp.T))
        assert abs(float(img[0])) < 1e-10  # same kernel
        assert CHEB_LOW - 1e-12 <= float(img[1]) and float(img[-1]) <= CHEB_HIGH + 1e-12
        assert st.mu_W == pytest.approx(CHEB_LOW**2) and st.L_W == pytest.approx(CHEB_HIGH**2)
        assert st.mu_K == pytest.approx(CHEB_LOW) and st.L_K == pytest.approx(CHEB_HIGH)


def test_gossip_matrix_with_a_wrong_kernel_is_rejected() -> None:
    p = _small()
    W = _gossip()
    with pytest.raises(ValueError, match=r"^W"):
        _solve(p, torch.eye(N, dtype=torch.float64))  # kernel {0}
    A = torch.zeros(N, N, dtype=torch.float64)  # two disconnected triangles
    for blk in (range(3), range(3, 6)):
        for i in blk:
            for j in blk:
                A[i, j] = -1.0 if i != j else 2.0
    with pytest.raises(ValueError, match=r"^W"):
        _solve(p, A)
    with pytest.raises(ValueError, match=r"^W"):
        _solve(p, -W)


def test_infeasible_global_constraints_raise() -> None:
    p = _small(rt_nodes=(0, 1, 2))
    Ct, ct = p.Ct.clone(), p.ct.clone()
    Ct[1] = Ct[0]
    ct[1] = ct[0] + 1.0  # the same row with another right-hand side on another node
    bad = MixedAffineProblem(H=p.H, h=p.h, A=p.A, b=p.b, C=p.C, c=p.c, Ct=Ct, ct=ct)
    with pytest.raises(InfeasibleProblemError):
        bad.solution()
    with pytest.raises(InfeasibleProblemError):
        solve_mixed_affine(bad, Communicator.local(N), _gossip(), max_iter=3)


def test_rounds_equal_the_w_products_and_evaluation_is_not_counted() -> None:
    p = _small(2)
    W = _gossip()
    for method in ("apapc-cheb", "apapc", "primal-dual"):
        comm = Communicator.local(N)
        res = solve_mixed_affine(p, comm, W, method=method, max_iter=5)
        st = mixed_affine_setup(p, W, method)
        assert res.n_iter == 5
        per = st.rounds_per_iteration
        assert comm.stats.uplink_rounds == 5 * per, method
        assert comm.stats.ops["gossip"] == 5 * per, method
        assert res.history.last("gossip_rounds") == 5 * per
        assert res.history.last("grad_calls") == 5
        rows = res.history.as_rows()
        assert [r["gossip_rounds"] for r in rows] == [k * per for k in range(6)]
    cheb = mixed_affine_setup(p, W, "apapc-cheb")
    assert cheb.w_degree == math.ceil(math.sqrt(cheb.chi) - 1e-9)
    # one W' product = w_degree gossip rounds; one K^T K product = 2 W' products
    assert cheb.rounds_per_iteration == 2 * cheb.w_degree * (max(cheb.k1_degree, cheb.k2_degree) + 1)


def test_linear_rate_and_chebyshev_needs_fewer_gradients_than_plain_apapc() -> None:
    p = make_mixed_affine(N, d=4, dt=0, m=3, r=0, rt_nodes=(), kappa_f=30.0, seed=0)
    W = _gossip()
    res = _solve(p, W, tol=1e-11, max_iter=4000)
    assert res.status == "converged"
    rows = res.history.as_rows()
    k = torch.tensor([r["step"] for r in rows], dtype=torch.float64)
    y = torch.tensor([math.log(r["rel_err"]) for r in rows], dtype=torch.float64)
    half = k >= k.max() / 2
    kk, yy = k[half], y[half]
    A = torch.stack([kk, torch.ones_like(kk)], 1)
    coef = torch.linalg.lstsq(A, yy.unsqueeze(1)).solution.squeeze(1)
    pred = A @ coef
    r2 = 1 - float(((yy - pred) ** 2).sum() / ((yy - yy.mean()) ** 2).sum())
    st = res.extras["setup"]
    rate = math.exp(float(coef[0]))
    assert r2 > 0.95
    assert rate <= 1 - 0.1 / math.sqrt(st["L_G"] / st["mu_G"])
    plain = _solve(p, W, method="apapc", tol=1e-6, max_iter=5000, record_every=10)
    cheb6 = _solve(p, W, tol=1e-6)
    assert plain.status == "converged" and cheb6.status == "converged"
    assert cheb6.history.last("grad_calls") < plain.history.last("grad_calls")


def test_determinism_float32_and_round_budget() -> None:
    p = _small(1)
    W = _gossip()
    a = solve_mixed_affine(p, Communicator.local(N), W, max_iter=20)
    b = solve_mixed_affine(p, Communicator.local(N), W, max_iter=20)
    assert torch.equal(a.extras["U"], b.extras["U"])
    r = solve_mixed_affine(p.to(dtype=torch.float32), Communicator.local(N), W.float(), max_iter=20)
    assert r.x["x"].dtype == torch.float32 and r.extras["U"].dtype == torch.float32
    assert torch.allclose(r.extras["U"].double(), a.extras["U"], atol=1e-3)
    st = mixed_affine_setup(p, W, "apapc-cheb")
    capped = solve_mixed_affine(
        p, Communicator.local(N), W, max_iter=1000, max_rounds=3 * st.rounds_per_iteration
    )
    assert capped.status == "max_iter" and capped.n_iter == 3


def test_bad_input_names_the_argument() -> None:
    p = _small()
    W = _gossip()
    comm = Communicator.local(N)
    for kw, name in (
        ({"method": "sgd"}, "method"),
        ({"max_iter": -1}, "max_iter"),
        ({"tol": 0.0}, "tol"),
        ({"criterion": "rel_err"}, "criterion"),
        ({"w_degree": 0}, "w_degree"),
        ({"method": "extra"}, "method"),
        ({"method": "apapc", "w_degree": 3}, "w_degree"),
    ):
        with pytest.raises((ValueError, TypeError), match=rf"^{name}"):
            solve_mixed_affine(p, comm, W, **kw)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^problem"):
        solve_mixed_affine(object(), comm, W)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^comm"):
        solve_mixed_affine(p, Communicator.local(N + 1), W)
    with pytest.raises(ValueError, match=r"^H"):
        MixedAffineProblem(H=p.H[:, :3], h=p.h, A=p.A, b=p.b, C=p.C, c=p.c, Ct=p.Ct, ct=p.ct)
    with pytest.raises(ValueError, match=r"^kappa_f"):
        make_mixed_affine(4, kappa_f=0.5)


@pytest.mark.distributed
def test_one_and_three_gloo_processes_give_the_same_iterates_and_counts() -> None:
    """World size 1 vs 3 (uneven blocks 2, 2, 1 of 5 nodes): same iterates and communication counts."""
    from optarium.distributed.launch import launch

    p = make_mixed_affine(5, d=3, dt=2, m=2, r=1, rt_nodes=(0, 3), kappa_f=8.0, seed=7)
    W = _gossip("ring", n=5)
    jobs = [(p, W, {"method": "apapc-cheb", "max_iter": 6}), (p, W, {"method": "primal-dual", "max_iter": 6})]
    (one,) = launch(spmd_solve, 1, jobs, n_clients=5)
    three = launch(spmd_solve, 3, jobs, n_clients=5, timeout_s=60.0)
    for rank_out in three:
        for a, b in zip(one, rank_out, strict=True):
            assert torch.allclose(b.extras["U"], a.extras["U"], atol=1e-8, rtol=1e-8)
            assert b.history.last("gossip_rounds") == a.history.last("gossip_rounds")
            assert b.history.last("uplink_bits") == pytest.approx(a.history.last("uplink_bits"), rel=1e-12)
            assert b.history.last("objective") == pytest.approx(a.history.last("objective"), rel=1e-9)
