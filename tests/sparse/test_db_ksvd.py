"""DB-KSVD (optarium.sparse.db_ksvd): the falsifiable checks of spec db-ksvd.md on planted dictionaries."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from optarium.sparse import (
    DBKSVD,
    TopKSAE,
    atom_recovery,
    db_ksvd,
    dead_atoms,
    ksvd_dictionary_update,
    matching_pursuit,
    mean_max_coherence,
    planted_dictionary,
    reconstruct,
    train_topk_sae,
)


def _dense(idx: torch.Tensor, val: torch.Tensor, K: int) -> torch.Tensor:
    """(k, n) slots -> dense (K, n)."""
    return torch.zeros(K, idx.shape[1], dtype=val.dtype).scatter_add_(0, idx, val)


def _problem(seed: int = 0, N: int = 600, m: int = 16, K: int = 24, k: int = 3):
    Y, _, _ = planted_dictionary(N, m, K, k, seed=seed)
    Yt = Y.T.contiguous()
    g = torch.Generator().manual_seed(seed)
    D0 = torch.randn(m, K, generator=g, dtype=torch.float64)
    D0 = D0 / D0.norm(dim=0)
    idx, val = matching_pursuit(Yt, D0, k, rtol=0.0)
    return Yt, D0, idx, val


def test_rank_one_update_is_the_best_rank_one_fit() -> None:
    Yt, D, idx, val = _problem()
    K = D.shape[1]
    i = 5
    X = _dense(idx, val, K)
    omega = (X[i] != 0).nonzero().squeeze(1)
    assert omega.numel() > 3
    E = Yt[:, omega] - D @ X[:, omega] + D[:, i : i + 1] * X[i : i + 1, omega]
    D1, v1, _ = ksvd_dictionary_update(Yt, D, idx, val, torch.tensor([i]), 1)
    X1 = _dense(idx, v1, K)
    fit = E - D1[:, i : i + 1] * X1[i : i + 1, omega]
    sv = torch.linalg.svdvals(E)
    assert torch.allclose((fit * fit).sum(), (sv[1:] ** 2).sum(), rtol=1e-9)
    assert D1[0, i] >= 0 or D1[:, i].abs().max() == 0  # sign convention: first entry of u_1 >= 0
    assert torch.equal(D1[:, [j for j in range(K) if j != i]], D[:, [j for j in range(K) if j != i]])
    assert torch.equal((v1 != 0), (val != 0))  # supports unchanged


def test_sequential_update_never_increases_the_error() -> None:
    Yt, D, idx, val = _problem(1)
    K = D.shape[1]
    prev = float((Yt - reconstruct(D, idx, val)).norm())
    for i in torch.randperm(K, generator=torch.Generator().manual_seed(0)):
        D, val, _ = ksvd_dictionary_update(Yt, D, idx, val, i.reshape(1), 1)
        cur = float((Yt - reconstruct(D, idx, val)).norm())
        assert cur <= prev * (1 + 1e-12)
        prev = cur


def _reference_ksvd_sweep(Y: np.ndarray, D: np.ndarray, X: np.ndarray, order, batch: int):
    """Textbook K-SVD in numpy (dense codes), atoms of a batch fitted from the batch's starting D, X."""
    D, X = D.copy(), X.copy()
    for s in range(0, len(order), batch):
        D0, X0 = D.copy(), X.copy()
        for i in order[s : s + batch]:
            om = np.nonzero(X0[i])[0]
            if om.size == 0:
                continue
            E = Y[:, om] - D0 @ X0[:, om] + np.outer(D0[:, i], X0[i, om])
            U, S, Vt = np.linalg.svd(E, full_matrices=False)
            sgn = -1.0 if U[0, 0] < 0 else 1.0
            D[:, i] = sgn * U[:, 0]
            X[i, om] = sgn * S[0] * Vt[0]
    return D, X


@pytest.mark.parametrize("batch", [1, 5, 24])
def test_batched_update_matches_reference_ksvd(batch: int) -> None:
    Yt, D, idx, val = _problem(2)
    K = D.shape[1]
    order = torch.randperm(K, generator=torch.Generator().manual_seed(3))
    D1, v1, n_re = ksvd_dictionary_update(Yt, D, idx, val, order, batch)
    Dr, Xr = _reference_ksvd_sweep(Yt.numpy(), D.numpy(), _dense(idx, val, K).numpy(), order.tolist(), batch)
    assert n_re == 0
    np.testing.assert_allclose(D1.numpy(), Dr, atol=1e-9)
    np.testing.assert_allclose(_dense(idx, v1, K).numpy(), Xr, atol=1e-9)


def test_matching_pursuit_exact_on_orthonormal_dictionary() -> None:
    g = torch.Generator().manual_seed(0)
    Q, _ = torch.linalg.qr(torch.randn(16, 16, generator=g, dtype=torch.float64))
    X = torch.zeros(16, 50, dtype=torch.float64)
    supp = torch.rand(50, 16, generator=g).argsort(1)[:, :4]
    X.scatter_(0, supp.T, 0.5 + torch.rand(4, 50, generator=g, dtype=torch.float64))
    idx, val = matching_pursuit(Q @ X, Q, 4, rtol=0.0)
    assert torch.allclose(_dense(idx, val, 16), X, atol=1e-12)


def test_matching_pursuit_matches_numpy_reference() -> None:
    Yt, D, idx, val = _problem(4)
    Y, Dn = Yt.numpy(), D.numpy()
    for j in range(0, Y.shape[1], 37):
        r, x = Y[:, j].copy(), np.zeros(D.shape[1])
        for _ in range(3):
            c = Dn.T @ r
            a = int(np.argmax(np.abs(c)))
            x[a] += c[a]
            r -= c[a] * Dn[:, a]
        np.testing.assert_allclose(
            _dense(idx[:, j : j + 1], val[:, j : j + 1], D.shape[1])[:, 0], x, atol=1e-10
        )


def test_rtol_stops_matching_pursuit_early() -> None:
    Yt, D, _, _ = _problem(5)
    idx, val = matching_pursuit(Yt, D, 10, rtol=0.9)
    Xd = _dense(idx, val, D.shape[1])
    res = (Yt - D @ Xd).norm(dim=0) / Yt.norm(dim=0)
    nnz = (val != 0).sum(0)
    # a column that used fewer than 10 slots stopped because its residual fell below rtol
    assert bool((res[nnz < 10] < 0.9).all()) and bool((nnz < 10).any())


def test_invariants_after_fit() -> None:
    Y, _, _ = planted_dictionary(500, 16, 32, 3, seed=1)
    r = db_ksvd(Y, 32, 3, max_iter=4, tol=0.0, seed=0)
    D = r.x["components"]
    assert D.shape == (32, 16)
    assert torch.allclose(D.norm(dim=1), torch.ones(32, dtype=D.dtype), atol=1e-6)
    assert r.x["indices"].shape == (500, 3) and bool(((r.x["values"] != 0).sum(1) <= 3).all())
    assert r.status == "max_iter" and r.n_iter == 4
    rec = reconstruct(D.T, r.x["indices"].T, r.x["values"].T).T
    err = ((Y - rec).norm(dim=1) / Y.norm(dim=1)).mean()
    assert abs(float(err) - r.value) < 1e-12
    assert r.history.last("dead") == dead_atoms(r.x["indices"], r.x["values"], 32)


def test_empty_atoms_are_reinitialised() -> None:
    Yt, D, idx, val = _problem(6)
    K = D.shape[1]
    val = val.clone()
    val[idx == 7] = 0.0  # atom 7 loses its support
    D1, _, n_re = ksvd_dictionary_update(Yt, D, idx, val, torch.arange(K), 4)
    assert n_re == 1
    assert not torch.equal(D1[:, 7], D[:, 7]) and abs(float(D1[:, 7].norm()) - 1) < 1e-12


def test_full_sample_batch_equals_full_batch() -> None:
    Y, _, _ = planted_dictionary(400, 12, 20, 2, seed=2)
    a = db_ksvd(Y, 20, 2, max_iter=3, tol=0.0, seed=1)
    b = db_ksvd(Y, 20, 2, max_iter=3, tol=0.0, seed=1, sample_batch_size=400)  # same columns, permuted
    assert torch.allclose(a.x["components"], b.x["components"], atol=1e-10)
    c = db_ksvd(Y, 20, 2, max_iter=3, tol=0.0, seed=1, sample_batch_size=100)
    assert not torch.allclose(a.x["components"], c.x["components"], atol=1e-6)


def test_determinism_and_seed() -> None:
    Y, _, _ = planted_dictionary(300, 8, 12, 2, seed=3)
    a = db_ksvd(Y, 12, 2, max_iter=2, seed=4)
    b = db_ksvd(Y, 12, 2, max_iter=2, seed=4)
    c = db_ksvd(Y, 12, 2, max_iter=2, seed=5)
    assert torch.equal(a.x["components"], b.x["components"])
    assert not torch.equal(a.x["components"], c.x["components"])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_planted_recovery_small(seed: int) -> None:
    Y, D, _ = planted_dictionary(2000, 32, 64, 3, seed=seed)
    r = db_ksvd(Y, 64, 3, max_iter=15, atom_batch_size=8, tol=0.0, seed=seed)
    assert atom_recovery(r.x["components"], D, (0.99,))[0.99] >= 0.75


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_planted_recovery_quick_size(seed: int) -> None:
    Y, D, _ = planted_dictionary(10_000, 64, 256, 5, seed=seed)
    r = db_ksvd(Y, 256, 5, max_iter=20, atom_batch_size=8, tol=0.0, seed=seed)
    assert atom_recovery(r.x["components"], D, (0.99,))[0.99] >= 0.85


def test_float32_and_estimator() -> None:
    Y, _, _ = planted_dictionary(400, 12, 16, 2, seed=0, dtype=torch.float32)
    est = DBKSVD(n_atoms=16, n_nonzero=2, max_iter=5, random_state=0).fit(Y.numpy())
    assert est.components_.dtype == torch.float32 and est.n_iter_ <= 5
    codes = est.transform(Y)
    assert codes.shape == (400, 16) and bool(((codes != 0).sum(1) <= 2).all())
    assert torch.allclose(codes @ est.components_, est.fit_transform(Y) @ est.components_, atol=1e-5)


def test_metrics() -> None:
    Dt = torch.eye(4, dtype=torch.float64)
    learned = torch.tensor([[1.0, 0, 0, 0], [0, -1.0, 0, 0], [0, 0, 1, 1]], dtype=torch.float64)
    rec = atom_recovery(learned, Dt, (0.5, 0.8, 0.99))
    assert rec == {0.5: 1.0, 0.8: 0.5, 0.99: 0.5}  # e3, e4 have |cos| 1/sqrt(2) to the third row
    assert mean_max_coherence(Dt) == 0.0 and mean_max_coherence(learned) == 0.0
    two = torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, -1.0]], dtype=torch.float64)
    assert abs(mean_max_coherence(two) - 0.5**0.5) < 1e-12


def test_bad_input() -> None:
    Y, _, _ = planted_dictionary(50, 6, 8, 2, seed=0)
    with pytest.raises(ValueError, match=r"^n_nonzero"):
        db_ksvd(Y, 8, 0)
    with pytest.raises(ValueError, match=r"^n_nonzero"):
        db_ksvd(Y, 8, 7)  # k > m
    with pytest.raises(ValueError, match=r"^n_atoms"):
        db_ksvd(Y, 0, 1)
    bad = Y.clone()
    bad[3, 2] = float("nan")
    with pytest.raises(ValueError, match=r"^Y"):
        db_ksvd(bad, 8, 2)
    with pytest.raises(TypeError, match=r"^Y"):
        db_ksvd([[1.0]], 1, 1)
    with pytest.warns(UserWarning, match="samples for"):
        db_ksvd(Y[:5], 8, 2, max_iter=1)


def test_topk_sae_shapes_and_training() -> None:
    Y, _, _ = planted_dictionary(3000, 16, 24, 2, seed=0, dtype=torch.float32)
    sae = TopKSAE(16, 24, 2, generator=torch.Generator().manual_seed(0))
    z = sae.encode(Y[:10])
    assert bool(((z != 0).sum(1) <= 2).all()) and bool((z >= 0).all())
    r = train_topk_sae(Y[:2500], 24, 2, lr=3e-3, max_steps=300, eval_every=100, Y_val=Y[2500:], seed=0)
    W = r.x["components"]
    assert torch.allclose(W.norm(dim=1), torch.ones(24), atol=1e-5)
    errs = r.history.metrics["err"]
    assert errs[-1] < 0.7 * errs[0]
    assert abs(r.value - min(errs[1:])) < 1e-6  # the best evaluated parameters are returned
