r"""One SAM / USAM step with a given (constant or scheduled) learning rate: the baseline of SAM-Polyak.

Reference: P. Foret, A. Kleiner, H. Mobahi, B. Neyshabur, "Sharpness-Aware Minimization for Efficiently
Improving Generalization", ICLR 2021 (SAM, :math:`\lambda = 1`); M. Andriushchenko, N. Flammarion, "Towards
Understanding Sharpness-Aware Minimization", ICML 2022 (USAM, :math:`\lambda = 0`). The interpolation
:math:`\lambda` and the weight-decay rule are those of :class:`~optarium.optim.sam_polyak.SAMPolyak`, so the
two differ only in the step size: with the batch loss :math:`f_S` (the same batch in both passes),

.. math::
    g_t = \nabla f_S(x_t),\qquad
    e_t = x_t + \rho\Big(1 - \lambda + \frac{\lambda}{\max(\|g_t\|, 10^{-12})}\Big)\, g_t,\qquad
    x_{t+1} = x_t - \eta\,\big(\nabla f_S(e_t) + w\, x_t\big).

The norm runs over all ``params``. The parameters are restored to :math:`x_t` from a stored copy before the
descent (bit-exact), and both passes start from ``grad = None``, so the closure need not zero gradients.
:func:`sam_step` is a function, not an optimizer, because the baselines pass their own (possibly cosine
scheduled) ``lr`` at every call; it keeps no state.

Example:
    >>> import torch
    >>> from optarium.optim.sam import sam_step
    >>> x = torch.tensor([1.0, -2.0], dtype=torch.float64, requires_grad=True)
    >>> def closure():
    ...     loss = (x**2).sum()
    ...     loss.backward()
    ...     return loss
    >>> float(sam_step([x], closure, lr=0.1, rho=0.05))  # the loss at x_t
    5.0
    >>> [round(v, 6) for v in x.tolist()]  # x - 0.1 * 2 (x + 0.05 x / |x|)
    [0.795528, -1.591056]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from optarium._core.validation import check_finite, check_in_range, check_nonnegative, check_type

__all__ = ["sam_step"]


def sam_step(
    params: Sequence[torch.Tensor],
    closure: Callable[[], torch.Tensor],
    lr: float,
    rho: float,
    lambd: float = 1.0,
    weight_decay: float = 0.0,
) -> torch.Tensor:
    r"""One SAM (``lambd=1``) / USAM (``lambd=0``) step in place on ``params``; returns the loss at
    :math:`x_t`.

    Args:
        params: the tensors to update (leaf tensors with ``requires_grad``; all of them get a gradient).
        closure: recomputes the batch loss and calls ``backward()``; called twice, under
            ``torch.enable_grad()`` (at :math:`x_t`, then at the perturbed point :math:`e_t`).
        lr: the step size :math:`\eta` of this step (finite, >= 0).
        rho: the perturbation radius :math:`\rho` (>= 0).
        lambd: :math:`\lambda \in [0, 1]`, USAM (0) to SAM (1).
        weight_decay: :math:`w` (>= 0), an L2 term added to the perturbed gradient in the descent only.

    After the step ``p.grad`` holds :math:`\nabla f_S(e_t)` (without weight decay), as in
    :class:`~optarium.optim.sam_polyak.SAMPolyak`.
    """
    params = list(check_type("params", params, (list, tuple)))
    if not params or not all(isinstance(p, torch.Tensor) for p in params):
        raise TypeError("params: must be a non-empty sequence of tensors")
    if not callable(closure):
        raise TypeError(f"closure: must be callable, got {type(closure).__name__}")
    lr = check_finite("lr", lr)
    if lr < 0:
        raise ValueError(f"lr: must be >= 0, got {lr!r}")
    rho = check_nonnegative("rho", rho)
    lambd = check_in_range("lambd", lambd, 0.0, 1.0)
    weight_decay = check_nonnegative("weight_decay", weight_decay)
    for p in params:
        p.grad = None
    with torch.enable_grad():
        loss = closure()
    g = [p.grad for p in params]
    if any(v is None for v in g):
        raise ValueError("closure: left a parameter without a gradient (it must call backward on the loss)")
    norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(g))).clamp_min(1e-12)
    scale = rho * ((1.0 - lambd) + lambd / norm)
    with torch.no_grad():
        saved = [p.detach().clone() for p in params]
        torch._foreach_add_(params, torch._foreach_mul(g, scale))
    for p in params:
        p.grad = None
    with torch.enable_grad():
        closure()
    with torch.no_grad():
        torch._foreach_copy_(params, saved)
        ge = [p.grad for p in params]
        d = torch._foreach_add(ge, params, alpha=weight_decay) if weight_decay else ge
        torch._foreach_add_(params, d, alpha=-lr)
    return loss
