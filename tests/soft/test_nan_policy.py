"""The NaN policy of optarium.soft (issue 12): one rule for the family, ValueError naming the argument.

Before the fix ``so.sort``, ``so.rank`` and ``so.random.categorical`` returned NaN everywhere without a word
and ``so.topk(method="ot")`` raised ``FloatingPointError`` about Sinkhorn potentials. The per-operator sweep
over every mode and method is the ``nan_input`` check of the soft conformance suite; these tests pin the
issue's examples, the random samplers (not in the conformance table) and the policy switch.
"""

from __future__ import annotations

import math

import pytest
import torch

import optarium.soft as so

torch.set_num_threads(1)


def _x() -> torch.Tensor:
    x = torch.randn(3, 6, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    x[1, 2] = math.nan
    return x


@pytest.mark.parametrize(
    "call",
    [
        lambda x: so.sort(x),
        lambda x: so.sort(x, mode="hard"),
        lambda x: so.rank(x),
        lambda x: so.rank(x, method="fast_soft_sort", mode="c0"),
        lambda x: so.topk(x, k=2, method="ot"),
        lambda x: so.sort_st(x),
        lambda x: so.argmax(x, dim=-1, mode="hard"),
        lambda x: so.quantile(x, 0.5, dim=-1),
        lambda x: so.greater(x, 0.0),
        lambda x: so.relu(x, mode="hard"),
    ],
    ids=[
        "sort",
        "sort-hard",
        "rank",
        "rank-fss",
        "topk-ot",
        "sort_st",
        "argmax-hard",
        "quantile",
        "gt",
        "relu",
    ],
)
def test_issue_examples_raise_naming_x(call) -> None:
    with pytest.raises(ValueError, match=r"^x: contains NaN"):
        call(_x())


@pytest.mark.parametrize("mode", ["hard", "smooth", "c0"])
@pytest.mark.parametrize(
    "fn,name",
    [
        (so.random.categorical, "logits"),
        (so.random.categorical_st, "logits"),
        (so.random.bernoulli, "logits"),
        (so.random.bernoulli_st, "logits"),
        (so.random.permutation, "scores"),
        (so.random.permutation_st, "scores"),
    ],
)
def test_random_samplers_raise_naming_their_argument(fn, name: str, mode: str) -> None:
    g = torch.Generator().manual_seed(0)
    with pytest.raises(ValueError, match=rf"^{name}: contains NaN"):
        fn(_x(), mode=mode, generator=g)


def test_masked_logits_stay_allowed() -> None:
    """-inf logits (a masked category) are not NaN and keep working in every mode."""
    logits = torch.tensor([0.0, -math.inf, 1.0], dtype=torch.float64)
    for mode in ("hard", "smooth"):
        p = so.random.categorical(logits, mode=mode, generator=torch.Generator().manual_seed(1))
        assert float(p[1]) == 0.0 and torch.isfinite(p).all()


def test_second_argument_is_named() -> None:
    y = _x()
    with pytest.raises(ValueError, match=r"^y: contains NaN"):
        so.less(torch.zeros(3, 6, dtype=torch.float64), y)
    with pytest.raises(ValueError, match=r"^soft_index: contains NaN"):
        so.take_along_dim(
            torch.zeros(3, 6, dtype=torch.float64), y.unsqueeze(-2).expand(3, 6, 6).clone(), dim=-1
        )
    with pytest.raises(ValueError, match=r"^b: contains NaN"):
        so.clamp(torch.zeros(3), 0.0, math.nan)


def test_propagate_policy_skips_the_check_and_restores() -> None:
    assert so.get_nan_policy() == "raise"
    with so.nan_policy("propagate"):
        assert so.get_nan_policy() == "propagate"
        values = so.sort(_x(), mode="hard").values
        assert torch.isnan(values[1]).any()  # torch's own result: NaN sorted last
        assert torch.isnan(so.sort(_x()).values).any()
    assert so.get_nan_policy() == "raise"
    old = so.set_nan_policy("propagate")
    try:
        assert old == "raise"
        so.rank(_x())
    finally:
        so.set_nan_policy(old)
    with pytest.raises(ValueError, match=r"^x: contains NaN"):
        so.rank(_x())


def test_bad_policy_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^policy:"):
        so.set_nan_policy("ignore")
    with pytest.raises(ValueError, match=r"^policy:"), so.nan_policy("warn"):
        pass


def test_finite_inputs_unchanged_by_the_policy() -> None:
    x = torch.randn(4, 7, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    a = so.sort(x, method="neuralsort").values
    with so.nan_policy("propagate"):
        b = so.sort(x, method="neuralsort").values
    assert torch.equal(a, b)
