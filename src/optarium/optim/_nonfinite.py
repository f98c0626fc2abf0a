"""The optim family's one policy for NaN or infinite gradients.

Every optimizer of :mod:`optarium.optim` takes ``nonfinite="raise"`` (default) or ``nonfinite="skip"``:

- ``"raise"``: a step whose gradients contain NaN or inf raises :class:`NonFiniteGradientError` before any
  parameter or state is touched;
- ``"skip"``: such a step is skipped (parameters and state unchanged) and counted in the optimizer's
  ``skipped_steps`` attribute;
- ``"off"``: no check at all (no kernel, no device synchronisation, no ``torch.compile`` graph break from
  it); NaN or inf gradients flow into the update as they would in ``torch.optim``. For training loops
  that check the loss themselves, or run under a ``GradScaler``.

The check (``raise`` and ``skip``) is one fused pass over the gradients per device (the kernel
``torch.amp.GradScaler`` uses, with an inverse scale of exactly 1, so gradients are not changed) and one
device synchronisation per step, which raising before any parameter moves needs. Under a ``GradScaler``,
overflowing fp16 steps are already skipped by the scaler and never reach the optimizer's check.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from optarium._core.validation import check_choice

__all__ = [
    "NONFINITE_POLICIES",
    "NonFiniteGradientError",
    "check_nonfinite_policy",
    "grads_finite",
    "should_step",
]

NONFINITE_POLICIES: tuple[str, ...] = ("raise", "skip", "off")


class NonFiniteGradientError(FloatingPointError):
    """A gradient contained NaN or inf and the optimizer's policy is ``nonfinite="raise"``."""


def check_nonfinite_policy(value: str) -> str:
    """``value`` if it is a valid policy; ``ValueError`` naming ``nonfinite`` otherwise."""
    return check_choice("nonfinite", value, NONFINITE_POLICIES)


def grads_finite(grads: Sequence[torch.Tensor]) -> bool:
    """Whether every (dense) gradient is free of NaN and inf. One fused kernel per device, one sync."""
    by_device: dict[torch.device, list[torch.Tensor]] = {}
    for g in grads:
        # the fused kernel takes real floating tensors: a complex one is checked through its real view
        by_device.setdefault(g.device, []).append(torch.view_as_real(g) if g.is_complex() else g)
    flags = []
    for device, group in by_device.items():
        found = torch.zeros(1, dtype=torch.float32, device=device)
        one = torch.ones(1, dtype=torch.float32, device=device)
        torch._amp_foreach_non_finite_check_and_unscale_(group, found, one)
        flags.append(found)
    if not flags:
        return True
    return not bool(torch.stack([f.to(flags[0].device) for f in flags]).any())


def should_step(name: str, grads: Sequence[torch.Tensor], policy: str) -> bool:
    """True if the step may go ahead; False to skip it (policy ``skip``); raises under policy ``raise``.

    Policy ``off`` returns True at once without looking at the gradients.
    """
    if policy == "off" or grads_finite(grads):
        return True
    if policy == "raise":
        raise NonFiniteGradientError(
            f"{name}: a gradient contains NaN or inf; pass nonfinite='skip' to skip such steps"
        )
    return False
