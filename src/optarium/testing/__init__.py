"""Public conformance checks that every method of a kind must pass."""

from optarium.testing.optimizers import CHECKS, OptimizerCase, optimizer_cases

__all__ = ["CHECKS", "OptimizerCase", "optimizer_cases"]
