"""Relaxed samplers of discrete random variables, with straight-through variants (beyond SoftTorch 0.1.1).

SoftJAX (Paulus et al., "SoftJAX & SoftTorch: Empowering Automatic Differentiation Libraries with Informative
Gradients", ICML 2026, arXiv:2603.08824) ships a ``softjax.random`` module; SoftTorch 0.1.1 has none. This
module gives the PyTorch side the three core samplers, built from the soft operators of this package so
they share the softness / mode conventions. Each draws its noise from an explicit ``torch.Generator`` (or
the global one) in the dtype and on the device of its parameters:

* :func:`categorical` (Gumbel-softmax / concrete, Jang, Gu & Poole 2017, arXiv:1611.01144; Maddison, Mnih &
  Teh 2017, arXiv:1611.00712): with Gumbel noise G_i = -log(-log U_i),
  ``y = simplex_projection(logits + G, softness, mode)`` along the last axis. ``smooth`` is exactly
  softmax((logits + G) / s) (temperature s); ``c0`` is a sparse (sparsemax) relaxation; ``c1``/``c2`` the
  p = 3/2, 4/3 projections. ``hard`` is one_hot(argmax(logits + G)), an exact sample of
  Categorical(softmax(logits)) (Gumbel-max trick).
* :func:`bernoulli` (binary concrete, Maddison et al. 2017, appendix): with logistic noise
  L = log U - log(1 - U), ``y = sigmoidal(logits + L, softness, mode)``; ``smooth`` is
  logistic((logits + L) / s). ``hard`` is 1[logits + L > 0], an exact Bernoulli(sigmoid(logits)) sample.
* :func:`permutation` (relaxed Plackett-Luce via soft sorting, Grover et al. 2019, arXiv:1903.08850
  "stochastic NeuralSort"): with Gumbel noise, ``P = argsort(scores + G, descending=True, softness, mode,
  method)``, a soft permutation matrix whose row i is the distribution of the item at rank i. ``hard`` is
  the one-hot of argsort(scores + G, descending=True), an exact sample of the Plackett-Luce distribution
  with weights exp(scores) (Gumbel-top-k trick, Yellott 1977 / Kool et al. 2019). The soft-sort method is
  any of :func:`optarium.soft.argsort`'s (``neuralsort`` default, ``softsort``, ``ot`` - close to
  Gumbel-Sinkhorn, Mena et al. 2018 - and ``sorting_network``).

The ``*_st`` variants draw the noise once and return ``hard.detach() + (soft - soft.detach())`` with the
hard and soft samples computed from the *same* noise: the forward value is an exact discrete sample, the
gradient the relaxed one (the straight-through Gumbel estimator). Every sampler accepts ``sample_shape``
(prepended to the parameters' shape, as in ``torch.distributions``) and broadcasts over leading dims.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import torch

from optarium.soft._common import (
    MODES,
    SoftBool,
    SoftIndex,
    _unchecked,
    check_mode,
    check_nan,
    check_softness,
)
from optarium.soft.straight_through import st_combine

__all__ = [
    "bernoulli",
    "bernoulli_st",
    "categorical",
    "categorical_st",
    "gumbel_noise",
    "logistic_noise",
    "permutation",
    "permutation_st",
]


def _check_params(name: str, t: Any) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: must be a torch.Tensor, got {type(t).__name__}")
    if not t.is_floating_point():
        raise TypeError(f"{name}: must be a floating tensor, got {t.dtype}")
    return check_nan(name, t)


def _check_generator(generator: Any) -> torch.Generator | None:
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator: must be a torch.Generator or None, got {type(generator).__name__}")
    return generator


def _shape(sample_shape: Any, base: torch.Size) -> torch.Size:
    if isinstance(sample_shape, numbers.Integral) and not isinstance(sample_shape, bool):
        sample_shape = (int(sample_shape),)
    if not isinstance(sample_shape, Sequence) or not all(
        isinstance(s, numbers.Integral) and not isinstance(s, bool) and s >= 0 for s in sample_shape
    ):
        raise ValueError(f"sample_shape: must be a sequence of non-negative ints, got {sample_shape!r}")
    return torch.Size(tuple(int(s) for s in sample_shape)) + base


def _uniform_open(shape: torch.Size, like: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """U(0, 1) strictly inside (0, 1) in ``like``'s dtype/device."""
    u = torch.rand(shape, generator=generator, dtype=like.dtype, device=like.device)
    tiny = torch.finfo(like.dtype).tiny
    return u.clamp(tiny, 1.0 - torch.finfo(like.dtype).eps / 2)


def gumbel_noise(
    shape: Sequence[int], like: torch.Tensor, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Standard Gumbel noise -log(-log U) of ``shape`` in ``like``'s dtype and device."""
    return -torch.log(-torch.log(_uniform_open(torch.Size(shape), like, generator)))


def logistic_noise(
    shape: Sequence[int], like: torch.Tensor, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Standard logistic noise log U - log(1 - U) of ``shape`` in ``like``'s dtype and device."""
    u = _uniform_open(torch.Size(shape), like, generator)
    return torch.log(u) - torch.log1p(-u)


def _categorical_pair(
    logits: torch.Tensor, softness: Any, mode: str, sample_shape: Any, generator: Any, need_soft: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    logits = _check_params("logits", logits)
    softness = check_softness("softness", softness)
    check_mode(mode, MODES)
    generator = _check_generator(generator)
    if logits.ndim == 0 or logits.shape[-1] == 0:
        raise ValueError(f"logits: must have a non-empty last axis, got shape {tuple(logits.shape)}")
    z = logits + gumbel_noise(_shape(sample_shape, logits.shape), logits, generator)
    hard = torch.nn.functional.one_hot(z.detach().argmax(-1), z.shape[-1]).to(z.dtype)
    if mode == "hard" or not need_soft:
        return hard, None
    from optarium.soft._simplex import simplex_projection

    return hard, simplex_projection(z, -1, softness, mode)


def categorical(
    logits: torch.Tensor,
    softness: float = 0.1,
    mode: str = "smooth",
    *,
    sample_shape: Sequence[int] = (),
    generator: torch.Generator | None = None,
) -> SoftIndex:
    """Relaxed one-hot sample of Categorical(softmax(logits)) over the last axis (Gumbel-softmax).

    Returns a SoftIndex of shape ``sample_shape + logits.shape``: simplex_projection(logits + G) with the
    regulariser of ``mode`` at temperature ``softness``; ``mode="hard"`` gives an exact one-hot sample.
    """
    hard, soft = _categorical_pair(logits, softness, mode, sample_shape, generator, mode != "hard")
    return hard if soft is None else soft


def categorical_st(
    logits: torch.Tensor,
    softness: float = 0.1,
    mode: str = "smooth",
    *,
    sample_shape: Sequence[int] = (),
    generator: torch.Generator | None = None,
) -> SoftIndex:
    """Straight-through Gumbel-softmax: exact one-hot sample forward, the relaxed sample's gradient back."""
    hard, soft = _categorical_pair(logits, softness, mode, sample_shape, generator, True)
    return hard if soft is None else st_combine(hard, soft)


def _bernoulli_pair(
    logits: torch.Tensor, softness: Any, mode: str, sample_shape: Any, generator: Any
) -> tuple[torch.Tensor, torch.Tensor | None]:
    logits = _check_params("logits", logits)
    softness = check_softness("softness", softness)
    check_mode(mode, MODES)
    generator = _check_generator(generator)
    z = logits + logistic_noise(_shape(sample_shape, logits.shape), logits, generator)
    hard = (z.detach() > 0).to(z.dtype)
    if mode == "hard":
        return hard, None
    from optarium.soft.elementwise import sigmoidal

    with _unchecked():
        return hard, sigmoidal(z, softness, mode)


def bernoulli(
    logits: torch.Tensor,
    softness: float = 0.1,
    mode: str = "smooth",
    *,
    sample_shape: Sequence[int] = (),
    generator: torch.Generator | None = None,
) -> SoftBool:
    """Relaxed sample of Bernoulli(sigmoid(logits)) (binary concrete): sigmoidal(logits + L, softness, mode).

    Shape ``sample_shape + logits.shape``; values in [0, 1]; ``mode="hard"`` gives exact 0/1 samples.
    """
    hard, soft = _bernoulli_pair(logits, softness, mode, sample_shape, generator)
    return hard if soft is None else soft


def bernoulli_st(
    logits: torch.Tensor,
    softness: float = 0.1,
    mode: str = "smooth",
    *,
    sample_shape: Sequence[int] = (),
    generator: torch.Generator | None = None,
) -> SoftBool:
    """Straight-through binary concrete: an exact 0/1 sample forward, the relaxed sample's gradient back."""
    hard, soft = _bernoulli_pair(logits, softness, mode, sample_shape, generator)
    return hard if soft is None else st_combine(hard, soft)


def _permutation_pair(
    scores: torch.Tensor,
    softness: Any,
    mode: str,
    method: str,
    standardize: bool,
    sample_shape: Any,
    generator: Any,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    scores = _check_params("scores", scores)
    softness = check_softness("softness", softness)
    check_mode(mode, MODES)
    generator = _check_generator(generator)
    if scores.ndim == 0 or scores.shape[-1] == 0:
        raise ValueError(f"scores: must have a non-empty last axis, got shape {tuple(scores.shape)}")
    from optarium.soft.axiswise import argsort

    z = scores + gumbel_noise(_shape(sample_shape, scores.shape), scores, generator)
    with _unchecked():
        hard = argsort(z.detach(), dim=-1, descending=True, mode="hard", method=method)
        if mode == "hard":
            return hard, None
        soft = argsort(z, -1, True, softness, mode, method, standardize)
    return hard, soft


def permutation(
    scores: torch.Tensor,
    softness: float = 0.1,
    mode: str = "smooth",
    method: str = "neuralsort",
    standardize: bool = True,
    *,
    sample_shape: Sequence[int] = (),
    generator: torch.Generator | None = None,
) -> SoftIndex:
    """Relaxed Plackett-Luce sample: the soft descending argsort of the Gumbel-perturbed ``scores``.

    ``scores`` (..., n) are log-weights; returns a soft permutation matrix of shape
    ``sample_shape + scores.shape + (n,)`` whose row i (rank i, largest first) is a distribution over the n
    items. ``method``/``standardize`` as in :func:`optarium.soft.argsort`; ``mode="hard"`` gives the one-hot
    of an exact Plackett-Luce sample.
    """
    hard, soft = _permutation_pair(scores, softness, mode, method, standardize, sample_shape, generator)
    return hard if soft is None else soft


def permutation_st(
    scores: torch.Tensor,
    softness: float = 0.1,
    mode: str = "smooth",
    method: str = "neuralsort",
    standardize: bool = True,
    *,
    sample_shape: Sequence[int] = (),
    generator: torch.Generator | None = None,
) -> SoftIndex:
    """Straight-through relaxed Plackett-Luce: exact permutation matrix forward, the soft one's gradient."""
    hard, soft = _permutation_pair(scores, softness, mode, method, standardize, sample_shape, generator)
    return hard if soft is None else st_combine(hard, soft)
