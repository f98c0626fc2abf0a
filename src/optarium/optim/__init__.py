"""Optimizers: ``torch.optim.Optimizer`` subclasses and optimizer wrappers, one module per method."""

from optarium.optim._nonfinite import NONFINITE_POLICIES, NonFiniteGradientError
from optarium.optim.clip_sgd import CLIP_MODES, BallProjection, ClipSGD, clip_by_norm
from optarium.optim.functional import foreach_sign_power, sign_power
from optarium.optim.gradpower import AdamWPower, GradPower
from optarium.optim.implicit_bias import (
    DiagonalLinearNet,
    LRSweep,
    dln_gd,
    dln_sharpness,
    lr_grid,
    lr_sweep,
    max_stable_lr,
    min_l1_interpolator,
)
from optarium.optim.levy_mirror import Entropic, Euclidean, MirrorDescent, levy_mirror_flow, mirror_descent
from optarium.optim.lion_vr import Lion, LionVR, lion_update_
from optarium.optim.momentum_tracking import (
    analytic_error_curve,
    batched_errors,
    stationary_error,
    track,
    tracking_decomposition,
)
from optarium.optim.nonmonotone_ls import LINE_SEARCH_INITS, LINE_SEARCH_MODES, AdGD, NonmonotoneLineSearchGD
from optarium.optim.rewa import ReWA, from_hidden, to_hidden
from optarium.optim.sam import sam_step
from optarium.optim.sam_polyak import SAM_SPS, SAMPolyak
from optarium.optim.schedules import cosine_schedule, wsd_schedule

__all__ = [
    "CLIP_MODES",
    "LINE_SEARCH_INITS",
    "LINE_SEARCH_MODES",
    "NONFINITE_POLICIES",
    "SAM_SPS",
    "AdGD",
    "AdamWPower",
    "BallProjection",
    "ClipSGD",
    "DiagonalLinearNet",
    "Entropic",
    "Euclidean",
    "GradPower",
    "LRSweep",
    "Lion",
    "LionVR",
    "MirrorDescent",
    "NonFiniteGradientError",
    "NonmonotoneLineSearchGD",
    "ReWA",
    "SAMPolyak",
    "analytic_error_curve",
    "batched_errors",
    "clip_by_norm",
    "cosine_schedule",
    "dln_gd",
    "dln_sharpness",
    "foreach_sign_power",
    "from_hidden",
    "levy_mirror_flow",
    "lion_update_",
    "lr_grid",
    "lr_sweep",
    "max_stable_lr",
    "min_l1_interpolator",
    "mirror_descent",
    "sam_step",
    "sign_power",
    "stationary_error",
    "to_hidden",
    "track",
    "tracking_decomposition",
    "wsd_schedule",
]
