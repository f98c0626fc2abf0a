"""Online learning: learners that play a point per round and are updated with the round's loss and constraint.

The contract (:mod:`optarium.online.learner`): an :class:`OnlineLearner` has ``predict()`` (the point of the
round) and ``update(loss_fn, constraint_fn)``; :class:`OnlineRunner` / :func:`run_online` play it and keep
the round count, cumulative regret and cumulative constraint violation, so no learner does its own books.
Domains with projections are in :mod:`optarium.online.domains`; the reference learner is projected
:class:`OnlineGradientDescent` (:mod:`optarium.online.ogd`). Every learner passes
:mod:`optarium.testing.online`.
"""

from optarium.online.domains import Ball, Box
from optarium.online.learner import LossFn, OnlineLearner, OnlineRunner, run_online
from optarium.online.ogd import OnlineGradientDescent

__all__ = ["Ball", "Box", "LossFn", "OnlineGradientDescent", "OnlineLearner", "OnlineRunner", "run_online"]
