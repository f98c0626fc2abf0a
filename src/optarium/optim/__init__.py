"""Optimizers: ``torch.optim.Optimizer`` subclasses and optimizer wrappers, one module per method."""

from optarium.optim.functional import foreach_sign_power, sign_power
from optarium.optim.gradpower import AdamWPower, GradPower
from optarium.optim.schedules import cosine_schedule, wsd_schedule

__all__ = ["AdamWPower", "GradPower", "cosine_schedule", "foreach_sign_power", "sign_power", "wsd_schedule"]
