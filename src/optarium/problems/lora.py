"""LoRA-style adapters and a sequence classifier on the tiny transformer of :mod:`optarium.problems.tiny_lm`.

:class:`LoRALinear` wraps a frozen bias-free linear layer ``W`` and adds a trainable low-rank update:
``y = x W^T + (alpha / r) * (x A^T) B^T`` with ``A`` of shape ``(r, d_in)`` drawn ``N(0, 1/d_in)`` and
``B`` of shape ``(d_out, r)`` zero (Hu et al. 2021: the adapted model starts equal to the frozen one). A
plain module (no ``torch.nn.utils.parametrize``), so ``torch.func.functional_call`` and ``torch.func.jvp``
see its ``A`` and ``B`` as ordinary parameters.

:class:`TinyLMClassifier` is a :class:`~optarium.problems.tiny_lm.TinyLM` body (embedding, blocks, final norm)
with a new linear head on the final-norm state at the last position; :func:`add_lora` puts adapters on each
block's ``qkv``, ``out``, ``gate_up`` and ``down`` projections and freezes everything else but the head.
:meth:`TinyLMClassifier.set_checkpointing` turns per-block activation checkpointing on or off.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from optarium._core.validation import check_int, check_positive, check_type
from optarium.problems.tiny_lm import TinyLM

__all__ = ["LORA_TARGETS", "LoRALinear", "TinyLMClassifier", "add_lora", "trainable_parameters"]

#: Projections of every block that receive an adapter (attribute paths inside a block).
LORA_TARGETS: tuple[str, ...] = ("attn.qkv", "attn.out", "mlp.gate_up", "mlp.down")


class LoRALinear(nn.Module):
    """A frozen linear layer plus a trainable rank-``rank`` update ``(alpha / rank) * B A``.

    Args:
        base: the bias-free ``nn.Linear`` to adapt (its weight is frozen, not copied).
        rank: adapter rank ``r >= 1``.
        alpha: scale numerator (``> 0``); the update is scaled by ``alpha / rank``.
        generator: CPU generator for ``A``'s initialisation.
    """

    def __init__(
        self, base: nn.Linear, rank: int, alpha: float = 1.0, generator: torch.Generator | None = None
    ) -> None:
        super().__init__()
        check_type("base", base, nn.Linear)
        if base.bias is not None:
            raise ValueError("base: LoRALinear expects a bias-free linear layer")
        self.rank = check_int("rank", rank, minimum=1)
        self.scale = check_positive("alpha", alpha) / self.rank
        self.base = base
        base.weight.requires_grad_(False)
        d_out, d_in = base.weight.shape
        w = base.weight
        a = torch.randn(self.rank, d_in, generator=generator, dtype=torch.float64) / math.sqrt(d_in)
        self.lora_a = nn.Parameter(a.to(dtype=w.dtype, device=w.device))
        self.lora_b = nn.Parameter(torch.zeros(d_out, self.rank, dtype=w.dtype, device=w.device))

    def forward(self, x: Tensor) -> Tensor:
        """``x W^T + scale * (x A^T) B^T``."""
        return self.base(x) + self.scale * ((x @ self.lora_a.T) @ self.lora_b.T)


class _Checkpointed(nn.Module):
    """Runs ``block`` under ``torch.utils.checkpoint`` (non-reentrant) while training with grad enabled."""

    def __init__(self, block: nn.Module) -> None:
        super().__init__()
        self.block = block

    def forward(self, *args: Tensor) -> Tensor:
        """The block's output; its activations are recomputed in the backward pass."""
        if torch.is_grad_enabled():
            return checkpoint(self.block, *args, use_reentrant=False)
        return self.block(*args)


class TinyLMClassifier(nn.Module):
    """Sequence classifier: a :class:`TinyLM` body and a linear head on the last position's final-norm state.

    Args:
        lm: the (pretrained) language model whose embedding, blocks and final norm are used (not copied).
        n_classes: output classes (``>= 2``).
        generator: CPU generator for the head's ``N(0, 0.02^2)`` initialisation.
    """

    def __init__(self, lm: TinyLM, n_classes: int = 2, generator: torch.Generator | None = None) -> None:
        super().__init__()
        check_type("lm", lm, TinyLM)
        n_classes = check_int("n_classes", n_classes, minimum=2)
        self.lm = lm
        w = lm.tok_emb.weight
        head = torch.randn(n_classes, lm.config.d_model, generator=generator, dtype=torch.float64) * 0.02
        self.head = nn.Linear(lm.config.d_model, n_classes, bias=True).to(dtype=w.dtype, device=w.device)
        with torch.no_grad():
            self.head.weight.copy_(head)
            self.head.bias.zero_()
        self._plain_blocks = list(lm.blocks)
        self.checkpointing = False

    def set_checkpointing(self, enabled: bool) -> None:
        """Wrap (``True``) or unwrap (``False``) every block in per-block activation checkpointing."""
        check_type("enabled", enabled, bool)
        blocks = [(_Checkpointed(b) if enabled else b) for b in self._plain_blocks]
        self.lm.blocks = nn.ModuleList(blocks)
        self.checkpointing = enabled

    def forward(self, idx: Tensor) -> Tensor:
        """Class logits ``(B, n_classes)`` for token ids ``idx`` of shape ``(B, T)``."""
        if idx.dim() != 2:
            raise ValueError(f"idx: must have shape (batch, time), got {tuple(idx.shape)}")
        lm = self.lm
        t = idx.shape[1]
        if not 1 <= t <= lm.config.context:
            raise ValueError(f"idx: sequence length must be in 1..{lm.config.context}, got {t}")
        x = lm.tok_emb(idx)
        cos, sin = lm.rope_cos[:t].to(x.dtype), lm.rope_sin[:t].to(x.dtype)
        for block in lm.blocks:
            x = block(x, cos, sin)
        return self.head(lm.norm(x)[:, -1])


def add_lora(model: TinyLMClassifier, rank: int, alpha: float = 1.0, *, seed: int = 0) -> list[nn.Parameter]:
    """Put :class:`LoRALinear` adapters on :data:`LORA_TARGETS` of every block; freeze all else but the head.

    Returns the trainable parameters (adapters, then the head). ``rank`` and ``alpha`` as in LoRALinear.
    """
    check_type("model", model, TinyLMClassifier)
    rank = check_int("rank", rank, minimum=1)
    gen = torch.Generator().manual_seed(seed)
    for p in model.parameters():
        p.requires_grad_(False)
    for block in model._plain_blocks:
        for path in LORA_TARGETS:
            owner_name, attr = path.split(".")
            owner = getattr(block, owner_name)
            base = getattr(owner, attr)
            if isinstance(base, LoRALinear):
                raise ValueError("model: already has LoRA adapters")
            setattr(owner, attr, LoRALinear(base, rank, alpha, generator=gen))
    for p in model.head.parameters():
        p.requires_grad_(True)
    return trainable_parameters(model)


def trainable_parameters(model: nn.Module) -> list[nn.Parameter]:
    """The parameters of ``model`` with ``requires_grad``, in registration order."""
    check_type("model", model, nn.Module)
    return [p for p in model.parameters() if p.requires_grad]
