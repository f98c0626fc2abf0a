"""Single-objective black-box test problems with known optima, wrapping ``botorch.test_functions``.

Every problem is a minimisation problem in the user's units: ``problem(x)`` maps ``(n, d)`` to ``(n,)``.
The functions themselves are BoTorch's (not rewritten); this module adds a uniform interface: optional box
override (e.g. Ackley on [-5, 10]^d as in the TuRBO-ENN paper), optional shift of the optimiser, known optimal
value and optimisers. The problems BoTorch lacks are defined here: the (shifted) sphere and Goldstein-Price
(:func:`goldstein_price`, a BoTorch ``SyntheticTestFunction`` built on first use).

BoTorch is imported when a problem is built, never at import time of :mod:`optarium.bo`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from optarium._core.validation import check_choice, check_int, check_type

__all__ = ["PROBLEMS", "Problem", "goldstein_price", "make_problem"]

#: name -> (BoTorch class name or None for the sphere, fixed dimension or None)
PROBLEMS: dict[str, tuple[str | None, int | None]] = {
    "ackley": ("Ackley", None),
    "rastrigin": ("Rastrigin", None),
    "levy": ("Levy", None),
    "rosenbrock": ("Rosenbrock", None),
    "griewank": ("Griewank", None),
    "styblinski_tang": ("StyblinskiTang", None),
    "branin": ("Branin", 2),
    "hartmann6": ("Hartmann", 6),
    "goldstein_price": ("GoldsteinPrice", 2),
    "sphere": (None, None),
}

_HARTMANN6_MIN = -3.32237  # BoTorch lists the optimiser but not the value


@functools.lru_cache(maxsize=1)
def _goldstein_price_class() -> type:
    from botorch.test_functions.synthetic import SyntheticTestFunction

    class GoldsteinPrice(SyntheticTestFunction):
        """Goldstein-Price on [-2, 2]^2; global minimum 3 at (0, -1)."""

        dim = 2
        continuous_inds = [0, 1]  # noqa: RUF012 - BoTorch class attribute
        _bounds = [(-2.0, 2.0), (-2.0, 2.0)]  # noqa: RUF012
        _optimal_value = 3.0
        _optimizers = [(0.0, -1.0)]  # noqa: RUF012

        def _evaluate_true(self, X: torch.Tensor) -> torch.Tensor:
            x1, x2 = X[..., 0], X[..., 1]
            a = 1 + (x1 + x2 + 1) ** 2 * (19 - 14 * x1 + 3 * x1**2 - 14 * x2 + 6 * x1 * x2 + 3 * x2**2)
            b = 30 + (2 * x1 - 3 * x2) ** 2 * (
                18 - 32 * x1 + 12 * x1**2 + 48 * x2 - 36 * x1 * x2 + 27 * x2**2
            )
            return a * b

    return GoldsteinPrice


def goldstein_price(**kwargs: Any) -> Any:
    r"""The Goldstein-Price function as a BoTorch ``SyntheticTestFunction`` (minimisation), on
    :math:`[-2, 2]^2` with global minimum 3 at :math:`(0, -1)` (BoTorch does not ship it):

    .. math:: f(x) = \big[1 + (x_1 + x_2 + 1)^2 (19 - 14 x_1 + 3 x_1^2 - 14 x_2 + 6 x_1 x_2 + 3 x_2^2)\big]
        \big[30 + (2 x_1 - 3 x_2)^2 (18 - 32 x_1 + 12 x_1^2 + 48 x_2 - 36 x_1 x_2 + 27 x_2^2)\big].

    Args:
        **kwargs: BoTorch's ``SyntheticTestFunction`` options (``noise_std``, ``negate``, ``bounds``).

    Reference: A. A. Goldstein and J. F. Price, "On descent from local minima", Math. Comp. 25 (1971);
    the tcGP experiment's first benchmark. ``make_problem("goldstein_price")`` wraps it as a :class:`Problem`.
    """
    return _goldstein_price_class()(**kwargs)


@dataclass(frozen=True)
class Problem:
    """A minimisation problem: ``fn`` maps ``(n, d)`` to ``(n,)``; ``optimal_value`` at ``optimizers``."""

    name: str
    bounds: torch.Tensor
    optimal_value: float
    optimizers: torch.Tensor
    fn: Callable[[torch.Tensor], torch.Tensor]

    @property
    def dim(self) -> int:
        """Input dimension."""
        return int(self.bounds.shape[1])

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        check_type("x", x, torch.Tensor)
        if x.shape[-1] != self.dim:
            raise ValueError(f"x: last dimension must be {self.dim}, got {tuple(x.shape)}")
        return self.fn(x)

    def regret(self, value: float) -> float:
        """``value - optimal_value``."""
        return float(value) - self.optimal_value


def make_problem(
    name: str,
    dim: int | None = None,
    *,
    bounds: tuple[float, float] | torch.Tensor | None = None,
    shift: torch.Tensor | None = None,
    dtype: torch.dtype = torch.float64,
) -> Problem:
    """Build a test problem.

    Args:
        name: one of :data:`PROBLEMS`.
        dim: input dimension (required unless the problem has a fixed one).
        bounds: ``(low, high)`` for every coordinate, or a ``(2, d)`` tensor; default BoTorch's box
            (sphere: [-5, 5]^d).
        shift: move the optimiser by this ``(d,)`` vector (``f(x - shift)``); it must stay inside the box.
        dtype: dtype of the bounds and evaluations.
    """
    check_choice("name", name, tuple(PROBLEMS))
    cls_name, fixed = PROBLEMS[name]
    if fixed is not None:
        if dim is not None and dim != fixed:
            raise ValueError(f"dim: {name} has dimension {fixed}, got {dim}")
        dim = fixed
    if dim is None:
        raise ValueError(f"dim: required for {name}")
    dim = check_int("dim", dim, minimum=1)
    if cls_name is None:
        default = torch.tensor([[-5.0] * dim, [5.0] * dim], dtype=dtype)
        optimizers = torch.zeros(1, dim, dtype=dtype)
        optimal = 0.0

        def base(x: torch.Tensor) -> torch.Tensor:
            return x.square().sum(-1)

    else:
        import botorch.test_functions as tf

        cls = _goldstein_price_class() if cls_name == "GoldsteinPrice" else getattr(tf, cls_name)
        f = cls() if fixed == 2 else cls(dim=dim)
        f = f.to(dtype)
        default = f.bounds.to(dtype)
        optimizers = f.optimizers.to(dtype)
        optimal = _HARTMANN6_MIN if name == "hartmann6" else float(f.optimal_value)

        def base(x: torch.Tensor, f: object = f) -> torch.Tensor:
            return f.evaluate_true(x)  # type: ignore[attr-defined]

    if bounds is None:
        box = default
    elif isinstance(bounds, torch.Tensor):
        box = bounds.to(dtype)
    else:
        box = torch.tensor([[float(bounds[0])] * dim, [float(bounds[1])] * dim], dtype=dtype)
    if box.shape != (2, dim) or not (box[0] < box[1]).all():
        raise ValueError(f"bounds: must be (low, high) with low < high or a (2, {dim}) tensor")
    if shift is not None:
        shift = check_type("shift", shift, torch.Tensor).to(dtype)
        if shift.shape != (dim,):
            raise ValueError(f"shift: must have shape ({dim},), got {tuple(shift.shape)}")
        optimizers = optimizers + shift
        unshifted = base

        def base(x: torch.Tensor, g: Callable[[torch.Tensor], torch.Tensor] = unshifted) -> torch.Tensor:
            return g(x - shift)

    inside = ((optimizers >= box[0]) & (optimizers <= box[1])).all(-1)
    if not inside.any():
        raise ValueError("bounds: the known optimiser lies outside the box (change bounds or shift)")
    label = name if shift is None else f"shifted_{name}"
    return Problem(
        name=f"{label}{dim}", bounds=box, optimal_value=optimal, optimizers=optimizers[inside], fn=base
    )
