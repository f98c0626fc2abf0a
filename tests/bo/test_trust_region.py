"""TuRBO trust region: counters, restarts, candidates inside the clipped region, RAASP, Latin hypercube."""

from __future__ import annotations

import math

import pytest
import torch

from optarium.bo.trust_region import TrustRegion, latin_hypercube, raasp_candidates, trust_region_bounds

DT = torch.float64


def _t(*v: float) -> torch.Tensor:
    return torch.tensor(v, dtype=DT)


def test_successes_double_failures_halve_and_restart() -> None:
    tr = TrustRegion(dim=10, batch_size=2)
    assert tr.failure_tolerance == math.ceil(max(4 / 2, 10 / 2)) == 5
    best = 0.0
    for _ in range(3):
        assert tr.length == 0.8
        best += 1.0
        assert tr.update(_t(best), _t(0.0, best - 1.0))
    assert tr.length == 1.6 and tr.success_count == 0
    for _ in range(3):
        best += 1.0
        tr.update(_t(best), _t(0.0, best - 1.0))
    assert tr.length == 1.6  # capped at length_max
    for _ in range(5):
        assert not tr.update(_t(0.0), _t(0.0, best))
    assert tr.length == 0.8 and tr.failure_count == 0
    # a success resets the failure counter
    for _ in range(4):
        tr.update(_t(0.0), _t(0.0, best))
    best += 1.0
    tr.update(_t(best), _t(0.0, best - 1.0))
    assert tr.failure_count == 0 and tr.length == 0.8
    while not tr.restart_needed:
        tr.update(_t(0.0), _t(0.0, best))
    assert tr.length < 0.5**7
    tr.reset()
    assert tr.length == 0.8 and not tr.restart_needed
    assert not tr.update(_t(1.0), _t())  # the initial design changes nothing


def test_success_rules_differ_under_an_offset() -> None:
    before = _t(1000.0, 1001.0)
    batch = _t(1001.5)
    assert TrustRegion(2, success_rule="range").is_success(batch, before)  # 1001 + 1e-3 * 1
    assert not TrustRegion(2, success_rule="abs_best").is_success(batch, before)  # 1001 + 1.001


def test_candidates_inside_the_clipped_region_with_a_perturbed_coordinate() -> None:
    g = torch.Generator().manual_seed(0)
    for d in (1, 5, 40):
        center = torch.rand(d, generator=g, dtype=DT)
        center[0] = 0.98  # near the edge: clipping matters
        lo, hi = trust_region_bounds(center, 0.4)
        assert (lo >= 0).all() and (hi <= 1).all() and hi[0] == 1.0
        for sobol in (True, False):
            c = raasp_candidates(center, lo, hi, 500, generator=g, sobol=sobol)
            assert c.shape == (500, d)
            assert ((c >= lo) & (c <= hi)).all()
            changed = (c != center).sum(-1)
            assert (changed >= 1).all()
            if d == 40:  # p = 20 / d = 0.5 per coordinate
                assert abs(changed.double().mean().item() - 20.0) < 1.0
    w = _t(2.0, 0.5)
    lo, hi = trust_region_bounds(_t(0.5, 0.5), 0.2, w)
    torch.testing.assert_close(hi - lo, _t(0.4, 0.1))


def test_latin_hypercube_has_one_point_per_stratum() -> None:
    x = latin_hypercube(16, 3, generator=torch.Generator().manual_seed(0))
    assert x.shape == (16, 3) and ((x >= 0) & (x < 1)).all()
    for j in range(3):
        assert sorted((x[:, j] * 16).floor().long().tolist()) == list(range(16))


def test_state_dict_round_trip_and_bad_input() -> None:
    tr = TrustRegion(3)
    tr.update(_t(5.0), _t(0.0, 1.0))
    other = TrustRegion(3)
    other.load_state_dict(tr.state_dict())
    assert other.state_dict() == tr.state_dict()
    with pytest.raises(ValueError, match=r"^success_rule"):
        TrustRegion(3, success_rule="x")
    with pytest.raises(ValueError, match=r"^length_init"):
        TrustRegion(3, length_init=2.0)
    with pytest.raises(ValueError, match=r"^dim"):
        TrustRegion(0)


def test_a_kept_sobol_engine_continues_one_sequence() -> None:
    center = torch.full((4,), 0.5, dtype=torch.float64)
    lo, hi = trust_region_bounds(center, 1.0)
    g = torch.Generator().manual_seed(0)
    ref = torch.quasirandom.SobolEngine(4, scramble=True, seed=7).draw(64, dtype=torch.float64)
    engine = torch.quasirandom.SobolEngine(4, scramble=True, seed=7)
    a = raasp_candidates(center, lo, hi, 32, generator=g, prob=1.0, engine=engine)
    b = raasp_candidates(center, lo, hi, 32, generator=g, prob=1.0, engine=engine)
    assert torch.equal(torch.cat([a, b]), ref)
    # fast_forward reproduces the continuation (what TurboStrategy.load_state_dict relies on)
    resumed = torch.quasirandom.SobolEngine(4, scramble=True, seed=7)
    resumed.fast_forward(32)
    assert torch.equal(resumed.draw(32, dtype=torch.float64), ref[32:])
    with pytest.raises(ValueError, match=r"^engine"):
        raasp_candidates(center, lo, hi, 8, engine=torch.quasirandom.SobolEngine(3, scramble=True, seed=0))
