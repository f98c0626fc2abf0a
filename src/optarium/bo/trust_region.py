r"""The TuRBO-1 trust region, surrogate-agnostic: state, success/failure counters, restarts, RAASP candidates.

TuRBO: D. Eriksson, M. Pearce, J. Gardner, R. Turner, M. Poloczek, "Scalable Global Optimization via Local
Bayesian Optimization", NeurIPS 2019, arXiv:1910.01739; RAASP candidates: B. Rashidi et al., "Cylindrical
Thompson Sampling for High-Dimensional Bayesian Optimization", AISTATS 2024; as used by TuRBO-ENN (Bafna,
Jadhav, Sweet, arXiv:2506.12818, and its package ``ennbo``).

Everything lives in the unit cube and is written for maximisation. The trust region is a cube of side
:math:`L` centred at the incumbent, clipped to :math:`[0,1]^d` (optionally stretched per axis by weights with
geometric mean 1, e.g. a GP's ARD lengthscales). After each batch:

- success if :math:`\max y_{batch} > y^* + 10^{-3}\,\Delta`, with :math:`\Delta` the range of the earlier
  values of this TR run (``success_rule="range"``, ``ennbo``'s rule) or :math:`|y^*|` (``"abs_best"``, the
  original TuRBO and BoTorch tutorial rule);
- ``success_tolerance`` (3) consecutive successes double :math:`L` (capped at :math:`L_{max} = 1.6`);
  ``failure_tolerance`` (:math:`\lceil\max(4/q, d/q)\rceil`) consecutive failures halve it;
  :math:`L < L_{min} = 0.5^7` asks for a restart.

RAASP candidates: each coordinate of the incumbent is replaced, with probability :math:`\min(1, 20/d)`, by a
draw inside the TR (Sobol or uniform); a candidate with no perturbed coordinate gets one at random.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from optarium._core.validation import check_choice, check_int, check_positive, check_type

__all__ = ["TrustRegion", "latin_hypercube", "raasp_candidates", "trust_region_bounds"]

SUCCESS_RULES = ("range", "abs_best")


class TrustRegion:
    """TuRBO-1 trust-region state (unit-cube side length and the success/failure counters).

    Args:
        dim: input dimension ``d``.
        batch_size: ``q``, used for the default failure tolerance.
        length_init, length_min, length_max: 0.8, 0.5**7, 1.6.
        success_tolerance: consecutive successes that double the length (3).
        failure_tolerance: consecutive failures that halve it (default ``ceil(max(4/q, d/q))``).
        success_rule: ``"range"`` (default, ``ennbo``) or ``"abs_best"`` (original TuRBO).
        tol: the relative improvement threshold (1e-3).
    """

    def __init__(
        self,
        dim: int,
        batch_size: int = 1,
        *,
        length_init: float = 0.8,
        length_min: float = 0.5**7,
        length_max: float = 1.6,
        success_tolerance: int = 3,
        failure_tolerance: int | None = None,
        success_rule: str = "range",
        tol: float = 1e-3,
    ) -> None:
        self.dim = check_int("dim", dim, minimum=1)
        self.batch_size = check_int("batch_size", batch_size, minimum=1)
        self.length_init = check_positive("length_init", length_init)
        self.length_min = check_positive("length_min", length_min)
        self.length_max = check_positive("length_max", length_max)
        if not self.length_min <= self.length_init <= self.length_max:
            raise ValueError("length_init: must lie in [length_min, length_max]")
        self.success_tolerance = check_int("success_tolerance", success_tolerance, minimum=1)
        if failure_tolerance is None:
            failure_tolerance = math.ceil(max(4.0 / self.batch_size, self.dim / self.batch_size))
        self.failure_tolerance = check_int("failure_tolerance", failure_tolerance, minimum=1)
        self.success_rule = check_choice("success_rule", success_rule, SUCCESS_RULES)
        self.tol = check_positive("tol", tol)
        self.reset()

    def reset(self) -> None:
        """Back to the initial length with cleared counters (a restart)."""
        self.length = self.length_init
        self.success_count = 0
        self.failure_count = 0
        self.restart_needed = False

    def is_success(self, y_batch: torch.Tensor, y_before: torch.Tensor) -> bool:
        """Whether the batch ``y_batch`` improved on ``y_before`` (this TR run's earlier values)."""
        best = float(y_before.max())
        scale = float(y_before.max() - y_before.min()) if self.success_rule == "range" else abs(best)
        return float(y_batch.max()) > best + self.tol * scale

    def update(self, y_batch: torch.Tensor, y_before: torch.Tensor) -> bool:
        """Update the counters and the length after a batch; returns whether it was a success.

        With no earlier values in this TR run (the initial design) nothing changes and False is returned.
        """
        check_type("y_batch", y_batch, torch.Tensor)
        if y_batch.numel() == 0 or y_before.numel() == 0:
            return False
        success = self.is_success(y_batch, y_before)
        if success:
            self.success_count += 1
            self.failure_count = 0
        else:
            self.success_count = 0
            self.failure_count += 1
        if self.success_count >= self.success_tolerance:
            self.length = min(2.0 * self.length, self.length_max)
            self.success_count = 0
        elif self.failure_count >= self.failure_tolerance:
            self.length /= 2.0
            self.failure_count = 0
        self.restart_needed = self.length < self.length_min
        return success

    def state_dict(self) -> dict[str, Any]:
        """Length and counters."""
        return {
            "length": self.length,
            "success_count": self.success_count,
            "failure_count": self.failure_count,
            "restart_needed": self.restart_needed,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.length = float(state["length"])
        self.success_count = int(state["success_count"])
        self.failure_count = int(state["failure_count"])
        self.restart_needed = bool(state["restart_needed"])


def trust_region_bounds(
    center: torch.Tensor, length: float, weights: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Lower and upper corners of the TR cube of side ``length`` (times ``weights``) at ``center``, clipped
    to the unit cube."""
    half = 0.5 * length if weights is None else 0.5 * length * weights
    return (center - half).clamp(0.0, 1.0), (center + half).clamp(0.0, 1.0)


def raasp_candidates(
    center: torch.Tensor,
    lower: torch.Tensor,
    upper: torch.Tensor,
    n: int,
    *,
    generator: torch.Generator | None = None,
    prob: float | None = None,
    sobol: bool = True,
    engine: torch.quasirandom.SobolEngine | None = None,
) -> torch.Tensor:
    """``n`` RAASP candidates ``(n, d)``: the incumbent with random coordinates redrawn in the TR.

    With ``sobol=True`` the redrawn coordinates come from ``engine`` (a scrambled ``d``-dimensional
    :class:`torch.quasirandom.SobolEngine` that continues its sequence across calls; the strategies keep one)
    or, without it, from a fresh engine scrambled with a seed drawn from ``generator``.
    """
    n = check_int("n", n, minimum=1)
    d = center.shape[-1]
    p = min(1.0, 20.0 / d) if prob is None else prob
    if sobol:
        if engine is None:
            seed = int(torch.randint(2**31 - 1, (1,), generator=generator))
            engine = torch.quasirandom.SobolEngine(d, scramble=True, seed=seed)
        elif engine.dimension != d:
            raise ValueError(f"engine: must have dimension {d}, got {engine.dimension}")
        u = engine.draw(n, dtype=center.dtype).to(center.device)
    else:
        u = torch.rand(n, d, generator=generator, dtype=center.dtype).to(center.device)
    pert = lower + (upper - lower) * u
    mask = torch.rand(n, d, generator=generator, dtype=center.dtype).to(center.device) < p
    empty = ~mask.any(-1)
    forced = torch.randint(d, (n,), generator=generator).to(center.device)
    mask[empty, forced[empty]] = True
    return torch.where(mask, pert, center.expand(n, d))


def latin_hypercube(
    n: int, d: int, *, generator: torch.Generator | None = None, dtype: Any = None
) -> torch.Tensor:
    """A Latin hypercube design of ``n`` points in ``[0, 1]^d`` (one per stratum per coordinate)."""
    n = check_int("n", n, minimum=1)
    d = check_int("d", d, minimum=1)
    dtype = dtype or torch.float64
    strata = torch.argsort(torch.rand(d, n, generator=generator), dim=-1).T.to(dtype)  # (n, d) permutations
    jitter = torch.rand(n, d, generator=generator, dtype=dtype)
    return (strata + jitter) / n
