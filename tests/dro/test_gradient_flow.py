"""GFS-DRO samplers (dro-gradient-flow): stationary laws, reductions to WRM and the dual method, limits,
input checks, and skwdro's Sinkhorn dual loss as the outside reference."""

from __future__ import annotations

import math

import pytest
import torch

from optarium.dro import wasserstein_fixed_point
from optarium.dro.gradient_flow import (
    SinkhornDROSampler,
    fisher_rao_step,
    gradient_flow_dro,
    svgd_direction,
)

DT = torch.float64


def _linear_vg(a: float):
    def vg(z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return a * z[..., 0], torch.full_like(z, a)

    return vg


def test_langevin_stationary_law_matches_the_gibbs_gaussian() -> None:
    """l(z) = a z, c = (z - xi)^2: pi = N(xi + a/(2 lam), eps/2); the Euler chain's variance is
    (eps/2)/(1 - lam eta)."""
    lam, eps, eta, a, m = 0.1, 0.5, 0.01, 1.0, 4000
    xi = torch.tensor([[0.3]], dtype=DT)
    # the mean relaxes at rate 2 lam eta: 6000 steps leave e^-12 of the initial offset a/(2 lam) = 5
    s = SinkhornDROSampler("wgf", n_particles=m, inner_steps=6000, inner_lr=eta, lam=lam, eps=eps, seed=3)
    z = s.sample(None, xi, value_and_grad=_linear_vg(a)).z[0, :, 0]
    mean_target, var_target = 0.3 + a / (2 * lam), (eps / 2) / (1 - lam * eta)
    assert abs(float(z.mean()) - mean_target) < 4 * math.sqrt(var_target / m)
    assert abs(float(z.var()) / var_target - 1) < 4 * math.sqrt(2 / m)


def test_wfr_weights_are_a_simplex_and_the_frozen_iteration_reaches_the_gibbs_weights() -> None:
    g = torch.Generator().manual_seed(0)
    fbar = torch.randn(5, 7, generator=g, dtype=DT)
    lam, eps = 0.5, 2.0
    h = 0.5 / (lam * eps)  # contraction rate 1 - lam eps h = 0.5
    logw = torch.full((5, 7), -math.log(7), dtype=DT)
    for _ in range(60):
        logw = fisher_rao_step(logw, fbar, lam=lam, eps=eps, weight_lr=h)
    target = torch.softmax(fbar / (lam * eps), dim=1)
    assert torch.allclose(logw.exp(), target, rtol=1e-10, atol=0)
    s = SinkhornDROSampler("wfr", n_particles=6, inner_steps=50, lam=0.5, eps=0.3, seed=1)
    p = s.sample(lambda z: torch.sin(3 * z).sum(-1), torch.randn(4, 2, generator=g, dtype=DT))
    assert bool((p.w >= 0).all()) and torch.allclose(p.w.sum(1), torch.ones(4, dtype=DT), atol=1e-12)
    assert float(p.w.std()) > 0  # the weights moved away from uniform


def test_eps_zero_single_particle_is_exactly_wrm_gradient_ascent() -> None:
    g = torch.Generator().manual_seed(2)
    xi = torch.randn(6, 3, generator=g, dtype=DT)
    w = torch.randn(3, generator=g, dtype=DT)
    lam, eta, k = 2.0, 0.05, 40

    def loss(z: torch.Tensor) -> torch.Tensor:
        return torch.log1p(torch.exp(z @ w))

    ref = xi.clone()
    for _ in range(k):  # direct WRM: ascent on l(z) - lam |z - xi|^2
        zr = ref.clone().requires_grad_(True)
        (gz,) = torch.autograd.grad(loss(zr).sum(), zr)
        ref = ref + eta * (gz - 2 * lam * (ref - xi))
    for method in ("wgf", "wfr", "wrm"):
        s = SinkhornDROSampler(method, n_particles=1, inner_steps=k, inner_lr=eta, lam=lam, eps=0.0, seed=9)
        p = s.sample(loss, xi)
        assert torch.allclose(p.z[:, 0], ref, rtol=0, atol=1e-14), method
    # run to its fixed point it is the family layer's WRM inner step
    s = SinkhornDROSampler("wrm", n_particles=1, inner_steps=150, inner_lr=0.2, lam=lam, eps=0.0)
    z_star, ok, _ = wasserstein_fixed_point(loss, xi, lam)
    assert ok and torch.allclose(s.sample(loss, xi).z[:, 0], z_star, atol=1e-10)


def test_dual_is_kernel_sampling_with_softmax_weights_and_its_gradient_is_the_dual_objectives() -> None:
    g = torch.Generator().manual_seed(4)
    xi = torch.randn(5, 2, generator=g, dtype=DT)
    theta = torch.randn(2, generator=g, dtype=DT)
    lam, eps, m = 0.7, 0.4, 16

    def loss(th: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        return (z @ th - 1.0) ** 2

    s = SinkhornDROSampler("dual", n_particles=m, lam=lam, eps=eps)
    gen = torch.Generator().manual_seed(11)
    p = s.sample(lambda z: loss(theta, z), xi, generator=gen)
    gen = torch.Generator().manual_seed(11)
    z = xi[:, None, :] + math.sqrt(eps / 2) * torch.randn(5, m, 2, generator=gen, dtype=DT)
    assert torch.equal(p.z, z)
    assert torch.allclose(p.w, torch.softmax(loss(theta, z) / (lam * eps), dim=1), atol=1e-15)
    # weighted-mean gradient == gradient of the dual value lam eps mean_i log mean_m exp(l / (lam eps))
    th = theta.clone().requires_grad_(True)
    (g_ours,) = torch.autograd.grad(s.aggregate_losses(loss(th, p.z), p.w), th)
    dual = lam * eps * (torch.logsumexp(loss(th, z) / (lam * eps), 1) - math.log(m)).mean()
    (g_dual,) = torch.autograd.grad(dual, th)
    assert torch.allclose(g_ours, g_dual, atol=1e-13)


def test_dual_matches_skwdro_sinkhorn_dual_loss_on_the_same_samples() -> None:
    """skwdro 1.1.1's dual: lam_s rho + eps_s mean_i log mean_j exp((l - lam_s c)/eps_s) at given samples.

    skwdro draws zeta from a reference law N(xi, sigma^2) and tilts it by the cost; ours draws from the Gibbs
    kernel N(xi, eps/2), which is the reference law times exp(-|z - xi|^2 / eps). With the kernel samples
    passed to skwdro, its cost multiplier set to 0 (the kernel already carries the transport cost) and
    eps_s = lam * eps, the two formulations coincide: skwdro's value minus lam_s rho is our log-sum-exp
    value and its theta-gradient is our weighted-mean gradient.
    """
    pytest.importorskip("skwdro")
    from skwdro.base.costs_torch import NormCost
    from skwdro.base.losses_torch.base_loss import Loss
    from skwdro.solvers.oracle_torch import DualPreSampledLoss

    torch.manual_seed(0)  # skwdro builds its sampler from the global RNG; the samples are ours
    g = torch.Generator().manual_seed(5)
    xi = torch.randn(6, 2, generator=g, dtype=DT)
    theta = torch.randn(2, generator=g, dtype=DT)
    lam, eps, m = 0.5, 0.6, 12
    s = SinkhornDROSampler("dual", n_particles=m, lam=lam, eps=eps)
    p = s.sample(lambda z: (z @ theta - 1.0) ** 2, xi, generator=torch.Generator().manual_seed(1))

    class Sq(Loss):
        def __init__(self, sampler=None) -> None:
            super().__init__(sampler)
            self.theta_ = torch.nn.Parameter(theta.clone())

        def value(self, xi, xi_labels=None):  # (S, m, d) -> (S, m, 1)
            return ((xi @ self.theta_ - 1.0) ** 2)[..., None]

        @property
        def theta(self):
            return self.theta_

        @property
        def intercept(self):
            return None

        @classmethod
        def default_sampler(cls, xi, xi_labels, epsilon, seed):  # not used: the samples are passed in
            raise NotImplementedError

    class _Sampler:  # skwdro only needs it for importance sampling, which is off here
        pass

    sk = DualPreSampledLoss(Sq(_Sampler()), NormCost(2, 2), m, torch.tensor(lam * eps, dtype=DT),
                            torch.tensor(0.1, dtype=DT), imp_samp=False)  # fmt: skip
    sk._lam.data = torch.zeros_like(sk._lam.data, dtype=DT)
    sk = sk.double()
    zeta = p.z.transpose(0, 1).contiguous()  # skwdro: (n_samples, m, d)
    val = sk(xi, None, zeta, None)
    # ours, logsumexp over M kernel samples with the temperature lam * eps
    th = theta.clone().requires_grad_(True)
    losses = (p.z @ th - 1.0) ** 2
    ours = lam * eps * (torch.logsumexp(losses / (lam * eps), 1) - math.log(m)).mean()
    # skwdro keeps its epsilon as a float32 parameter: agreement to float32 resolution of eps_s (~1e-8 rel.)
    assert abs(float(val.detach()) - float(ours.detach())) < 1e-7 * abs(float(ours.detach()))
    (g_sk,) = torch.autograd.grad(val, sk.primal_loss.theta_)
    (g_ours,) = torch.autograd.grad(s.aggregate_losses((p.z @ th - 1.0) ** 2, p.w), th)
    assert torch.allclose(g_sk, g_ours, rtol=1e-6, atol=0)


def test_svgd_single_particle_is_gradient_ascent_on_log_pi_and_direction_matches_a_loop() -> None:
    g = torch.Generator().manual_seed(6)
    xi = torch.randn(4, 2, generator=g, dtype=DT)
    lam, eps, eta, k = 1.0, 0.5, 0.02, 30

    def loss(z: torch.Tensor) -> torch.Tensor:
        return torch.sin(z).sum(-1)

    ref = xi.clone()
    for _ in range(k):
        ref = ref + eta * (torch.cos(ref) - 2 * lam * (ref - xi)) / (lam * eps)
    s = SinkhornDROSampler("svgd", n_particles=1, inner_steps=k, inner_lr=eta, lam=lam, eps=eps)
    assert torch.allclose(s.sample(loss, xi).z[:, 0], ref, atol=1e-13)
    # the batched direction against a plain double loop with the same bandwidth
    z = torch.randn(2, 5, 3, generator=g, dtype=DT)
    sc = torch.randn(2, 5, 3, generator=g, dtype=DT)
    h = 0.7
    phi = svgd_direction(z, sc, bandwidth=h)
    for i in range(2):
        for a in range(5):
            acc = torch.zeros(3, dtype=DT)
            for b in range(5):
                kab = math.exp(-float(((z[i, a] - z[i, b]) ** 2).sum()) / h)
                acc += kab * sc[i, b] + kab * 2 * (z[i, a] - z[i, b]) / h
            assert torch.allclose(phi[i, a], acc / 5, atol=1e-13)


def test_large_lambda_limits() -> None:
    """lam -> inf: pi_i -> N(xi_i, eps/2); with eps -> 0 as well the DRO gradient is the ERM gradient."""
    lam, eps, m = 1e4, 0.5, 4000
    eta = 1.0 / (100 * lam)  # Euler variance factor 1/(1 - lam eta) = 1/0.99; relaxation 1/(2 lam eta) = 50
    xi = torch.tensor([[0.5], [-1.0]], dtype=DT)
    s = SinkhornDROSampler("wgf", n_particles=m, inner_steps=600, inner_lr=eta, lam=lam, eps=eps, seed=2)
    z = s.sample(lambda z: torch.sin(z[..., 0]), xi).z[..., 0]
    var = (eps / 2) / (1 - lam * eta)
    assert (z.mean(1) - xi[:, 0]).abs().max() < 4 * math.sqrt(var / m)
    assert ((z.var(1) / var) - 1).abs().max() < 4 * math.sqrt(2 / m)
    # joint limit: gradient at the particles equals the ERM gradient
    g = torch.Generator().manual_seed(8)
    data = torch.randn(10, 2, generator=g, dtype=DT)
    theta0 = torch.randn(2, generator=g, dtype=DT)

    def loss(th: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        return torch.log1p(torch.exp(-(z @ th)))

    s = SinkhornDROSampler("wgf", n_particles=3, inner_steps=50, inner_lr=1 / (4 * lam), lam=lam, eps=1e-8)
    res = gradient_flow_dro(loss, theta0, data, s, outer_steps=1, lr=1.0, grad_clip=None)
    th = theta0.clone().requires_grad_(True)
    (g_erm,) = torch.autograd.grad(loss(th, data[:, None, :]).mean(), th)
    step = theta0 - res.x  # lr = 1: the DRO gradient
    assert float((step - g_erm).norm() / g_erm.norm()) < 1e-3


def test_value_and_grad_path_equals_autograd_and_runs_are_deterministic_and_follow_dtype() -> None:
    g = torch.Generator().manual_seed(7)
    xi = torch.randn(5, 1, generator=g, dtype=DT)
    for method in ("wgf", "wfr", "svgd"):
        s = SinkhornDROSampler(method, n_particles=4, inner_steps=30, lam=0.5, eps=0.2, clamp=(-1.0, 1.0))
        a = s.sample(lambda z: 1.5 * z[..., 0], xi, generator=torch.Generator().manual_seed(1))
        b = s.sample(None, xi, value_and_grad=_linear_vg(1.5), generator=torch.Generator().manual_seed(1))
        assert torch.allclose(a.z, b.z, atol=1e-14) and torch.allclose(a.w, b.w, atol=1e-14), method
        assert float(a.z.abs().max()) <= 1.0
    s = SinkhornDROSampler("wfr", n_particles=3, inner_steps=10, lam=0.5, eps=0.2)
    x32 = xi.float()
    p = s.sample(lambda z: z[..., 0] ** 2, x32)
    assert p.z.dtype == torch.float32 and p.w.dtype == torch.float32
    # one seed, one run; another seed, another run
    r1 = gradient_flow_dro(
        lambda t, z: ((z - t) ** 2).sum(-1), torch.zeros(1, dtype=DT), xi, s, seed=0, outer_steps=3
    )
    r2 = gradient_flow_dro(
        lambda t, z: ((z - t) ** 2).sum(-1), torch.zeros(1, dtype=DT), xi, s, seed=0, outer_steps=3
    )
    r3 = gradient_flow_dro(
        lambda t, z: ((z - t) ** 2).sum(-1), torch.zeros(1, dtype=DT), xi, s, seed=1, outer_steps=3
    )
    assert torch.equal(r1.x, r2.x) and not torch.equal(r1.x, r3.x)
    assert r1.extras["last_particles"].shape == (5, 3, 1) and r1.extras["last_weights"].shape == (5, 3)


def test_robust_loss_trains_a_torch_model_and_logsumexp_aggregate() -> None:
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(3)
    x = torch.randn(16, 2, generator=g)
    y = (x[:, 0] > 0).long()
    model = torch.nn.Linear(2, 2)
    s = SinkhornDROSampler("wgf", n_particles=4, inner_steps=5, inner_lr=0.01, lam=1.0, eps=0.15, seed=0)

    def loss_fn(z: torch.Tensor) -> torch.Tensor:  # (N, M, 2) -> (N, M)
        logits = model(z)
        return torch.nn.functional.cross_entropy(
            logits.flatten(0, 1), y.repeat_interleave(4), reduction="none"
        ).view(16, 4)

    loss = s.robust_loss(loss_fn, x)
    loss.backward()
    assert model.weight.grad is not None and torch.isfinite(model.weight.grad).all()
    losses = torch.rand(3, 4, generator=g, dtype=DT)
    w = torch.softmax(torch.randn(3, 4, generator=g, dtype=DT), 1)
    s2 = SinkhornDROSampler("wgf", lam=0.3, aggregate="logsumexp")
    ref = 0.3 * torch.log((w * torch.exp(losses / 0.3)).sum(1)).mean()
    assert torch.allclose(s2.aggregate_losses(losses, w), ref, atol=1e-14)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"lam": 0.0}, "lam"),
        ({"eps": -0.1}, "eps"),
        ({"n_particles": 0}, "n_particles"),
        ({"inner_steps": -1}, "inner_steps"),
        ({"method": "nope"}, "method"),
        ({"method": "svgd", "eps": 0.0}, "eps"),
        ({"clamp": (1.0, -1.0)}, "clamp"),
        ({"aggregate": "max"}, "aggregate"),
    ],
)
def test_bad_arguments_raise_naming_the_argument(kwargs: dict, name: str) -> None:
    with pytest.raises((ValueError, TypeError), match=f"^{name}"):
        SinkhornDROSampler(**kwargs)


def test_non_finite_loss_raises_floating_point_error_and_bad_shapes_raise() -> None:
    xi = torch.zeros(3, 1, dtype=DT)
    s = SinkhornDROSampler("wgf", n_particles=2, inner_steps=3)
    with pytest.raises(FloatingPointError):
        s.sample(lambda z: z[..., 0] * float("nan"), xi)
    with pytest.raises(ValueError, match=r"^loss_fn"):
        s.sample(lambda z: z.sum(), xi)
    with pytest.raises(ValueError, match=r"^xi"):
        s.sample(lambda z: z[..., 0], torch.zeros(3, dtype=DT))
