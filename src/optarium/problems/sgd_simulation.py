r"""Batched simulation of (clipped, projected) SGD on a noisy gradient oracle, for tail studies.

:func:`simulate` runs ``K`` step-size / clipping settings times ``seeds`` noise seeds as one batched tensor
program: with the oracle's gradient :math:`\nabla f`, additive noise :math:`u_t` (shared by every setting:
common random numbers), the clipping :math:`\operatorname{clip}_\tau(g) = \min(1, \tau/\lVert g\rVert)\,g`
(:func:`optarium.optim.clip_by_norm`, :math:`\tau = \infty` is plain SGD) and an optional projection onto the
ball of radius :math:`r`,

.. math:: x_{t+1} = \Pi_r\big(x_t - \eta\,\operatorname{clip}_\tau(\nabla f(x_t) + u_t)\big).

It gives the same iterates as running :class:`optarium.optim.ClipSGD` once per seed (tested), thousands of
times faster, so the distribution of the final metric over seeds (its upper quantiles, :func:`quantile`)
can be measured. Used by the clip-sgd-heavy-tail experiment on
:class:`~optarium.problems.weakly_convex.WeaklyConvexOracle` with :mod:`optarium.problems.heavy_tail` noise.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from optarium._core.validation import check_int, check_probability

__all__ = ["quantile", "simulate"]


def quantile(values: Sequence[float] | torch.Tensor, q: float) -> float:
    """The lower ``q`` quantile (inverted CDF: the ceil(q n)-th smallest value); +inf values are allowed.

    NaN for no values. ``q`` in [0, 1].
    """
    q = check_probability("q", q)
    v = torch.sort(torch.as_tensor(values, dtype=torch.float64).flatten()).values
    if v.numel() == 0:
        return math.nan
    k = min(max(math.ceil(q * v.numel()) - 1, 0), v.numel() - 1)
    return float(v[k])


@torch.no_grad()
def simulate(
    problem: Any,
    noise: Any,
    lrs: Sequence[float],
    clips: Sequence[float],
    *,
    seeds: int,
    steps: int,
    generator: torch.Generator,
    chunk: int = 50,
    radius: float | None = None,
    random_iterate: bool = False,
    check: Callable[[], None] | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Run K = len(lrs) settings x ``seeds`` noise seeds of (clipped, projected) SGD as one batched program.

    Args:
        problem: an oracle with ``grad`` (batched over leading dimensions), ``metric``, ``x0`` and ``dim``
            (e.g. :class:`~optarium.problems.weakly_convex.WeaklyConvexOracle`).
        noise: a sampler with ``sample(shape, generator)`` (e.g. :mod:`optarium.problems.heavy_tail`).
        lrs: the K step sizes. clips: the K clipping levels (``inf``: no clipping).
        seeds: number of noise seeds. steps: iterations.
        generator: the noise stream (draws ``chunk`` steps of noise at a time, in order).
        chunk: steps of noise drawn per call of ``noise.sample`` (it fixes the stream's layout).
        radius: project onto the ball of this radius after each step (projected SGD), or None.
        random_iterate: also measure an iterate :math:`x_R`, R uniform on {0, ..., steps - 1} per seed.
        check: called after every chunk (a deadline check, for instance).

    Every setting sees the same noise draws (common random numbers). Returns the metric at the last iterate
    [K, seeds] (+inf where a run became non-finite) and, if ``random_iterate``, at an iterate x_R with R
    uniform on {0, ..., steps - 1} per seed (drawn first from ``generator``).
    """
    from optarium.optim.clip_sgd import clip_by_norm

    if len(lrs) != len(clips) or not len(lrs):
        raise ValueError(f"clips: must have one entry per step size ({len(lrs)}), got {len(clips)}")
    seeds = check_int("seeds", seeds, minimum=1)
    steps = check_int("steps", steps, minimum=0)
    chunk = check_int("chunk", chunk, minimum=1)
    k, d = len(lrs), problem.dim
    lr = torch.tensor(lrs, dtype=torch.float64).view(k, 1, 1)
    clip = torch.tensor(clips, dtype=torch.float64).view(k, 1, 1)
    any_clip = bool(torch.isfinite(clip).any())
    x = problem.x0.expand(k, seeds, d).clone()
    r_idx = torch.randint(0, steps, (seeds,), generator=generator) if random_iterate else None
    x_r = x.clone() if random_iterate else None
    t = 0
    while t < steps:
        n = min(chunk, steps - t)
        u = noise.sample((n, seeds, d), generator)
        for i in range(n):
            if random_iterate and r_idx is not None and x_r is not None:
                hit = (r_idx == t + i).view(1, seeds, 1)
                x_r = torch.where(hit, x, x_r)
            g = problem.grad(x) + u[i]
            if any_clip:
                g = clip_by_norm(g, clip)
            x = x - lr * g
            if radius is not None:
                norm = torch.linalg.vector_norm(x, dim=-1, keepdim=True)
                x = x * torch.clamp(radius / norm, max=1.0)
        t += n
        if check is not None:
            check()

    def measure(z: torch.Tensor) -> torch.Tensor:
        bad = ~torch.isfinite(z).all(-1)
        safe = torch.where(bad.unsqueeze(-1), torch.zeros_like(z), z)
        val = problem.metric(safe)
        return torch.where(bad | ~torch.isfinite(val), torch.full_like(val, math.inf), val)

    return measure(x), (measure(x_r) if x_r is not None else None)
