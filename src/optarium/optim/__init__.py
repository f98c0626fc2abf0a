"""Optimizers: ``torch.optim.Optimizer`` subclasses and optimizer wrappers, one module per method."""

from optarium.optim._nonfinite import NONFINITE_POLICIES, NonFiniteGradientError
from optarium.optim.analog import AnalogSGD, IdealDevice, ResidualAnalogSGD, SoftBoundsDevice, SymmetricDevice
from optarium.optim.basis_rotation import (
    AsyncPipelineSimulator,
    PipeMareStage,
    RotatedAdamW,
    basis_alignment,
    staleness_factory,
)
from optarium.optim.clip_sgd import CLIP_MODES, BallProjection, ClipSGD, clip_by_norm
from optarium.optim.functional import foreach_sign_power, sign_power
from optarium.optim.gradient_estimators import ESTIMATORS, CostCounters, GradientEstimator, make_estimator
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
from optarium.optim.robust_satisficing import (
    GroupDROLoss,
    IterativeRobustSatisficing,
    RobustSatisficingLoss,
    chi2_dro_loss,
    cvar_loss,
    erm_loss,
    jtt_weights,
    kl_fragility,
    rs_fragility,
    tilted_loss,
)
from optarium.optim.sam import sam_step
from optarium.optim.sam_polyak import SAM_SPS, SAMPolyak
from optarium.optim.schedules import cosine_schedule, wsd_schedule

__all__ = [
    "CLIP_MODES",
    "ESTIMATORS",
    "LINE_SEARCH_INITS",
    "LINE_SEARCH_MODES",
    "NONFINITE_POLICIES",
    "SAM_SPS",
    "AdGD",
    "AdamWPower",
    "AnalogSGD",
    "AsyncPipelineSimulator",
    "BallProjection",
    "ClipSGD",
    "CostCounters",
    "DiagonalLinearNet",
    "Entropic",
    "Euclidean",
    "GradPower",
    "GradientEstimator",
    "GroupDROLoss",
    "IdealDevice",
    "IterativeRobustSatisficing",
    "LRSweep",
    "Lion",
    "LionVR",
    "MirrorDescent",
    "NonFiniteGradientError",
    "NonmonotoneLineSearchGD",
    "PipeMareStage",
    "ReWA",
    "ResidualAnalogSGD",
    "RobustSatisficingLoss",
    "RotatedAdamW",
    "SAMPolyak",
    "SoftBoundsDevice",
    "SymmetricDevice",
    "analytic_error_curve",
    "basis_alignment",
    "batched_errors",
    "chi2_dro_loss",
    "clip_by_norm",
    "cosine_schedule",
    "cvar_loss",
    "dln_gd",
    "dln_sharpness",
    "erm_loss",
    "foreach_sign_power",
    "from_hidden",
    "jtt_weights",
    "kl_fragility",
    "levy_mirror_flow",
    "lion_update_",
    "lr_grid",
    "lr_sweep",
    "make_estimator",
    "max_stable_lr",
    "min_l1_interpolator",
    "mirror_descent",
    "rs_fragility",
    "sam_step",
    "sign_power",
    "staleness_factory",
    "stationary_error",
    "tilted_loss",
    "to_hidden",
    "track",
    "tracking_decomposition",
    "wsd_schedule",
]
