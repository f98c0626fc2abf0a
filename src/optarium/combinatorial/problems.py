r"""Graph problems as data: QUBO / energy forms, objective values, feasibility checks and repair.

Problems (``problem=`` strings): ``"mis"`` (maximum independent set), ``"maxclique"``, ``"maxcut"``,
``"mvc"`` (minimum vertex cover), ``"mds"`` (minimum dominating set) and ``"coloring"``.

QUBO forms (:meth:`QUBO.from_graph`), :math:`E(x)=x^\top Qx+c^\top x+\text{offset}` on :math:`x\in\{0,1\}^n`
with :math:`Q` symmetric:

- MIS: :math:`-\sum_i x_i+\lambda\sum_{(i,j)\in E}x_ix_j` (penalty :math:`\lambda=2` by default; any
  :math:`\lambda>1` keeps the minimisers independent sets);
- MaxClique: MIS on the complement graph;
- MaxCut: :math:`-\sum_{(i,j)\in E}w_{ij}(x_i+x_j-2x_ix_j)` (minus the cut);
- MVC: :math:`\sum_i x_i+\lambda\sum_{(i,j)\in E}(1-x_i)(1-x_j)` (offset :math:`\lambda|E|`).

MDS and colouring are not quadratic (domination is a clause over a neighbourhood; colouring needs one-hot
integer variables), so they have an objective, a feasibility check and a repair but no ``QUBO``; their
energy forms are :func:`mds_energy` (set size + penalty per undominated node) and :func:`coloring_energy`
(number of monochromatic edges for a given colour vector).

On a feasible solution the QUBO energy equals the objective's signed value (``-`` size for MIS/clique,
``-`` cut, ``+`` cover size): :func:`signed_objective`.

The exact multilinear relaxation :func:`multilinear_energy` (Zemel 1981) replaces :math:`x_i^2` by
:math:`x_i`: it equals :math:`E` on binaries and is :math:`\mathbb E_{z\sim\mathrm{Bern}(x)}E(z)` on the cube.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from optarium.combinatorial.graphs import adjacency, check_graph

__all__ = [
    "PROBLEMS",
    "QUBO",
    "QUBO_PROBLEMS",
    "coloring_energy",
    "coordinate_round",
    "is_feasible",
    "mds_energy",
    "multilinear_energy",
    "objective",
    "repair",
    "signed_objective",
]

PROBLEMS = ("mis", "maxclique", "maxcut", "mvc", "mds", "coloring")
QUBO_PROBLEMS = ("mis", "maxclique", "maxcut", "mvc")


def _check_problem(problem: str, allowed: tuple[str, ...] = PROBLEMS) -> str:
    if problem not in allowed:
        raise ValueError(f"problem: must be one of {allowed}, got {problem!r}")
    return problem


def _complement(G: Any) -> Any:
    import networkx as nx

    return nx.complement(G)


@dataclass(frozen=True)
class QUBO:
    """``E(x) = x^T Q x + c^T x + offset``; ``Q`` symmetric (n, n), ``c`` (n,)."""

    Q: torch.Tensor
    c: torch.Tensor
    offset: float = 0.0
    problem: str = ""

    def __post_init__(self) -> None:
        Q, c = self.Q, self.c
        if Q.ndim != 2 or Q.shape[0] != Q.shape[1]:
            raise ValueError(f"Q: must be square, got shape {tuple(Q.shape)}")
        if c.shape != Q.shape[:1]:
            raise ValueError(f"c: must have shape ({Q.shape[0]},), got {tuple(c.shape)}")
        if not torch.allclose(Q, Q.T):
            warnings.warn("Q: not symmetric; using (Q + Q^T) / 2", stacklevel=3)
            object.__setattr__(self, "Q", (Q + Q.T) / 2)

    @property
    def n(self) -> int:
        return int(self.Q.shape[0])

    @classmethod
    def from_graph(
        cls,
        G: Any,
        problem: str = "mis",
        penalty: float = 2.0,
        dtype: torch.dtype = torch.float64,
        device: str | torch.device = "cpu",
    ) -> QUBO:
        """The QUBO of ``problem`` on ``G`` (module docstring); MaxCut uses edge attribute ``weight``."""
        check_graph(G)
        _check_problem(problem, QUBO_PROBLEMS)
        if penalty <= 0:
            raise ValueError(f"penalty: must be > 0, got {penalty}")
        n = G.number_of_nodes()
        if problem == "maxclique":
            q = cls.from_graph(_complement(G), "mis", penalty, dtype, device)
            return cls(q.Q, q.c, q.offset, "maxclique")
        if problem == "maxcut":
            W = adjacency(G, dtype, device, weight="weight")
            return cls(W.clone(), -W.sum(1), 0.0, "maxcut")
        A = adjacency(G, dtype, device)
        if problem == "mis":
            return cls(penalty / 2 * A, -torch.ones(n, dtype=dtype, device=device), 0.0, "mis")
        # mvc
        return cls(penalty / 2 * A, 1.0 - penalty * A.sum(1), float(penalty * G.number_of_edges()), "mvc")

    def energy(self, x: torch.Tensor) -> torch.Tensor:
        """E over the last dimension of ``x`` (binary or not: the plain quadratic form)."""
        x = x.to(self.Q.dtype)
        return ((x @ self.Q) * x).sum(-1) + x @ self.c + self.offset

    def multilinear(self, x: torch.Tensor) -> torch.Tensor:
        """The exact multilinear relaxation f(x) (equals :meth:`energy` on binaries)."""
        return multilinear_energy(x, self.Q, self.c) + self.offset


def multilinear_energy(x: torch.Tensor, Q: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    r""":math:`f(x)=\sum_i(c_i+Q_{ii})x_i+\sum_{i\ne j}Q_{ij}x_ix_j` over the last dimension of ``x``."""
    x = x.to(Q.dtype)
    d = torch.diagonal(Q)
    Qo = Q - torch.diag(d)
    return ((x @ Qo) * x).sum(-1) + x @ (c + d)


def coordinate_round(x: torch.Tensor, Q: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """Sequential coordinate-argmin rounding of ``x`` in [0, 1]^n (1-D): f never increases, result binary.

    f is affine in each coordinate, so setting x_i to the better endpoint (ties to 0) cannot raise it.
    """
    x = x.to(Q.dtype).clone()
    d = torch.diagonal(Q)
    Qo = Q - torch.diag(d)
    for i in range(x.shape[-1]):  # sequential by definition
        slope = c[i] + d[i] + 2 * (Qo[i] @ x)
        x[i] = 1.0 if slope < 0 else 0.0
    return x


# ------------------------------------------------------------------ objectives, feasibility and repair
def _sel(x: Any) -> np.ndarray:
    return np.asarray(torch.as_tensor(x).detach().cpu()).astype(bool).ravel()


def objective(G: Any, x: Any, problem: str) -> float:
    """The natural objective value of solution ``x`` (set size, cut value, number of colours).

    ``x`` is a 0/1 vector, except for ``"coloring"`` where it is an integer colour per node.
    """
    _check_problem(problem)
    if problem == "coloring":
        return float(len(set(np.asarray(torch.as_tensor(x).cpu()).astype(int).tolist())))
    s = _sel(x)
    if problem == "maxcut":
        return float(sum(float(d.get("weight", 1.0)) for u, v, d in G.edges(data=True) if s[u] != s[v]))
    return float(s.sum())


def signed_objective(G: Any, x: Any, problem: str) -> float:
    """The objective as the QUBO minimises it: -size for MIS/clique, -cut, +size for the cover."""
    v = objective(G, x, problem)
    return -v if problem in ("mis", "maxclique", "maxcut") else v


def is_feasible(G: Any, x: Any, problem: str) -> bool:
    """Whether ``x`` is a feasible solution of ``problem`` on ``G`` (any partition is a feasible cut)."""
    _check_problem(problem)
    if problem == "maxcut":
        return len(_sel(x)) == G.number_of_nodes()
    if problem == "coloring":
        col = np.asarray(torch.as_tensor(x).cpu()).astype(int)
        return all(col[u] != col[v] for u, v in G.edges)
    s = _sel(x)
    if problem == "mis":
        return not any(s[u] and s[v] for u, v in G.edges)
    if problem == "maxclique":
        nodes = np.flatnonzero(s)
        return all(G.has_edge(int(a), int(b)) for i, a in enumerate(nodes) for b in nodes[i + 1 :])
    if problem == "mvc":
        return all(s[u] or s[v] for u, v in G.edges)
    # mds
    return all(s[u] or any(s[v] for v in G[u]) for u in G.nodes)


def repair(G: Any, x: Any, problem: str) -> torch.Tensor:
    """A feasible solution near ``x`` (returned as a bool tensor, an int64 one for colouring).

    MIS/clique: drop the selected node with most conflicts until none is left, then add nodes greedily
    (lowest degree first) while feasible (the result is maximal). MVC/MDS: add, for each uncovered edge /
    undominated node, the endpoint / neighbour of highest degree. Colouring: recolour each conflicting node
    with its smallest free colour. MaxCut: unchanged.
    """
    _check_problem(problem)
    check_graph(G)
    if problem == "coloring":
        col = np.asarray(torch.as_tensor(x).cpu()).astype(int).copy()
        for u in G.nodes:
            if any(col[u] == col[v] for v in G[u] if v < u):
                used = {int(col[v]) for v in G[u]}
                col[u] = next(c for c in range(len(used) + 1) if c not in used)
        return torch.as_tensor(col, dtype=torch.long)
    s = _sel(x).copy()
    if problem == "maxcut":
        return torch.as_tensor(s)
    if problem in ("mis", "maxclique"):
        H = G if problem == "mis" else _complement(G)
        while True:
            conf = {u: sum(1 for v in H[u] if s[v]) for u in np.flatnonzero(s)}
            worst = max(conf, key=lambda u: (conf[u], -u), default=None)
            if worst is None or conf[worst] == 0:
                break
            s[worst] = False
        for u in sorted(H.nodes, key=lambda u: (H.degree(u), u)):
            if not s[u] and not any(s[v] for v in H[u]):
                s[u] = True
        return torch.as_tensor(s)
    if problem == "mvc":
        for u, v in G.edges:
            if not (s[u] or s[v]):
                s[u if G.degree(u) >= G.degree(v) else v] = True
        return torch.as_tensor(s)
    for u in G.nodes:  # mds
        if not (s[u] or any(s[v] for v in G[u])):
            s[max([u, *G[u]], key=lambda w: (G.degree(w), -w))] = True
    return torch.as_tensor(s)


def mds_energy(G: Any, x: torch.Tensor, penalty: float = 2.0) -> torch.Tensor:
    """|S| + penalty * #(undominated nodes) over the last dimension of binary ``x``."""
    A = adjacency(G, x.dtype if x.is_floating_point() else torch.float64, x.device)
    xf = x.to(A.dtype)
    covered = (xf + xf @ A) > 0
    return xf.sum(-1) + penalty * (~covered).sum(-1).to(A.dtype)


def coloring_energy(G: Any, colors: torch.Tensor) -> torch.Tensor:
    """Number of monochromatic edges of the colour vector ``colors`` (0 iff it is a proper colouring)."""
    if G.number_of_edges() == 0:
        return torch.zeros((), dtype=torch.long)
    e = torch.tensor(list(G.edges), dtype=torch.long, device=colors.device)
    return (colors[..., e[:, 0]] == colors[..., e[:, 1]]).sum(-1)
