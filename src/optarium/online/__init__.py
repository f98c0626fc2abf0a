"""Online learning: learners that play a point per round and are updated with the round's loss and constraint.

The contract (:mod:`optarium.online.learner`): an :class:`OnlineLearner` has ``predict()`` (the point of the
round) and ``update(loss_fn, constraint_fn)``; :class:`OnlineRunner` / :func:`run_online` play it and keep
the round count, cumulative regret and cumulative constraint violation, so no learner does its own books.
Domains with projections are in :mod:`optarium.online.domains`; the reference learner is projected
:class:`OnlineGradientDescent` (:mod:`optarium.online.ogd`). Constrained OCO (anytime-coco,
arXiv:2510.22579): :class:`AnytimeCOCO` and its baselines in :mod:`optarium.online.anytime_coco`, the
online shortest-path instances in :mod:`optarium.online.shortest_path`. Every learner passes
:mod:`optarium.testing.online`.
"""

from optarium.online.anytime_coco import (
    AnytimeCOCO,
    ConstraintAgnosticOGD,
    DoublingTrick,
    Simplex,
    SinhaVazeCOCO,
    VirtualQueueOGD,
    default_lam_schedule,
    project_simplex,
)
from optarium.online.domains import Ball, Box
from optarium.online.learner import LossFn, OnlineLearner, OnlineRunner, run_online
from optarium.online.ogd import OnlineGradientDescent

__all__ = [
    "AnytimeCOCO",
    "Ball",
    "Box",
    "ConstraintAgnosticOGD",
    "DoublingTrick",
    "LossFn",
    "OnlineGradientDescent",
    "OnlineLearner",
    "OnlineRunner",
    "Simplex",
    "SinhaVazeCOCO",
    "VirtualQueueOGD",
    "default_lam_schedule",
    "project_simplex",
    "run_online",
]
