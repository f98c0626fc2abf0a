"""Generative models: constrained diffusion (landing samplers, with S^2, torus and SO(3) constraint sets) and
diffusion timestep learning."""

from optarium.generative.landing import Constraints, LandingDiffusion, NoiseSchedule
from optarium.generative.landing_so3 import (
    MatrixFisherScore,
    matrix_fisher_sample,
    rotation_mmd,
    so3_constraints,
    so3_project_svd,
)
from optarium.generative.timesteps import TimestepMask, bilevel_timestep_search, handcrafted_schedule

__all__ = [
    "Constraints",
    "LandingDiffusion",
    "MatrixFisherScore",
    "NoiseSchedule",
    "TimestepMask",
    "bilevel_timestep_search",
    "handcrafted_schedule",
    "matrix_fisher_sample",
    "rotation_mmd",
    "so3_constraints",
    "so3_project_svd",
]
