"""Seeded synthetic distribution-shift problems: spurious correlation (group shift), long tail, covariate.

Spec ``../shared/papers/robust-satisficing.md`` (Quick and Full). Each generator returns a dict of splits
``{"train", "val", "test"}`` -> :class:`ShiftSplit` (features ``x`` float32, target ``y``, group ``g``).

- :func:`spurious_correlation`: Waterbirds-like. Label y in {0, 1}; 5 core dims (2y-1)*0.5 + N(0, 1); one
  spurious dim (2a-1)*2 + 0.5 N(0, 1) with attribute a; 10 noise dims. Training: a = y with probability
  ``p_major`` (groups g = 2y + a); validation and test are group-balanced. ``p_major = 0.5`` is "no shift".
- :func:`long_tail`: a ``n_classes``-class Gaussian mixture whose training class sizes fall geometrically by
  the imbalance ratio; validation and test are class-balanced (g = class).
- :func:`long_tail_digits`: a long-tailed subsample of scikit-learn's bundled 8x8 digits (spec Full (a)):
  per class, disjoint class-balanced validation and test draws, then a training subsample whose class sizes
  fall geometrically by the imbalance ratio; the order of the classes (which digit is rare) is drawn from
  the seed (g = class).
- :func:`covariate_shift`: regression y = sin(2 x_1) + 0.5 x_2 + 0.3 x_1^2 + noise; training x_1 mostly < 0,
  test x_1 mostly > 0 (g = 1 where x_1 > 0).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from optarium._core.validation import check_int, check_positive, check_probability

__all__ = ["ShiftSplit", "covariate_shift", "long_tail", "long_tail_digits", "spurious_correlation"]


@dataclass(frozen=True)
class ShiftSplit:
    """One split: features ``x`` (n, d), targets ``y`` (class labels or regression values), groups ``g``."""

    x: Tensor
    y: Tensor
    g: Tensor


def _spurious(y: Tensor, a: Tensor, gen: torch.Generator, n_core: int, n_noise: int) -> ShiftSplit:
    n = y.numel()
    core = (2.0 * y.float() - 1.0)[:, None] * 0.5 + torch.randn(n, n_core, generator=gen)
    spur = (2.0 * a.float() - 1.0)[:, None] * 2.0 + 0.5 * torch.randn(n, 1, generator=gen)
    noise = torch.randn(n, n_noise, generator=gen)
    return ShiftSplit(torch.cat([core, spur, noise], 1), y.long(), (2 * y + a).long())


def spurious_correlation(
    seed: int,
    *,
    n_train: int = 4000,
    n_val_per_group: int = 250,
    n_test_per_group: int = 1000,
    p_major: float = 0.95,
    n_core: int = 5,
    n_noise: int = 10,
) -> dict[str, ShiftSplit]:
    """The spurious-correlation group-shift problem (4 groups g = 2y + a; training a = y w.p. ``p_major``)."""
    seed = check_int("seed", seed, minimum=0)
    n_train = check_int("n_train", n_train, minimum=4)
    nv = check_int("n_val_per_group", n_val_per_group, minimum=1)
    nt = check_int("n_test_per_group", n_test_per_group, minimum=1)
    p_major = check_probability("p_major", p_major)
    n_core = check_int("n_core", n_core, minimum=1)
    n_noise = check_int("n_noise", n_noise, minimum=0)
    gen = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 2, (n_train,), generator=gen)
    flip = torch.rand(n_train, generator=gen) >= p_major
    a = torch.where(flip, 1 - y, y)
    out = {"train": _spurious(y, a, gen, n_core, n_noise)}
    for name, m in (("val", nv), ("test", nt)):
        g = torch.arange(4).repeat_interleave(m)
        out[name] = _spurious(g // 2, g % 2, gen, n_core, n_noise)
    return out


def long_tail(
    seed: int,
    *,
    n_classes: int = 10,
    dim: int = 16,
    n_head: int = 500,
    imbalance: float = 100.0,
    n_val_per_class: int = 50,
    n_test_per_class: int = 200,
    spread: float = 1.0,
) -> dict[str, ShiftSplit]:
    """Long-tailed Gaussian mixture: class c has ``n_head * imbalance**(-c/(C-1))`` training samples (>=1)."""
    seed = check_int("seed", seed, minimum=0)
    n_classes = check_int("n_classes", n_classes, minimum=2)
    dim = check_int("dim", dim, minimum=1)
    n_head = check_int("n_head", n_head, minimum=1)
    imbalance = check_positive("imbalance", imbalance)
    if imbalance < 1.0:
        raise ValueError(f"imbalance: must be >= 1, got {imbalance}")
    nv = check_int("n_val_per_class", n_val_per_class, minimum=1)
    nt = check_int("n_test_per_class", n_test_per_class, minimum=1)
    spread = check_positive("spread", spread)
    gen = torch.Generator().manual_seed(seed)
    centers = spread * torch.randn(n_classes, dim, generator=gen)
    sizes = [max(1, round(n_head * imbalance ** (-c / (n_classes - 1)))) for c in range(n_classes)]

    def draw(counts: list[int]) -> ShiftSplit:
        y = torch.cat([torch.full((m,), c) for c, m in enumerate(counts)])
        x = centers[y] + torch.randn(y.numel(), dim, generator=gen)
        return ShiftSplit(x, y, y.clone())

    return {"train": draw(sizes), "val": draw([nv] * n_classes), "test": draw([nt] * n_classes)}


def long_tail_digits(
    seed: int,
    *,
    n_head: int = 90,
    imbalance: float = 100.0,
    n_val_per_class: int = 20,
    n_test_per_class: int = 60,
) -> dict[str, ShiftSplit]:
    """Long-tailed digits: the c-th class of a seeded class order keeps ``n_head * imbalance**(-c/9)`` (>= 1).

    Uses :func:`optarium.problems.datasets.load_digits` (1797 images, 174-183 per class). For every class a
    seeded permutation gives ``n_test_per_class`` test, then ``n_val_per_class`` validation images, then the
    training images from the rest; ``n_head + n_val_per_class + n_test_per_class`` must fit the smallest
    class (174). Features are the 64 pixel intensities in [0, 1], labels the digits (g = label).
    """
    from optarium.problems.datasets import load_digits

    seed = check_int("seed", seed, minimum=0)
    n_head = check_int("n_head", n_head, minimum=1)
    imbalance = check_positive("imbalance", imbalance)
    if imbalance < 1.0:
        raise ValueError(f"imbalance: must be >= 1, got {imbalance}")
    nv = check_int("n_val_per_class", n_val_per_class, minimum=1)
    nt = check_int("n_test_per_class", n_test_per_class, minimum=1)
    x, y = load_digits()
    smallest = int(torch.bincount(y).min())
    if n_head + nv + nt > smallest:
        raise ValueError(
            f"n_head: n_head + n_val_per_class + n_test_per_class must be <= {smallest}, "
            f"got {n_head + nv + nt}"
        )
    gen = torch.Generator().manual_seed(seed)
    order = torch.randperm(10, generator=gen)  # order[c] is the digit of rank c (rank 9 = rarest)
    parts: dict[str, list[Tensor]] = {"train": [], "val": [], "test": []}
    for rank in range(10):
        digit = int(order[rank])
        idx = torch.nonzero(y == digit).squeeze(1)
        idx = idx[torch.randperm(idx.numel(), generator=gen)]
        m = max(1, round(n_head * imbalance ** (-rank / 9)))
        parts["test"].append(idx[:nt])
        parts["val"].append(idx[nt : nt + nv])
        parts["train"].append(idx[nt + nv : nt + nv + m])
    out = {}
    for name, chunks in parts.items():
        sel = torch.cat(chunks)
        out[name] = ShiftSplit(x[sel], y[sel].long(), y[sel].long())
    return out


def covariate_shift(
    seed: int,
    *,
    n_train: int = 2000,
    n_val: int = 500,
    n_test: int = 2000,
    dim: int = 5,
    p_shifted_train: float = 0.05,
    noise: float = 0.1,
) -> dict[str, ShiftSplit]:
    """Regression under covariate shift: train/val x_1 > 0 w.p. ``p_shifted_train`` (else < 0), test w.p. 0.5.

    Groups: g = 1 where x_1 > 0 (the shifted part). Validation follows the training mixture.
    """
    seed = check_int("seed", seed, minimum=0)
    n_train = check_int("n_train", n_train, minimum=2)
    n_val = check_int("n_val", n_val, minimum=2)
    n_test = check_int("n_test", n_test, minimum=2)
    dim = check_int("dim", dim, minimum=2)
    p = check_probability("p_shifted_train", p_shifted_train)
    noise = check_positive("noise", noise)
    gen = torch.Generator().manual_seed(seed)

    def draw(n: int, p_pos: float) -> ShiftSplit:
        x = torch.randn(n, dim, generator=gen)
        pos = torch.rand(n, generator=gen) < p_pos
        x[:, 0] = torch.where(pos, x[:, 0].abs(), -x[:, 0].abs())
        y = (
            torch.sin(2 * x[:, 0])
            + 0.5 * x[:, 1]
            + 0.3 * x[:, 0] ** 2
            + noise * torch.randn(n, generator=gen)
        )
        return ShiftSplit(x, y, pos.long())

    return {"train": draw(n_train, p), "val": draw(n_val, p), "test": draw(n_test, 0.5)}
