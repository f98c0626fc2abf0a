"""GCON (gcon-neural-co): filter bank, equivariance, energies, decoders, transfer, multi-task plumbing."""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest
import torch

from optarium.combinatorial.gcon import (
    MTL_WEIGHTS,
    GCONConv,
    GCONNet,
    collate,
    complement_batch,
    copt_loss,
    decode,
    graph_data,
    train_unsupervised,
    transfer,
)
from optarium.combinatorial.graphs import barabasi_albert, erdos_renyi
from optarium.combinatorial.problems import is_feasible


def _dense_P(G: nx.Graph) -> torch.Tensor:
    A = torch.as_tensor(nx.to_numpy_array(G, nodelist=range(G.number_of_nodes())), dtype=torch.float64)
    A = A + torch.eye(A.shape[0], dtype=A.dtype)
    d = A.sum(1).rsqrt()
    return d[:, None] * A * d[None]


def test_filter_bank_matches_dense_powers() -> None:
    G = erdos_renyi(10, 0.4, 1)
    b = collate([G], torch.float64)
    conv = GCONConv(4).double()
    x = torch.randn(10, 4, dtype=torch.float64)
    H = conv.filters(x, b.P)
    P = _dense_P(G)
    for r in (0, 1, 2, 4):
        torch.testing.assert_close(H[r], torch.linalg.matrix_power(P, r) @ x, atol=1e-6, rtol=0)


def test_layer_and_net_are_permutation_equivariant() -> None:
    G = barabasi_albert(14, 2, 0)
    perm = np.random.default_rng(0).permutation(14)
    H = nx.relabel_nodes(G, {int(u): int(perm[u]) for u in G.nodes})
    H = nx.convert_node_labels_to_integers(H, ordering="sorted")
    torch.manual_seed(0)
    net = GCONNet(hidden=8, layers=2, heads={"mis": 1}).double().eval()
    bG, bH = collate([G], torch.float64), collate([H], torch.float64)
    with torch.no_grad():
        pG, pH = net(bG, "mis"), net(bH, "mis")
    torch.testing.assert_close(pH[torch.as_tensor(perm)], pG, atol=1e-10, rtol=0)


def _binary_cases() -> list[tuple[nx.Graph, torch.Tensor]]:
    G = erdos_renyi(9, 0.4, 3)
    g = torch.Generator().manual_seed(0)
    return [(G, (torch.rand(9, generator=g) > 0.5).double()) for _ in range(5)]


def test_losses_equal_objectives_on_binaries() -> None:
    for G, x in _binary_cases():
        b = collate([G], torch.float64)
        n, s = G.number_of_nodes(), x.bool().numpy()
        viol = sum(1 for u, v in G.edges if s[u] and s[v])
        unc = sum(1 for u, v in G.edges if not s[u] and not s[v])
        cut = sum(1 for u, v in G.edges if s[u] != s[v])
        undom = sum(1 for u in G.nodes if not (s[u] or any(s[v] for v in G[u])))
        k, beta = float(s.sum()), 1.01
        torch.testing.assert_close(copt_loss("mis", x, b), torch.tensor(2 / n * (-k + beta * viol)).double())
        torch.testing.assert_close(copt_loss("mvc", x, b), torch.tensor((k + 2 * beta * unc) / n).double())
        torch.testing.assert_close(
            copt_loss("maxcut", x, b), torch.tensor(2.0 * G.number_of_edges() - 4 * cut).double()
        )
        torch.testing.assert_close(
            copt_loss("mds", x, b), torch.tensor(k + undom).double(), atol=1e-5, rtol=0
        )
        # directed edge_index implementation: sum over both directions, halved
        ei = b.edge_index
        torch.testing.assert_close(
            copt_loss("mis", x, b), 2 / n * (-x.sum() + beta * 0.5 * (x[ei[0]] * x[ei[1]]).sum())
        )
        # clique energy = MIS energy of the complement graph
        bc = collate([nx.complement(G)], torch.float64)
        torch.testing.assert_close(copt_loss("maxclique", x, b), copt_loss("mis", x, bc))


def test_coloring_loss_zero_on_proper_one_hot_and_counts_conflicts() -> None:
    G = nx.cycle_graph(6)
    b = collate([G], torch.float64)
    X = torch.nn.functional.one_hot(torch.tensor([0, 1, 0, 1, 0, 1]), 3).double()
    assert float(copt_loss("color", X, b)) == 0.0
    Y = torch.nn.functional.one_hot(torch.tensor([0, 0, 0, 1, 0, 1]), 3).double()
    assert float(copt_loss("color", Y, b)) == 2.0


def test_energy_minimisers_are_optimal_sets() -> None:
    G = erdos_renyi(8, 0.35, 5)
    b = collate([G], torch.float64)
    X = torch.tensor(list(itertools.product([0.0, 1.0], repeat=8)), dtype=torch.float64)
    for task, prob in (("mis", "mis"), ("mvc", "mvc")):
        E = torch.stack([copt_loss(task, x, b) for x in X])
        best = X[E <= E.min() + 1e-12]
        sizes = X.sum(1)
        feas = torch.tensor([is_feasible(G, x, prob) for x in X])
        opt = sizes[feas].max() if task == "mis" else sizes[feas].min()
        assert all(is_feasible(G, x, prob) and x.sum() == opt for x in best)


@pytest.mark.parametrize("task", ["mis", "mvc", "maxclique", "mds", "maxcut", "color"])
def test_decoders_are_feasible(task: str) -> None:
    G = barabasi_albert(20, 3, 2)
    g = torch.Generator().manual_seed(1)
    p = torch.rand(20, 4, generator=g) if task == "color" else torch.rand(20, generator=g)
    res = decode(task, p, G)
    assert res.extras["feasible"]
    assert is_feasible(G, res.x, "coloring" if task == "color" else task)


def test_decode_empty_graph_mis_is_all_nodes() -> None:
    G = nx.empty_graph(5)
    b = collate([G])
    p = torch.full((5,), 0.3)
    assert float(copt_loss("mis", p, b)) == pytest.approx(2 / 5 * -1.5)
    assert decode("mis", p, G).value == 5


def test_invert_head_and_fresh_head() -> None:
    G = barabasi_albert(15, 2, 4)
    torch.manual_seed(0)
    net = GCONNet(hidden=8, layers=2, heads={"mvc": 1})
    inv = transfer(net, "mvc", "mis", "invert_head")
    torch.testing.assert_close(inv.predict(G, "mis"), 1 - net.predict(G, "mvc"), atol=1e-6, rtol=0)
    assert [n for n, q in inv.named_parameters() if q.requires_grad] == ["heads.mis.weight", "heads.mis.bias"]
    fresh = transfer(net, "mvc", "mis", "fresh_head", seed=3)
    assert not torch.equal(fresh.heads["mis"].weight, inv.heads["mis"].weight)
    # the backbone is untouched by head-only fine-tuning
    before = {k: v.clone() for k, v in inv.state_dict().items() if not k.startswith("heads.")}
    train_unsupervised(inv, [G, barabasi_albert(12, 2, 5)], "mis", epochs=2, batch_size=1)
    after = inv.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_complement_transfer_gives_cliques() -> None:
    G = erdos_renyi(14, 0.6, 7)
    torch.manual_seed(0)
    net = GCONNet(hidden=8, layers=2, heads={"mis": 1})
    clq = transfer(net, "mis", "maxclique", "complement", freeze=None)
    bc = complement_batch(collate([G]))
    clq.eval()
    with torch.no_grad():
        p = clq(bc, "maxclique")
    res = decode("mis", p, nx.complement(G))
    assert is_feasible(G, res.x, "maxclique")
    assert decode("maxclique", p, G).extras["feasible"]


def test_multitask_plumbing() -> None:
    graphs = [graph_data(barabasi_albert(12, 2, i)) for i in range(4)]
    torch.manual_seed(0)
    net = GCONNet(hidden=8, layers=1, heads={"mis": 1, "mvc": 1, "color": 5}, dropout=0.0)
    b = collate(graphs)
    assert net(b, "mis").shape == (48,) and net(b, "color").shape == (48, 5)
    w = {t: MTL_WEIGHTS[t] for t in ("mis", "mvc", "color")}
    net.eval()
    manual = sum(w[t] * copt_loss(t, net(b, t), b) for t in w)
    total = sum(w[t] * copt_loss(t, net(b, t), b) for t in ("mis", "mvc", "color"))
    torch.testing.assert_close(manual, total)
    seen = []
    orig = copt_loss.__globals__["copt_loss"]

    def spy(task, *a, **k):  # type: ignore[no-untyped-def]
        seen.append(task)
        return orig(task, *a, **k)

    copt_loss.__globals__["copt_loss"] = spy
    try:
        train_unsupervised(net, graphs, ["mis", "mvc", "color"], epochs=2, batch_size=2, strategy="alternate")
    finally:
        copt_loss.__globals__["copt_loss"] = orig
    assert seen == ["mis", "mvc", "color", "mis"]


def test_training_lowers_energy_and_is_deterministic() -> None:
    graphs = [graph_data(barabasi_albert(15, 2, i)) for i in range(6)]

    def fit() -> tuple[list[float], dict[str, torch.Tensor]]:
        torch.manual_seed(0)
        net = GCONNet(hidden=8, layers=2, heads={"mis": 1})
        r = train_unsupervised(net, graphs, "mis", epochs=6, batch_size=3, lr=5e-3, seed=1)
        return list(r.history.metrics["loss"]), net.state_dict()

    l1, s1 = fit()
    l2, s2 = fit()
    assert l1[1:] == l2[1:] and all(torch.equal(s1[k], s2[k]) for k in s1)
    assert l1[-1] < l1[1]
    net = GCONNet(hidden=8, layers=2, heads={"mis": 1})
    net.load_state_dict(s1)
    assert all(torch.equal(net.state_dict()[k], s1[k]) for k in s1)


def test_bad_input() -> None:
    G = erdos_renyi(6, 0.5, 0)
    b = collate([G])
    with pytest.raises(ValueError, match="beta"):
        copt_loss("mis", torch.rand(6), b, beta=1.0)
    with pytest.raises(ValueError, match="beta"):
        copt_loss("mvc", torch.rand(6), b, alpha=2.0, beta=1.5)
    with pytest.raises(ValueError, match="task"):
        copt_loss("tsp", torch.rand(6), b)
    with pytest.raises(ValueError, match="p"):
        copt_loss("mis", torch.rand(5), b)
    with pytest.raises(ValueError, match="undirected"):
        graph_data(nx.DiGraph([(0, 1)]))
    with pytest.raises(ValueError, match="strategy"):
        transfer(GCONNet(hidden=4, layers=1, heads={"mvc": 1}), "mvc", "mis", "nope")
    with pytest.raises(ValueError, match="source"):
        transfer(GCONNet(hidden=4, layers=1, heads={"mvc": 1}), "mis", "mvc")
    with pytest.raises(ValueError, match="layers"):
        GCONNet(layers=0)
    with pytest.raises(ValueError, match="channels"):
        GCONConv(4, channels=[[1], [2]])
