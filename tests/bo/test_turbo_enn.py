"""TuRBO-ENN loop: convergence, restarts, state round trips, determinism, signs, GP baseline, bad input."""

from __future__ import annotations

import math

import pytest
import torch

from optarium.bo.turbo_enn import RandomSearch, TurboENN, TurboGP, TurboZero

DT = torch.float64


def _box(d: int, lo: float = -5.0, hi: float = 5.0) -> torch.Tensor:
    return torch.tensor([[lo] * d, [hi] * d], dtype=DT)


def _run(opt, f, batches: int, q: int) -> None:
    for _ in range(batches):
        x = opt.ask(q)
        opt.tell(x, f(x))


@pytest.mark.parametrize(("acquisition", "fit"), [("pareto", False), ("ucb", True), ("ucb", False)])
def test_shifted_sphere_5d_converges(acquisition: str, fit: bool) -> None:
    """Spec test 9: within 5e-2 of the optimum in >= 4 of 5 fixed seeds (q = 5, 400 evaluations); the
    fitted UCB and the non-dominated sort of the spec, and the unfitted UCB (the default)."""
    hits = 0
    for s in range(5):
        shift = torch.rand(5, generator=torch.Generator().manual_seed(100 + s), dtype=DT) * 4 - 2
        opt = TurboENN(_box(5), batch_size=5, acquisition=acquisition, fit=fit, seed=s)
        _run(opt, lambda x, shift=shift: ((x - shift) ** 2).sum(-1), 80, 5)
        hits += opt.best_y <= 5e-2
        assert len(opt.Y) == 400
    assert hits >= 4


@pytest.mark.slow
def test_surrogate_matters_on_ackley_10d() -> None:
    from optarium.bo.problems import make_problem

    prob = make_problem("ackley", 10, bounds=(-5.0, 10.0))

    def median_best(cls, **kw) -> float:
        vals = []
        for s in range(3):
            opt = cls(prob.bounds, batch_size=10, seed=s, **kw)
            _run(opt, prob, 60, 10)
            vals.append(opt.best_y)
        return sorted(vals)[1]

    zero = median_best(TurboZero)
    assert median_best(TurboENN, acquisition="ucb", fit=True) < zero
    assert median_best(TurboENN, acquisition="pareto") < zero
    assert median_best(TurboENN) < zero


def test_state_dict_round_trip_continues_identically() -> None:
    f = lambda x: (x**2).sum(-1)  # noqa: E731
    a = TurboENN(_box(3), batch_size=4, seed=3, num_candidates=300)
    _run(a, f, 8, 4)
    b = TurboENN(_box(3), batch_size=4, seed=99, num_candidates=300)
    b.load_state_dict(a.state_dict())
    for _ in range(4):
        xa, xb = a.ask(4), b.ask(4)
        assert torch.equal(xa, xb)
        a.tell(xa, f(xa))
        b.tell(xb, f(xb))
    assert a.trust_region_length == b.trust_region_length and a.params == b.params


def test_same_seed_same_run_and_maximize_mirrors_minimize() -> None:
    f = lambda x: ((x - 1) ** 2).sum(-1)  # noqa: E731
    runs = []
    for minimize in (True, True, False):
        opt = TurboENN(_box(2), batch_size=3, seed=7, minimize=minimize, num_candidates=200)
        xs = []
        for _ in range(6):
            x = opt.ask(3)
            xs.append(x)
            opt.tell(x, f(x) if minimize else -f(x))
        runs.append(torch.cat(xs))
    assert torch.equal(runs[0], runs[1])
    assert torch.equal(runs[0], runs[2])


def test_restart_drops_the_tr_data_and_keeps_the_global_best() -> None:
    opt = TurboENN(_box(2), batch_size=2, seed=0, num_candidates=100, num_init=4)
    f = lambda x: (x**2).sum(-1)  # noqa: E731
    _run(opt, f, 2, 2)
    best = opt.best_y
    flat = lambda x: torch.full((x.shape[0],), 100.0, dtype=DT)  # noqa: E731  never improves
    for _ in range(40):
        x = opt.ask(2)  # the restart happens when the failed batch is processed, at this ask
        if opt.n_restarts:
            break
        opt.tell(x, flat(x))
    assert opt.n_restarts == 1 and opt.trust_region_length == 0.8
    assert opt._tr_start == len(opt.Y) and opt.best_y == best
    assert opt._queue.shape[0] == 2  # a fresh design of 4 is queued; 2 were just handed out


def test_keep_restart_keeps_data_and_incumbent_and_skips_one_batch() -> None:
    """``restart="keep"`` (ennbo's engine): the data stay in the surrogate, no new design is queued, the
    trust region is recentred on the global incumbent at L_init, and the first batch after the restart only
    resets the reference (the length stays L_init through it), as in ennbo's ``TurboTrustRegion``."""
    opt = TurboENN(_box(2), batch_size=2, seed=0, num_candidates=100, num_init=4, restart="keep")
    f = lambda x: (x**2).sum(-1)  # noqa: E731
    _run(opt, f, 2, 2)
    best, best_x = opt.best_y, opt.best_x
    flat = lambda x: torch.full((x.shape[0],), 100.0, dtype=DT)  # noqa: E731  never improves
    for _ in range(40):
        x = opt.ask(2)
        if opt.n_restarts:
            break
        opt.tell(x, flat(x))
    assert opt.n_restarts == 1 and opt.trust_region_length == 0.8
    assert opt._tr_start == 0 and opt._queue.shape[0] == 0 and opt.best_y == best
    assert opt._enn is not None and opt._enn.n == len(opt.Y)  # the surrogate kept every observation
    # the batch just proposed lies in the cube of side 0.8 (unit) around the incumbent
    half = 0.4 * (opt.bounds[1] - opt.bounds[0])
    assert ((x - best_x).abs() <= half + 1e-12).all()
    state = opt.state_dict()
    assert state["establish"] is True
    opt.tell(x, flat(x))
    opt.ask(2)  # the batch after the restart: no failure counted
    assert opt.trust_region_length == 0.8 and opt.trust_region.failure_count == 0
    # a reloaded copy skips the same batch
    twin = TurboENN(_box(2), batch_size=2, seed=5, num_candidates=100, num_init=4, restart="keep")
    twin.load_state_dict(state)
    twin.tell(x, flat(x))
    twin.ask(2)
    assert twin.trust_region.failure_count == 0 and twin.trust_region_length == 0.8
    with pytest.raises(ValueError, match=r"^restart"):
        TurboENN(_box(2), restart="never")


def test_any_batch_size_per_ask_and_timings() -> None:
    opt = TurboENN(_box(4), batch_size=4, seed=1, num_candidates=200)
    f = lambda x: x.abs().sum(-1)  # noqa: E731
    for q in (3, 5, 1, 4, 7, 2):
        x = opt.ask(q)
        assert x.shape == (q, 4)
        opt.tell(x, f(x))
    assert len(opt.timings["fit"]) == len(opt.timings["acquisition"]) >= 2
    # one point told at a time is processed as one batch at the next ask
    x = opt.ask(4)
    for i in range(4):
        opt.tell(x[i : i + 1], f(x[i : i + 1]))
    opt.ask(1)
    assert opt._processed == len(opt.Y)


def test_turbo_zero_and_random_search_run() -> None:
    for opt in (TurboZero(_box(3), batch_size=2, seed=0), RandomSearch(_box(3), seed=0)):
        _run(opt, lambda x: (x**2).sum(-1), 5, 2)
        assert len(opt.Y) == 10 and opt.best_y < 75


def test_turbo_gp_runs_with_ard_trust_region() -> None:
    pytest.importorskip("botorch", reason="the GP baseline needs BoTorch")
    opt = TurboGP(_box(3), batch_size=3, seed=0, gp_maxiter=5, num_candidates=100, num_init=6)
    _run(opt, lambda x: (x**2).sum(-1), 4, 3)
    w = opt._tr_weights()
    assert w is not None and w.shape == (3,)
    assert math.isclose(float(torch.prod(w)), 1.0, rel_tol=1e-9)
    assert len(opt.timings["fit"]) == 2 and opt.best_y < 75  # 2 batches of design, then 2 GP proposals


def test_bad_input() -> None:
    opt = TurboENN(_box(2), seed=0)
    with pytest.raises(ValueError, match=r"^y"):
        opt.tell(torch.zeros(1, 2, dtype=DT), torch.tensor([math.nan], dtype=DT))
    with pytest.raises(ValueError, match=r"^x"):
        opt.tell(torch.tensor([[math.inf, 0.0]], dtype=DT), torch.zeros(1, dtype=DT))
    with pytest.raises(ValueError, match=r"^x"):
        opt.tell(torch.tensor([[9.0, 0.0]], dtype=DT), torch.zeros(1, dtype=DT))
    with pytest.raises(ValueError, match=r"^bounds"):
        TurboENN(torch.tensor([[1.0, 0.0], [1.0, 1.0]], dtype=DT))
    with pytest.raises(ValueError, match=r"^k"):
        TurboENN(_box(2), k=0)
    with pytest.raises(ValueError, match=r"^acquisition"):
        TurboENN(_box(2), acquisition="ei")
    with pytest.raises(ValueError, match=r"^seed"):
        TurboENN(_box(2), seed=1, generator=torch.Generator())
    with pytest.raises(ValueError, match=r"^n"):
        opt.ask(0)
