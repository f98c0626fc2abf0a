"""A tiny LLaMA-style decoder (dense or mixture-of-experts) for the shared language-model problem.

:class:`TinyLM` is a byte-level causal language model: tied token embedding / output head, pre-norm blocks
with RMSNorm, multi-head causal self-attention with rotary position embeddings (RoPE) computed by
:func:`torch.nn.functional.scaled_dot_product_attention`, a SwiGLU MLP, a final RMSNorm, and no biases.
With ``n_experts > 0`` each block's MLP is a mixture of SwiGLU experts with a softmax top-k router and a
Switch-style load-balancing auxiliary loss (a "tiny Qwen2MoE").

Presets (parameter counts with the tied embedding counted once):

- :data:`QUICK`: d_model 64, 2 layers, 2 heads, context 64, d_ff 176 — 117,056 parameters.
- :data:`FULL_DENSE`: d_model 128, 4 layers, 4 heads, context 128, d_ff 344 — 824,448 parameters.
- :data:`FULL_MOE`: FULL_DENSE with 4 experts of width 256, top-2 — 1,870,976 parameters.

Use :func:`build_tiny_lm` for a seeded, reproducible initialisation.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = [
    "FULL_DENSE",
    "FULL_MOE",
    "QUICK",
    "MoEFeedForward",
    "TinyLM",
    "TinyLMConfig",
    "build_tiny_lm",
    "count_parameters",
    "load_balancing_loss",
]

_NORM_EPS = 1e-6


@dataclass(frozen=True, kw_only=True)
class TinyLMConfig:
    """Shape of a :class:`TinyLM` (keyword-only, immutable, validated on construction).

    Attributes:
        vocab_size: number of token ids (256 for bytes).
        d_model: residual-stream width; divisible by ``n_heads``, with an even head dimension (RoPE).
        n_layers: number of transformer blocks.
        n_heads: attention heads per block.
        context: maximum sequence length (the RoPE tables are precomputed for it).
        d_ff: hidden width of the dense SwiGLU MLP (unused when ``n_experts > 0``).
        n_experts: experts per MoE layer; ``0`` means a dense model.
        top_k: experts each token is routed to (MoE only; ``1 <= top_k <= n_experts``).
        expert_d_ff: hidden width of each SwiGLU expert (MoE only).
        aux_loss_weight: weight of the load-balancing loss in :meth:`TinyLM.loss` (MoE only; ``>= 0``).
        rope_base: RoPE frequency base (``> 1``).
    """

    vocab_size: int = 256
    d_model: int
    n_layers: int
    n_heads: int
    context: int
    d_ff: int
    n_experts: int = 0
    top_k: int = 2
    expert_d_ff: int = 256
    aux_loss_weight: float = 0.01
    rope_base: float = 10000.0

    def __post_init__(self) -> None:
        """Validate the fields; raise ``ValueError`` naming the offending field."""
        positive = ("vocab_size", "d_model", "n_layers", "n_heads", "context", "d_ff", "top_k", "expert_d_ff")
        for name in positive:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name}: must be a positive integer, got {value!r}")
        if isinstance(self.n_experts, bool) or not isinstance(self.n_experts, int) or self.n_experts < 0:
            raise ValueError(f"n_experts: must be a non-negative integer (0 = dense), got {self.n_experts!r}")
        if self.d_model % self.n_heads != 0:
            raise ValueError(f"d_model: must be divisible by n_heads={self.n_heads}, got {self.d_model}")
        if (self.d_model // self.n_heads) % 2 != 0:
            raise ValueError(
                f"d_model: the head dimension d_model / n_heads = {self.d_model // self.n_heads} must be "
                "even for rotary embeddings"
            )
        if self.n_experts > 0 and self.top_k > self.n_experts:
            raise ValueError(f"top_k: must be <= n_experts={self.n_experts}, got {self.top_k}")
        for name in ("aux_loss_weight", "rope_base"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise ValueError(f"{name}: must be a finite number, got {value!r}")
        if self.aux_loss_weight < 0:
            raise ValueError(f"aux_loss_weight: must be >= 0, got {self.aux_loss_weight!r}")
        if self.rope_base <= 1:
            raise ValueError(f"rope_base: must be > 1, got {self.rope_base!r}")

    @property
    def head_dim(self) -> int:
        """Width of one attention head, ``d_model // n_heads``."""
        return self.d_model // self.n_heads

    @property
    def is_moe(self) -> bool:
        """Whether the MLPs are mixtures of experts (``n_experts > 0``)."""
        return self.n_experts > 0


#: Quick model of the GradPower screen (≈ 0.12M parameters).
QUICK = TinyLMConfig(d_model=64, n_layers=2, n_heads=2, context=64, d_ff=176)
#: Full dense model (≈ 0.82M parameters).
FULL_DENSE = TinyLMConfig(d_model=128, n_layers=4, n_heads=4, context=128, d_ff=344)
#: Full mixture-of-experts model, "tiny Qwen2MoE" (≈ 1.9M parameters).
FULL_MOE = dataclasses.replace(FULL_DENSE, n_experts=4, top_k=2, expert_d_ff=256)


# ----------------------------------------------------------------------------------------------------------
# Building blocks
# ----------------------------------------------------------------------------------------------------------


class _Linear(nn.Linear):
    """Bias-free ``nn.Linear`` whose weight is created uninitialised: no draw from the global RNG.

    (:meth:`TinyLM.reset_parameters` initialises it. ``nn.utils.skip_init`` would do the same but costs
    about a second of one-time imports on first use.)
    """

    def __init__(self, d_in: int, d_out: int) -> None:
        super().__init__(d_in, d_out, bias=False)

    def reset_parameters(self) -> None:
        """Leave the weight as allocated; the owning :class:`TinyLM` initialises it."""


def _rope_tables(context: int, head_dim: int, base: float) -> tuple[Tensor, Tensor]:
    """``cos`` and ``sin`` tables of shape ``(context, head_dim // 2)`` (computed in float64, stored fp32)."""
    inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = torch.outer(torch.arange(context, dtype=torch.float64), inv_freq)
    return angles.cos().float(), angles.sin().float()


def _apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate ``x`` of shape ``(..., T, head_dim)`` by position (half-split, "rotate_half" convention).

    Pairs ``(x[..., i], x[..., i + head_dim // 2])`` at position ``t`` are rotated by the angle
    ``t * base ** (-2 i / head_dim)``; ``cos``/``sin`` have shape ``(T, head_dim // 2)``.
    """
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


class _Attention(nn.Module):
    """Causal multi-head self-attention with RoPE on queries and keys, fused QKV projection, no biases."""

    def __init__(self, config: TinyLMConfig) -> None:
        super().__init__()
        self.n_heads = config.n_heads
        self.head_dim = config.head_dim
        self.qkv = _Linear(config.d_model, 3 * config.d_model)
        self.out = _Linear(config.d_model, config.d_model)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        """``x``: ``(B, T, d_model)`` -> ``(B, T, d_model)``."""
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
        q, k = _apply_rope(q, cos, sin), _apply_rope(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(b, t, d))


class _SwiGLU(nn.Module):
    """SwiGLU MLP ``down(silu(gate(x)) * up(x))`` with the gate and up projections fused, no biases."""

    def __init__(self, d_model: int, d_ff: int) -> None:
        super().__init__()
        self.gate_up = _Linear(d_model, 2 * d_ff)
        self.down = _Linear(d_ff, d_model)

    def forward(self, x: Tensor) -> Tensor:
        """``x``: ``(..., d_model)`` -> ``(..., d_model)``."""
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        return self.down(F.silu(gate) * up)


def load_balancing_loss(probs: Tensor, top_idx: Tensor, n_experts: int) -> Tensor:
    """Switch-style load-balancing loss ``n_experts * sum_e f_e * P_e`` for one MoE layer.

    ``f_e`` is the fraction of the ``N * k`` routing slots (token, choice) assigned to expert ``e`` (so
    ``sum_e f_e = 1``; no gradient) and ``P_e`` the router probability of ``e`` averaged over tokens (so
    ``sum_e P_e = 1``; differentiable).

    Values: it equals exactly 1 whenever ``f`` or ``P`` is uniform (perfect balance), ``n_experts`` when
    every token puts all its probability on one expert, and lies in ``[0, n_experts]``. It is *not* bounded
    below by 1 in general: ``f`` and ``P`` are only loosely coupled through the top-k choice, so an
    imbalanced batch can score below 1 (e.g. top-1, two experts, tokens with probabilities (0.5+, 0.5-),
    (0.5+, 0.5-), (0, 1) give f = (2/3, 1/3), P = (1/3, 2/3) and a loss of 8/9).

    Args:
        probs: router probabilities, shape ``(N, n_experts)``, rows summing to 1.
        top_idx: chosen experts, shape ``(N, k)``, integer.
        n_experts: number of experts.

    Returns:
        A scalar tensor.
    """
    flat_idx = top_idx.reshape(-1)
    counts = torch.zeros(n_experts, dtype=probs.dtype, device=probs.device)
    counts.scatter_add_(0, flat_idx, torch.ones_like(flat_idx, dtype=probs.dtype))
    frac = counts / flat_idx.numel()
    return n_experts * torch.dot(frac, probs.mean(dim=0))


class MoEFeedForward(nn.Module):
    """Mixture of SwiGLU experts with a softmax top-k router (replaces the dense MLP when ``n_experts > 0``).

    Each token's router probabilities are ``softmax(router(x))``; its ``top_k`` largest probabilities are
    renormalised to sum to 1 and weight the outputs of the chosen experts. The expert weights are stacked
    (``gate_up``: ``(E, d_model, 2 * expert_d_ff)``, ``down``: ``(E, expert_d_ff, d_model)``).

    Dispatch: a loop over the experts, each applied to the tokens routed to it (gathered with
    ``index_select``, results added back with ``index_add_``); no loop over tokens. This computes only the
    ``k / E`` share of expert FLOPs that is used. The alternative, every expert on every token with
    ``einsum``/``bmm`` and the unused outputs masked by zero gates, is simpler but does ``E / k`` times the
    expert arithmetic; on one CPU thread at the FULL_MOE size (batch 16 x 128 tokens, AdamW) a training
    step took ≈ 0.42 s with it against ≈ 0.25 s with the loop, so the loop is the default
    (``dispatch = "dense"`` selects the alternative; the tests check that both agree).

    After each forward, :attr:`last_aux_loss` holds this layer's :func:`load_balancing_loss`.
    """

    def __init__(self, config: TinyLMConfig) -> None:
        super().__init__()
        self.n_experts = config.n_experts
        self.top_k = config.top_k
        self.d_ff = config.expert_d_ff
        self.dispatch = "sparse"
        self.router = _Linear(config.d_model, config.n_experts)
        self.gate_up = nn.Parameter(torch.empty(config.n_experts, config.d_model, 2 * config.expert_d_ff))
        self.down = nn.Parameter(torch.empty(config.n_experts, config.expert_d_ff, config.d_model))
        self.last_aux_loss: Tensor | None = None

    def route(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Route tokens ``x`` of shape ``(N, d_model)``.

        Returns:
            ``(probs, top_weights, top_idx)``: router probabilities ``(N, E)``; the renormalised gate
            weights of the chosen experts ``(N, k)`` (each row sums to 1); their indices ``(N, k)``.
        """
        probs = torch.softmax(self.router(x), dim=-1)
        top_p, top_idx = probs.topk(self.top_k, dim=-1)
        return probs, top_p / top_p.sum(dim=-1, keepdim=True), top_idx

    def _expert(self, e: int, x: Tensor) -> Tensor:
        """Expert ``e`` (SwiGLU) on tokens ``x`` of shape ``(n, d_model)``."""
        gate, up = (x @ self.gate_up[e]).chunk(2, dim=-1)
        return (F.silu(gate) * up) @ self.down[e]

    def forward(self, x: Tensor) -> Tensor:
        """``x``: ``(..., d_model)`` -> ``(..., d_model)``; sets :attr:`last_aux_loss`."""
        shape = x.shape
        flat = x.reshape(-1, shape[-1])
        probs, weights, top_idx = self.route(flat)
        self.last_aux_loss = load_balancing_loss(probs, top_idx, self.n_experts)
        if self.dispatch == "dense":
            gates = torch.zeros_like(probs).scatter(1, top_idx, weights)  # (N, E), zero off the top-k
            gate, up = torch.einsum("nd,edf->enf", flat, self.gate_up).chunk(2, dim=-1)
            y = torch.bmm(F.silu(gate) * up, self.down)  # (E, N, d_model)
            return torch.einsum("end,ne->nd", y, gates).reshape(shape)
        out = torch.zeros_like(flat)
        token = torch.arange(flat.shape[0], device=x.device).unsqueeze(1).expand_as(top_idx)
        for e in range(self.n_experts):
            mask = top_idx == e
            rows = token[mask]  # tokens routed to e (each at most once: top-k indices are distinct)
            if rows.numel() == 0:
                continue
            y = self._expert(e, flat.index_select(0, rows)) * weights[mask].unsqueeze(1)
            out.index_add_(0, rows, y)
        return out.reshape(shape)


class _Block(nn.Module):
    """Pre-norm transformer block: ``x + attn(norm(x))``, then ``x + mlp(norm(x))``."""

    def __init__(self, config: TinyLMConfig) -> None:
        super().__init__()
        self.attn_norm = nn.RMSNorm(config.d_model, eps=_NORM_EPS)
        self.attn = _Attention(config)
        self.mlp_norm = nn.RMSNorm(config.d_model, eps=_NORM_EPS)
        self.mlp: nn.Module = (
            MoEFeedForward(config) if config.is_moe else _SwiGLU(config.d_model, config.d_ff)
        )

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        """``x``: ``(B, T, d_model)`` -> ``(B, T, d_model)``."""
        x = x + self.attn(self.attn_norm(x), cos, sin)
        return x + self.mlp(self.mlp_norm(x))


# ----------------------------------------------------------------------------------------------------------
# The model
# ----------------------------------------------------------------------------------------------------------


class TinyLM(nn.Module):
    """Tiny LLaMA-style causal decoder over ``config.vocab_size`` tokens (dense, or MoE when configured).

    Architecture: token embedding (tied with the output head: ``lm_head.weight is tok_emb.weight``), then
    ``n_layers`` pre-norm blocks (RMSNorm; causal multi-head attention with RoPE via
    ``scaled_dot_product_attention(is_causal=True)``; RMSNorm; SwiGLU MLP or :class:`MoEFeedForward`), a
    final RMSNorm and the head. No biases. The RoPE tables are non-persistent buffers (not in the state
    dict) and follow the model under ``.to(device/dtype)``; activations take the dtype of the parameters.

    Initialisation (:meth:`reset_parameters`): every linear, expert and embedding weight ~ N(0, 0.02²), the
    output projections of attention and MLP/experts scaled by ``1 / sqrt(2 * n_layers)``; norm weights 1.

    Args:
        config: the model shape.
        generator: CPU generator for the initial weights; ``None`` draws from the global RNG. Prefer
            :func:`build_tiny_lm`.
    """

    def __init__(self, config: TinyLMConfig, generator: torch.Generator | None = None) -> None:
        super().__init__()
        if not isinstance(config, TinyLMConfig):
            raise TypeError(f"config: must be a TinyLMConfig, got {type(config).__name__}")
        self.config = config
        # Passing ``_weight`` skips nn.Embedding's own (global-RNG) initialisation.
        self.tok_emb = nn.Embedding(
            config.vocab_size, config.d_model, _weight=torch.empty(config.vocab_size, config.d_model)
        )
        self.blocks = nn.ModuleList(_Block(config) for _ in range(config.n_layers))
        self.norm = nn.RMSNorm(config.d_model, eps=_NORM_EPS)
        self.lm_head = _Linear(config.d_model, config.vocab_size)
        self.lm_head.weight = self.tok_emb.weight  # tied
        cos, sin = _rope_tables(config.context, config.head_dim, config.rope_base)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.last_aux_loss: Tensor | None = None
        self.reset_parameters(generator)

    @torch.no_grad()
    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Re-initialise all weights (see the class docstring), drawing from ``generator`` if given."""
        std = 0.02
        out_std = std / math.sqrt(2 * self.config.n_layers)
        nn.init.normal_(self.tok_emb.weight, 0.0, std, generator=generator)
        for block in self.blocks:
            nn.init.normal_(block.attn.qkv.weight, 0.0, std, generator=generator)
            nn.init.normal_(block.attn.out.weight, 0.0, out_std, generator=generator)
            mlp = block.mlp
            if isinstance(mlp, MoEFeedForward):
                nn.init.normal_(mlp.router.weight, 0.0, std, generator=generator)
                nn.init.normal_(mlp.gate_up, 0.0, std, generator=generator)
                nn.init.normal_(mlp.down, 0.0, out_std, generator=generator)
            else:
                nn.init.normal_(mlp.gate_up.weight, 0.0, std, generator=generator)
                nn.init.normal_(mlp.down.weight, 0.0, out_std, generator=generator)
            nn.init.ones_(block.attn_norm.weight)
            nn.init.ones_(block.mlp_norm.weight)
        nn.init.ones_(self.norm.weight)

    def forward(self, idx: Tensor) -> Tensor:
        """Logits of the next token at every position.

        Args:
            idx: token ids, ``torch.long`` of shape ``(B, T)`` with ``T <= config.context``.

        Returns:
            Logits of shape ``(B, T, vocab_size)``. For MoE models, :attr:`last_aux_loss` is set to the
            load-balancing loss averaged over layers (a zero scalar for dense models).
        """
        if idx.dim() != 2:
            raise ValueError(f"idx: must have shape (batch, time), got {tuple(idx.shape)}")
        t = idx.shape[1]
        if not 1 <= t <= self.config.context:
            raise ValueError(f"idx: sequence length must be in 1..{self.config.context}, got {t}")
        x = self.tok_emb(idx)
        cos, sin = self.rope_cos[:t].to(x.dtype), self.rope_sin[:t].to(x.dtype)
        for block in self.blocks:
            x = block(x, cos, sin)
        logits = self.lm_head(self.norm(x))
        if self.config.is_moe:
            aux = [block.mlp.last_aux_loss for block in self.blocks]
            self.last_aux_loss = torch.stack(aux).mean()
        else:
            self.last_aux_loss = logits.new_zeros(())
        return logits

    def loss(self, idx: Tensor, targets: Tensor) -> tuple[Tensor, Tensor]:
        """Training loss and cross-entropy.

        Args:
            idx: token ids ``(B, T)``.
            targets: next-token ids ``(B, T)``.

        Returns:
            ``(total, ce)``: ``total = ce + aux_loss_weight * aux`` (MoE; ``total is ce`` for dense models)
            is what to backpropagate; ``ce`` is the mean cross-entropy in nats per token (not detached).
        """
        if targets.shape != idx.shape:
            raise ValueError(
                f"targets: must have the shape of idx {tuple(idx.shape)}, got {tuple(targets.shape)}"
            )
        logits = self.forward(idx)
        ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        if not self.config.is_moe:
            return ce, ce
        assert self.last_aux_loss is not None
        return ce + self.config.aux_loss_weight * self.last_aux_loss, ce


def build_tiny_lm(
    config: TinyLMConfig,
    seed: int,
    *,
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
) -> TinyLM:
    """A :class:`TinyLM` initialised deterministically from ``seed``.

    The weights are drawn on the CPU from a private ``torch.Generator().manual_seed(seed)`` (the global RNG
    state is neither read nor changed), then the model is moved to ``device``/``dtype`` if given, so the
    same seed gives the same initial weights on every device.

    Args:
        config: the model shape.
        seed: the initialisation seed.
        device: where to put the model (default: CPU).
        dtype: floating dtype of the parameters (default: float32).
    """
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed: must be an integer, got {seed!r}")
    model = TinyLM(config, generator=torch.Generator().manual_seed(seed))
    if device is not None or dtype is not None:
        model = model.to(device=device, dtype=dtype)
    return model


def count_parameters(model: nn.Module) -> int:
    """Number of scalar parameters of ``model``, each shared tensor (the tied embedding) counted once."""
    return sum(p.numel() for p in model.parameters())
