"""Generative models: constrained diffusion (landing samplers) and diffusion timestep learning."""

from optarium.generative.landing import Constraints, LandingDiffusion, NoiseSchedule
from optarium.generative.timesteps import TimestepMask, bilevel_timestep_search, handcrafted_schedule

__all__ = [
    "Constraints",
    "LandingDiffusion",
    "NoiseSchedule",
    "TimestepMask",
    "bilevel_timestep_search",
    "handcrafted_schedule",
]
