r"""Convex compact domains for online learners: Euclidean projection, membership, diameter, linear minimiser.

A domain :math:`X` offers ``project(x)`` (:math:`\Pi_X`, the Euclidean projection), ``contains(x)``,
``diameter(dim)`` (:math:`D = \max_{x,y\in X}\|x - y\|_2` in dimension ``dim``) and ``argmin_linear(c)``
(a minimiser of :math:`\langle c, x\rangle` over :math:`X`: the best fixed point in hindsight for linear
losses, which the regret check of :mod:`optarium.testing.online` compares against). Batched inputs
``(..., d)`` are accepted by ``project`` and ``contains``.
"""

from __future__ import annotations

import torch

from optarium._core.validation import check_positive, check_type

__all__ = ["Ball", "Box"]


class Ball:
    r"""The Euclidean ball :math:`\{x : \|x - c\|_2 \le r\}` (center ``c`` default 0).

    >>> b = Ball(2.0)
    >>> b.project(torch.tensor([3.0, 4.0])).tolist()
    [1.2000000476837158, 1.600000023841858]
    """

    def __init__(self, radius: float, center: torch.Tensor | None = None) -> None:
        self.radius = check_positive("radius", radius)
        if center is not None:
            check_type("center", center, torch.Tensor)
        self.center = center

    def _c(self, x: torch.Tensor) -> torch.Tensor | float:
        return 0.0 if self.center is None else self.center.to(x)

    def diameter(self, dim: int) -> float:
        """:math:`2r` (in any dimension)."""
        return 2.0 * self.radius

    def project(self, x: torch.Tensor) -> torch.Tensor:
        r""":math:`c + (x - c)\min(1, r / \|x - c\|)`."""
        z = x - self._c(x)
        norm = z.norm(dim=-1, keepdim=True)
        scale = torch.where(norm > self.radius, self.radius / norm.clamp_min(1e-300), torch.ones_like(norm))
        return self._c(x) + z * scale

    def contains(self, x: torch.Tensor, atol: float = 1e-6) -> bool:
        """Whether every point of ``x`` lies in the ball (up to ``atol``)."""
        return bool(((x - self._c(x)).norm(dim=-1) <= self.radius * (1 + atol) + atol).all())

    def argmin_linear(self, c: torch.Tensor) -> torch.Tensor:
        r""":math:`\arg\min_x \langle c, x\rangle = \text{center} - r\,c/\|c\|` (the center if c = 0)."""
        n = float(c.norm())
        return self._c(c) - (self.radius / n) * c if n > 0 else self._c(c) + torch.zeros_like(c)


class Box:
    r"""The box :math:`\{x : \ell \le x \le u\}` (scalars or tensors broadcast to the point).

    >>> Box(0.0, 1.0).project(torch.tensor([-1.0, 0.5, 2.0])).tolist()
    [0.0, 0.5, 1.0]
    """

    def __init__(self, low: float | torch.Tensor, high: float | torch.Tensor) -> None:
        lo = low if isinstance(low, torch.Tensor) else torch.tensor(float(low), dtype=torch.float64)
        hi = high if isinstance(high, torch.Tensor) else torch.tensor(float(high), dtype=torch.float64)
        if not bool((hi >= lo).all()):
            raise ValueError("high: must be >= low everywhere")
        self.low, self.high = lo, hi

    def diameter(self, dim: int) -> float:
        r""":math:`\|u - \ell\|_2` in dimension ``dim`` (scalar bounds broadcast)."""
        side = (self.high.double() - self.low.double()).expand(dim)
        return float(side.norm())

    def project(self, x: torch.Tensor) -> torch.Tensor:
        """Coordinatewise clipping."""
        return torch.clamp(x, self.low.to(x), self.high.to(x))

    def contains(self, x: torch.Tensor, atol: float = 1e-6) -> bool:
        """Whether every coordinate lies within the bounds (up to ``atol``)."""
        return bool(((x >= self.low.to(x) - atol) & (x <= self.high.to(x) + atol)).all())

    def argmin_linear(self, c: torch.Tensor) -> torch.Tensor:
        """The vertex with ``low`` where ``c > 0`` and ``high`` elsewhere."""
        return torch.where(c > 0, self.low.to(c).expand_as(c), self.high.to(c).expand_as(c))
