"""Topologies and mixing matrices: doubly stochastic, Metropolis weights, spectral gaps, invalid graphs."""

from __future__ import annotations

import math

import pytest
import torch

from optarium.distributed.topology import (
    TOPOLOGIES,
    adjacency,
    check_mixing_matrix,
    metropolis_weights,
    mixing_matrix,
    spectral_gap,
)


def _kw(topology: str) -> dict:
    return {"p": 0.5, "generator": torch.Generator().manual_seed(0)} if topology == "erdos_renyi" else {}


@pytest.mark.parametrize("topology", TOPOLOGIES)
@pytest.mark.parametrize("n", [1, 2, 5, 12])
@pytest.mark.parametrize("weights", ["metropolis", "max_degree"])
def test_valid_mixing_matrix(topology: str, n: int, weights: str) -> None:
    W = mixing_matrix(topology, n, weights=weights, **_kw(topology))
    assert W.shape == (n, n) and W.dtype == torch.float64
    torch.testing.assert_close(W, W.T, rtol=0, atol=0)
    torch.testing.assert_close(W.sum(0), torch.ones(n, dtype=torch.float64), rtol=0, atol=1e-12)
    torch.testing.assert_close(W.sum(1), torch.ones(n, dtype=torch.float64), rtol=0, atol=1e-12)
    assert bool((W >= 0).all())
    # nonzero off-diagonal entries exactly on the graph's edges
    A = adjacency(topology, n, **_kw(topology))
    off = W.clone().fill_diagonal_(0)
    assert torch.equal(off != 0, A)
    gap = spectral_gap(W)
    assert 0 < gap <= 1 + 1e-12
    # gossip contracts the disagreement by rho = 1 - gap per round
    X = torch.randn(n, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    dev = X - X.mean(0)
    assert float((W @ dev).norm()) <= (1 - gap) * float(dev.norm()) + 1e-12


def test_metropolis_values_and_known_gaps() -> None:
    # ring of n: degree 2 everywhere, W_ij = 1/3 on edges and 1/3 on the diagonal
    n = 8
    W = mixing_matrix("ring", n)
    assert W[0, 1] == pytest.approx(1 / 3) and W[0, 0] == pytest.approx(1 / 3) and W[0, 2] == 0
    # eigenvalues of a circulant: 1/3 + 2/3 cos(2 pi k / n); the gap is 1 - max_{k>0} |.|
    lam = [1 / 3 + 2 / 3 * math.cos(2 * math.pi * k / n) for k in range(1, n)]
    assert spectral_gap(W) == pytest.approx(1 - max(abs(v) for v in lam), abs=1e-12)
    # complete graph: W = 11^T / n, gap exactly 1
    assert spectral_gap(mixing_matrix("complete", 6)) == pytest.approx(1.0, abs=1e-12)
    # star: hub degree n-1, leaves 1 -> every edge weight 1/n, leaf diagonal 1 - 1/n
    S = mixing_matrix("star", 5)
    assert (
        S[0, 3] == pytest.approx(1 / 5)
        and S[3, 3] == pytest.approx(4 / 5)
        and S[0, 0] == pytest.approx(1 / 5)
    )
    # torus 3x4 is 4-regular: weights 1/5
    T = mixing_matrix("torus", 12)
    assert int((T[0] > 0).sum()) == 5 and T[0, 0] == pytest.approx(1 / 5)
    # a ring mixes much more slowly than the complete graph
    assert spectral_gap(mixing_matrix("ring", 16)) < 0.1


def test_erdos_renyi_seeded_and_connected() -> None:
    W1 = mixing_matrix("erdos_renyi", 10, p=0.3, generator=torch.Generator().manual_seed(3))
    W2 = mixing_matrix("erdos_renyi", 10, p=0.3, generator=torch.Generator().manual_seed(3))
    assert torch.equal(W1, W2)
    with pytest.raises(ValueError, match=r"^p:"):
        mixing_matrix("erdos_renyi", 10)
    with pytest.raises(ValueError, match=r"^p:.*disconnected"):
        mixing_matrix("erdos_renyi", 30, p=0.01, generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match=r"^p:"):
        mixing_matrix("ring", 4, p=0.5)


def test_invalid_matrices_raise() -> None:
    with pytest.raises(ValueError, match=r"^topology:"):
        mixing_matrix("hypercube", 4)
    with pytest.raises(ValueError, match=r"^n:"):
        mixing_matrix("ring", 0)
    with pytest.raises(ValueError, match=r"^weights:"):
        mixing_matrix("ring", 4, weights="uniform")
    W = mixing_matrix("ring", 4)
    with pytest.raises(ValueError, match=r"^W: wrong size"):
        check_mixing_matrix(W, 5)
    with pytest.raises(ValueError, match=r"^W: must be a square"):
        check_mixing_matrix(W[:3])
    bad = W.clone()
    bad[0, 0] += 0.1
    bad[1, 1] -= 0.1  # rows and columns 0, 1 no longer sum to 1
    with pytest.raises(ValueError, match=r"^W: not doubly stochastic"):
        check_mixing_matrix(bad)
    asym = W.clone()
    asym[0, 1] += 0.05
    asym[0, 3] -= 0.05
    with pytest.raises(ValueError, match=r"^W: not symmetric"):
        check_mixing_matrix(asym)
    # two disjoint edges {0,1} and {2,3}: doubly stochastic but disconnected
    A = torch.zeros(4, 4, dtype=torch.bool)
    A[0, 1] = A[1, 0] = A[2, 3] = A[3, 2] = True
    with pytest.raises(ValueError, match=r"^W: .*disconnected"):
        check_mixing_matrix(metropolis_weights(A))
    with pytest.raises(ValueError, match=r"^W: has negative"):
        check_mixing_matrix(torch.tensor([[1.5, -0.5], [-0.5, 1.5]], dtype=torch.float64))
    with pytest.raises(ValueError, match=r"^W: spectral gap"):
        check_mixing_matrix(torch.tensor([[0.0, 1.0], [1.0, 0.0]], dtype=torch.float64))  # periodic
    with pytest.raises(TypeError, match=r"^W:"):
        check_mixing_matrix(torch.eye(3, dtype=torch.int64))


def test_float32_matrices_pass_within_their_rounding() -> None:
    for name in ("ring", "torus", "complete"):
        W32 = mixing_matrix(name, 16).to(torch.float32)
        assert check_mixing_matrix(W32) is W32
    W = mixing_matrix("ring", 16)
    off = W.clone()
    off[0, 0] += 1e-6  # far above float64 rounding: still rejected in float64
    off[1, 1] -= 1e-6
    with pytest.raises(ValueError, match=r"^W: not doubly stochastic"):
        check_mixing_matrix(off)
    bad32 = W.to(torch.float32)
    bad32[0, 0] += 1e-3
    bad32[1, 1] -= 1e-3
    with pytest.raises(ValueError, match=r"^W: not doubly stochastic"):
        check_mixing_matrix(bad32)
    with pytest.raises(ValueError, match=r"^atol:"):
        check_mixing_matrix(W, atol=-1.0)
