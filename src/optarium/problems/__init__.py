"""Shared problems with known structure and data generators (the tiny language model and its corpus)."""

from optarium.problems.text_corpus import (
    fixed_batches,
    sample_batch,
    split_corpus,
    stdlib_corpus,
    zipf_markov_corpus,
)
from optarium.problems.tiny_lm import (
    FULL_DENSE,
    FULL_MOE,
    QUICK,
    TinyLM,
    TinyLMConfig,
    build_tiny_lm,
    count_parameters,
)

__all__ = [
    "FULL_DENSE",
    "FULL_MOE",
    "QUICK",
    "TinyLM",
    "TinyLMConfig",
    "build_tiny_lm",
    "count_parameters",
    "fixed_batches",
    "sample_batch",
    "split_corpus",
    "stdlib_corpus",
    "zipf_markov_corpus",
]
