"""Public conformance checks that every method of a kind must pass, one module per contract.

- :mod:`optarium.testing.optimizers`: ``torch.optim`` optimizers (:class:`OptimizerCase`);
- :mod:`optarium.testing.asktell`: ask/tell black-box strategies;
- :mod:`optarium.testing.soft`: soft operators;
- :mod:`optarium.testing.solvers`: every solver returning an :class:`optarium._core.Result`; a solver joins by
  declaring :class:`optarium._core.SolverCase` objects in a ``solver_cases()`` function of its own module;
- :mod:`optarium.testing.online`: online learners (``predict`` / ``update`` per round), with an
  :class:`~optarium.testing.online.OnlineCase`;
- :mod:`optarium.testing.losses`: RL surrogate losses of batched tensors, with a
  :class:`~optarium.testing.losses.LossCase`.

Each ``tests/conformance/test_<contract>.py`` runs every check on every case, and shows that each check
catches a deliberately broken method.
"""

from optarium.testing.optimizers import CHECKS, OptimizerCase, optimizer_cases

__all__ = ["CHECKS", "OptimizerCase", "optimizer_cases"]
