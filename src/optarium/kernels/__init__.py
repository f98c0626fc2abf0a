"""Kernel search: evolutionary optimisation of compiled compute kernels.

:mod:`optarium.kernels.kernelfoundry`: KernelFoundry's quality-diversity search (MAP-Elites archive over a
static behaviour descriptor, islands, correctness-gated fitness, meta-prompt population, template tuning)
on C kernels compiled by gcc with OpenMP and loaded through ctypes; a rule-based mutator replaces the LLM.
"""

from optarium.kernels import kernelfoundry

__all__ = ["kernelfoundry"]
