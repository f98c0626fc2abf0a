"""SPMD entry points: run the federated solvers on every rank of :func:`optarium.distributed.launch`.

``launch(spmd_run, world_size, "dual", problem, rounds, T, n_clients=M, **kwargs)`` runs one solver on
``world_size`` gloo processes; :func:`spmd_batch` runs several jobs in one launch (the process start-up is
paid once). Each rank returns the solver's :class:`~optarium._core.result.Result` itself (it pickles), with
the per-process blocks ``X`` (and ``lam``) of ``extras`` replaced by every client's rows, gathered without
charging the communication statistics.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from optarium._core.result import Result
from optarium._core.validation import check_choice
from optarium.distributed.baselines import fedavg, scaffold
from optarium.distributed.dual_accelerated_local_sgd import dual_accelerated_local_sgd
from optarium.distributed.federated import FederatedProblem

__all__ = ["SPMD_METHODS", "spmd_batch", "spmd_run"]

#: The solvers :func:`spmd_run` runs, by name.
SPMD_METHODS = {"dual": dual_accelerated_local_sgd, "fedavg": fedavg, "scaffold": scaffold}


def spmd_run(
    comm: Any, method: str, problem: FederatedProblem, rounds: int, local_steps: int, **kwargs: Any
) -> Result:
    """Run ``method`` (a key of :data:`SPMD_METHODS`) on this rank; return its ``Result`` with all clients'
    ``X`` (and ``lam`` for the dual method) in ``extras``."""
    check_choice("method", method, tuple(SPMD_METHODS))
    res = SPMD_METHODS[method](problem, comm, rounds, local_steps, **kwargs)
    with comm.stats.paused():
        gathered = {k: comm.all_gather_clients(res.extras[k]) for k in ("X", "lam") if k in res.extras}
    return dataclasses.replace(res, extras={**res.extras, **gathered})


def spmd_batch(comm: Any, jobs: list[tuple[str, Any, int, int, dict[str, Any]]]) -> list[Result]:
    """Run several ``(method, problem, rounds, local_steps, kwargs)`` jobs with :func:`spmd_run` on this rank.

    The communication statistics are reset before each job.
    """
    out = []
    for method, problem, rounds, steps, kwargs in jobs:
        comm.stats.reset()
        out.append(spmd_run(comm, method, problem, rounds, steps, **kwargs))
    return out
