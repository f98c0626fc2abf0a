"""Learning-rate schedules as multiplier functions for ``torch.optim.lr_scheduler.LambdaLR``.

- :func:`wsd_schedule`: warmup-stable-decay (linear warmup, constant, then linear decay to ``final``).
- :func:`cosine_schedule`: linear warmup, then cosine decay to ``final``.

Both take the step count the scheduler has seen (0 before the first ``step``) and return the factor that
multiplies the base learning rate.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from optarium._core.validation import check_in_range, check_int

__all__ = ["cosine_schedule", "wsd_schedule"]


def _warmup(step: int, warmup: int) -> float | None:
    if step < warmup:
        return (step + 1) / warmup
    return None


def wsd_schedule(
    total_steps: int, warmup_steps: int, decay_start: float = 0.8, final: float = 0.0
) -> Callable[[int], float]:
    """Warmup-stable-decay: ``(s+1)/warmup`` while warming up, 1 until ``decay_start * total_steps``, then a
    linear decay that reaches ``final`` at ``total_steps``."""
    total = check_int("total_steps", total_steps, minimum=1)
    warmup = check_int("warmup_steps", warmup_steps, minimum=0, maximum=total)
    start_frac = check_in_range("decay_start", decay_start, 0.0, 1.0)
    final = check_in_range("final", final, 0.0, 1.0)
    start = max(warmup, round(start_frac * total))

    def factor(step: int) -> float:
        w = _warmup(step, warmup)
        if w is not None:
            return w
        if step < start or total == start:
            return 1.0
        frac = min(1.0, (step - start) / (total - start))
        return 1.0 - (1.0 - final) * frac

    return factor


def cosine_schedule(total_steps: int, warmup_steps: int, final: float = 0.0) -> Callable[[int], float]:
    """Linear warmup, then ``final + (1 - final) * (1 + cos(pi * t)) / 2`` with t going from 0 to 1."""
    total = check_int("total_steps", total_steps, minimum=1)
    warmup = check_int("warmup_steps", warmup_steps, minimum=0, maximum=total)
    final = check_in_range("final", final, 0.0, 1.0)

    def factor(step: int) -> float:
        w = _warmup(step, warmup)
        if w is not None:
            return w
        if total == warmup:
            return 1.0
        t = min(1.0, (step - warmup) / (total - warmup))
        return final + (1.0 - final) * 0.5 * (1.0 + math.cos(math.pi * t))

    return factor
