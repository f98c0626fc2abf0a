"""Loss-conformance cases of :mod:`optarium.rl.gipo` (GIPO and its baselines), each with a reference written
independently from the formulas of the spec / the cited papers (token-mean over the valid entries)."""

from __future__ import annotations

import functools
import math

import torch

__all__ = ["gipo_cases"]

_STOP_GRADIENT = (
    "its weight is a stop-gradient by design (official code), so the autograd gradient is not the "
    "derivative of the loss value; tests/rl/test_gipo.py checks it against the hand-written gradient"
)


def _prep(logp: torch.Tensor, old: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor | None):
    m = torch.ones_like(logp) if mask is None else mask.to(logp)
    a = adv.detach().expand_as(logp)
    keep = m > 0
    lr = torch.where(keep, logp - old.detach(), torch.zeros_like(logp))
    return m, a, keep, lr


def _mean(obj: torch.Tensor, m: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    return torch.where(keep, obj, torch.zeros_like(obj)).sum() / m.sum()


def _gipo_ref(logp, old, adv, mask, sigma=1.0, sigma_neg=None, kernel="gaussian"):
    m, a, keep, lr = _prep(logp, old, adv, mask)
    x = lr.detach().clamp_min(math.log(1e-9))  # log of the floored ratio
    s_neg = sigma / 2 if sigma_neg is None else sigma_neg
    s = torch.where(a > 0, torch.full_like(x, sigma), torch.full_like(x, s_neg))
    w = {
        "gaussian": torch.exp(-((x / s) ** 2) / 2),
        "laplacian": torch.exp(-(x / s).abs()),
        "cauchy": 1 / (1 + (x / s) ** 2),
    }[kernel]
    return _mean(-w * torch.exp(lr) * a, m, keep)


def _is_ref(logp, old, adv, mask):
    m, a, keep, lr = _prep(logp, old, adv, mask)
    return _mean(-torch.exp(lr) * a, m, keep)


def _sapo_ref(logp, old, adv, mask, tau_pos=1.0, tau_neg=2.0):
    m, a, keep, lr = _prep(logp, old, adv, mask)
    r = torch.exp(lr).clamp(1e-6, 1e6)
    tau = torch.where(a > 0, torch.full_like(r, tau_pos), torch.full_like(r, tau_neg))
    return _mean(-(4 / tau) * a / (1 + torch.exp(-tau * (r - 1))), m, keep)


def _dual_ref(logp, old, adv, mask, eps=0.2, c=3.0):
    m, a, keep, lr = _prep(logp, old, adv, mask)
    r = torch.exp(lr)
    ppo = torch.minimum(r * a, torch.clamp(r, 1 - eps, 1 + eps) * a)
    obj = torch.where(a < 0, torch.maximum(ppo, c * a), ppo)
    return _mean(-obj, m, keep)


def _tis_ref(logp, old, adv, mask, rho_bar=1.0):
    m, a, keep, lr = _prep(logp, old, adv, mask)
    rho = torch.exp(lr).detach().clamp(max=rho_bar)
    return _mean(-rho * logp * a, m, keep)


def gipo_cases() -> list:  # list[LossCase]
    from optarium.rl.gipo import dual_clip_loss, gipo_loss, is_loss, soft_gate_loss, truncated_is_loss
    from optarium.testing.losses import LossCase

    p = functools.partial
    return [
        LossCase("gipo", gipo_loss, reference=_gipo_ref, exempt={"gradcheck": _STOP_GRADIENT}),
        LossCase(
            "gipo-laplacian-s0.5",
            p(gipo_loss, sigma=0.5, sigma_neg=0.4, kernel="laplacian"),
            reference=p(_gipo_ref, sigma=0.5, sigma_neg=0.4, kernel="laplacian"),
            exempt={"gradcheck": _STOP_GRADIENT},
        ),
        LossCase(
            "gipo-cauchy",
            p(gipo_loss, kernel="cauchy"),
            reference=p(_gipo_ref, kernel="cauchy"),
            exempt={"gradcheck": _STOP_GRADIENT},
        ),
        LossCase("no-clip", is_loss, reference=_is_ref),
        LossCase("sapo-gate", soft_gate_loss, reference=_sapo_ref),
        LossCase("dual-clip", dual_clip_loss, reference=_dual_ref),
        LossCase("truncated-is", truncated_is_loss, reference=_tis_ref, exempt={"gradcheck": _STOP_GRADIENT}),
    ]
