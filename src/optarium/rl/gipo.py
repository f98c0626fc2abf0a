r"""GIPO: Gaussian importance-sampling policy optimization, with the clipping baselines it is compared to.

Paper: C. Lu, Z. Zhang, S. Wang, Q. Lin, B. Sun, Y. Liu, "GIPO: Gaussian Importance Sampling Policy
Optimization", ICML 2026, arXiv:2603.03955. The loss follows the official code (github.com/distanceLu/GIPO,
``metaworld_ppo_discrete_simple_complete.py``, read only); the paper text was not available here.

With the ratio :math:`r = \pi_\theta(a|s)/\pi_{old}(a|s)` and advantage :math:`\hat A`, per sample

.. math::

    w(r) = \exp\!\big(-\tfrac12 (\log \mathrm{sg}(r) / \sigma)^2\big), \qquad
    \ell_{GIPO} = -\, w(r)\, r\, \hat A ,

so :math:`\nabla \ell = -w\, r\, \hat A\, \nabla\log\pi_\theta`: the Gaussian *trust weight* is computed from
the detached ratio (floored at ``1e-9`` before the log, as in the code) and only scales the ordinary
importance-weighted policy gradient. The width is asymmetric (code): :math:`\sigma_+` for :math:`\hat A > 0`,
:math:`\sigma_-` (default :math:`\sigma_+/2`) for :math:`\hat A \le 0`. The effective factor
:math:`w r = \exp(x - x^2/(2\sigma^2))` (:math:`x = \log r`) peaks at :math:`x = \sigma^2` and decays like a
Gaussian beyond: a soft trust region that never gives an exactly zero gradient (in float64 the weight
underflows to 0 only for :math:`|\log r| \gtrsim 38\sigma`). The code's ablation kernels are available:
Laplacian :math:`e^{-|x|/\sigma}` and Cauchy :math:`1/(1 + (x/\sigma)^2)`.

Baselines, all with the contract signature of :mod:`optarium.rl.losses` so an experiment swaps only the loss:

- :func:`optarium.rl.ppo.ppo_clip_loss` (PPO-clip, :math:`\epsilon = 0.2`);
- :func:`is_loss` (No-Clip, plain importance sampling :math:`-r\hat A`);
- :func:`soft_gate_loss` (SAPO, the sigmoid gate of the GIPO script:
  :math:`-\sigma(\tau(r-1))\,(4/\tau)\,\hat A`,
  :math:`\tau_+ = 1`, :math:`\tau_- = 2`, ratio clamped to :math:`[10^{-6}, 10^6]`);
- :func:`dual_clip_loss` (dual-clip PPO, Ye et al. 2020: for :math:`\hat A < 0` the clipped objective is
  bounded below by :math:`c\hat A`, :math:`c = 3`);
- :func:`truncated_is_loss` (truncated IS, V-trace style, Espeholt et al. 2018:
  :math:`-\min(\mathrm{sg}(r), \bar\rho)\,\log\pi_\theta\,\hat A`, :math:`\bar\rho = 1`).

Every loss returns ``zero_grad_frac`` (share of valid samples whose gradient is exactly zero: the
*utilisation* is one minus it), ``mean_abs_log_ratio`` and, where meaningful, ``mean_w``.

Deviations: the per-dimension "token" averaging of the code's multi-dimensional discrete actions is the
contract's ``(B, T)`` aggregation; the code's training loop (replay buffer, critic, KL term, AdamW) is not
part of the loss (the experiment's analytic study needs only the estimator).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch

from optarium._core.validation import check_choice, check_positive
from optarium.rl.losses import aggregate, check_batch

__all__ = [
    "KERNELS",
    "dual_clip_loss",
    "gipo_loss",
    "is_loss",
    "soft_gate_loss",
    "truncated_is_loss",
    "trust_weight",
]

#: Trust-weight kernels of the code: Gaussian (the method), Laplacian and Cauchy (ablations).
KERNELS: tuple[str, ...] = ("gaussian", "laplacian", "cauchy")

#: The code's floor on the ratio before its logarithm.
RATIO_FLOOR = 1e-9


def trust_weight(
    log_ratio: torch.Tensor, sigma: float | torch.Tensor = 1.0, kernel: str = "gaussian"
) -> torch.Tensor:
    r"""The trust weight :math:`w` of a (detached) log-ratio: 1 at 0, symmetric, decreasing in :math:`|x|`.

    Args:
        log_ratio: :math:`x = \log r` (any shape; it is detached).
        sigma: width :math:`\sigma > 0`, a float or a tensor broadcastable to ``log_ratio``.
        kernel: one of :data:`KERNELS`.

    >>> float(trust_weight(torch.tensor(0.0)))
    1.0
    """
    if not isinstance(log_ratio, torch.Tensor):
        raise TypeError(f"log_ratio: must be a tensor, got {type(log_ratio).__name__}")
    check_choice("kernel", kernel, KERNELS)
    if isinstance(sigma, torch.Tensor):
        if not bool((sigma > 0).all()):
            raise ValueError("sigma: must be > 0")
        s = sigma.detach().to(log_ratio)
    else:
        s = check_positive("sigma", sigma)
    z = log_ratio.detach() / s
    if kernel == "gaussian":
        return torch.exp(-0.5 * z * z)
    if kernel == "laplacian":
        return torch.exp(-z.abs())
    return 1.0 / (1.0 + z * z)


def _diagnostics(
    ratio: torch.Tensor,
    log_ratio: torch.Tensor,
    gfactor: torch.Tensor,
    m: torch.Tensor,
    **extra: torch.Tensor,
) -> dict[str, torch.Tensor]:
    """Shared diagnostics; ``gfactor`` multiplies :math:`\\nabla\\log\\pi` per sample (0: no gradient)."""
    with torch.no_grad():
        n = m.sum().clamp_min(1.0)
        out = {
            "zero_grad_frac": (((gfactor == 0) & (m > 0)).to(m) * m).sum() / n,
            "mean_abs_log_ratio": (log_ratio.abs() * m).sum() / n,
            "ratio_mean": (ratio * m).sum() / n,
        }
        out.update({k: (v.detach() * m).sum() / n for k, v in extra.items()})
    return out


def _ratio(logp: torch.Tensor, old: torch.Tensor, m: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    log_ratio = torch.where(m > 0, logp - old, torch.zeros_like(logp))
    return log_ratio, log_ratio.exp()


def gipo_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    sigma: float = 1.0,
    sigma_neg: float | None = None,
    kernel: str = "gaussian",
    aggregation: str = "token-mean",
) -> tuple[torch.Tensor, Mapping[str, torch.Tensor]]:
    """GIPO's loss :math:`-\\mathrm{mean}[w(\\mathrm{sg}\\,r)\\, r\\, \\hat A]` and diagnostics
    (see the module docstring).

    Args:
        logp, old_logp, advantages, mask: the batch (:mod:`optarium.rl.losses`).
        sigma: :math:`\\sigma_+ > 0`, the width for :math:`\\hat A > 0` (code default 1.0).
        sigma_neg: :math:`\\sigma_- > 0` for :math:`\\hat A \\le 0`; ``None`` means ``0.5 * sigma`` (code).
        kernel: one of :data:`KERNELS`.
        aggregation: one of :data:`optarium.rl.losses.AGGREGATIONS`.
    """
    logp, old, adv, m = check_batch(logp, old_logp, advantages, mask)
    sigma = check_positive("sigma", sigma)
    sigma_neg = 0.5 * sigma if sigma_neg is None else check_positive("sigma_neg", sigma_neg)
    check_choice("kernel", kernel, KERNELS)
    log_ratio, ratio = _ratio(logp, old, m)
    # the code floors the detached ratio at 1e-9 before the log
    x = torch.log(ratio.detach().clamp_min(RATIO_FLOOR))
    s = torch.where(adv > 0, torch.full_like(x, sigma), torch.full_like(x, sigma_neg))
    w = trust_weight(x, s, kernel)
    loss = aggregate(-w * ratio * adv, m, aggregation)
    return loss, _diagnostics(ratio, log_ratio, w * ratio * adv, m, mean_w=w)


def is_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    aggregation: str = "token-mean",
) -> tuple[torch.Tensor, Mapping[str, torch.Tensor]]:
    """No-Clip: plain importance sampling, :math:`-\\mathrm{mean}[r \\hat A]`."""
    logp, old, adv, m = check_batch(logp, old_logp, advantages, mask)
    log_ratio, ratio = _ratio(logp, old, m)
    loss = aggregate(-ratio * adv, m, aggregation)
    return loss, _diagnostics(ratio, log_ratio, ratio * adv, m)


def soft_gate_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    tau_pos: float = 1.0,
    tau_neg: float = 2.0,
    aggregation: str = "token-mean",
) -> tuple[torch.Tensor, Mapping[str, torch.Tensor]]:
    """SAPO's sigmoid gate (as in the GIPO script):
    :math:`-\\mathrm{mean}[\\sigma(\\tau(r - 1))\\,(4/\\tau)\\,\\hat A]`,
    :math:`\\tau = \\tau_+` for :math:`\\hat A > 0` else :math:`\\tau_-`, ratio clamped to [1e-6, 1e6].

    The gate's gradient is :math:`4\\,s(1-s)\\, r\\, \\hat A\\, \\nabla\\log\\pi` (:math:`s` the sigmoid),
    equal to
    the policy gradient at :math:`r = 1`.
    """
    logp, old, adv, m = check_batch(logp, old_logp, advantages, mask)
    tau_pos = check_positive("tau_pos", tau_pos)
    tau_neg = check_positive("tau_neg", tau_neg)
    log_ratio, ratio = _ratio(logp, old, m)
    r = ratio.clamp(1e-6, 1e6)
    tau = torch.where(adv > 0, torch.full_like(r, tau_pos), torch.full_like(r, tau_neg))
    gate = torch.sigmoid(tau * (r - 1.0)) * (4.0 / tau)
    loss = aggregate(-gate * adv, m, aggregation)
    with torch.no_grad():
        sg = torch.sigmoid(tau * (r - 1.0))
        inside = (ratio >= 1e-6) & (ratio <= 1e6)
        gfac = torch.where(inside, 4.0 * sg * (1.0 - sg) * r * adv, torch.zeros_like(r))
    return loss, _diagnostics(ratio, log_ratio, gfac, m)


def dual_clip_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    clip_eps: float = 0.2,
    dual_clip: float = 3.0,
    aggregation: str = "token-mean",
) -> tuple[torch.Tensor, Mapping[str, torch.Tensor]]:
    """Dual-clip PPO (Ye et al. 2020, arXiv:1912.09729): PPO's clipped objective, and for :math:`\\hat A < 0`
    additionally :math:`\\max(\\cdot, c \\hat A)` with :math:`c > 1`."""
    logp, old, adv, m = check_batch(logp, old_logp, advantages, mask)
    clip_eps = check_positive("clip_eps", clip_eps)
    dual_clip = check_positive("dual_clip", dual_clip)
    if dual_clip <= 1.0:
        raise ValueError(f"dual_clip: must be > 1, got {dual_clip}")
    log_ratio, ratio = _ratio(logp, old, m)
    obj = torch.minimum(ratio * adv, ratio.clamp(1.0 - clip_eps, 1.0 + clip_eps) * adv)
    obj = torch.where(adv < 0, torch.maximum(obj, dual_clip * adv), obj)
    loss = aggregate(-obj, m, aggregation)
    with torch.no_grad():
        active = torch.where(
            adv >= 0,
            ratio <= 1.0 + clip_eps,
            (ratio >= 1.0 - clip_eps) & (ratio <= dual_clip),
        )
        gfac = torch.where(active, ratio * adv, torch.zeros_like(ratio))
    return loss, _diagnostics(ratio, log_ratio, gfac, m)


def truncated_is_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    rho_bar: float = 1.0,
    aggregation: str = "token-mean",
) -> tuple[torch.Tensor, Mapping[str, torch.Tensor]]:
    """Truncated importance sampling (V-trace's policy term, Espeholt et al. 2018):
    :math:`-\\mathrm{mean}[\\min(\\mathrm{sg}\\,r, \\bar\\rho)\\, \\log\\pi_\\theta\\, \\hat A]`."""
    logp, old, adv, m = check_batch(logp, old_logp, advantages, mask)
    rho_bar = check_positive("rho_bar", rho_bar)
    log_ratio, ratio = _ratio(logp, old, m)
    rho = ratio.detach().clamp_max(rho_bar)
    lp = torch.where(m > 0, logp, torch.zeros_like(logp))
    loss = aggregate(-rho * lp * adv, m, aggregation)
    return loss, _diagnostics(ratio, log_ratio, rho * adv, m)


def gaussian_peak(sigma: float) -> float:
    """The largest effective IS factor :math:`\\max_x e^{x - x^2/(2\\sigma^2)} = e^{\\sigma^2/2}`
    (at :math:`x = \\sigma^2`)."""
    return math.exp(0.5 * check_positive("sigma", sigma) ** 2)
