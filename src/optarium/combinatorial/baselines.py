"""Classical baselines: simulated annealing on the QUBO (``dwave-neal``), greedy and random-order decoders.

- :func:`simulated_annealing`: ``neal.SimulatedAnnealingSampler`` (dwave-neal 0.6 over dwave-samplers, the
  ``combinatorial`` extra) on the QUBO as a ``dimod.BinaryQuadraticModel``; its samples are repaired to
  feasibility and the best objective is returned. Imported inside the function.
- :func:`greedy_mis`: min-degree greedy (repeatedly take a node of minimum degree in the remaining graph
  and delete it with its neighbours); :func:`greedy_maxcut`: networkx's ``one_exchange``
  local search (networkx's maxcut heuristic).
- :func:`greedy_decode`: the samplers' decoder, vectorised over a batch of score vectors: visit nodes by
  decreasing score and add a node when the set stays independent (MIS; cliques use the complement),
  or threshold at 0.5 (MaxCut).
- :func:`random_order_decode`: the same greedy decoder over uniformly random orders (the control of the
  qubo-ot-sampling spec).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from optarium.combinatorial.graphs import adjacency, check_graph
from optarium.combinatorial.problems import QUBO, _check_problem, objective, repair

__all__ = ["greedy_decode", "greedy_maxcut", "greedy_mis", "random_order_decode", "simulated_annealing"]


def greedy_mis(G: Any) -> torch.Tensor:
    """Min-degree greedy maximal independent set (ties to the smallest node)."""
    check_graph(G)
    H = G.copy()
    s = torch.zeros(G.number_of_nodes(), dtype=torch.bool)
    while H.number_of_nodes():
        u = min(H.nodes, key=lambda v: (H.degree(v), v))
        s[u] = True
        H.remove_nodes_from([u, *list(H[u])])
    return s


def greedy_maxcut(G: Any, seed: int = 0) -> torch.Tensor:
    """networkx's one-exchange local search for MaxCut (partition side of each node)."""
    from networkx.algorithms.approximation import one_exchange

    check_graph(G)
    _, (S, _) = one_exchange(G, weight="weight", seed=int(seed))
    s = torch.zeros(G.number_of_nodes(), dtype=torch.bool)
    s[list(S)] = True
    return s


def greedy_decode(scores: torch.Tensor, A: torch.Tensor, problem: str) -> torch.Tensor:
    """Decode a batch of scores (..., n) into feasible 0/1 solutions (bool, same shape).

    ``A`` is the dense adjacency of the graph (of its complement for ``"maxclique"``, which the caller
    passes). MIS/clique: by decreasing score, add a node if none of its (conflict) neighbours is chosen.
    """
    _check_problem(problem, ("mis", "maxclique", "maxcut"))
    if problem == "maxcut":
        return scores > 0.5
    shape = scores.shape
    s = scores.reshape(-1, shape[-1])
    B, n = s.shape
    order = torch.argsort(s, dim=1, descending=True, stable=True)
    Ab = A.to(torch.bool)
    sel = torch.zeros(B, n, dtype=torch.bool, device=s.device)
    blocked = torch.zeros(B, n, dtype=torch.bool, device=s.device)
    rows = torch.arange(B, device=s.device)
    for j in range(n):  # sequential by definition; vectorised over the batch
        u = order[:, j]
        ok = ~blocked[rows, u]
        sel[rows, u] = ok
        blocked |= Ab[u] & ok[:, None]
    return sel.reshape(shape)


def random_order_decode(
    A: torch.Tensor, n_orders: int, generator: torch.Generator, problem: str = "mis"
) -> torch.Tensor:
    """Greedy decodes of ``n_orders`` uniformly random node orders: (n_orders, n) bool."""
    if n_orders < 1:
        raise ValueError(f"n_orders: must be >= 1, got {n_orders}")
    u = torch.rand(n_orders, A.shape[0], generator=generator, dtype=torch.float64).to(A.device)
    return greedy_decode(u, A, problem)


def simulated_annealing(
    G: Any, problem: str, num_reads: int = 16, num_sweeps: int = 1000, seed: int = 0, penalty: float = 2.0
) -> tuple[torch.Tensor, float]:
    """dwave-neal SA on the problem's QUBO; the best repaired sample and its objective value."""
    import dimod
    import neal

    check_graph(G)
    _check_problem(problem, ("mis", "maxclique", "maxcut", "mvc"))
    q = QUBO.from_graph(G, problem, penalty=penalty)
    Q = q.Q.numpy()
    n = q.n
    lin = {i: float(q.c[i] + Q[i, i]) for i in range(n)}
    iu = np.triu_indices(n, 1)
    quad = {(int(i), int(j)): float(2 * Q[i, j]) for i, j in zip(*iu, strict=True) if Q[i, j] != 0}
    bqm = dimod.BinaryQuadraticModel(lin, quad, q.offset, dimod.BINARY)
    ss = neal.SimulatedAnnealingSampler().sample(
        bqm, num_reads=int(num_reads), num_sweeps=int(num_sweeps), seed=int(seed) % (2**31)
    )
    X = ss.record.sample[:, [ss.variables.index(i) for i in range(n)]]
    best, bestv = None, None
    maximize = problem in ("mis", "maxclique", "maxcut")
    for row in X:
        r = repair(G, torch.as_tensor(row.astype(bool)), problem)
        v = objective(G, r, problem)
        if bestv is None or (v > bestv if maximize else v < bestv):
            best, bestv = r, v
    return best, float(bestv)


def _adj_for(G: Any, problem: str, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """The conflict adjacency the decoder needs: the graph's, or its complement's for MaxClique."""
    A = adjacency(G, dtype)
    if problem == "maxclique":
        A = 1.0 - A - torch.eye(A.shape[0], dtype=dtype)
    return A
