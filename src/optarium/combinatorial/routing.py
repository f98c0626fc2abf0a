r"""TSP and CVRP instances, costs, feasibility checks and repairs, exact and classical references.

Used by :mod:`optarium.combinatorial.asap` (spec ``asap-co.md``) and its experiment.

* Generators: :func:`tsp_instances` / :func:`cvrp_instances` draw coordinates in the unit square from
  ``"uniform"`` or a Gaussian mixture ``"gmm<c>"`` (``c`` centres uniform in [0.1, 0.9]^2, isotropic
  standard deviation ``sigma``, default 0.05, clipped to [0, 1]): the out-of-distribution shifts of the spec
  (train on uniform, validate on 5 clusters, test on 3 clusters). CVRP demands are integers in 1..9, the
  capacity 30 by default (the spec's CVRP-20 setting).
* Costs: :func:`tour_length` (closed tours, batched), :func:`cvrp_cost` (routes as a node sequence with 0 for
  the depot and customers 1..n).
* Feasibility and repair: :func:`check_tour` / :func:`repair_tour` (keep first occurrences, append missing
  nodes), :func:`check_cvrp` / :func:`repair_cvrp` (drop repeats, add missing customers, then split the
  visiting order into capacity-feasible routes).
* Exact references: :func:`held_karp` (the spec asks for Held-Karp with back-pointers: the cost-to-go table
  :math:`C(S, j)` vectorised over subsets of equal size) and :func:`optimal_next_sets`
  :math:`O(S, j) = \arg\min_k d(j,k) + C(S\cup\{k\}, k)` (ties within ``1e-9``); :func:`brute_force_tsp` to
  check it; :func:`ortools_tsp` / :func:`ortools_cvrp` from OR-Tools routing (package ``ortools`` 9.15,
  imported inside the functions) for sizes beyond Held-Karp.
* Classical baselines: :func:`nearest_neighbour` and :func:`two_opt` (batched, best-improvement moves).
"""

from __future__ import annotations

import itertools
import re
from typing import Any

import numpy as np
import torch

__all__ = [
    "brute_force_tsp",
    "check_cvrp",
    "check_tour",
    "cvrp_cost",
    "cvrp_instances",
    "distance_matrix",
    "held_karp",
    "nearest_neighbour",
    "optimal_next_sets",
    "ortools_cvrp",
    "ortools_tsp",
    "repair_cvrp",
    "repair_tour",
    "tour_length",
    "tsp_instances",
    "two_opt",
]

_GMM = re.compile(r"^gmm(\d+)$")


def _check_coords(name: str, coords: Any) -> torch.Tensor:
    if not isinstance(coords, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(coords).__name__}")
    if coords.dim() not in (2, 3) or coords.shape[-1] != 2:
        raise ValueError(f"{name}: expected shape (n, 2) or (batch, n, 2), got {tuple(coords.shape)}")
    if not torch.isfinite(coords).all():
        raise ValueError(f"{name}: coordinates must be finite (NaN or inf found)")
    return coords


def _points(
    batch: int, n: int, distribution: str, sigma: float, generator: torch.Generator | None, dtype: torch.dtype
) -> torch.Tensor:
    if not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch: need a positive int, got {batch!r}")
    if not isinstance(n, int) or n < 2:
        raise ValueError(f"n: need an int >= 2, got {n!r}")
    if not sigma > 0:
        raise ValueError(f"sigma: need a positive value, got {sigma!r}")
    if distribution == "uniform":
        return torch.rand(batch, n, 2, generator=generator, dtype=dtype)
    m = _GMM.match(str(distribution))
    if m is None or int(m.group(1)) < 1:
        raise ValueError(f"distribution: expected 'uniform' or 'gmm<c>' (c >= 1), got {distribution!r}")
    c = int(m.group(1))
    centres = 0.1 + 0.8 * torch.rand(batch, c, 2, generator=generator, dtype=dtype)
    which = torch.randint(c, (batch, n), generator=generator)
    pts = centres.gather(1, which[..., None].expand(batch, n, 2))
    pts = pts + sigma * torch.randn(batch, n, 2, generator=generator, dtype=dtype)
    return pts.clamp(0.0, 1.0)


def tsp_instances(
    batch: int,
    n: int,
    distribution: str = "uniform",
    *,
    sigma: float = 0.05,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """``batch`` TSP instances of ``n`` cities, shape ``(batch, n, 2)``, ``"uniform"`` or ``"gmm<c>"``."""
    return _points(batch, n, distribution, sigma, generator, dtype)


def cvrp_instances(
    batch: int,
    n: int,
    distribution: str = "uniform",
    *,
    capacity: int = 30,
    max_demand: int = 9,
    sigma: float = 0.05,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float32,
) -> dict[str, torch.Tensor]:
    """CVRP instances: ``depot`` (batch, 2) uniform, ``coords`` (batch, n, 2), integer ``demands`` (batch, n)
    in ``1..max_demand``, and ``capacity`` (batch,)."""
    if not isinstance(capacity, int) or capacity < 1:
        raise ValueError(f"capacity: need a positive int, got {capacity!r}")
    if not isinstance(max_demand, int) or not 1 <= max_demand <= capacity:
        raise ValueError(f"max_demand: need an int in 1..capacity, got {max_demand!r}")
    coords = _points(batch, n, distribution, sigma, generator, dtype)
    depot = torch.rand(batch, 2, generator=generator, dtype=dtype)
    demands = torch.randint(1, max_demand + 1, (batch, n), generator=generator)
    return {"depot": depot, "coords": coords, "demands": demands, "capacity": torch.full((batch,), capacity)}


def distance_matrix(coords: torch.Tensor) -> torch.Tensor:
    """Euclidean distances, ``(..., n, n)``."""
    coords = _check_coords("coords", coords)
    return torch.cdist(coords, coords)


def tour_length(coords: torch.Tensor, tours: torch.Tensor) -> torch.Tensor:
    """Length of closed tours. ``coords`` (B, n, 2) or (n, 2); ``tours`` (B, ..., n) indices (or (n,))."""
    coords = _check_coords("coords", coords)
    single = coords.dim() == 2
    if single:
        coords, tours = coords[None], tours[None]
    b, n = coords.shape[0], coords.shape[1]
    flat = tours.reshape(b, -1, tours.shape[-1]).long()
    pts = coords[:, None].expand(b, flat.shape[1], n, 2).gather(2, flat[..., None].expand(*flat.shape, 2))
    seg = (pts - pts.roll(-1, dims=2)).norm(dim=-1).sum(-1)
    out = seg.reshape(tours.shape[:-1])
    return out[0] if single else out


def check_tour(tours: torch.Tensor, n: int) -> torch.Tensor:
    """Whether each tour (last dim) is a permutation of ``0..n-1``."""
    if tours.shape[-1] != n:
        return torch.zeros(tours.shape[:-1], dtype=torch.bool)
    s = tours.long().sort(dim=-1).values
    return (s == torch.arange(n, device=tours.device)).all(-1)


def repair_tour(tour: Any, n: int) -> torch.Tensor:
    """A permutation from any node sequence: out-of-range entries and repeats dropped (first kept), missing
    nodes appended in increasing order."""
    seen: list[int] = []
    for v in torch.as_tensor(tour).reshape(-1).tolist():
        if 0 <= int(v) < n and int(v) not in seen:
            seen.append(int(v))
    seen += [v for v in range(n) if v not in seen]
    return torch.tensor(seen, dtype=torch.long)


def _routes(seq: list[int]) -> list[list[int]]:
    routes, cur = [], []
    for v in seq:
        if v == 0:
            if cur:
                routes.append(cur)
            cur = []
        else:
            cur.append(v)
    if cur:
        routes.append(cur)
    return routes


def cvrp_cost(depot: torch.Tensor, coords: torch.Tensor, routes: Any) -> float:
    """Total length of routes (one instance): ``routes`` a node sequence, 0 = depot, customers 1..n; each
    route starts and ends at the depot."""
    pts = torch.cat([depot.reshape(1, 2), _check_coords("coords", coords)], 0)
    total = 0.0
    for r in _routes([int(v) for v in torch.as_tensor(routes).reshape(-1).tolist()]):
        path = pts[[0, *r, 0]]
        total += float((path[1:] - path[:-1]).norm(dim=-1).sum())
    return total


def check_cvrp(routes: Any, demands: torch.Tensor, capacity: int) -> bool:
    """Every customer 1..n visited exactly once and every route's load at most ``capacity``."""
    seq = [int(v) for v in torch.as_tensor(routes).reshape(-1).tolist()]
    n = int(demands.numel())
    cust = [v for v in seq if v != 0]
    if sorted(cust) != list(range(1, n + 1)):
        return False
    return all(sum(int(demands[v - 1]) for v in r) <= capacity for r in _routes(seq))


def repair_cvrp(routes: Any, demands: torch.Tensor, capacity: int) -> torch.Tensor:
    """A feasible route sequence from any sequence: repeats and invalid nodes dropped, missing customers
    appended, then the visiting order cut into routes whenever the next customer would exceed capacity."""
    n = int(demands.numel())
    if int(demands.max()) > capacity:
        raise ValueError("capacity: a single demand exceeds the capacity; no feasible solution")
    order: list[int] = []
    for v in torch.as_tensor(routes).reshape(-1).tolist():
        if 1 <= int(v) <= n and int(v) not in order:
            order.append(int(v))
    order += [v for v in range(1, n + 1) if v not in order]
    out, load = [0], 0
    for v in order:
        d = int(demands[v - 1])
        if load + d > capacity:
            out.append(0)
            load = 0
        out.append(v)
        load += d
    out.append(0)
    return torch.tensor(out, dtype=torch.long)


def held_karp(dist: Any) -> tuple[float, list[int], np.ndarray]:
    r"""Exact TSP by Held-Karp (start node 0), vectorised over the subsets of each size.

    Returns ``(length, tour, C)`` with ``C[S, j]`` the cost-to-go of finishing the tour from node ``j`` with
    visited set ``S`` (bitmask, containing 0 and j), return to 0 included; ``length = C[1, 0]``.
    """
    d = np.asarray(torch.as_tensor(dist, dtype=torch.float64).cpu(), dtype=np.float64)
    n = d.shape[0]
    if d.shape != (n, n) or n < 2:
        raise ValueError(f"dist: need a square matrix with n >= 2, got {d.shape}")
    if n > 16:
        raise ValueError(f"dist: Held-Karp is limited to n <= 16 here, got n={n}")
    full = (1 << n) - 1
    masks = np.arange(1 << n)
    bits = (masks[:, None] >> np.arange(n)) & 1
    pop = bits.sum(1)
    C = np.full((1 << n, n), np.inf)
    C[full, :] = d[:, 0]
    node_bit = 1 << np.arange(n)
    for p in range(n - 1, 0, -1):
        M = masks[(pop == p) & (bits[:, 0] == 1)]
        nxt = M[:, None] | node_bit[None, :]  # (m, k)
        cnext = C[nxt, np.arange(n)[None, :]]  # (m, k)
        cnext = np.where(bits[M] == 1, np.inf, cnext)
        C[M] = (d[None, :, :] + cnext[:, None, :]).min(-1)
    tour, S, j = [0], 1, 0
    for _ in range(n - 1):
        k = optimal_next_sets(d, C, S, j)[0]
        tour.append(k)
        S |= 1 << k
        j = k
    return float(C[1, 0]), tour, C


def optimal_next_sets(dist: Any, C: np.ndarray, visited: int, current: int, tol: float = 1e-9) -> list[int]:
    """The optimal next nodes :math:`O(S, j)` at visited bitmask ``visited`` and node ``current``."""
    d = np.asarray(torch.as_tensor(dist, dtype=torch.float64).cpu(), dtype=np.float64)
    n = d.shape[0]
    cand = [k for k in range(n) if not (visited >> k) & 1]
    if not cand:
        return [0]
    vals = np.array([d[current, k] + C[visited | (1 << k), k] for k in cand])
    best = vals.min()
    return [k for k, v in zip(cand, vals, strict=True) if v <= best + tol]


def brute_force_tsp(dist: Any) -> tuple[float, list[int]]:
    """Exact TSP by enumerating permutations with node 0 first (n <= 9)."""
    d = np.asarray(torch.as_tensor(dist, dtype=torch.float64).cpu(), dtype=np.float64)
    n = d.shape[0]
    if n > 9:
        raise ValueError(f"dist: brute force is limited to n <= 9, got n={n}")
    best, arg = np.inf, None
    for perm in itertools.permutations(range(1, n)):
        t = (0, *perm)
        length = sum(d[t[i], t[(i + 1) % n]] for i in range(n))
        if length < best:
            best, arg = length, list(t)
    return float(best), arg  # type: ignore[return-value]


def nearest_neighbour(coords: torch.Tensor, start: int = 0) -> torch.Tensor:
    """Nearest-neighbour tours from ``start``, batched: (B, n, 2) -> (B, n)."""
    coords = _check_coords("coords", coords)
    single = coords.dim() == 2
    c = coords[None] if single else coords
    b, n = c.shape[:2]
    d = torch.cdist(c, c)
    visited = torch.zeros(b, n, dtype=torch.bool, device=c.device)
    cur = torch.full((b,), start, dtype=torch.long, device=c.device)
    tour = [cur]
    ar = torch.arange(b, device=c.device)
    visited[ar, cur] = True
    for _ in range(n - 1):
        nd = d[ar, cur].masked_fill(visited, float("inf"))
        cur = nd.argmin(-1)
        visited[ar, cur] = True
        tour.append(cur)
    out = torch.stack(tour, -1)
    return out[0] if single else out


def two_opt(coords: torch.Tensor, tours: torch.Tensor, max_iter: int = 1000) -> torch.Tensor:
    """Best-improvement 2-opt on a batch of tours until no move gains more than 1e-9 (or ``max_iter``)."""
    coords = _check_coords("coords", coords)
    single = coords.dim() == 2
    c = coords[None] if single else coords
    t = (tours[None] if single else tours).clone().long()
    b, n = t.shape
    d = torch.cdist(c, c)
    ar = torch.arange(b, device=c.device)[:, None, None]
    i = torch.arange(n, device=c.device)
    valid = (i[:, None] + 1 < i[None, :]) & ~((i[:, None] == 0) & (i[None, :] == n - 1))
    for _ in range(max_iter):
        a, a1 = t, t.roll(-1, 1)
        # reverse segment (i+1..j): edges (a_i,a_{i+1}),(a_j,a_{j+1}) -> (a_i,a_j),(a_{i+1},a_{j+1})
        old = d[ar, a[:, :, None], a1[:, :, None]] + d[ar, a[:, None, :], a1[:, None, :]]
        new = d[ar, a[:, :, None], a[:, None, :]] + d[ar, a1[:, :, None], a1[:, None, :]]
        delta = (new - old).masked_fill(~valid, 0.0)
        best, arg = delta.reshape(b, -1).min(-1)
        improve = best < -1e-9
        if not bool(improve.any()):
            break
        bi, bj = arg // n, arg % n
        pos = i[None, :]
        inside = (pos > bi[:, None]) & (pos <= bj[:, None]) & improve[:, None]
        src = torch.where(inside, bi[:, None] + bj[:, None] + 1 - pos, pos)
        t = t.gather(1, src)
    return t[0] if single else t


def ortools_tsp(
    coords: torch.Tensor, time_limit_s: float = 1.0, scale: float = 1e6
) -> tuple[float, list[int]]:
    """One TSP instance (n, 2) by OR-Tools routing (cheapest arc + guided local search, ``time_limit_s``).
    Returns the tour length in the original units and the tour."""
    from ortools.constraint_solver import pywrapcp, routing_enums_pb2

    coords = _check_coords("coords", coords)
    d = (torch.cdist(coords, coords).double() * scale).round().long().tolist()
    n = len(d)
    manager = pywrapcp.RoutingIndexManager(n, 1, 0)
    routing = pywrapcp.RoutingModel(manager)
    cb = routing.RegisterTransitCallback(lambda a, b: d[manager.IndexToNode(a)][manager.IndexToNode(b)])
    routing.SetArcCostEvaluatorOfAllVehicles(cb)
    params = pywrapcp.DefaultRoutingSearchParameters()
    params.first_solution_strategy = routing_enums_pb2.FirstSolutionStrategy.PATH_CHEAPEST_ARC
    params.local_search_metaheuristic = routing_enums_pb2.LocalSearchMetaheuristic.GUIDED_LOCAL_SEARCH
    params.time_limit.FromMilliseconds(max(1, int(1000 * time_limit_s)))
    sol = routing.SolveWithParameters(params)
    if sol is None:
        raise RuntimeError("ortools_tsp: no solution found")
    idx, tour = routing.Start(0), []
    while not routing.IsEnd(idx):
        tour.append(manager.IndexToNode(idx))
        idx = sol.Value(routing.NextVar(idx))
    return float(tour_length(coords, torch.tensor(tour))), tour


def ortools_cvrp(
    depot: torch.Tensor, coords: torch.Tensor, demands: torch.Tensor, capacity: int, time_limit_s: float = 1.0
) -> tuple[float, list[int]]:
    """One CVRP instance by OR-Tools routing (n vehicles of ``capacity``, guided local search). Returns the
    cost and the route sequence (0 = depot, customers 1..n)."""
    from ortools.constraint_solver import pywrapcp, routing_enums_pb2

    pts = torch.cat([depot.reshape(1, 2), _check_coords("coords", coords)], 0)
    d = (torch.cdist(pts, pts).double() * 1e6).round().long().tolist()
    n = len(d)
    dem = [0, *(int(v) for v in demands.tolist())]
    manager = pywrapcp.RoutingIndexManager(n, n - 1, 0)
    routing = pywrapcp.RoutingModel(manager)
    cb = routing.RegisterTransitCallback(lambda a, b: d[manager.IndexToNode(a)][manager.IndexToNode(b)])
    routing.SetArcCostEvaluatorOfAllVehicles(cb)
    dcb = routing.RegisterUnaryTransitCallback(lambda a: dem[manager.IndexToNode(a)])
    routing.AddDimensionWithVehicleCapacity(dcb, 0, [int(capacity)] * (n - 1), True, "load")
    params = pywrapcp.DefaultRoutingSearchParameters()
    params.first_solution_strategy = routing_enums_pb2.FirstSolutionStrategy.PATH_CHEAPEST_ARC
    params.local_search_metaheuristic = routing_enums_pb2.LocalSearchMetaheuristic.GUIDED_LOCAL_SEARCH
    params.time_limit.FromMilliseconds(max(1, int(1000 * time_limit_s)))
    sol = routing.SolveWithParameters(params)
    if sol is None:
        raise RuntimeError("ortools_cvrp: no solution found")
    seq = [0]
    for v in range(n - 1):
        idx = sol.Value(routing.NextVar(routing.Start(v)))
        if routing.IsEnd(idx):
            continue
        while not routing.IsEnd(idx):
            seq.append(manager.IndexToNode(idx))
            idx = sol.Value(routing.NextVar(idx))
        seq.append(0)
    return cvrp_cost(depot, coords, seq), seq
