r"""GFS-DRO: gradient-flow samplers for the inner maximisation of Sinkhorn (entropic Wasserstein) DRO.

Paper: Zusen Xu, Jia-Jie Zhu, "Gradient Flow Sampler-based Distributionally Robust Optimization", ICML 2026,
arXiv:2510.25956; update rules and defaults re-described from the paper's problem statement and its official
repository (github.com/ZusenXu/GFS-DRO, the uncertain-least-squares script), never copied.

**Problem.** Penalised entropy-regularised Wasserstein DRO,

.. math::
    \min_\theta \max_\rho\ E_{z\sim\rho}[\ell(\theta, z)] - \lambda\,\mathrm{OT}_\varepsilon(\rho, \hat P_N),

decouples over the data points: the worst-case conditional law of :math:`\xi_i` is the Gibbs measure
:math:`\pi_i(z) \propto \exp(\bar f_i(z)/(\lambda\varepsilon))`, :math:`\bar f_i(z) = \ell(\theta, z) -
\lambda\|z - \xi_i\|^2`, and the :math:`\theta`-gradient is :math:`\frac1N\sum_i E_{\pi_i}\nabla_\theta
\ell(\theta, z)` (Danskin). Any gradient-flow *sampler* of :math:`\pi_i` gives a DRO algorithm.

**Samplers** (:class:`SinkhornDROSampler`; M particles per data point, all started at :math:`\xi_i`, K inner
steps of size :math:`\eta`, optional clipping of the particles to a box after every move as the official
script does):

- ``"wgf"`` (Wasserstein gradient flow = unadjusted Langevin):
  :math:`z \leftarrow z + \eta\nabla\bar f_i(z) + \sqrt{2\eta\lambda\varepsilon}\,\zeta`, :math:`\zeta\sim
  N(0, I)`; its stationary law is :math:`\pi_i` up to the Euler bias (stable for :math:`\eta < 1/\lambda`);
- ``"wfr"`` (Wasserstein-Fisher-Rao): the same move, then the Fisher-Rao (birth-death) reweighting at the new
  positions, discretised multiplicatively, :math:`w \leftarrow w^{1 - \lambda\varepsilon h}
  e^{h\bar f_i(z)}` normalised over the particles of each point (``weight_lr`` = h), in log space;
- ``"svgd"`` (Stein variational gradient flow, Liu & Wang 2016) toward :math:`\pi_i`:
  :math:`z_m \leftarrow z_m + \eta\,\frac1M\sum_{m'}[k(z_{m'}, z_m)\nabla\log\pi_i(z_{m'}) +
  \nabla_{z_{m'}}k(z_{m'}, z_m)]`, :math:`\nabla\log\pi_i = \nabla\bar f_i/(\lambda\varepsilon)`, RBF kernel
  :math:`k = \exp(-\|z - z'\|^2/h)` with the median heuristic :math:`h = \mathrm{med}^2/\log(M+1)` per data
  point (fallback :math:`h = 1` for one particle or coincident particles);
- ``"wrm"``: the reduction :math:`\varepsilon = 0`, no noise: gradient ascent on :math:`\bar f_i`, i.e. WRM
  (Sinha, Namkoong & Duchi 2018) with K inner steps;
- ``"dual"``: the dual Sinkhorn-DRO estimator (Wang, Gao & Xie 2021): :math:`z_{i,m} = \xi_i +
  \sqrt{v}\,\zeta` from the Gibbs kernel and self-normalised weights :math:`\mathrm{softmax}_m(\ell/(\lambda
  \varepsilon))`; with ``kernel_var`` :math:`v = \varepsilon/2` (default) this targets exactly :math:`\pi_i`.

The outer loop :func:`gradient_flow_dro` re-samples at every step and takes a clipped gradient step on
:math:`\frac1N\sum_i\sum_m w_{i,m}\nabla_\theta\ell(\theta, z_{i,m})` (a :class:`~optarium._core.Result`);
:meth:`SinkhornDROSampler.robust_loss` is the same criterion for a standard torch training loop, with the
official classification scripts' alternative aggregate ``"logsumexp"``,
:math:`\lambda\,\mathrm{mean}_i\log\sum_m w_{i,m}e^{\ell_{i,m}/\lambda}`.

**Deviations and reconstructions.**

- SVGD: the official script's SVGD was not read; standard SVGD is used. Particles that all start at
  :math:`\xi_i` would stay identical under SVGD (the repulsion vanishes between coincident particles), so
  ``"svgd"`` starts them from the kernel :math:`\xi_i + \sqrt{v}\,\zeta` (our choice, documented here);
  with ``n_particles = 1`` it is started at :math:`\xi_i` and is exactly gradient ascent on
  :math:`\log\pi_i`.
- The dual method draws ``n_particles`` kernel samples; the official script draws :math:`2^l` samples with a
  random level :math:`l \le 4`, :math:`P(l)\propto 2^{-l}` (``dual_levels=4`` gives that) and kernel
  variance :math:`\varepsilon` (which corresponds to the cost :math:`\frac12\|z - \xi\|^2`, not the
  target of the flows); ``kernel_var`` exposes it.
- The official script's gradient functions of the least-squares loss omit the loss's 1/10 factor; here every
  gradient is the gradient of the loss the user passes (autograd, or ``value_and_grad`` when given).

Gradients in :math:`z` come from autograd on the sum of the per-particle losses, or from a user
``value_and_grad(z) -> (values, grads)`` for speed. Particle noise comes from a ``torch.Generator``, never
the global RNG. Everything follows the data's dtype and device; a non-finite loss during sampling raises
``FloatingPointError``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from optarium._core.result import Result
from optarium._core.seeding import derive_seed, make_generator
from optarium._core.solver import SolverCase, SolverLoop
from optarium._core.validation import check_choice, check_int, check_nonnegative, check_positive

__all__ = [
    "AGGREGATES",
    "METHODS",
    "Particles",
    "SinkhornDROSampler",
    "fisher_rao_step",
    "gradient_flow_dro",
    "solver_cases",
    "svgd_direction",
]

#: The samplers of :class:`SinkhornDROSampler`.
METHODS: tuple[str, ...] = ("wgf", "wfr", "svgd", "wrm", "dual")
#: How particles are turned into a loss: the weighted mean, or the soft-max (log-sum-exp) robust loss.
AGGREGATES: tuple[str, ...] = ("weighted_mean", "logsumexp")

LossFn = Callable[[Tensor], Tensor]
ValueAndGrad = Callable[[Tensor], tuple[Tensor, Tensor]]


@dataclass(frozen=True)
class Particles:
    """Particles of the worst-case conditional laws: ``z`` of shape ``(N, M, d)``, weights ``w`` ``(N, M)``.

    ``w`` sums to one over ``M`` for every data point (uniform except for ``"wfr"`` and ``"dual"``).
    """

    z: Tensor
    w: Tensor


def _check_xi(xi: Any) -> Tensor:
    if not isinstance(xi, Tensor):
        raise TypeError(f"xi: must be a Tensor, got {type(xi).__name__}")
    if not xi.is_floating_point():
        raise TypeError(f"xi: must be a floating tensor, got {xi.dtype}")
    if xi.dim() != 2 or xi.shape[0] == 0 or xi.shape[1] == 0:
        raise ValueError(f"xi: must have shape (N, d) with N, d >= 1, got {tuple(xi.shape)}")
    if not bool(torch.isfinite(xi).all()):
        raise ValueError("xi: must be finite")
    return xi


def _median_bandwidth(sq: Tensor) -> Tensor:
    """Per data point, ``median of the off-diagonal squared distances / log(M + 1)``; 1 where undefined."""
    n, m, _ = sq.shape
    if m < 2:
        return torch.ones(n, 1, 1, dtype=sq.dtype, device=sq.device)
    off = ~torch.eye(m, dtype=torch.bool, device=sq.device)
    med = sq[:, off].median(dim=1).values  # (N,)
    h = med / math.log(m + 1.0)
    h = torch.where(h > 0, h, torch.ones_like(h))
    return h.view(n, 1, 1)


def svgd_direction(z: Tensor, score: Tensor, bandwidth: float | None = None) -> Tensor:
    r"""The SVGD direction :math:`\phi(z_m) = \frac1M\sum_{m'}[k(z_{m'}, z_m)s(z_{m'}) + \nabla_{z_{m'}}
    k(z_{m'}, z_m)]` for every group of particles.

    Args:
        z: particles, shape ``(N, M, d)`` (N independent groups of M particles).
        score: :math:`\nabla\log\pi` at the particles, shape ``(N, M, d)``.
        bandwidth: the RBF bandwidth :math:`h` in :math:`k = \exp(-\|z - z'\|^2/h)`; ``None`` for the median
            heuristic per group (1 where it is undefined).
    """
    diff = z[:, :, None, :] - z[:, None, :, :]  # (N, M, M, d): diff[:, a, b] = z_a - z_b
    sq = (diff * diff).sum(-1)  # (N, M, M)
    if bandwidth is None:
        h = _median_bandwidth(sq)
    else:
        h = torch.full((z.shape[0], 1, 1), float(bandwidth), dtype=z.dtype, device=z.device)
    k = torch.exp(-sq / h)  # symmetric
    m = z.shape[1]
    drive = torch.bmm(k, score)  # sum_b k(z_a, z_b) s(z_b)
    # grad_{z_b} k(z_b, z_a) = 2 (z_a - z_b) / h * k(z_a, z_b), summed over b
    repulse = 2.0 / h * (k[..., None] * diff).sum(2)
    return (drive + repulse) / m


def fisher_rao_step(logw: Tensor, fbar: Tensor, *, lam: float, eps: float, weight_lr: float) -> Tensor:
    r"""One multiplicative Fisher-Rao (birth-death) weight step of WFR, in log space:
    :math:`\log w \leftarrow \mathrm{log\_softmax}((1 - \lambda\varepsilon h)\log w + h\bar f)` over the last
    dimension. With the positions frozen it contracts at rate :math:`1 - \lambda\varepsilon h` to the Gibbs
    weights :math:`\mathrm{softmax}(\bar f/(\lambda\varepsilon))`.
    """
    return torch.log_softmax((1.0 - lam * eps * weight_lr) * logw + weight_lr * fbar, dim=-1)


class SinkhornDROSampler:
    r"""Gradient-flow samplers of the worst-case laws :math:`\pi_i \propto e^{[\ell(z) - \lambda\|z -
    \xi_i\|^2]/(\lambda\varepsilon)}` of Sinkhorn DRO (GFS-DRO, arXiv:2510.25956).

    Args:
        method: ``"wgf"`` (Langevin), ``"wfr"`` (Wasserstein-Fisher-Rao), ``"svgd"``, ``"wrm"`` (noise-free
            gradient ascent, the :math:`\varepsilon = 0` reduction) or ``"dual"`` (kernel samples + softmax
            weights); see the module docstring for the update rules.
        n_particles: M, particles per data point.
        inner_steps: K, inner steps (0 returns the particles at their start).
        inner_lr: :math:`\eta`, the position step.
        weight_lr: h, the Fisher-Rao weight step of ``"wfr"``.
        lam: :math:`\lambda > 0`, the transport penalty (Lagrange multiplier).
        eps: :math:`\varepsilon \ge 0`, the entropic regularisation (0 only for ``"wgf"``, ``"wfr"`` and
            ``"wrm"``: noise-free flows).
        clamp: ``(low, high)`` box the particles are clipped to after every move, or ``None``.
        aggregate: ``"weighted_mean"`` or ``"logsumexp"`` (:meth:`robust_loss`).
        kernel_var: the variance of the Gibbs kernel samples of ``"dual"`` and of the start of ``"svgd"``
            (default :math:`\varepsilon/2`, the kernel factor of :math:`\pi_i`).
        dual_levels: for ``"dual"``, draw :math:`2^l` samples with a random level :math:`l \le` this value,
            :math:`P(l) \propto 2^{-l}` (the official script uses 4); ``None`` draws ``n_particles``.
        svgd_bandwidth: a fixed SVGD bandwidth, or ``None`` for the median heuristic.
        seed: seed of the sampler's own generator (used when no generator is passed to :meth:`sample`).

    Example:
        >>> import torch
        >>> from optarium.dro.gradient_flow import SinkhornDROSampler
        >>> xi = torch.zeros(3, 1, dtype=torch.float64)
        >>> s = SinkhornDROSampler("wrm", n_particles=1, inner_steps=2000, inner_lr=0.5, lam=1.0, eps=0.0)
        >>> p = s.sample(lambda z: 2.0 * z[..., 0], xi)  # max_z 2 z - z^2 at z = 1
        >>> round(float(p.z.mean()), 6)
        1.0
    """

    def __init__(
        self,
        method: str = "wgf",
        *,
        n_particles: int = 8,
        inner_steps: int = 200,
        inner_lr: float = 0.01,
        weight_lr: float = 0.08,
        lam: float = 0.1,
        eps: float = 0.5,
        clamp: tuple[float, float] | None = None,
        aggregate: str = "weighted_mean",
        kernel_var: float | None = None,
        dual_levels: int | None = None,
        svgd_bandwidth: float | None = None,
        seed: int = 0,
    ) -> None:
        self.method = check_choice("method", method, METHODS)
        self.n_particles = check_int("n_particles", n_particles, minimum=1)
        self.inner_steps = check_int("inner_steps", inner_steps, minimum=0)
        self.inner_lr = check_positive("inner_lr", inner_lr)
        self.weight_lr = check_nonnegative("weight_lr", weight_lr)
        self.lam = check_positive("lam", lam)
        self.eps = check_nonnegative("eps", eps)
        if self.eps == 0.0 and self.method in ("svgd", "dual"):
            raise ValueError(f"eps: must be > 0 for method {self.method!r} (its target needs lam * eps > 0)")
        if clamp is not None:
            if len(clamp) != 2 or not float(clamp[0]) < float(clamp[1]):
                raise ValueError(f"clamp: must be (low, high) with low < high, got {clamp!r}")
            clamp = (float(clamp[0]), float(clamp[1]))
        self.clamp = clamp
        self.aggregate = check_choice("aggregate", aggregate, AGGREGATES)
        self.kernel_var = self.eps / 2.0 if kernel_var is None else check_positive("kernel_var", kernel_var)
        self.dual_levels = None if dual_levels is None else check_int("dual_levels", dual_levels, minimum=0)
        self.svgd_bandwidth = (
            None if svgd_bandwidth is None else check_positive("svgd_bandwidth", svgd_bandwidth)
        )
        self.seed = check_int("seed", seed)
        self._generator: torch.Generator | None = None

    def __repr__(self) -> str:
        return (
            f"SinkhornDROSampler(method={self.method!r}, n_particles={self.n_particles}, "
            f"inner_steps={self.inner_steps}, inner_lr={self.inner_lr}, lam={self.lam}, eps={self.eps})"
        )

    def generator(self, device: torch.device | str = "cpu") -> torch.Generator:
        """The sampler's own generator (created from ``seed`` on first use, on ``device``)."""
        if self._generator is None or self._generator.device != torch.device(device):
            self._generator = make_generator(derive_seed(self.seed, "particles"), device)
        return self._generator

    # ------------------------------------------------------------------------------------------- sampling

    def _n_draw(self, gen: torch.Generator) -> int:
        if self.method != "dual" or self.dual_levels is None:
            return self.n_particles
        levels = torch.arange(self.dual_levels + 1, dtype=torch.float64)
        probs = 2.0 ** (-levels)
        lvl = int(torch.multinomial(probs / probs.sum(), 1, generator=gen).item())
        return 2**lvl

    def sample(
        self,
        loss_fn: LossFn | None,
        xi: Tensor,
        *,
        value_and_grad: ValueAndGrad | None = None,
        generator: torch.Generator | None = None,
    ) -> Particles:
        r"""Run the sampler toward :math:`\pi_i` for every data point :math:`\xi_i`.

        Args:
            loss_fn: ``loss_fn(z) -> Tensor[N, M]``, the loss :math:`\ell(\theta, z_{i,m})` at particles
                ``z`` of shape ``(N, M, d)`` (entry ``[i, m]`` may depend on ``z[i, m]`` only; labels or other
                fixed inputs of point i are the caller's, broadcast over M). Parameters should be detached:
                the sampler only differentiates in ``z``.
            xi: the data points, shape ``(N, d)``.
            value_and_grad: optional ``z -> (loss values (N, M), grad in z (N, M, d))`` replacing autograd.
            generator: the random source (default: the sampler's own, see :meth:`generator`).

        Returns:
            :class:`Particles` (detached).
        """
        xi = _check_xi(xi)
        if loss_fn is None and value_and_grad is None:
            raise TypeError("loss_fn: give a callable loss_fn or value_and_grad")
        if loss_fn is not None and not callable(loss_fn):
            raise TypeError(f"loss_fn: must be callable, got {type(loss_fn).__name__}")
        gen = self.generator(xi.device) if generator is None else generator
        n, d = xi.shape
        m = self._n_draw(gen)
        lam, eps = self.lam, self.eps
        xi3 = xi[:, None, :]

        first = [True]

        def evaluate(z: Tensor, need_grad: bool = True) -> tuple[Tensor, Tensor | None]:
            # Shapes are checked on the first call and finiteness once at the end of the run (a NaN or inf
            # propagates into the particles or weights), so the hot loop does not synchronise.
            if value_and_grad is not None:
                val, grad = value_and_grad(z)
            elif need_grad:
                zr = z.detach().requires_grad_(True)
                with torch.enable_grad():
                    val = loss_fn(zr)  # type: ignore[misc]
                    _check_shape(val, n, z.shape[1])
                    (grad,) = torch.autograd.grad(val.sum(), zr)
                val = val.detach()
            else:
                with torch.no_grad():
                    val = loss_fn(z)  # type: ignore[misc]
                grad = None
            if first[0]:
                _check_shape(val, n, z.shape[1])
                if grad is not None and grad.shape != z.shape:
                    raise ValueError(f"value_and_grad: the gradient must have shape {tuple(z.shape)}")
                first[0] = False
            return val, grad

        def finish(z: Tensor, w: Tensor) -> Particles:
            if not (bool(torch.isfinite(z).all()) and bool(torch.isfinite(w).all())):
                raise FloatingPointError(
                    f"loss_fn: non-finite loss or gradient during {self.method} sampling"
                )
            return Particles(z.detach(), w.detach())

        if self.method == "dual":
            z = xi3 + math.sqrt(self.kernel_var) * torch.randn(
                n, m, d, generator=gen, dtype=xi.dtype, device=xi.device
            )
            if self.clamp is not None:
                z = z.clamp(*self.clamp)
            val, _ = evaluate(z, need_grad=False)
            return finish(z, torch.softmax(val / (lam * eps), dim=1))

        if self.method == "svgd" and m > 1:
            z = xi3 + math.sqrt(self.kernel_var) * torch.randn(
                n, m, d, generator=gen, dtype=xi.dtype, device=xi.device
            )
            if self.clamp is not None:
                z = z.clamp(*self.clamp)
        else:
            z = xi3.expand(n, m, d).clone()
        logw = torch.full((n, m), -math.log(m), dtype=xi.dtype, device=xi.device)
        eta = self.inner_lr
        noise_sd = math.sqrt(2.0 * eta * lam * eps) if self.method in ("wgf", "wfr") else 0.0
        h = self.weight_lr
        pull = (2.0 * lam) * xi3  # the transport drift is pull - 2 lam z
        noise = torch.empty_like(z) if noise_sd > 0.0 else None
        with torch.no_grad():
            for _ in range(self.inner_steps):
                _, g = evaluate(z)
                assert g is not None
                drift = g - (2.0 * lam) * z
                drift.add_(pull)
                if self.method == "svgd":
                    z = z + eta * svgd_direction(z, drift / (lam * eps), self.svgd_bandwidth)
                else:
                    z = z.add(drift, alpha=eta)
                    if noise is not None:
                        z.add_(torch.randn(z.shape, generator=gen, out=noise), alpha=noise_sd)
                if self.clamp is not None:
                    z.clamp_(*self.clamp)
                if self.method == "wfr":
                    val, _ = evaluate(z, need_grad=False)
                    fbar = val - lam * ((z - xi3) ** 2).sum(-1)
                    logw = fisher_rao_step(logw, fbar, lam=lam, eps=eps, weight_lr=h)
        return finish(z, logw.exp())

    # ------------------------------------------------------------------------------------------- the loss

    def aggregate_losses(self, losses: Tensor, w: Tensor) -> Tensor:
        r"""The robust loss from per-particle losses ``(N, M)`` and weights ``(N, M)``.

        ``"weighted_mean"``: :math:`\frac1N\sum_i\sum_m w_{i,m}\ell_{i,m}`; ``"logsumexp"``:
        :math:`\lambda\frac1N\sum_i\log\sum_m w_{i,m}e^{\ell_{i,m}/\lambda}`.
        """
        if self.aggregate == "weighted_mean":
            return (w * losses).sum(1).mean()
        return self.lam * torch.logsumexp(losses / self.lam + torch.log(w), dim=1).mean()

    def robust_loss(
        self,
        loss_fn: LossFn,
        xi: Tensor,
        *,
        value_and_grad: ValueAndGrad | None = None,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        r"""Sample worst-case particles, then the robust loss at the detached particles (differentiable in
        whatever parameters ``loss_fn`` uses): call ``.backward()`` and step any torch optimizer.

        ``loss_fn(z) -> Tensor[N, M]`` as in :meth:`sample`. During sampling only gradients in ``z`` are
        taken (``torch.autograd.grad``), so nothing accumulates in the parameters' ``.grad``.
        """
        parts = self.sample(loss_fn, xi, value_and_grad=value_and_grad, generator=generator)
        losses = loss_fn(parts.z)
        _check_values(losses.detach(), xi.shape[0], parts.z.shape[1])
        return self.aggregate_losses(losses, parts.w)


def _check_shape(val: Any, n: int, m: int) -> None:
    if not isinstance(val, Tensor) or val.shape != (n, m):
        shape = tuple(val.shape) if isinstance(val, Tensor) else type(val).__name__
        raise ValueError(
            f"loss_fn: must return a Tensor of shape ({n}, {m}) (one loss per particle), got {shape}"
        )


def _check_values(val: Any, n: int, m: int) -> None:
    _check_shape(val, n, m)
    if not bool(torch.isfinite(val).all()):
        raise FloatingPointError("loss_fn: non-finite loss during sampling")


def gradient_flow_dro(
    loss_fn: Callable[[Tensor, Tensor], Tensor],
    theta0: Tensor,
    data: Tensor,
    sampler: SinkhornDROSampler,
    *,
    outer_steps: int = 50,
    lr: float = 0.01,
    grad_clip: float | None = 100.0,
    tol: float | None = None,
    value_and_grad: Callable[[Tensor, Tensor], tuple[Tensor, Tensor]] | None = None,
    seed: int = 0,
    record_every: int = 1,
    time_limit_s: float | None = None,
    callback: Callable[[int, Tensor], None] | None = None,
) -> Result:
    r"""GFS-DRO training: at each outer step sample the worst-case particles with ``sampler`` (from the data),
    then :math:`\theta \leftarrow \theta - \mathrm{lr}\cdot\mathrm{clip}(\nabla_\theta
    \frac1N\sum_i\sum_m w_{i,m}\ell(\theta, z_{i,m}))` (the official least-squares script's outer loop).

    Args:
        loss_fn: ``loss_fn(theta, z) -> Tensor[N, M]`` for particles ``z`` of shape ``(N, M, d)``.
        theta0: the starting parameters (any shape; a floating tensor).
        data: the data points :math:`\xi`, shape ``(N, d)``.
        sampler: the inner sampler (its ``aggregate`` defines the robust loss).
        outer_steps: the iteration budget.
        lr: the outer step size.
        grad_clip: the gradient-norm clip (``None``: no clipping).
        tol: converged once the (unclipped) gradient norm is at most ``tol`` (``None``: never).
        value_and_grad: optional ``(theta, z) -> (values, grad in z)`` for the sampler (see
            :meth:`SinkhornDROSampler.sample`).
        seed: seeds the particle noise (``derive_seed(seed, "particles")``).
        record_every, time_limit_s: see :class:`~optarium._core.solver.SolverLoop`.
        callback: ``callback(k, theta)`` after every step (logging; evaluation time is not counted).

    Returns:
        A :class:`~optarium._core.Result`: ``x`` the final :math:`\theta`, ``value`` the robust-loss
        estimate at the last sampled particles, history rows ``objective`` (that estimate at each step's
        particles), ``grad_norm`` (before clipping), and ``extras``: ``last_particles`` ``(N, M, d)``,
        ``last_weights`` ``(N, M)``, ``clipped_steps``.
    """
    if not callable(loss_fn):
        raise TypeError(f"loss_fn: must be callable, got {type(loss_fn).__name__}")
    if not isinstance(theta0, Tensor) or not theta0.is_floating_point():
        raise TypeError(f"theta0: must be a floating Tensor, got {type(theta0).__name__}")
    data = _check_xi(data)
    if not isinstance(sampler, SinkhornDROSampler):
        raise TypeError(f"sampler: must be a SinkhornDROSampler, got {type(sampler).__name__}")
    outer_steps = check_int("outer_steps", outer_steps, minimum=0)
    lr = check_positive("lr", lr)
    if grad_clip is not None:
        grad_clip = check_positive("grad_clip", grad_clip)
    if tol is not None:
        tol = check_nonnegative("tol", tol)
    gen = make_generator(derive_seed(seed, "particles"), data.device)
    theta = theta0.detach().clone().to(dtype=data.dtype, device=data.device)
    state: dict[str, Any] = {"obj": math.nan, "gnorm": math.inf, "parts": None, "clipped": 0}

    def step_stats() -> None:
        th = theta.detach()
        vg = None if value_and_grad is None else (lambda z: value_and_grad(th, z))
        parts = sampler.sample(lambda z: loss_fn(th, z), data, value_and_grad=vg, generator=gen)
        tr = th.clone().requires_grad_(True)
        with torch.enable_grad():
            losses = loss_fn(tr, parts.z)
            _check_values(losses.detach(), data.shape[0], parts.z.shape[1])
            obj = sampler.aggregate_losses(losses, parts.w)
            (g,) = torch.autograd.grad(obj, tr)
        state.update(obj=float(obj.detach()), gnorm=float(g.norm()), parts=parts, grad=g.detach())

    loop = SolverLoop(outer_steps, tol=tol, criterion="grad_norm", record_every=record_every,
                      time_limit_s=time_limit_s, objective="objective")  # fmt: skip

    def evaluate(k: int) -> Mapping[str, float]:
        return {"objective": state["obj"], "grad_norm": state["gnorm"]}

    try:
        step_stats()
    except FloatingPointError:
        state.update(obj=math.inf, gnorm=math.inf)
    for k in loop.iterate(evaluate):
        g = state["grad"]
        gn = state["gnorm"]
        if grad_clip is not None and gn > grad_clip:
            g = g * (grad_clip / gn)
            state["clipped"] += 1
        theta = theta - lr * g
        if callback is not None:
            with loop.evaluating():
                callback(k, theta)
        try:
            step_stats()
        except FloatingPointError:  # reported as diverged by the loop (non-finite objective)
            state.update(obj=math.inf, gnorm=math.inf)
    parts = state["parts"]
    extras: dict[str, Any] = {"clipped_steps": int(state["clipped"])}
    if parts is not None:
        extras.update(last_particles=parts.z, last_weights=parts.w)
    return loop.result(theta, value=state["obj"], extras=extras)


# ------------------------------------------------------------------------------------------ conformance


def _case_solve(*, dtype: torch.dtype, device: Any, seed: int, poison: bool = False, **kw: Any) -> Result:
    g = torch.Generator().manual_seed(4321)
    xi = torch.randn(12, 2, generator=g, dtype=torch.float64).to(dtype=dtype, device=device)
    method = kw.pop("method", "wrm")
    lam = kw.pop("lam", 2.0)
    eps = kw.pop("eps", 0.0 if method == "wrm" else 0.1)
    m = kw.pop("n_particles", 1 if method == "wrm" else 4)
    sampler = SinkhornDROSampler(
        method, n_particles=m, inner_steps=20, inner_lr=0.1, lam=lam, eps=eps, seed=seed
    )

    def loss(theta: Tensor, z: Tensor) -> Tensor:  # 1/2 |theta - z|^2: the robust optimum is mean(xi)
        val = 0.5 * ((z - theta) ** 2).sum(-1)
        return val * float("nan") if poison else val

    args: dict[str, Any] = {"outer_steps": 200, "lr": 0.5, "tol": 1e-10, "seed": seed}
    args.update(kw)
    return gradient_flow_dro(loss, torch.zeros(2, dtype=dtype, device=device), xi, sampler, **args)


def _case_optimum(r: Result) -> float:
    g = torch.Generator().manual_seed(4321)
    xi = torch.randn(12, 2, generator=g, dtype=torch.float64)
    return float((r.x.detach().cpu().double() - xi.mean(0)).norm())


def solver_cases() -> list[SolverCase]:
    r""":func:`gradient_flow_dro` on :math:`\ell = \frac12\|\theta - z\|^2` (robust optimum the data mean,
    for any number of WRM inner steps); the WGF sampler for the determinism check."""
    return [
        SolverCase(
            name="dro-gradient-flow-wrm",
            solve=_case_solve,
            statuses={
                "converged": {},
                "max_iter": {"outer_steps": 3},
                "diverged": {"poison": True},
                "timeout": {"time_limit_s": 0.0},
            },
            max_iter=3,
            tolerance_holds=lambda r: r.history.last("grad_norm") <= 1e-10,
            optimality=_case_optimum,
            optimality_tol=1e-8,
            invalid=[
                ({"outer_steps": -1}, "outer_steps"),
                ({"lr": 0.0}, "lr"),
                ({"grad_clip": -1.0}, "grad_clip"),
                ({"lam": 0.0}, "lam"),
                ({"n_particles": 0}, "n_particles"),
                ({"eps": -1.0}, "eps"),
            ],
            determinism={"method": "wgf", "tol": None, "outer_steps": 5},
            stochastic=True,
        )
    ]
