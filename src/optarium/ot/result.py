"""The result of a batched OT solve: :class:`OTResult` (plan, potentials, values, convergence status).

Field names follow POT's ``ot.solve`` result (``plan``, ``potentials``, ``value``, ``value_linear``) so a POT
user finds them; every tensor keeps the batch dimensions of the problem. :meth:`OTResult.to_result` turns an
unbatched solve into the solver contract's :class:`optarium._core.Result`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from optarium._core.result import Result, Trace

__all__ = ["OTResult"]


@dataclass(frozen=True)
class OTResult:
    """A regularised OT solution for a batch of problems with costs C (..., n, m) and masses a, b.

    Attributes:
        plan: the transport plan Gamma (..., n, m).
        potentials: the dual potentials ``(f (..., n), g (..., m))``; entropic: Gamma_ij =
            exp((f_i + g_j - C_ij) / reg); p-norm: Gamma_ij = reg^(1-q) max(0, f_i + g_j - C_ij)^(q-1).
        value: the regularised primal objective <C, Gamma> + reg R(Gamma) (..., ) with R of the solver.
        value_linear: the transport cost <C, Gamma> (..., ) (POT's ``sinkhorn2`` / ``value_linear``).
        dual_value: the dual objective at the potentials (..., ); ``value - dual_value`` is the duality gap,
            which is >= 0 up to the marginal error and 0 at the optimum.
        status: ``"converged"`` (marginal error <= tol for every problem of the batch), ``"max_iter"`` or
            ``"diverged"`` (non-finite potentials; ``plan`` is then not meaningful), from
            :data:`optarium._core.status.SOLVER_STATUSES`.
        n_iter: iterations performed (the batch is solved in lock step).
        marginal_error: the largest relative marginal error over the batch when the solver stopped (see the
            solver for its definition).
        history: the relative marginal error after every iteration (one float per iteration).
        wall_time_s: seconds spent in the solve (forward only).
    """

    plan: torch.Tensor
    potentials: tuple[torch.Tensor, torch.Tensor]
    value: torch.Tensor
    value_linear: torch.Tensor
    dual_value: torch.Tensor
    status: str
    n_iter: int
    marginal_error: float
    history: tuple[float, ...] = ()
    wall_time_s: float = 0.0

    @property
    def converged(self) -> bool:
        """Whether every problem of the batch met the tolerance."""
        return self.status == "converged"

    def to_result(self) -> Result:
        """This solve as a :class:`optarium._core.Result` (x = plan; value = the regularised objective).

        ``extras`` holds ``f``, ``g``, ``value_linear``, ``dual_value`` and ``marginal_error``; ``history``
        the marginal error per iteration; a diverged run's value is ``inf``. Needs an unbatched problem (plan
        of shape (n, m)).
        """
        if self.plan.ndim != 2:
            raise ValueError(
                "plan: to_result needs one problem (a plan of shape (n, m)), got shape "
                f"{tuple(self.plan.shape)}"
            )
        steps = tuple(range(1, len(self.history) + 1))
        value = float(self.value)
        if self.status == "diverged" and not math.isfinite(value):
            value = math.inf  # the solver contract reports a diverged run's value as inf, never NaN
        return Result(
            x=self.plan,
            value=value,
            status=self.status,
            n_iter=self.n_iter,
            history=Trace(steps=steps, metrics={"marginal_error": self.history}),
            wall_time_s=self.wall_time_s,
            extras={
                "f": self.potentials[0],
                "g": self.potentials[1],
                "value_linear": float(self.value_linear),
                "dual_value": float(self.dual_value),
                "marginal_error": self.marginal_error,
            },
        )
