"""The ask/tell base for black-box strategies: ``ask(n)`` proposes, ``tell(x, y)`` reports evaluations.

Subclasses implement :meth:`AskTellStrategy._propose`; the base validates shapes, bounds and values, keeps the
evaluated data (float64 by default), tracks the incumbent and serialises itself with ``state_dict``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import torch

from optarium._core.validation import check_int, check_type

__all__ = ["AskTellStrategy"]


class AskTellStrategy(ABC):
    """Base class for ask/tell optimizers over a box.

    Args:
        bounds: tensor of shape ``(2, d)``: lower bounds in row 0, upper bounds in row 1, in the user's units.
        minimize: minimise ``y`` if True, maximise if False (chosen explicitly, no default sign games).
        generator: the ``torch.Generator`` for all randomness (a seeded CPU generator if omitted).
        dtype: floating dtype of the stored data (float64 by default).

    NaN or infinite objective values raise ``ValueError``; points outside the bounds raise ``ValueError``.
    Points that were never asked may be told (warm starts); they count like any other evaluation.
    """

    def __init__(
        self,
        bounds: torch.Tensor,
        *,
        minimize: bool = True,
        generator: torch.Generator | None = None,
        dtype: torch.dtype = torch.float64,
    ) -> None:
        check_type("bounds", bounds, torch.Tensor)
        check_type("minimize", minimize, bool)
        if bounds.ndim != 2 or bounds.shape[0] != 2 or bounds.shape[1] < 1:
            raise ValueError(f"bounds: must have shape (2, d) with d >= 1, got {tuple(bounds.shape)}")
        bounds = bounds.to(dtype).clone()
        if not torch.isfinite(bounds).all():
            raise ValueError("bounds: must be finite")
        if not (bounds[0] < bounds[1]).all():
            raise ValueError("bounds: every lower bound must be < its upper bound")
        self.bounds = bounds
        self.minimize = minimize
        self.dtype = dtype
        self.generator = generator if generator is not None else torch.Generator().manual_seed(0)
        self.X = torch.empty(0, bounds.shape[1], dtype=dtype, device=bounds.device)
        self.Y = torch.empty(0, dtype=dtype, device=bounds.device)

    @property
    def dim(self) -> int:
        """The number of input dimensions ``d``."""
        return int(self.bounds.shape[1])

    @abstractmethod
    def _propose(self, n: int) -> torch.Tensor:
        """Return ``n`` candidates of shape ``(n, d)`` inside the bounds."""

    def _on_tell(self, x: torch.Tensor, y: torch.Tensor) -> None:  # noqa: B027 - optional hook
        """Hook called after new data were appended to ``X`` and ``Y``."""

    def ask(self, n: int = 1) -> torch.Tensor:
        """Propose ``n`` points, shape ``(n, d)``, within the bounds."""
        n = check_int("n", n, minimum=1)
        x = self._propose(n)
        name = type(self).__name__
        if x.shape != (n, self.dim):
            raise RuntimeError(f"{name}._propose returned shape {tuple(x.shape)}, expected {(n, self.dim)}")
        if x.dtype != self.dtype or x.device != self.bounds.device:
            raise RuntimeError(f"{name}._propose returned {x.dtype} on {x.device}, expected {self.dtype}")
        if not torch.isfinite(x).all() or ((x < self.bounds[0]) | (x > self.bounds[1])).any():
            raise RuntimeError(f"{name}._propose returned points outside the bounds (a bug in {name})")
        return x

    def tell(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """Report evaluations: ``x`` of shape ``(n, d)``, ``y`` of shape ``(n,)``."""
        check_type("x", x, torch.Tensor)
        check_type("y", y, torch.Tensor)
        x = x.to(self.X)
        y = y.to(self.Y)
        if x.ndim != 2 or x.shape[1] != self.dim:
            raise ValueError(f"x: must have shape (n, {self.dim}), got {tuple(x.shape)}")
        if y.ndim != 1 or y.shape[0] != x.shape[0]:
            raise ValueError(f"y: must have shape ({x.shape[0]},), got {tuple(y.shape)}")
        if not torch.isfinite(x).all():
            raise ValueError("x: contains NaN or inf")
        if not torch.isfinite(y).all():
            raise ValueError("y: contains NaN or inf; evaluate failures as a finite penalty or drop them")
        if ((x < self.bounds[0]) | (x > self.bounds[1])).any():
            raise ValueError("x: contains points outside the bounds")
        self.X = torch.cat([self.X, x])
        self.Y = torch.cat([self.Y, y])
        self._on_tell(x, y)

    def _best_index(self) -> int:
        if self.Y.numel() == 0:
            raise RuntimeError("no evaluations yet: call tell() first")
        return int(self.Y.argmin() if self.minimize else self.Y.argmax())

    @property
    def best_x(self) -> torch.Tensor:
        """The best point told so far."""
        return self.X[self._best_index()].clone()

    @property
    def best_y(self) -> float:
        """The best objective value told so far."""
        return float(self.Y[self._best_index()])

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume: data, bounds, direction and generator state."""
        return {
            "bounds": self.bounds.clone(),
            "minimize": self.minimize,
            "X": self.X.clone(),
            "Y": self.Y.clone(),
            "generator": self.generator.get_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore from :meth:`state_dict`; the bounds must match."""
        if not torch.equal(state["bounds"].to(self.bounds), self.bounds):
            raise ValueError("state: bounds differ from this strategy's bounds")
        X, Y = state["X"], state["Y"]
        if X.ndim != 2 or X.shape[1] != self.dim or Y.shape != (X.shape[0],):
            raise ValueError(
                f"state: X {tuple(X.shape)} and Y {tuple(Y.shape)} do not fit dimension {self.dim}"
            )
        self.minimize = bool(state["minimize"])
        self.X = X.to(self.X)
        self.Y = Y.to(self.Y)
        self.generator.set_state(state["generator"])
