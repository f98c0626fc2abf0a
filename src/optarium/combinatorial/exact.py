"""Exact references from OR-Tools CP-SAT (``ortools`` 9.15, the ``combinatorial`` extra).

:func:`cpsat_solve` models each problem as a 0/1 program (MIS, clique, MaxCut with edge-cut indicator
variables, MVC, MDS, colouring with one-hot variables and ``k <= n`` colours used) and returns the best
solution, its objective value, CP-SAT's best bound and whether optimality was proved. ``ortools`` is
imported inside the function, so ``import optarium`` stays cheap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from optarium.combinatorial.graphs import check_graph
from optarium.combinatorial.problems import _check_problem

__all__ = ["ExactSolution", "cpsat_solve"]


@dataclass(frozen=True)
class ExactSolution:
    """CP-SAT's answer: ``x`` (bool tensor; int64 colours for colouring), objective, bound, optimal flag."""

    x: torch.Tensor
    value: float
    bound: float
    optimal: bool
    wall_time_s: float


def cpsat_solve(
    G: Any, problem: str, time_limit_s: float = 10.0, workers: int = 1, seed: int = 0
) -> ExactSolution:
    """Solve ``problem`` on ``G`` with CP-SAT (objective as in :func:`.problems.objective`)."""
    from ortools.sat.python import cp_model

    check_graph(G)
    _check_problem(problem)
    if time_limit_s <= 0:
        raise ValueError(f"time_limit_s: must be > 0, got {time_limit_s}")
    n = G.number_of_nodes()
    m = cp_model.CpModel()
    edges = list(G.edges)
    if problem == "coloring":
        k = n
        a = [[m.new_bool_var(f"a{u}_{c}") for c in range(k)] for u in range(n)]
        used = [m.new_bool_var(f"used{c}") for c in range(k)]
        for u in range(n):
            m.add_exactly_one(a[u])
            for c in range(k):
                m.add_implication(a[u][c], used[c])
        for u, v in edges:
            for c in range(k):
                m.add_bool_or([a[u][c].Not(), a[v][c].Not()])
        for c in range(k - 1):  # symmetry breaking
            m.add_implication(used[c + 1], used[c])
        m.minimize(sum(used))
    else:
        x = [m.new_bool_var(f"x{u}") for u in range(n)]
        if problem == "mis":
            for u, v in edges:
                m.add_bool_or([x[u].Not(), x[v].Not()])
            m.maximize(sum(x))
        elif problem == "maxclique":
            for u in range(n):
                for v in range(u + 1, n):
                    if not G.has_edge(u, v):
                        m.add_bool_or([x[u].Not(), x[v].Not()])
            m.maximize(sum(x))
        elif problem == "maxcut":
            ws, terms = [], []
            for u, v, d in G.edges(data=True):
                w = d.get("weight", 1)
                if int(w) != w:
                    raise ValueError("G: CP-SAT MaxCut needs integer edge weights")
                y = m.new_bool_var(f"y{u}_{v}")
                m.add_bool_or([x[u], x[v]]).only_enforce_if(y)  # y -> x_u != x_v
                m.add_bool_or([x[u].Not(), x[v].Not()]).only_enforce_if(y)
                terms.append(y)
                ws.append(int(w))
            m.maximize(sum(w * y for w, y in zip(ws, terms, strict=True)))
        elif problem == "mvc":
            for u, v in edges:
                m.add_bool_or([x[u], x[v]])
            m.minimize(sum(x))
        else:  # mds
            for u in range(n):
                m.add_bool_or([x[u], *[x[v] for v in G[u]]])
            m.minimize(sum(x))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(time_limit_s)
    solver.parameters.num_workers = int(workers)
    solver.parameters.random_seed = int(seed)
    st = solver.solve(m)
    if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        raise RuntimeError(f"CP-SAT found no solution (status {solver.status_name(st)})")
    if problem == "coloring":
        sol = torch.tensor([next(c for c in range(n) if solver.value(a[u][c])) for u in range(n)])
    else:
        sol = torch.tensor([bool(solver.value(v)) for v in x])
    return ExactSolution(
        sol,
        float(solver.objective_value),
        float(solver.best_objective_bound),
        st == cp_model.OPTIMAL,
        float(solver.wall_time),
    )
