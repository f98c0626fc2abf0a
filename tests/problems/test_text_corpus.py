"""Tests of optarium.problems.text_corpus: corpora, splitting and batch sampling."""

from __future__ import annotations

import math
import sysconfig
import warnings
from pathlib import Path

import pytest
import torch

from optarium.problems.text_corpus import (
    fixed_batches,
    sample_batch,
    split_corpus,
    stdlib_corpus,
    zipf_markov_corpus,
)

HAS_STDLIB = Path(sysconfig.get_paths().get("stdlib", "")).is_dir()


# ---------------------------------------------------------------------------------------------------------
# stdlib_corpus
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.skipif(not HAS_STDLIB, reason="no standard-library directory")
def test_stdlib_corpus_dtype_determinism_and_content() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the real stdlib must not fall back
        a = stdlib_corpus(200_000)
        b = stdlib_corpus(200_000)
    assert a.dtype == torch.uint8 and a.dim() == 1 and a.numel() == 200_000
    assert torch.equal(a, b)
    assert a.data_ptr() != b.data_ptr()  # fresh tensors: the caller may modify one
    a[0] = 0
    assert torch.equal(stdlib_corpus(200_000), b)
    # It is Python source: the first file (sorted) starts the corpus, and the text is mostly printable ASCII.
    text = bytes(b.numpy())
    assert b"import " in text and b"def " in text
    printable = sum(32 <= c < 127 or c in (9, 10, 13) for c in text[:20_000])
    assert printable > 0.99 * 20_000


@pytest.mark.skipif(not HAS_STDLIB, reason="no standard-library directory")
def test_stdlib_corpus_is_prefix_consistent_and_sorted_by_path() -> None:
    short, long = stdlib_corpus(10_000), stdlib_corpus(50_000)
    assert torch.equal(short, long[:10_000])
    root = Path(sysconfig.get_paths()["stdlib"])
    first = min(p.relative_to(root).as_posix() for p in root.glob("*.py"))
    head = (root / first).read_bytes()[:1000]
    assert bytes(short[: len(head)].numpy()) == head


def _write_tree(root: Path) -> None:
    (root / "b.py").write_bytes(b"B" * 10)
    (root / "a.py").write_bytes(b"A" * 10)
    (root / "pkg").mkdir()
    (root / "pkg" / "c.py").write_bytes(b"C" * 10)
    (root / "pkg" / "notes.txt").write_bytes(b"T" * 10)
    for skipped in ("site-packages", "test", "__pycache__"):
        (root / skipped).mkdir()
        (root / skipped / "x.py").write_bytes(b"X" * 10)


def test_stdlib_corpus_reads_sorted_py_files_and_skips_dirs(tmp_path: Path) -> None:
    _write_tree(tmp_path)
    out = stdlib_corpus(25, stdlib_dir=str(tmp_path))
    assert bytes(out.numpy()) == b"A" * 10 + b"B" * 10 + b"C" * 5


def test_stdlib_corpus_falls_back_when_too_short(tmp_path: Path) -> None:
    _write_tree(tmp_path)  # 30 usable bytes
    with pytest.warns(RuntimeWarning, match="falling back"):
        out = stdlib_corpus(5_000, stdlib_dir=str(tmp_path))
    assert torch.equal(out, zipf_markov_corpus(5_000, seed=0))


def test_stdlib_corpus_falls_back_when_dir_missing(tmp_path: Path) -> None:
    with pytest.warns(RuntimeWarning, match="not found"):
        out = stdlib_corpus(3_000, stdlib_dir=str(tmp_path / "missing"))
    assert out.dtype == torch.uint8 and out.numel() == 3_000
    assert torch.equal(out, zipf_markov_corpus(3_000, seed=0))


@pytest.mark.parametrize("bad", [0, -5, 2.5, True, "10"])
def test_stdlib_corpus_rejects_bad_n_bytes(bad: object) -> None:
    with pytest.raises(ValueError, match="n_bytes"):
        stdlib_corpus(bad)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------------------
# zipf_markov_corpus
# ---------------------------------------------------------------------------------------------------------


def test_zipf_markov_determinism_dtype_and_seed_dependence() -> None:
    a = zipf_markov_corpus(20_000, seed=3)
    b = zipf_markov_corpus(20_000, seed=3)
    c = zipf_markov_corpus(20_000, seed=4)
    assert a.dtype == torch.uint8 and a.shape == (20_000,)
    assert torch.equal(a, b)
    assert (a != c).float().mean() > 0.5
    assert torch.equal(zipf_markov_corpus(5_000, seed=3), a[:5_000])  # prefix-consistent


def test_zipf_markov_small_vocab_range() -> None:
    z = zipf_markov_corpus(10_000, seed=1, vocab=7)
    assert int(z.min()) >= 0 and int(z.max()) <= 6
    assert set(z.unique().tolist()) == set(range(7))


def test_zipf_markov_unigram_is_non_uniform() -> None:
    z = zipf_markov_corpus(200_000, seed=0)
    p = torch.bincount(z.long(), minlength=256).double() / z.numel()
    entropy = -(p[p > 0] * p[p > 0].log()).sum().item()
    assert entropy < math.log(256) - 0.3  # uniform would be ln 256 = 5.545 (sampling noise ~ 1e-3)
    assert p.max().item() > 5 / 256


def test_zipf_markov_transition_rows_are_permuted_zipf() -> None:
    # Small alphabet, many samples: each frequent context's next-symbol frequencies, sorted in decreasing
    # order, match the Zipf weights; and different contexts rank the symbols differently.
    vocab, exponent = 4, 1.1
    z = zipf_markov_corpus(400_000, seed=2, vocab=vocab, exponent=exponent).long()
    ctx = z[:-2] * vocab + z[1:-1]
    counts = torch.zeros(vocab * vocab, vocab, dtype=torch.float64)
    counts.index_put_((ctx, z[2:]), torch.ones_like(ctx, dtype=torch.float64), accumulate=True)
    w = torch.arange(1, vocab + 1, dtype=torch.float64) ** -exponent
    w /= w.sum()
    frequent = counts.sum(1) > 5_000
    assert frequent.sum() >= 8
    rows = counts[frequent] / counts[frequent].sum(1, keepdim=True)
    assert torch.allclose(rows.sort(dim=1, descending=True).values, w.expand_as(rows), atol=0.02)
    assert len({tuple(r.argsort(descending=True).tolist()) for r in rows}) > 1


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"n_bytes": 0}, "n_bytes"),
        ({"n_bytes": 10, "vocab": 1}, "vocab"),
        ({"n_bytes": 10, "vocab": 300}, "vocab"),
        ({"n_bytes": 10, "exponent": 0.0}, "exponent"),
        ({"n_bytes": 10, "exponent": float("nan")}, "exponent"),
        ({"n_bytes": 10, "seed": 1.5}, "seed"),
    ],
)
def test_zipf_markov_rejects_bad_arguments(kwargs: dict, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        zipf_markov_corpus(**kwargs)


# ---------------------------------------------------------------------------------------------------------
# split_corpus, sample_batch, fixed_batches
# ---------------------------------------------------------------------------------------------------------


def test_split_corpus_sizes_and_order() -> None:
    data = torch.arange(1000) % 256
    train, val = split_corpus(data)
    assert train.numel() == 950 and val.numel() == 50
    assert torch.equal(torch.cat([train, val]), data)
    train, val = split_corpus(data, val_fraction=0.2)
    assert train.numel() == 800 and val.numel() == 200


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.1, 1.5, "x"])
def test_split_corpus_rejects_bad_fraction(bad: object) -> None:
    with pytest.raises(ValueError, match="val_fraction"):
        split_corpus(torch.arange(100), val_fraction=bad)  # type: ignore[arg-type]


def test_split_corpus_rejects_too_short_data() -> None:
    with pytest.raises(ValueError, match="data"):
        split_corpus(torch.arange(5), val_fraction=0.05)
    with pytest.raises(ValueError, match="data"):
        split_corpus(torch.zeros(4, 4, dtype=torch.long))


def test_sample_batch_shapes_dtype_and_shift() -> None:
    data = torch.arange(5000, dtype=torch.int64) % 251  # position recoverable from value within windows
    data = data.to(torch.uint8)
    x, y = sample_batch(data, 32, 20, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (32, 20)
    assert x.dtype == y.dtype == torch.int64
    assert torch.equal(x[:, 1:], y[:, :-1])  # y is x shifted by one
    # Every row is a contiguous window of data: match each row's position in the corpus.
    long = data.long()
    windows = long.unfold(0, 21, 1)  # all windows of length context + 1
    for row_x, row_y in zip(x, y, strict=True):
        full = torch.cat([row_x, row_y[-1:]])
        assert (windows == full).all(dim=1).any()


def test_sample_batch_reproducible_and_generator_advances() -> None:
    data = zipf_markov_corpus(10_000, seed=0)
    a = sample_batch(data, 8, 16, torch.Generator().manual_seed(7))
    b = sample_batch(data, 8, 16, torch.Generator().manual_seed(7))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    g = torch.Generator().manual_seed(7)
    first, second = sample_batch(data, 8, 16, g), sample_batch(data, 8, 16, g)
    assert not torch.equal(first[0], second[0])


def test_sample_batch_covers_last_window() -> None:
    data = torch.arange(12, dtype=torch.uint8)
    x, y = sample_batch(data, 2000, 10, torch.Generator().manual_seed(0))  # starts 0 or 1 only
    assert set(x[:, 0].tolist()) == {0, 1}
    assert int(y.max()) == 11


def test_sample_batch_does_not_touch_global_rng() -> None:
    state = torch.get_rng_state()
    sample_batch(torch.arange(100), 4, 8, torch.Generator().manual_seed(0))
    fixed_batches(torch.arange(100), 2, 4, 8, seed=0)
    assert torch.equal(state, torch.get_rng_state())


@pytest.mark.parametrize(
    ("args", "name"),
    [
        ((0, 8), "batch_size"),
        ((-1, 8), "batch_size"),
        ((4, 0), "context"),
        ((4, 2.0), "context"),
        ((4, True), "context"),
    ],
)
def test_sample_batch_rejects_bad_arguments(args: tuple, name: str) -> None:
    with pytest.raises(ValueError, match=f"{name}: must be a positive integer"):
        sample_batch(torch.arange(100), *args, torch.Generator())


def test_sample_batch_rejects_short_data_and_bad_inputs() -> None:
    with pytest.raises(ValueError, match="data: too short"):
        sample_batch(torch.arange(10), 4, 10, torch.Generator())  # needs 11 tokens
    sample_batch(torch.arange(11), 4, 10, torch.Generator())  # exactly enough
    with pytest.raises(ValueError, match="data"):
        sample_batch(torch.rand(100), 4, 8, torch.Generator())
    with pytest.raises(TypeError, match="generator"):
        sample_batch(torch.arange(100), 4, 8, 0)  # type: ignore[arg-type]


def test_fixed_batches_shapes_and_same_for_every_caller() -> None:
    data = zipf_markov_corpus(10_000, seed=0)
    x, y = fixed_batches(data, 3, 4, 16, seed=11)
    assert x.shape == y.shape == (3, 4, 16) and x.dtype == torch.int64
    x2, y2 = fixed_batches(data, 3, 4, 16, seed=11)
    assert torch.equal(x, x2) and torch.equal(y, y2)
    assert torch.equal(x[:, :, 1:], y[:, :, :-1])
    x3, _ = fixed_batches(data, 3, 4, 16, seed=12)
    assert not torch.equal(x, x3)
    with pytest.raises(ValueError, match="n_batches"):
        fixed_batches(data, 0, 4, 16, seed=0)
    with pytest.raises(ValueError, match="seed"):
        fixed_batches(data, 1, 4, 16, seed=None)  # type: ignore[arg-type]
