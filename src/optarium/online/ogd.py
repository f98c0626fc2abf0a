r"""Projected online gradient descent (Zinkevich, ICML 2003), with the adaptive AdaGrad-norm step.

Round :math:`t`: play :math:`x_t`; observe :math:`f_t`; :math:`\nabla_t = \nabla f_t(x_t)`;
:math:`x_{t+1} = \Pi_X(x_t - \eta_t \nabla_t)`. Step sizes:

- ``lr="adaptive"`` (default): :math:`\eta_t = D / \sqrt{2 \sum_{s\le t} \|\nabla_s\|^2}`, the AdaGrad-norm
  step that anytime-coco runs on its surrogate losses; regret
  :math:`\le \sqrt 2\, D \sqrt{\sum_t \|\nabla_t\|^2} \le \sqrt 2\, D G \sqrt T` for every :math:`T`
  without knowing :math:`T` or :math:`G` (Orabona, *A Modern Introduction to Online Learning*, Thm. 4.14);
- ``lr=eta`` (a number): :math:`\eta_t = \eta / \sqrt t`.

The constraint of a round is not used (plain OGD minimises the losses only); constrained learners such as
anytime-coco's take the same two arguments and use it. It is the reference learner of the online contract
(:mod:`optarium.online.learner`, checked by :mod:`optarium.testing.online`).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from optarium._core.validation import check_positive, check_type
from optarium.online.learner import LossFn

__all__ = ["OnlineGradientDescent"]


class OnlineGradientDescent:
    """Projected OGD on a domain with ``project`` and ``diameter`` (:mod:`optarium.online.domains`).

    Args:
        x0: the first point (projected onto the domain); its dtype and device are the learner's.
        domain: the feasible set, e.g. :class:`~optarium.online.domains.Ball`.
        lr: ``"adaptive"`` (AdaGrad-norm, see the module docstring) or a base step :math:`\\eta > 0`
            (:math:`\\eta_t = \\eta/\\sqrt t`).

    >>> from optarium.online.domains import Ball
    >>> ogd = OnlineGradientDescent(torch.zeros(2, dtype=torch.float64), Ball(1.0))
    >>> ogd.update(lambda x: (x - 3.0).pow(2).sum())
    >>> ogd.predict()  # eta = 2 / sqrt(2 * 72) from the gradient (-6, -6), then onto the unit ball
    tensor([0.7071, 0.7071], dtype=torch.float64)
    """

    def __init__(self, x0: torch.Tensor, domain: Any, *, lr: float | str = "adaptive") -> None:
        check_type("x0", x0, torch.Tensor)
        if x0.ndim != 1 or not x0.is_floating_point():
            raise ValueError(f"x0: must be a 1-d floating tensor, got shape {tuple(x0.shape)} {x0.dtype}")
        if not (hasattr(domain, "project") and hasattr(domain, "diameter")):
            raise TypeError(f"domain: must have project() and diameter(), got {type(domain).__name__}")
        if isinstance(lr, str):
            if lr != "adaptive":
                raise ValueError(f"lr: must be 'adaptive' or a positive number, got {lr!r}")
        else:
            lr = check_positive("lr", lr)
        self.domain = domain
        self.lr = lr
        self.diameter = float(domain.diameter(x0.shape[0]))
        self.x = domain.project(x0.detach().clone())
        self.t = 0
        self.grad_sq_sum = 0.0

    def predict(self) -> torch.Tensor:
        """The current point :math:`x_t` (a copy; no state change)."""
        return self.x.clone()

    def step_size(self) -> float:
        """:math:`\\eta_t` for the round just observed (``inf`` before any non-zero gradient, adaptive)."""
        if self.lr == "adaptive":
            return self.diameter / math.sqrt(2.0 * self.grad_sq_sum) if self.grad_sq_sum > 0 else math.inf
        return float(self.lr) / math.sqrt(max(self.t, 1))

    def update(self, loss_fn: LossFn, constraint_fn: LossFn | None = None) -> None:
        """Take the gradient of ``loss_fn`` at :math:`x_t` and make the projected step (constraint unused)."""
        x = self.x.clone().requires_grad_(True)
        with torch.enable_grad():
            (g,) = torch.autograd.grad(loss_fn(x), x)
        self.t += 1
        self.grad_sq_sum += float(g.pow(2).sum())
        eta = self.step_size()
        if math.isfinite(eta):
            self.x = self.domain.project(self.x - eta * g.detach())
