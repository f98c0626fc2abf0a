r"""Communication graphs and gossip mixing matrices for decentralized algorithms.

A mixing matrix :math:`W \in \mathbb{R}^{n\times n}` for ``n`` clients on a connected undirected graph
:math:`G` is symmetric, doubly stochastic (:math:`W\mathbf 1 = \mathbf 1`, :math:`\mathbf 1^\top W =
\mathbf 1^\top`), nonnegative, with :math:`W_{ij} > 0` only on edges and the diagonal. One gossip round is
:math:`X \leftarrow W X` (:meth:`optarium.distributed.Communicator.gossip`).

Weights:

- ``"metropolis"`` (Metropolis-Hastings; Xiao & Boyd, "Fast linear iterations for distributed averaging",
  Systems & Control Letters 2004): :math:`W_{ij} = 1 / (1 + \max(d_i, d_j))` on edges,
  :math:`W_{ii} = 1 - \sum_{j\ne i} W_{ij}`.
- ``"max_degree"``: :math:`W = I - L / (d_{\max} + 1)` with the graph Laplacian :math:`L`.

The **spectral gap** is :math:`1 - \rho` with :math:`\rho = \max_{i\ge 2}|\lambda_i(W)| =
\|W - \mathbf 1\mathbf 1^\top/n\|_2`; consensus error contracts by :math:`\rho` per round, so rates of
decentralized methods scale with :math:`1/(1-\rho)`. It is 1 for the complete graph with Metropolis
weights and :math:`\Theta(1/n^2)` on a ring.

Topologies: ``complete``, ``ring`` (i ~ i +- 1 mod n), ``torus`` (an r x c grid with wrap-around, r the
largest divisor of n not above sqrt(n); a prime n gives r = 1, i.e. a ring), ``star`` (client 0 is the hub),
``erdos_renyi`` (each edge independently with probability ``p``; redrawn, up to 100 times, until connected).
"""

from __future__ import annotations

import math

import torch

from optarium._core.validation import check_choice, check_int, check_probability

__all__ = [
    "TOPOLOGIES",
    "adjacency",
    "check_mixing_matrix",
    "is_connected",
    "metropolis_weights",
    "mixing_matrix",
    "spectral_gap",
]

TOPOLOGIES = ("complete", "ring", "torus", "star", "erdos_renyi")
_ER_TRIES = 100


def is_connected(A: torch.Tensor) -> bool:
    """Whether the undirected graph with adjacency (nonzero pattern of) ``A`` is connected (on A's device)."""
    n = A.shape[0]
    adj = (A != 0) | (A.T != 0)
    seen = torch.zeros(n, dtype=torch.bool, device=A.device)
    seen[0] = True
    frontier = seen.clone()
    while bool(frontier.any()):
        reach = adj[frontier].any(0) & ~seen
        seen |= reach
        frontier = reach
    return bool(seen.all())


def _torus_shape(n: int) -> tuple[int, int]:
    r = max(d for d in range(1, math.isqrt(n) + 1) if n % d == 0)
    return r, n // r


def adjacency(
    topology: str, n: int, *, p: float | None = None, generator: torch.Generator | None = None
) -> torch.Tensor:
    """The boolean ``(n, n)`` adjacency matrix (no self loops) of a named topology (see the module doc)."""
    check_choice("topology", topology, TOPOLOGIES)
    n = check_int("n", n, minimum=1)
    if topology != "erdos_renyi" and p is not None:
        raise ValueError(f"p: only used by 'erdos_renyi', got p={p!r} for {topology!r}")
    A = torch.zeros(n, n, dtype=torch.bool)
    idx = torch.arange(n)
    if topology == "complete":
        A[:] = True
    elif topology == "ring":
        A[idx, (idx + 1) % n] = True
        A[idx, (idx - 1) % n] = True
    elif topology == "torus":
        r, c = _torus_shape(n)
        row, col = idx // c, idx % c
        for dr, dc in ((0, 1), (0, -1), (1, 0), (-1, 0)):
            A[idx, ((row + dr) % r) * c + (col + dc) % c] = True
    elif topology == "star":
        A[0, 1:] = True
        A[1:, 0] = True
    else:
        if p is None:
            raise ValueError("p: 'erdos_renyi' needs an edge probability p in (0, 1]")
        p = check_probability("p", p)
        if p == 0 and n > 1:
            raise ValueError("p: must be > 0 for a connected Erdos-Renyi graph with n > 1")
        for _ in range(_ER_TRIES):
            upper = torch.rand(n, n, generator=generator) < p
            A = torch.triu(upper, diagonal=1)
            A = A | A.T
            if is_connected(A):
                break
        else:
            raise ValueError(
                f"p: Erdos-Renyi graph with n={n}, p={p} was disconnected in {_ER_TRIES} draws; raise p"
            )
    A.fill_diagonal_(False)
    return A


def metropolis_weights(A: torch.Tensor, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Metropolis-Hastings mixing matrix of the undirected graph with adjacency ``A`` (no self loops)."""
    if not isinstance(A, torch.Tensor) or A.ndim != 2 or A.shape[0] != A.shape[1]:
        shape = tuple(A.shape) if isinstance(A, torch.Tensor) else type(A).__name__
        raise ValueError(f"A: must be a square (n, n) adjacency tensor, got {shape}")
    adj = ((A != 0) | (A.T != 0)).clone()
    adj.fill_diagonal_(False)
    deg = adj.sum(1).to(dtype)
    W = torch.where(
        adj, 1.0 / (1.0 + torch.maximum(deg[:, None], deg[None, :])), torch.zeros((), dtype=dtype)
    )
    W = W + torch.diag(1.0 - W.sum(1))
    return W


def mixing_matrix(
    topology: str,
    n: int,
    *,
    p: float | None = None,
    generator: torch.Generator | None = None,
    weights: str = "metropolis",
    dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    """A symmetric doubly stochastic ``(n, n)`` mixing matrix of ``topology`` (validated before return).

    Args:
        topology: one of ``complete``, ``ring``, ``torus``, ``star``, ``erdos_renyi``.
        n: number of clients (>= 1).
        p: edge probability of ``erdos_renyi`` (required there, rejected elsewhere).
        generator: randomness of ``erdos_renyi``.
        weights: ``"metropolis"`` (default) or ``"max_degree"``.
        dtype: floating dtype of the result (default float64).
    """
    check_choice("weights", weights, ("metropolis", "max_degree"))
    A = adjacency(topology, n, p=p, generator=generator)
    if weights == "metropolis":
        W = metropolis_weights(A, dtype)
    else:
        deg = A.sum(1).to(dtype)
        L = torch.diag(deg) - A.to(dtype)
        W = torch.eye(n, dtype=dtype) - L / (float(deg.max()) + 1.0)
    return check_mixing_matrix(W, n)


def check_mixing_matrix(W: torch.Tensor, n: int | None = None, *, atol: float | None = None) -> torch.Tensor:
    """Return ``W`` if it is a valid gossip matrix, else raise ``ValueError`` naming the problem.

    Checks: a square 2-D floating tensor (of size ``n`` if given), finite, nonnegative, symmetric, rows and
    columns summing to 1 (within ``atol``), and a connected graph with :math:`\\rho < 1` (so gossip
    converges to the average). The default ``atol`` follows the dtype: :math:`\\max(10^{-8}, 8 n
    \\varepsilon)` with :math:`\\varepsilon` the machine epsilon, so a float32 matrix that sums to one up
    to rounding passes while a float64 one is held to ``1e-8`` as before.
    """
    if not isinstance(W, torch.Tensor):
        raise TypeError(f"W: must be a tensor, got {type(W).__name__}")
    if W.dim() != 2 or W.shape[0] != W.shape[1]:
        raise ValueError(f"W: must be a square matrix, got shape {tuple(W.shape)}")
    if n is not None and W.shape[0] != n:
        raise ValueError(f"W: wrong size, expected ({n}, {n}) for {n} clients, got {tuple(W.shape)}")
    if not W.is_floating_point():
        raise TypeError(f"W: must be floating point, got {W.dtype}")
    if atol is None:
        atol = max(1e-8, 8 * W.shape[0] * torch.finfo(W.dtype).eps)
    elif not isinstance(atol, (int, float)) or isinstance(atol, bool) or not atol >= 0:
        raise ValueError(f"atol: must be a nonnegative number, got {atol!r}")
    if not bool(torch.isfinite(W).all()):
        raise ValueError("W: has non-finite entries")
    if bool((W < -atol).any()):
        raise ValueError(f"W: has negative entries (min {float(W.min()):.3g})")
    if not torch.allclose(W, W.T, atol=atol, rtol=0):
        raise ValueError(f"W: not symmetric (max |W - W^T| = {float((W - W.T).abs().max()):.3g})")
    rows = W.sum(1)
    cols = W.sum(0)
    if not bool(((rows - 1).abs() <= atol).all() and ((cols - 1).abs() <= atol).all()):
        bad = float(torch.cat([(rows - 1).abs(), (cols - 1).abs()]).max())
        raise ValueError(f"W: not doubly stochastic (max |row/column sum - 1| = {bad:.3g})")
    off = W.clone()
    off.fill_diagonal_(0)
    if not is_connected(off):
        raise ValueError("W: the communication graph is disconnected (gossip cannot reach consensus)")
    if W.shape[0] > 1 and spectral_gap(W) <= atol:
        raise ValueError("W: spectral gap is 0 (|lambda_2| or |lambda_n| = 1); gossip would not converge")
    return W


def spectral_gap(W: torch.Tensor) -> float:
    """:math:`1 - \\max_{i\\ge2}|\\lambda_i(W)| = 1 - \\|W - 11^T/n\\|_2` of a symmetric mixing matrix."""
    if not isinstance(W, torch.Tensor) or W.dim() != 2 or W.shape[0] != W.shape[1]:
        raise ValueError("W: must be a square matrix")
    n = W.shape[0]
    if n == 1:
        return 1.0
    Wd = W.detach().to(torch.float64).cpu()
    J = torch.full((n, n), 1.0 / n, dtype=torch.float64)
    rho = float(torch.linalg.eigvalsh((Wd + Wd.T) / 2 - J).abs().max())
    return 1.0 - rho
