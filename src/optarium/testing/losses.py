r"""The surrogate-loss conformance checks: the contract of :mod:`optarium.rl.losses` on random batches.

A loss joins with a :class:`LossCase` (the loss with its hyperparameters bound, optionally a reference
definition); the checks (:data:`CHECKS`):

- ``returns``: a 0-d finite loss that depends on ``logp`` and a dict of 0-d finite, detached diagnostics, in
  the input's dtype (float32, float64) and device (CPU, CUDA when available), for ``(B, T)`` and ``(N,)``
  batches and per-sequence ``(B, 1)`` advantages;
- ``constants``: no gradient flows into ``old_logp`` or ``advantages``;
- ``mask``: entries with mask 0 change neither the loss nor the gradient (even when they hold garbage), and
  their gradient is 0;
- ``on_policy``: at ``logp == old_logp`` the gradient is the policy gradient, :math:`-w_i \hat A_i` with
  weights :math:`w_i > 0` on the valid entries (summing to 1 for the averaging aggregations): raising the
  probability of an action with positive advantage lowers the loss;
- ``gradcheck``: ``torch.autograd.gradcheck`` in float64 at random off-policy points;
- ``reference``: equal to the case's reference definition (a maintained library's, or the paper's formula
  written independently), when one is given;
- ``bad_input``: mismatched shapes and non-tensors raise ``ValueError``/``TypeError`` naming the argument.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = [
    "CHECKS",
    "LossCase",
    "check_bad_input",
    "check_constants",
    "check_gradcheck",
    "check_mask",
    "check_on_policy",
    "check_reference",
    "check_returns",
    "loss_cases",
    "random_batch",
]

Loss = Callable[..., tuple[torch.Tensor, Mapping[str, Any]]]


@dataclass(frozen=True)
class LossCase:
    """One surrogate loss for the checks.

    Attributes:
        name: an id for the test report.
        loss: ``loss(logp, old_logp, advantages, mask) -> (loss, diagnostics)`` with hyperparameters bound.
        reference: an independent definition with the same signature returning the loss only, or ``None``.
        weights_sum_to_one: whether the on-policy gradient weights form an average (the mean aggregations).
        exempt: check name -> why this loss is exempt.
    """

    name: str
    loss: Loss
    reference: Callable[..., torch.Tensor] | None = None
    weights_sum_to_one: bool = True
    exempt: Mapping[str, str] = field(default_factory=dict)


def _ppo_reference(
    logp: torch.Tensor,
    old: torch.Tensor,
    adv: torch.Tensor,
    mask: torch.Tensor | None,
    eps: float = 0.2,
    seq_mean: bool = False,
) -> torch.Tensor:
    """PPO's clipped objective written out (Schulman et al. 2017, eq. 7), negated and averaged: over all
    valid tokens, or (``seq_mean``) over each row's valid tokens and then over rows."""
    m = torch.ones_like(logp) if mask is None else mask.to(logp)
    r = torch.exp(logp - old.detach())
    a = adv.detach().expand_as(logp)
    obj = -torch.minimum(r * a, torch.clamp(r, 1 - eps, 1 + eps) * a) * m
    if seq_mean:
        return (obj.sum(-1) / m.sum(-1)).mean()
    return obj.sum() / m.sum()


def loss_cases() -> list[LossCase]:
    """The cases of optarium's surrogate losses (the reference: PPO's clipped surrogate, two settings)."""
    from optarium.rl.ppo import ppo_clip_loss
    from optarium.testing._gipo_cases import gipo_cases as _gipo_cases
    from optarium.testing._segment_po_cases import segment_po_cases as _segment_po_cases

    return [
        LossCase("ppo-clip", ppo_clip_loss, reference=_ppo_reference),
        LossCase(
            "ppo-clip-eps0.1-seqmean",
            functools.partial(ppo_clip_loss, clip_eps=0.1, aggregation="seq-mean-token-mean"),
            reference=functools.partial(_ppo_reference, eps=0.1, seq_mean=True),
        ),
        *_gipo_cases(),
        *_segment_po_cases(),
    ]


def random_batch(
    shape: tuple[int, ...] = (4, 7),
    *,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
    device: str = "cpu",
    spread: float = 0.3,
    per_sequence: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(logp, old_logp, advantages, mask)``: log-probs in (-3, -0.05), old ones ``spread`` apart, normal
    advantages (``(B, 1)`` with ``per_sequence``), and a mask with a padded tail in each row (2-d)."""
    gen = torch.Generator().manual_seed(seed)
    old = -0.05 - 2.95 * torch.rand(shape, generator=gen, dtype=torch.float64)
    logp = old + spread * torch.randn(shape, generator=gen, dtype=torch.float64)
    adv_shape = (shape[0], 1) if per_sequence and len(shape) == 2 else shape
    adv = torch.randn(adv_shape, generator=gen, dtype=torch.float64)
    mask = torch.ones(shape, dtype=torch.float64)
    if len(shape) == 2:
        lengths = torch.randint(2, shape[1] + 1, (shape[0],), generator=gen)
        mask = (torch.arange(shape[1]).unsqueeze(0) < lengths.unsqueeze(1)).to(torch.float64)
    return tuple(t.to(device=device, dtype=dtype) for t in (logp, old, adv, mask))  # type: ignore[return-value]


def _grad(case: LossCase, logp: torch.Tensor, *rest: Any) -> tuple[torch.Tensor, torch.Tensor]:
    lp = logp.detach().clone().requires_grad_(True)
    loss, _ = case.loss(lp, *rest)
    (g,) = torch.autograd.grad(loss, lp, allow_unused=True)
    return loss.detach(), torch.zeros_like(lp) if g is None else g


# ------------------------------------------------------------------------------------------------ checks


def check_returns(case: LossCase) -> None:
    """A finite 0-d loss depending on logp; finite, detached 0-d diagnostics; dtype and device follow."""
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for dtype in (torch.float32, torch.float64):
        for device in devices:
            for shape, per_seq in (((4, 7), False), ((4, 7), True), ((9,), False)):
                lp, old, adv, mask = random_batch(shape, dtype=dtype, device=device, per_sequence=per_seq)
                lp.requires_grad_(True)
                loss, diag = case.loss(lp, old, adv, mask if len(shape) == 2 else None)
                where = f"{case.name} ({dtype}, {device}, {shape})"
                assert isinstance(loss, torch.Tensor) and loss.ndim == 0, f"{where}: the loss is not 0-d"
                assert loss.dtype == dtype and loss.device.type == device, f"{where}: loss is {loss.dtype}"
                assert bool(torch.isfinite(loss)), f"{where}: the loss is {float(loss)}"
                assert loss.requires_grad, f"{where}: the loss does not depend on logp"
                assert isinstance(diag, Mapping), f"{where}: diagnostics are {type(diag).__name__}"
                for k, v in diag.items():
                    val = v if isinstance(v, torch.Tensor) else torch.tensor(float(v))
                    assert val.ndim == 0 and bool(torch.isfinite(val)), f"{where}: diagnostic {k!r} = {v}"
                    assert not val.requires_grad, f"{where}: diagnostic {k!r} carries a graph (detach it)"


def check_constants(case: LossCase) -> None:
    """No gradient flows into ``old_logp`` or ``advantages``."""
    lp, old, adv, mask = random_batch()
    lp.requires_grad_(True)
    old.requires_grad_(True)
    adv.requires_grad_(True)
    loss, _ = case.loss(lp, old, adv, mask)
    g_old, g_adv = torch.autograd.grad(loss, (old, adv), allow_unused=True)
    for name, g in (("old_logp", g_old), ("advantages", g_adv)):
        assert g is None or float(g.abs().max()) == 0.0, (
            f"{case.name}: gradient flows into {name} (detach it)"
        )


def check_mask(case: LossCase) -> None:
    """Masked entries change neither the loss nor the gradient, and get zero gradient."""
    lp, old, adv, mask = random_batch(seed=1)
    loss, g = _grad(case, lp, old, adv, mask)
    pad = mask == 0
    assert bool(pad.any()), "the batch has no padding"
    junk = [t.clone() for t in (lp, old, adv)]
    for t in junk:
        n = int(pad.sum())
        t[pad] = 1e6 * (1 - 2 * (torch.arange(n) % 2)).to(t)  # garbage of both signs
    loss2, g2 = _grad(case, junk[0], junk[1], junk[2], mask)
    assert float(g[pad].abs().max()) == 0.0, f"{case.name}: masked entries get a gradient"
    assert torch.allclose(loss, loss2, rtol=1e-12, atol=1e-12), f"{case.name}: masked entries change the loss"
    assert torch.allclose(g, g2, rtol=1e-12, atol=1e-12), f"{case.name}: masked entries change the gradient"


def check_on_policy(case: LossCase) -> None:
    """At ``logp == old_logp`` the gradient is :math:`-w \\hat A` with positive weights on valid entries."""
    for per_seq in (False, True):
        _, old, adv, mask = random_batch(seed=2, per_sequence=per_seq)
        _, g = _grad(case, old, old, adv, mask)
        a = adv.expand_as(old)
        valid = (mask > 0) & (a.abs() > 1e-3)
        w = -g[valid] / a[valid]
        assert bool((w > 0).all()), (
            f"{case.name}: on-policy gradient weights {w[w <= 0][:3].tolist()} are not positive (sign of the "
            "loss, or advantages ignored)"
        )
        if case.weights_sum_to_one:
            total = float((-g[mask > 0] / a[mask > 0]).sum())
            assert math.isclose(total, 1.0, rel_tol=1e-9), f"{case.name}: on-policy weights sum to {total}"


def check_gradcheck(case: LossCase) -> None:
    """``torch.autograd.gradcheck`` in float64 at random off-policy points."""
    lp, old, adv, mask = random_batch((3, 5), seed=3)
    lp.requires_grad_(True)
    try:
        torch.autograd.gradcheck(lambda x: case.loss(x, old, adv, mask)[0], (lp,), eps=1e-6, atol=1e-7)
    except Exception as exc:  # torch's GradcheckError, or an error inside the loss
        raise AssertionError(f"{case.name}: gradcheck failed: {exc}") from exc


def check_reference(case: LossCase) -> None:
    """The loss equals the case's reference definition on random batches (and so does its gradient)."""
    assert case.reference is not None, f"{case.name}: no reference definition"
    for seed in range(3):
        lp, old, adv, mask = random_batch(seed=10 + seed, spread=0.5)
        loss, g = _grad(case, lp, old, adv, mask)
        x = lp.detach().clone().requires_grad_(True)
        ref = case.reference(x, old, adv, mask)
        (g_ref,) = torch.autograd.grad(ref, x)
        assert torch.allclose(loss, ref.detach(), rtol=1e-12, atol=1e-14), f"{case.name}: {loss} vs {ref}"
        assert torch.allclose(g, g_ref, rtol=1e-10, atol=1e-14), f"{case.name}: the gradient differs"


def check_bad_input(case: LossCase) -> None:
    """Mismatched shapes and non-tensors raise ``ValueError``/``TypeError`` naming the argument."""
    lp, old, adv, mask = random_batch()
    bad: list[tuple[tuple[Any, ...], str]] = [
        ((lp, old[:, :-1], adv, mask), "old_logp"),
        ((lp, old, adv[:, :3], mask), "advantages"),
        ((lp, old, adv, mask[:2]), "mask"),
        ((lp.tolist(), old, adv, mask), "logp"),
    ]
    for args, name in bad:
        try:
            case.loss(*args)
        except (ValueError, TypeError) as exc:
            assert re.match(rf"{name}\b", str(exc)), f"{case.name}: {exc!r} does not name {name}"
        except Exception as exc:
            raise AssertionError(
                f"{case.name}: a bad {name} raised {type(exc).__name__}, not a ValueError/TypeError naming it"
            ) from exc
        else:
            raise AssertionError(f"{case.name}: a bad {name} was accepted")


#: Check name -> check function.
CHECKS: Mapping[str, Callable[[LossCase], None]] = {
    "returns": check_returns,
    "constants": check_constants,
    "mask": check_mask,
    "on_policy": check_on_policy,
    "gradcheck": check_gradcheck,
    "reference": check_reference,
    "bad_input": check_bad_input,
}
