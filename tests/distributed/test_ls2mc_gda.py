"""LS²MC-GDA and its baselines: falsifiable checks from the spec (tests 1-9)."""

from __future__ import annotations

import math

import pytest
import torch

from optarium.distributed.comm import Communicator
from optarium.distributed.compositional import (
    BilinearOuter,
    CompositionalMinimaxProblem,
    TanhCompositional,
    TanhLevel,
    make_tanh_compositional,
    nonnegative,
)
from optarium.distributed.ls2mc_gda import (
    LS2MCGDA,
    codasca,
    local_scgdam,
    local_sgda,
    ls2mc_batch,
    ls2mc_gda,
)

# ---------------------------------------------------------------------------------------------- helpers


class _Identity:
    """g(h) = h, no vjp method (exercises the torch.func path)."""

    def __call__(self, h: torch.Tensor, batch: object, clients: torch.Tensor) -> torch.Tensor:
        return h


class _AutogradLevel:
    """A tanh level without a vjp method (torch.func path), noise-free."""

    def __init__(self, W: torch.Tensor) -> None:
        self.W = W

    def __call__(self, h: torch.Tensor, batch: object, clients: torch.Tensor) -> torch.Tensor:
        return torch.tanh(torch.einsum("noi,ni->no", self.W[clients], h))


class _AutogradOuter:
    """The bilinear outer function without a grads method (torch.func path)."""

    def __init__(self, c: torch.Tensor, mu: float) -> None:
        self.c, self.mu = c, mu

    def __call__(
        self, u: torch.Tensor, y: torch.Tensor, batch: object, clients: torch.Tensor
    ) -> torch.Tensor:
        return (y * (u - self.c[clients])).sum(-1) - 0.5 * self.mu * (y * y).sum(-1)


class _NoNoise:
    def __init__(self, k: int) -> None:
        self.k = k

    def __call__(self, gen: torch.Generator, size: int) -> list[object]:
        return [None] * (self.k + 1)


class _FrozenOuter:
    """f(u, y) = -mu/2 |y|^2: no x-gradient, so x stays at x0 (level-tracking test)."""

    def __call__(
        self, u: torch.Tensor, y: torch.Tensor, batch: object, clients: torch.Tensor
    ) -> torch.Tensor:
        return -0.5 * (y * y).sum(-1) + 0.0 * u.sum(-1)

    def grads(self, u: torch.Tensor, y: torch.Tensor, batch: object, clients: torch.Tensor):
        return torch.zeros_like(u), -y


def _quick(sigma: float = 0.5, seed: int = 1, n: int = 4) -> TanhCompositional:
    return make_tanh_compositional(n, 20, (10, 10), mu=0.1, sigma=sigma, seed=seed)


def _vr(eta: float, c: float = 0.02) -> dict[str, float]:
    return {"alpha": c / eta**2, "rho_x": c / eta**2, "rho_y": c / eta**2}


def _tail(res: object, key: str = "grad_phi_norm", frac: float = 0.1) -> float:
    rows = res.history.as_rows()[1:]
    k = max(1, int(len(rows) * frac))
    return sum(r[key] for r in rows[-k:]) / k


# ---------------------------------------------------------------------------------------------- 1, 2: limits


def test_reduces_to_gda_without_noise_smoothing_and_vr() -> None:
    gen = torch.Generator().manual_seed(0)
    d, mu, eta = 5, 0.5, 0.1
    c = torch.randn(1, d, generator=gen, dtype=torch.float64)
    prob = CompositionalMinimaxProblem(
        [_Identity()], _AutogradOuter(c, mu), _NoNoise(1), n_clients=1, dim_x=d, dim_y=d, like=c
    )
    x0 = torch.randn(d, generator=gen, dtype=torch.float64)
    y0 = torch.randn(d, generator=gen, dtype=torch.float64)
    T = 25
    res = ls2mc_gda(
        prob,
        Communicator.local(1),
        T,
        lr=eta,
        smoothing=False,
        omega=-1.0,
        x0=x0,
        y0=y0,
        local_steps=3,
        **_vr(eta, 1.0),
    )
    x, y = x0.clone(), y0.clone()
    for _ in range(T):  # simultaneous GDA on <y, x - c> - mu/2 |y|^2
        x, y = x - eta * y, y + eta * (x - c[0] - mu * y)
    assert torch.allclose(res.x, x, atol=1e-10, rtol=0)
    assert torch.allclose(res.extras["y"], y, atol=1e-10, rtol=0)


@pytest.mark.parametrize("K", [1, 2, 3, 4])
@pytest.mark.parametrize("closed_form", [True, False])
def test_vjp_chain_equals_autograd_of_the_composition(K: int, closed_form: bool) -> None:
    base = make_tanh_compositional(3, 6, (4,) * K, mu=0.3, sigma=0.0, seed=K)
    gen = torch.Generator().manual_seed(10 + K)
    x0 = torch.randn(6, generator=gen, dtype=torch.float64)
    y0 = torch.randn(4, generator=gen, dtype=torch.float64)
    if closed_form:
        prob: CompositionalMinimaxProblem = base
    else:
        prob = CompositionalMinimaxProblem(
            [_AutogradLevel(W) for W in base.Ws],
            _AutogradOuter(base.c, 0.3),
            _NoNoise(K),
            n_clients=3,
            dim_x=6,
            dim_y=4,
            like=base.c,
        )
    opt = LS2MCGDA(prob, Communicator.local(3), x0=x0, y0=y0)  # p0, q0: exact inner values when noise-free
    x = x0.expand(3, -1).clone().requires_grad_(True)
    y = y0.expand(3, -1).clone().requires_grad_(True)
    h = x
    for W in base.Ws:
        h = torch.tanh(torch.einsum("noi,ni->no", W, h))
    f = ((y * (h - base.c)).sum(-1) - 0.15 * (y * y).sum(-1)).sum()
    gx, gy = torch.autograd.grad(f, (x, y))
    assert torch.allclose(opt.state.p, gx, atol=1e-10, rtol=0)
    assert torch.allclose(opt.state.q, gy, atol=1e-10, rtol=0)
    # and Phi's exact gradient is the client mean of the VJP chain at y*(x) = r / mu
    phi_val, g = base.phi(x0)
    y_star = (base.chain(x0)[-1] - base.c).mean(0) / 0.3
    o2 = LS2MCGDA(base, Communicator.local(3), x0=x0, y0=y_star)
    assert torch.allclose(o2.state.p.mean(0), g, atol=1e-10, rtol=0)
    assert float(phi_val) == pytest.approx(0.15 * float(y_star @ y_star), rel=1e-12)


# ---------------------------------------------------------------------------------------------- 3: tracking


def test_level_estimator_noise_floor_scales_with_alpha_eta_squared() -> None:
    W = torch.randn(2, 6, 4, generator=torch.Generator().manual_seed(3), dtype=torch.float64) / 2
    sigma = 0.5

    class _Sample:
        def __call__(self, gen: torch.Generator, size: int) -> list[object]:
            return [
                (
                    sigma * torch.randn(2, 6, generator=gen, dtype=torch.float64),
                    torch.zeros(2, 4, dtype=torch.float64),
                ),
                None,
            ]

    prob = CompositionalMinimaxProblem(
        [TanhLevel(W)], _FrozenOuter(), _Sample(), n_clients=2, dim_x=4, dim_y=6, like=W
    )
    x0 = torch.linspace(-1, 1, 4, dtype=torch.float64)
    truth = torch.tanh(torch.einsum("noi,i->no", W, x0))
    rms = []
    for eta in (0.1, 0.05):
        opt = LS2MCGDA(prob, Communicator.local(2), x0=x0, lr=eta, alpha=10.0, smoothing=False, seed=4)
        acc, n = 0.0, 0
        for t in range(2500):
            opt.step()
            if t >= 500:
                acc += float(((opt.state.h[0] - truth) ** 2).mean())
                n += 1
        assert torch.equal(opt.state.x, x0.expand(2, -1))  # x frozen
        rms.append(math.sqrt(acc / n))
    a = 10.0 * 0.1**2
    assert rms[0] == pytest.approx(math.sqrt(a / (2 - a)) * sigma, rel=0.15)
    assert 1.4 <= rms[0] / rms[1] <= 2.6  # 2 +- 30 %


# -------------------------------------------------------------------------------------------- 4: convergence


def test_noisy_run_reduces_the_gradient_norm() -> None:
    eta = 0.03
    res = ls2mc_gda(_quick(), Communicator.local(4), 2000, lr=eta, omega=0.1, gamma_z=1.0, seed=0, **_vr(eta))
    rows = res.history.as_rows()[1:]
    k = len(rows) // 10
    first = sum(r["grad_phi_norm"] for r in rows[:k]) / k
    assert _tail(res) < 0.5 * first
    assert res.extras["samples"] == 32 + 2000


@pytest.mark.slow
def test_noise_free_with_averaging_every_step_reaches_a_stationary_point() -> None:
    res = ls2mc_gda(
        _quick(sigma=0.0),
        Communicator.local(4),
        20_000,
        lr=0.1,
        smoothing=False,
        local_steps=1,
        record_every=100,
        **_vr(0.1),
    )
    assert _tail(res) < 1e-2


def test_variance_reduction_beats_plug_in_on_the_noisy_problem() -> None:
    eta = 0.1  # at a larger step the plug-in bias and variance dominate (measured: 0.37 vs 0.78)
    p = _quick()
    vr = ls2mc_gda(p, Communicator.local(4), 2000, lr=eta, omega=0.1, gamma_z=1.0, seed=0, **_vr(eta))
    plain = local_sgda(p, Communicator.local(4), 2000, lr=eta, seed=0)
    assert _tail(vr, "phi") < 0.7 * _tail(plain, "phi")


# ---------------------------------------------------------------------------------------------- 5: federated


def test_one_client_is_the_centralized_run_bit_for_bit() -> None:
    p = _quick(n=1)
    kw = {"lr": 0.05, "omega": 0.3, "gamma_z": 0.5, "seed": 7, **_vr(0.05)}
    a = ls2mc_gda(p, Communicator.local(1), 64, local_steps=8, **kw)
    b = ls2mc_gda(p, Communicator.local(1), 64, local_steps=1, **kw)
    assert torch.equal(a.extras["X"], b.extras["X"])
    assert torch.equal(a.extras["Y"], b.extras["Y"])


def test_averaging_every_step_is_centralized_storm_on_the_mean_gradient() -> None:
    """I = 1: a hand-written STORM on the client-averaged directions with per-client level estimators.

    The initial directions p0, q0 are local (no extra collective), so the first step moves every client by
    its own p0; from the first averaging on, all clients share x, y, z, p, q and the run is centralized
    STORM on the mean of the per-client compositional gradients.
    """
    p = _quick(n=3, seed=2)
    eta, gz, om, T, seed, a, mu = 0.05, 0.5, 0.3, 30, 5, 0.02, 0.1
    res = ls2mc_gda(
        p, Communicator.local(3), T, lr=eta, omega=om, gamma_z=gz, local_steps=1, seed=seed, **_vr(eta)
    )
    gen = torch.Generator().manual_seed(seed)
    W1, W2 = p.Ws

    def level(xin, b, W):
        return torch.tanh(torch.einsum("noi,ni->no", W, xin)) + b[0]

    def grads(X, h1, h2, Y, b, Z):  # per client: Jacobians at x and at the estimated h1
        (_, v1), (_, v2), (eu, ey) = b
        t2 = torch.tanh(torch.einsum("noi,ni->no", W2, h1))
        g1 = torch.einsum("noi,no->ni", W2, (1 - t2**2) * (Y + eu)) + v2
        t1 = torch.tanh(torch.einsum("noi,ni->no", W1, X))
        g0 = torch.einsum("noi,no->ni", W1, (1 - t1**2) * g1) + v1
        return g0 + om * (X - Z), h2 - p.c - mu * Y + ey

    def avg(t):
        return t.mean(0).expand_as(t)

    X = torch.zeros(3, 20, dtype=torch.float64)
    Y = torch.zeros(3, 10, dtype=torch.float64)
    Z = X.clone()
    b = p.sample(gen, 32)
    h1 = level(X, b[0], W1)
    h2 = level(h1, b[1], W2)
    P, Q = grads(X, h1, h2, Y, b, Z)
    for _ in range(T):
        Xn, Yn = X - eta * P, Y + eta * Q
        Zn = Z + gz * eta * (Xn - Z)
        b = p.sample(gen, 1)
        h1n = level(Xn, b[0], W1) + (1 - a) * (h1 - level(X, b[0], W1))
        h2n = level(h1n, b[1], W2) + (1 - a) * (h2 - level(h1, b[1], W2))
        un, vn = grads(Xn, h1n, h2n, Yn, b, Zn)
        uo, vo = grads(X, h1, h2, Y, b, Z)
        P, Q = avg(un + (1 - a) * (P - uo)), avg(vn + (1 - a) * (Q - vo))
        X, Y, Z, h1, h2 = avg(Xn), avg(Yn), avg(Zn), h1n, h2n
    assert torch.allclose(res.x, X[0], atol=1e-12, rtol=0)
    assert torch.allclose(res.extras["y"], Y[0], atol=1e-12, rtol=0)


def test_communication_counts_one_collective_per_round_with_the_shared_state() -> None:
    p = _quick()
    T, steps = 48, 8
    r = ls2mc_gda(p, Communicator.local(4), T, lr=0.03, local_steps=steps, **_vr(0.03))
    comm = r.extras["comm"]
    assert comm["uplink_rounds"] == comm["downlink_rounds"] == T // steps
    per_round = (3 * 20 + 2 * 10) * 64  # x, z, p (20 each), y, q (10 each), float64
    assert comm["uplink_bits"] == (T // steps) * per_round
    s = local_sgda(p, Communicator.local(4), T, lr=0.03, local_steps=steps)
    assert s.extras["comm"]["uplink_bits"] == (T // steps) * (20 + 10) * 64  # only x and y
    c = codasca(p, Communicator.local(4), T, lr=0.03, local_steps=steps)
    assert c.extras["comm"]["uplink_bits"] == (T // steps) * 2 * (20 + 10) * 64  # x, y and the controls
    assert r.history.last("bytes") == pytest.approx(comm["bytes"])


def test_codasca_controls_remove_client_drift_without_noise() -> None:
    """Noise-free, I = 8: the control variates make the fixed point stationary (local SGDA keeps a floor)."""
    p = _quick(sigma=0.0, seed=3)
    kw = {"lr": 0.1, "local_steps": 8, "record_every": 40}
    plain = local_sgda(p, Communicator.local(4), 2000, **kw)
    cv = codasca(p, Communicator.local(4), 2000, **kw)
    assert _tail(cv) < 0.5 * _tail(plain)


def test_scgdam_momentum_is_a_moving_average() -> None:
    p = _quick(sigma=0.0)
    r1 = local_scgdam(p, Communicator.local(4), 16, lr=0.1, momentum=1.0, local_steps=4, seed=1)
    r2 = local_sgda(p, Communicator.local(4), 16, lr=0.1, local_steps=4, seed=1)
    # momentum 1 is the plug-in method
    assert torch.allclose(r1.extras["X"], r2.extras["X"], atol=1e-12, rtol=0)


# ---------------------------------------------------------------------------------------------- 7: stage-wise


def test_stagewise_freezes_z_and_restarts_from_a_stored_iterate() -> None:
    p = _quick()
    kw = {"lr": 0.05, "omega": 0.3, "gamma_z": 0.5, "seed": 3, "local_steps": 4, **_vr(0.05)}
    res = ls2mc_gda(p, Communicator.local(4), 16, stagewise_stages=2, stage_steps=8, **kw)
    picks, lengths = res.extras["stage_picks"], res.extras["stage_lengths"]
    assert lengths == [8, 16] and 1 <= picks[0] <= 8 and 1 <= picks[1] <= 16
    assert res.n_iter == 16 + 8 + 16
    # replay by hand
    opt = LS2MCGDA(p, Communicator.local(4), **kw)
    for _ in range(16):
        opt.step()
    opt.state.z = opt.state.x.mean(0).expand(4, -1).clone()
    opt.stage_gamma_z = 0.0
    z0 = opt.state.z.clone()
    for _ in range(picks[0]):
        opt.step()
    snap = opt.state.clone()
    for _ in range(8 - picks[0]):
        opt.step()
    assert torch.equal(opt.state.z, z0)  # z never changes in stage mode
    opt.state = snap
    opt.lr_scale = 2**-0.5
    for _ in range(picks[1]):
        opt.step()
    assert torch.allclose(res.extras["X"], opt.state.x, atol=1e-14, rtol=0)
    assert torch.equal(opt.state.z, z0)


# ---------------------------------------------------------------------------------------------- 8: speedup


@pytest.mark.slow
def test_linear_speedup_with_identical_clients() -> None:
    eta, logs = 0.1, []
    for seed in range(5):
        f = {}
        for n in (1, 4):
            p = make_tanh_compositional(n, 20, (10, 10), mu=0.1, sigma=0.5, identical=True, seed=0)
            r = ls2mc_gda(
                p, Communicator.local(n), 2000, lr=eta, omega=0.1, gamma_z=1.0, seed=seed, **_vr(eta)
            )
            f[n] = _tail(r)
        logs.append(math.log(f[1] / f[4]))
    m = sum(logs) / len(logs)
    se = math.sqrt(sum((v - m) ** 2 for v in logs) / (len(logs) - 1) / len(logs))
    assert m > 2 * se and math.exp(m) > 1.3


# ---------------------------------------------------------------------------------------------- misc


def test_determinism_projection_and_float32() -> None:
    p = _quick()
    kw = {"lr": 0.03, "seed": 2, "y_projection": nonnegative, **_vr(0.03)}
    a = ls2mc_gda(p, Communicator.local(4), 24, **kw)
    b = ls2mc_gda(p, Communicator.local(4), 24, **kw)
    c = ls2mc_gda(p, Communicator.local(4), 24, **{**kw, "seed": 3})
    assert torch.equal(a.x, b.x) and not torch.equal(a.x, c.x)
    assert float(a.extras["Y"].min()) >= 0.0
    p32 = TanhCompositional([W.float() for W in p.Ws], p.c.float(), 0.1, 0.5)
    r = ls2mc_gda(p32, Communicator.local(4), 16, lr=0.03, **_vr(0.03))
    assert r.x.dtype == torch.float32 and r.extras["Y"].dtype == torch.float32


def test_bad_input_raises_naming_the_argument() -> None:
    p = _quick()
    comm = Communicator.local(4)
    cases = [
        ({"omega": 0.0}, "omega"),
        ({"alpha": 2.0 / 0.01}, "alpha"),
        ({"rho_x": 0.0}, "rho_x"),
        ({"rho_y": 200.0}, "rho_y"),
        ({"local_steps": 0}, "local_steps"),
        ({"lr": 0.0}, "lr"),
        ({"estimator": "adam"}, "estimator"),
        ({"init_batch": 0}, "init_batch"),
        ({"x0": torch.zeros(3)}, "x0"),
        ({"stagewise_stages": 1, "smoothing": False}, "stagewise_stages"),
        ({"y_projection": 3}, "y_projection"),
    ]
    for kw, name in cases:
        with pytest.raises((ValueError, TypeError), match=rf"^{name}"):
            ls2mc_gda(p, comm, 4, **{"lr": 0.1, **kw})
    with pytest.raises(ValueError, match=r"^comm"):
        ls2mc_gda(p, Communicator.local(3), 4)
    with pytest.raises(TypeError, match=r"^problem"):
        ls2mc_gda(object(), comm, 4)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^problem"):  # a list of inner functions of the wrong length
        bad = CompositionalMinimaxProblem(
            p.inner[:1], p.outer, p.sample, n_clients=4, dim_x=20, dim_y=10, like=p.c
        )
        ls2mc_gda(bad, comm, 4)
    with pytest.raises(ValueError, match=r"^inner"):
        CompositionalMinimaxProblem([], p.outer, p.sample, n_clients=4, dim_x=20, dim_y=10)
    nan = TanhCompositional(p.Ws, p.c * float("nan"), 0.1, 0.5)
    with pytest.raises(FloatingPointError, match=r"^problem"):
        ls2mc_gda(nan, comm, 4)


def test_outer_with_own_gradients_matches_autograd_outer() -> None:
    p = _quick(sigma=0.0)
    auto = CompositionalMinimaxProblem(
        p.inner, _AutogradOuter(p.c, 0.1), p.sample, n_clients=4, dim_x=20, dim_y=10, like=p.c
    )
    assert isinstance(p.outer, BilinearOuter)
    a = ls2mc_gda(p, Communicator.local(4), 16, lr=0.05, **_vr(0.05))
    b = ls2mc_gda(auto, Communicator.local(4), 16, lr=0.05, **_vr(0.05))
    assert torch.allclose(a.extras["X"], b.extras["X"], atol=1e-12, rtol=0)


# ---------------------------------------------------------------------------------------------- 6: processes


@pytest.mark.distributed
def test_one_and_three_gloo_processes_give_the_same_iterates_and_counts() -> None:
    from optarium.distributed.launch import launch

    p = _quick()
    kw = {"lr": 0.05, "local_steps": 4, "seed": 3}
    jobs = [
        (
            "ls2mc-gda",
            p,
            24,
            {**kw, "omega": 0.3, "gamma_z": 0.5, "stagewise_stages": 1, "stage_steps": 8, **_vr(0.05)},
        ),
        ("codasca", p, 24, kw),
    ]
    (one,) = launch(ls2mc_batch, 1, jobs, n_clients=4)
    three = launch(ls2mc_batch, 3, jobs, n_clients=4, timeout_s=60.0)  # blocks of 2, 1, 1 clients
    for rank_out in three:
        for a, b in zip(one, rank_out, strict=True):
            for key in ("X", "Y"):
                assert torch.allclose(b.extras[key], a.extras[key], atol=1e-10, rtol=0), key
            for key in ("uplink_rounds", "downlink_rounds", "uplink_bits", "downlink_bits"):
                assert b.extras["comm"][key] == a.extras["comm"][key], key
            assert b.history.last("grad_phi_norm") == pytest.approx(
                a.history.last("grad_phi_norm"), rel=1e-10
            )
