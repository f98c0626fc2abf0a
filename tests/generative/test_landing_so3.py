"""SO(3) for the landing samplers (spec constrained-diffusion-landing.md, optional manifold): constraint
geometry, Newton vs polar projection, orientation, exact data / score / metric, and sampling known laws."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from scipy import stats

from optarium.generative.landing import Constraints, LandingDiffusion, NoiseSchedule
from optarium.generative.landing_so3 import (
    MatrixFisherScore,
    haar_angle_cdf,
    haar_rotations,
    matrix_fisher_angle_cdf,
    matrix_fisher_sample,
    rotation_angle,
    rotation_mmd,
    so3_constraints,
    so3_exp,
    so3_project_svd,
    so3_tangent,
    triad_centres,
)

D64 = torch.float64


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _ks_crit(n: int) -> float:
    """The one-sample KS critical value at level 0.01 (asymptotic): the stated tolerance of the law tests."""
    return 1.628 / math.sqrt(n)


def _near_set(n: int, eps: float, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotations R and Y = R (I + eps S), S symmetric with spectral norm 1 (a normal perturbation; Y's
    singular values lie in [1 - eps, 1 + eps]): (R, Y) as (n, 9)."""
    R = haar_rotations(n, generator=_gen(seed))
    A = torch.randn(n, 3, 3, dtype=D64, generator=_gen(seed + 1))
    S = (A + A.transpose(-1, -2)) / 2
    S = S / torch.linalg.matrix_norm(S, ord=2).reshape(n, 1, 1)
    Y = R.reshape(n, 3, 3) @ (torch.eye(3, dtype=D64) + eps * S)
    return R, Y.reshape(n, 9)


def _singular_values(x: torch.Tensor) -> torch.Tensor:
    return torch.linalg.svdvals(x.reshape(-1, 3, 3))


@pytest.mark.parametrize("reg", [1e-6, 0.0])
def test_tangent_projection_matches_closed_form(reg: float) -> None:
    C = so3_constraints(reg=reg)
    assert (C.dim, C.m, C.l) == (9, 6, 0)
    R = haar_rotations(100, generator=_gen(0))
    V = torch.randn(100, 9, dtype=D64, generator=_gen(1))
    PV = C.tangent(R, V)
    ref = so3_tangent(R, V)  # R skew(R^T V)
    # the Gram matrix of the 6 rows has eigenvalues 2 and 4 at a rotation, so the regulariser's error is
    # <= 1e-6 / 2 of |J V|
    tol = 1e-12 if reg == 0 else 3e-6 * float(V.norm(dim=-1).max())
    assert (PV - ref).abs().max() <= tol
    _, J = C.jacobian(R)
    assert (J @ PV.unsqueeze(-1)).abs().max() <= tol * 10  # tangent: J P v = 0
    assert torch.allclose(C.tangent(R, PV), PV, atol=tol * 10)  # idempotent


def test_landing_keeps_polar_factor_and_contracts() -> None:
    """With only the landing term: implicit step maps singular values p -> (p^2 + 1) / (2p) (quadratic),
    explicit with rate c maps p -> p - c (p^2 - 1) / (2p), so |R^T R - I| contracts by 1 - c per step."""
    C = so3_constraints(reg=0.0)
    R, Y = _near_set(20, 0.1, 2)
    polar = so3_project_svd(Y)
    assert torch.allclose(polar, R, atol=1e-12)  # Y = R (I + eps S): the polar factor is R
    p = _singular_values(Y)
    y1 = Y - C.landing_direction(Y, 0.1)
    assert torch.allclose(_singular_values(y1), ((p * p + 1) / (2 * p)).sort(-1, descending=True).values)
    assert torch.allclose(so3_project_svd(y1), R, atol=1e-12)  # the step moves along the normal space
    model = LandingDiffusion(so3_constraints(), NoiseSchedule(1.0, 1.0, 0.005, 1), "OLLA", alpha=100.0,
                             landing="explicit")  # fmt: skip
    c = model.alpha * model.sched.dt
    assert c == pytest.approx(0.5)
    x, zero = Y.clone(), torch.zeros_like(Y)
    stats_ = {"newton_iters": 0.0, "nfe": 0.0}
    err = [float(C.values(x)[0].norm(dim=-1).max())]
    for _ in range(20):
        q = _singular_values(x)
        x, _ = model.correct(x, zero, c, stats_)
        want = q - c * (q * q - 1) / (2 * q) / (1 + 1e-6 / 2)  # Gram regulariser (eigenvalues 2, 4) ~ 1e-6
        assert torch.allclose(
            _singular_values(x), want, rtol=0, atol=1e-6 * float((q - 1).abs().max()) + 1e-15
        )
        err.append(float(C.values(x)[0].norm(dim=-1).max()))
    ratios = [b / a for a, b in itertools.pairwise(err)]
    assert all(0.4 < r < 0.6 for r in ratios), ratios  # geometric decay at ~1 - c
    assert abs(ratios[-1] - 0.5) < 1e-3 and err[-1] < 1e-5 * err[0]
    assert torch.allclose(so3_project_svd(x), R, atol=1e-12)  # landing never rotates the point


def test_newton_projection_agrees_with_polar() -> None:
    _, Y = _near_set(200, 0.5, 3)
    Y = Y + 0.05 * torch.randn(200, 9, dtype=D64, generator=_gen(4))  # also tangent offsets
    assert (torch.linalg.det(Y.reshape(-1, 3, 3)) > 0).all()
    # with the 1e-6 Gram regulariser the Gauss-Newton step is a Tikhonov step in the basis of the 6 rows,
    # which leaves an O(1e-7) tangential drift; without it the iterates keep the polar factor exactly
    for reg, tol, atol in ((1e-6, 1e-6, 1e-5), (1e-6, 1e-11, 1e-6), (0.0, 1e-11, 1e-10)):
        C = so3_constraints(reg=reg)
        x, ok, iters = C.project(Y, tol=tol)
        assert ok.all() and iters <= 8 * 200  # Newton for 1 on the singular values: few iterations
        assert (x - so3_project_svd(Y)).abs().max() <= atol
        assert (C.violation(x) <= tol).all()


def test_wrong_component_is_counted_and_dropped() -> None:
    R = haar_rotations(30, generator=_gen(5))
    flip = torch.zeros(30, dtype=torch.bool)
    flip[::3] = True
    prior = torch.where(flip.unsqueeze(-1), -R, R)  # -R: det -1, on O(3) \ SO(3) (h = 0 holds)
    C = so3_constraints()
    assert C.violation(prior).max() < 1e-12 and C.off_component(prior).tolist() == flip.tolist()
    model = LandingDiffusion(C, NoiseSchedule(0.5, 0.5, 0.1, 5), "OLLA")
    res = model.sample(prior=prior, generator=_gen(6), reverse=False)
    assert res.extras["wrong_component"] == 10 and res.extras["dropped"] == 10 and res.x.shape[0] == 20
    assert (torch.linalg.det(res.x.reshape(-1, 3, 3)) > 0).all()
    with pytest.raises(TypeError, match=r"^component"):
        Constraints(9, h=C.h, component=1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^component"):
        Constraints(9, h=C.h, component=lambda x: torch.linalg.det(x.reshape(-1, 3, 3)))  # not bool


@pytest.mark.parametrize("sampler", ["OLLA", "OLLA-P", "ULLA", "ULLA-P"])
def test_samplers_feasible_and_keep_orientation(sampler: str) -> None:
    M = triad_centres()
    net = MatrixFisherScore(M, 8.0, sign=1.0 if sampler.startswith("O") else -1.0)
    model = LandingDiffusion(so3_constraints(), NoiseSchedule(1.0, 1.0, 1.0, 20), sampler, gamma=2.0, net=net)
    res = model.sample(prior=haar_rotations(200, generator=_gen(7)), generator=_gen(8))
    assert res.extras["dropped"] == 0 and res.extras["wrong_component"] == 0 and res.x.shape[0] == 200
    assert float(res.value) <= 1e-5  # after the terminal projection (or every projection)
    path_tol = 1e-5 if sampler.endswith("-P") else 0.05  # landing: one Gauss-Newton step per step
    assert res.extras["max_violation_path"] <= path_tol
    det = torch.linalg.det(res.x.reshape(-1, 3, 3))
    assert torch.allclose(det, torch.ones_like(det), atol=1e-5)
    assert res.extras["nfe"] == 200 * 20


def test_zero_score_from_identity_reaches_the_haar_angle_law() -> None:
    """s = 0: constrained Brownian motion on SO(3) from the identity; the first character decays like
    e^{-sigma^2 t / 2}, so sigma^2 T = 11.25 leaves E[tr R] ~ 3 e^{-5.6} = 0.01; the rotation angle must then
    follow the Haar law (1 - cos w) / pi (KS at level 0.01, fixed seed)."""
    n = 1000
    x0 = torch.eye(3, dtype=D64).reshape(1, 9).repeat(n, 1)
    model = LandingDiffusion(so3_constraints(), NoiseSchedule(1.5, 1.5, 5.0, 100), "OLLA")
    res = model.sample(prior=x0, generator=_gen(9), reverse=False)
    w = rotation_angle(res.x).numpy()
    ks = stats.kstest(w, lambda a: haar_angle_cdf(torch.as_tensor(a)).numpy())
    assert ks.statistic < _ks_crit(n), ks
    tr = res.x.reshape(-1, 3, 3).diagonal(dim1=-2, dim2=-1).sum(-1)
    assert abs(float(tr.mean())) < 4 / math.sqrt(n)  # Haar: E tr R = 0, Var tr R = 1
    # and an unmixed chain fails the same test (the test can fail)
    short = LandingDiffusion(so3_constraints(), NoiseSchedule(1.5, 1.5, 0.5, 10), "OLLA")
    w_short = rotation_angle(short.sample(prior=x0, generator=_gen(9), reverse=False).x).numpy()
    assert stats.kstest(w_short, lambda a: haar_angle_cdf(torch.as_tensor(a)).numpy()).statistic > 0.2


def test_olla_with_the_exact_score_samples_the_known_density() -> None:
    """One matrix-Fisher component (kappa 8): reverse OLLA with the exact score and constant sigma is a
    Langevin chain for it (relaxation rate sigma^2 kappa / 2 = 4, T = 2); the angle to the centre must follow
    the exact law (KS at level 0.01, fixed seed)."""
    n, kappa = 1000, 8.0
    M = triad_centres()[1:2]
    model = LandingDiffusion(so3_constraints(), NoiseSchedule(1.0, 1.0, 2.0, 200), "OLLA",
                             net=MatrixFisherScore(M, kappa))  # fmt: skip
    res = model.sample(prior=haar_rotations(n, generator=_gen(10)), generator=_gen(11))
    w = rotation_angle(res.x, M[0]).numpy()
    ks = stats.kstest(w, lambda a: matrix_fisher_angle_cdf(torch.as_tensor(a), kappa).numpy())
    assert ks.statistic < _ks_crit(n), ks


def test_ulla_drift_sign_convention() -> None:
    """Under the spec's signed-dt reverse step the underdamped chain moves against its drift: with -score the
    particles concentrate at the mode (mean angle near the exact law's 0.41; the short chain is not fully
    mixed, the exact comparison is the slow test below), with +score they are pushed to the antipodal set
    (Haar mean angle pi / 2 + 2 / pi = 2.21)."""
    M = triad_centres()[1:2]
    prior = haar_rotations(200, generator=_gen(12))
    mean_angle = {}
    for sign in (-1.0, 1.0):
        model = LandingDiffusion(so3_constraints(), NoiseSchedule(1.0, 1.0, 2.0, 60), "ULLA", gamma=2.0,
                                 net=MatrixFisherScore(M, 8.0, sign=sign))  # fmt: skip
        mean_angle[sign] = float(rotation_angle(model.sample(prior=prior, generator=_gen(13)).x, M[0]).mean())
    exact = float(rotation_angle(matrix_fisher_sample(M, 8.0, 5000, generator=_gen(14)), M[0]).mean())
    assert mean_angle[-1.0] < exact + 0.25 and mean_angle[1.0] > 2.5, (mean_angle, exact)


@pytest.mark.slow  # ~4 CPU-s: 1000 particles x 400 underdamped steps (the kinetic chain mixes slower)
def test_ulla_with_the_exact_score_samples_the_known_density() -> None:
    n, kappa = 1000, 8.0
    M = triad_centres()[1:2]
    model = LandingDiffusion(so3_constraints(), NoiseSchedule(1.0, 1.0, 4.0, 400), "ULLA", gamma=2.0,
                             net=MatrixFisherScore(M, kappa, sign=-1.0))  # fmt: skip
    res = model.sample(prior=haar_rotations(n, generator=_gen(15)), generator=_gen(16))
    w = rotation_angle(res.x, M[0]).numpy()
    ks = stats.kstest(w, lambda a: matrix_fisher_angle_cdf(torch.as_tensor(a), kappa).numpy())
    assert ks.statistic < _ks_crit(n), ks


@pytest.mark.parametrize("kappa", [0.5, 8.0])
def test_matrix_fisher_sampler_is_exact(kappa: float) -> None:
    n = 20_000
    M = triad_centres()
    x = matrix_fisher_sample(M, kappa, n, generator=_gen(17))
    assert x.shape == (n, 9) and so3_constraints().violation(x).max() < 1e-12
    assert (torch.linalg.det(x.reshape(-1, 3, 3)) > 0).all()
    # each component's relative angle: draw from one centre so the nearest-centre ambiguity cannot enter
    one = matrix_fisher_sample(M[1:2], kappa, n, generator=_gen(18))
    w = rotation_angle(one, M[1]).numpy()
    ks = stats.kstest(w, lambda a: matrix_fisher_angle_cdf(torch.as_tensor(a), kappa).numpy())
    assert ks.statistic < _ks_crit(n), ks
    # E[R] for one component: isotropic, so E[M^T R] = (E[1 + 2 cos w] / 3) I
    Q = (M[1].reshape(3, 3).T @ one.reshape(-1, 3, 3)).mean(0)
    c = float((1 + 2 * torch.cos(torch.as_tensor(w))).mean() / 3)
    assert torch.allclose(Q, c * torch.eye(3, dtype=D64), atol=4 / math.sqrt(n))
    if kappa == 8.0:  # well separated: the nearest centre recovers the component, weights ~ 1/3
        near = torch.stack([rotation_angle(x, m) for m in M]).argmin(0)
        frac = torch.bincount(near, minlength=3).double() / n
        assert (frac - 1 / 3).abs().max() < 4 * math.sqrt(2 / 9 / n)


def test_angle_cdfs_and_haar_sampler() -> None:
    w = torch.linspace(0, math.pi, 50, dtype=D64)
    assert torch.allclose(matrix_fisher_angle_cdf(w, 1e-8), haar_angle_cdf(w), atol=1e-8)  # kappa -> 0
    # large kappa: angle ~ Maxwell with scale 1 / sqrt(2 kappa) (tr Q = 3 - w^2 + ...)
    k = 2000.0
    s = 1 / math.sqrt(2 * k)
    r = w[:10] / 10
    maxwell = torch.erf(r / (s * math.sqrt(2))) - math.sqrt(2 / math.pi) * r / s * torch.exp(
        -(r**2) / (2 * s * s)
    )
    assert torch.allclose(matrix_fisher_angle_cdf(r, k), maxwell, atol=2e-3)
    x = haar_rotations(20_000, generator=_gen(19))
    assert so3_constraints().violation(x).max() < 1e-12 and (torch.linalg.det(x.reshape(-1, 3, 3)) > 0).all()
    ks = stats.kstest(rotation_angle(x).numpy(), lambda a: haar_angle_cdf(torch.as_tensor(a)).numpy())
    assert ks.statistic < _ks_crit(20_000)
    assert x.mean(0).abs().max() < 4 / math.sqrt(3 * 20_000)  # E R = 0, entries have variance 1/3
    om = torch.randn(50, 3, dtype=D64, generator=_gen(20))
    om = om / om.norm(dim=-1, keepdim=True) * torch.rand(50, 1, dtype=D64, generator=_gen(21)) * math.pi
    assert torch.allclose(rotation_angle(so3_exp(om)), om.norm(dim=-1), atol=1e-6)


def test_score_is_the_gradient_of_the_log_density() -> None:
    M, kappa = triad_centres(), 3.0
    x = haar_rotations(40, generator=_gen(22)).requires_grad_(True)
    logp = torch.logsumexp(kappa * (x @ M.T), dim=-1).sum()
    (grad,) = torch.autograd.grad(logp, x)
    t = torch.zeros(40, 1, dtype=D64)
    assert torch.allclose(MatrixFisherScore(M, kappa)(torch.cat([x.detach(), t], -1)), grad, atol=1e-12)
    v = torch.randn(40, 9, dtype=D64)
    neg = MatrixFisherScore(M, kappa, sign=-1.0)(torch.cat([x.detach(), v, t], -1))
    assert torch.allclose(neg, -grad, atol=1e-12) and list(MatrixFisherScore(M, kappa).parameters()) == []


def test_rotation_mmd_floor_and_shift() -> None:
    M, kappa, n = triad_centres(), 8.0, 1000
    a = matrix_fisher_sample(M, kappa, n, generator=_gen(23))
    same = [rotation_mmd(a, matrix_fisher_sample(M, kappa, n, generator=_gen(24 + i))) for i in range(4)]
    tilt = so3_exp(torch.tensor([[0.0, 0.0, 0.3]], dtype=D64)).reshape(3, 3)
    shifted = matrix_fisher_sample((M.reshape(-1, 3, 3) @ tilt).reshape(-1, 9), kappa, n, generator=_gen(30))
    wider = matrix_fisher_sample(M, kappa / 2, n, generator=_gen(31))
    floor = max(abs(v) for v in same)
    assert floor < 2 / n  # unbiased: same law ~ 0 up to the O(1 / n) null fluctuation
    assert rotation_mmd(a, shifted) > 10 * floor and rotation_mmd(a, wider) > 5 * floor
    assert rotation_mmd(a, haar_rotations(n, generator=_gen(32))) > 50 * floor
    b = same[0]
    assert rotation_mmd(a, matrix_fisher_sample(M, kappa, n, generator=_gen(24))) == b  # deterministic


def test_determinism_under_a_seed() -> None:
    M = triad_centres()
    assert torch.equal(matrix_fisher_sample(M, 8.0, 50, generator=_gen(1)),
                       matrix_fisher_sample(M, 8.0, 50, generator=_gen(1)))  # fmt: skip
    model = LandingDiffusion(so3_constraints(), NoiseSchedule(1.0, 1.0, 0.5, 10), "ULLA",
                             net=MatrixFisherScore(M, 8.0, sign=-1.0))  # fmt: skip
    prior = haar_rotations(50, generator=_gen(2))
    a = model.sample(prior=prior, generator=_gen(3)).x
    b = model.sample(prior=prior, generator=_gen(3)).x
    c = model.sample(prior=prior, generator=_gen(4)).x
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_bad_inputs_raise_naming_the_argument() -> None:
    M = triad_centres()
    cases = [
        (lambda: matrix_fisher_sample(M[:, :4], 8.0, 10), "centres"),
        (lambda: matrix_fisher_sample(2 * M, 8.0, 10), "centres"),  # not rotations
        (lambda: matrix_fisher_sample(-M, 8.0, 10), "centres"),  # det -1
        (lambda: matrix_fisher_sample(M, 0.0, 10), "kappa"),
        (lambda: matrix_fisher_sample(M, 8.0, 0), "n"),
        (lambda: MatrixFisherScore(M, 8.0, sign=2.0), "sign"),
        (lambda: MatrixFisherScore(M, -1.0), "kappa"),
        (lambda: rotation_mmd(M, M, bandwidth=0.0), "bandwidth"),
        (lambda: rotation_mmd(M[:, :3], M), "x"),
        (lambda: rotation_mmd(M, M[:1]), "x, y"),
        (lambda: rotation_mmd(M, M * math.nan), "y"),
        (lambda: so3_exp(torch.zeros(3)), "omega"),
        (lambda: haar_rotations(0), "n"),
        (lambda: so3_project_svd(torch.zeros(2, 3, 3)), "x"),
        (lambda: matrix_fisher_angle_cdf(torch.zeros(3), 0.0), "kappa"),
    ]
    for f, name in cases:
        with pytest.raises(ValueError, match=f"^{name}"):
            f()
