"""Structurally robust GW (optarium.ot.srgw): algebra, POT agreement, descent, recovery, masks, bad input."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
import torch

from optarium.ot.srgw import gw_tensor_product, mask_residuals, masked_gw_value, structurally_robust_gw

ot = pytest.importorskip("ot", reason="POT is the reference of these tests (test extra)")


def _clouds(n: int, m: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 2, generator=g, dtype=torch.float64)
    y = torch.rand(m, 2, generator=g, dtype=torch.float64)
    return torch.cdist(x, x), torch.cdist(y, y)


def _sym_mask(n: int, g: torch.Generator) -> torch.Tensor:
    M = (torch.rand(n, n, generator=g, dtype=torch.float64) > 0.3).double()
    return torch.triu(M, 1) + torch.triu(M, 1).T + torch.eye(n, dtype=torch.float64)


def _knn_graph(n: int, k: int, s: float, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Weighted k-NN adjacency, its copy with spurious edges at rate s (weight: median edge length)."""
    rng = np.random.default_rng(seed)
    x = rng.random((n, 2))
    D = np.linalg.norm(x[:, None] - x[None], axis=-1)
    A = np.zeros((n, n), bool)
    A[np.repeat(np.arange(n), k), np.argsort(D, 1)[:, 1 : k + 1].ravel()] = True
    A |= A.T
    iu = np.triu_indices(n, 1)
    W = np.where(A, D, 0.0)
    non = np.flatnonzero(~A[iu])
    pick = rng.choice(non, round(s * A[iu].sum()), replace=False)
    W2 = W.copy()
    med = np.median(D[iu][A[iu]])
    W2[iu[0][pick], iu[1][pick]] = med
    W2[iu[1][pick], iu[0][pick]] = med
    spur = np.zeros((n, n), bool)
    spur[iu[0][pick], iu[1][pick]] = True
    spur |= spur.T
    return torch.tensor(W), torch.tensor(W2), torch.tensor(spur)


def test_all_ones_masks_value_equals_pot_gwloss() -> None:
    C1, C2 = _clouds(6, 5, 0)
    T = torch.rand(6, 5, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    T = torch.as_tensor(ot.sinkhorn(np.ones(6) / 6, np.ones(5) / 5, T.numpy(), 1.0))  # a feasible plan
    p, q = np.ones(6) / 6, np.ones(5) / 5
    constC, hC1, hC2 = ot.gromov.init_matrix(C1.numpy(), C2.numpy(), p, q, "square_loss")
    ref = ot.gromov.gwloss(constC, hC1, hC2, T.numpy())
    assert abs(float(masked_gw_value(C1, C2, T)) - ref) <= 1e-10


def test_factorised_products_equal_brute_force() -> None:
    g = torch.Generator().manual_seed(2)
    for n, m in ((5, 5), (5, 4)):
        C1, C2 = _clouds(n, m, 3)
        M1, M2 = _sym_mask(n, g), _sym_mask(m, g)
        T = torch.rand(n, m, generator=g, dtype=torch.float64)
        K = (
            M1[:, None, :, None] * M2[None, :, None, :] * (C1[:, None, :, None] - C2[None, :, None, :]) ** 2
        )  # K[i, j, k, l]
        L_ref = torch.einsum("ijkl,kl->ij", K, T)
        # brute-force residuals: the other side's mask only
        r1_ref = torch.einsum(
            "ijkl,ij,kl->ik", M2[None, :, None, :] * (C1[:, None, :, None] - C2[None, :, None, :]) ** 2, T, T
        )
        r2_ref = torch.einsum(
            "ijkl,ij,kl->jl", M1[:, None, :, None] * (C1[:, None, :, None] - C2[None, :, None, :]) ** 2, T, T
        )
        r1, r2 = mask_residuals(C1, C2, T, M1, M2)
        torch.testing.assert_close(gw_tensor_product(C1, C2, T, M1, M2), L_ref, rtol=1e-12, atol=1e-13)
        torch.testing.assert_close(r1, r1_ref, rtol=1e-12, atol=1e-13)
        torch.testing.assert_close(r2, r2_ref, rtol=1e-12, atol=1e-13)
        E = torch.einsum("ijkl,ij,kl->", K, T, T)
        assert abs(float((M1 * r1).sum() - E)) <= 1e-12 and abs(float((M2 * r2).sum() - E)) <= 1e-12


@pytest.mark.parametrize(("n", "m", "uniform"), [(12, 12, True), (9, 7, False)])
def test_frank_wolfe_without_masks_reproduces_pot_gromov_wasserstein(n: int, m: int, uniform: bool) -> None:
    C1, C2 = _clouds(n, m, 4)
    g = torch.Generator().manual_seed(5)
    p = torch.full((n,), 1.0 / n, dtype=torch.float64)
    if not uniform:
        p = torch.rand(n, generator=g, dtype=torch.float64) + 0.5
        p /= p.sum()
    q = torch.full((m,), 1.0 / m, dtype=torch.float64)
    res = structurally_robust_gw(C1, C2, p, q, masks="none")
    T_ref, log = ot.gromov.gromov_wasserstein(C1.numpy(), C2.numpy(), p.numpy(), q.numpy(), log=True)
    assert res.status == "converged"
    assert res.n_iter == len(log["loss"]) - 1  # the same number of conditional-gradient steps
    assert float((res.x - torch.as_tensor(T_ref)).abs().max()) <= 1e-9
    assert abs(res.value - float(log["gw_dist"])) <= 1e-10


@pytest.mark.parametrize(("solver", "pot_solver"), [("mirror", "PPA"), ("entropic", "PGD")])
def test_entropic_steps_without_masks_reproduce_pot_entropic_gw(solver: str, pot_solver: str) -> None:
    C1, C2 = _clouds(10, 8, 6)
    eps, iters = 0.1, 15
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        T_ref = ot.gromov.entropic_gromov_wasserstein(
            C1.numpy(), C2.numpy(), epsilon=eps, solver=pot_solver, max_iter=iters, tol=0.0,
            numItermax=5000, stopThr=1e-13,
        )  # fmt: skip
    res = structurally_robust_gw(
        C1, C2, masks="none", solver=solver, tau=1.0 / eps, epsilon=eps, tol=0.0, max_iter=iters
    )
    assert res.n_iter == iters
    assert float((res.x - torch.as_tensor(T_ref)).abs().max()) <= 1e-9


@pytest.mark.parametrize("solver", ["frank_wolfe", "mirror"])
def test_objective_non_increasing_and_plans_feasible(solver: str) -> None:
    C1, C2 = _clouds(8, 8, 7)
    res = structurally_robust_gw(C1, C2, solver=solver, max_iter=20, keep_ratio=0.8, tol=0.0)
    E = np.array(res.history.metrics["objective"])
    assert np.all(np.diff(E) <= 1e-8 * np.abs(E[:-1])), np.diff(E).max()
    assert res.extras["n_increase"] == 0 or res.extras["max_increase"] <= 1e-8
    assert max(res.history.metrics["marginal_error"]) < 1e-6
    assert res.extras["mask1"].eq(0).any() and res.extras["mask2"].eq(0).any()  # masks were active
    if solver == "mirror":
        assert res.extras["sinkhorn_not_converged"] == 0
        # control: a step 20x beyond the safe step is not covered by the descent bound; increases, if any,
        # are counted rather than hidden
        big = structurally_robust_gw(C1, C2, solver="mirror", tau=20 * res.extras["tau"], max_iter=20)
        assert big.extras["n_increase"] == sum(
            1 for a, b in itertools.pairwise(big.history.metrics["objective"]) if b > a * (1 + 1e-12)
        )


def test_noise_free_isomorphic_graphs_are_matched_exactly() -> None:
    C1, _ = _clouds(20, 1, 8)
    perm = torch.randperm(20, generator=torch.Generator().manual_seed(9))
    C2 = C1[perm][:, perm]  # node a of C2 is node perm[a] of C1
    best = None
    for s in range(5):
        g = torch.Generator().manual_seed(100 + s)
        start = torch.rand(20, 20, generator=g, dtype=torch.float64)
        G0 = torch.as_tensor(ot.sinkhorn(np.ones(20) / 20, np.ones(20) / 20, start.numpy(), 1.0))
        res = structurally_robust_gw(C1, C2, G0=G0)
        if best is None or res.value < best.value:
            best = res
    inv = torch.argsort(perm)
    assert bool((best.x.argmax(1) == inv).all())


def test_target_masks_recover_spurious_edges() -> None:
    # the M-step at the true matching (identity plan / n): a wrong plan cannot locate the spurious edges,
    # and from p q^T the Frank-Wolfe T-step does not find the matching at 10 % noise (see the experiment)
    C1, C2, spur = _knn_graph(40, 5, 0.1, 10)
    G0 = torch.eye(40, dtype=torch.float64) / 40
    res = structurally_robust_gw(C1, C2, masks="target", edge_only=True, keep_ratio=0.9, G0=G0)
    assert bool((res.x.argmax(1) == torch.arange(40)).all())  # the masked problem keeps the true matching
    masked = res.extras["mask2"] == 0
    tp = float((masked & spur).sum())
    precision, recall = tp / float(masked.sum()), tp / float(spur.sum())
    assert precision > 0.7 and recall > 0.7, (precision, recall)


def test_masks_symmetric_and_on_edges_only() -> None:
    C1, C2, _ = _knn_graph(20, 4, 0.2, 11)
    res = structurally_robust_gw(C1, C2, edge_only=True, keep_ratio=0.7)
    for M, C in ((res.extras["mask1"], C1), (res.extras["mask2"], C2)):
        assert torch.equal(M, M.T)
        assert bool((C[M == 0] != 0).all()) and bool((M.diagonal() == 1).all())
    thr = structurally_robust_gw(C1, C2, lam=1e-6, edge_only=True, max_iter=20)
    assert torch.equal(thr.extras["mask2"], thr.extras["mask2"].T)
    # the threshold objective includes the price of every masked entry
    pen = 1e-6 * float((1 - thr.extras["mask1"]).sum() + (1 - thr.extras["mask2"]).sum())
    assert abs(thr.value - thr.extras["gw_value_kept"] - pen) <= 1e-12


def test_float32_and_determinism() -> None:
    C1, C2 = _clouds(8, 8, 12)
    a = structurally_robust_gw(C1.float(), C2.float(), max_iter=10)
    b = structurally_robust_gw(C1.float(), C2.float(), max_iter=10)
    assert a.x.dtype == torch.float32 and a.extras["mask1"].dtype == torch.float32
    assert torch.equal(a.x, b.x) and a.value == b.value


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"C1": torch.zeros(3, 4)}, "C1"),
        ({"C2": torch.tensor([[0.0, 1.0], [2.0, 0.0]])}, "C2"),
        ({"p": torch.ones(4) / 4}, "p"),
        ({"p": torch.tensor([0.5, 0.7, -0.2])}, "p"),
        ({"q": torch.ones(3) / 2}, "q"),
        ({"lam": 0.0}, "lam"),
        ({"lam": (1.0, -1.0)}, "lam"),
        ({"keep_ratio": 1.5}, "keep_ratio"),
        ({"keep_ratio": 0.0}, "keep_ratio"),
        ({"solver": "bcd"}, "solver"),
        ({"G0": torch.ones(3, 3)}, "G0"),
        ({"edge_only": 1}, "edge_only"),
    ],
)
def test_bad_input(kwargs: dict, name: str) -> None:
    C1, C2 = _clouds(3, 3, 13)
    args = {"C1": C1, "C2": C2, **kwargs}
    with pytest.raises((ValueError, TypeError), match=f"^{name}"):
        structurally_robust_gw(args.pop("C1"), args.pop("C2"), **args)
