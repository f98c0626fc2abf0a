r"""Graph instances for the combinatorial family: generators and tensor views.

Erdős-Rényi and Barabási-Albert graphs come from ``networkx`` (``gnp_random_graph``,
``barabasi_albert_graph``); the RB model (Xu & Li, 2000; the hard MIS instances of the neural-CO
literature) has no maintained package, so :func:`rb_graph` is written here: ``n_groups`` groups of ``k``
nodes, a clique inside each group (one value per CSP variable), and for each of ``n_constraints`` random
distinct pairs of groups a random set of ``round(p k^2)`` incompatible value pairs joined by edges. With
``planted=True`` one node per group is chosen first and no incompatibility edge joins two planted nodes,
so the planted set is independent and the maximum independent set has exactly ``n_groups`` nodes (at most
one node per clique can be chosen). The default ``n_constraints = round(r n ln n)`` with ``r = 0.8`` and
``n = n_groups`` follows the model's usual scaling.

All generators return undirected simple ``networkx.Graph`` objects on nodes ``0..n-1``;
:func:`edge_index` and :func:`adjacency` give the torch views (both directions of every edge).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

__all__ = [
    "adjacency",
    "barabasi_albert",
    "check_graph",
    "edge_index",
    "erdos_renyi",
    "rb_graph",
]


def check_graph(G: Any, name: str = "G") -> Any:
    """``G`` if it is an undirected simple networkx graph on nodes ``0..n-1``, else ValueError/TypeError."""
    import networkx as nx

    if not isinstance(G, nx.Graph):
        raise TypeError(f"{name}: expected a networkx.Graph, got {type(G).__name__}")
    if G.is_directed():
        raise ValueError(f"{name}: must be undirected")
    if G.is_multigraph():
        raise ValueError(f"{name}: must be a simple graph, not a multigraph")
    if nx.number_of_selfloops(G) > 0:
        raise ValueError(f"{name}: has self-loops")
    if sorted(G.nodes) != list(range(G.number_of_nodes())):
        raise ValueError(f"{name}: nodes must be 0..n-1 (use networkx.convert_node_labels_to_integers)")
    if G.number_of_nodes() < 1:
        raise ValueError(f"{name}: has no nodes")
    return G


def erdos_renyi(n: int, p: float, seed: int) -> Any:
    """G(n, p) from ``networkx.gnp_random_graph``."""
    import networkx as nx

    if n < 1:
        raise ValueError(f"n: must be >= 1, got {n}")
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p: must be in [0, 1], got {p}")
    return nx.gnp_random_graph(int(n), float(p), seed=int(seed))


def barabasi_albert(n: int, m: int, seed: int) -> Any:
    """Preferential attachment graph from ``networkx.barabasi_albert_graph``."""
    import networkx as nx

    if not 1 <= m < n:
        raise ValueError(f"m: must satisfy 1 <= m < n, got m={m}, n={n}")
    return nx.barabasi_albert_graph(int(n), int(m), seed=int(seed))


def rb_graph(
    n_groups: int,
    k: int,
    p: float,
    seed: int,
    *,
    n_constraints: int | None = None,
    r: float = 0.8,
    planted: bool = True,
) -> Any:
    """An RB-model MIS instance (see the module docstring); node ``g * k + v`` is value ``v`` of group ``g``.

    The graph carries ``G.graph["groups"]`` (n_groups, k) and, with ``planted``, ``G.graph["planted"]``
    (the planted independent set, one node per group).
    """
    import networkx as nx

    if n_groups < 2:
        raise ValueError(f"n_groups: must be >= 2, got {n_groups}")
    if k < 1:
        raise ValueError(f"k: must be >= 1, got {k}")
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p: must be in [0, 1], got {p}")
    rng = np.random.default_rng(int(seed))
    n = n_groups * k
    G = nx.Graph()
    G.add_nodes_from(range(n))
    for g in range(n_groups):
        base = g * k
        G.add_edges_from((base + a, base + b) for a in range(k) for b in range(a + 1, k))
    if n_constraints is None:
        n_constraints = round(r * n_groups * math.log(n_groups))
    n_pairs = n_groups * (n_groups - 1) // 2
    n_constraints = min(int(n_constraints), n_pairs)
    plant = rng.integers(0, k, size=n_groups) if planted else None
    iu = np.triu_indices(n_groups, 1)
    chosen = rng.choice(n_pairs, size=n_constraints, replace=False)
    n_incompat = round(p * k * k)
    for c in chosen:
        g1, g2 = int(iu[0][c]), int(iu[1][c])
        cells = np.arange(k * k)
        if plant is not None:  # never forbid the planted pair
            cells = cells[cells != plant[g1] * k + plant[g2]]
        pick = rng.choice(cells, size=min(n_incompat, len(cells)), replace=False)
        G.add_edges_from((g1 * k + int(v // k), g2 * k + int(v % k)) for v in pick)
    G.graph["groups"] = (n_groups, k)
    if plant is not None:
        G.graph["planted"] = [g * k + int(v) for g, v in enumerate(plant)]
    return G


def edge_index(G: Any, device: str | torch.device = "cpu") -> torch.Tensor:
    """(2, 2|E|) long tensor with both directions of every edge."""
    check_graph(G)
    e = torch.tensor(list(G.edges), dtype=torch.long, device=device).reshape(-1, 2)
    return torch.cat([e, e.flip(1)], 0).T.contiguous()


def adjacency(
    G: Any, dtype: torch.dtype = torch.float64, device: str | torch.device = "cpu", weight: str | None = None
) -> torch.Tensor:
    """Dense symmetric (n, n) adjacency (edge attribute ``weight`` if given and present, else 1)."""
    check_graph(G)
    n = G.number_of_nodes()
    A = torch.zeros(n, n, dtype=dtype, device=device)
    if G.number_of_edges():
        e = torch.tensor(list(G.edges), dtype=torch.long, device=device)
        w = torch.tensor(
            [float(d.get(weight, 1.0)) if weight else 1.0 for _, _, d in G.edges(data=True)],
            dtype=dtype,
            device=device,
        )
        A[e[:, 0], e[:, 1]] = w
        A[e[:, 1], e[:, 0]] = w
    return A
