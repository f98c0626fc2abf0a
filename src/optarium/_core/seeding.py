"""Seeding: one integer seeds Python's ``random``, NumPy and torch, and derived seeds are stable.

``derive_seed(seed, "adamw", 3)`` gives the same integer in every process and Python version (it hashes with
BLAKE2, not Python's salted ``hash``), so a method x seed grid can hand each run an independent stream.
"""

from __future__ import annotations

import hashlib
import numbers
import random

import numpy as np
import torch

from optarium._core.validation import check_int

__all__ = ["derive_seed", "make_generator", "seed_everything"]

_MAX_SEED = 2**63 - 1


def seed_everything(seed: int) -> torch.Generator:
    """Seed ``random``, NumPy's global state and torch's default generators from ``seed``.

    Returns a fresh CPU ``torch.Generator`` seeded with ``seed`` for code that prefers explicit generators.
    """
    seed = check_int("seed", seed, minimum=0, maximum=_MAX_SEED)
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    return make_generator(seed)


def make_generator(seed: int, device: str | torch.device = "cpu") -> torch.Generator:
    """A ``torch.Generator`` on ``device`` seeded with ``seed``."""
    seed = check_int("seed", seed, minimum=0, maximum=_MAX_SEED)
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    return gen


def derive_seed(seed: int, *keys: object) -> int:
    """A seed derived from ``seed`` and ``keys`` (strings, ints), stable across processes and runs."""
    seed = check_int("seed", seed, minimum=0, maximum=_MAX_SEED)
    # numpy integers hash like Python ints (repr(np.int64(3)) is 'np.int64(3)')
    norm = [int(k) if isinstance(k, numbers.Integral) and not isinstance(k, bool) else k for k in keys]
    text = "\x1f".join([str(seed), *(repr(k) for k in norm)]).encode()
    digest = hashlib.blake2b(text, digest_size=8).digest()
    return int.from_bytes(digest, "little") & _MAX_SEED
