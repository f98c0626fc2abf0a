"""The status vocabularies of optarium, each named for what it describes.

Three different things have a status, and each has its own closed vocabulary:

- a **solver run** (:class:`optarium._core.Result.status`): :data:`SOLVER_STATUSES`;
- an **experiment unit**, one (method, seed) pair run by the harness: :data:`UNIT_STATUSES`;
- a **registered method**, where it stands in the project (:class:`optarium._core.MethodInfo.status`):
  :data:`METHOD_STATUSES`.

>>> "timeout" in SOLVER_STATUSES and "timeout" in UNIT_STATUSES
True
"""

from __future__ import annotations

__all__ = ["METHOD_STATUSES", "SOLVER_STATUSES", "UNIT_STATUSES"]

#: How a solver run ended: it met its tolerance (``converged``), used its iteration budget (``max_iter``),
#: produced a non-finite or exploding iterate (``diverged``), or ran out of its time budget (``timeout``).
SOLVER_STATUSES: tuple[str, ...] = ("converged", "max_iter", "diverged", "timeout")

#: How one (method, seed) unit of an experiment ended: ``run`` returned (``done``), a logged metric was
#: non-finite (``diverged``), ``run`` raised (``error``, traceback stored) or it ran past its limit
#: (``timeout``).
UNIT_STATUSES: tuple[str, ...] = ("done", "diverged", "error", "timeout")

#: Where a registered method stands: a spec only (``planned``); method, tests and experiment exist and run
#: (``implemented``); cannot be done here, with what would unblock it in its notes (``blocked``).
METHOD_STATUSES: tuple[str, ...] = ("planned", "implemented", "blocked")
