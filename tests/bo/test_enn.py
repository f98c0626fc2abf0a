"""ENN surrogate: the posterior formula, limit cases, invariances, the scale fit, memory, ennbo parity."""

from __future__ import annotations

import math

import pytest
import torch

import optarium.bo.enn as enn_mod
from optarium.bo.enn import ENN, ENNParams, fit_enn_params, loo_log_likelihood

DT = torch.float64


def _data(n: int = 60, d: int = 3, m: int = 1, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, d, generator=g, dtype=DT)
    y = torch.sin(6 * x[:, :1]) + x[:, 1:2] ** 2 + 0.1 * torch.randn(n, m, generator=g, dtype=DT)
    return x, y


def _hand(x, y, q, k, ce, ca, eps, yvar=None):
    """Float64 brute force of the spec's formula, one query at a time."""
    mu, sd = [], []
    ym, ys = y.mean(0), y.std(0, correction=0)
    yz = (y - ym) / ys
    for xq in q:
        d2 = ((x - xq) ** 2).sum(-1)
        idx = sorted(range(len(x)), key=lambda i: (float(d2[i]), i))[:k]
        v = eps + ce * d2[idx, None] + ca
        if yvar is not None:
            v = v + yvar[idx] / ys**2
        w = 1 / v
        mu.append(ym + ys * (w * yz[idx]).sum(0) / w.sum(0))
        sd.append(ys * torch.sqrt(torch.clamp(1 / w.sum(0), min=eps)))
    return torch.stack(mu), torch.stack(sd)


@pytest.mark.parametrize("k", [1, 3, 10])
def test_posterior_equals_the_hand_formula(k: int) -> None:
    x, y = _data(n=40, m=2)
    q = torch.rand(25, 3, generator=torch.Generator().manual_seed(1), dtype=DT)
    for ce, ca in [(1.0, 0.0), (2.0, 0.5), (0.01, 0.001)]:
        post = ENN(x, y).posterior(q, ENNParams(k, ce, ca))
        mu, sd = _hand(x, y, q, k, ce, ca, 1e-9)
        torch.testing.assert_close(post.mean, mu, atol=1e-8, rtol=0)
        torch.testing.assert_close(post.stddev, sd, atol=1e-8, rtol=0)
    yvar = torch.rand_like(y) * 0.05
    post = ENN(x, y, yvar).posterior(q, ENNParams(k, 2.0, 0.1))
    mu, sd = _hand(x, y, q, k, 2.0, 0.1, 1e-9, yvar)
    torch.testing.assert_close(post.mean, mu, atol=1e-8, rtol=0)
    torch.testing.assert_close(post.stddev, sd, atol=1e-8, rtol=0)
    _, v = post  # the surrogate contract: (mean, variance)
    torch.testing.assert_close(v, post.stddev**2)


def test_k1_is_nearest_neighbour() -> None:
    x, y = _data()
    q = torch.rand(30, 3, generator=torch.Generator().manual_seed(2), dtype=DT)
    model = ENN(x, y)
    post = model.posterior(q, ENNParams(1, 3.0, 0.0))
    d2 = torch.cdist(q, x, compute_mode="donot_use_mm_for_euclid_dist") ** 2
    nn = d2.argmin(-1)
    torch.testing.assert_close(post.mean[:, 0], y[nn, 0], atol=1e-12, rtol=0)
    expected = model.y_std * torch.sqrt(1e-9 + 3.0 * d2.min(-1).values)
    torch.testing.assert_close(post.stddev[:, 0], expected, atol=1e-12, rtol=1e-10)


def test_interpolates_at_training_points() -> None:
    x, y = _data(n=50, d=2)
    sy = float(y.std(correction=0))
    post = ENN(x, y, eps=1e-15).posterior(x, ENNParams(10, 1.0, 0.0))
    assert (post.mean - y).abs().max() <= 1e-6 * sy
    assert post.stddev.max() < 1e-4 * sy
    assert (ENN(x, y).posterior(x, ENNParams(10, 1.0, 0.3)).stddev > 1e-3 * sy).all()
    # default eps: only approximate, bounded by the neighbours' weights eps / (eps + c d^2)
    model = ENN(x, y)
    post = model.posterior(x, ENNParams(10, 1.0, 0.0))
    idx, d2 = model.neighbors(x, 10)
    yz = model.Yz[:, 0]
    bound = (1e-9 / (1e-9 + d2[:, 1:]) * (yz[idx[:, 1:]] - yz[:, None]).abs()).sum(-1)
    err = ((post.mean[:, 0] - y[:, 0]) / model.y_std).abs()
    assert (err <= bound + 1e-12).all() and (idx[:, 0] == torch.arange(50)).all()


def test_invariances() -> None:
    x, y = _data()
    q = torch.rand(20, 3, generator=torch.Generator().manual_seed(3), dtype=DT)
    p = ENNParams(5, 2.0, 0.1)
    base = ENN(x, y).posterior(q, p)
    perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(4))
    shuffled = ENN(x[perm], y[perm]).posterior(q, p)
    torch.testing.assert_close(shuffled.mean, base.mean)
    torch.testing.assert_close(shuffled.stddev, base.stddev)
    shifted = ENN(x, y + 7.0).posterior(q, p)
    torch.testing.assert_close(shifted.mean, base.mean + 7.0)
    torch.testing.assert_close(shifted.stddev, base.stddev)
    scaled = ENN(x, -3.0 * y).posterior(q, p)
    torch.testing.assert_close(scaled.mean - (-3.0 * y).mean(), -3.0 * (base.mean - y.mean()))
    torch.testing.assert_close(scaled.stddev, 3.0 * base.stddev)


def test_incremental_add_equals_refit_and_exclude_nearest_is_leave_one_out() -> None:
    x, y = _data(n=40)
    model = ENN(x[:25], y[:25])
    model.add(x[25:], y[25:])
    q = torch.rand(10, 3, generator=torch.Generator().manual_seed(5), dtype=DT)
    p = ENNParams(4, 1.5, 0.0)
    torch.testing.assert_close(model.posterior(q, p).mean, ENN(x, y).posterior(q, p).mean)
    # leave-one-out at training point 7 = the posterior of the model without it (same standardisation)
    loo = model.posterior(x[7:8], p, exclude_nearest=True)
    assert 7 not in loo.neighbor_idx[0].tolist()
    keep = torch.arange(40) != 7
    idx, _ = ENN(x[keep], y[keep]).neighbors(x[7:8], 4)
    assert sorted(torch.arange(40)[keep][idx[0]].tolist()) == sorted(loo.neighbor_idx[0].tolist())


def test_batched_parameters_match_single_calls_and_gradients_flow() -> None:
    x, y = _data()
    model = ENN(x, y)
    q = torch.rand(8, 3, generator=torch.Generator().manual_seed(6), dtype=DT)
    ce, ca = torch.tensor([0.5, 3.0], dtype=DT), torch.tensor([0.0, 0.2], dtype=DT)
    mean_z, _, _, _, _ = model.posterior_batch(q, 6, ce, ca)
    for i in range(2):
        post = model.posterior(q, ENNParams(6, float(ce[i]), float(ca[i])))
        torch.testing.assert_close(model.y_mean + model.y_std * mean_z[i], post.mean)
    qg = q.clone().requires_grad_(True)
    post = model.posterior(qg, ENNParams(6, 1.0, 0.0))
    (post.mean.sum() + post.stddev.sum()).backward()
    assert qg.grad is not None and torch.isfinite(qg.grad).all() and qg.grad.abs().sum() > 0


def test_fit_recovers_the_noise_level() -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.rand(2000, 2, generator=g, dtype=DT)
    clean = torch.sin(2 * math.pi * x[:, 0])
    noisy = clean + 0.3 * torch.randn(2000, generator=g, dtype=DT)
    model = ENN(x, noisy)
    p = fit_enn_params(model, 10, 30, 10, generator=torch.Generator().manual_seed(1))
    noise_var = p.aleatoric_variance_scale * float(model.y_std[0]) ** 2
    assert 0.09 / 3 <= noise_var <= 0.09 * 3, noise_var
    pc = fit_enn_params(ENN(x, clean), 10, 30, 10, generator=torch.Generator().manual_seed(1))
    assert pc.aleatoric_variance_scale < 1e-2
    # the chosen pair scores at least as well as the default (1, 0) on the same subsample
    gen = torch.Generator().manual_seed(1)
    torch.rand(30, 2, generator=gen, dtype=DT)
    sample = torch.randperm(2000, generator=gen)[:10]
    ll = loo_log_likelihood(
        model,
        sample,
        10,
        torch.tensor([p.epistemic_variance_scale, 1.0]),
        torch.tensor([p.aleatoric_variance_scale, 0.0]),
    )
    assert ll[0] >= ll[1]
    assert fit_enn_params(ENN(x[:1], noisy[:1]), 10) == ENNParams(10, 1.0, 0.0)
    q = fit_enn_params(model, 10, 30, 10, generator=torch.Generator().manual_seed(1), infer_aleatoric=False)
    assert q.aleatoric_variance_scale == 0.0


def test_search_never_builds_an_n_by_n_block(monkeypatch: pytest.MonkeyPatch) -> None:
    x, y = _data(n=3000, d=4)
    model = ENN(x, y)
    shapes: list[tuple[int, ...]] = []
    real = torch.addmm

    def spy(*args, **kwargs):
        out = real(*args, **kwargs)
        shapes.append(tuple(out.shape))
        return out

    monkeypatch.setattr(enn_mod, "_BLOCK_ELEMS", 3000 * 50)
    monkeypatch.setattr(torch, "addmm", spy)
    post = model.posterior(x, ENNParams(3, 1.0, 0.0))
    monkeypatch.undo()
    assert max(a * b for a, b in shapes) <= 3000 * 50 and len(shapes) == 60
    ref = ENN(x, y).posterior(x, ENNParams(3, 1.0, 0.0))
    torch.testing.assert_close(post.mean, ref.mean)


@pytest.mark.slow
def test_fit_and_posterior_time_grows_about_linearly() -> None:
    import time

    def run(n: int) -> float:
        g = torch.Generator().manual_seed(0)
        x = torch.rand(n, 20, generator=g, dtype=DT)
        model = ENN(x, x.sum(-1))
        q = torch.rand(2000, 20, generator=g, dtype=DT)
        best = math.inf
        for _ in range(3):
            t = time.perf_counter()
            p = fit_enn_params(model, 10, 30, 10, generator=g)
            model.posterior(q, p)
            best = min(best, time.perf_counter() - t)
        return best

    ratio = run(20000) / run(10000)
    assert 1.4 <= ratio <= 3.0, ratio


def test_bad_input() -> None:
    x, y = _data(n=10)
    with pytest.raises(ValueError, match=r"^train_y"):
        ENN(x, y.clone().fill_(math.nan))
    with pytest.raises(ValueError, match=r"^train_x"):
        ENN(x.clone().fill_(math.inf), y)
    with pytest.raises(ValueError, match=r"^train_y"):
        ENN(x, y[:5])
    with pytest.raises(ValueError, match=r"^k"):
        ENNParams(0)
    with pytest.raises(ValueError, match=r"^epistemic_variance_scale"):
        ENNParams(3, -1.0)
    with pytest.raises(ValueError, match=r"^aleatoric_variance_scale"):
        ENNParams(3, 1.0, -0.1)
    with pytest.raises(ValueError, match=r"^exclude_nearest"):
        ENN(x[:1], y[:1]).posterior(x[:1], exclude_nearest=True)
    with pytest.raises(ValueError, match=r"^x"):
        ENN(x, y).posterior(torch.rand(2, 5, dtype=DT))
    with pytest.raises(ValueError, match=r"^eps"):
        ENN(x, y, eps=0.0)


def test_side_by_side_with_ennbo() -> None:
    enn = pytest.importorskip("enn", reason="ennbo==0.3.3 (import name enn) is the authors' reference")
    import numpy as np
    from enn.enn.enn_params import ENNParams as RefParams

    g = torch.Generator().manual_seed(0)
    for n, d in [(300, 3), (2000, 10)]:
        x = torch.rand(n, d, generator=g, dtype=DT)
        y = torch.sin(6 * x[:, :1]) + x[:, 1:2] ** 2
        q = torch.rand(500, d, generator=g, dtype=DT)
        ref_model = enn.EpistemicNearestNeighbors(x.numpy(), y.numpy())
        ours = ENN(x, y)
        far = (torch.cdist(q, x) ** 2).min(-1).values >= 1e-2
        for k, ce, ca in [
            (1, 1.0, 0.0),
            (3, 2.0, 0.5),
            (10, 1000.0, 1e-3),
            (10, 0.01, 1e-3),
            (10, 30.0, 0.0),
        ]:
            ref = ref_model.posterior(q.numpy(), params=RefParams(k, ce, ca))
            post = ours.posterior(q, ENNParams(k, ce, ca))
            same = torch.from_numpy(np.sort(np.asarray(ref.idx), 1)) == post.neighbor_idx.sort(-1).values
            generic = far & same.all(-1)
            assert generic.sum() > 100
            rng = float(y.max() - y.min())
            dmu = (post.mean[:, 0] - torch.from_numpy(ref.mu[:, 0]))[generic].abs().max()
            dsd = (post.stddev[:, 0] / torch.from_numpy(ref.se[:, 0]) - 1)[generic].abs().max()
            assert dmu <= 1e-5 * rng and dsd <= 5e-4, (n, d, k, ce, ca, float(dmu), float(dsd))
        # at training points compare the interpolation property, not digits
        ref = ref_model.posterior(x[:50].numpy(), params=RefParams(10, 1.0, 0.0))
        sy = float(y.std(correction=0))
        assert np.abs(ref.mu[:, 0] - y[:50, 0].numpy()).max() <= 5e-5 * sy
        post = ENN(x, y, eps=1e-15).posterior(x[:50], ENNParams(10, 1.0, 0.0))
        assert (post.mean - y[:50]).abs().max() <= 1e-6 * sy and post.stddev.max() < 1e-4 * sy


@pytest.mark.parametrize(("n", "N", "kk"), [(40, 5000, 11), (30, 4099, 3), (25, 6007, 16), (20, 4096, 1)])
def test_two_level_selection_returns_the_kk_smallest_values(n: int, N: int, kk: int) -> None:
    g = torch.Generator().manual_seed(N)
    d2 = torch.rand(n, N, generator=g, dtype=DT)
    d2[:, ::7] = d2[:, :1]  # many exact ties
    d2[:2, ::3] = 0.0  # rows with more than _CAP entries <= t: the fallback
    ref = torch.topk(d2, kk, -1, largest=False).values.sort(-1).values
    idx = enn_mod._smallest(d2, kk)
    assert idx.shape == (n, kk) and (idx.sort(-1).values.diff(dim=-1) > 0).all()  # kk distinct columns
    assert torch.equal(d2.gather(1, idx).sort(-1).values, ref)
    # the integer-view topk of the narrow path agrees as well
    assert torch.equal(d2.gather(1, enn_mod._topk_smallest(d2, kk)).sort(-1).values, ref)


def test_wide_search_matches_brute_force_neighbours() -> None:
    x, y = _data(n=6000, d=5)
    q = torch.rand(300, 5, generator=torch.Generator().manual_seed(7), dtype=DT)
    q[:5] = x[100:105]  # queries at training points: exact distance 0 first
    idx, d2 = ENN(x, y).neighbors(q, 10)
    ref = (q.unsqueeze(1) - x.unsqueeze(0)).square().sum(-1)
    ref_d2, ref_idx = ref.sort(dim=-1, stable=True)
    assert torch.equal(idx, ref_idx[:, :10])
    torch.testing.assert_close(d2, ref_d2[:, :10], atol=0, rtol=0)
    assert (d2[:5, 0] == 0).all()


@pytest.mark.parametrize(("n", "N", "kk"), [(30, 500, 10), (20, 5000, 11), (15, 4099, 3)])
def test_lowest_index_selection_breaks_boundary_ties_by_index(n: int, N: int, kk: int) -> None:
    g = torch.Generator().manual_seed(N + kk)
    d2 = torch.rand(n, N, generator=g, dtype=DT)
    d2[:, ::5] = d2[:, :1]  # one value repeated N/5 times per row
    d2[:3] = torch.rand(1, N, generator=g, dtype=DT).round(decimals=1)  # wholesale ties
    idx = enn_mod._smallest_lowest_index(d2, kk)
    # reference: stable sort keeps equal values in index order, so its first kk are the lowest indices
    ref = torch.sort(d2, dim=-1, stable=True).indices[:, :kk]
    assert torch.equal(idx.sort(-1).values, ref.sort(-1).values)


@pytest.mark.parametrize("d", [2, 5])
def test_duplicated_training_points_lowest_index_wins_at_the_kth_neighbour(d: int) -> None:
    # each point stored three times (at i, i + n, i + 2n): the K-th neighbour is a three-way tie whenever
    # K is not a multiple of 3; the rule keeps the copies with the lower indices, and the order is by
    # (distance, index)
    g = torch.Generator().manual_seed(d)
    base = torch.rand(40, d, generator=g, dtype=DT)
    x = torch.cat([base, base, base])
    y = torch.rand(120, generator=g, dtype=DT)
    q = torch.rand(200, d, generator=g, dtype=DT)
    for k in (1, 4, 10):
        idx, _ = ENN(x, y).neighbors(q, k)
        ref = (q.unsqueeze(1) - x.unsqueeze(0)).square().sum(-1)
        ref_idx = torch.sort(ref, dim=-1, stable=True).indices[:, :k]
        assert torch.equal(idx, ref_idx)
        # with exclude_nearest the copy dropped is the lowest-index one at distance 0
        idx_loo, _ = ENN(x, y).neighbors(x[:5], k, exclude_nearest=True)
        full = torch.sort((x[:5].unsqueeze(1) - x.unsqueeze(0)).square().sum(-1), dim=-1, stable=True)
        assert torch.equal(idx_loo, full.indices[:, 1 : k + 1])
