"""Optimizers: ``torch.optim.Optimizer`` subclasses and optimizer wrappers, one module per method."""

from optarium.optim.functional import foreach_sign_power, sign_power
from optarium.optim.gradpower import AdamWPower, GradPower

__all__ = ["AdamWPower", "GradPower", "foreach_sign_power", "sign_power"]
