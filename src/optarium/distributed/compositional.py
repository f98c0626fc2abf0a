r"""Federated multi-level compositional minimax problems, the input of :mod:`~optarium.distributed.ls2mc_gda`.

A problem is :math:`\min_x \max_y F(x, y) = \frac1N \sum_{n=1}^N f_n(G_n(x), y)` with
:math:`G_n = g_n^{(K)} \circ \dots \circ g_n^{(1)}`, where only noisy values and vector-Jacobian products of
each level (and noisy gradients of :math:`f_n`) are available. Everything is batched over clients: a tensor
argument has a leading axis of rows, row ``i`` belonging to client ``clients[i]``.

- A **level** is a callable ``g(h, batch, clients) -> (n, d_out)``; it may define ``g.vjp(h, batch, clients,
  v) -> (n, d_in)`` (the row-wise :math:`v^\top \partial g(h)`), otherwise ``torch.func.vjp`` is used.
- The **outer** function is a callable ``f(u, y, batch, clients) -> (n,)`` (per-row values); it may define
  ``f.grads(u, y, batch, clients) -> (grad_u, grad_y)``, otherwise ``torch.func.vjp`` is used.
- ``sample(generator, size)`` draws the next ``K + 1`` batches (one per level, then the outer one) for **all**
  ``n_clients`` clients (leading axis ``n_clients``; a batch is a tensor or a tuple/list/dict of tensors);
  the solver keeps its own clients' rows, so the draws do not depend on how clients are split over
  processes. ``size`` is the mini-batch size (the initial batch :math:`S` uses a larger one). Randomness
  that belongs to a sample (additive noise included) must live in the batch, so that a level evaluated at
  two inputs with the same batch sees the same draw (what the STORM correction needs).
- ``evaluate(x, y) -> {metric: float}`` (optional): noise-free monitoring metrics at one point, computed
  over all clients (``phi``, ``grad_phi_norm``, ``objective`` ... as the problem can); used by the solver's
  history and for its stopping rule. It must give the same numbers on every rank.

For :func:`optarium.distributed.launch` the problem and its parts must pickle (module-level classes, as
:class:`TanhCompositional` is).

:class:`TanhCompositional` is the synthetic NC-SC instance of the spec with an exact
:math:`\nabla\Phi`: :math:`g^{(k)}_n(h) = \tanh(W^{(k)}_n h)` and
:math:`f_n(u, y) = \langle y, u - c_n\rangle - \frac\mu2\|y\|^2`, so
:math:`\Phi(x) = \max_y F(x, y) = \frac1{2\mu}\|\frac1N\sum_n (G_n(x) - c_n)\|^2`. Gaussian noise of standard
deviation :math:`\sigma/\sqrt{\text{size}}` is added to every level value, every level VJP and both outer
gradients, drawn as part of the sample.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from optarium._core.validation import check_int, check_nonnegative, check_positive

__all__ = [
    "BilinearOuter",
    "CompositionalMinimaxProblem",
    "TanhCompositional",
    "TanhLevel",
    "make_tanh_compositional",
    "nonnegative",
]


def nonnegative(y: torch.Tensor) -> torch.Tensor:
    """Projection onto :math:`y \\ge 0` (the AUC dual variable); picklable, for ``y_projection``."""
    return y.clamp_min(0.0)


class CompositionalMinimaxProblem:
    """A federated multi-level compositional minimax problem (see the module docstring for the protocol).

    Args:
        inner: the K levels, innermost first.
        outer: the outer function :math:`f`.
        sample: ``sample(generator, size) -> list of K + 1 batches`` for all clients.
        n_clients, dim_x, dim_y: N and the dimensions of x and y.
        evaluate: optional noise-free metrics ``evaluate(x, y) -> dict``.
        like: a tensor of the problem's dtype and device (default float64 on the CPU).
    """

    def __init__(
        self,
        inner: Sequence[Callable[..., torch.Tensor]],
        outer: Callable[..., torch.Tensor],
        sample: Callable[[torch.Generator, int], list[Any]],
        *,
        n_clients: int,
        dim_x: int,
        dim_y: int,
        evaluate: Callable[[torch.Tensor, torch.Tensor], dict[str, float]] | None = None,
        like: torch.Tensor | None = None,
    ) -> None:
        if isinstance(inner, (str, bytes)) or not isinstance(inner, Sequence) or not inner:
            raise ValueError("inner: must be a non-empty sequence of level callables")
        for i, g in enumerate(inner):
            if not callable(g):
                raise TypeError(f"inner: level {i} is not callable ({type(g).__name__})")
        if not callable(outer):
            raise TypeError(f"outer: must be callable, got {type(outer).__name__}")
        if not callable(sample):
            raise TypeError(f"sample: must be callable, got {type(sample).__name__}")
        self.inner = list(inner)
        self.outer = outer
        self._sample = sample
        self.n_clients = check_int("n_clients", n_clients, minimum=1)
        self.dim_x = check_int("dim_x", dim_x, minimum=1)
        self.dim_y = check_int("dim_y", dim_y, minimum=1)
        self._evaluate = evaluate
        self.like = torch.zeros((), dtype=torch.float64) if like is None else like

    @property
    def K(self) -> int:
        """The number of inner levels."""
        return len(self.inner)

    def sample(self, generator: torch.Generator, size: int) -> list[Any]:
        """The next K + 1 batches for all clients (see the module docstring)."""
        return self._sample(generator, size)

    def evaluate(self, x: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
        """Noise-free metrics at ``(x, y)`` (empty without an ``evaluate`` function)."""
        return {} if self._evaluate is None else dict(self._evaluate(x, y))


class TanhLevel:
    """The level :math:`g_n(h) = \\tanh(W_n h) + e` with the sample's noise ``batch = (e_value, e_vjp)``.

    ``W``: ``(N, d_out, d_in)``. The VJP is :math:`W_n^\\top((1 - \\tanh^2(W_n h)) \\odot v) + e_{vjp}`.
    """

    def __init__(self, W: torch.Tensor) -> None:
        self.W = W

    def __call__(self, h: torch.Tensor, batch: Any, clients: torch.Tensor) -> torch.Tensor:
        """Noisy level values, one row per client row."""
        return torch.tanh(torch.einsum("noi,ni->no", self.W[clients], h)) + batch[0]

    def vjp(self, h: torch.Tensor, batch: Any, clients: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Noisy row-wise :math:`v^\\top \\partial g(h)`."""
        W = self.W[clients]
        t = torch.tanh(torch.einsum("noi,ni->no", W, h))
        return torch.einsum("noi,no->ni", W, (1.0 - t * t) * v) + batch[1]


class BilinearOuter:
    """:math:`f_n(u, y) = \\langle y, u - c_n\\rangle - \\frac\\mu2\\|y\\|^2`.

    The gradients carry the sample's noise ``batch = (e_u, e_y)``.
    """

    def __init__(self, c: torch.Tensor, mu: float) -> None:
        self.c = c
        self.mu = mu

    def __call__(self, u: torch.Tensor, y: torch.Tensor, batch: Any, clients: torch.Tensor) -> torch.Tensor:
        """Per-row values (noise-free; the noise enters the gradients)."""
        return (y * (u - self.c[clients])).sum(-1) - 0.5 * self.mu * (y * y).sum(-1)

    def grads(
        self, u: torch.Tensor, y: torch.Tensor, batch: Any, clients: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Noisy :math:`(\\nabla_u f, \\nabla_y f)` per row."""
        return y + batch[0], u - self.c[clients] - self.mu * y + batch[1]


class TanhCompositional(CompositionalMinimaxProblem):
    r"""The synthetic problem of the module docstring, with exact :math:`\Phi` and :math:`\nabla\Phi`.

    Attributes: ``Ws`` (the level matrices, each ``(N, d_out, d_in)``), ``c`` (``(N, d_K)``), ``mu``,
    ``sigma``.
    """

    def __init__(self, Ws: Sequence[torch.Tensor], c: torch.Tensor, mu: float, sigma: float) -> None:
        self.Ws = [W for W in Ws]
        self.c = c
        self.mu = check_positive("mu", mu)
        self.sigma = check_nonnegative("sigma", sigma)
        N = c.shape[0]
        for k, W in enumerate(self.Ws):
            if W.ndim != 3 or W.shape[0] != N:
                raise ValueError(f"Ws: level {k} must have shape (N={N}, d_out, d_in), got {tuple(W.shape)}")
            if k and W.shape[2] != self.Ws[k - 1].shape[1]:
                raise ValueError(f"Ws: level {k} input {W.shape[2]} != level {k - 1} output")
        if c.shape[1] != self.Ws[-1].shape[1]:
            raise ValueError(f"c: must have shape (N, {self.Ws[-1].shape[1]}), got {tuple(c.shape)}")
        super().__init__(
            [TanhLevel(W) for W in self.Ws],
            BilinearOuter(c, self.mu),
            self._draw,
            n_clients=N,
            dim_x=self.Ws[0].shape[2],
            dim_y=c.shape[1],
            evaluate=self._metrics,
            like=c,
        )

    def _draw(self, gen: torch.Generator, size: int) -> list[Any]:
        N, s = self.n_clients, self.sigma / math.sqrt(size)
        c = self.c

        def z(d: int) -> torch.Tensor:
            return s * torch.randn(N, d, generator=gen, dtype=c.dtype, device=c.device)

        out: list[Any] = []
        for W in self.Ws:
            ev = z(W.shape[1])
            out.append((ev, z(W.shape[2])))
        d = c.shape[1]
        ev = z(d)
        out.append((ev, z(d)))
        return out

    def chain(self, x: torch.Tensor) -> list[torch.Tensor]:
        """Noise-free inner values of every client at one point ``x``: ``[x, G^{(1)}, ..., G^{(K)}]`` rows."""
        hs = [x.expand(self.n_clients, -1)]
        for W in self.Ws:
            hs.append(torch.tanh(torch.einsum("noi,ni->no", W, hs[-1])))
        return hs

    def phi(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        r""":math:`\Phi(x)` and :math:`\nabla\Phi(x)` (exact)."""
        hs = self.chain(x)
        r = (hs[-1] - self.c).mean(0)
        v = (r / self.mu).expand(self.n_clients, -1)
        for k in range(len(self.Ws) - 1, -1, -1):
            t = hs[k + 1]
            v = torch.einsum("noi,no->ni", self.Ws[k], (1.0 - t * t) * v)
        return (r @ r) / (2.0 * self.mu), v.mean(0)

    def _metrics(self, x: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
        val, g = self.phi(x)
        r = (self.chain(x)[-1] - self.c).mean(0)
        return {
            "phi": float(val),
            "grad_phi_norm": float(g.norm()),
            "objective": float(y @ r - 0.5 * self.mu * (y @ y)),
            "grad_y_norm": float((r - self.mu * y).norm()),
        }


def make_tanh_compositional(
    n_clients: int = 4,
    dim_x: int = 20,
    dims: Sequence[int] = (10, 10),
    *,
    mu: float = 0.1,
    sigma: float = 0.5,
    c_std: float = 0.5,
    identical: bool = False,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
    device: Any = "cpu",
) -> TanhCompositional:
    r"""The spec's problem: :math:`W^{(k)}_n` :math:`N(0, 1/d_{in})`, :math:`c_n \sim N(0, c_{std}^2)`.

    ``identical=True`` gives every client the same :math:`(W, c)` (one draw, independent of ``n_clients``), so
    the global objective does not depend on N (the linear-speedup check).
    """
    n_clients = check_int("n_clients", n_clients, minimum=1)
    dim_x = check_int("dim_x", dim_x, minimum=1)
    if not dims:
        raise ValueError("dims: needs at least one level")
    gen = torch.Generator().manual_seed(check_int("seed", seed, minimum=0))
    m = 1 if identical else n_clients  # identical: one draw, the same for every N
    Ws = []
    d_in = dim_x
    for k, d in enumerate(dims):
        d = check_int(f"dims[{k}]", d, minimum=1)
        Ws.append(torch.randn(m, d, d_in, generator=gen, dtype=torch.float64) / math.sqrt(d_in))
        d_in = d
    c = c_std * torch.randn(m, d_in, generator=gen, dtype=torch.float64)
    if identical:
        Ws = [W.expand(n_clients, -1, -1).clone() for W in Ws]
        c = c.expand(n_clients, -1).clone()
    return TanhCompositional(
        [W.to(dtype=dtype, device=device) for W in Ws], c.to(dtype=dtype, device=device), mu, sigma
    )
