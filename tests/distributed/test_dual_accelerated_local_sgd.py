"""Accelerated dual ascent with local SGD (and FedAvg / SCAFFOLD): falsifiable checks from the spec."""

from __future__ import annotations

import math
import warnings

import pytest
import torch

from optarium.distributed.baselines import fedavg, scaffold
from optarium.distributed.comm import Communicator
from optarium.distributed.dual_accelerated_local_sgd import (
    dual_accelerated_local_sgd,
    dual_parameters,
    round_spectral_radius,
)
from optarium.distributed.federated import HeterogeneousRidge, make_heterogeneous_ridge
from optarium.distributed.spmd import spmd_batch
from optarium.distributed.topology import mixing_matrix

M, D = 8, 20


def _problem(kappa: float, seed: int = 0, m: int = M, d: int = D) -> HeterogeneousRidge:
    return make_heterogeneous_ridge(m, d, mu=1.0, L=kappa, seed=seed)


def _run(p: HeterogeneousRidge, rounds: int, T: int, **kw: object) -> object:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return dual_accelerated_local_sgd(p, Communicator.local(p.n_clients), rounds, T, **kw)


# ------------------------------------------------------------------------------------------------ the problem


def test_problem_has_the_prescribed_spectrum_and_closed_form_optimum(seed: int) -> None:
    p = _problem(100.0, seed)
    ev = torch.linalg.eigvalsh(p.H)
    assert torch.allclose(ev[:, 0], torch.ones(M, dtype=torch.float64), rtol=1e-12)
    assert torch.allclose(ev[:, -1], torch.full((M,), 100.0, dtype=torch.float64), rtol=1e-12)
    assert p.kappa == pytest.approx(100.0, rel=1e-12)
    x_star, f_star = p.optimum()
    clients = torch.arange(M)
    g = p.grad(x_star.expand(M, -1), clients).sum(0)
    assert float(g.abs().max()) < 1e-9
    assert f_star == pytest.approx(float(p.loss(x_star.expand(M, -1), clients).sum()), rel=1e-12)
    # exact dual constants lie inside the bounds [1/L, 1/mu]
    Ld, mud = p.dual_constants()
    assert 1 / 100.0 - 1e-12 <= mud <= Ld <= 1.0 + 1e-12


# ------------------------------------------------------------------------------------------------ limits


def _nesterov_on_closed_form_dual(
    p: HeterogeneousRidge, U: torch.Tensor, rounds: int, eta: float, beta: float
):
    """Nesterov's AGD on d(Y) = min_X L(X, Y), A = U (x) I, in Y-space; returns Lambda = A^T Y (M, d)."""
    A = torch.kron(U, torch.eye(D, dtype=torch.float64))
    Hinv = torch.block_diag(*torch.linalg.inv(p.H))
    c = p.c.reshape(-1)

    def grad(Y: torch.Tensor) -> torch.Tensor:  # grad d(Y) = A X*(Y),  X*(Y) = c - H^{-1} A^T Y
        return A @ (c - Hinv @ (A.T @ Y))

    Y = torch.zeros(M * D, dtype=torch.float64)
    Yt = Y.clone()
    for _ in range(rounds):
        Yn = Yt + eta * grad(Yt)
        Yt = Yn + beta * (Yn - Y)
        Y = Yn
    return (A.T @ Y).reshape(M, D)


@pytest.mark.parametrize("form", ["centralized", "ring"])
def test_exact_inner_solves_are_nesterov_on_the_closed_form_dual(form: str) -> None:
    p = _problem(30.0, 1)
    if form == "centralized":
        W = None
        U = torch.eye(M, dtype=torch.float64) - 1.0 / M  # the projector: sqrt(P) = P
    else:
        W = mixing_matrix("ring", M)
        lam, vec = torch.linalg.eigh(torch.eye(M, dtype=torch.float64) - W)
        U = (vec * lam.clamp_min(0).sqrt()) @ vec.T
    Ld, mud = p.dual_constants(W)
    beta = (math.sqrt(Ld / mud) - 1) / (math.sqrt(Ld / mud) + 1)
    for rounds in (1, 7):
        res = _run(p, rounds, 1, exact_inner=True, dual_lr=1 / Ld, kappa_d=Ld / mud, W=W)
        assert res.extras["params"]["beta"] == pytest.approx(beta)
        ref = _nesterov_on_closed_form_dual(p, U, rounds, 1 / Ld, beta)
        assert torch.allclose(res.extras["lam"], ref, atol=1e-10, rtol=0)


def test_homogeneous_clients_keep_zero_duals_and_equal_local_gd() -> None:
    base = _problem(10.0, 2)
    p = HeterogeneousRidge(H=base.H[:1].expand(M, -1, -1).clone(), c=base.c[:1].expand(M, -1).clone())
    R, T, gamma = 6, 4, 1 / (2 * p.L)
    res = _run(p, R, T, accelerated=False)
    assert float(res.extras["lam"].abs().max()) <= 1e-12
    x = torch.zeros(D, dtype=torch.float64)
    for _ in range(R * T):
        x = x - gamma * (p.H[0] @ (x - p.c[0]))
    assert torch.allclose(res.extras["X"], x.expand(M, -1), atol=1e-12, rtol=0)


def test_one_client_is_plain_sgd_with_the_same_noise_stream() -> None:
    p = _problem(10.0, 3, m=1)
    R, T, sigma, seed = 5, 3, 0.7, 11
    res = _run(p, R, T, noise_std=sigma, seed=seed)
    gen = torch.Generator().manual_seed(seed)
    x = torch.zeros(D, dtype=torch.float64)
    gamma = 1 / (2 * p.L)
    for _ in range(R * T):
        x = x - gamma * (
            p.H[0] @ (x - p.c[0]) + sigma * torch.randn(1, D, generator=gen, dtype=torch.float64)[0]
        )
    assert torch.allclose(res.x, x, atol=1e-13, rtol=0)
    assert float(res.extras["lam"].abs().max()) == 0.0


def test_one_local_step_fedavg_and_scaffold_are_gradient_descent() -> None:
    p = _problem(10.0, 4)
    gamma, R = 0.03, 9
    comm = Communicator.local(M)
    a = fedavg(p, comm, R, 1, lr=gamma)
    b = scaffold(p, Communicator.local(M), R, 1, lr=gamma)
    x = torch.zeros(D, dtype=torch.float64)
    for _ in range(R):
        x = x - gamma * p.grad(x.expand(M, -1), torch.arange(M)).mean(0)
    assert torch.allclose(a.x, x, atol=1e-12, rtol=0)
    assert torch.allclose(b.x, x, atol=1e-12, rtol=0)


def test_complete_graph_gossip_equals_the_centralized_form() -> None:
    p = _problem(30.0, 5)
    W = mixing_matrix("complete", M)
    assert torch.allclose(W, torch.full((M, M), 1.0 / M, dtype=torch.float64))
    kw = {"noise_std": 0.5, "seed": 3, "momentum": 0.4}
    a = _run(p, 12, 5, **kw)
    b = _run(p, 12, 5, W=W, **kw)
    assert torch.allclose(a.extras["lam"], b.extras["lam"], atol=1e-11, rtol=0)
    assert torch.allclose(a.x, b.x, atol=1e-11, rtol=0)
    assert a.extras["params"]["kappa_d"] == pytest.approx(b.extras["params"]["kappa_d"])


# ------------------------------------------------------------------------------------------------ invariants


@pytest.mark.parametrize("topology", [None, "ring"])
def test_dual_sum_stays_zero(topology: str | None) -> None:
    p = _problem(30.0, 6)
    W = None if topology is None else mixing_matrix(topology, M)
    res = _run(p, 40, 5, W=W, noise_std=1.0, momentum=0.5)
    scale = float(res.extras["lam"].abs().max())
    assert scale > 1.0  # the duals moved
    assert max(res.history.metrics["dual_sum"]) <= 1e-12 * scale * M


def test_fixed_point_is_consensus_at_the_optimum_with_lambda_minus_grad() -> None:
    p = _problem(10.0, 7)
    x_star, _ = p.optimum()
    res = _run(p, 400, 5, accelerated=False)
    X, lam = res.extras["X"], res.extras["lam"]
    assert torch.allclose(X, x_star.expand(M, -1), atol=1e-8, rtol=0)
    assert torch.allclose(lam, -p.grad(x_star.expand(M, -1), torch.arange(M)), atol=1e-8, rtol=0)


def test_scaffold_reaches_the_optimum_and_fedavg_is_biased() -> None:
    p = _problem(10.0, 8)
    x_star, f_star = p.optimum()
    s = scaffold(p, Communicator.local(M), 300, 20, f_star=f_star, tol=1e-10)
    f = fedavg(p, Communicator.local(M), 300, 20, f_star=f_star)
    assert s.converged and torch.allclose(s.x, x_star, atol=1e-4)
    assert f.history.last("rel_gap") > 1e-2  # heterogeneity bias of local SGD


# ------------------------------------------------------------------------------------------------ rates


def test_exact_inner_accelerated_contraction_beats_the_bound_and_ga_msgd_does_not() -> None:
    p = _problem(100.0, 0, m=4, d=10)
    Ld, mud = p.dual_constants()
    kd = Ld / mud
    bound = 1 - 1 / (2 * math.sqrt(kd))
    acc = round_spectral_radius(p, 1, exact_inner=True, dual_lr=1 / Ld, kappa_d=kd)
    ga = round_spectral_radius(p, 1, exact_inner=True, dual_lr=1 / Ld, accelerated=False)
    assert acc <= bound < ga < 1
    # the measured decay of a run agrees: fit log(rel_gap) over the last three quarters of R rounds
    _, f_star = p.optimum()
    R = int(20 * math.sqrt(kd) + 50) // 2
    res = _run(p, R, 1, exact_inner=True, dual_lr=1 / Ld, kappa_d=kd, f_star=f_star)
    gaps = torch.tensor(res.history.metrics["rel_gap"][R // 4 :], dtype=torch.float64).clamp_min(1e-300)
    k = torch.arange(len(gaps), dtype=torch.float64)
    slope = float(((k - k.mean()) * (gaps.log() - gaps.log().mean())).sum() / ((k - k.mean()) ** 2).sum())
    assert math.exp(slope / 2) <= bound  # gap ~ ||x - x*||^2 ~ rho^(2k)


def test_ga_msgd_converges_for_any_number_of_local_steps() -> None:
    p = _problem(10.0, 0)
    _, f_star = p.optimum()
    res = _run(p, 300, 1, accelerated=False, f_star=f_star, tol=1e-6)
    assert res.converged and res.n_iter < 300
    q = _problem(100.0, 0)
    for T in (1, 5, 20):
        assert round_spectral_radius(q, T, accelerated=False) < 1.0


def test_exact_solve_momentum_diverges_with_few_local_steps_and_auto_avoids_it() -> None:
    p = _problem(100.0, 0, m=4, d=10)  # small, so that the T_acc = 922-step round map is cheap
    for T in (1, 5, 20):
        assert round_spectral_radius(p, T, momentum="nesterov") > 1.0
    prm = dual_parameters(p.mu, p.L, 1, warn=False)
    t_acc = prm["T_acc"]
    assert t_acc == math.ceil(math.log(prm["kappa_d"]) * 2 * p.L / p.mu)
    assert round_spectral_radius(p, t_acc, momentum="auto") <= 1 - 1 / (2 * math.sqrt(prm["kappa_d"]))
    with pytest.warns(UserWarning, match="T_acc"):
        assert dual_parameters(p.mu, p.L, 20)["beta"] == 0.0
    assert prm["kappa_d"] == pytest.approx(100.0)  # the centralized bound kappa * 1 / 1
    assert dual_parameters(p.mu, p.L, t_acc)["beta"] == pytest.approx(9 / 11, rel=1e-9)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert dual_parameters(p.mu, p.L, 1, exact_inner=True)["beta"] > 0.8


def test_accelerated_needs_fewer_rounds_than_ga_msgd_with_exact_solves() -> None:
    for kappa in (10.0, 100.0):
        p = _problem(kappa, 0)
        _, f_star = p.optimum()
        Ld, mud = p.dual_constants()
        kw = {"exact_inner": True, "dual_lr": 1 / Ld, "kappa_d": Ld / mud, "f_star": f_star, "tol": 1e-6}
        acc = _run(p, 2000, 1, **kw)
        ga = _run(p, 2000, 1, accelerated=False, **kw)
        assert acc.converged and ga.converged
        assert acc.n_iter < ga.n_iter / (0.5 * math.sqrt(kappa))


# ------------------------------------------------------------------------------------------------ bookkeeping


def test_determinism_and_noise_seed() -> None:
    p = _problem(10.0, 9)
    a = _run(p, 10, 3, noise_std=1.0, seed=5)
    b = _run(p, 10, 3, noise_std=1.0, seed=5)
    c = _run(p, 10, 3, noise_std=1.0, seed=6)
    assert torch.equal(a.extras["X"], b.extras["X"]) and torch.equal(a.extras["lam"], b.extras["lam"])
    assert not torch.allclose(a.extras["X"], c.extras["X"])


def test_communication_is_counted_per_round_and_evaluation_is_not() -> None:
    p = _problem(10.0, 0)
    R = 7
    res = _run(p, R, 3)
    assert res.extras["comm"]["uplink_bits"] == R * D * 64
    assert res.history.metrics["uplink_bits"][-1] == R * D * 64
    ring = _run(p, R, 3, W=mixing_matrix("ring", M))
    assert ring.extras["comm"]["uplink_bits"] == 2 * R * D * 64  # two neighbours
    s = scaffold(p, Communicator.local(M), R, 3)
    assert s.extras["comm"]["uplink_bits"] == 2 * R * D * 64  # model and control variate


def test_float32_follows_the_problem_dtype() -> None:
    p64 = _problem(10.0, 0)
    p = HeterogeneousRidge(H=p64.H.float(), c=p64.c.float())
    res = _run(p, 3, 2)
    assert res.x.dtype == torch.float32 and res.extras["lam"].dtype == torch.float32


def test_bad_input_raises_naming_the_argument() -> None:
    p = _problem(10.0, 0)
    comm = Communicator.local(M)
    cases = [
        (lambda: dual_parameters(0.0, 1.0, 1), "mu"),
        (lambda: dual_parameters(2.0, 1.0, 1), "L"),
        (lambda: dual_parameters(1.0, 2.0, 0), "local_steps"),
        (lambda: dual_parameters(1.0, 2.0, 1, momentum="fast"), "momentum"),
        (lambda: dual_parameters(1.0, 2.0, 1, momentum=1.0), "momentum"),
        (lambda: dual_parameters(1.0, 2.0, 1, momentum=0.5, accelerated=False), "momentum"),
        (lambda: dual_accelerated_local_sgd(p, comm, 5, 0), "local_steps"),
        (lambda: dual_accelerated_local_sgd(p, comm, -1, 1), "rounds"),
        (lambda: dual_accelerated_local_sgd(p, comm, 5, 1, lr=-1.0), "lr"),
        (lambda: dual_accelerated_local_sgd(p, comm, 5, 1, noise_std=-1.0), "noise_std"),
        (lambda: dual_accelerated_local_sgd(p, comm, 5, 1, tol=1e-3), "tol"),
        (lambda: dual_accelerated_local_sgd(p, Communicator.local(M + 1), 5, 1), "comm"),
        (lambda: fedavg(p, comm, 5, 0), "local_steps"),
        (lambda: scaffold(p, comm, 5, 1, server_lr=0.0), "server_lr"),
        (lambda: make_heterogeneous_ridge(4, 5, mu=2.0, L=1.0), "L"),
        (lambda: make_heterogeneous_ridge(4, 5, mu=-1.0), "mu"),
    ]
    for fn, name in cases:
        with warnings.catch_warnings(), pytest.raises(ValueError, match=rf"^{name}\b"):
            warnings.simplefilter("ignore", UserWarning)  # momentum="auto" falling back to beta = 0
            fn()
    nonsym = mixing_matrix("ring", M).clone()
    nonsym[0, 1] += 0.1
    nonsym[0, 0] -= 0.1
    disconnected = torch.block_diag(mixing_matrix("complete", M // 2), mixing_matrix("complete", M // 2))
    for W in (nonsym, disconnected, torch.eye(M - 1, dtype=torch.float64)):
        with pytest.raises(ValueError):
            dual_accelerated_local_sgd(p, comm, 5, 1, W=W)
    with pytest.raises(TypeError, match=r"^problem"):
        dual_accelerated_local_sgd(object(), comm, 5, 1)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------------ processes


@pytest.mark.distributed
def test_one_and_two_gloo_processes_give_the_same_iterates() -> None:
    from optarium.distributed.launch import launch

    p = _problem(30.0, 10)
    W = mixing_matrix("ring", M)
    noisy = {"noise_std": 0.5, "seed": 2}
    jobs = [
        ("dual", p, 12, 4, {"momentum": 0.3, **noisy}),
        ("dual", p, 12, 4, {"momentum": 0.3, "W": W, **noisy}),
        ("fedavg", p, 12, 4, noisy),
        ("scaffold", p, 12, 4, noisy),
    ]
    (one,) = launch(spmd_batch, 1, jobs, n_clients=M)
    two = launch(spmd_batch, 2, jobs, n_clients=M, timeout_s=30.0)
    for rank_out in two:
        for (method, *_), a, b in zip(jobs, one, rank_out, strict=True):
            for key in ("X",) + (("lam",) if method == "dual" else ()):
                assert torch.allclose(b.extras[key], a.extras[key], atol=1e-12, rtol=1e-12), (method, key)
            assert torch.allclose(b.x, a.x, atol=1e-12, rtol=1e-12), (method, "x")
            assert b.history.last("uplink_bits") == a.history.last("uplink_bits")
            assert b.history.last("objective") == pytest.approx(a.history.last("objective"), rel=1e-12)
            assert b.extras["comm"]["uplink_rounds"] == a.extras["comm"]["uplink_rounds"] == 12
