"""optarium.soft.straight_through: exact hard forward, exact soft gradient, decorators, output structures."""

from __future__ import annotations

import pytest
import torch

import optarium.soft.elementwise as E
import optarium.soft.straight_through as T
from optarium.soft._common import SOFT_MODES
from optarium.testing.soft import SoftOpCase, check_st_forward

torch.set_num_threads(1)
F64 = torch.float64


@pytest.mark.parametrize("name", ["abs", "relu", "sign", "round", "heaviside"])
def test_st_forward_is_bitwise_hard_on_many_inputs(name: str) -> None:
    """The wheel's (hard - soft).detach() + soft is off by one ulp in a few entries; ours never is."""
    x = torch.randn(4000, generator=torch.Generator().manual_seed(0)) * 3
    st = getattr(T, f"{name}_st")
    for mode in SOFT_MODES:
        out = st(x.clone().requires_grad_(True), mode=mode)
        assert torch.equal(out, getattr(E, name)(x, mode="hard")), mode


def test_st_mode_positional_and_keyword_and_hard_passthrough() -> None:
    x = torch.tensor([0.3, -0.2], dtype=F64, requires_grad=True)
    a = T.clamp_st(x, -0.1, 0.1, 0.2, "c1")  # softness and mode positional
    b = T.clamp_st(x, -0.1, 0.1, softness=0.2, mode="c1")
    assert torch.equal(a, b) and torch.equal(a, torch.clamp(x.detach(), -0.1, 0.1))
    ga = torch.autograd.grad(a.sum(), x)[0]
    gs = torch.autograd.grad(E.clamp(x, -0.1, 0.1, 0.2, "c1").sum(), x)[0]
    assert torch.equal(ga, gs)
    h = T.abs_st(x, mode="hard")
    assert torch.equal(torch.autograd.grad(h.sum(), x)[0], torch.sign(x.detach()))


def test_st_decorator_on_custom_function_with_structured_output() -> None:
    def f(x: torch.Tensor, mode: str = "c0") -> tuple[torch.Tensor, dict[str, torch.Tensor | None]]:
        s = E.sigmoidal(x, 0.5, mode)
        return s, {"twice": 2 * s, "none": None}

    fs = T.st(f)
    x = torch.randn(5, dtype=F64, requires_grad=True)
    v, d = fs(x)  # default mode of f: c0
    assert torch.equal(v, f(x, "hard")[0]) and d["none"] is None
    g = torch.autograd.grad(d["twice"].sum(), x)[0]
    torch.testing.assert_close(g, torch.autograd.grad(f(x, "c0")[1]["twice"].sum(), x)[0], rtol=0, atol=0)
    r = T.st(lambda x, mode="smooth": torch.return_types.sort((E.sign(x, mode=mode), None)))(x)
    assert (
        isinstance(r, torch.return_types.sort) and r.indices is None and torch.equal(r.values, torch.sign(x))
    )


def test_st_function_without_mode_parameter_defaults_to_smooth() -> None:
    seen = []

    def f(x: torch.Tensor, **kw: str) -> torch.Tensor:
        seen.append(kw["mode"])
        return E.sign(x, mode=kw["mode"])

    x = torch.randn(3, dtype=F64, requires_grad=True)
    T.st(f)(x)
    assert sorted(seen) == ["hard", "smooth"]


def test_grad_replace() -> None:
    def f(x: torch.Tensor, forward: bool = True) -> torch.Tensor:
        return torch.floor(x) if forward else x * 3.0

    x = torch.tensor([0.4, 1.7], dtype=F64, requires_grad=True)
    y = T.grad_replace(f)(x)
    assert torch.equal(y, torch.floor(x.detach()))
    assert torch.equal(torch.autograd.grad(y.sum(), x)[0], torch.full((2,), 3.0, dtype=F64))


def test_nonfinite_soft_keeps_the_hard_forward() -> None:
    def f(x: torch.Tensor, mode: str = "smooth") -> torch.Tensor:
        return torch.sign(x) if mode == "hard" else x / torch.zeros_like(x)

    x = torch.tensor([1.0, -2.0], requires_grad=True)
    assert torch.equal(T.st(f)(x), torch.tensor([1.0, -1.0]))


def test_conformance_check_catches_an_undetached_hard() -> None:
    """The st_forward check must fail for hard + (soft - soft.detach()) with an undetached hard."""

    def bad_abs_st(x: torch.Tensor, softness: float = 0.1, mode: str = "smooth") -> torch.Tensor:
        return torch.abs(x) + (E.abs(x, softness, mode) - E.abs(x, softness, mode).detach())

    def inputs(g: torch.Generator, dtype: torch.dtype) -> tuple[tuple[torch.Tensor], dict]:  # type: ignore[type-arg]
        return (torch.randn(6, generator=g, dtype=torch.float64).to(dtype),), {}

    good = SoftOpCase(name="abs", fn=E.abs, inputs=inputs, st_fn=T.abs_st)
    check_st_forward(good)
    with pytest.raises(AssertionError, match="gradient"):
        check_st_forward(SoftOpCase(name="abs", fn=E.abs, inputs=inputs, st_fn=bad_abs_st))


def test_st_keeps_positional_arguments_after_mode_in_place() -> None:
    """Passing mode and the arguments after it by position gives the same result as by keyword."""
    from optarium.soft.axiswise import argsort_st

    x = torch.tensor([[0.3, -1.2, 0.8, 0.1]], dtype=torch.float64, requires_grad=True)
    by_pos = argsort_st(x, -1, False, 0.5, "smooth", "softsort")
    by_kw = argsort_st(x, dim=-1, descending=False, softness=0.5, mode="smooth", method="softsort")
    assert torch.equal(by_pos, by_kw)
    (g_pos,) = torch.autograd.grad((by_pos * torch.arange(16.0).view(4, 4)).sum(), x)
    (g_kw,) = torch.autograd.grad((by_kw * torch.arange(16.0).view(4, 4)).sum(), x)
    assert torch.equal(g_pos, g_kw) and g_pos.abs().sum() > 0
    with pytest.raises(TypeError, match="multiple values"):
        argsort_st(x, -1, False, 0.1, "c0", "softsort", method="neuralsort")
