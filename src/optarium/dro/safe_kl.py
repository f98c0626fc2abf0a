r"""Safe KL: an overflow-safe, unbiased stochastic surrogate of LogSumExp for KL-DRO and entropic OT.

Paper: Egor Gladin, Alexey Kroshnin, Jia-Jie Zhu, Pavel Dvurechensky, "Improved Stochastic Optimization of
LogSumExp", ICML 2026, arXiv:2509.24894. What is the paper's (abstract and digest): a SoftPlus-based
relaxation of LogSumExp built on an overflow-safe *Safe KL* f-divergence :math:`D_\rho`, convex, with an
approximation error that vanishes as :math:`\rho\to0`, smoothness linear in that of the potential, a link to
CVaR, used for continuous entropic OT and two forms of DRO. **Reconstructed** (the paper's definition of
:math:`D_\rho` was not readable; spec ``safe-kl.md``): the generator and its conjugate below, the
normalisation, and the concrete objectives.

**The log-partition and its expectation form.** :math:`F(\varphi) = \ln E_\mu e^{\varphi} =
\min_t\{t + E_\mu e^{\varphi - t} - 1\}`: an expectation, so minibatch gradients are unbiased, but the
exponential overflows and has unbounded gradients (the "exp dual", ``dual="exp"``).

**Safe KL (reconstruction).** The generator :math:`f_\rho(u) = u\ln u + (1/\rho - u)\ln(1-\rho u)` on
:math:`[0, 1/\rho]` (density ratios capped at :math:`1/\rho`, as CVaR at level :math:`\rho` caps them) has the
scaled-SoftPlus conjugate

.. math:: f^*_\rho(s) = \tfrac1\rho\ln(1 + \rho e^{s}) = \mathrm{softplus}(s + \ln\rho)/\rho,\qquad
   (f^*_\rho)'(s) = \sigma(s + \ln\rho)/\rho \in (0, 1/\rho),

with :math:`f^*_\rho \le e^s` and :math:`f^*_\rho \to e^s` as :math:`\rho\to0`. The surrogate
:math:`F_\rho(\varphi) = \min_t\{t + E f^*_\rho(\varphi - t) - 1\} \le F(\varphi)` is jointly convex in
:math:`(\varphi, t)`, an expectation (unbiased minibatch gradients) with gradients bounded by :math:`1/\rho`
(no overflow: it is computed as ``softplus(s + ln rho) / rho``, never through :math:`e^s`). Its value at
:math:`\varphi = 0` is the constant :math:`F_\rho(0) = (1 - 1/\rho)\ln(1-\rho) - 1 \approx -\rho/2`
(:func:`safe_kl_constant`); the **normalised** surrogate :math:`\tilde F_\rho = F_\rho - F_\rho(0)` is the
dual of :math:`D_\rho(\nu\|\mu) = \int f_\rho(d\nu/d\mu)\,d\mu - f_\rho(1) \ge \mathrm{KL}(\nu\|\mu)`, so
:math:`\tilde F_\rho(\varphi) \le F(\varphi)`, :math:`\tilde F_\rho(c) = c` and
:math:`\tilde F_\rho \uparrow F`
as :math:`\rho\downarrow0`. Only :math:`0 < \rho < 1` is valid (for :math:`\rho \ge 1` the minimiser in
:math:`t` escapes to :math:`-\infty`).

What this module gives:

- :func:`safe_kl_conjugate`, :func:`safe_kl_generator`, :func:`safe_kl_constant`: the pair and the constant;
- :func:`safe_logsumexp_surrogate`: the stochastic objective :math:`t + \overline{f^*_\rho(\varphi - t)} - 1
  - F_\rho(0)` of a minibatch (unbiased for the full-batch one), or its exp-dual counterpart;
- :func:`safe_logsumexp`: the exact full-batch :math:`\tilde F_\rho(\varphi)` and its minimiser :math:`t^*`
  (safeguarded Newton on the monotone optimality condition :math:`E\sigma(\varphi - t + \ln\rho) = \rho`,
  bracketed by :math:`t^* \in [\min\varphi, \max\varphi] + \ln(1-\rho)`);
- :class:`SafeKLDROLoss`: the KL-DRO criteria (A) penalised :math:`\lambda\tilde F_\rho(\ell/\lambda)`,
  (B) constrained :math:`\inf_{\lambda>0}\lambda r + \lambda\tilde F_\rho(\ell/\lambda)` with
  :math:`\lambda = e^a`, and (C) Sinkhorn DRO with one :math:`t_i` per datum, as an ``nn.Module`` whose
  parameters (:math:`t`, :math:`a`) join any torch optimizer;
- :func:`entropic_ot_dual_sgd`: stochastic (SGD/Adam) ascent on the entropic-OT dual (Genevay et al. 2016)
  with the exponential replaced by :math:`f^*_\rho` (reconstructed objective: the value
  :math:`E u + E v - \varepsilon E f^*_\rho((u+v-c)/\varepsilon) + \varepsilon(1 + F_\rho(0))` is the
  Safe-KL-regularised OT value
  :math:`\min_\pi \langle c,\pi\rangle + \varepsilon D_\rho(\pi\|\mu\otimes\nu)`, which is at least the
  KL-regularised one since :math:`D_\rho \ge \mathrm{KL}`),
  with finite-vector or MLP potentials, returning a :class:`~optarium._core.Result`.

- :func:`mlmc_logsumexp` (with :func:`mlmc_draw_levels`, :func:`mlmc_level_probabilities`,
  :func:`mlmc_sample_sizes`, :func:`mlmc_expected_cost`): the baseline the paper's setting names, the
  randomised multilevel Monte Carlo estimate of LogSumExp (Blanchet & Glynn 2015, in the form of Levy,
  Carmon, Duchi and Sidford 2020), unbiased for the minibatch LogSumExp of :math:`n_0 2^{J_{\max}}` samples
  at the expected cost :math:`n_0(1 + J_{\max})`; its autograd gradient is the MLMC gradient estimator.
  Reconstructed from the two papers' descriptions (level law :math:`P(J = j) = 2^{-j}`, the remainder on
  "no correction", antithetic halves); no code of theirs was used.

The exact full-batch KL-DRO worst case (the ground truth of (B)) is :func:`optarium.dro.worst_case` with
:class:`optarium.dro.KL`; the penalised exact value is :math:`\lambda\,\mathrm{logmeanexp}(\ell/\lambda)`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

from optarium._core.result import Result
from optarium._core.solver import SolverCase, SolverLoop
from optarium._core.validation import check_choice, check_int, check_nonnegative, check_positive

__all__ = [
    "DUALS",
    "MODES",
    "SafeKLDROLoss",
    "entropic_dual_value",
    "entropic_ot_dual_sgd",
    "mlmc_draw_levels",
    "mlmc_expected_cost",
    "mlmc_level_probabilities",
    "mlmc_logsumexp",
    "mlmc_sample_sizes",
    "safe_kl_conjugate",
    "safe_kl_constant",
    "safe_kl_generator",
    "safe_logsumexp",
    "safe_logsumexp_surrogate",
    "solver_cases",
]

#: The stochastic duals: the Safe-KL surrogate and the plain exponential dual (rho = 0).
DUALS: tuple[str, ...] = ("safe_kl", "exp")
#: The DRO criteria of :class:`SafeKLDROLoss`.
MODES: tuple[str, ...] = ("penalized", "constrained", "sinkhorn")

_NEWTON_ITERATIONS = 100


def _check_rho(rho: Any) -> float:
    if isinstance(rho, bool) or not isinstance(rho, (int, float)):
        raise TypeError(f"rho: must be a real number in (0, 1), got {type(rho).__name__}")
    r = float(rho)
    if not (0.0 < r < 1.0):
        raise ValueError(
            f"rho: must be in (0, 1) (use dual='exp' for the exponential dual, rho = 0), got {r!r}"
        )
    return r


def _check_tensor(name: str, x: Any) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}: must be a Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name}: must be a floating tensor, got {x.dtype}")
    return x


def safe_kl_conjugate(s: Tensor, rho: float, *, derivative: bool = False) -> Tensor:
    r""":math:`f^*_\rho(s) = \mathrm{softplus}(s + \ln\rho)/\rho`, or its derivative (``derivative=True``).

    Overflow-safe for any finite ``s`` (computed as ``softplus(s + ln rho) / rho``). ``rho`` in (0, 1).
    """
    s = _check_tensor("s", s)
    rho = _check_rho(rho)
    z = s + math.log(rho)
    if derivative:
        return torch.sigmoid(z) / rho
    # softplus is log1p(exp(z)) below the threshold and z above it: exact to e^-40 relative there
    return torch.nn.functional.softplus(z, beta=1.0, threshold=40.0) / rho


def safe_kl_generator(u: Tensor, rho: float) -> Tensor:
    r"""The Safe-KL generator :math:`f_\rho(u) = u\ln u + (1/\rho - u)\ln(1 - \rho u)` (``inf`` above 1/rho).

    Defined on :math:`[0, 1/\rho]` with :math:`0\ln0 = 0`; negative ``u`` gives ``inf`` as well.
    """
    u = _check_tensor("u", u)
    rho = _check_rho(rho)
    cap = 1.0 / rho
    inside = (u >= 0) & (u <= cap)
    uc = u.clamp(0.0, cap)
    a = torch.where(uc > 0, torch.xlogy(uc, uc), torch.zeros_like(uc))
    b = torch.xlogy(cap - uc, (1.0 - rho * uc).clamp_min(0.0))
    return torch.where(inside, a + b, torch.full_like(u, math.inf))


def safe_kl_constant(rho: float) -> float:
    r""":math:`F_\rho(0) = (1 - 1/\rho)\ln(1-\rho) - 1` (about :math:`-\rho/2`): subtracted to normalise."""
    rho = _check_rho(rho)
    return (1.0 - 1.0 / rho) * math.log1p(-rho) - 1.0


def _dual_terms(s: Tensor, dual: str, rho: float | None) -> Tensor:
    if dual == "exp":
        return torch.exp(s)
    assert rho is not None
    return safe_kl_conjugate(s, rho)


def _resolve(dual: str, rho: Any) -> float | None:
    check_choice("dual", dual, DUALS)
    if dual == "exp":
        if rho is not None and rho != 0:
            raise ValueError(f"rho: the exponential dual has rho = 0; pass rho=None or 0, got {rho!r}")
        return None
    return _check_rho(rho)


def safe_logsumexp_surrogate(
    phi: Tensor,
    t: Tensor | float,
    rho: float | None = 1e-2,
    *,
    dual: str = "safe_kl",
    weights: Tensor | None = None,
    normalized: bool = True,
) -> Tensor:
    r"""The stochastic LogSumExp objective of a (mini)batch: :math:`t + \sum_i w_i f^*_\rho(\varphi_i - t) - 1
    - F_\rho(0)`.

    Its expectation over a uniform minibatch is the full-batch objective, whose minimum over ``t`` is
    :math:`\tilde F_\rho(\varphi)` (:func:`safe_logsumexp`); gradients in ``phi`` and ``t`` are bounded by
    :math:`1/\rho`. With ``dual="exp"`` (and ``rho=None``) the exponential :math:`e^{\varphi - t}` replaces
    :math:`f^*_\rho` (the unbiased exp dual; it overflows to ``inf`` once :math:`\varphi - t > 709` in
    float64, 88 in float32: the failure the safe form removes).

    Args:
        phi: potentials / scaled losses, shape ``(..., B)`` (the last dimension is averaged).
        t: the dual scalar(s), broadcastable to ``phi.shape[:-1]``.
        rho: in (0, 1) for ``dual="safe_kl"``; ``None`` (or 0) for ``dual="exp"``.
        dual: ``"safe_kl"`` or ``"exp"``.
        weights: probability weights over the last dimension (uniform if ``None``).
        normalized: subtract :math:`F_\rho(0)` (so that a constant ``phi = c`` gives ``c`` at the optimum).

    Returns:
        Tensor of shape ``phi.shape[:-1]``.
    """
    phi = _check_tensor("phi", phi)
    r = _resolve(dual, rho)
    if phi.dim() == 0 or phi.shape[-1] == 0:
        raise ValueError(f"phi: must have a non-empty last dimension, got shape {tuple(phi.shape)}")
    t_t = torch.as_tensor(t, dtype=phi.dtype, device=phi.device)
    terms = _dual_terms(phi - t_t.unsqueeze(-1), dual, r)
    mean = terms.mean(-1) if weights is None else (terms * weights.to(phi)).sum(-1)
    const = -1.0 - (safe_kl_constant(r) if (normalized and r is not None) else 0.0)
    return t_t + mean + const


def safe_logsumexp(
    phi: Tensor, rho: float, *, weights: Tensor | None = None, normalized: bool = True
) -> tuple[Tensor, Tensor]:
    r"""The exact full-batch surrogate :math:`\tilde F_\rho(\varphi)` (or :math:`F_\rho`) over the last axis.

    Solves :math:`\min_t\{t + \sum_i p_i f^*_\rho(\varphi_i - t)\}` by safeguarded Newton on its optimality
    condition :math:`\sum_i p_i\sigma(\varphi_i - t + \ln\rho) = \rho` (increasing in :math:`-t`), bracketed
    by :math:`[\min\varphi, \max\varphi] + \ln(1-\rho)`, in float64, batched over the leading dimensions.

    Returns:
        ``(value, t_star)``, each of shape ``phi.shape[:-1]``; ``value`` is differentiable in ``phi`` (its
        gradient is the Safe-KL worst-case weights :math:`p_i\sigma(\varphi_i - t^* + \ln\rho)/\rho`).
    """
    phi = _check_tensor("phi", phi)
    rho = _check_rho(rho)
    if phi.dim() == 0 or phi.shape[-1] == 0:
        raise ValueError(f"phi: must have a non-empty last dimension, got shape {tuple(phi.shape)}")
    x = phi.detach().to(torch.float64)
    if not bool(torch.isfinite(x).all()):
        raise ValueError("phi: must be finite")
    p = (
        torch.full_like(x, 1.0 / x.shape[-1])
        if weights is None
        else torch.broadcast_to(weights.detach().to(x), x.shape)
    )
    lr, l1r = math.log(rho), math.log1p(-rho)
    lo = x.amin(-1) + l1r
    hi = x.amax(-1) + l1r
    t = 0.5 * (lo + hi)
    for _ in range(_NEWTON_ITERATIONS):
        sig = torch.sigmoid(x - t.unsqueeze(-1) + lr)
        g = (p * sig).sum(-1) - rho  # decreasing in t
        lo = torch.where(g > 0, t, lo)
        hi = torch.where(g > 0, hi, t)
        dg = (p * sig * (1.0 - sig)).sum(-1)  # = -dg/dt
        newton = t + g / dg.clamp_min(1e-300)
        ok = (newton > lo) & (newton < hi) & torch.isfinite(newton)
        t_next = torch.where(ok, newton, 0.5 * (lo + hi))
        done = bool((torch.abs(t_next - t) <= 1e-15 * (1.0 + torch.abs(t))).all())
        t = t_next
        if done:
            break
    t_star = t.to(phi.dtype)
    w = None if weights is None else weights.to(phi)
    value = safe_logsumexp_surrogate(phi, t_star, rho, weights=w, normalized=normalized)
    return value, t_star


class SafeKLDROLoss(nn.Module):
    r"""KL-DRO criteria by the Safe-KL (or exp) stochastic LogSumExp, a module holding its dual parameters.

    Modes (``lam`` is the KL penalty / temperature :math:`\lambda`; for ``"sinkhorn"`` it is the product
    :math:`\lambda\varepsilon` of the Sinkhorn-DRO paper):

    - ``"penalized"`` (A): :math:`\lambda[t + \overline{f^*_\rho(\ell/\lambda - t)} - 1 - F_\rho(0)]`, an
      unbiased estimate of a criterion whose minimum over :math:`t` is :math:`\lambda\tilde
      F_\rho(\ell/\lambda) \le \lambda\ln E e^{\ell/\lambda}`; ``forward(losses)`` with losses ``(..., B)``.
    - ``"constrained"`` (B): :math:`\lambda r + \lambda[\dots]` with :math:`\lambda = e^{a}` a parameter
      (initialised at ``lam``): minimising over :math:`(\theta, t, a)` gives the KL-ball worst case of
      radius ``radius`` (in its Safe-KL form).
    - ``"sinkhorn"`` (C): one :math:`t_i` per datum (``n_data`` of them);
      ``forward(losses, index)`` with losses ``(B, m)`` (``m`` kernel draws :math:`z\sim N(\xi_i,
      \sigma^2 I)` per datum ``index[b]``) gives :math:`\frac1B\sum_b\lambda[t_{i_b} +
      \overline{f^*_\rho(\ell_{b\cdot}/\lambda - t_{i_b})} - 1 - F_\rho(0)]`, unbiased with a single draw.

    ``t`` starts at the log-mean-exp of the first batch it sees (per datum for ``"sinkhorn"``) unless
    ``t_init`` is given; ``shape`` gives ``t`` leading dimensions for batched independent problems (losses
    ``(*shape, B)``). ``dual="exp"`` (with ``rho=None``) is the unbiased exponential dual baseline.
    """

    def __init__(
        self,
        rho: float | None = 1e-2,
        lam: float = 1.0,
        mode: str = "penalized",
        *,
        radius: float | None = None,
        n_data: int | None = None,
        dual: str = "safe_kl",
        shape: tuple[int, ...] = (),
        t_init: float | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.rho = _resolve(dual, rho)
        self.dual = dual
        self.lam = check_positive("lam", lam)
        self.mode = check_choice("mode", mode, MODES)
        if mode == "constrained":
            if radius is None:
                raise ValueError("radius: mode='constrained' needs a radius >= 0")
            self.radius: float | None = check_nonnegative("radius", radius)
        else:
            if radius is not None:
                raise ValueError(f"radius: only mode='constrained' takes a radius, got {radius!r}")
            self.radius = None
        if mode == "sinkhorn":
            if n_data is None:
                raise ValueError("n_data: mode='sinkhorn' needs the number of data points")
            n = check_int("n_data", n_data, minimum=1)
            t_shape: tuple[int, ...] = (n,)
        else:
            if n_data is not None:
                raise ValueError(f"n_data: only mode='sinkhorn' takes n_data, got {n_data!r}")
            if not isinstance(shape, tuple) or any(not isinstance(k, int) or k < 1 for k in shape):
                raise ValueError(f"shape: must be a tuple of positive ints, got {shape!r}")
            t_shape = shape
        dt = dtype or torch.get_default_dtype()
        init = 0.0 if t_init is None else float(t_init)
        self.t = nn.Parameter(torch.full(t_shape, init, dtype=dt))
        self.register_buffer("_initialised", torch.full(t_shape, t_init is not None, dtype=torch.bool))
        self.log_lam = (
            nn.Parameter(torch.full(t_shape, math.log(self.lam), dtype=dt)) if mode == "constrained" else None
        )
        self._const = -1.0 - (safe_kl_constant(self.rho) if self.rho is not None else 0.0)

    @property
    def current_lam(self) -> Tensor:
        """The multiplier :math:`\\lambda` in use (``exp(log_lam)`` for ``"constrained"``), detached."""
        if self.log_lam is not None:
            return self.log_lam.detach().exp()
        return torch.full_like(self.t.detach(), self.lam)

    def _criterion(self, losses: Tensor, t: Tensor, lam: Tensor | float) -> Tensor:
        lam_t = torch.as_tensor(lam, dtype=losses.dtype, device=losses.device)
        s = losses / lam_t.unsqueeze(-1) - t.unsqueeze(-1)
        terms = _dual_terms(s, self.dual, self.rho)
        return lam_t * (t + terms.mean(-1) + self._const)

    def forward(self, losses: Tensor, index: Tensor | None = None) -> Tensor:
        """The criterion on a batch of per-sample losses (see the class docstring for shapes)."""
        losses = _check_tensor("losses", losses)
        if self.mode == "sinkhorn":
            if (
                index is None
                or not isinstance(index, Tensor)
                or index.dtype not in (torch.int64, torch.int32)
            ):
                raise TypeError("index: mode='sinkhorn' needs an integer Tensor of data indices")
            if losses.dim() != 2 or losses.shape[0] != index.shape[0]:
                raise ValueError(f"losses: must be (B, m) with B = len(index), got {tuple(losses.shape)}")
            self._lazy_init(losses, index)
            t = self.t[index]
            return self._criterion(losses, t, self.lam).mean()
        if index is not None:
            raise ValueError("index: only mode='sinkhorn' takes an index")
        if losses.shape[:-1] != self.t.shape or losses.shape[-1] == 0:
            raise ValueError(
                f"losses: must have shape (*{tuple(self.t.shape)}, B), got {tuple(losses.shape)}"
            )
        self._lazy_init(losses, None)
        if self.mode == "penalized":
            return self._criterion(losses, self.t, self.lam)
        assert self.log_lam is not None and self.radius is not None
        lam = self.log_lam.exp()
        return lam * self.radius + self._criterion(losses, self.t, lam)

    @torch.no_grad()
    def _lazy_init(self, losses: Tensor, index: Tensor | None) -> None:
        lam = self.current_lam if index is None else torch.full_like(self.t[index], self.lam)
        if index is None:
            if bool(self._initialised.all()):
                return
            lme = torch.logsumexp(losses.detach() / lam.unsqueeze(-1), -1) - math.log(losses.shape[-1])
            self.t.copy_(lme.to(self.t))
            self._initialised.fill_(True)
            return
        fresh = ~self._initialised[index]
        if not bool(fresh.any()):
            return
        lme = torch.logsumexp(losses.detach() / lam.unsqueeze(-1), -1) - math.log(losses.shape[-1])
        idx = index[fresh]
        self.t[idx] = lme[fresh].to(self.t)
        self._initialised[idx] = True


# ------------------------------------------------------------------------------ MLMC LogSumExp estimator
def mlmc_level_probabilities(max_level: int) -> Tensor:
    r"""The law of the randomised level :math:`J` of :func:`mlmc_logsumexp`, as a float64 vector over
    :math:`0, \dots, J_{\max}`: :math:`P(J = j) = 2^{-j}` for :math:`1 \le j \le J_{\max}` and the rest,
    :math:`2^{-J_{\max}}`, on :math:`J = 0` (no correction)."""
    max_level = check_int("max_level", max_level, minimum=0, maximum=30)
    p = torch.tensor([2.0**-j for j in range(max_level + 1)], dtype=torch.float64)
    p[0] = 2.0**-max_level
    return p


def mlmc_draw_levels(
    shape: tuple[int, ...] | int, max_level: int, *, generator: torch.Generator | None = None
) -> Tensor:
    """Independent levels :math:`J` with the law of :func:`mlmc_level_probabilities` (int64, on the CPU)."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if any(not isinstance(k, int) or k < 0 for k in shape):
        raise ValueError(f"shape: must be non-negative ints, got {shape!r}")
    p = mlmc_level_probabilities(max_level)
    n = math.prod(shape)
    if n == 0:
        return torch.zeros(shape, dtype=torch.int64)
    return torch.multinomial(p, n, replacement=True, generator=generator).reshape(shape)


def mlmc_expected_cost(base: int, max_level: int) -> float:
    r"""Expected number of samples of one :func:`mlmc_logsumexp` draw: :math:`n_0(1 + J_{\max})`."""
    base = check_int("base", base, minimum=1)
    max_level = check_int("max_level", max_level, minimum=0, maximum=30)
    return float(base * (1 + max_level))


def mlmc_sample_sizes(levels: Tensor, base: int) -> Tensor:
    """Samples one draw uses at each level: ``base`` plus ``base * 2**J`` for ``J >= 1`` (``base`` at 0)."""
    base = check_int("base", base, minimum=1)
    pool = base * torch.pow(2, levels.to(torch.int64))
    return base + torch.where(levels > 0, pool, torch.zeros_like(pool))


def _masked_lme(x: Tensor, mask: Tensor) -> Tensor:
    count = mask.sum(-1).to(x.dtype)
    return torch.logsumexp(x.masked_fill(~mask, -math.inf), -1) - torch.log(count)


def mlmc_logsumexp(
    phi: Tensor, levels: Tensor | int, *, base: int, max_level: int, lam: float = 1.0
) -> Tensor:
    r"""Randomised multilevel Monte Carlo estimate of :math:`\lambda\ln E e^{\varphi/\lambda}` (batched).

    The Blanchet-Glynn (2015) estimator in the form Levy, Carmon, Duchi and Sidford (2020, "Large-scale
    methods for distributionally robust optimization") use for DRO gradients: with
    :math:`L_m(S) = \lambda\ln\frac1m\sum_{k\in S}e^{\varphi_k/\lambda}` the biased minibatch LogSumExp of
    :math:`m` i.i.d. samples,

    .. math:: \hat L = L_{n_0}(S_0) + \frac{\mathbf 1[J \ge 1]}{p_J}\Big(L_{2^J n_0}(S) - \tfrac12
       L_{2^{J-1} n_0}(S_{1}) - \tfrac12 L_{2^{J-1} n_0}(S_{2})\Big),\qquad p_J = 2^{-J},

    :math:`S_1, S_2` the two halves of :math:`S`, :math:`S_0` an independent base sample and :math:`J` drawn
    by :func:`mlmc_draw_levels`. By telescoping, :math:`E\hat L = E L_{n_0 2^{J_{\max}}}`: the bias of a
    minibatch of :math:`n_0 2^{J_{\max}}` samples at the expected cost :math:`n_0(1 + J_{\max})`
    (:func:`mlmc_expected_cost`); :math:`\nabla\hat L` (autograd through this function) is the MLMC
    gradient estimator, unbiased for :math:`\nabla E L_{n_0 2^{J_{\max}}}`. The antithetic difference keeps
    its variance bounded for smooth :math:`L`; it still grows with the spread of :math:`\varphi/\lambda`
    (the failure mode at small :math:`\lambda`).

    Args:
        phi: samples, shape ``(..., base + P)``: the first ``base`` entries are :math:`S_0`, the next
            ``base * 2**J`` (per leading index) are :math:`S`; later entries are ignored. ``P`` must be at
            least ``base * 2**max(levels)`` when some level is positive (``P = 0`` is fine otherwise).
        levels: :math:`J` per leading index (int tensor broadcastable to ``phi.shape[:-1]``, or an int), in
            ``[0, max_level]``.
        base: :math:`n_0 \ge 1`; max_level: :math:`J_{\max} \ge 0` (it fixes :math:`p_J` and the target).
        lam: the temperature :math:`\lambda > 0`.

    Returns:
        The estimates, shape ``phi.shape[:-1]``, differentiable in ``phi``.
    """
    phi = _check_tensor("phi", phi)
    base = check_int("base", base, minimum=1)
    max_level = check_int("max_level", max_level, minimum=0, maximum=30)
    lam = check_positive("lam", lam)
    if phi.dim() == 0 or phi.shape[-1] < base:
        raise ValueError(f"phi: needs a last dimension of at least base = {base}, got {tuple(phi.shape)}")
    lv = torch.as_tensor(levels, device=phi.device)
    if lv.is_floating_point() or lv.dtype == torch.bool:
        raise TypeError(f"levels: must be integers, got {lv.dtype}")
    lv = torch.broadcast_to(lv.to(torch.int64), phi.shape[:-1])
    if lv.numel() and (int(lv.min()) < 0 or int(lv.max()) > max_level):
        raise ValueError(f"levels: must lie in [0, max_level = {max_level}]")
    x = phi / lam
    est = _masked_lme(x[..., :base], torch.ones_like(x[..., :base], dtype=torch.bool))
    pool = x[..., base:]
    if lv.numel() == 0 or int(lv.max()) == 0:
        return lam * est
    need = base * 2 ** int(lv.max())
    if pool.shape[-1] < need:
        raise ValueError(f"phi: levels up to {int(lv.max())} need base + {need} samples per row")
    size = base * torch.pow(2, lv.clamp_min(1))  # level 0 rows: a dummy level 1, multiplied by 0
    k = torch.arange(pool.shape[-1], device=phi.device)
    full = k < size.unsqueeze(-1)
    first = k < (size // 2).unsqueeze(-1)
    delta = _masked_lme(pool, full) - 0.5 * (_masked_lme(pool, first) + _masked_lme(pool, full & ~first))
    weight = torch.where(lv > 0, torch.pow(2.0, lv.to(phi.dtype)), torch.zeros_like(lv, dtype=phi.dtype))
    return lam * (est + weight * delta)


# --------------------------------------------------------------------------------------- entropic OT dual
def _sq_euclid(x: Tensor, y: Tensor) -> Tensor:
    return ((x.unsqueeze(-2) - y.unsqueeze(-3)) ** 2).sum(-1)


class _MLP(nn.Module):
    def __init__(self, d: int, hidden: int, dtype: torch.dtype, device: Any, gen: torch.Generator) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(d, hidden), nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, 1)
        )
        with torch.no_grad():
            for p in self.net.parameters():
                p.copy_(
                    torch.randn(p.shape, generator=gen, dtype=torch.float64) / math.sqrt(max(1, p.shape[-1]))
                )
            self.net[-1].weight.zero_()
            self.net[-1].bias.zero_()
        self.to(dtype=dtype, device=device)

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x).squeeze(-1)


def _check_support(name: str, x: Any) -> Tensor:
    x = _check_tensor(name, x)
    if x.dim() != 2 or x.shape[0] == 0:
        raise ValueError(f"{name}: must be a (n, d) Tensor of support points, got shape {tuple(x.shape)}")
    if not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name}: must be finite")
    return x


def _check_mass(name: str, m: Tensor | None, n: int, like: Tensor) -> Tensor:
    if m is None:
        return torch.full((n,), 1.0 / n, dtype=like.dtype, device=like.device)
    m = _check_tensor(name, m)
    if m.shape != (n,) or bool((m <= 0).any()) or abs(float(m.sum()) - 1.0) > 1e-6:
        raise ValueError(f"{name}: must be {n} positive weights summing to 1")
    return m.to(like)


def entropic_dual_value(
    u: Tensor, v: Tensor, C: Tensor, eps: float, a: Tensor, b: Tensor, *, dual: str, rho: float | None
) -> tuple[Tensor, Tensor]:
    """The exact dual objective on finite supports and its relative gradient (the marginal error)."""
    s = (u.unsqueeze(-1) + v.unsqueeze(-2) - C) / eps
    ab = a.unsqueeze(-1) * b.unsqueeze(-2)
    if dual == "exp":
        # log-domain: E exp(s) = exp(logsumexp(s + log ab)); overflows to inf only if the value does
        lse = torch.logsumexp(s + torch.log(ab), dim=(-2, -1))
        expect = torch.exp(lse)
        dens = torch.exp(s + torch.log(ab) - lse) * expect  # pi_ij
        const = eps
    else:
        assert rho is not None
        expect = (ab * safe_kl_conjugate(s, rho)).sum((-2, -1))
        dens = ab * safe_kl_conjugate(s, rho, derivative=True)
        const = eps * (1.0 + safe_kl_constant(rho))
    value = (a * u).sum(-1) + (b * v).sum(-1) - eps * expect + const
    err_u = ((dens.sum(-1) - a).abs() / a).amax(-1)
    err_v = ((dens.sum(-2) - b).abs() / b).amax(-1)
    return value, torch.maximum(err_u, err_v)


def entropic_ot_dual_sgd(
    sample_mu: Tensor,
    sample_nu: Tensor,
    cost: Callable[[Tensor, Tensor], Tensor] | None = None,
    *,
    eps: float,
    a: Tensor | None = None,
    b: Tensor | None = None,
    dual: str = "safe_kl",
    rho: float | None = 1e-2,
    potentials: str = "vector",
    steps: int = 5000,
    batch_size: int | None = 256,
    lr: float = 0.1,
    optimizer: str = "sgd",
    hidden: int = 64,
    average: bool = True,
    seed: int = 0,
    tol: float | None = None,
    record_every: int = 100,
    time_limit_s: float | None = None,
) -> Result:
    r"""Stochastic ascent on the entropic-OT dual between two empirical measures, Safe-KL or exp form.

    Maximises
    :math:`E_\mu u + E_\nu v - \varepsilon E_{\mu\otimes\nu} f^*((u(x) + v(y) - c(x, y))/\varepsilon)
    + \varepsilon(1 + F_\rho(0))` with :math:`f^* = f^*_\rho` (``dual="safe_kl"``) or :math:`e^s`
    (``dual="exp"``, Genevay et al. 2016, the form POT's ``ot.stochastic.solve_dual_entropic`` optimises).
    Every step draws ``batch_size`` points from each measure (by ``a``, ``b``) and uses all
    ``batch_size**2`` pairs (an unbiased estimate, since the draws are independent).

    Args:
        sample_mu, sample_nu: support points ``(n, d)``, ``(m, d)``; the measures are
            :math:`\sum_i a_i\delta_{x_i}`, :math:`\sum_j b_j\delta_{y_j}` (a fine sample of a continuous
            law).
        cost: ``cost(x, y) -> (B, B')``; squared Euclidean if ``None``.
        eps: entropic regularisation > 0.
        a, b: the weights (uniform if ``None``).
        dual: ``"safe_kl"`` or ``"exp"``; rho: in (0, 1) for safe_kl, ``None`` for exp.
        potentials: ``"vector"`` (one value per support point) or ``"mlp"`` (two small SiLU networks).
        steps, batch_size, lr: SGD budget, minibatch size (``None``: every support point with its
            weight, the exact gradient, a deterministic run) and step size.
        optimizer: ``"sgd"`` or ``"adam"``.
        hidden: width of the MLPs.
        average: report the average of the vector potentials over the second half of the steps.
        seed: seeds the minibatches (and the MLP initialisation).
        tol: converged once the exact relative marginal error of the implied plan is at most ``tol``
            (checked at the recorded rows; ``None`` disables it).
        record_every: history rows every this many steps (exact dual value and marginal error).
        time_limit_s: solver time budget.

    Returns:
        A :class:`~optarium._core.Result`: ``x = (u, v)`` the potentials on the supports, ``value`` the exact
        dual value of the (averaged) potentials on the supports (the estimate of the OT value), ``status``
        ``diverged`` once a step produced a non-finite value (the exp dual's overflow). ``extras``:
        ``overflow_step`` (first non-finite step, or -1), ``marginal_error``, ``dual``, ``rho``. History:
        ``objective`` (exact dual value), ``marginal_error``, ``batch_objective`` (the last minibatch's
        estimate; ``inf`` at step 0, before any batch).
    """
    xs = _check_support("sample_mu", sample_mu)
    ys = _check_support("sample_nu", sample_nu)
    if xs.shape[1] != ys.shape[1] or xs.dtype != ys.dtype:
        raise ValueError("sample_nu: must have the dimension and dtype of sample_mu")
    if cost is not None and not callable(cost):
        raise TypeError(f"cost: must be callable or None, got {type(cost).__name__}")
    cost_fn = cost or _sq_euclid
    eps = check_positive("eps", eps)
    r = _resolve(dual, rho)
    check_choice("potentials", potentials, ("vector", "mlp"))
    steps = check_int("steps", steps, minimum=0)
    if batch_size is not None:
        batch_size = check_int("batch_size", batch_size, minimum=1)
    lr = check_positive("lr", lr)
    check_choice("optimizer", optimizer, ("sgd", "adam"))
    hidden = check_int("hidden", hidden, minimum=1)
    seed = check_int("seed", seed, minimum=0)
    if tol is not None:
        tol = check_positive("tol", tol)
    record_every = check_int("record_every", record_every, minimum=1)
    av = _check_mass("a", a, xs.shape[0], xs)
    bv = _check_mass("b", b, ys.shape[0], ys)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    C_full = cost_fn(xs, ys)
    dtype, device = xs.dtype, xs.device
    if potentials == "vector":
        u_p = nn.Parameter(torch.zeros(xs.shape[0], dtype=dtype, device=device))
        v_p = nn.Parameter(torch.zeros(ys.shape[0], dtype=dtype, device=device))
        params: list[Tensor] = [u_p, v_p]
        u_net = v_net = None
    else:
        u_net = _MLP(xs.shape[1], hidden, dtype, device, gen)
        v_net = _MLP(ys.shape[1], hidden, dtype, device, gen)
        params = [*u_net.parameters(), *v_net.parameters()]
    opt: torch.optim.Optimizer = (
        torch.optim.SGD(params, lr=lr) if optimizer == "sgd" else torch.optim.Adam(params, lr=lr)
    )
    const = eps * (1.0 + (safe_kl_constant(r) if r is not None else 0.0))
    sums = [
        torch.zeros(xs.shape[0], dtype=dtype, device=device),
        torch.zeros(ys.shape[0], dtype=dtype, device=device),
    ]
    n_avg = 0
    half = steps // 2
    state: dict[str, Any] = {"overflow": -1, "batch": math.inf}  # no batch before the first step

    def current() -> tuple[Tensor, Tensor]:
        with torch.no_grad():
            if potentials == "mlp":
                assert u_net is not None and v_net is not None
                return u_net(xs), v_net(ys)
            if average and n_avg > 0:
                return sums[0] / n_avg, sums[1] / n_avg
            return u_p.detach().clone(), v_p.detach().clone()

    def evaluate(k: int) -> dict[str, float]:
        u, v = current()
        val, err = entropic_dual_value(u, v, C_full, eps, av, bv, dual=dual, rho=r)
        return {"objective": float(val), "marginal_error": float(err), "batch_objective": state["batch"]}

    loop = SolverLoop(
        steps,
        tol=tol,
        criterion="marginal_error",
        record_every=record_every,
        time_limit_s=time_limit_s,
        blowup=None,
        watch=("objective", "marginal_error"),
    )
    for k in loop.iterate(evaluate):
        opt.zero_grad(set_to_none=True)
        if batch_size is None:  # the exact gradient: every support point with its weight
            ui, vj = (u_p, v_p) if u_net is None or v_net is None else (u_net(xs), v_net(ys))
            s = (ui.unsqueeze(-1) + vj.unsqueeze(-2) - C_full) / eps
            ab = av.unsqueeze(-1) * bv.unsqueeze(-2)
            obj = (av * ui).sum() + (bv * vj).sum() - eps * (ab * _dual_terms(s, dual, r)).sum() + const
        else:
            i = torch.multinomial(av.cpu(), batch_size, replacement=True, generator=gen).to(device)
            j = torch.multinomial(bv.cpu(), batch_size, replacement=True, generator=gen).to(device)
            if u_net is None or v_net is None:
                ui, vj = u_p[i], v_p[j]
            else:
                ui, vj = u_net(xs[i]), v_net(ys[j])
            s = (ui.unsqueeze(-1) + vj.unsqueeze(-2) - C_full[i][:, j]) / eps
            obj = ui.mean() + vj.mean() - eps * _dual_terms(s, dual, r).mean() + const
        state["batch"] = float(obj.detach())
        if not math.isfinite(state["batch"]):
            if state["overflow"] < 0:
                state["overflow"] = k
            loop.stop("diverged")
            continue
        (-obj).backward()
        opt.step()
        if potentials == "vector" and average and k > half:
            sums[0] += u_p.detach()
            sums[1] += v_p.detach()
            n_avg += 1
        if not all(bool(torch.isfinite(p.detach()).all()) for p in params):
            state["overflow"] = k
            loop.stop("diverged")
    u, v = current()
    val, err = entropic_dual_value(u, v, C_full, eps, av, bv, dual=dual, rho=r)
    value = float(val) if state["overflow"] < 0 else math.inf
    extras = {
        "overflow_step": int(state["overflow"]),
        "marginal_error": float(err),
        "dual": dual,
        "rho": r if r is not None else 0.0,
    }
    return loop.result((u, v), value=value, extras=extras)


# ------------------------------------------------------------------------------------- conformance cases
def _case_points(dtype: torch.dtype, device: Any) -> tuple[Tensor, Tensor]:
    g = torch.Generator().manual_seed(3)
    x = torch.randn(6, 2, generator=g, dtype=torch.float64)
    y = torch.randn(5, 2, generator=g, dtype=torch.float64) + 0.5
    return x.to(dtype=dtype, device=device), y.to(dtype=dtype, device=device)


def _case_solve(*, dtype: torch.dtype, device: Any, seed: int, **kw: Any) -> Result:
    x, y = _case_points(dtype, device)
    args: dict[str, Any] = {
        "eps": 0.5,
        "rho": 0.1,
        "steps": 2000,
        "batch_size": None,
        "lr": 2.0,
        "tol": 1e-5,
        "record_every": 10,
        "seed": seed,
        "average": False,
    }
    args.update(kw)
    return entropic_ot_dual_sgd(x, y, **args)


def _case_residual(res: Result) -> float:
    x, y = _case_points(torch.float64, "cpu")
    u, v = (t.detach().to(torch.float64).cpu() for t in res.x)
    a = torch.full((6,), 1 / 6, dtype=torch.float64)
    b = torch.full((5,), 1 / 5, dtype=torch.float64)
    _, err = entropic_dual_value(u, v, _sq_euclid(x, y), 0.5, a, b, dual="safe_kl", rho=0.1)
    return float(err)


def solver_cases() -> list[SolverCase]:
    """The case of :func:`entropic_ot_dual_sgd`: Safe-KL dual SGD between 6 and 5 points in 2-D."""
    return [
        SolverCase(
            name="dro-safe-kl-entropic-ot-dual-sgd",
            solve=_case_solve,
            statuses={
                "converged": {},
                "max_iter": {"steps": 3, "tol": None},
                "diverged": {"dual": "exp", "rho": None, "eps": 1e-3, "lr": 10.0, "tol": None},
                "timeout": {"time_limit_s": 0.0, "tol": None},
            },
            max_iter=3,
            tolerance_holds=lambda r: _case_residual(r) <= 1e-5,
            optimality=_case_residual,
            optimality_tol=1e-5,
            invalid=[
                ({"eps": 0.0}, "eps"),
                ({"rho": 1.0}, "rho"),
                ({"steps": -1}, "steps"),
                ({"dual": "kl"}, "dual"),
                ({"potentials": "rbf"}, "potentials"),
            ],
            determinism={"batch_size": 16, "steps": 20},
            stochastic=True,
        )
    ]
