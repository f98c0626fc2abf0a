"""Anytime COCO (arXiv:2510.22579) and its baselines: falsifiable checks from the spec (anytime-coco.md)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from optarium.online import Ball, OnlineGradientDescent
from optarium.online.anytime_coco import (
    AnytimeCOCO,
    ConstraintAgnosticOGD,
    DoublingTrick,
    Simplex,
    SinhaVazeCOCO,
    VirtualQueueOGD,
    project_simplex,
)
from optarium.online.shortest_path import ShortestPathInstance, best_fixed_feasible, layered_dag


def _x0(d: int) -> torch.Tensor:
    return torch.full((d,), 1.0 / d, dtype=torch.float64)


def _linear_problem(seed: int, T: int, d: int = 4, budget: float = 0.5):
    rng = np.random.default_rng(seed)
    C, E = rng.random((T, d)), rng.random((T, d))
    return C - C.mean(1, keepdims=True), E - E.mean(1, keepdims=True), E.mean(1) - budget


# ------------------------------------------------------------------------------------------ the simplex
def _bisection_projection(v: np.ndarray) -> np.ndarray:
    lo, hi = v.min() - 1.0, v.max()
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if np.maximum(v - mid, 0.0).sum() > 1.0:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-14:
            break
    return np.maximum(v - 0.5 * (lo + hi), 0.0)


@pytest.mark.parametrize("d", [1, 4, 81, 200])
def test_simplex_projection_matches_bisection_and_kkt(seed: int, d: int) -> None:
    rng = np.random.default_rng(seed)
    V = 3.0 * rng.standard_normal((20, d))
    batched = project_simplex(V)
    torch_batched = project_simplex(torch.from_numpy(V)).numpy()
    for v, x, xt in zip(V, batched, torch_batched, strict=True):
        ref = _bisection_projection(v)
        one = project_simplex(v)  # the per-round (short-loop) path for d <= 32
        assert np.abs(one - ref).max() < 1e-10 and np.abs(x - ref).max() < 1e-10
        assert np.abs(xt - ref).max() < 1e-10
        assert (one >= 0).all() and abs(one.sum() - 1.0) < 1e-12
        support = one > 0
        shift = v[support] - one[support]  # KKT: v_i - x_i = theta on the support, v_i <= theta off it
        assert np.ptp(shift) < 1e-12 and (v[~support] <= shift[0] + 1e-12).all()


# ------------------------------------------------------------------------------------ queue invariants
def test_queue_invariants_and_monotone_lyapunov() -> None:
    F, Gm, off = _linear_problem(0, 3000)
    lrn = AnytimeCOCO(_x0(4), Simplex(), lipschitz=1.0)
    X = lrn.play_linear(F, Gm, off)
    h = lrn.history
    viol = np.maximum((Gm * X).sum(1) + off, 0.0)
    assert np.allclose(h.metrics["violation"], viol, rtol=0, atol=1e-15)
    gt = lrn.beta * viol
    lam = 0.5 / np.sqrt(np.arange(1, 3001))
    Q, lamQ = np.array(h.metrics["Q"]), np.array(h.metrics["lamQ"])
    assert viol.sum() > 10  # the constraint is violated: the invariants are not trivial
    assert (Q >= np.cumsum(gt) * (1 - 1e-12)).all()
    assert np.allclose(lamQ, np.cumsum(lam * gt), rtol=1e-12, atol=0)
    phi = np.expm1(lamQ)
    assert (np.diff(phi) >= -1e-12 * phi[1:]).all()
    assert lrn.history.last("ccv") == pytest.approx(viol.sum())


def test_always_feasible_constraint_reduces_to_adagrad_ogd() -> None:
    thetas = torch.randn(200, 3, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    x0 = torch.zeros(3, dtype=torch.float64)
    ours = AnytimeCOCO(x0, Ball(1.0), lipschitz=3.0)
    ref = OnlineGradientDescent(x0, Ball(1.0))
    for th in thetas:
        assert torch.allclose(ours.predict(), ref.predict(), rtol=0, atol=1e-12)
        ours.update(lambda x, th=th: (th * x).sum(), lambda x: x.sum() * 0.0 - 1.0)
        ref.update(lambda x, th=th: (th * x).sum())
    assert ours.Q == 0.0 and ref.predict().norm() > 0.5


def test_constant_schedule_is_sinha_vaze_and_fast_path_equals_update() -> None:
    F, Gm, off = _linear_problem(1, 1500)
    sv = SinhaVazeCOCO(_x0(4), Simplex(), lipschitz=1.0, horizon=1500)
    const = AnytimeCOCO(_x0(4), Simplex(), lipschitz=1.0, lam_schedule=lambda t: 0.5 / math.sqrt(1500))
    anytime = AnytimeCOCO(_x0(4), Simplex(), lipschitz=1.0)
    Xs, Xc = sv.play_linear(F, Gm, off), const.play_linear(F, Gm, off)
    assert np.array_equal(Xs, Xc)
    assert sv.Q == pytest.approx(sum(sv.beta * np.maximum((Gm * Xs).sum(1) + off, 0)), rel=1e-12)
    slow = AnytimeCOCO(_x0(4), Simplex(), lipschitz=1.0)
    closures = AnytimeCOCO(_x0(4), Simplex(), lipschitz=1.0)
    Xa = anytime.play_linear(F, Gm, off)
    for i in range(300):  # the per-round paths (numpy gradients; autograd closures) equal the fast path
        x = slow.predict_array()
        assert np.array_equal(x, Xa[i])
        slow.update_gradients(F[i], float(Gm[i] @ x) + off[i], Gm[i])
        assert np.allclose(closures.predict_array(), Xa[i], rtol=0, atol=1e-9)
        a, b, c = (torch.from_numpy(v) for v in (F[i], Gm[i], off[i : i + 1]))
        closures.update(lambda z, a=a: (a * z).sum(), lambda z, b=b, c=c: (b * z).sum() + c[0])
    assert not np.allclose(Xs[-1], Xa[-1])  # the anytime schedule is not the known-T one


def test_state_dict_round_trip_and_determinism() -> None:
    F, Gm, off = _linear_problem(2, 800)
    a = AnytimeCOCO(_x0(4), Simplex(), lipschitz=1.0)
    a.play_linear(F[:400], Gm[:400], off[:400])
    b = AnytimeCOCO(_x0(4), Simplex(), lipschitz=1.0)
    b.load_state_dict(a.state_dict())
    assert np.array_equal(
        a.play_linear(F[400:], Gm[400:], off[400:]), b.play_linear(F[400:], Gm[400:], off[400:])
    )
    c = AnytimeCOCO(_x0(4), Simplex(), lipschitz=1.0)
    c.play_linear(F, Gm, off)
    assert np.array_equal(c.predict_array(), a.predict_array())
    p = VirtualQueueOGD(_x0(4), Simplex(), lipschitz=1.0)
    p.play_linear(F[:400], Gm[:400], off[:400])
    q = VirtualQueueOGD(_x0(4), Simplex(), lipschitz=1.0)
    q.load_state_dict(p.state_dict())
    assert np.array_equal(
        p.play_linear(F[400:], Gm[400:], off[400:]), q.play_linear(F[400:], Gm[400:], off[400:])
    )


def test_doubling_trick_restarts_fresh_known_horizon_learners() -> None:
    F, Gm, off = _linear_problem(3, 40)
    made: list[int] = []

    def factory(x: torch.Tensor, h: int) -> SinhaVazeCOCO:
        made.append(h)
        return SinhaVazeCOCO(x, Simplex(), lipschitz=1.0, horizon=h)

    dbl = DoublingTrick(factory, _x0(4))
    X = dbl.play_linear(F, Gm, off)
    assert dbl.restarts == [1, 2, 4, 8, 16, 32] and made == [1, 2, 4, 8, 16, 32]
    for start in (8, 16, 32):  # each epoch replays a fresh learner with horizon = its length
        ref = SinhaVazeCOCO(_x0(4), Simplex(), lipschitz=1.0, horizon=start)
        end = min(2 * start - 1, 40)
        Xr = ref.play_linear(F[start - 1 : end], Gm[start - 1 : end], off[start - 1 : end])
        assert np.array_equal(Xr, X[start - 1 : end])


def test_virtual_queue_update_rule() -> None:
    F, Gm, off = _linear_problem(4, 50)
    p = VirtualQueueOGD(_x0(4), Simplex(), lipschitz=2.0)
    X = p.play_linear(F, Gm, off)
    beta, x, Z = 1.0 / (2 * 2.0 * math.sqrt(2)), _x0(4).numpy(), 0.0
    for t in range(1, 51):
        assert np.allclose(X[t - 1], x, atol=1e-14)
        g = beta * Gm[t - 1]
        gv = beta * (Gm[t - 1] @ x + off[t - 1])
        x_new = project_simplex(x - (math.sqrt(t) * beta * F[t - 1] + Z * g) / (2 * t))
        Z = max(Z + gv + g @ (x_new - x), 0.0)
        x = x_new
    assert p.Z == pytest.approx(Z, rel=1e-12) and Z > 0


def test_constraint_agnostic_control_ignores_the_constraint() -> None:
    F, Gm, off = _linear_problem(5, 300)
    ctl = ConstraintAgnosticOGD(_x0(4), Simplex(), lipschitz=1.0)
    Xc = ctl.play_linear(F, Gm, off)
    free = AnytimeCOCO(_x0(4), Simplex(), lipschitz=1.0)
    assert np.array_equal(Xc, free.play_linear(F))
    assert ctl.Q == 0.0 and sum(ctl.history.metrics["violation"]) > 0


# ------------------------------------------------------------------------------------ on the instances
def _play(
    method: str, inst: ShortestPathInstance, T: int, horizon: int | None = None
) -> tuple[np.ndarray, ...]:
    chunks = list(inst.chunks(T))
    C = np.concatenate([c for c, _ in chunks])
    E = np.concatenate([e for _, e in chunks])
    M = np.concatenate([C, E])
    G = float(np.sqrt(((M - M.mean(1, keepdims=True)) ** 2).sum(1)).max())
    x0 = _x0(inst.n_paths)
    if method == "anytime":
        lrn = AnytimeCOCO(x0, Simplex(), lipschitz=G, record=False)
    else:
        lrn = SinhaVazeCOCO(x0, Simplex(), lipschitz=G, horizon=horizon or T, record=False)
    X = lrn.play_linear(C - C.mean(1, keepdims=True), E - E.mean(1, keepdims=True), E.mean(1) - inst.budget)
    return C, E, X, G


def test_regret_instance_sublinear_regret_and_flat_ccv() -> None:
    inst = ShortestPathInstance("regret", 0)
    T = 20_000
    C, E, X, G = _play("anytime", inst, T)
    cost = np.cumsum((C * X).sum(1))
    ccv = np.cumsum(np.maximum((E * X).sum(1) - inst.budget, 0.0))
    cum = np.cumsum(C, 0)
    regret = {}
    for t in (100, 300, 1000, 3000, 10_000, 20_000):
        best, _, _ = best_fixed_feasible(inst, cum[t - 1], t)
        regret[t] = cost[t - 1] - best
    assert regret[10_000] > 0  # the bound is not vacuous: the green path is cheaper than what was played
    c0 = 2 * max(max(regret[t], 0) / math.sqrt(t) for t in (100, 300, 1000)) + G * math.sqrt(2)
    assert all(regret[t] <= c0 * math.sqrt(t) for t in regret), (regret, c0)
    if ccv[1999] > 0:
        slope = math.log(ccv[-1] / ccv[1999]) / math.log(10)
        assert slope <= 0.6, slope
    else:
        assert ccv[-1] == 0.0


def test_known_horizon_oracle_violates_more_early_on_the_binding_instance() -> None:
    worse = []
    for seed in range(3):
        inst = ShortestPathInstance("binding", seed)
        out = {}
        for m in ("anytime", "known-T"):
            _, E, X, _ = _play(m, inst, 10_000, horizon=100_000)
            out[m] = np.maximum((E * X).sum(1) - inst.budget, 0.0).sum()
        worse.append(out["known-T"] > out["anytime"])
    assert all(worse)


def test_no_overflow_past_the_exponent_cap() -> None:
    T = 20_000
    F = np.tile([1.0, -1.0], (T, 1))
    Gm = np.tile([-1.0, 1.0], (T, 1))  # the cost pulls to vertex 2, the constraint (always violated) to 1
    off = np.full(T, 2.0)
    lrn = AnytimeCOCO(_x0(2), Simplex(), lipschitz=2.0, lam_schedule=lambda t: 50.0 / math.sqrt(t))
    lrn.play_linear(F, Gm, off)
    lamq = np.array(lrn.history.metrics["lamQ"])
    pen = np.array(lrn.history.metrics["penalty"])
    assert lamq.max() > 700 and lrn.exp_cap == 300.0  # far past the cap
    assert (
        np.isfinite(pen).all()
        and np.isfinite(lrn.x).all()
        and pen.max() == pytest.approx(lrn.history.metrics["lam"][int(np.argmax(pen))] * math.exp(300.0))
    )
    assert np.isfinite(lrn.history.metrics["step_size"]).all()


def test_best_fixed_feasible_matches_the_full_lp() -> None:
    from scipy.optimize import linprog

    inst = ShortestPathInstance("binding", 1, chunk=500)
    t = 1700
    chunks = list(inst.chunks(t))
    C = np.concatenate([c for c, _ in chunks])
    E = np.concatenate([e for _, e in chunks])
    val, x, n_lp = best_fixed_feasible(inst, C.sum(0), t)
    ref = linprog(C.sum(0), A_ub=E, b_ub=np.full(t, inst.budget), A_eq=np.ones((1, 4)), b_eq=[1.0])
    assert val == pytest.approx(ref.fun, rel=1e-9, abs=1e-9) and (E @ x <= inst.budget + 1e-9).all()
    assert n_lp >= 1
    A = layered_dag(2, 2)
    assert A.shape == (4, 8) and (A.sum(1) == 3).all()
    assert layered_dag(4, 3).shape == (81, 33)


# ------------------------------------------------------------------------------------------- bad input
def test_bad_input_raises_naming_the_argument() -> None:
    x0 = _x0(4)
    with pytest.raises(ValueError, match=r"^lipschitz"):
        AnytimeCOCO(x0, Simplex(), lipschitz=0.0)
    with pytest.raises(ValueError, match=r"^diameter"):
        AnytimeCOCO(x0, Simplex(), lipschitz=1.0, diameter=-1.0)
    with pytest.raises(TypeError, match=r"^domain"):
        AnytimeCOCO(x0, project_simplex, lipschitz=1.0)
    with pytest.raises(TypeError, match=r"^lam_schedule"):
        AnytimeCOCO(x0, Simplex(), lipschitz=1.0, lam_schedule=0.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^lam_schedule"):
        AnytimeCOCO(x0, Simplex(), lipschitz=1.0, lam_schedule=lambda t: 0.0)
    lrn = AnytimeCOCO(x0, Simplex(), lipschitz=1.0, lam_schedule=lambda t: 0.1 * t)
    lrn.update_gradients(np.ones(4), -1.0, np.ones(4))  # t = 1: lambda_0 := lambda_1
    with pytest.raises(ValueError, match=r"^lam_schedule: must be non-increasing"):
        lrn.update_gradients(np.ones(4), -1.0, np.ones(4))
    with pytest.raises(ValueError, match=r"^exp_cap"):
        AnytimeCOCO(x0, Simplex(), lipschitz=1.0, exp_cap=700.0)
    with pytest.raises(ValueError, match=r"^f_grad"):
        AnytimeCOCO(x0, Simplex(), lipschitz=1.0).update_gradients(np.ones(3))
    with pytest.raises(ValueError, match=r"^g_value"):
        AnytimeCOCO(x0, Simplex(), lipschitz=1.0).update_gradients(np.ones(4), math.nan, np.ones(4))
    with pytest.raises(ValueError, match=r"^horizon"):
        SinhaVazeCOCO(x0, Simplex(), lipschitz=1.0, horizon=0)
    with pytest.raises(TypeError, match=r"^factory"):
        DoublingTrick(3, x0)  # type: ignore[arg-type]
