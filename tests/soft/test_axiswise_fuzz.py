"""Hypothesis fuzz of the axis-wise soft operators: ties, all-equal rows, +-1e30, subnormals, length 1.

Every (function, method, mode) drawn must return finite values, SoftIndex rows that are >= 0 and sum to 1,
exact one-hot hard indices, and values inside the range of the inputs (index methods: convex combinations).
"""

from __future__ import annotations

import math

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import optarium.soft.axiswise as A

torch.set_num_threads(1)

SPECIAL64 = (0.0, -0.0, 1.0, -1.0, 1e30, -1e30, 5e-324, -1e-310, 2.5e-308, 3.0, 3.0)
SPECIAL32 = (0.0, -0.0, 1.0, -1.0, 1e15, -1e15, 1e-45, -1e-40, 3.0, 3.0)
METHODS = ("softsort", "neuralsort", "sorting_network", "ot", "fast_soft_sort", "smooth_sort")
MODES = ("hard", "smooth", "c0", "c1", "c2")
SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def rows(draw: st.DrawFn, special: tuple[float, ...], bound: float) -> list[list[float]]:
    n = draw(st.integers(1, 6))
    n_rows = draw(st.integers(1, 2))
    kind = draw(st.sampled_from(["mixed", "equal", "ties"]))
    elem = st.one_of(
        st.sampled_from(special),
        st.floats(-bound, bound, allow_nan=False, allow_infinity=False, allow_subnormal=True, width=32),
    )
    out = []
    for _ in range(n_rows):
        if kind == "equal":
            out.append([draw(elem)] * n)
        elif kind == "ties":
            pool = [draw(elem) for _ in range(2)]
            out.append([pool[draw(st.integers(0, 1))] for _ in range(n)])
        else:
            out.append([draw(elem) for _ in range(n)])
    return out


def _check_index(p: torch.Tensor, mode: str, what: str) -> None:
    assert bool(torch.isfinite(p).all()), f"{what}: non-finite index"
    assert bool((p >= 0).all()), f"{what}: negative index"
    tol = 1e-5 if p.dtype == torch.float32 else 1e-9
    assert (p.sum(-1) - 1).abs().max().item() <= tol, f"{what}: rows do not sum to 1"
    if mode == "hard":
        assert bool(((p == 0) | (p == 1)).all()), f"{what}: hard index not one-hot"


def _check_values(v: torch.Tensor, x: torch.Tensor, what: str, convex: bool) -> None:
    assert bool(torch.isfinite(v).all()), f"{what}: non-finite values {v.tolist()}"
    if convex:  # convex combinations of the inputs stay inside their range
        lo, hi = x.min().item(), x.max().item()
        slack = 1e-6 * max(1.0, abs(lo), abs(hi))
        assert v.min().item() >= lo - slack and v.max().item() <= hi + slack, f"{what}: values outside range"


def _run(x: torch.Tensor, method: str, mode: str, k_frac: float, q: float) -> None:
    if method == "smooth_sort" and mode not in ("hard", "smooth"):
        mode = "smooth"
    n = x.shape[-1]
    k = max(1, math.ceil(k_frac * n))
    index_method = method in ("softsort", "neuralsort", "sorting_network", "ot")
    kw = {"mode": mode, "method": method}
    what = f"{method}/{mode} x={x.tolist()}"
    convex = method in ("softsort", "neuralsort", "ot") or mode == "hard"  # value-only methods: not convex
    if index_method:
        _check_index(A.argmax(x, -1, **kw), mode, "argmax " + what)
        _check_index(A.argsort(x, -1, **kw), mode, "argsort " + what)
        _check_index(A.argtopk(x, k, -1, **kw), mode, "argtopk " + what)
        _check_index(A.argquantile(x, q, -1, interpolation="lower", **kw), mode, "argquantile " + what)
        lp = A.argmax(x, -1, return_log_probs=True, log_prob_eps=1e-9, **kw)
        assert bool(torch.isfinite(lp).all()), "log-probs " + what
    s = A.sort(x, -1, descending=True, **kw)
    _check_values(s.values, x, "sort " + what, convex)
    if s.indices is not None:
        _check_index(s.indices, mode, "sort indices " + what)
    _check_values(A.topk(x, k, -1, **kw).values, x, "topk " + what, convex)
    _check_values(A.max(x, -1, **kw).values, x, "max " + what, convex)
    _check_values(A.quantile(x, q, -1, **kw), x, "quantile " + what, convex)
    r = A.rank(x, -1, **kw)
    assert bool(torch.isfinite(r).all()), "rank " + what
    # SoftJAX's smooth_sort bounds relax the permutahedron, so its ranks may leave [1, n]; NeuralSort's sparse
    # modes can leave an element unselected by every position at ties (rank 0, as in softtorch 0.1.1)
    if method != "smooth_sort" and not (method == "neuralsort" and mode in ("c0", "c1", "c2")):
        assert r.min().item() >= 1 - 1e-6 and r.max().item() <= n + 1e-6, "rank range " + what


@SETTINGS
@given(
    rows(SPECIAL64, 1e6),
    st.sampled_from(METHODS),
    st.sampled_from(MODES),
    st.floats(0.01, 1.0),
    st.floats(0.0, 1.0),
)
def test_fuzz_float64(data: list[list[float]], method: str, mode: str, k_frac: float, q: float) -> None:
    _run(torch.tensor(data, dtype=torch.float64), method, mode, k_frac, q)


@SETTINGS
@given(
    rows(SPECIAL32, 1e6),
    st.sampled_from(METHODS),
    st.sampled_from(MODES),
    st.floats(0.01, 1.0),
    st.floats(0.0, 1.0),
)
def test_fuzz_float32(data: list[list[float]], method: str, mode: str, k_frac: float, q: float) -> None:
    _run(torch.tensor(data, dtype=torch.float32), method, mode, k_frac, q)
