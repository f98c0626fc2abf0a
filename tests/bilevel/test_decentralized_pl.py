"""D-HJFBiO (decentralized Hessian/Jacobian-free bilevel, PL lower level): the spec's falsifiable checks."""

from __future__ import annotations

import math

import pytest
import torch

from optarium.bilevel.decentralized_pl import (
    PLSinBilevel,
    _exact_products,
    decentralized_bilevel,
    dhjf_bilevel,
    dpenalty_bilevel,
    dsoba_bilevel,
    fd_products,
    make_pl_sin_bilevel,
    spmd_solve,
)
from optarium.bilevel.hypergradients import soba_step
from optarium.bilevel.problem import BilevelProblem
from optarium.distributed.comm import Communicator
from optarium.distributed.topology import mixing_matrix

F64 = torch.float64


def _quick(seed: int, noise: float = 0.0) -> tuple[PLSinBilevel, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The spec's quick instance and start (y0 = A x0 + 2 N(0, I): mostly in the concave region)."""
    p = make_pl_sin_bilevel(8, seed=seed, noise_std=noise)
    g = torch.Generator().manual_seed(1000 + seed)
    y0 = 2.0 * torch.randn(20, generator=g, dtype=F64)
    return p, mixing_matrix("ring", 8), torch.zeros(10, dtype=F64), y0


class _NoProducts:
    """The same oracles without the analytic ``products`` / ``grad_g`` (forces the generic paths)."""

    def __init__(self, p: PLSinBilevel) -> None:
        self.p = p
        self.n_agents, self.dim_x, self.dim_y = p.n_agents, p.dim_x, p.dim_y

    def grad_x_g(self, X, Y, agents):
        return self.p.grad_x_g(X, Y, agents)

    def grad_y_g(self, X, Y, agents):
        return self.p.grad_y_g(X, Y, agents)


# --------------------------------------------------------------------------------------- 1: mixing matrix


def test_bad_mixing_matrix_raises_before_the_first_step() -> None:
    p, W, x0, y0 = _quick(0)
    bad = W.clone()
    bad[0, 1] += 0.1  # not symmetric / doubly stochastic
    with pytest.raises(ValueError, match=r"^W"):
        dhjf_bilevel(p, Communicator.local(8), bad, x0, y0, steps=1)
    with pytest.raises(ValueError, match=r"^W"):
        dhjf_bilevel(p, Communicator.local(8), mixing_matrix("ring", 4), x0, y0, steps=1)
    disc = torch.eye(8, dtype=F64)
    with pytest.raises(ValueError, match=r"^W"):
        dhjf_bilevel(p, Communicator.local(8), disc, x0, y0, steps=1)


# --------------------------------------------------------------------------------------- 2: n = 1 = SOBA


def _soba_problem(p: PLSinBilevel) -> tuple[BilevelProblem, tuple[torch.Tensor, ...]]:
    """The pooled instance as a per-sample BilevelProblem (sample j = term j of g)."""
    m = p.dim_y
    w = p.weights[0]

    def inner(v: torch.Tensor, theta: torch.Tensor, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        a, wj, j = batch
        u = theta[j] - a @ v
        return m * wj * (u.pow(2) + 3.0 * torch.sin(u).pow(2))

    def outer(v: torch.Tensor, theta: torch.Tensor, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        return 0.5 * (theta - p.c).pow(2).sum() + 0.5 * p.lam * v.pow(2).sum()

    return BilevelProblem(inner, outer), (p.A, w, torch.arange(m))


def test_single_agent_equals_soba_of_the_bilevel_layer() -> None:
    """n = 1, W = [[1]]: D-SOBA with momentum 1 is SOBA exactly; D-HJFBiO is SOBA up to the FD error."""
    p = make_pl_sin_bilevel(8, dim_x=4, m=6, noise_std=0.0, seed=3).pooled()
    bp, data = _soba_problem(p)
    W1 = torch.ones(1, 1, dtype=F64)
    x0 = torch.zeros(4, dtype=F64)
    y0 = 0.5 * torch.randn(6, generator=torch.Generator().manual_seed(0), dtype=F64)
    a, b, k = 0.02, 0.05, 30
    v, th, z = x0.clone(), y0.clone(), torch.zeros(6, dtype=F64)
    for _ in range(k):
        th, z, h = soba_step(bp, v, th, z, data, data, data, inner_lr=b, z_lr=b)
        v = v - a * h
    kw = {"steps": k, "lr_x": a, "lr_y": b}
    ds = dsoba_bilevel(p, Communicator.local(1), W1, x0, y0, momentum=1.0, **kw)
    assert torch.allclose(ds.x, v, atol=1e-12, rtol=0)
    assert torch.allclose(ds.extras["Y"][0], th, atol=1e-12, rtol=0)
    assert torch.allclose(ds.extras["V"][0], z, atol=1e-12, rtol=0)
    fd = dhjf_bilevel(p, Communicator.local(1), W1, x0, y0, fd_eps=1e-5, **kw)
    assert torch.allclose(fd.x, v, atol=1e-8, rtol=0)
    assert not torch.allclose(fd.x, x0)


# --------------------------------------------------------------------------------------- 3: FD products


def test_finite_difference_products_match_autograd() -> None:
    p = make_pl_sin_bilevel(5, dim_x=6, m=7, seed=2)
    g = torch.Generator().manual_seed(5)
    X, Y, V = (torch.randn(5, d, generator=g, dtype=F64) for d in (6, 7, 7))
    jv, hv = _exact_products(_NoProducts(p), X, Y, V, range(5))  # forward-mode AD of the oracles
    ja, ha = p.products(X, Y, V, range(5))  # the analytic products
    assert torch.allclose(ja, jv, atol=1e-12) and torch.allclose(ha, hv, atol=1e-12)
    jf, hf = fd_products(p, X, Y, V, range(5), 1e-5)
    assert float((hf - hv).norm() / hv.norm()) < 1e-4
    assert float((jf - jv).norm() / jv.norm()) < 1e-4
    assert float((hf - hv).norm() / hv.norm()) > 0  # really a finite difference


# --------------------------------------------------------------------------------------- 4: tracking


@pytest.mark.parametrize("method", ["dhjf", "penalty"])
def test_tracker_mean_equals_direction_mean(method: str) -> None:
    p, W, x0, y0 = _quick(1, noise=0.05)
    for steps in (1, 7, 60):
        res = decentralized_bilevel(p, Communicator.local(8), W, x0, y0, method=method, steps=steps, seed=4)
        T, D = res.extras["trackers"], res.extras["directions"]
        assert torch.allclose(T.mean(0), D.mean(0), atol=1e-10, rtol=0)
        assert not torch.allclose(T, D)  # heterogeneous agents: trackers differ from the local directions


# --------------------------------------------------------------------------------------- 5: quick convergence


def _check_quick(seed: int) -> None:
    p, W, x0, y0 = _quick(seed)
    res = dhjf_bilevel(p, Communicator.local(8), W, x0, y0, steps=10_000, record_every=100, tol=1e-10)
    assert res.history.last("rel_err") < 1e-2
    assert res.history.last("consensus") < 1e-10
    assert res.status in ("converged", "max_iter")


def test_quick_instance_converges_seed0() -> None:
    _check_quick(0)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_quick_instance_converges_other_seeds(seed: int) -> None:
    _check_quick(seed)


def test_too_large_steps_stall_and_are_never_reported_converged() -> None:
    p, W, x0, y0 = _quick(0)
    res = dhjf_bilevel(
        p, Communicator.local(8), W, x0, y0, steps=3000, lr_x=0.02, lr_y=0.05, record_every=100, tol=1e-10
    )
    assert res.status in ("max_iter", "diverged")
    if res.status == "max_iter":
        assert res.history.last("rel_err") > 1e-2 or res.history.last("consensus") > 1e-10
    assert not math.isnan(res.value)


# --------------------------------------------------------------------------------------- 6, 7: noise


def _plateau(res) -> float:
    rows = res.history.as_rows()
    tail = [r["hypergrad_norm_sq"] for r in rows if r["step"] > rows[-1]["step"] - 2000]
    return sum(tail) / len(tail)


def test_noisy_run_on_the_nonconvex_region_stays_finite() -> None:
    p, W, x0, y0 = _quick(0, noise=0.05)
    u0 = (y0 - p.A @ x0).abs()
    assert float((u0 > 0.955).double().mean()) > 0.5  # most coordinates start where phi is concave
    res = dhjf_bilevel(p, Communicator.local(8), W, x0, y0, steps=3000, record_every=50, seed=0)
    assert res.status == "max_iter"
    assert all(math.isfinite(r["hypergrad_norm_sq"]) for r in res.history.as_rows())
    assert res.history.last("rel_err") < 0.05


@pytest.mark.slow
def test_batch_four_lowers_the_noise_floor() -> None:
    logs = []
    for seed in range(5):
        p, W, x0, y0 = _quick(seed, noise=0.05)
        floors = [
            _plateau(dhjf_bilevel(p, Communicator.local(8), W, x0, y0, steps=10_000, batch_size=b, seed=seed))
            for b in (1, 4)
        ]
        logs.append(math.log(floors[0] / floors[1]))
    mean = sum(logs) / len(logs)
    se = math.sqrt(sum((v - mean) ** 2 for v in logs) / (len(logs) - 1) / len(logs))
    assert mean > 2 * se


# --------------------------------------------------------------------------------------- penalty / dsoba


def test_penalty_bias_is_order_one_over_gamma() -> None:
    """Algorithm B converges to x*_gamma with ||x*_gamma - x*|| = O(1/gamma): 4x the penalty, 1/4 the bias."""
    p = make_pl_sin_bilevel(4, dim_x=3, m=5, lam=1.0, noise_std=0.0, seed=1)
    W = mixing_matrix("ring", 4)
    x0, y0 = torch.zeros(3, dtype=F64), torch.zeros(5, dtype=F64)
    errs = [
        dpenalty_bilevel(
            p, Communicator.local(4), W, x0, y0, penalty=g, steps=1500, lr_x=0.01, lr_y=0.02, record_every=100
        ).history.last("rel_err")
        for g in (4.0, 16.0)
    ]
    assert 3.0 < errs[0] / errs[1] < 5.0
    assert errs[1] > 1e-3  # a biased fixed point, not the exact x*


# --------------------------------------------------------------------------------------- 8: bad input


def test_bad_input_names_the_argument() -> None:
    p, W, x0, y0 = _quick(0)
    with pytest.raises(ValueError, match=r"^comm"):
        dhjf_bilevel(p, Communicator.local(4), mixing_matrix("ring", 4), x0, y0)
    for kw, name in (
        ({"lr_x": 0.0}, "lr_x"),
        ({"lr_y": -0.1}, "lr_y"),
        ({"lr_v": 0.0}, "lr_v"),
        ({"fd_eps": 0.0}, "fd_eps"),
        ({"noise_std": -1.0}, "noise_std"),
        ({"momentum": 1.5}, "momentum"),
        ({"penalty": 0.0}, "penalty"),
        ({"method": "duet"}, "method"),
    ):
        with pytest.raises(ValueError, match=rf"^{name}"):
            decentralized_bilevel(p, Communicator.local(8), W, x0, y0, steps=1, **kw)
    with pytest.raises(ValueError, match=r"^y0"):
        dhjf_bilevel(p, Communicator.local(8), W, x0, torch.zeros(3, dtype=F64), steps=1)
    with pytest.raises(TypeError, match=r"^problem"):
        dhjf_bilevel(object(), Communicator.local(8), W, x0, y0, steps=1)
    with pytest.raises(ValueError, match=r"^weights"):
        PLSinBilevel(p.A, p.c, -p.weights)


def test_dtype_follows_the_inputs_and_seed_determines_the_noise() -> None:
    p, W, x0, y0 = _quick(0, noise=0.05)
    r32 = dhjf_bilevel(p, Communicator.local(8), W, x0.float(), y0.float(), steps=20)
    assert r32.x.dtype == torch.float32 and r32.extras["X"].dtype == torch.float32
    a = dhjf_bilevel(p, Communicator.local(8), W, x0, y0, steps=20, seed=1)
    b = dhjf_bilevel(p, Communicator.local(8), W, x0, y0, steps=20, seed=1)
    c = dhjf_bilevel(p, Communicator.local(8), W, x0, y0, steps=20, seed=2)
    assert torch.equal(a.extras["X"], b.extras["X"]) and not torch.equal(a.extras["X"], c.extras["X"])


def test_one_gossip_round_per_iteration_with_the_stacked_payload() -> None:
    p, W, x0, y0 = _quick(0)
    comm = Communicator.local(8)
    res = dhjf_bilevel(p, comm, W, x0, y0, steps=5)
    assert comm.stats.ops == {"gossip": 5}
    # ring: 2 neighbours each way, payload (x, y, v, p, q, r) = 2*10 + 4*20 float64 per round
    assert res.history.last("bytes") == pytest.approx(5 * 2 * 2 * (2 * 10 + 4 * 20) * 8)


# --------------------------------------------------------------------------------------- processes


@pytest.mark.distributed
def test_one_and_two_gloo_processes_give_the_same_iterates_and_counts() -> None:
    from optarium.distributed.launch import launch

    p, W, x0, y0 = _quick(0, noise=0.05)
    jobs = [
        (p, W, x0, y0, {"method": "dhjf", "steps": 30, "seed": 2}),
        (p, W, x0, y0, {"method": "penalty", "steps": 30, "seed": 2}),
    ]
    (one,) = launch(spmd_solve, 1, jobs, n_clients=8)
    two = launch(spmd_solve, 2, jobs, n_clients=8, timeout_s=60.0)
    for rank_out in two:
        for a, b in zip(one, rank_out, strict=True):
            for key in ("X", "Y", "V", "trackers"):
                assert torch.allclose(b.extras[key], a.extras[key], atol=1e-10, rtol=0), key
            for key in ("uplink_rounds", "downlink_rounds", "uplink_bits", "downlink_bits"):
                assert b.extras["comm"][key] == a.extras["comm"][key], key
            assert b.history.last("bytes") == a.history.last("bytes")
