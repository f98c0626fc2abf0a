r"""The online-learner contract and the shared runner that keeps the round count, regret and violation.

An online learner plays a point, is shown the round's loss (and constraint), and updates:

.. code-block:: python

    for t in range(T):
        x_t = learner.predict()                  # the point played in round t (no state change)
        learner.update(loss_fn, constraint_fn)   # f_t and g_t revealed; g_t(x) <= 0 means feasible

``loss_fn`` and ``constraint_fn`` map a point ``(d,)`` to a 0-d tensor and are differentiable (a learner takes
the gradients it needs with ``torch.autograd``); ``constraint_fn`` may be ``None`` (no constraint this round).
:class:`OnlineLearner` is that protocol. :class:`OnlineRunner` plays a learner against a sequence and keeps,
for every round :math:`t`, the loss :math:`f_t(x_t)`, the violation :math:`(g_t(x_t))_+`, the cumulative
regret :math:`\mathrm{Regret}_t = \sum_{s\le t} f_s(x_s) - \sum_{s\le t} f_s(u)` against a fixed comparator
:math:`u` (when one is given) and the cumulative constraint violation
:math:`\mathrm{CCV}_t = \sum_{s\le t} (g_s(x_s))_+`, all evaluated outside autograd. Learners never compute
these themselves, so every online method reports them the same way. The conformance checks of the contract
are :mod:`optarium.testing.online`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol, runtime_checkable

import torch

from optarium._core.result import Trace

__all__ = ["LossFn", "OnlineLearner", "OnlineRunner", "run_online"]

#: A round's loss or constraint: a point ``(d,)`` -> a 0-d tensor, differentiable in the point.
LossFn = Callable[[torch.Tensor], torch.Tensor]


@runtime_checkable
class OnlineLearner(Protocol):
    """``predict()`` then ``update(loss_fn, constraint_fn)`` once per round.

    ``predict`` returns the point of the current round (a detached tensor; calling it twice without an
    ``update`` returns the same point). ``update`` reveals the round's loss and constraint (``None``: no
    constraint) and moves to the next round.
    """

    def predict(self) -> torch.Tensor:
        """The point played in the current round."""
        ...

    def update(self, loss_fn: LossFn, constraint_fn: LossFn | None = None) -> None:
        """Observe the round's loss (and constraint, ``g(x) <= 0`` feasible) and advance one round."""
        ...


class OnlineRunner:
    """Plays an :class:`OnlineLearner` round by round and keeps the books.

    Args:
        learner: the learner.
        comparator: a fixed point :math:`u` to measure regret against (e.g. the best feasible point in
            hindsight), or ``None`` (no regret column).

    Attributes ``t`` (rounds played), ``cumulative_loss``, ``regret`` and ``ccv`` (cumulative constraint
    violation) are plain floats after each :meth:`round`; :meth:`trace` gives the per-round history.
    """

    def __init__(self, learner: OnlineLearner, comparator: torch.Tensor | None = None) -> None:
        if not isinstance(learner, OnlineLearner):
            raise TypeError(f"learner: must have predict() and update(), got {type(learner).__name__}")
        if comparator is not None and not isinstance(comparator, torch.Tensor):
            raise TypeError(f"comparator: must be a tensor or None, got {type(comparator).__name__}")
        self.learner = learner
        self.comparator = None if comparator is None else comparator.detach()
        self.t = 0
        self.cumulative_loss = 0.0
        self.regret = 0.0
        self.ccv = 0.0
        self._rows: list[dict[str, float]] = []
        self.points: list[torch.Tensor] = []

    def round(self, loss_fn: LossFn, constraint_fn: LossFn | None = None) -> torch.Tensor:
        """Play one round: predict, account the loss and violation at the played point, update; returns it."""
        x = self.learner.predict()
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"learner: predict() returned {type(x).__name__}, not a tensor")
        x = x.detach().clone()
        with torch.no_grad():
            f = float(loss_fn(x))
            v = max(float(constraint_fn(x)), 0.0) if constraint_fn is not None else 0.0
            fu = float(loss_fn(self.comparator)) if self.comparator is not None else None
        self.learner.update(loss_fn, constraint_fn)
        self.t += 1
        self.cumulative_loss += f
        self.ccv += v
        row = {"step": self.t, "loss": f, "violation": v, "cumulative_loss": self.cumulative_loss}
        row["ccv"] = self.ccv
        if fu is not None:
            self.regret += f - fu
            row["regret"] = self.regret
        self._rows.append(row)
        self.points.append(x)
        return x

    def trace(self) -> Trace:
        """The per-round history: loss, violation, cumulative_loss, ccv and (with a comparator) regret."""
        return Trace.from_rows(self._rows)


def run_online(
    learner: OnlineLearner,
    rounds: Iterable[tuple[LossFn, LossFn | None]],
    *,
    comparator: torch.Tensor | None = None,
) -> OnlineRunner:
    """Play ``learner`` through ``rounds`` (pairs ``(loss_fn, constraint_fn)``); return the runner."""
    runner = OnlineRunner(learner, comparator)
    for loss_fn, constraint_fn in rounds:
        runner.round(loss_fn, constraint_fn)
    return runner
