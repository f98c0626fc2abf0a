"""Optimizers: ``torch.optim.Optimizer`` subclasses and optimizer wrappers, one module per method."""

from optarium.optim._nonfinite import NONFINITE_POLICIES, NonFiniteGradientError
from optarium.optim.functional import foreach_sign_power, sign_power
from optarium.optim.gradpower import AdamWPower, GradPower
from optarium.optim.schedules import cosine_schedule, wsd_schedule

__all__ = [
    "NONFINITE_POLICIES",
    "AdamWPower",
    "GradPower",
    "NonFiniteGradientError",
    "cosine_schedule",
    "foreach_sign_power",
    "sign_power",
    "wsd_schedule",
]
