r"""Stateless gradient transforms shared by optimizers.

``sign_power`` is GradPower's transform (Wang et al., "GradPower: Powering Gradients for Faster Language Model
Pre-Training", ICML 2026, arXiv:2505.24275):

.. math::  \varphi_p(g)_i = \operatorname{sign}(g_i)\,|g_i|^p, \qquad p > 0.

It is odd, maps 0 to 0, and composes as :math:`\varphi_p \circ \varphi_q = \varphi_{pq}`. Half-precision
inputs (float16, bfloat16) are computed in float32 and cast back: float16 overflows to +-inf when
:math:`|g| > 65504^{1/p}` (about 1.6e3 at p = 1.5) and underflows to 0 when :math:`|g|^p < 6\cdot 10^{-8}`.
That is the format's range, documented rather than clamped.

Computation: for ``p >= 1`` as ``g * |g|^(p-1)`` (three passes, one allocation, and exact at ``p = 1``, where
``|g|^0 = 1``; zeros stay zero since ``0^(p-1)`` is 0 or 1); for ``p < 1`` as ``sign(g) * |g|^p`` so zeros
do not meet ``0^(p-1) = inf``. The two forms agree to a couple of ulps. On the CPU the power itself
(libm ``pow``, not vectorised) dominates the cost.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from optarium._core.validation import check_positive

__all__ = ["foreach_sign_power", "sign_power"]

_LOW_PRECISION = (torch.float16, torch.bfloat16)


def sign_power(grad: torch.Tensor, p: float) -> torch.Tensor:
    """Return ``sign(grad) * |grad| ** p`` elementwise as a new tensor of ``grad``'s dtype and device.

    Args:
        grad: any floating tensor.
        p: the power, finite and > 0.
    """
    p = check_positive("p", p)
    work = grad.float() if grad.dtype in _LOW_PRECISION else grad
    if p >= 1.0:
        out = work.abs().pow_(p - 1.0).mul_(work)
    else:
        out = work.abs().pow_(p).mul_(work.sign())
    return out.to(grad.dtype)


def foreach_sign_power(grads: Sequence[torch.Tensor], p: float) -> list[torch.Tensor]:
    """:func:`sign_power` over a list of tensors with ``torch._foreach_*`` kernels (new tensors).

    Half-precision tensors are upcast to float32 for the computation and cast back, as in :func:`sign_power`.
    """
    p = check_positive("p", p)
    if not grads:
        return []
    low = [g.dtype in _LOW_PRECISION for g in grads]
    work = [g.float() if lp else g for g, lp in zip(grads, low, strict=True)]
    out = torch._foreach_abs(work)
    if p >= 1.0:
        torch._foreach_pow_(out, p - 1.0)
        torch._foreach_mul_(out, work)
    else:
        torch._foreach_pow_(out, p)
        torch._foreach_mul_(out, torch._foreach_sign(work))
    if any(low):
        out = [o.to(g.dtype) if lp else o for o, g, lp in zip(out, grads, low, strict=True)]
    return out
