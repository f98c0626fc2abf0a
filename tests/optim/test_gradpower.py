"""GradPower / AdamWPower: the spec's falsifiable checks (../shared/papers/gradpower.md, tests 1-8)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import scipy.optimize
import torch

from optarium.optim import AdamWPower, GradPower, foreach_sign_power, sign_power


def _relu_mlp(seed: int = 0, dtype: torch.dtype = torch.float64) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)).to(dtype)


def _data(
    seed: int = 0, n: int = 32, dtype: torch.dtype = torch.float64
) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 5, generator=gen, dtype=dtype)
    return x, torch.sin(x[:, :1] * 2) + x[:, 1:2]


def _train(model: torch.nn.Module, opt: torch.optim.Optimizer, steps: int, scale: float = 1.0) -> None:
    x, y = _data()
    for _ in range(steps):
        opt.zero_grad()
        (scale * ((model(x) - y) ** 2).mean()).backward()
        opt.step()


def _max_diff(a: torch.nn.Module, b: torch.nn.Module) -> float:
    return max(
        float((p - q).detach().abs().max()) for p, q in zip(a.parameters(), b.parameters(), strict=True)
    )


# 1. p = 1 is the identity.
def test_sign_power_at_one_is_exact_identity(seed: int) -> None:
    g = torch.randn(1000, dtype=torch.float64)
    g[::7] = 0.0
    assert torch.equal(sign_power(g, 1.0), g)


@pytest.mark.parametrize("foreach", [True, False])
def test_adamwpower_p1_is_adamw_bit_for_bit_over_100_steps(foreach: bool) -> None:
    a, b = _relu_mlp(), _relu_mlp()
    kw = {"lr": 3e-3, "betas": (0.9, 0.95), "weight_decay": 0.1, "eps": 1e-8}
    _train(a, torch.optim.AdamW(a.parameters(), **kw), 100)
    _train(b, AdamWPower(b.parameters(), p=1.0, foreach=foreach, **kw), 100)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))


def test_adamwpower_p_not_one_differs_from_adamw() -> None:
    a, b = _relu_mlp(), _relu_mlp()
    _train(a, torch.optim.AdamW(a.parameters(), lr=3e-3), 20)
    _train(b, AdamWPower(b.parameters(), lr=3e-3, p=1.2), 20)
    assert _max_diff(a, b) > 1e-5


# 2. Properties of the transform.
def test_sign_power_properties(seed: int) -> None:
    g = torch.randn(500, dtype=torch.float64) * 3
    p, q = 1.3, 0.7
    torch.testing.assert_close(sign_power(-g, p), -sign_power(g, p), rtol=0, atol=0)
    assert float(sign_power(torch.zeros(3, dtype=torch.float64), p).abs().max()) == 0.0
    torch.testing.assert_close(sign_power(g, p).abs(), g.abs() ** p, rtol=1e-15, atol=0)
    torch.testing.assert_close(sign_power(sign_power(g, p), q), sign_power(g, p * q), rtol=1e-13, atol=1e-15)
    assert torch.equal(torch.sign(sign_power(g, p)), torch.sign(g))


def test_sign_power_below_one_keeps_zero_finite() -> None:
    g = torch.tensor([0.0, -0.0, 1e-300, -4.0], dtype=torch.float64)
    out = sign_power(g, 0.5)
    assert torch.isfinite(out).all()
    assert out[0] == 0 and out[1] == 0
    assert float(out[3]) == -2.0


def test_foreach_sign_power_matches_per_tensor_and_dtypes() -> None:
    grads = [torch.randn(7, dtype=torch.float64), torch.randn(3, 4), torch.randn(5).to(torch.bfloat16)]
    out = foreach_sign_power(grads, 1.5)
    for g, o in zip(grads, out, strict=True):
        assert o.dtype == g.dtype
        torch.testing.assert_close(o, sign_power(g, 1.5), rtol=0, atol=0)


def test_fp16_within_range_equals_fp32_rounded_and_overflows_above() -> None:
    p = 1.5
    bound = 65504 ** (1 / p)  # about 1625
    g = torch.tensor([-1600.0, -3.0, 0.0, 1e-2, 7.5, 1620.0], dtype=torch.float16)
    expected = sign_power(g.float(), p).to(torch.float16)
    assert torch.equal(sign_power(g, p), expected)
    assert torch.isfinite(sign_power(g, p)).all()
    over = torch.tensor([bound * 1.01, -bound * 1.01], dtype=torch.float16)
    assert torch.isinf(sign_power(over, p)).all()  # documented: the fp16 range, not a bug


# 3. The wrapper works for any base.
def test_gradpower_sgd_p1_equals_sgd() -> None:
    a, b = _relu_mlp(), _relu_mlp()
    _train(a, torch.optim.SGD(a.parameters(), lr=0.05, momentum=0.9), 30)
    _train(b, GradPower(torch.optim.SGD(b.parameters(), lr=0.05, momentum=0.9), p=1.0), 30)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))


def test_gradpower_sgd_p2_one_step_is_minus_lr_g_abs_g() -> None:
    model = _relu_mlp()
    x, y = _data()
    before = [p.detach().clone() for p in model.parameters()]
    opt = GradPower(torch.optim.SGD(model.parameters(), lr=0.1), p=2.0)
    ((model(x) - y) ** 2).mean().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    opt.step()
    for p, p0, g in zip(model.parameters(), before, grads, strict=True):
        torch.testing.assert_close(p.detach(), p0 - 0.1 * g * g.abs(), rtol=1e-14, atol=1e-16)


def test_per_group_p_is_used() -> None:
    a = torch.tensor([0.5, -2.0], dtype=torch.float64, requires_grad=True)
    b = torch.tensor([0.5, -2.0], dtype=torch.float64, requires_grad=True)
    opt = GradPower(torch.optim.SGD([{"params": [a], "p": 2.0}, {"params": [b]}], lr=1.0), p=1.0)
    opt.zero_grad()
    (a.pow(2).sum() / 2 + b.pow(2).sum() / 2).backward()  # gradient = the value
    opt.step()
    torch.testing.assert_close(a.detach(), torch.tensor([0.5 - 0.25, -2.0 + 4.0], dtype=torch.float64))
    torch.testing.assert_close(b.detach(), torch.zeros(2, dtype=torch.float64))


# 4. Loss-scale invariance: Adam-type yes (eps -> 0), SGD no.
def test_loss_scale_invariance_adamwpower_but_not_sgd() -> None:
    def run(make: object, scale: float) -> torch.nn.Module:
        model = _relu_mlp(seed=3)
        with torch.no_grad():  # make some ReLU units dead: their gradients are exactly zero
            model[0].bias[:4] = -50.0
        _train(model, make(model.parameters()), 30, scale=scale)  # type: ignore[operator]
        return model

    adam = lambda ps: AdamWPower(ps, lr=1e-2, eps=1e-30, weight_decay=0.0, p=1.2)  # noqa: E731
    a1, a10 = run(adam, 1.0), run(adam, 10.0)
    for p, q in zip(a1.parameters(), a10.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-6, atol=1e-7)
    sgd = lambda ps: GradPower(torch.optim.SGD(ps, lr=1e-2), p=1.2)  # noqa: E731
    assert _max_diff(run(sgd, 1.0), run(sgd, 10.0)) > 1e-2


# 5b. Convergence to a known optimum: logistic regression on non-separable data (quadratic: conformance).
def test_adamwpower_reaches_logistic_regression_optimum() -> None:
    gen = torch.Generator().manual_seed(0)
    n, d = 500, 10
    X = torch.randn(n, d, generator=gen, dtype=torch.float64)
    w_true = torch.randn(d, generator=gen, dtype=torch.float64)
    y = (torch.rand(n, generator=gen, dtype=torch.float64) < torch.sigmoid(X @ w_true)).to(torch.float64)

    def nll(w: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.binary_cross_entropy_with_logits(X @ w, y)

    def f_and_grad(w_np: np.ndarray) -> tuple[float, np.ndarray]:
        w = torch.tensor(w_np, requires_grad=True)
        loss = nll(w)
        loss.backward()
        return float(loss.detach()), w.grad.numpy().copy()

    ref = scipy.optimize.minimize(f_and_grad, np.zeros(d), jac=True, method="BFGS", options={"gtol": 1e-12})
    w = torch.zeros(d, dtype=torch.float64, requires_grad=True)
    opt = AdamWPower([w], lr=1e-2, weight_decay=0.0, p=1.2)
    for _ in range(6000):
        opt.zero_grad()
        nll(w).backward()
        opt.step()
    assert float((w.detach() - torch.from_numpy(ref.x)).abs().max()) < 1e-4


# 6. Raw gradients are restored.
@pytest.mark.parametrize("foreach", [True, False])
def test_raw_gradients_restored_after_step(foreach: bool) -> None:
    model = _relu_mlp()
    x, y = _data()
    opt = AdamWPower(model.parameters(), lr=1e-2, p=1.5, foreach=foreach)
    ((model(x) - y) ** 2).mean().backward()
    grads = [p.grad for p in model.parameters()]
    copies = [g.clone() for g in grads]
    opt.step()
    for p, g, c in zip(model.parameters(), grads, copies, strict=True):
        assert p.grad is g
        assert torch.equal(p.grad, c)


# 7. Bad input and torch integration.
@pytest.mark.parametrize("p", [0.0, -1.0, float("nan"), float("inf")])
def test_invalid_p_raises_value_error_naming_p(p: float) -> None:
    x = torch.zeros(2, requires_grad=True)
    with pytest.raises(ValueError, match=r"^p:"):
        GradPower(torch.optim.SGD([x], lr=0.1), p=p)
    with pytest.raises(ValueError, match="p"):
        GradPower(torch.optim.SGD([{"params": [x], "p": p}], lr=0.1), p=1.2)


def test_non_optimizer_base_raises_type_error() -> None:
    with pytest.raises(TypeError, match="base"):
        GradPower(object(), p=1.2)  # type: ignore[arg-type]


def test_sparse_gradients_raise() -> None:
    emb = torch.nn.Embedding(10, 3, sparse=True)
    opt = GradPower(torch.optim.SGD(emb.parameters(), lr=0.1), p=1.2)
    emb(torch.tensor([1, 2])).sum().backward()
    with pytest.raises(ValueError, match="sparse"):
        opt.step()


def test_is_an_optimizer_and_lr_scheduler_reaches_base() -> None:
    x = torch.zeros(2, requires_grad=True)
    base = torch.optim.AdamW([x], lr=1.0)
    opt = GradPower(base, p=1.2)
    assert isinstance(opt, torch.optim.Optimizer)
    assert opt.param_groups is base.param_groups and opt.state is base.state
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 0.5**step)
    x.sum().backward()
    opt.step()
    sched.step()
    assert base.param_groups[0]["lr"] == 0.5


def test_step_closure_is_evaluated_under_grad_and_returns_loss() -> None:
    x = torch.tensor([1.0, -2.0], dtype=torch.float64, requires_grad=True)
    opt = AdamWPower([x], lr=0.1, p=1.2)

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = (x**2).sum()
        loss.backward()
        return loss

    with torch.no_grad():
        loss = opt.step(closure)
    assert loss.requires_grad  # evaluated under enable_grad despite the outer no_grad
    assert float(loss.detach()) == 5.0
    assert float(x.detach().abs().max()) < 2.0


def test_grad_scaler_sees_unscaled_gradients() -> None:
    a, b = _relu_mlp(dtype=torch.float32), _relu_mlp(dtype=torch.float32)
    x, y = (t.float() for t in _data())
    opt_a = AdamWPower(a.parameters(), lr=1e-2, p=1.5)
    opt_b = AdamWPower(b.parameters(), lr=1e-2, p=1.5)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**12)
    for _ in range(5):
        opt_a.zero_grad()
        ((a(x) - y) ** 2).mean().backward()
        opt_a.step()
        opt_b.zero_grad()
        scaler.scale(((b(x) - y) ** 2).mean()).backward()
        scaler.step(opt_b)
        scaler.update()
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


# 8. state_dict round trip, with p per group.
def test_state_dict_round_trip_keeps_per_group_p() -> None:
    model = _relu_mlp()
    groups = [{"params": model[0].parameters(), "p": 1.1}, {"params": model[2].parameters(), "p": 1.5}]
    opt = AdamWPower(groups, lr=1e-2)
    _train(model, opt, 5)
    saved_model, saved = copy.deepcopy(model), copy.deepcopy(opt.state_dict())
    assert [g["p"] for g in saved["param_groups"]] == [1.1, 1.5]
    _train(model, opt, 5)

    opt2 = AdamWPower(
        [{"params": saved_model[0].parameters()}, {"params": saved_model[2].parameters()}], lr=1.0, p=2.0
    )
    opt2.load_state_dict(saved)
    assert [g["p"] for g in opt2.param_groups] == [1.1, 1.5]
    _train(saved_model, opt2, 5)
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), saved_model.parameters(), strict=True))


def test_load_state_dict_rejects_invalid_p() -> None:
    x = torch.zeros(2, requires_grad=True)
    opt = AdamWPower([x], lr=1e-2)
    state = copy.deepcopy(opt.state_dict())
    state["param_groups"][0]["p"] = -1.0
    with pytest.raises(ValueError, match="p"):
        opt.load_state_dict(state)


def test_muonpower_wraps_torch_muon() -> None:
    """MuonPower = GradPower(torch.optim.Muon): p = 1 is Muon; p = 2 is Muon fed with g|g|."""
    torch.manual_seed(0)
    w = [torch.randn(8, 6, dtype=torch.float32, requires_grad=True) for _ in range(3)]
    x = torch.randn(16, 6)

    def grads(ws: list[torch.Tensor]) -> None:
        for t in ws:
            t.grad = None
        sum(((x @ t.T) ** 2).mean() for t in ws).backward()

    ref = [t.detach().clone().requires_grad_() for t in w]
    power = GradPower(torch.optim.Muon(w, lr=0.02), p=2.0)
    muon = torch.optim.Muon(ref, lr=0.02)
    for _ in range(3):
        grads(w)
        grads(ref)
        for t in ref:
            t.grad = t.grad * t.grad.abs()
        power.step()
        muon.step()
    for a, b in zip(w, ref, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)


@pytest.mark.gpu
def test_cuda_step_matches_cpu() -> None:
    """dtype and device follow the parameters: a CUDA step equals the CPU step."""
    cpu, gpu = _relu_mlp(dtype=torch.float32), _relu_mlp(dtype=torch.float32).cuda()
    x, y = (t.float() for t in _data())
    for model, xx, yy in ((cpu, x, y), (gpu, x.cuda(), y.cuda())):
        opt = AdamWPower(model.parameters(), lr=1e-2, p=1.2)
        for _ in range(3):
            opt.zero_grad()
            ((model(xx) - yy) ** 2).mean().backward()
            opt.step()
    for p, q in zip(cpu.parameters(), gpu.parameters(), strict=True):
        torch.testing.assert_close(p, q.cpu(), rtol=1e-4, atol=1e-5)


def test_nonfinite_policy_raise_and_skip() -> None:
    from optarium.optim import NonFiniteGradientError

    x = torch.ones(3, requires_grad=True)
    opt = AdamWPower([x], lr=0.1)
    (x * float("nan")).sum().backward()
    with pytest.raises(NonFiniteGradientError, match="nonfinite='skip'"):
        opt.step()
    assert torch.equal(x.detach(), torch.ones(3)) and len(opt.state) == 0
    skip = AdamWPower([x], lr=0.1, nonfinite="skip")
    skip.step()
    assert skip.skipped_steps == 1 and torch.equal(x.detach(), torch.ones(3))
    assert torch.isnan(x.grad).all()  # the raw gradient is left as it was


def test_overflow_of_the_transform_is_caught_before_the_base_steps() -> None:
    """A finite gradient whose power overflows (float32, |g|^1.5 > 3.4e38) is non-finite for the policy."""
    from optarium.optim import NonFiniteGradientError

    x = torch.ones(2, requires_grad=True)
    opt = AdamWPower([x], lr=0.1, p=1.5)
    x.grad = torch.tensor([1e30, 1.0])
    with pytest.raises(NonFiniteGradientError):
        opt.step()
    assert torch.equal(x.detach(), torch.ones(2)) and len(opt.state) == 0
    assert torch.equal(x.grad, torch.tensor([1e30, 1.0]))  # the raw gradient is untouched


def test_wrapping_twice_is_refused() -> None:
    x = torch.zeros(2, requires_grad=True)
    base = torch.optim.SGD([x], lr=0.1)
    once = GradPower(base, p=2.0)
    with pytest.raises(ValueError, match=r"^base: already wrapped"):
        GradPower(base, p=0.5)
    with pytest.raises(ValueError, match=r"^base: already wrapped"):
        GradPower(once, p=0.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^differentiable:"):
        AdamWPower([x], differentiable=True)
