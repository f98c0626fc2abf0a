"""Byte-level text corpora and batch sampling for the shared tiny language-model problem.

The corpus of the GradPower experiment (and later LLM experiments) needs no download: it is the bytes of
the ``.py`` files of the running Python's standard library (:func:`stdlib_corpus`). Where that is not
available, a synthetic order-2 Zipf–Markov language (:func:`zipf_markov_corpus`) stands in. Tokens are
bytes, so the vocabulary has 256 symbols.

:func:`split_corpus` splits a corpus by position (train first), :func:`sample_batch` draws random training
windows from a :class:`torch.Generator`, and :func:`fixed_batches` draws the same validation windows for
every caller that passes the same seed.
"""

from __future__ import annotations

import functools
import math
import sysconfig
import warnings
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

__all__ = [
    "STDLIB_SKIP_DIRS",
    "fixed_batches",
    "sample_batch",
    "split_corpus",
    "stdlib_corpus",
    "zipf_markov_corpus",
]

#: Directory names whose files :func:`stdlib_corpus` leaves out: installed third-party packages, byte-code
#: caches, the standard library's own test suites (large, repetitive, and not part of every install), and
#: generated lookup tables that are data rather than code (``encodings``: codec maps; ``pydoc_data``: help
#: topics). Kept in, the codec maps filled the whole 5 % validation tail of a 4 MB corpus, so validation
#: loss measured table look-ups, not Python.
STDLIB_SKIP_DIRS: frozenset[str] = frozenset(
    {"site-packages", "dist-packages", "__pycache__", "test", "tests", "idle_test", "encodings", "pydoc_data"}
)

#: Steps per independent stream in :func:`zipf_markov_corpus` (the corpus is a concatenation of streams).
_STREAM_LENGTH = 1024


def _check_positive_int(name: str, value: object) -> int:
    """Return ``value`` if it is a positive ``int`` (not ``bool``), else raise ``ValueError`` naming it."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value <= 0:
        raise ValueError(f"{name}: must be a positive integer, got {value!r}")
    return int(value)


def _check_data(data: object) -> Tensor:
    """Check that ``data`` is a 1-D integer tensor of token ids and return it."""
    if not isinstance(data, Tensor):
        raise TypeError(f"data: must be a torch.Tensor, got {type(data).__name__}")
    if data.dim() != 1:
        raise ValueError(f"data: must be 1-D, got shape {tuple(data.shape)}")
    if data.dtype.is_floating_point or data.dtype.is_complex or data.dtype == torch.bool:
        raise ValueError(f"data: must have an integer dtype, got {data.dtype}")
    return data


# ----------------------------------------------------------------------------------------------------------
# Corpora
# ----------------------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4)
def _source_files(root: str) -> tuple[Path, ...]:
    """The ``.py`` files under ``root``, outside :data:`STDLIB_SKIP_DIRS`, sorted by relative POSIX path."""
    base = Path(root)
    files = sorted(
        (p.relative_to(base).as_posix(), p)
        for p in base.rglob("*.py")
        if not STDLIB_SKIP_DIRS.intersection(p.relative_to(base).parts[:-1]) and p.is_file()
    )
    return tuple(path for _, path in files)


@functools.lru_cache(maxsize=8)
def _stdlib_bytes(n_bytes: int, stdlib_dir: str | None) -> tuple[bytes, str | None]:
    """Read up to ``n_bytes`` of standard-library source; return ``(data, reason_for_fallback_or_None)``.

    The result is cached per ``(n_bytes, stdlib_dir)``; ``bytes`` are immutable, so the cache is safe.
    """
    root = Path(stdlib_dir if stdlib_dir is not None else sysconfig.get_paths().get("stdlib", ""))
    if not str(root) or not root.is_dir():
        reason = f"standard-library directory {str(root)!r} not found"
        return _zipf_bytes(n_bytes), reason
    chunks: list[bytes] = []
    total = 0
    for path in _source_files(str(root)):
        try:
            chunk = path.read_bytes()
        except OSError:  # unreadable file: skip it (the order of the rest is unchanged)
            continue
        chunks.append(chunk)
        total += len(chunk)
        if total >= n_bytes:
            return b"".join(chunks)[:n_bytes], None
    reason = f"only {total} bytes of .py source found under {str(root)!r}, {n_bytes} requested"
    return _zipf_bytes(n_bytes), reason


@functools.lru_cache(maxsize=8)
def _zipf_bytes(n_bytes: int) -> bytes:
    """The fallback corpus ``zipf_markov_corpus(n_bytes, seed=0)`` as immutable bytes (cached)."""
    return zipf_markov_corpus(n_bytes, seed=0).numpy().tobytes()


def stdlib_corpus(n_bytes: int = 4_000_000, *, stdlib_dir: str | None = None) -> Tensor:
    """The first ``n_bytes`` bytes of the standard library's Python source, as a 1-D ``torch.uint8`` tensor.

    The ``.py`` files under ``sysconfig.get_paths()["stdlib"]`` (or ``stdlib_dir`` when given) are sorted by
    their relative POSIX path (plain string order) and concatenated byte for byte, without separators, then
    truncated to ``n_bytes``. Files under a directory named in :data:`STDLIB_SKIP_DIRS` (``site-packages``,
    ``__pycache__`` and the test suites ``test``, ``tests``, ``idle_test``) are skipped, as are unreadable
    files. The result is deterministic for a given Python installation (different Python versions give
    different corpora).

    If the directory is missing, or holds fewer than ``n_bytes`` bytes of source, a warning is emitted and
    ``zipf_markov_corpus(n_bytes, seed=0)`` is returned instead.

    The bytes are cached in-process (:func:`functools.lru_cache`); every call returns a fresh tensor, so the
    caller may modify it freely.

    Args:
        n_bytes: corpus length in bytes (positive).
        stdlib_dir: directory to read instead of the running interpreter's standard library (for tests).

    Returns:
        A 1-D ``torch.uint8`` tensor of length ``n_bytes``.
    """
    n_bytes = _check_positive_int("n_bytes", n_bytes)
    data, reason = _stdlib_bytes(n_bytes, None if stdlib_dir is None else str(stdlib_dir))
    if reason is not None:
        warnings.warn(
            f"stdlib_corpus: {reason}; falling back to zipf_markov_corpus(n_bytes={n_bytes}, seed=0)",
            RuntimeWarning,
            stacklevel=2,
        )
    return torch.from_numpy(np.frombuffer(data, dtype=np.uint8).copy())


def zipf_markov_corpus(n_bytes: int, seed: int = 0, vocab: int = 256, exponent: float = 1.1) -> Tensor:
    """A synthetic order-2 Markov language with Zipfian transition rows, as a 1-D ``torch.uint8`` tensor.

    The model: for each context ``(a, b)`` of the two previous symbols, the next-symbol distribution is the
    Zipf weights ``w_r ∝ (r + 1) ** -exponent`` (``r = 0 .. vocab - 1``) assigned to the symbols in the
    order of a context-specific random permutation ``perm[a, b]``. The permutations are drawn by Plackett–Luce
    (Gumbel-top-k) sampling around one global, seeded Zipfian symbol preference, so that frequent symbols
    tend to rank high in every row: rows still differ from context to context, but the unigram distribution
    is Zipf-like rather than flat, as in a natural language (uniformly random permutations would average
    out to an almost uniform unigram distribution).

    Vectorised sampling: because every row holds the same weights in a different order, the *rank* of each
    next symbol is i.i.d. Zipf whatever the context. All ranks are drawn at once (inverse CDF, one
    ``searchsorted``), and the chain step reduces to a table look-up ``x[t] = perm[x[t-2], x[t-1], r[t]]``.
    That recursion is still sequential, so the corpus is generated as ``ceil(n_bytes / 1024)`` independent
    streams of 1024 symbols stepped together (a Python loop over 1024 positions, each step one gather over
    all streams) and concatenated; each stream starts from a uniformly random context. The Markov property
    is broken only at the stream junctions (one position in 1024). A shorter corpus is a prefix of a longer
    one with the same seed. Producing 4 MB takes about half a second on one core, a third of it drawing the
    ``vocab**2 x vocab`` permutation table. The entropy rate away from junctions is the
    entropy of the Zipf weights, a known floor for the attainable cross-entropy.

    Args:
        n_bytes: corpus length (positive).
        seed: seed of the private :class:`torch.Generator`; the global RNG is not touched.
        vocab: alphabet size, 2 to 256 (symbols are ``0 .. vocab - 1``).
        exponent: Zipf exponent (positive, finite).

    Returns:
        A 1-D ``torch.uint8`` tensor of length ``n_bytes``; the same arguments give the same tensor.
    """
    n_bytes = _check_positive_int("n_bytes", n_bytes)
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise ValueError(f"seed: must be an integer, got {seed!r}")
    vocab = _check_positive_int("vocab", vocab)
    if not 2 <= vocab <= 256:
        raise ValueError(f"vocab: must be between 2 and 256 (symbols are bytes), got {vocab}")
    if isinstance(exponent, bool) or not isinstance(exponent, int | float) or not math.isfinite(exponent):
        raise ValueError(f"exponent: must be a finite positive number, got {exponent!r}")
    if exponent <= 0:
        raise ValueError(f"exponent: must be a finite positive number, got {exponent!r}")

    gen = torch.Generator().manual_seed(int(seed))
    ranks_f = torch.arange(1, vocab + 1, dtype=torch.float64)
    log_w = -float(exponent) * torch.log(ranks_f)  # log Zipf weights by rank
    # Global preference: the Zipf weights assigned to the symbols in a random order.
    global_order = torch.randperm(vocab, generator=gen)
    pref = torch.empty(vocab, dtype=torch.float32)
    pref[global_order] = torch.exp(log_w).float()
    # Per-context permutations by an exponential race (Plackett-Luce, equivalent to Gumbel-top-k): symbol i
    # of a row gets key E_i / pref_i with E_i ~ Exp(1), and the row lists symbols by increasing key. The
    # keys are positive floats, whose bit patterns sort like the values; the low 8 bits are replaced by the
    # symbol, which makes every key unique (ties broken by symbol, machine-independent) and lets one fast
    # value sort (numpy) return the permutation.
    u = torch.rand(vocab * vocab, vocab, generator=gen)
    keys = torch.log1p(u.neg_()).neg_().div_(pref)  # E / pref, finite and >= 0
    bits = keys.view(torch.int32).bitwise_and_(~255).bitwise_or_(torch.arange(vocab, dtype=torch.int32))
    del u
    perm = torch.from_numpy(np.sort(bits.numpy(), axis=1)).bitwise_and_(255).to(torch.uint8).reshape(-1)
    del keys, bits

    # One block of uniforms per stream (2 for its start context, then one per step), stream-major, so that a
    # shorter corpus is a prefix of a longer one with the same seed.
    n_streams = -(-n_bytes // _STREAM_LENGTH)
    draws = torch.rand(n_streams, _STREAM_LENGTH + 2, generator=gen, dtype=torch.float64).t().contiguous()
    start = (draws[:2] * vocab).long().clamp_(max=vocab - 1)
    cdf = torch.cumsum(torch.softmax(log_w, 0), 0)
    rank = torch.searchsorted(cdf, draws[2:]).clamp_(max=vocab - 1)  # i.i.d. Zipf ranks, [step, stream]
    del draws

    out = torch.empty(_STREAM_LENGTH + 2, n_streams, dtype=torch.long)
    out[:2] = start
    for t in range(_STREAM_LENGTH):
        ctx = out[t] * vocab + out[t + 1]
        out[t + 2] = perm[ctx * vocab + rank[t]]
    # Stream s fills positions [s * 1024, (s + 1) * 1024) of the corpus; its start context is dropped.
    return out[2:].t().reshape(-1)[:n_bytes].to(torch.uint8).contiguous()


# ----------------------------------------------------------------------------------------------------------
# Splitting and batches
# ----------------------------------------------------------------------------------------------------------


def split_corpus(data: Tensor, val_fraction: float = 0.05) -> tuple[Tensor, Tensor]:
    """Split a 1-D corpus by position into ``(train, val)``: train is the first part, val the last.

    The validation part has ``round(len(data) * val_fraction)`` tokens; both parts must be non-empty. The
    parts are views of ``data`` (no copy).

    Args:
        data: 1-D integer tensor of token ids.
        val_fraction: fraction of tokens, strictly between 0 and 1, that goes to validation.
    """
    data = _check_data(data)
    if isinstance(val_fraction, bool) or not isinstance(val_fraction, int | float):
        raise ValueError(f"val_fraction: must be a number strictly between 0 and 1, got {val_fraction!r}")
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction: must be a number strictly between 0 and 1, got {val_fraction!r}")
    n = data.numel()
    n_val = round(n * val_fraction)
    if n_val < 1 or n_val >= n:
        raise ValueError(
            f"data: too short ({n} tokens) to split with val_fraction={val_fraction} into two non-empty parts"
        )
    return data[: n - n_val], data[n - n_val :]


def sample_batch(
    data: Tensor, batch_size: int, context: int, generator: torch.Generator
) -> tuple[Tensor, Tensor]:
    """Draw ``batch_size`` random windows of ``context + 1`` tokens from ``data``.

    Window starts are uniform over ``0 .. len(data) - context - 1`` (drawn with ``generator``, independently,
    with replacement), so ``x = data[i : i + context]`` and ``y = data[i + 1 : i + context + 1]``: ``y`` is
    ``x`` shifted by one token. No Python loop over the batch.

    Args:
        data: 1-D integer tensor of token ids, at least ``context + 1`` long; any device.
        batch_size: number of windows (positive).
        context: window length (positive).
        generator: the :class:`torch.Generator` that draws the starts; the same generator state gives the
            same batch. A generator on another device than ``data`` is fine (the starts are moved).

    Returns:
        ``(x, y)``, contiguous ``torch.int64`` tensors of shape ``(batch_size, context)`` on ``data.device``.
    """
    data = _check_data(data)
    batch_size = _check_positive_int("batch_size", batch_size)
    context = _check_positive_int("context", context)
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator: must be a torch.Generator, got {type(generator).__name__}")
    n = data.numel()
    if n < context + 1:
        raise ValueError(f"data: too short ({n} tokens) for context {context}: needs at least {context + 1}")
    starts = torch.randint(0, n - context, (batch_size,), generator=generator, device=generator.device)
    offsets = torch.arange(context + 1, device=data.device)
    windows = data[starts.to(data.device).unsqueeze(1) + offsets].long()
    return windows[:, :-1].contiguous(), windows[:, 1:].contiguous()


def fixed_batches(
    data: Tensor, n_batches: int, batch_size: int, context: int, seed: int
) -> tuple[Tensor, Tensor]:
    """A fixed set of windows (e.g. for validation): the same for every caller with the same ``seed``.

    Equivalent to one :func:`sample_batch` call of ``n_batches * batch_size`` windows from a fresh CPU
    ``torch.Generator().manual_seed(seed)``, reshaped; the global RNG is not touched, and the windows do not
    depend on the device of ``data``.

    Args:
        data: 1-D integer tensor of token ids, at least ``context + 1`` long.
        n_batches: number of batches (positive).
        batch_size: windows per batch (positive).
        context: window length (positive).
        seed: seed of the private generator.

    Returns:
        ``(x, y)``, ``torch.int64`` tensors of shape ``(n_batches, batch_size, context)``.
    """
    n_batches = _check_positive_int("n_batches", n_batches)
    batch_size = _check_positive_int("batch_size", batch_size)
    context = _check_positive_int("context", context)
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise ValueError(f"seed: must be an integer, got {seed!r}")
    gen = torch.Generator().manual_seed(int(seed))
    x, y = sample_batch(data, n_batches * batch_size, context, gen)
    return x.view(n_batches, batch_size, context), y.view(n_batches, batch_size, context)
