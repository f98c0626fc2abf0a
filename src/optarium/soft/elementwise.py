"""Soft elementwise operators: sigmoidal, softrelu, heaviside, sign, abs, relu, clamp, round.

Reference: A. Paulus, A. R. Geist, V. Musil, S. Hoffmann, O. Beker, G. Martius, "SoftJAX & SoftTorch:
Empowering Automatic Differentiation Libraries with Informative Gradients", ICML 2026, arXiv:2603.08824.
Same names, signatures, defaults and modes as SoftTorch 0.1.1; pure torch; dtype/device follow the input.

Everything is built on a sigmoidal sigma_s (t = x / s, u = t / 5; the piecewise modes act on |u| <= 1 so
their transition width matches the logistic's; 0 below, 1 above):

* ``smooth``: sigma = logistic(t)                                  (C-infinity)
* ``c0``:     sigma = (u + 1) / 2                                  (continuous ramp)
* ``c1``:     sigma = -u^3/4 + 3u/4 + 1/2                          (cubic smoothstep, C1)
* ``c2``:     sigma = 3u^5/16 - 5u^3/8 + 15u/16 + 1/2              (quintic smoothstep, C2)
* ``_c1_pnorm``: sigma = (u + sqrt(2 - u^2))^2 / 4 (closed-form 2-point argmax with a p = 3/2 regulariser)
* ``_c2_pnorm``: sigma = (tau + u/2)^3, tau the real root of tau^3 + (3u^2/4) tau - 1/2 = 0 (p = 4/3); we use
  the Cardano form tau = c - u^2 / (4c), c = cbrt(1/4 + sqrt(1/16 + u^6/64)), which is smooth at u = 0.

The non-gated soft ReLU is s * integral of sigma (one smoothness class above sigma): smooth s*softplus(t);
c0 5s(u^2/4 + u/2 + 1/4); c1 5s(-u^4/16 + 3u^2/8 + u/2 + 3/16);
c2 5s(u^6/32 - 5u^4/32 + 15u^2/32 + u/2 + 5/32); 0 for u < -1 and x for u > 1.
The gated ReLU is x * sigma(x) (SiLU-like). Derived operators:
heaviside = sigma, sign = 2 sigma - 1, abs = x * sign(x), relu = softrelu, clamp(x, a, b) = a + relu(x - a)
- relu(x - b), round(x) = sum over m in floor(x) + {-R..R} of m [sigma(x - m + 1/2) - sigma(x - m - 1/2)]
(floor detached, R = ``neighbor_radius``).

``mode="hard"`` returns the exact torch result (``torch.heaviside(x, 0.5)``, ``torch.sign``, ...). Beyond
SoftTorch: ``sigmoidal``/``softrelu`` also accept ``mode="hard"`` (the s -> 0 limits), ``clamp`` accepts
``a=None`` or ``b=None`` (one-sided, like ``torch.clamp``), and the piecewise modes clamp u before evaluating
their polynomial, so huge inputs never produce inf * 0 = NaN gradients.
"""

from __future__ import annotations

from typing import Any

import torch

from optarium._core.validation import check_int
from optarium.soft._common import (
    MODES,
    SoftBool,
    _unchecked,
    check_mode,
    check_nan,
    check_softness,
    ensure_float,
)

__all__ = ["abs", "clamp", "heaviside", "relu", "round", "sigmoidal", "sign", "softrelu"]

#: Modes accepted by :func:`sigmoidal` and :func:`softrelu` (MODES plus SoftTorch's private p-norm variants).
SIGMOIDAL_MODES: tuple[str, ...] = (*MODES, "_c1_pnorm", "_c2_pnorm")

# Polynomial coefficients on |u| <= 1, highest power first (restated from the formulas in the docstring).
_SIG_POLY = {
    "c0": (0.5, 0.5),
    "c1": (-0.25, 0.0, 0.75, 0.5),
    "c2": (0.1875, 0.0, -0.625, 0.0, 0.9375, 0.5),
}
_RELU_POLY = {
    "c0": (0.25, 0.5, 0.25),
    "c1": (-0.0625, 0.0, 0.375, 0.5, 0.1875),
    "c2": (0.03125, 0.0, -0.15625, 0.0, 0.46875, 0.5, 0.15625),
}


def _horner(coeffs: tuple[float, ...], u: torch.Tensor) -> torch.Tensor:
    y = torch.full_like(u, coeffs[0])
    for c in coeffs[1:]:
        y = y * u + c
    return y


def _c2_pnorm_core(u: torch.Tensor) -> torch.Tensor:
    """sigma on |u| <= 1 for ``_c2_pnorm`` (u already clamped)."""
    u2 = u * u
    c = (0.25 + torch.sqrt(0.0625 + u2 * u2 * u2 / 64.0)) ** (1.0 / 3.0)
    tau = c - u2 / (4.0 * c)
    return (tau + 0.5 * u) ** 3


def _sigma_unit(u: torch.Tensor, mode: str) -> torch.Tensor:
    """sigma of a piecewise mode as a function of u (0 below -1, 1 above +1)."""
    uc = u.clamp(-1.0, 1.0)
    if mode in _SIG_POLY:
        y = _horner(_SIG_POLY[mode], uc)
    elif mode == "_c1_pnorm":
        y = (uc + torch.sqrt((2.0 - uc * uc).clamp_min(0.0))).square() / 4.0
    else:  # _c2_pnorm
        y = _c2_pnorm_core(uc)
    return torch.where(u < -1.0, torch.zeros_like(y), torch.where(u < 1.0, y, torch.ones_like(y)))


def sigmoidal(x: torch.Tensor, softness: Any = 0.1, mode: str = "smooth") -> SoftBool:
    """S-shaped relaxation of the Heaviside step, sigma_s(x), with values in [0, 1].

    Modes ``smooth`` (logistic(x/s)), ``c0``/``c1``/``c2`` (linear / cubic / quintic smoothstep on
    |x| <= 5s), ``_c1_pnorm``/``_c2_pnorm`` (p-norm argmax closed forms) and ``hard`` (heaviside(x, 0.5)).
    sigma(0) = 1/2 in every mode.
    """
    x = check_nan("x", ensure_float(x))
    softness = check_softness("softness", softness)
    check_mode(mode, SIGMOIDAL_MODES)
    if mode == "hard":
        return torch.heaviside(x, torch.full((), 0.5, dtype=x.dtype, device=x.device))
    t = x / softness
    if mode == "smooth":
        return torch.sigmoid(t)
    return _sigma_unit(t / 5.0, mode)


def softrelu(x: torch.Tensor, softness: Any = 0.1, mode: str = "smooth", gated: bool = False) -> torch.Tensor:
    """Soft ReLU: non-gated s * integral of sigma (softplus-like) or gated x * sigma(x) (SiLU-like).

    Non-gated: smooth s*softplus(x/s); c0/c1/c2 the antiderivatives of the smoothsteps (one smoothness class
    above sigma), exactly 0 for x < -5s and x for x > 5s. ``mode="hard"`` gives ``torch.relu``.
    """
    x = check_nan("x", ensure_float(x))
    softness = check_softness("softness", softness)
    check_mode(mode, SIGMOIDAL_MODES)
    if mode == "hard":
        return torch.relu(x)
    if gated:
        with _unchecked():
            return x * sigmoidal(x, softness, mode)
    t = x / softness
    if mode == "smooth":
        # log(1 + e^t) without F.softplus's switch to the identity above t = 20 (exact relu(x) - relu(-x) = x)
        return torch.logaddexp(t, torch.zeros_like(t)) * softness
    u = t / 5.0
    uc = u.clamp(-1.0, 1.0)
    if mode in _RELU_POLY:
        g = _horner(_RELU_POLY[mode], uc)
    elif mode == "_c1_pnorm":
        inside = (2.0 - uc * uc).clamp_min(0.0)
        g = uc / 2.0 - inside * torch.sqrt(inside) / 6.0 + 2.0 / 3.0
    else:  # _c2_pnorm: F(u) = 3/4 + u g - 3/4 ((1 - g)^(4/3) + g^(4/3)), g = sigma(u)
        sg = _c2_pnorm_core(uc).clamp(0.0, 1.0)
        g = 0.75 + uc * sg - 0.75 * ((1.0 - sg) ** (4.0 / 3.0) + sg ** (4.0 / 3.0))
    y = 5.0 * softness * g
    return torch.where(u < -1.0, torch.zeros_like(y), torch.where(u < 1.0, y, x))


def heaviside(x: torch.Tensor, softness: Any = 0.1, mode: str = "smooth") -> SoftBool:
    """Soft ``torch.heaviside(x, 0.5)``: sigma_s(x) (hard mode: the exact torch result)."""
    check_mode(mode, MODES)
    return sigmoidal(x, softness, mode)


def _hard(op: Any, x: torch.Tensor, softness: Any) -> torch.Tensor:
    check_softness("softness", softness)
    return op(check_nan("x", ensure_float(x)))


def sign(x: torch.Tensor, softness: Any = 0.1, mode: str = "smooth") -> torch.Tensor:
    """Soft ``torch.sign``: 2 sigma_s(x) - 1, values in [-1, 1]."""
    check_mode(mode, MODES)
    if mode == "hard":
        return _hard(torch.sign, x, softness)
    return sigmoidal(x, softness, mode) * 2.0 - 1.0


def abs(x: torch.Tensor, softness: Any = 0.1, mode: str = "smooth") -> torch.Tensor:
    """Soft ``torch.abs``: x * sign_s(x) (>= 0, below |x| by at most a few s)."""
    check_mode(mode, MODES)
    if mode == "hard":
        return _hard(torch.abs, x, softness)
    x = check_nan("x", ensure_float(x))
    with _unchecked():
        return x * sign(x, softness, mode)


def relu(x: torch.Tensor, softness: Any = 0.1, mode: str = "smooth", gated: bool = False) -> torch.Tensor:
    """Soft ``torch.relu``: :func:`softrelu` (non-gated softplus-like by default, gated SiLU-like)."""
    check_mode(mode, MODES)
    return softrelu(x, softness, mode, gated)


def clamp(
    x: torch.Tensor,
    a: torch.Tensor | float | None,
    b: torch.Tensor | float | None,
    softness: Any = 0.1,
    mode: str = "smooth",
    gated: bool = False,
) -> torch.Tensor:
    """Soft ``torch.clamp(x, a, b)`` = a + relu_s(x - a) - relu_s(x - b).

    ``a`` / ``b`` may be tensors (broadcast) or numbers; beyond SoftTorch either may be ``None`` for a
    one-sided clamp (x - relu_s(x - b), resp. a + relu_s(x - a)), like ``torch.clamp``.
    """
    check_mode(mode, MODES)
    softness = check_softness("softness", softness)
    if a is None and b is None:
        raise ValueError("a: at least one of a and b must not be None")
    x = check_nan("x", ensure_float(x))
    check_nan("a", a)
    check_nan("b", b)
    if mode == "hard":
        a_t = None if a is None else torch.as_tensor(a, dtype=x.dtype, device=x.device)
        b_t = None if b is None else torch.as_tensor(b, dtype=x.dtype, device=x.device)
        return torch.clamp(x, a_t, b_t)
    with _unchecked():
        if a is None:
            return x - softrelu(x - b, softness, mode, gated)
        if b is None:
            return a + softrelu(x - a, softness, mode, gated)
        return a + softrelu(x - a, softness, mode, gated) - softrelu(x - b, softness, mode, gated)


def round(
    x: torch.Tensor, softness: Any = 0.1, mode: str = "smooth", neighbor_radius: int = 5
) -> torch.Tensor:
    """Soft ``torch.round``: a sum of soft steps at the half-integers around x.

    round_s(x) = sum_{m in floor(x) + {-R..R}} m [sigma_s(x - m + 1/2) - sigma_s(x - m - 1/2)], with floor(x)
    detached and R = ``neighbor_radius`` (>= 0). Hard mode: ``torch.round`` (half to even).
    """
    check_mode(mode, MODES)
    softness = check_softness("softness", softness)
    r = check_int("neighbor_radius", neighbor_radius, minimum=0)
    x = check_nan("x", ensure_float(x))
    if mode == "hard":
        return torch.round(x)
    offsets = torch.arange(-r, r + 1, dtype=x.dtype, device=x.device)
    m = torch.floor(x).detach().unsqueeze(-1) + offsets
    xe = x.unsqueeze(-1)
    with _unchecked():
        w = sigmoidal(xe - m + 0.5, softness, mode) - sigmoidal(xe - m - 0.5, softness, mode)
    return (m * w).sum(-1)
