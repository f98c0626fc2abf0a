"""optarium.soft.random: relaxed categorical / bernoulli / permutation samplers and their ST variants."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from optarium.soft import random as R
from optarium.soft._common import SOFT_MODES

torch.set_num_threads(1)
F64 = torch.float64


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_hard_categorical_is_an_exact_sample() -> None:
    logits = torch.tensor([0.3, -1.0, 1.2, 0.0, 0.5], dtype=F64)
    y = R.categorical(logits, mode="hard", sample_shape=(20_000,), generator=gen(1))
    assert y.shape == (20_000, 5) and bool(((y == 0) | (y == 1)).all()) and bool((y.sum(-1) == 1).all())
    freq = y.mean(0)
    p = torch.softmax(logits, 0)
    se = torch.sqrt(p * (1 - p) / 20_000)
    assert bool(((freq - p).abs() < 4.5 * se).all()), (freq, p)


@pytest.mark.parametrize("mode", SOFT_MODES)
def test_categorical_soft_is_the_projection_of_the_same_perturbed_logits(mode: str) -> None:
    from optarium.soft._simplex import simplex_projection

    logits = torch.randn(3, 6, dtype=F64, generator=gen(2))
    y = R.categorical(logits, 0.5, mode, generator=gen(7))
    g = R.gumbel_noise(logits.shape, logits, gen(7))
    torch.testing.assert_close(y, simplex_projection(logits + g, -1, 0.5, mode), rtol=0, atol=1e-14)
    assert bool((y >= 0).all()) and torch.allclose(y.sum(-1), torch.ones(3, dtype=F64), atol=1e-12)
    if mode == "smooth":  # exactly the Gumbel-softmax of Jang et al. / Maddison et al. at temperature 0.5
        torch.testing.assert_close(y, torch.softmax((logits + g) / 0.5, -1), rtol=0, atol=1e-14)
    hard = R.categorical(logits, 0.5, "hard", generator=gen(7))
    near = R.categorical(logits, 1e-4, mode, generator=gen(7))
    assert (near - hard).abs().max() < 1e-6 < (y - hard).abs().max()


def test_hard_bernoulli_is_an_exact_sample_and_smooth_is_binary_concrete() -> None:
    logits = torch.tensor([-2.0, 0.0, 0.7, 3.0], dtype=F64)
    y = R.bernoulli(logits, mode="hard", sample_shape=(20_000,), generator=gen(3))
    assert bool(((y == 0) | (y == 1)).all())
    p = torch.sigmoid(logits)
    assert bool(((y.mean(0) - p).abs() < 4.5 * torch.sqrt(p * (1 - p) / 20_000)).all())
    s = R.bernoulli(logits, 0.3, "smooth", generator=gen(4))
    noise = R.logistic_noise(logits.shape, logits, gen(4))
    torch.testing.assert_close(s, torch.sigmoid((logits + noise) / 0.3), rtol=0, atol=1e-14)
    for mode in SOFT_MODES:
        b = R.bernoulli(logits, 0.3, mode, sample_shape=(50,), generator=gen(5))
        assert b.shape == (50, 4) and bool((b >= 0).all() and (b <= 1).all())


def test_hard_permutation_is_an_exact_plackett_luce_sample() -> None:
    scores = torch.tensor([1.0, 0.0, -0.5], dtype=F64)
    m = 12_000
    p = R.permutation(scores, mode="hard", sample_shape=(m,), generator=gen(6))
    assert p.shape == (m, 3, 3)
    assert bool((p.sum(-1) == 1).all() and (p.sum(-2) == 1).all())
    order = p.argmax(-1)  # item at each rank
    w = scores.exp()
    for perm in itertools.permutations(range(3)):
        want = w[perm[0]] / w.sum() * w[perm[1]] / (w.sum() - w[perm[0]])
        got = (order == torch.tensor(perm)).all(-1).double().mean()
        assert abs(got - want) < 4.5 * math.sqrt(want * (1 - want) / m), (perm, got, want)


@pytest.mark.parametrize("method", ["neuralsort", "softsort"])
def test_soft_permutation_rows_are_distributions_and_tend_to_the_sample(method: str) -> None:
    scores = torch.randn(2, 5, dtype=F64, generator=gen(8))
    for mode in SOFT_MODES:
        p = R.permutation(scores, 0.1, mode, method, generator=gen(9))
        assert p.shape == (2, 5, 5) and bool((p >= 0).all())
        torch.testing.assert_close(p.sum(-1), torch.ones(2, 5, dtype=F64), rtol=0, atol=1e-12)
    hard = R.permutation(scores, mode="hard", method=method, generator=gen(9))
    near = R.permutation(scores, 1e-4, "smooth", method, generator=gen(9))
    assert (near - hard).abs().max() < 1e-4


@pytest.mark.parametrize(
    ("sampler", "kw"),
    [(R.categorical, {}), (R.bernoulli, {}), (R.permutation, {}), (R.permutation, {"method": "softsort"})],
)
def test_st_samplers_are_exactly_hard_forward_with_the_soft_gradient(sampler, kw) -> None:  # type: ignore[no-untyped-def]
    st = getattr(R, sampler.__name__ + "_st")
    x = torch.randn(3, 4, dtype=F64, generator=gen(10))
    w = torch.randn((3, 4, 4) if sampler is R.permutation else (3, 4), dtype=F64, generator=gen(11))
    for mode in SOFT_MODES:
        a = x.clone().requires_grad_(True)
        out = st(a, 0.5, mode, generator=gen(12), **kw)
        hard = sampler(x, 0.5, "hard", generator=gen(12), **kw)
        assert torch.equal(out, hard), mode
        (ga,) = torch.autograd.grad((out * w).sum(), a)
        b = x.clone().requires_grad_(True)
        (gb,) = torch.autograd.grad((sampler(b, 0.5, mode, generator=gen(12), **kw) * w).sum(), b)
        torch.testing.assert_close(ga, gb, rtol=0, atol=1e-14)
        assert ga.abs().max() > 0


@pytest.mark.parametrize("mode", ["smooth", "c1", "c2"])
def test_gradcheck_of_relaxed_samples_at_fixed_noise(mode: str) -> None:
    logits = torch.randn(2, 4, dtype=F64, generator=gen(13), requires_grad=True)
    assert torch.autograd.gradcheck(lambda v: R.categorical(v, 0.7, mode, generator=gen(14)), (logits,))
    assert torch.autograd.gradcheck(lambda v: R.bernoulli(v, 0.7, mode, generator=gen(15)), (logits,))
    scores = torch.randn(4, dtype=F64, generator=gen(16), requires_grad=True)
    assert torch.autograd.gradcheck(lambda v: R.permutation(v, 0.5, mode, generator=gen(17)), (scores,))


def test_relaxed_categorical_gradient_points_to_the_rewarded_class() -> None:
    """d/dlogits E[<y, r>] by the relaxed sampler: pushes up the class with the largest reward."""
    logits = torch.zeros(4, dtype=F64, requires_grad=True)
    r = torch.tensor([0.0, 0.0, 1.0, 0.0], dtype=F64)
    y = R.categorical(logits, 0.5, sample_shape=(4000,), generator=gen(18))
    (g,) = torch.autograd.grad((y @ r).mean(), logits)
    assert int(g.argmax()) == 2 and g[2] > 0 and bool((g[[0, 1, 3]] < 0).all())


def test_seeding_dtype_and_broadcasting() -> None:
    logits = torch.randn(2, 3, generator=gen(19))
    a = R.categorical(logits, generator=gen(20), sample_shape=(5,))
    b = R.categorical(logits, generator=gen(20), sample_shape=(5,))
    c = R.categorical(logits, generator=gen(21), sample_shape=(5,))
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert a.dtype == torch.float32 and a.shape == (5, 2, 3)
    assert R.bernoulli(logits.double(), sample_shape=4, generator=gen(0)).dtype == F64
    assert R.permutation(logits, sample_shape=(2,), generator=gen(0)).shape == (2, 2, 3, 3)
    torch.manual_seed(0)
    assert R.categorical(logits).shape == (2, 3)  # the global generator when none is given


@pytest.mark.parametrize("sampler", [R.categorical, R.bernoulli, R.permutation, R.categorical_st])
def test_bad_input(sampler) -> None:  # type: ignore[no-untyped-def]
    x = torch.zeros(3)
    name = "scores" if "permutation" in sampler.__name__ else "logits"
    for kw, arg, exc in [
        ({"softness": 0.0}, "softness", ValueError),
        ({"softness": -1.0}, "softness", ValueError),
        ({"mode": "c3"}, "mode", ValueError),
        ({"generator": 3}, "generator", TypeError),
        ({"sample_shape": (-1,)}, "sample_shape", ValueError),
    ]:
        with pytest.raises(exc, match=f"^{arg}"):
            sampler(x, **kw)
    with pytest.raises(TypeError, match=f"^{name}"):
        sampler(torch.zeros(3, dtype=torch.long))
