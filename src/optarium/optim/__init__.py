"""Optimizers: ``torch.optim.Optimizer`` subclasses and optimizer wrappers, one module per method."""

from optarium.optim._nonfinite import NONFINITE_POLICIES, NonFiniteGradientError
from optarium.optim.clip_sgd import CLIP_MODES, BallProjection, ClipSGD, clip_by_norm
from optarium.optim.functional import foreach_sign_power, sign_power
from optarium.optim.gradpower import AdamWPower, GradPower
from optarium.optim.lion_vr import Lion, LionVR, lion_update_
from optarium.optim.rewa import ReWA, from_hidden, to_hidden
from optarium.optim.sam import sam_step
from optarium.optim.sam_polyak import SAM_SPS, SAMPolyak
from optarium.optim.schedules import cosine_schedule, wsd_schedule

__all__ = [
    "CLIP_MODES",
    "NONFINITE_POLICIES",
    "SAM_SPS",
    "AdamWPower",
    "BallProjection",
    "ClipSGD",
    "GradPower",
    "Lion",
    "LionVR",
    "NonFiniteGradientError",
    "ReWA",
    "SAMPolyak",
    "clip_by_norm",
    "cosine_schedule",
    "foreach_sign_power",
    "from_hidden",
    "lion_update_",
    "sam_step",
    "sign_power",
    "to_hidden",
    "wsd_schedule",
]
