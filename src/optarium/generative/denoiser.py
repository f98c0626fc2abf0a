r"""A small DDPM epsilon-prediction network and its trainer, shared by the generative experiments and tests.

:class:`EpsMLP` is an MLP :math:`\epsilon_\theta(x_t, t)` on flat data with a sinusoidal embedding of the
integer training timestep (the transformer positional embedding of Ho et al. 2020, "Denoising Diffusion
Probabilistic Models"); :func:`linear_alphas_cumprod` is the DDPM linear-:math:`\beta` schedule
(:math:`\beta_t` from ``beta_start`` to ``beta_end`` over ``T`` steps, :math:`\bar\alpha_t=\prod_{s\le
t}(1-\beta_s)`), the same as ``diffusers``' ``beta_schedule="linear"``; :func:`train_denoiser` minimises the
simple loss :math:`\mathbb
E\,\|\epsilon-\epsilon_\theta(\sqrt{\bar\alpha_t}x_0+\sqrt{1-\bar\alpha_t}\epsilon,t)\|^2` with Adam for a
fixed number of steps (deterministic under ``seed``: the step count, not a wall-clock budget, sets the
work).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from optarium._core.validation import check_int, check_positive

__all__ = ["EpsMLP", "linear_alphas_cumprod", "timestep_embedding", "train_denoiser"]


def linear_alphas_cumprod(
    T: int = 1000,
    beta_start: float = 1e-4,
    beta_end: float = 0.02,
    *,
    dtype: torch.dtype = torch.float64,
    device: str | torch.device = "cpu",
) -> torch.Tensor:
    """:math:`\\bar\\alpha_t` for ``t = 0 .. T-1`` of the DDPM linear-beta schedule (shape ``(T,)``)."""
    check_int("T", T, minimum=2)
    check_positive("beta_start", beta_start)
    check_positive("beta_end", beta_end)
    if not beta_end < 1.0:
        raise ValueError(f"beta_end: must be < 1, got {beta_end}")
    betas = torch.linspace(beta_start, beta_end, T, dtype=torch.float64)
    return torch.cumprod(1.0 - betas, 0).to(dtype=dtype, device=device)


def timestep_embedding(t: torch.Tensor, dim: int, max_period: float = 10_000.0) -> torch.Tensor:
    """Sinusoidal embedding ``(..., dim)`` of (integer or real) timesteps ``t``; ``dim`` even."""
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float32, device=t.device) / half)
    args = t.to(torch.float32)[..., None] * freqs
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


class EpsMLP(nn.Module):
    """``eps(x, t)``: an MLP of ``depth`` hidden layers of ``width`` (SiLU) on ``[x, emb(t)]``."""

    def __init__(self, dim: int, width: int = 128, depth: int = 3, emb_dim: int = 32) -> None:
        super().__init__()
        check_int("dim", dim, minimum=1)
        check_int("width", width, minimum=1)
        check_int("depth", depth, minimum=1)
        check_int("emb_dim", emb_dim, minimum=2)
        self.emb_dim = emb_dim - emb_dim % 2
        layers: list[nn.Module] = []
        d_in = dim + self.emb_dim
        for _ in range(depth):
            layers += [nn.Linear(d_in, width), nn.SiLU()]
            d_in = width
        layers.append(nn.Linear(d_in, dim))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        t = torch.as_tensor(t, device=x.device)
        if t.ndim == 0:
            t = t.expand(x.shape[0])
        emb = timestep_embedding(t, self.emb_dim).to(x.dtype)
        return self.net(torch.cat([x, emb], dim=-1))


def train_denoiser(
    data: torch.Tensor,
    *,
    steps: int = 2000,
    batch_size: int = 256,
    lr: float = 2e-3,
    width: int = 128,
    depth: int = 3,
    T: int = 1000,
    seed: int = 0,
) -> EpsMLP:
    """Train an :class:`EpsMLP` on ``data`` (``(n, d)``) with the DDPM simple loss; returns it in eval
    mode."""
    if not isinstance(data, torch.Tensor) or data.ndim != 2 or data.shape[0] < 1:
        raise ValueError("data: must be a non-empty (n, d) tensor")
    check_int("steps", steps, minimum=0)
    check_int("batch_size", batch_size, minimum=1)
    check_positive("lr", lr)
    g = torch.Generator().manual_seed(int(seed))
    torch.manual_seed(int(seed))  # parameter initialisation
    model = EpsMLP(data.shape[1], width=width, depth=depth).to(data.dtype)
    abar = linear_alphas_cumprod(T, dtype=data.dtype)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, max(steps, 1))
    n = data.shape[0]
    for _ in range(steps):
        idx = torch.randint(n, (batch_size,), generator=g)
        t = torch.randint(T, (batch_size,), generator=g)
        eps = torch.randn(batch_size, data.shape[1], generator=g, dtype=data.dtype)
        a = abar[t][:, None]
        xt = a.sqrt() * data[idx] + (1 - a).sqrt() * eps
        loss = (model(xt, t) - eps).pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
    return model.eval()
