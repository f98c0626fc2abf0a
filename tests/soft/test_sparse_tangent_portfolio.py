"""Falsifiable checks of the sparse tangent portfolio: smooth top-k, the convex Sharpe layer, the oracle."""

from __future__ import annotations

import itertools
import warnings

import pytest
import torch

import optarium.soft.sparse_tangent_portfolio as stp

DT = torch.float64


def _cov(n: int, seed: int, cond: float = 100.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    q, _ = torch.linalg.qr(torch.randn(n, n, generator=g, dtype=DT))
    eig = torch.logspace(0, -torch.log10(torch.tensor(cond)).item(), n, dtype=DT)
    return (q * eig) @ q.T * 1e-4


def test_layer_matches_closed_form_tangency_and_beats_random_portfolios() -> None:
    for seed in range(3):
        n = 8
        sig = _cov(n, seed)
        g = torch.Generator().manual_seed(100 + seed)
        w_true = torch.rand(n, generator=g, dtype=DT) + 0.05
        mu = sig @ w_true  # closed-form tangency Sigma^-1 mu / 1'Sigma^-1 mu = w_true / sum, non-negative
        w = stp.sparse_tangent_weights(mu, torch.linalg.cholesky(sig), torch.ones(n, dtype=DT), ridge_rel=0.0)
        assert torch.allclose(w, w_true / w_true.sum(), atol=1e-9, rtol=0)
        rnd = torch.distributions.Dirichlet(torch.ones(n, dtype=DT)).sample((10_000,))
        assert stp.sharpe_ratio(w, mu, sig) >= stp.sharpe_ratio(rnd, mu, sig).max()


def test_hard_mask_support_inside_mask_and_sharpe_equals_enumeration_oracle() -> None:
    n, k = 8, 4
    for seed in range(4):
        sig = _cov(n, seed)
        g = torch.Generator().manual_seed(seed)
        mu = 1e-3 * (torch.randn(n, generator=g, dtype=DT) + 0.3)
        mask = stp.hard_topk_mask(torch.randn(n, generator=g, dtype=DT), k)
        if not bool((mu * mask > 0).any()):
            continue
        w = stp.sparse_tangent_weights(mu, torch.linalg.cholesky(sig), mask, ridge_rel=0.0)
        assert torch.equal(w[mask == 0], torch.zeros(n - k, dtype=DT))  # exactly zero off the mask
        assert (w >= -1e-15).all() and abs(float(w.sum()) - 1) < 1e-12
        best, _ = stp.tangent_oracle(mu, sig, k, support=mask)
        assert float(stp.sharpe_ratio(w, mu, sig)) == pytest.approx(float(best), rel=1e-9)


def test_oracle_agrees_with_brute_force_over_all_k_subsets() -> None:
    n, k = 6, 3
    sig = _cov(n, 7)
    mu = 1e-3 * torch.tensor([1.0, 0.5, -0.2, 0.8, 0.1, -0.5], dtype=DT)
    chol = torch.linalg.cholesky(sig)
    masks = torch.zeros(20, n, dtype=DT)
    for i, c in enumerate(itertools.combinations(range(n), k)):
        masks[i, list(c)] = 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        w = stp.sparse_tangent_weights(mu.expand(20, n), chol.expand(20, n, n), masks, ridge_rel=0.0)
    best, w_best = stp.tangent_oracle(mu, sig, k)
    assert float(stp.sharpe_ratio(w, mu, sig).max()) == pytest.approx(float(best), rel=1e-9)
    assert float(stp.sharpe_ratio(w_best, mu, sig)) == pytest.approx(float(best), rel=1e-9)


def test_cvxpylayers_cross_check_agrees_with_torch_qp() -> None:
    pytest.importorskip("cvxpylayers", reason="cvxpylayers is the optional cross-check backend")
    n = 6
    sig = _cov(n, 3)
    chol = torch.linalg.cholesky(sig)
    g = torch.Generator().manual_seed(3)
    mu = 1e-3 * (torch.randn(n, generator=g, dtype=DT) + 0.5)
    m = stp.soft_topk_mask(torch.randn(n, generator=g, dtype=DT), 3, rel_epsilon=0.5)
    w1 = stp.sparse_tangent_weights(mu, chol, m, ridge_rel=1e-6)
    w2 = stp.sparse_tangent_weights(mu, chol, m, ridge_rel=1e-6, backend="cvxpylayers")
    assert torch.allclose(w1, w2, atol=1e-5, rtol=0)


def _strict_problem(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    n = 6
    sig = _cov(n, seed, cond=10.0)
    g = torch.Generator().manual_seed(seed)
    mu = 1e-3 * (torch.randn(n, generator=g, dtype=DT) + 0.4)
    m = stp.soft_topk_mask(torch.randn(n, generator=g, dtype=DT), 3, rel_epsilon=0.3)
    return mu, torch.linalg.cholesky(sig), m


def test_layer_gradcheck_wrt_mu_chol_and_mask() -> None:
    mu, chol, m = _strict_problem(11)

    def f(mu: torch.Tensor, chol: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        return stp.sparse_tangent_weights(mu, chol, m, ridge_rel=0.0)

    _, info = stp.sparse_tangent_weights(mu, chol, m, ridge_rel=0.0, return_info=True)
    assert bool(info.polished.all())
    assert torch.autograd.gradcheck(
        f,
        (mu.clone().requires_grad_(), chol.clone().requires_grad_(), m.clone().requires_grad_()),
        eps=1e-9,
        atol=1e-6,
    )


def test_soft_topk_sum_is_exactly_k_and_limits_and_jacobian() -> None:
    g = torch.Generator().manual_seed(0)
    for n in (5, 37, 100):
        for scale in (1e-3, 1.0, 1e3):
            s = scale * torch.randn(n, generator=g, dtype=DT)
            for k in (1, n // 2, n - 1):
                for rel in (1e-6, 0.05, 1.0):
                    m = stp.soft_topk_mask(s, k, rel_epsilon=rel)
                    assert abs(float(m.sum()) - k) <= 1e-10
    s = torch.randn(10, generator=g, dtype=DT)
    assert torch.equal(stp.soft_topk_mask(s, 10), torch.ones(10, dtype=DT))
    assert torch.allclose(stp.soft_topk_mask(s, 3, epsilon=1e-6), stp.hard_topk_mask(s, 3), atol=1e-8)
    assert torch.allclose(stp.soft_topk_mask(s, 3, epsilon=1e6), torch.full((10,), 0.3, dtype=DT), atol=1e-6)
    jac = torch.autograd.functional.jacobian(lambda x: stp.soft_topk_mask(x, 3, epsilon=0.5), s)
    assert torch.allclose(jac, jac.T, atol=1e-12) and jac.sum(0).abs().max() < 1e-12
    assert torch.autograd.gradcheck(
        lambda x: stp.soft_topk_mask(x, 3, epsilon=0.5), (s.clone().requires_grad_(),)
    )
    # float32 input: the mask is computed in float64 and cast back
    m32 = stp.soft_topk_mask(s.float(), 4)
    assert m32.dtype == torch.float32 and abs(float(m32.double().sum()) - 4) < 1e-4


def test_permutation_equivariance_and_layer_scale_invariance() -> None:
    mu, chol, m = _strict_problem(5)
    sig = chol @ chol.T
    perm = torch.tensor([3, 1, 5, 0, 2, 4])
    w = stp.sparse_tangent_weights(mu, chol, m)
    wp = stp.sparse_tangent_weights(mu[perm], torch.linalg.cholesky(sig[perm][:, perm]), m[perm])
    assert torch.allclose(wp, w[perm], atol=1e-9)
    s = torch.randn(6, dtype=DT)
    assert torch.allclose(stp.soft_topk_mask(s[perm], 2), stp.soft_topk_mask(s, 2)[perm], atol=1e-12)
    for c in (1e-3, 1e3):
        assert torch.allclose(stp.sparse_tangent_weights(c * mu, c * chol, m), w, atol=1e-9)


def test_infeasible_selection_falls_back_to_min_variance_with_a_warning() -> None:
    mu = torch.tensor([1.0, -10.0, -10.0], dtype=DT)
    m = torch.tensor([0.1, 0.95, 0.95], dtype=DT)
    assert float((mu * m).max()) > 0 and float(stp.knapsack_value(mu, m)) == pytest.approx(-8.9)
    chol = torch.linalg.cholesky(_cov(3, 1))
    with pytest.warns(RuntimeWarning, match="min_variance"):
        w, info = stp.sparse_tangent_weights(mu, chol, m, return_info=True)
    assert bool(info.fallback.all())
    wmv = stp.min_variance_weights(chol, m)
    assert torch.allclose(w, wmv, atol=1e-10)
    assert (w <= m + 1e-12).all() and abs(float(w.sum()) - 1) < 1e-12


def test_ledoit_wolf_matches_sklearn() -> None:
    sk = pytest.importorskip("sklearn.covariance", reason="scikit-learn is the Ledoit-Wolf reference")
    x = torch.randn(252, 10, generator=torch.Generator().manual_seed(0), dtype=DT) * 0.01
    ref = torch.tensor(sk.LedoitWolf().fit(x.numpy()).covariance_, dtype=DT)
    assert torch.allclose(stp.ledoit_wolf(x), ref, atol=1e-14, rtol=1e-10)


def test_bad_inputs_raise_naming_the_argument() -> None:
    s = torch.randn(5, dtype=DT)
    with pytest.raises(ValueError, match=r"^k:"):
        stp.soft_topk_mask(s, 0)
    with pytest.raises(ValueError, match=r"^k:"):
        stp.soft_topk_mask(s, 6)
    with pytest.raises(ValueError, match=r"^method:"):
        stp.soft_topk_mask(s, 2, method="nope")
    chol = torch.eye(5, dtype=DT)
    with pytest.raises(ValueError, match=r"^mask:"):
        stp.sparse_tangent_weights(s, chol, torch.full((5,), 0.1, dtype=DT))
    with pytest.raises(ValueError, match=r"^backend:"):
        stp.sparse_tangent_weights(s, chol, torch.ones(5, dtype=DT), backend="x")
    with pytest.raises(ValueError, match=r"^mu:"):
        stp.sparse_tangent_weights(s * float("nan"), chol, torch.ones(5, dtype=DT))
    with pytest.raises(ValueError, match=r"^k:"):
        stp.DecisionFocusedPortfolio(0)


def test_decision_focused_training_runs_and_is_deterministic() -> None:
    from optarium.problems.portfolio import synthetic_universe

    uni = synthetic_universe(0, 6, 252 * 3 + 21)
    dates = torch.arange(252, 252 * 2, 21)
    val = torch.arange(252 * 2, 252 * 3 - 21, 21)
    ws = []
    for _ in range(2):
        model = stp.DecisionFocusedPortfolio(2, epochs=2, batch_size=8, seed=3, extra=uni["signals"])
        model.fit(uni["returns"], dates, val)
        ws.append(model.weights(uni["returns"], val))
    assert torch.equal(ws[0], ws[1])
    assert ((ws[0] > 0).sum(-1) <= 2).all() and torch.allclose(ws[0].sum(-1), torch.ones(len(val), dtype=DT))
