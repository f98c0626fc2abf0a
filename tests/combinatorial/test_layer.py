"""The combinatorial family layer: graphs (RB properties), problems (QUBO/energy = CP-SAT objective),
repair, exact references, baselines and the plain-torch GIN."""

from __future__ import annotations

import itertools

import networkx as nx
import pytest
import torch

from optarium.combinatorial import (
    GIN,
    QUBO,
    adjacency,
    coordinate_round,
    cpsat_solve,
    edge_index,
    erdos_renyi,
    greedy_decode,
    greedy_mis,
    is_feasible,
    multilinear_energy,
    objective,
    rb_graph,
    repair,
    simulated_annealing,
)
from optarium.combinatorial.problems import PROBLEMS, coloring_energy, mds_energy, signed_objective

pytest.importorskip("ortools", reason="CP-SAT is the exact reference (combinatorial extra)")


def test_rb_known_properties() -> None:
    G = rb_graph(6, 4, 0.3, seed=3, n_constraints=8)
    assert G.number_of_nodes() == 24
    for g in range(6):  # a clique per group
        grp = range(4 * g, 4 * g + 4)
        assert all(G.has_edge(a, b) for a, b in itertools.combinations(grp, 2))
    # distinct group pairs, round(p k^2) incompatible value pairs each
    assert G.number_of_edges() == 6 * 6 + 8 * round(0.3 * 16)
    planted = G.graph["planted"]
    assert len({u // 4 for u in planted}) == 6
    assert is_feasible(G, torch.isin(torch.arange(24), torch.tensor(planted)), "mis")
    sol = cpsat_solve(G, "mis")
    assert sol.optimal and sol.value == 6  # at most one node per group clique, the planted set reaches it
    with pytest.raises(ValueError, match=r"^p"):
        rb_graph(4, 3, 1.5, seed=0)
    with pytest.raises(ValueError, match=r"^n_groups"):
        rb_graph(1, 3, 0.5, seed=0)


def _brute(G: nx.Graph, problem: str) -> float:
    n = G.number_of_nodes()
    vals = []
    for bits in itertools.product([0, 1], repeat=n):
        x = torch.tensor(bits, dtype=torch.bool)
        if is_feasible(G, x, problem):
            vals.append(objective(G, x, problem))
    return max(vals) if problem in ("mis", "maxclique", "maxcut") else min(vals)


@pytest.mark.parametrize("problem", PROBLEMS)
def test_energy_equals_cpsat_objective(problem: str) -> None:
    G = erdos_renyi(9, 0.4, seed=5)
    sol = cpsat_solve(G, problem)
    assert sol.optimal
    assert is_feasible(G, sol.x, problem)
    assert objective(G, sol.x, problem) == sol.value
    if problem == "coloring":
        assert int(coloring_energy(G, sol.x)) == 0
        k = int(sol.value) - 1  # no proper colouring with one colour fewer (brute force, vectorised)
        C = torch.tensor(list(itertools.product(range(k), repeat=9)))
        assert int((coloring_energy(G, C) == 0).sum()) == 0
        return
    assert sol.value == _brute(G, problem)
    xf = sol.x.to(torch.float64)
    if problem == "mds":
        assert float(mds_energy(G, xf)) == sol.value
        return
    q = QUBO.from_graph(G, problem)
    assert float(q.energy(xf)) == pytest.approx(signed_objective(G, sol.x, problem), abs=1e-12)
    # the QUBO minimum over all binaries is the optimum (penalty 2 is exact for MIS/clique/MVC)
    X = torch.tensor(list(itertools.product([0, 1], repeat=9)), dtype=torch.float64)
    assert float(q.energy(X).min()) == pytest.approx(signed_objective(G, sol.x, problem), abs=1e-12)


def test_cpsat_weighted_maxcut() -> None:
    G = erdos_renyi(8, 0.5, seed=2)
    for i, (u, v) in enumerate(G.edges):
        G[u][v]["weight"] = 1 + i % 3
    sol = cpsat_solve(G, "maxcut")
    q = QUBO.from_graph(G, "maxcut")
    assert float(q.energy(sol.x.double())) == -sol.value == -_brute(G, "maxcut")


@pytest.mark.parametrize("problem", PROBLEMS)
def test_repair_gives_feasible(problem: str) -> None:
    g = torch.Generator().manual_seed(0)
    for s in range(5):
        G = erdos_renyi(15, 0.3, seed=s)
        x = torch.randint(0, 3 if problem == "coloring" else 2, (15,), generator=g)
        r = repair(G, x, problem)
        assert is_feasible(G, r, problem)
        if problem == "mis":  # maximal: no node can be added
            assert all(r[u] or any(r[v] for v in G[u]) for u in G.nodes)
        if problem != "coloring" and is_feasible(G, x.bool(), problem) and problem in ("mvc", "mds"):
            assert torch.equal(r, x.bool())


def test_relaxation_equals_qubo_on_vertices_and_expectation() -> None:
    g = torch.Generator().manual_seed(1)
    n = 10
    Q = torch.randn(n, n, generator=g, dtype=torch.float64)
    Q = (Q + Q.T) / 2
    c = torch.randn(n, generator=g, dtype=torch.float64)
    q = QUBO(Q, c)
    X = torch.tensor(list(itertools.product([0, 1], repeat=n)), dtype=torch.float64)
    assert torch.allclose(q.multilinear(X), q.energy(X), atol=1e-12)
    x = torch.rand(n, generator=g, dtype=torch.float64)
    Z = torch.bernoulli(x.expand(200_000, n), generator=g)
    e = q.energy(Z)
    assert abs(float(e.mean()) - float(q.multilinear(x))) < 4 * float(e.std()) / 200_000**0.5
    H = torch.autograd.functional.hessian(lambda y: multilinear_energy(y, Q, c), x)
    assert torch.allclose(torch.diagonal(H), torch.zeros(n, dtype=torch.float64))


def test_coordinate_round_never_increases() -> None:
    g = torch.Generator().manual_seed(2)
    for _ in range(2000):
        Q = torch.randn(6, 6, generator=g, dtype=torch.float64)
        Q = (Q + Q.T) / 2
        c = torch.randn(6, generator=g, dtype=torch.float64)
        x = torch.rand(6, generator=g, dtype=torch.float64)
        r = coordinate_round(x, Q, c)
        assert set(r.tolist()) <= {0.0, 1.0}
        assert float(multilinear_energy(r, Q, c)) <= float(multilinear_energy(x, Q, c)) + 1e-12


def test_qubo_validation() -> None:
    with pytest.warns(UserWarning, match=r"^Q"):
        q = QUBO(torch.tensor([[0.0, 1.0], [0.0, 0.0]]), torch.zeros(2))
    assert torch.equal(q.Q, q.Q.T)
    with pytest.raises(ValueError, match=r"^problem"):
        QUBO.from_graph(erdos_renyi(5, 0.5, 0), "tsp")
    G = nx.Graph([(0, 0), (0, 1)])
    with pytest.raises(ValueError, match=r"^G"):
        QUBO.from_graph(G, "mis")
    with pytest.raises(ValueError, match=r"^G"):
        QUBO.from_graph(nx.DiGraph([(0, 1)]), "mis")
    with pytest.raises(TypeError, match=r"^G"):
        edge_index([(0, 1)])


def test_decoders_and_baselines() -> None:
    G = erdos_renyi(30, 0.2, seed=4)
    A = adjacency(G)
    g = torch.Generator().manual_seed(0)
    D = greedy_decode(torch.rand(50, 30, generator=g, dtype=torch.float64), A, "mis")
    assert all(is_feasible(G, d, "mis") for d in D)
    Ac = 1 - A - torch.eye(30, dtype=A.dtype)
    C = greedy_decode(torch.rand(20, 30, generator=g, dtype=torch.float64), Ac, "maxclique")
    assert all(is_feasible(G, d, "maxclique") for d in C)
    opt = cpsat_solve(G, "mis").value
    s = greedy_mis(G)
    assert is_feasible(G, s, "mis") and objective(G, s, "mis") <= opt
    x, v = simulated_annealing(G, "mis", num_reads=4, num_sweeps=100, seed=1)
    assert is_feasible(G, x, "mis") and v == objective(G, x, "mis") <= opt
    H = erdos_renyi(12, 0.3, seed=4)
    _, vc = simulated_annealing(H, "maxcut", num_reads=4, num_sweeps=100, seed=1)
    assert vc <= cpsat_solve(H, "maxcut").value


def test_gin_is_permutation_equivariant() -> None:
    torch.manual_seed(0)
    G = erdos_renyi(12, 0.3, seed=1)
    net = GIN(8, 2).double()
    h = torch.randn(3, 12, 8, dtype=torch.float64)
    perm = torch.randperm(12)
    inv = torch.argsort(perm)
    Gp = nx.relabel_nodes(G, {int(perm[i]): i for i in range(12)})  # node perm[i] becomes i
    out = net(h, edge_index(G))
    outp = net(h[:, perm], edge_index(Gp))
    assert torch.allclose(outp[:, inv], out, atol=1e-10)
    with pytest.raises(ValueError, match=r"^hidden"):
        GIN(0, 2)
