r"""Graph neural networks in plain torch (message passing with ``index_add_`` on an edge index).

``torch-geometric`` 2.8.1 is not used: the family needs one small GIN, which is a few lines of
``index_add_``; a plain-torch layer keeps the family free of a dependency whose optional compiled
extensions (torch-scatter, torch-sparse) are built per torch version. States are batched as (B, n, d) for B
particles / states on one graph (the samplers run many particles on the same graph).

:class:`GIN` layers: :math:`h\leftarrow\mathrm{LayerNorm}(h+\mathrm{MLP}((1+\epsilon)h+\sum_{j\in N(i)}h_j))`
followed by ReLU (Xu et al. 2019, the residual + LayerNorm form of the qubo-ot-sampling paper's Table 4),
with an optional virtual node (a per-graph vector added to every node before each layer and updated from
the mean of the node states: the mean, not the sum, keeps its scale independent of the graph size).
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["GIN", "GINControl", "aggregate", "time_embedding"]


def aggregate(h: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
    """Sum of neighbour states (B, n, d) -> (B, n, d) over the edges src -> dst of ``edge_index``."""
    src, dst = edge_index[0], edge_index[1]
    return torch.zeros_like(h).index_add_(1, dst, h[:, src])


def time_embedding(t: torch.Tensor, dim: int) -> torch.Tensor:
    """Sinusoidal features of t in [0, 1]: (B,) -> (B, dim)."""
    half = dim // 2
    freqs = torch.exp(
        torch.arange(half, dtype=t.dtype, device=t.device) * (-math.log(1000.0) / max(half - 1, 1))
    )
    a = t[:, None] * freqs[None] * 1000.0
    return torch.cat([torch.sin(a), torch.cos(a)], -1)


class GIN(nn.Module):
    """A stack of residual GIN layers with LayerNorm, ReLU and an optional virtual node."""

    def __init__(self, hidden: int = 64, layers: int = 5, virtual_node: bool = True) -> None:
        super().__init__()
        if hidden < 1:
            raise ValueError(f"hidden: must be >= 1, got {hidden}")
        if layers < 1:
            raise ValueError(f"layers: must be >= 1, got {layers}")
        self.eps = nn.Parameter(torch.zeros(layers))
        self.mlps = nn.ModuleList(
            nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, hidden))
            for _ in range(layers)
        )
        self.norms = nn.ModuleList(nn.LayerNorm(hidden) for _ in range(layers))
        self.virtual_node = bool(virtual_node)
        if self.virtual_node:
            self.vn_mlps = nn.ModuleList(
                nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, hidden))
                for _ in range(layers)
            )

    def forward(self, h: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        vn = torch.zeros_like(h[:, 0]) if self.virtual_node else None
        for i, (mlp, norm) in enumerate(zip(self.mlps, self.norms, strict=True)):
            if vn is not None:
                h = h + vn[:, None]
            g = mlp((1 + self.eps[i]) * h + aggregate(h, edge_index))
            h = torch.relu(norm(h + g))
            if vn is not None:
                vn = vn + self.vn_mlps[i](h.mean(1))
        return h


class GINControl(nn.Module):
    r"""The amortised proximal map :math:`y_\theta(t,x;G)\in[0,1]^n` of the qubo-ot-sampling paper.

    Node input = Linear(concat[Linear(x_c), Linear(x_d), Linear(time features)]), then :class:`GIN`, then
    a Linear head with a sigmoid. ``x_d ~ Bern(x_c)`` is drawn inside :meth:`forward` from ``generator``
    (or passed as ``xd``).
    """

    def __init__(
        self, hidden: int = 64, layers: int = 5, virtual_node: bool = True, time_dim: int = 16
    ) -> None:
        super().__init__()
        self.hidden, self.layers, self.time_dim = int(hidden), int(layers), int(time_dim)
        self.gin = GIN(hidden, layers, virtual_node)
        self.enc_c = nn.Linear(1, hidden)
        self.enc_d = nn.Linear(1, hidden)
        self.enc_t = nn.Linear(time_dim, hidden)
        self.mix = nn.Linear(3 * hidden, hidden)
        self.head = nn.Linear(hidden, 1)

    def forward(
        self,
        t: torch.Tensor,
        xc: torch.Tensor,
        edge_index: torch.Tensor,
        xd: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """``t`` (B,), ``xc`` (B, n) -> y (B, n) in (0, 1), in the module's dtype."""
        dt = self.head.weight.dtype
        xc = xc.to(dt)
        if xd is None:
            xd = torch.bernoulli(xc.clamp(0, 1), generator=generator)
        te = self.enc_t(time_embedding(t.to(dt), self.time_dim))
        h = torch.cat(
            [
                self.enc_c(xc[..., None]),
                self.enc_d(xd.to(dt)[..., None]),
                te[:, None].expand(-1, xc.shape[1], -1),
            ],
            -1,
        )
        h = self.gin(self.mix(h), edge_index)
        return torch.sigmoid(self.head(h).squeeze(-1))
