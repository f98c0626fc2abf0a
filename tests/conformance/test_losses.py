"""Surrogate losses pass the loss contract (optarium.testing.losses), and each check catches a broken one."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import pytest
import torch

from optarium.rl import SurrogateLoss, ppo_clip_loss
from optarium.rl.losses import aggregate, check_batch
from optarium.testing.losses import CHECKS, LossCase, loss_cases

CASES = loss_cases()


@pytest.mark.parametrize("check", list(CHECKS), ids=str)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_conformance(case: LossCase, check: str) -> None:
    if check in case.exempt:
        pytest.skip(f"{case.name} is exempt from {check}: {case.exempt[check]}")
    CHECKS[check](case)


def test_ppo_clips_and_reports() -> None:
    assert isinstance(ppo_clip_loss, SurrogateLoss)
    old = torch.zeros(4, dtype=torch.float64)
    logp = torch.log(torch.tensor([1.5, 0.5, 1.1, 0.95], dtype=torch.float64)).requires_grad_(True)
    adv = torch.tensor([1.0, -1.0, 1.0, -1.0], dtype=torch.float64)
    loss, diag = ppo_clip_loss(logp, old, adv)
    # ratios 1.5 (A > 0: clipped at 1.2), 0.5 (A < 0: clipped at 0.8), 1.1 and 0.95 inside the trust region
    assert float(loss.detach()) == pytest.approx(-(1.2 - 0.8 + 1.1 - 0.95) / 4)
    (g,) = torch.autograd.grad(loss, logp)
    assert g.tolist() == pytest.approx([0.0, 0.0, -1.1 / 4, 0.95 / 4])  # clipped entries get no gradient
    assert float(diag["clip_fraction"]) == 0.5
    with pytest.raises(ValueError, match=r"^clip_eps"):
        ppo_clip_loss(logp, old, adv, clip_eps=0.0)
    with pytest.raises(ValueError, match=r"^mode"):
        ppo_clip_loss(logp, old, adv, aggregation="sum")


# ------------------------------------------------------------------------------------ the checks can fail


def _ppo_like(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    fault: str = "",
) -> tuple[torch.Tensor, Mapping[str, Any]]:
    """The unclipped importance-weighted surrogate with one fault."""
    if fault == "no_validation":
        m = torch.ones_like(logp) if mask is None else mask
        return -(torch.exp(logp - old_logp) * advantages * m).sum() / m.sum(), {}
    lp, old, adv, m = check_batch(logp, old_logp, advantages, mask)
    if fault == "not_detached":
        old, adv = old_logp, advantages.expand_as(logp)
    if fault == "ignores_mask":
        m = torch.ones_like(m)
    log_ratio = torch.where(m > 0, lp - old, torch.zeros_like(lp))
    ratio = log_ratio.exp()
    if fault == "wrong_backward":
        ratio = ratio + (ratio.clamp(0.9, 1.1) - ratio).detach()  # clipped forward, unclipped backward
    per = ratio * adv if fault == "maximises" else -ratio * adv
    loss = aggregate(per, m)
    if fault == "no_grad":
        loss = loss.detach()
    diag = {"ratio_mean": (ratio * m).sum() / m.sum()}  # carries the graph
    if fault != "graph_in_diagnostics":
        diag = {k: v.detach() for k, v in diag.items()}
    return loss, diag


@pytest.mark.parametrize(
    ("fault", "check", "message"),
    [
        ("no_grad", "returns", "does not depend on logp"),
        ("graph_in_diagnostics", "returns", "carries a graph"),
        ("not_detached", "constants", "gradient flows into"),
        ("ignores_mask", "mask", "masked entries"),
        ("maximises", "on_policy", "not positive"),
        ("wrong_backward", "gradcheck", "gradcheck failed"),
        ("", "reference", "vs"),  # the unclipped surrogate is not PPO's clipped one
        ("no_validation", "bad_input", "bad old_logp"),
    ],
)
def test_each_check_catches_a_broken_loss(fault: str, check: str, message: str) -> None:
    from optarium.testing.losses import _ppo_reference

    case = LossCase(f"broken-{fault}", functools.partial(_ppo_like, fault=fault), reference=_ppo_reference)
    with pytest.raises(AssertionError, match=message):
        CHECKS[check](case)
