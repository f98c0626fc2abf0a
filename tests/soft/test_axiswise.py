"""Axis-wise soft operators (optarium.soft.axiswise): the spec's checks beyond the generic conformance grid.

The conformance suite (tests/conformance/test_soft.py with optarium.testing._soft_axiswise_cases) runs hard
parity, *_st forward/gradient, SoftIndex validity, softness -> 0, float64 gradcheck over mode x method,
golden values, identities and wheel parity on one layout per function. Here: every dim / keepdim / shape
layout of the spec (test 1), wheel parity over those layouts and every interpolation, log-probabilities,
gated_grad, invariances, batching, dtypes and the documented quirks and deviations.
"""

from __future__ import annotations

import math

import pytest
import torch

import optarium.soft.axiswise as A

torch.set_num_threads(1)
F64 = torch.float64
SOFT = ("smooth", "c0", "c1", "c2")
INDEX_METHODS = ("softsort", "neuralsort", "sorting_network", "ot")
OT_TIGHT = {"ot_kwargs": {"sinkhorn_tol": 1e-9, "lbfgs_tol": 1e-10}}
INTERP = ("linear", "lower", "higher", "nearest", "midpoint")


def _x(shape: tuple[int, ...], seed: int = 0, dtype: torch.dtype = F64) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=F64).to(dtype)


def _oh(idx: torch.Tensor, n: int, dtype: torch.dtype) -> torch.Tensor:
    return torch.nn.functional.one_hot(idx, n).to(dtype)


def _equal(a: object, b: object) -> None:
    if isinstance(a, (tuple, list)):
        assert isinstance(b, (tuple, list)) and len(a) == len(b)
        for u, v in zip(a, b, strict=True):
            _equal(u, v)
        return
    if a is None or b is None:
        assert a is None and b is None
        return
    assert isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
    assert torch.equal(a, b)


# ------------------------------------------------------------------------------------------------------------
# spec test 1: hard parity on (7,) and (3, 5, 4), dims 0 / -1 / None, keepdim both; *_st forward == hard
# ------------------------------------------------------------------------------------------------------------


def _hard_expectations(x: torch.Tensor, dim: int | None, keepdim: bool) -> dict[str, tuple[object, object]]:
    """name -> (call(fn, mode, **kw), expected) for every function at this layout."""
    n = x.numel() if dim is None else x.shape[dim]
    flat = x.reshape(-1) if dim is None else x
    d = 0 if dim is None else dim
    out: dict[str, tuple[object, object]] = {}

    def reduce_index(idx: torch.Tensor) -> torch.Tensor:
        oh = _oh(idx, n, x.dtype)
        if keepdim and dim is None:
            return oh.reshape(*(1,) * x.ndim, n)
        return oh

    out["argmax"] = (
        lambda fn, **k: fn(x, dim, keepdim, **k),
        reduce_index(torch.argmax(x, dim=dim, keepdim=keepdim and dim is not None)),
    )
    out["argmin"] = (
        lambda fn, **k: fn(x, dim, keepdim, **k),
        reduce_index(torch.argmin(x, dim=dim, keepdim=keepdim and dim is not None)),
    )
    if dim is None:
        want_max = x.max().reshape((1,) * x.ndim) if keepdim else x.max()
        want_min = x.min().reshape((1,) * x.ndim) if keepdim else x.min()
    else:
        r = torch.max(x, dim=dim, keepdim=keepdim)
        want_max = torch.return_types.max((r.values, _oh(r.indices, n, x.dtype)))
        r = torch.min(x, dim=dim, keepdim=keepdim)
        want_min = torch.return_types.min((r.values, _oh(r.indices, n, x.dtype)))
    out["max"] = (lambda fn, **k: fn(x, dim, keepdim, **k), want_max)
    out["min"] = (lambda fn, **k: fn(x, dim, keepdim, **k), want_min)
    sd = -1 if dim is None else dim
    for desc in (False, True):
        order = torch.argsort(x, dim=sd, descending=desc)
        out[f"argsort|{desc}"] = (
            lambda fn, desc=desc, **k: fn(x, dim, desc, **k),
            _oh(order, x.shape[sd], x.dtype),
        )
        r = torch.sort(x, dim=sd, descending=desc)
        out[f"sort|{desc}"] = (
            lambda fn, desc=desc, **k: fn(x, dim, desc, **k),
            torch.return_types.sort((r.values, _oh(r.indices, x.shape[sd], x.dtype))),
        )
        rk = (torch.argsort(torch.argsort(flat, dim=d, descending=desc), dim=d) + 1).to(x.dtype)
        out[f"rank|{desc}"] = (lambda fn, desc=desc, **k: fn(x, dim, descending=desc, **k), rk)
    k = min(3, x.shape[sd])
    r = torch.topk(x, k, dim=sd)
    out["topk"] = (
        lambda fn, **kk: fn(x, k, dim, **kk),
        torch.return_types.topk((r.values, _oh(r.indices, x.shape[sd], x.dtype))),
    )
    out["argtopk"] = (lambda fn, **kk: fn(x, k, dim, **kk), _oh(r.indices, x.shape[sd], x.dtype))
    for q in (0.3, 0.5):
        for interp in INTERP:
            out[f"quantile|{q}{interp}"] = (
                lambda fn, q=q, interp=interp, **kk: fn(x, q, dim, keepdim, interpolation=interp, **kk),
                torch.quantile(x, q, dim=dim, keepdim=keepdim, interpolation=interp),
            )
    if dim is None:
        if not keepdim:
            out["median"] = (lambda fn, **kk: fn(x, dim, keepdim, **kk), torch.median(x))
    else:
        r = torch.median(x, dim=dim, keepdim=keepdim)
        out["median"] = (
            lambda fn, **kk: fn(x, dim, keepdim, **kk),
            torch.return_types.median((r.values, _oh(r.indices, n, x.dtype))),
        )
    return out


_FNS = {
    "argmax": (A.argmax, A.argmax_st),
    "argmin": (A.argmin, A.argmin_st),
    "max": (A.max, A.max_st),
    "min": (A.min, A.min_st),
    "argsort": (A.argsort, A.argsort_st),
    "sort": (A.sort, A.sort_st),
    "rank": (A.rank, A.rank_st),
    "topk": (A.topk, A.topk_st),
    "argtopk": (A.argtopk, A.argtopk_st),
    "quantile": (A.quantile, A.quantile_st),
    "median": (A.median, A.median_st),
}


@pytest.mark.parametrize("shape,dims", [((7,), (0, -1, None)), ((3, 5, 4), (0, 1, -1, None))])
def test_hard_mode_and_st_forward_equal_torch(shape: tuple[int, ...], dims: tuple[int | None, ...]) -> None:
    for dtype in (F64, torch.float32):
        x = _x(shape, 1, dtype)
        for dim in dims:
            for keepdim in (False, True):
                for name, (call, want) in _hard_expectations(x, dim, keepdim).items():
                    fn, st_fn = _FNS[name.split("|")[0]]
                    methods = ("softsort", "neuralsort", "sorting_network", "ot")
                    if name == "median" and dim is not None:  # value-only methods refuse a dim (as SoftTorch)
                        methods = ("softsort", "neuralsort", "ot")
                    for method in methods:
                        _equal(call(fn, mode="hard", method=method), want)  # type: ignore[operator]
                    for mode in ("smooth", "c0"):  # ST forward is the hard output bit for bit
                        _equal(call(st_fn, mode=mode, method="neuralsort"), want)  # type: ignore[operator]


def test_argquantile_and_argmedian_hard_indices() -> None:
    x = _x((3, 6), 2)
    order = torch.argsort(x, -1)
    lin = A.argquantile(x, 0.3, -1, mode="hard")  # p = 1.5: half of order stats 1 and 2
    torch.testing.assert_close(lin, 0.5 * _oh(order[:, 1], 6, F64) + 0.5 * _oh(order[:, 2], 6, F64))
    for interp, k in (("lower", 1), ("higher", 2), ("nearest", 2)):  # round(1.5) = 2 (half to even)
        _equal(A.argquantile(x, 0.3, -1, mode="hard", interpolation=interp), _oh(order[:, k], 6, F64))
    _equal(A.argmedian(x, -1, mode="hard"), _oh(order[:, 2], 6, F64))
    q = torch.tensor([0.0, 0.2, 1.0], dtype=F64)
    aq = A.argquantile(x, q, -1, keepdim=True, mode="hard", interpolation="lower")
    assert aq.shape == (3, 3, 1, 6)
    _equal(aq[:, :, 0], torch.stack([_oh(order[:, k], 6, F64) for k in (0, 1, 5)]))
    vals, idx = A.quantile(x, q, -1, mode="hard", return_argquantile=True)
    torch.testing.assert_close(vals, torch.quantile(x, q, dim=-1))
    torch.testing.assert_close((idx * x.unsqueeze(0)).sum(-1), vals)


# ------------------------------------------------------------------------------------------------------------
# parity with softtorch 0.1.1 over layouts (conformance covers one layout per function)
# ------------------------------------------------------------------------------------------------------------


def _close(a: object, b: object, atol: float) -> None:
    if isinstance(a, (tuple, list)):
        for u, v in zip(a, b, strict=True):  # type: ignore[call-overload]
            _close(u, v, atol)
        return
    if a is None or b is None:
        assert a is None and b is None
        return
    assert isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
    torch.testing.assert_close(a, b, rtol=0, atol=atol)


@pytest.mark.parametrize("method", ["softsort", "neuralsort", "sorting_network"])
def test_softtorch_parity_over_layouts(method: str) -> None:
    st = pytest.importorskip("softtorch", reason="softtorch 0.1.1 is the optional parity reference")
    x = _x((2, 5, 3), 3)
    for mode in SOFT:
        kw = {"softness": 0.3, "mode": mode, "method": method}
        for dim, keepdim in ((1, True), (-1, False)):
            _close(A.argmax(x, dim, keepdim, **kw), st.argmax(x, dim, keepdim, **kw), 1e-9)
            _close(A.min(x, dim, keepdim, **kw), st.min(x, dim, keepdim, **kw), 1e-9)
            for q, interp in [(0.3, i) for i in INTERP] + [(0.0, "linear"), (1.0, "midpoint")]:
                kq = {**kw, "interpolation": interp}
                _close(
                    A.argquantile(x, q, dim, keepdim, **kq), st.argquantile(x, q, dim, keepdim, **kq), 1e-9
                )
                _close(A.quantile(x, q, dim, keepdim, **kq), st.quantile(x, q, dim, keepdim, **kq), 1e-9)
            for desc in (False, True):
                _close(A.sort(x, dim, desc, **kw), st.sort(x, dim, desc, **kw), 1e-9)
                _close(A.rank(x, dim, descending=desc, **kw), st.rank(x, dim, descending=desc, **kw), 1e-9)
            _close(A.topk(x, 2, dim, **kw), st.topk(x, 2, dim, **kw), 1e-9)
        x1 = x[0, :, 0]  # dim=None on a 1-D input (the wheel's N-d dim=None max has a method-dependent shape)
        _close(A.max(x1, **kw), st.max(x1, **kw), 1e-9)
        _close(A.median(x, **kw), st.median(x, **kw), 1e-9)
        _close(A.argmedian(x, **kw), st.argmedian(x, **kw), 1e-9)
        _close(A.rank(x, **kw), st.rank(x, **kw), 1e-9)


def test_softtorch_parity_ot_smooth() -> None:
    st = pytest.importorskip("softtorch", reason="softtorch 0.1.1 is the optional parity reference")
    x = _x((2, 6), 4)
    kw = {"softness": 0.3, "mode": "smooth", "method": "ot", "ot_kwargs": {"sinkhorn_tol": 1e-9}}
    _close(A.argsort(x, -1, True, **kw), st.argsort(x, -1, True, **kw), 1e-6)
    _close(A.rank(x, -1, **kw), st.rank(x, -1, **kw), 1e-6)
    _close(A.topk(x, 2, -1, **kw), st.topk(x, 2, -1, **kw), 1e-6)
    for q, interp in [(0.3, i) for i in INTERP] + [(0.0, "linear"), (1.0, "lower")]:
        kq = {**kw, "interpolation": interp}
        _close(A.argquantile(x, q, -1, **kq), st.argquantile(x, q, -1, **kq), 1e-6)
    # fast_soft_sort / sorting_network value parity: conformance cases (sort, rank, max, quantile, median)


# ------------------------------------------------------------------------------------------------------------
# beyond SoftTorch: log-probabilities and argtopk
# ------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", INDEX_METHODS)
def test_log_probs_are_logs_of_the_probabilities(method: str) -> None:
    x = _x((2, 5), 5)
    kw = OT_TIGHT if method == "ot" else {}
    for mode in SOFT:
        for fn, args in (
            (A.argmax, (x, -1)),
            (A.argsort, (x, -1)),
            (A.argtopk, (x, 2, -1)),
            (A.argquantile, (x, 0.3, -1)),
            (A.argmedian, (x, -1)),
        ):
            p = fn(*args, mode=mode, method=method, **kw)
            lp = fn(*args, mode=mode, method=method, return_log_probs=True, **kw)
            pos = p > 0
            torch.testing.assert_close(lp[pos], torch.log(p[pos]), rtol=0, atol=1e-10)
            assert bool((lp[~pos] == -math.inf).all())
            floored = fn(*args, mode=mode, method=method, return_log_probs=True, log_prob_eps=1e-8, **kw)
            assert bool(torch.isfinite(floored).all())
            torch.testing.assert_close(
                floored.exp().sum(-1), torch.ones_like(floored[..., 0]), rtol=0, atol=1e-12
            )
            assert floored.min().item() >= math.log(1e-8) - math.log(1 + 5e-8)
        if method != "sorting_network":  # value-only for sort
            sorted_ = A.sort(x, -1, mode="c0", method=method, return_log_probs=True, **kw)
            assert sorted_.indices is not None and bool((sorted_.indices <= 0).all())


def test_smooth_log_probs_stay_finite_where_probabilities_underflow() -> None:
    x = torch.tensor([0.0, 1.0, 2.0, 3.0, 50.0], dtype=F64)
    p = A.argmax(x, softness=1e-3, standardize=False)
    lp = A.argmax(x, softness=1e-3, standardize=False, return_log_probs=True)
    assert p[0].item() == 0.0 and math.isfinite(lp[0].item())
    torch.testing.assert_close(lp, torch.log_softmax(x / 1e-3, -1))
    lq = A.argquantile(x, 0.3, softness=1e-2, standardize=False, return_log_probs=True)
    assert bool(torch.isfinite(lq).all())
    # NLL through sparse log-probs: finite gradients although most probabilities are exactly 0
    xg = x.clone().requires_grad_(True)
    lp0 = A.argmax(xg, mode="c0", return_log_probs=True, log_prob_eps=1e-6)
    (-lp0[4]).backward()
    assert xg.grad is not None and bool(torch.isfinite(xg.grad).all())
    xh = x.clone().requires_grad_(True)
    (-A.argmax(xh, mode="c1", return_log_probs=True)[4]).backward()
    assert xh.grad is not None and bool(torch.isfinite(xh.grad).all())


def test_hard_log_probs_and_st() -> None:
    x = _x((3, 4), 6)
    lp = A.argmax(x, -1, mode="hard", return_log_probs=True)
    want = torch.where(_oh(torch.argmax(x, -1), 4, F64) > 0, 0.0, -math.inf).to(F64)
    _equal(lp, want)
    xg = x.clone().requires_grad_(True)
    st_lp = A.argmax_st(xg, -1, return_log_probs=True)
    _equal(st_lp.detach(), want)
    st_lp[:, 0].sum().backward()
    assert xg.grad is not None and bool(torch.isfinite(xg.grad).all())


# ------------------------------------------------------------------------------------------------------------
# gated_grad, limits, invariances, batching, dtypes
# ------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fn", ["max", "sort", "topk", "quantile", "median"])
def test_gated_grad_false_gives_index_weighted_gradient(fn: str) -> None:
    """Spec test 8: with the index detached, d values / d x = P (values = sum_j x_j P_j)."""
    x = _x((2, 5), 7).requires_grad_(True)
    call = {
        "max": lambda **k: A.max(x, -1, **k),
        "sort": lambda **k: A.sort(x, -1, **k),
        "topk": lambda **k: A.topk(x, 3, -1, **k),
        "quantile": lambda **k: A.quantile(x, 0.4, -1, return_argquantile=True, **k),
        "median": lambda **k: A.median(x, -1, **k),
    }[fn]
    for mode in ("smooth", "c1"):
        vals, idx = call(mode=mode, gated_grad=False)
        w = torch.randn(vals.shape, dtype=F64, generator=torch.Generator().manual_seed(1))
        (g,) = torch.autograd.grad((vals * w).sum(), x)
        expected = idx.detach() * w.unsqueeze(-1)
        if vals.ndim == x.ndim:  # a position axis (sort, topk): sum over it
            expected = expected.sum(-2)
        torch.testing.assert_close(g, expected, rtol=0, atol=1e-12)
        vals_g, _ = call(mode=mode, gated_grad=True)
        (gg,) = torch.autograd.grad((vals_g * w).sum(), x)
        if mode == "smooth":  # the gated gradient also flows through P (sparse c1 rows may be one-hot)
            assert (gg - g).abs().max().item() > 1e-6


def test_large_softness_gives_uniform_argmax() -> None:
    x = _x((3, 6), 8)
    for method in ("softsort", "neuralsort"):
        p = A.argmax(x, -1, softness=1e6, method=method)
        torch.testing.assert_close(p, torch.full_like(p, 1 / 6), rtol=0, atol=1e-5)


@pytest.mark.parametrize("method", ["softsort", "neuralsort", "ot", "sorting_network"])
def test_softness_to_zero_approaches_hard_in_every_layout(method: str) -> None:
    x = torch.tensor([[0.3, -1.2, 2.0, 0.9, -0.1], [1.0, 0.2, -0.7, 0.5, 1.6]], dtype=F64)
    kw = OT_TIGHT if method == "ot" else {}
    small = 1e-2 if method == "ot" else 1e-3
    for mode in SOFT:
        for fn in (lambda **k: A.sort(x, -1, **k).values, lambda **k: A.rank(x, -1, **k)):
            hard = fn(mode="hard", method=method)
            e_big = (fn(mode=mode, method=method, softness=0.3, **kw) - hard).abs().max().item()
            e_small = (fn(mode=mode, method=method, softness=small, **kw) - hard).abs().max().item()
            assert e_small < 0.2 * e_big, (mode, e_small, e_big)


def test_c0_gives_exact_zeros_for_well_separated_inputs() -> None:
    x = torch.tensor([-2.0, -0.5, 0.1, 1.2, 3.0], dtype=F64)
    for method in ("softsort", "neuralsort", "ot", "sorting_network"):
        p = A.argsort(x, mode="c0", method=method, softness=0.05, **(OT_TIGHT if method == "ot" else {}))
        assert bool((p == 0).any()), method


@pytest.mark.parametrize("method", ["softsort", "neuralsort", "ot", "sorting_network", "fast_soft_sort"])
def test_batched_equals_per_row_and_dtype_follows_input(method: str) -> None:
    x = _x((3, 6), 9)
    kw = OT_TIGHT if method == "ot" else {}
    for mode in ("smooth", "c2"):
        out = A.sort(x, -1, mode=mode, method=method, **kw)
        ranks = A.rank(x, -1, mode=mode, method=method, **kw)
        tol = 1e-8 if method == "ot" else 1e-12  # OT: each row converges to sinkhorn_tol on its own
        for i in range(3):
            row = A.sort(x[i], mode=mode, method=method, **kw)
            torch.testing.assert_close(out.values[i], row.values, rtol=0, atol=tol)
            torch.testing.assert_close(
                ranks[i], A.rank(x[i], mode=mode, method=method, **kw), rtol=0, atol=tol
            )
        out32 = A.sort(x.float(), -1, mode=mode, method=method)
        assert out32.values.dtype == torch.float32
        if out32.indices is not None:
            assert out32.indices.dtype == torch.float32
            assert (out32.indices.sum(-1) - 1).abs().max().item() <= 1e-5


def test_affine_invariance_with_standardize() -> None:
    """Spec test 6, restricted to a in [0.3, 1000] and |b| <= 100 (var + 1e-6 breaks it below that)."""
    x = _x((8,), 10)
    x = (x - x.mean()) / x.std(unbiased=False)
    for dtype in (F64, torch.float32):
        xd = x.to(dtype)
        for method in ("softsort", "neuralsort", "sorting_network", "ot"):
            kw = {"ot_kwargs": {"sinkhorn_tol": 1e-12}} if method == "ot" else {}
            base = A.argsort(xd, method=method, **kw)
            for a, b in ((0.3, 0.0), (1000.0, 100.0), (5.0, -100.0)):
                diff = (A.argsort(a * xd + b, method=method, **kw) - base).abs().max().item()
                assert diff <= 1e-4, (method, dtype, a, b, diff)


def test_sort_rank_permutation_equivariance_and_rank_identity() -> None:
    x = _x((7,), 11)
    perm = torch.randperm(7, generator=torch.Generator().manual_seed(0))
    for method in ("softsort", "neuralsort", "ot", "fast_soft_sort"):
        kw = OT_TIGHT if method == "ot" else {}
        for mode in SOFT:
            torch.testing.assert_close(
                A.sort(x[perm], mode=mode, method=method, **kw).values,
                A.sort(x, mode=mode, method=method, **kw).values,
                rtol=0,
                atol=1e-8,
            )
            torch.testing.assert_close(
                A.rank(x[perm], mode=mode, method=method, **kw),
                A.rank(x, mode=mode, method=method, **kw)[perm],
                rtol=0,
                atol=1e-8,
            )
    s = A.rank(x, mode="hard") + A.rank(x, mode="hard", descending=False)
    _equal(s, torch.full((7,), 8.0, dtype=F64))


# ------------------------------------------------------------------------------------------------------------
# shapes, quirks, deviations, bad input
# ------------------------------------------------------------------------------------------------------------


def test_shapes_and_quirks() -> None:
    x = _x((3, 5, 4), 12)
    assert A.max(x).shape == () and isinstance(A.max(x, 1), torch.return_types.max)
    assert A.max(x, keepdim=True).shape == (1, 1, 1) and A.max(x, keepdim=True, mode="hard").shape == (
        1,
        1,
        1,
    )
    assert A.argmax(x).shape == (60,) and A.argmax(x, keepdim=True).shape == (1, 1, 1, 60)
    assert A.argmax(x, 1, keepdim=True).shape == (3, 1, 4, 5)
    assert A.argsort(x, None).shape == (3, 5, 4, 4) and A.argsort(x, 1).shape == (3, 5, 4, 5)
    assert A.rank(x).shape == (60,) and A.rank(x, 1).shape == (3, 5, 4)
    top = A.topk(x, 2, 1)
    assert isinstance(top, torch.return_types.topk) and top.values.shape == (3, 2, 4)
    assert top.indices is not None and top.indices.shape == (3, 2, 4, 5)
    assert A.argtopk(x, 2, 1).shape == (3, 2, 4, 5)
    q = torch.tensor([0.1, 0.5, 0.9])
    assert A.quantile(x.float(), q, 1).shape == (3, 3, 4)
    assert A.quantile(x, q, 1, keepdim=True).shape == (3, 3, 1, 4)
    assert A.quantile(x, q, None, keepdim=True).shape == (3, 1, 1, 1)
    assert A.argquantile(x, q, 1, keepdim=True).shape == (3, 3, 1, 4, 5)
    assert A.argquantile(x, q).shape == (3, 60)
    vals, idx = A.quantile(x, 0.5, 2, return_argquantile=True)
    assert vals.shape == (3, 5) and idx.shape == (3, 5, 4)
    med = A.median(x, 0)
    assert isinstance(med, torch.return_types.median) and med.indices.shape == (5, 4, 3)
    assert A.median(x).shape == ()
    s = A.sort(x, 1, method="sorting_network")
    assert s.indices is None and s.values.shape == x.shape
    assert A.sort(x, return_indices=False).indices is None
    assert A.max(x, 1, method="fast_soft_sort").indices is None
    # hard indices are float one-hot, also for integer inputs (default float dtype)
    xi = torch.tensor([[3, 1, 2], [0, 5, 4]])
    assert A.argmax(xi, 1, mode="hard").dtype == torch.get_default_dtype()
    assert A.argmax(xi, 1).dtype == torch.get_default_dtype()
    _equal(A.sort(xi, mode="hard").values, torch.sort(xi).values)


def test_value_only_methods_and_smooth_sort() -> None:
    x = torch.tensor([-0.2, -1.0, 0.3, 1.0], dtype=F64)
    # SoftJAX's smooth_sort (absent from SoftTorch): golden value from the SoftJAX docs (raw values)
    torch.testing.assert_close(
        A.sort(x, method="smooth_sort", softness=0.2).values,
        torch.tensor([-0.8572, -0.2221, 0.2973, 0.8821], dtype=F64),
        rtol=0,
        atol=1e-4,
    )
    with pytest.raises(ValueError, match=r"^mode"):
        A.sort(x, method="smooth_sort", mode="c0")
    with pytest.raises(ValueError, match=r"^return_argquantile"):
        A.quantile(x, 0.5, method="fast_soft_sort", return_argquantile=True, mode="hard")
    with pytest.raises(ValueError, match=r"^method"):
        A.median(x, 0, method="sorting_network")


def test_bad_inputs() -> None:
    x = _x((2, 4), 13)
    cases = [
        (lambda: A.argmax(x, softness=0.0), ValueError, "softness"),
        (lambda: A.argmax(x, mode="hard", softness=-1.0), ValueError, "softness"),
        (lambda: A.sort(x, mode="c3"), ValueError, "mode"),
        (lambda: A.argsort(x, method="fast_soft_sort"), ValueError, "method"),
        (lambda: A.rank(x, 2), ValueError, "dim"),
        (lambda: A.topk(x, 0), ValueError, "k"),
        (lambda: A.topk(x, 5), ValueError, "k"),
        (lambda: A.argtopk(x, 1.5), TypeError, "k"),
        (lambda: A.quantile(x, -0.1), ValueError, "q"),
        (lambda: A.quantile(x, float("nan")), ValueError, "q"),
        (lambda: A.argquantile(x, torch.ones(2, 2) / 2), ValueError, "q"),
        (lambda: A.quantile(x, 0.5, interpolation="cubic"), ValueError, "interpolation"),
        (lambda: A.median(x, keepdim=True), ValueError, "keepdim"),
        (lambda: A.argmax(x, ot_kwargs={"tol": 1}), ValueError, "ot_kwargs"),
        (lambda: A.argmax(x, return_log_probs=True, log_prob_eps=0.0), ValueError, "log_prob_eps"),
        (lambda: A.argmax(x.tolist()), TypeError, "x"),
        (lambda: A.argmax(torch.zeros(0, 3), 0), ValueError, "x"),
        (lambda: A.sort(torch.tensor(1.0), 0), ValueError, "dim"),
        (lambda: A.sort(x, standardize=1), TypeError, "standardize"),
    ]
    for call, exc, name in cases:
        with pytest.raises(exc) as info:
            call()
        assert str(info.value).startswith(name), (name, str(info.value))
