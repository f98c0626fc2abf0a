"""Tests for optarium.soft._smooth_sort: SoftJAX's C-infinity smooth_sort permutahedron projection."""

import itertools
import warnings

import pytest
import torch

from optarium.soft._smooth_sort import (
    esp_bounds,
    smooth_sort_projection,
    smooth_sort_ranks,
    smooth_sort_values,
)

torch.set_num_threads(1)
F64 = torch.float64


def test_golden_value_from_softjax_docs():
    # SoftJAX long example: sj.sort([-0.2, -1.0, 0.3, 1.0], method="smooth_sort", softness=0.2).
    x = torch.tensor([-0.2, -1.0, 0.3, 1.0], dtype=F64)
    y = smooth_sort_values(x, 0.2)
    assert torch.allclose(y, torch.tensor([-0.8572, -0.2221, 0.2973, 0.8821], dtype=F64), atol=1e-4)


def test_esp_bounds_match_brute_force_subsets():
    w = torch.randn(7, dtype=F64, generator=torch.Generator().manual_seed(0))
    tau = 0.3
    b = esp_bounds(w, tau)
    for k in range(8):
        vals = torch.tensor(
            [float(w[list(c)].sum()) / tau for c in itertools.combinations(range(7), k)], dtype=F64
        )
        assert abs(float(tau * torch.logsumexp(vals, 0)) - float(b[k])) < 1e-10


def test_limits_and_invariants():
    x = torch.randn(3, 10, dtype=F64, generator=torch.Generator().manual_seed(1))
    hard = torch.sort(x, -1).values
    assert torch.allclose(smooth_sort_values(x, 1e-3), hard, atol=1e-3)
    y = smooth_sort_values(x, 0.5)
    assert (y[..., 1:] > y[..., :-1]).all()  # strictly increasing (entropic gaps)
    assert torch.allclose(y.sum(-1), x.sum(-1), atol=1e-9)  # sum preserved
    assert torch.allclose(smooth_sort_values(x, 0.5, descending=True), y.flip(-1))
    r = smooth_sort_ranks(x, 1e-3)
    assert torch.allclose(r, (torch.argsort(torch.argsort(-x, -1), -1) + 1).to(F64), atol=1e-3)


def test_gradcheck_values_and_ranks():
    x = torch.randn(2, 6, dtype=F64, generator=torch.Generator().manual_seed(2), requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: smooth_sort_values(x, 0.3), (x,), eps=1e-6, atol=1e-5)
    assert torch.autograd.gradcheck(lambda x: smooth_sort_ranks(x, 0.3), (x,), eps=1e-6, atol=1e-5)


def test_batched_equals_per_row():
    z = torch.randn(4, 9, dtype=F64, generator=torch.Generator().manual_seed(3))
    w = torch.randn(4, 9, dtype=F64, generator=torch.Generator().manual_seed(4))
    y = smooth_sort_projection(z, w, 0.2)
    for i in range(4):
        assert torch.allclose(y[i], smooth_sort_projection(z[i], w[i], 0.2), atol=1e-10)


def test_bad_input():
    x = torch.randn(5)
    with pytest.raises(ValueError, match=r"^mode"):
        smooth_sort_values(x, 0.1, mode="c0")
    with pytest.raises(ValueError, match=r"^softness"):
        smooth_sort_values(x, 0.0)


# ---------------------------------------------------------------------------------------------------------
# Agreement with SoftJAX itself. Provenance of the golden values: a-paulus/softjax at commit 82fa3c9
# (version 0.1.1), jax/jaxlib 0.10.2 on CPU with jax_enable_x64, running exactly the sj.sort / sj.rank
# smooth_sort path (softjax.projections_permutahedron._proj_permutahedron_smooth_sort on the raw x, anchors
# arange(n) / (n - 1) for values, (1..n) / (n - 1) times (n - 1) for descending ranks) with its L-BFGS
# tolerance tightened from 1e-5 to 1e-13 (lbfgs_tol=1e-13, lbfgs_max_iter=20000) so that the reference is
# the optimum of SoftJAX's problem rather than its solver's stopping point. The default-tolerance
# sj.sort(x, axis=-1, method="smooth_sort", softness=s) outputs differ from these by at most ~2e-5 relative
# (e.g. the large-gap row below: [-2.8401561, -0.2028449, 1.3494515, 8.7435483]).
# ---------------------------------------------------------------------------------------------------------
SOFTJAX_SORT = [
    # (x, softness, SoftJAX sorted values (ascending))
    (
        [-0.2, -1.0, 0.3, 1.0],
        0.2,
        [-0.8572384916650411, -0.2221074992601979, 0.297273196592535, 0.8820727943387177],
    ),
    # gaps 100x the softness are still mixed: SoftJAX's definition, not a bug (module docstring)
    (
        [[0.0, 0.05, 10.0, -3.0]],
        0.1,
        [[-2.8401549633952317, -0.20284459211498396, 1.3494532607336764, 8.74354629468032]],
    ),
    (
        [
            [0.01294558819441117, -0.007546057912599311, 0.016891074524436733, -0.002873877078086663],
            [0.015744082788445867, -0.004327858471825968, -0.007354832923422751, 0.0024978537155866684],
            [0.010314530848694723, 0.0016100957671534466, -0.005855288241233367, -0.01341219714076669],
        ],
        1.0,
        [
            [-0.8984614440527323, -0.2793966512241871, 0.289105021870089, 0.9081698109245158],
            [-0.9016656760227421, -0.282607215464205, 0.2858868028438263, 0.9049453318098949],
            [-0.9051405820336806, -0.28608248420034477, 0.2824110599731178, 0.9014691672330364],
        ],
    ),
    (
        [-38.200229214348056, 255.2424025371081, -32.44718562854392, -122.12233497261363, 20.191000196010993],
        0.01,
        [-122.1223349084442, -38.20022925697563, -32.447185530723516, 20.191000077206127, 255.24240256841364],
    ),
    (
        [1813985.6138927497, 811821.5897399867, -203411.33594471234, -1577199.1506827036, 372951.5417619218],
        0.1,
        [-1438917.448628973, -341692.9695901582, 372951.5109613985, 910636.7993562806, 1715170.3644720928],
    ),
    (
        [217571.35556003437, -676232.0559749608, 1143233.6266295945, -1888348.89097665, -213544.6280829865],
        0.01,
        [-1888348.894629323, -676232.0588924158, -213544.62911771052, 217571.35765621997, 1143233.6284553641],
    ),
    (
        [[0.0, 0.05, 1e15, -3.0]],
        0.1,
        [[51515.75833333333, 1012605.9076437183, 137089775053193.36, 862910223966468.1]],
    ),
    ([[0.0, 1e30]], 0.1, [[4.9999999999995026e29, 5.000000000000552e29]]),
]
SOFTJAX_RANK = [
    # (x, softness, SoftJAX descending ranks); ranks may leave [1, n]: the ESP bounds relax the permutahedron
    (
        [-0.2, -1.0, 0.3, 1.0],
        0.2,
        [2.9161960170177963, 4.094867966054077, 2.067120741347106, 0.9218152755594841],
    ),
    (
        [[0.0, 0.05, 10.0, -3.0]],
        0.1,
        [[2.7402265916565884, 2.259773418979609, 0.9891027494538811, 4.010897261181688]],
    ),
    (
        [
            [0.01294558819441117, -0.007546057912599311, 0.016891074524436733, -0.002873877078086663],
            [0.015744082788445867, -0.004327858471825968, -0.007354832923422751, 0.0024978537155866684],
        ],
        1.0,
        [
            [1.7298229110553525, 4.978151484657035, 0.022101530820084724, 3.2699240784182004],
            [0.021371866798466033, 3.269470233458141, 4.97506769468087, 1.7340902010107953],
        ],
    ),
    (
        [-38.200229214348056, 255.2424025371081, -32.44718562854392, -122.12233497261363, 20.191000196010993],
        0.01,
        [3.999999999999999, 0.9999999999994458, 3.0, 5.000000000000555, 2.0],
    ),
]


def _assert_rel(got: torch.Tensor, ref: torch.Tensor, rtol: float = 1e-6) -> None:
    err = float((got - ref).abs().max() / ref.abs().max())
    assert err <= rtol, f"relative error {err:.2e} > {rtol:.0e}: {got.tolist()} vs {ref.tolist()}"


@pytest.mark.parametrize(("x", "s", "ref"), SOFTJAX_SORT)
def test_sort_matches_softjax(x, s, ref):
    import optarium.soft.axiswise as A

    x, ref = torch.tensor(x, dtype=F64), torch.tensor(ref, dtype=F64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the dual solver must converge (it warned at |x| ~ 1e6 before)
        _assert_rel(A.sort(x, dim=-1, method="smooth_sort", softness=s).values, ref)
        _assert_rel(A.sort(x, dim=-1, method="smooth_sort", softness=s, descending=True).values, ref.flip(-1))
        _assert_rel(smooth_sort_values(x, s), ref)


@pytest.mark.parametrize(("x", "s", "ref"), SOFTJAX_RANK)
def test_rank_matches_softjax(x, s, ref):
    import optarium.soft.axiswise as A

    x, ref = torch.tensor(x, dtype=F64), torch.tensor(ref, dtype=F64)
    _assert_rel(A.rank(x, dim=-1, method="smooth_sort", softness=s), ref)
    n = x.shape[-1]  # ascending ranks = n + 1 - descending ranks (the projection of x vs of -x)
    _assert_rel(A.rank(x, dim=-1, method="smooth_sort", softness=s, descending=False), n + 1 - ref)


@pytest.mark.parametrize("big", [1e6, 1e15, 1e30])
def test_extreme_magnitudes_exact_constraints(big):
    # Every feasible point has sum(y) = sum(w): sum of values = sum(x), sum of ranks = n (n + 1) / 2.
    # (SoftJAX's own L-BFGS stops early here: its ranks of [0, 0.05, 1e15, -3] sum to 9.917, of
    # [0, 0.05, 1e30, -3] to 6.14, because the beta-independent part of its dual swamps the rest.)
    x = torch.tensor([[0.0, 0.05, big, -3.0], [big, -big, 3.0, 5e-324]], dtype=F64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        v = smooth_sort_values(x, 0.1)
        r = smooth_sort_ranks(x, 0.1)
    assert torch.isfinite(v).all() and torch.isfinite(r).all()
    assert (v[..., 1:] >= v[..., :-1]).all()
    assert ((v.sum(-1) - x.sum(-1)).abs() <= 1e-12 * big).all()
    assert torch.allclose(r.sum(-1), torch.full((2,), 10.0, dtype=F64), atol=1e-9)
    # z gaps >> softness: the ranks saturate at those of the large-gap row [0, 0.05, 10, -3] (tested above)
    assert torch.allclose(r[0], smooth_sort_ranks(torch.tensor([0.0, 0.05, 10.0, -3.0], dtype=F64), 0.1))


def test_gradcheck_at_large_scale():
    x = 300 * torch.randn(2, 5, dtype=F64, generator=torch.Generator().manual_seed(5))
    x.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda x: smooth_sort_values(x, 0.1), (x,), eps=1e-5, atol=1e-5)
    assert torch.autograd.gradcheck(lambda x: smooth_sort_ranks(x, 0.1), (x,), eps=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_bounds_stay_finite_with_finite_gradients_for_long_rows(dtype: torch.dtype) -> None:
    """n = 1024 (ten product-tree levels): finite bounds and gradients, b_k >= the sum of the k largest w."""
    from optarium.soft._smooth_sort import esp_bounds

    w = torch.randn(2, 1024, dtype=dtype, generator=torch.Generator().manual_seed(0)).requires_grad_(True)
    b = esp_bounds(w, 0.1)
    b.sum().backward()
    assert bool(torch.isfinite(b).all()) and bool(torch.isfinite(w.grad).all())
    top = torch.sort(w.detach(), dim=-1, descending=True).values.cumsum(-1)
    assert bool((b[..., 1:] >= top - 1e-3).all())  # e_k >= its largest term: b_k >= sum of the k largest w
