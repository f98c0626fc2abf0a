"""The RS criterion, the paper's IRS update, the reconstructed IRS controller and the DRO baselines."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
import torch.nn.functional as F

from optarium.optim.robust_satisficing import (
    GroupDROLoss,
    IterativeRobustSatisficing,
    RobustSatisficingLoss,
    chi2_dro_loss,
    cvar_loss,
    erm_loss,
    jtt_weights,
    kl_fragility,
    rs_fragility,
    tilted_loss,
)

torch.set_num_threads(1)


def _u03(dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    return 3.0 * torch.rand(64, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).to(dtype)


def test_tilted_large_k_matches_variance_expansion_float64() -> None:
    x = _u03(torch.float64)
    k = 1e6
    gap = float(tilted_loss(x, k) - x.mean())
    expected = float(x.var(unbiased=False)) / (2 * k)
    assert abs(gap - expected) / expected < 1e-2


def test_tilted_large_k_float32_accurate() -> None:
    for seed in range(5):
        x = _u03(torch.float32, seed)
        val = tilted_loss(x, 1e6)
        assert val.dtype == torch.float32
        assert abs(float(val.detach()) - float(x.mean())) <= 1e-6 * float(x.mean())


def test_tilted_small_k_is_max() -> None:
    x = _u03(torch.float64)
    k = 1e-4
    val = float(tilted_loss(x, k))
    assert float(x.max()) - k * math.log(64) - 1e-12 <= val <= float(x.max()) + 1e-12


def test_tilted_gradient_is_softmax_weighted() -> None:
    gen = torch.Generator().manual_seed(1)
    w = torch.randn(5, 3, dtype=torch.float64, generator=gen, requires_grad=True)
    x = torch.randn(12, 5, dtype=torch.float64, generator=gen)
    y = torch.randint(0, 3, (12,), generator=gen)
    for k in (0.3, 2.0, 1e4):
        losses = F.cross_entropy(x @ w, y, reduction="none")
        (g,) = torch.autograd.grad(tilted_loss(losses, k), w, retain_graph=True)
        weights = torch.softmax(losses.detach() / k, 0)
        ref = torch.zeros_like(w)
        for i in range(12):
            (gi,) = torch.autograd.grad(losses[i], w, retain_graph=True)
            ref += weights[i] * gi
        torch.testing.assert_close(g, ref, rtol=1e-10, atol=1e-12)


def test_tilted_stable_with_huge_losses() -> None:
    p = torch.linspace(0, 1e4, 16, dtype=torch.float32).requires_grad_(True)
    val = tilted_loss(p * 1.0, 1e-2)
    val.backward()
    assert math.isfinite(float(val.detach())) and torch.isfinite(p.grad).all()
    assert abs(float(val.detach()) - 1e4) <= 1e-2 * math.log(16) + 1.0


def test_rs_fragility_is_the_boundary() -> None:
    x = _u03(torch.float64)
    tau = float(x.mean()) + 0.3
    k = rs_fragility(x, tau)
    assert math.isclose(float(tilted_loss(x, k)), tau, rel_tol=1e-8)
    assert float(tilted_loss(x, 0.99 * k)) > tau
    assert rs_fragility(x, float(x.mean()) - 1e-3) == math.inf
    assert rs_fragility(x, float(x.max()) + 1.0, k_bounds=(1e-3, 1e3)) == 1e-3


def test_k_dynamics_monotone_and_bounded() -> None:
    irs = RobustSatisficingLoss(target=1.0, k_bounds=(1e-2, 1e2))
    ks = [irs.update(0.5) for _ in range(400)]  # J below tau: k falls to k_min
    assert all(b <= a for a, b in itertools.pairwise(ks)) and ks[-1] == 1e-2
    ks = [irs.update(2.0) for _ in range(2000)]  # J above tau: k rises to k_max
    assert all(b >= a for a, b in itertools.pairwise(ks[20:])) and ks[-1] == 1e2
    assert all(1e-2 <= k <= 1e2 for k in ks)
    assert irs.update(1e300) == 1e2 and irs.k == 1e2  # an exploding loss saturates k, never overflows
    assert irs.fragility == irs.k


def _quick_mlp(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))


def _train(irs: RobustSatisficingLoss | None, epochs: int, seed: int = 0, p_major: float = 0.5) -> tuple:
    from optarium.problems.distribution_shift import spurious_correlation

    d = spurious_correlation(seed, n_train=1000, n_test_per_group=250, p_major=p_major)
    model = _quick_mlp(seed)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    gen = torch.Generator().manual_seed(seed)
    x, y = d["train"].x, d["train"].y
    for _ in range(epochs):
        perm = torch.randperm(len(y), generator=gen)
        for i in range(0, len(y), 64):
            idx = perm[i : i + 64]
            losses = F.cross_entropy(model(x[idx]), y[idx], reduction="none")
            loss = irs(losses) if irs is not None else losses.mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            if irs is not None:
                irs.update(loss)
    with torch.no_grad():
        train_loss = float(F.cross_entropy(model(x), y))
        acc = float((model(d["test"].x).argmax(1) == d["test"].y).float().mean())
    return train_loss, acc


def test_infeasible_target_flagged() -> None:
    irs = RobustSatisficingLoss(target=1e-4, k_bounds=(1e-2, 1e3), infeasible_after=20)
    _train(irs, epochs=2)
    assert irs.k == 1e3 and irs.infeasible_target
    assert irs.state_dict()["infeasible_target"] is True


def test_no_shift_tight_target_equals_erm() -> None:
    erm_loss_final, erm_acc = _train(None, epochs=5)
    irs = RobustSatisficingLoss(target=(1 + 1e-3) * erm_loss_final)
    _, irs_acc = _train(irs, epochs=5)
    assert irs.k == irs.k_max
    assert abs(irs_acc - erm_acc) <= 0.01


def test_one_forward_one_backward_per_step() -> None:
    model = _quick_mlp(0)
    counts = {"fwd": 0, "bwd": 0}
    model.register_forward_hook(lambda *a: counts.__setitem__("fwd", counts["fwd"] + 1))
    model[0].register_full_backward_hook(lambda *a: counts.__setitem__("bwd", counts["bwd"] + 1))
    irs = RobustSatisficingLoss(target=0.5)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(32, 16, requires_grad=True), torch.randint(0, 2, (32,))
    for _ in range(3):
        loss = irs(F.cross_entropy(model(x), y, reduction="none"))
        opt.zero_grad()
        loss.backward()
        opt.step()
        irs.update(loss)
    assert counts == {"fwd": 3, "bwd": 3}


def test_state_dict_round_trip() -> None:
    a = RobustSatisficingLoss(target=0.4)
    for v in (0.3, 0.2, 0.5):
        a.update(v)
    b = RobustSatisficingLoss(target=1.0)
    b.load_state_dict(a.state_dict())
    assert a.update(0.1) == b.update(0.1) and a.J == b.J


def test_cvar_exact() -> None:
    x = torch.tensor([1.0, 5.0, 2.0, 4.0, 3.0], dtype=torch.float64)
    assert float(cvar_loss(x, 0.4)) == pytest.approx(4.5)
    assert float(cvar_loss(x, 0.3)) == pytest.approx((5 + 0.5 * 4) / 1.5)
    assert float(cvar_loss(x, 1.0)) == pytest.approx(3.0)
    assert float(erm_loss(x)) == pytest.approx(3.0)


def test_chi2_small_rho_closed_form_and_weights() -> None:
    x = 1.0 + 0.1 * torch.randn(50, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    x.requires_grad_(True)
    rho = 0.05
    val = chi2_dro_loss(x, rho)
    ref = x.mean() + math.sqrt(2 * rho) * x.std(unbiased=False)
    assert float(val.detach()) == pytest.approx(float(ref.detach()), rel=1e-9)
    (g,) = torch.autograd.grad(val, x)
    assert g.min() >= 0 and float(g.sum()) == pytest.approx(1.0, abs=1e-9)
    q = g.detach()  # the worst-case weights meet the chi^2 budget
    assert float(0.5 * ((50 * q - 1) ** 2).mean()) == pytest.approx(rho, rel=1e-6)


def test_chi2_primal_dual_certificate() -> None:
    """The autograd weights are a feasible primal q whose value equals the dual value: both are optimal."""
    from scipy.optimize import minimize_scalar

    x0 = _u03(torch.float64)
    for rho in (0.5, 2.0, 100.0):
        x = x0.clone().requires_grad_(True)
        val = chi2_dro_loss(x, rho)
        (q,) = torch.autograd.grad(val, x)
        assert q.min() >= 0 and float(q.sum()) == pytest.approx(1.0, abs=1e-12)
        assert float(0.5 * ((64 * q - 1) ** 2).mean()) <= rho * (1 + 1e-9)
        assert float((q * x0).sum()) == pytest.approx(float(val.detach()), rel=1e-12)
        c = math.sqrt(1 + 2 * rho)
        xs = x0.numpy()

        def dual(eta: float, c: float = c, xs=xs) -> float:  # type: ignore[no-untyped-def]
            r = (xs - eta).clip(min=0.0)
            return eta + c * math.sqrt((r * r).mean())

        ref = minimize_scalar(dual, bounds=(-10.0, 3.0), method="bounded", options={"xatol": 1e-10}).fun
        assert float(val.detach()) <= ref + 1e-12 and float(val.detach()) == pytest.approx(ref, rel=1e-7)


def test_group_dro_upweights_worst_group() -> None:
    gdro = GroupDROLoss(3, step_size=1.0)
    losses = torch.tensor([0.1, 0.1, 1.0, 1.0, 0.2], dtype=torch.float64)
    groups = torch.tensor([0, 0, 1, 1, 2])
    for _ in range(5):
        val = gdro(losses, groups)
    assert int(gdro.q.argmax()) == 1 and float(gdro.q.sum()) == pytest.approx(1.0)
    assert float(val.detach()) == pytest.approx(
        float((gdro.q * torch.tensor([0.1, 1.0, 0.2], dtype=torch.float64)).sum())
    )


def test_jtt_weights() -> None:
    w = jtt_weights(torch.tensor([True, False, True]), 20.0)
    assert w.tolist() == [20.0, 1.0, 20.0]


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: tilted_loss(torch.tensor(1.0), 1.0), "losses"),
        (lambda: tilted_loss(torch.ones(3), 0.0), "k"),
        (lambda: RobustSatisficingLoss(target=1.0, k_init=0.0), "k_init"),
        (lambda: RobustSatisficingLoss(target=1.0, k_bounds=(1.0, 1.0)), "k_bounds"),
        (lambda: RobustSatisficingLoss(target=math.inf), "target"),
        (lambda: RobustSatisficingLoss(target=1.0, divergence="w"), "divergence"),
        (lambda: cvar_loss(torch.ones(3), 0.0), "alpha"),
        (lambda: chi2_dro_loss(torch.ones(3), -1.0), "rho"),
        (lambda: GroupDROLoss(0), "n_groups"),
        (lambda: jtt_weights(torch.ones(3), 2.0), "misclassified"),
        (lambda: kl_fragility(torch.ones(3), math.nan), "target"),
        (lambda: kl_fragility(torch.ones(3), 1.0, torch.tensor([1.0, 0.0, 1.0])), "prior"),
        (lambda: kl_fragility(torch.ones(3), 1.0, k_bounds=(1.0, 0.5)), "k_bounds"),
        (lambda: IterativeRobustSatisficing(-1.0), "target"),
        (lambda: IterativeRobustSatisficing(1.0, tau_multiplier=0.5), "tau_multiplier"),
        (lambda: IterativeRobustSatisficing(1.0, scale="x"), "scale"),
        (lambda: IterativeRobustSatisficing(1.0)(torch.ones(3), torch.zeros(3, dtype=torch.long)), "groups"),
        (
            lambda: IterativeRobustSatisficing(1.0, prior=torch.ones(2))(
                torch.ones(3), torch.tensor([0, 1, 2])
            ),
            "groups",
        ),
    ],
)
def test_bad_input(call, name: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises((ValueError, TypeError)) as e:
        call()
    assert str(e.value).startswith(name)


# ---------------------------------------------------------------------------------------------------------
# The paper's IRS update (kl_fragility, IterativeRobustSatisficing).


def _ratio_sup(x: torch.Tensor, p: torch.Tensor, tau: float) -> tuple[float, float]:
    """Brute force of the paper's inner problem: max over a dense h grid of (E_h F - tau) / KL(P_h || p)."""
    hs = torch.logspace(-4, 3, 20001, dtype=torch.float64)
    logits = torch.log(p)[None, :] + hs[:, None] * x[None, :]
    P = torch.softmax(logits, 1)
    kl = (P * (torch.log(P.clamp_min(1e-300)) - torch.log(p)[None, :])).sum(1)
    ok = kl > 1e-10
    ratio = torch.where(ok, (P @ x - tau) / kl.clamp_min(1e-10), -math.inf)
    i = int(ratio.argmax())
    return float(ratio[i]), 1.0 / float(hs[i])


def test_kl_fragility_is_the_rs_boundary_and_the_ratio_supremum() -> None:
    x = _u03(torch.float64)
    for tau in (1.01 * float(x.mean()), float(x.mean()) + 0.3, float(x.max()) - 0.05):
        k, w = kl_fragility(x, tau, k_bounds=(1e-3, 1e3))
        assert k == pytest.approx(rs_fragility(x, tau, k_bounds=(1e-3, 1e3)), rel=1e-5)
        torch.testing.assert_close(w, torch.softmax(x / k, 0), rtol=1e-12, atol=1e-14)
        sup, k_at = _ratio_sup(x, torch.full_like(x, 1 / 64), tau)
        assert sup == pytest.approx(k, rel=1e-3) and k_at == pytest.approx(k, rel=1e-2)


def test_kl_fragility_with_a_group_prior_matches_the_ratio_supremum() -> None:
    f = torch.tensor([0.2, 0.25, 1.4, 0.9], dtype=torch.float64)
    p = torch.tensor([0.475, 0.475, 0.025, 0.025], dtype=torch.float64)
    tau = 1.1 * float(p @ f)
    k, w = kl_fragility(f, tau, p * 7.0)  # the prior need not be normalised
    sup, _ = _ratio_sup(f, p, tau)
    assert k == pytest.approx(sup, rel=1e-3)
    phi = k * math.log(float((p * torch.exp(f / k)).sum()))
    assert phi == pytest.approx(tau, rel=1e-7)  # on the RS boundary
    ref = p * torch.exp(f / k)
    torch.testing.assert_close(w, ref / ref.sum())
    assert float(w[2]) > float(p[2])  # the worst case moves mass to the high-loss minority group


def test_kl_fragility_edges() -> None:
    x = torch.tensor([0.1, 0.5, 2.0], dtype=torch.float64)
    k, w = kl_fragility(x, 2.5)  # the target holds under every shift: fragility 0, no tilt
    assert k == 0.0 and torch.allclose(w, torch.full((3,), 1 / 3, dtype=torch.float64))
    assert kl_fragility(x, float(x.mean()) + 1e-9, k_bounds=(0.1, 10.0))[0] == pytest.approx(10.0, rel=1e-12)
    assert kl_fragility(x, 2.0 - 1e-12, k_bounds=(0.1, 10.0))[0] == pytest.approx(0.1)  # clamped at k_min


def test_irs_group_loss_weights_groups_by_the_worst_case() -> None:
    gen = torch.Generator().manual_seed(3)
    w = torch.randn(5, 3, dtype=torch.float64, generator=gen, requires_grad=True)
    x = torch.randn(40, 5, dtype=torch.float64, generator=gen)
    y = torch.randint(0, 3, (40,), generator=gen)
    g = torch.randint(0, 4, (40,), generator=gen)
    g[g == 2] = 1  # group 2 absent from this batch
    prior = torch.tensor([0.4, 0.3, 0.2, 0.1], dtype=torch.float64)
    irs = IterativeRobustSatisficing(0.05, prior=prior)
    losses = F.cross_entropy(x @ w, y, reduction="none")
    loss = irs(losses, g)
    means = torch.stack([losses[g == a].mean() for a in (0, 1, 3)])
    p = prior[[0, 1, 3]] / prior[[0, 1, 3]].sum()
    ref_target = max(0.05, 1.01 * float(p @ means.detach()))
    assert irs.active_target == pytest.approx(ref_target, rel=1e-12)
    k_ref, _ = kl_fragility(means.detach(), ref_target, p, grid=64, rounds=1)
    assert irs.k == pytest.approx(k_ref, rel=1e-3)
    (grad,) = torch.autograd.grad(loss, w, retain_graph=True)
    wk = p * torch.exp(means.detach() / irs.k)
    (ref,) = torch.autograd.grad((wk / wk.sum() * means).sum(), w)
    torch.testing.assert_close(grad, ref, rtol=1e-10, atol=1e-12)  # Danskin: detached worst-case weights
    assert irs.fragility == irs.k and irs.state_dict()["steps"] == 1


def test_irs_sample_atoms_kl_scale_skip_and_single_group() -> None:
    losses = (
        3 * torch.rand(64, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    ).requires_grad_()
    irs = IterativeRobustSatisficing(0.0)
    loss = irs(losses)
    k = irs.k
    ref = torch.softmax(losses.detach() / k, 0)
    (g,) = torch.autograd.grad(loss, losses)
    torch.testing.assert_close(g, ref, rtol=1e-12, atol=1e-14)  # sum_i w_i grad l_i, w = softmax(l / k)
    assert k == pytest.approx(rs_fragility(losses, 1.01 * float(losses.detach().mean())), rel=1e-3)
    kl_irs = IterativeRobustSatisficing(0.0, scale="kl")
    (g2,) = torch.autograd.grad(kl_irs(losses), losses)
    kl = float((ref * torch.log(64 * ref)).sum())
    torch.testing.assert_close(g2, ref / kl, rtol=1e-3, atol=1e-12)
    skip = IterativeRobustSatisficing(10.0)  # the target is above every loss: fragility 0, no update
    out = skip(losses)
    assert float(out.detach()) == 0.0 and skip.k == 0.0 and skip.skipped == 1
    one = IterativeRobustSatisficing(0.0, prior=torch.ones(2))
    small = losses[:4]
    out = one(small, torch.zeros(4, dtype=torch.long)).detach()
    assert float(out) == pytest.approx(float(small.detach().mean()))


def test_irs_one_forward_one_backward_per_step() -> None:
    model = _quick_mlp(0)
    counts = {"fwd": 0, "bwd": 0}
    model.register_forward_hook(lambda *a: counts.__setitem__("fwd", counts["fwd"] + 1))
    model[0].register_full_backward_hook(lambda *a: counts.__setitem__("bwd", counts["bwd"] + 1))
    irs = IterativeRobustSatisficing(0.1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(32, 16, requires_grad=True), torch.randint(0, 2, (32,))
    for _ in range(3):
        loss = irs(F.cross_entropy(model(x), y, reduction="none"))
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert counts == {"fwd": 3, "bwd": 3}


def test_irs_without_shift_trains_like_erm() -> None:
    """No shift (a independent of y): the paper's IRS (sample atoms) matches ERM's accuracy to 3 points."""
    from optarium.problems.distribution_shift import spurious_correlation

    d = spurious_correlation(0, n_train=1000, n_test_per_group=250, p_major=0.5)
    x, y = d["train"].x, d["train"].y
    accs = []
    for irs in (None, IterativeRobustSatisficing(0.0)):
        model = _quick_mlp(0)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        gen = torch.Generator().manual_seed(0)
        for _ in range(5):
            perm = torch.randperm(len(y), generator=gen)
            for i in range(0, len(y), 64):
                idx = perm[i : i + 64]
                losses = F.cross_entropy(model(x[idx]), y[idx], reduction="none")
                loss = losses.mean() if irs is None else irs(losses)
                opt.zero_grad()
                loss.backward()
                opt.step()
        with torch.no_grad():
            accs.append(float((model(d["test"].x).argmax(1) == d["test"].y).float().mean()))
    assert abs(accs[1] - accs[0]) <= 0.03, accs  # measured 0.834 (ERM) vs 0.845 (IRS)
