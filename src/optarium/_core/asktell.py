"""The ask/tell base for black-box strategies: ``ask(n)`` proposes, ``tell(x, y)`` reports evaluations.

Subclasses implement :meth:`AskTellStrategy._propose`; the base validates shapes, bounds and values, keeps the
evaluated data (float64 by default), tracks the incumbent and serialises itself with ``state_dict``.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

import torch

from optarium._core.pareto import non_dominated
from optarium._core.seeding import make_generator
from optarium._core.validation import check_int, check_type

__all__ = ["AskTellStrategy"]


class AskTellStrategy(ABC):
    """Base class for ask/tell optimizers over a box.

    Args:
        bounds: tensor of shape ``(2, d)``: lower bounds in row 0, upper bounds in row 1, in the user's units.
        minimize: minimise ``y`` if True, maximise if False (chosen explicitly, no default sign games).
        generator: the ``torch.Generator`` for all randomness (a CPU generator seeded with 0 if neither it
            nor ``seed`` is given).
        seed: shorthand for ``generator=torch.Generator().manual_seed(seed)``; every strategy takes it the
            same way (giving both is a ``ValueError`` naming ``seed``).
        dtype: floating dtype of the stored data (float64 by default).
        n_objectives: number of objectives ``m``. With ``m = 1`` (default) ``y`` has shape ``(n,)``; with
            ``m > 1`` it has shape ``(n, m)``, every objective shares the direction ``minimize``, and the
            incumbent is the Pareto set (:attr:`pareto_x`, :attr:`pareto_y`) instead of ``best_x``/``best_y``.

    NaN or infinite objective values raise ``ValueError``; points outside the bounds raise ``ValueError``.
    Points that were never asked may be told (warm starts); they count like any other evaluation.
    ``load_state_dict`` refuses a non-dict (``TypeError``) or a state missing a key (``ValueError`` naming
    ``state_dict`` and the key), in the base and in every subclass's own keys.
    """

    _STATE_KEYS: tuple[str, ...] = ("bounds", "minimize", "X", "Y", "generator")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Wrap a subclass's own ``load_state_dict`` so a missing key is a ``ValueError`` naming it."""
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("load_state_dict")
        if own is not None and not getattr(own, "_checks_keys", False):
            cls.load_state_dict = _missing_key_as_value_error(own)  # type: ignore[method-assign]

    @staticmethod
    def resolve_generator(generator: torch.Generator | None, seed: int | None) -> torch.Generator:
        """The strategy's generator from ``generator=`` or ``seed=`` (one of them; seed 0 if neither)."""
        if generator is not None and seed is not None:
            raise ValueError("seed: give seed or generator, not both")
        if seed is not None:
            return make_generator(seed)
        if generator is None:
            return torch.Generator().manual_seed(0)
        if not isinstance(generator, torch.Generator):
            raise TypeError(f"generator: must be a torch.Generator or None, got {type(generator).__name__}")
        return generator

    def __init__(
        self,
        bounds: torch.Tensor,
        *,
        minimize: bool = True,
        generator: torch.Generator | None = None,
        dtype: torch.dtype = torch.float64,
        n_objectives: int = 1,
        seed: int | None = None,
    ) -> None:
        generator = self.resolve_generator(generator, seed)
        check_type("bounds", bounds, torch.Tensor)
        self.n_objectives = check_int("n_objectives", n_objectives, minimum=1)
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
        self.generator = generator
        self.X = torch.empty(0, bounds.shape[1], dtype=dtype, device=bounds.device)
        y_shape = (0,) if self.n_objectives == 1 else (0, self.n_objectives)
        self.Y = torch.empty(y_shape, dtype=dtype, device=bounds.device)

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
        """Report evaluations: ``x`` of shape ``(n, d)``, ``y`` of shape ``(n,)`` (``(n, m)`` for ``m > 1``
        objectives)."""
        check_type("x", x, torch.Tensor)
        check_type("y", y, torch.Tensor)
        x = x.to(self.X)
        y = y.to(self.Y)
        if x.ndim != 2 or x.shape[1] != self.dim:
            raise ValueError(f"x: must have shape (n, {self.dim}), got {tuple(x.shape)}")
        expected = (x.shape[0],) if self.n_objectives == 1 else (x.shape[0], self.n_objectives)
        if tuple(y.shape) != expected:
            raise ValueError(f"y: must have shape {expected}, got {tuple(y.shape)}")
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
        if self.n_objectives > 1:
            raise RuntimeError(
                f"best_x/best_y are undefined with {self.n_objectives} objectives: use pareto_x/pareto_y"
            )
        if self.Y.numel() == 0:
            raise RuntimeError("no evaluations yet: call tell() first")
        return int(self.Y.argmin() if self.minimize else self.Y.argmax())

    def _pareto_mask(self) -> torch.Tensor:
        if self.Y.shape[0] == 0:
            raise RuntimeError("no evaluations yet: call tell() first")
        Y = self.Y.reshape(self.Y.shape[0], -1)
        return non_dominated(Y if self.minimize else -Y)

    @property
    def pareto_x(self) -> torch.Tensor:
        """The non-dominated points told so far, shape ``(k, d)`` (for one objective: all minimisers)."""
        return self.X[self._pareto_mask()].clone()

    @property
    def pareto_y(self) -> torch.Tensor:
        """The objective values of :attr:`pareto_x`, shape ``(k, m)`` (``(k,)`` for one objective)."""
        return self.Y[self._pareto_mask()].clone()

    def standardized_Y(self) -> torch.Tensor:
        """``Y`` standardised per objective and signed for minimisation: ``s (Y - mean) / std``, with
        ``s = 1`` when minimising and ``-1`` when maximising; std is 1 for fewer than two points or a
        constant objective."""
        mean, std, sign = self.standardization()
        return sign * (self.Y - mean) / std

    def standardization(self) -> tuple[torch.Tensor, torch.Tensor, float]:
        """``(mean, std, sign)`` of :meth:`standardized_Y` (``standardized_Y = sign (Y - mean) / std``), for
        mapping a surrogate fitted on it back to the objective's units: ``Y = mean + sign std Z``."""
        if self.Y.shape[0] == 0:
            raise RuntimeError("no evaluations yet: call tell() first")
        mean = self.Y.mean(0)
        std = self.Y.std(0) if self.Y.shape[0] > 1 else torch.ones_like(mean)
        std = torch.where(std > 0, std, torch.ones_like(std))
        return mean, std, 1.0 if self.minimize else -1.0

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
            "n_objectives": self.n_objectives,
            "X": self.X.clone(),
            "Y": self.Y.clone(),
            "generator": self.generator.get_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore from :meth:`state_dict`; the bounds must match.

        ``TypeError`` for a non-dict and ``ValueError`` naming ``state_dict`` and the key for a missing key.
        """
        if not isinstance(state, Mapping):
            raise TypeError(f"state_dict: must be a dict from state_dict(), got {type(state).__name__}")
        missing = [k for k in self._STATE_KEYS if k not in state]
        if missing:
            raise ValueError(
                f"state_dict: missing key(s) {', '.join(map(repr, missing))}; pass the dict that "
                f"{type(self).__name__}.state_dict() returned"
            )
        if not isinstance(state["bounds"], torch.Tensor):
            raise TypeError(f"state_dict: 'bounds' must be a tensor, got {type(state['bounds']).__name__}")
        if not torch.equal(state["bounds"].to(self.bounds), self.bounds):
            raise ValueError("state_dict: 'bounds' differ from this strategy's bounds")
        X, Y = state["X"], state["Y"]
        if int(state.get("n_objectives", 1)) != self.n_objectives:
            raise ValueError(
                f"state_dict: 'n_objectives' is {state.get('n_objectives', 1)} (1 if absent), this strategy "
                f"has {self.n_objectives}"
            )
        expected = (X.shape[0],) if self.n_objectives == 1 else (X.shape[0], self.n_objectives)
        if X.ndim != 2 or X.shape[1] != self.dim or tuple(Y.shape) != expected:
            raise ValueError(
                f"state_dict: 'X' {tuple(X.shape)} and 'Y' {tuple(Y.shape)} do not fit dimension {self.dim}"
            )
        self.minimize = bool(state["minimize"])
        self.X = X.to(self.X)
        self.Y = Y.to(self.Y)
        self.generator.set_state(state["generator"])


def _missing_key_as_value_error(fn: Any) -> Any:
    """``fn`` (a ``load_state_dict``) with a ``KeyError`` from a missing key turned into a ``ValueError``."""

    @functools.wraps(fn)
    def load_state_dict(self: AskTellStrategy, state: Any) -> None:
        if not isinstance(state, Mapping):
            raise TypeError(f"state_dict: must be a dict from state_dict(), got {type(state).__name__}")
        try:
            fn(self, state)
        except KeyError as err:
            key = err.args[0] if err.args else "?"
            raise ValueError(
                f"state_dict: missing key {key!r}; pass the dict that {type(self).__name__}.state_dict() "
                "returned"
            ) from err

    load_state_dict._checks_keys = True  # type: ignore[attr-defined]
    return load_state_dict


AskTellStrategy.load_state_dict._checks_keys = True  # type: ignore[attr-defined]
