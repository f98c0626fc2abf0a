"""Tests for optarium.soft._permutahedron: PAV projection onto the permutahedron (fast_soft_sort)."""

import pytest
import torch

from optarium.soft._permutahedron import permutahedron_projection

torch.set_num_threads(1)
F64 = torch.float64
MODES = ["c0", "smooth", "c1", "c2"]


def _zw(shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=F64), torch.randn(*shape, generator=g, dtype=F64)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("softness", [1e-3, 0.1, 1.0, 100.0])
def test_matches_softtorch_wheel(mode, softness):
    pytest.importorskip("softtorch", reason="softtorch 0.1.1 (numba PAV) is the parity reference")
    from softtorch.projections_permutahedron import _proj_permutahedron

    z, w = _zw((3, 11), seed=1)
    ours = permutahedron_projection(z, w, softness, mode, backend="torch")
    ref = _proj_permutahedron(z, w, softness=softness, mode=mode)
    scale = max(1.0, float(ref.abs().max()))
    # At softness 1e-3, z / s ~ 1e3 and both solvers lose digits to prefix-moment cancellation (c1/c2).
    assert float((ours - ref).abs().max()) / scale < (1e-5 if softness < 0.01 else 1e-9)


@pytest.mark.parametrize("mode", MODES)
def test_fast_soft_sort_matches_wheel_sort_and_rank(mode):
    st = pytest.importorskip("softtorch", reason="softtorch 0.1.1 is the parity reference")
    from optarium.soft._common import standardize, unstandardize

    x = torch.randn(4, 9, dtype=F64, generator=torch.Generator().manual_seed(2))
    z, mean, std = standardize(x, -1)
    anchors = torch.arange(9, dtype=F64) / 8
    vals = unstandardize(permutahedron_projection(anchors, z, 0.1, mode), mean, std)
    ref = st.sort(x, dim=-1, method="fast_soft_sort", mode=mode).values
    assert torch.allclose(vals, ref, atol=1e-8)
    ranks = permutahedron_projection(-z, torch.arange(1, 10, dtype=F64) / 8, 0.1, mode) * 8
    ref_r = st.rank(x, dim=-1, method="fast_soft_sort", mode=mode)
    assert torch.allclose(ranks, ref_r, atol=1e-8)


@pytest.mark.parametrize("mode", MODES)
def test_numba_and_torch_paths_agree(mode):
    pytest.importorskip("numba", reason="numba is the optional CPU accelerator of the PAV")
    z, w = _zw((6, 50), seed=3)
    for softness in (1e-3, 0.05, 1.0, 50.0):
        a = permutahedron_projection(z, w, softness, mode, backend="torch")
        b = permutahedron_projection(z, w, softness, mode, backend="numba")
        scale = max(1.0, float(a.abs().max()))
        assert float((a - b).abs().max()) / scale < 1e-10
    # Gradients too (the block structure returned by both paths drives the backward).
    zz = z.clone().requires_grad_(True)
    g = torch.randn(6, 50, dtype=F64)
    (ga,) = torch.autograd.grad((permutahedron_projection(zz, w, 0.3, mode, backend="torch") * g).sum(), zz)
    (gb,) = torch.autograd.grad((permutahedron_projection(zz, w, 0.3, mode, backend="numba") * g).sum(), zz)
    assert torch.allclose(ga, gb, atol=1e-10)


@pytest.mark.parametrize("mode", MODES)
def test_gradcheck_exact_backward(mode):
    z, w = _zw((2, 7), seed=4)
    z.requires_grad_(True)
    w.requires_grad_(True)
    assert torch.autograd.gradcheck(
        lambda z, w: permutahedron_projection(z, w, 0.5, mode, backend="torch"), (z, w), eps=1e-6, atol=1e-5
    )


def test_euclidean_output_lies_in_permutahedron_and_limits():
    z, w = _zw((5, 10), seed=5)
    y = permutahedron_projection(z, w, 0.7, "c0")
    ws = torch.sort(w, -1, descending=True).values
    ys = torch.sort(y, -1, descending=True).values
    assert torch.allclose(y.sum(-1), w.sum(-1), atol=1e-12)
    assert (ys.cumsum(-1) <= ws.cumsum(-1) + 1e-12).all()  # majorization
    # Tiny softness: the vertex of P(w) in z's order (hard sort of w into z's ranks).
    y0 = permutahedron_projection(z, w, 1e-6, "c0")
    hard = torch.empty_like(w).scatter_(-1, torch.argsort(z, -1, descending=True), ws)
    assert torch.allclose(y0, hard, atol=1e-12)
    # Huge softness: the centre of P(w) (mean of w), and log-mean-exp for the KL variant.
    yinf = permutahedron_projection(z, w, 1e9, "c0")
    assert torch.allclose(yinf, w.mean(-1, keepdim=True).expand_as(w), atol=1e-7)
    ykl = permutahedron_projection(z, w, 1e9, "smooth")
    lme = torch.logsumexp(w, -1, keepdim=True) - torch.log(torch.tensor(10.0, dtype=F64))
    assert torch.allclose(ykl, lme.expand_as(w), atol=1e-7)


def test_fast_soft_sort_limits_and_float32_dtype():
    x = torch.rand(3, 16, generator=torch.Generator().manual_seed(6))
    a = torch.arange(16, dtype=torch.float32) / 15
    y = permutahedron_projection(a, x, 1e-4, "c0")
    assert y.dtype == torch.float32
    assert torch.allclose(y, torch.sort(x, -1).values, atol=1e-6)
    y1 = permutahedron_projection(a, x, 1e-4, "smooth")
    assert torch.allclose(y1, torch.sort(x, -1).values, atol=1e-5)


def test_broadcast_batch_and_permutation_equivariance():
    z, w = _zw((2, 3, 8), seed=7)
    a = torch.arange(8, dtype=F64) / 7
    y = permutahedron_projection(a, w, 0.2, "smooth")  # anchors broadcast over the batch
    assert y.shape == (2, 3, 8)
    perm = torch.randperm(8, generator=torch.Generator().manual_seed(0))
    y2 = permutahedron_projection(z[..., perm], w, 0.2, "c1")
    assert torch.allclose(y2, permutahedron_projection(z, w, 0.2, "c1")[..., perm], atol=1e-12)


def test_bad_input():
    z, w = _zw((4,))
    with pytest.raises(ValueError, match=r"^softness"):
        permutahedron_projection(z, w, -1.0, "c0")
    with pytest.raises(ValueError, match=r"^mode"):
        permutahedron_projection(z, w, 0.1, "hard")
    with pytest.raises(ValueError, match=r"^backend"):
        permutahedron_projection(z, w, 0.1, "c0", backend="cuda")
