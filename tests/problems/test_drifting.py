"""optarium.problems.drifting: the four drift generators, the realised drift and gradient variation."""

from __future__ import annotations

import math

import pytest
import torch

from optarium.problems.drifting import (
    DRIFTS,
    DriftingQuadratic,
    drift_path,
    drift_statistics,
    log_spaced_eigenvalues,
    rotation_path,
    switch_path,
)


@pytest.mark.parametrize("drift", DRIFTS)
def test_realisations_are_reproducible_and_scale_free(drift: str) -> None:
    p = DriftingQuadratic(dim=6, drift=drift, delta=0.1, noise_std=0.3, switch_every=5, seed=3)
    a, b = p.realise([0, 4], 20), p.realise([0, 4], 20)
    for name in ("theta0", "path", "noise", "offset"):
        assert torch.equal(getattr(a, name), getattr(b, name))
    # seed index 4 alone gives the same row as in the pair: one generator per seed
    c = p.realise([4], 20)
    assert torch.equal(c.path[0], a.path[1]) and torch.equal(c.noise[0], a.noise[1])
    # the streams do not depend on the scales (common random numbers)
    q = p.with_scales(delta=0.5, noise_std=0.0, init_std=2.0).realise([0, 4], 20)
    assert torch.equal(q.path, a.path) and torch.equal(q.noise, a.noise)
    torch.testing.assert_close(q.theta() - q.theta0.unsqueeze(1), 5 * (a.theta() - a.theta0.unsqueeze(1)))
    torch.testing.assert_close(q.x0(), q.theta0 + 2.0 * q.offset)
    other = DriftingQuadratic(dim=6, drift=drift, delta=0.1, switch_every=5, seed=4).realise([0], 20)
    assert not torch.equal(other.theta0[0], a.theta0[0])


def test_drift_statistics_report_the_realised_drift() -> None:
    lam = log_spaced_eigenvalues(5, 0.1, 1.0)
    g = torch.Generator().manual_seed(0)
    lin = drift_path("linear", 30, 5, g)
    delta_t, v_t = drift_statistics(0.2 * lin, lam)
    torch.testing.assert_close(delta_t, torch.full((30,), 0.2, dtype=torch.float64))  # constant velocity
    u = lin[1]
    assert float(v_t) == pytest.approx(30 * 0.2 * float(torch.linalg.vector_norm(lam * u)), rel=1e-12)
    # switch: jumps of norm 1 exactly at multiples of K, zero elsewhere
    sw = switch_path(50, 5, g, switch_every=10)
    d_sw, _ = drift_statistics(sw, lam)
    jumps = torch.nonzero(d_sw > 0).flatten().tolist()
    assert jumps == [9, 19, 29, 39, 49] and torch.allclose(d_sw[jumps], torch.ones(5, dtype=torch.float64))
    # rotation: chord 1 per step, on a circle (constant distance to the centre)
    omega = 2 * math.pi / 100
    rot = rotation_path(400, 5, g, omega=omega)
    d_rot, _ = drift_statistics(rot, lam)
    torch.testing.assert_close(d_rot, torch.ones(400, dtype=torch.float64))
    r = 1 / (2 * math.sin(omega / 2))
    centre = rot[:400].mean(0)  # four full periods
    radii = torch.linalg.vector_norm(rot - centre, dim=-1)
    assert float(radii.max() - radii.min()) < 1e-9 * r and float(radii.mean()) == pytest.approx(r, rel=1e-9)
    # random walk: E||step||^2 = 1 (1/sqrt(d) scaling)
    rw = drift_path("random_walk", 4000, 5, g)
    d_rw, _ = drift_statistics(rw, lam)
    assert float((d_rw**2).mean()) == pytest.approx(1.0, abs=0.05)


def test_problem_gradient_and_value() -> None:
    p = DriftingQuadratic(dim=4, mu=0.1, L=1.0, noise_std=0.5)
    lam = p.eigenvalues
    torch.testing.assert_close(lam, torch.logspace(-1, 0, 4, dtype=torch.float64))
    x, th, xi = (
        torch.ones(4, dtype=torch.float64),
        torch.zeros(4, dtype=torch.float64),
        torch.ones(4, dtype=torch.float64),
    )
    torch.testing.assert_close(p.grad(x, th, xi), lam + 0.5)
    assert float(p.value(x, th)) == pytest.approx(0.5 * float(lam.sum()))


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"mu": 0.0}, "mu"),
        ({"mu": -1.0}, "mu"),
        ({"mu": 2.0, "L": 1.0}, "mu"),
        ({"L": float("nan")}, "L"),
        ({"drift": "spiral"}, "drift"),
        ({"delta": -1.0}, "delta"),
        ({"noise_std": float("nan")}, "noise_std"),
        ({"switch_every": 0}, "switch_every"),
        ({"omega": 4.0}, "omega"),
        ({"dim": 0}, "dim"),
        ({"dim": 1, "drift": "rotation", "mu": 1.0}, "dim"),
    ],
)
def test_bad_input_names_the_argument(kwargs: dict[str, object], name: str) -> None:
    with pytest.raises((ValueError, TypeError), match=rf"^{name}"):
        DriftingQuadratic(**kwargs)  # type: ignore[arg-type]
