"""ClipSGD: the spec's falsifiable checks (../shared/papers/clip-sgd-heavy-tail.md, tests 1, 3, 4, 6-8)."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from optarium.optim._nonfinite import NonFiniteGradientError
from optarium.optim.clip_sgd import BallProjection, ClipSGD, clip_by_norm
from optarium.problems.heavy_tail import student_t
from optarium.problems.weakly_convex import NonconvexLeastSquares


def _mlp(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1)).double()


def _train(model: torch.nn.Module, opt: torch.optim.Optimizer, steps: int, scale: float = 1.0) -> None:
    gen = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x = torch.randn(32, 5, generator=gen, dtype=torch.float64)
        y = torch.sin(2 * x[:, :1]) + x[:, 1:2]
        opt.zero_grad()
        (scale * ((model(x) - y) ** 2).mean()).backward()
        opt.step()


def _flat(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


# 1. clip_tau: norm <= tau, direction unchanged, identity below tau; tau = inf is SGD bit for bit.
def test_clip_by_norm_properties(seed: int) -> None:
    g = torch.randn(200, 7, dtype=torch.float64) * torch.logspace(-2, 2, 200, dtype=torch.float64)[:, None]
    tau = 1.5
    c = clip_by_norm(g, tau)
    norms, cn = g.norm(dim=-1), c.norm(dim=-1)
    assert float((cn - tau).max()) <= 1e-12
    small = norms <= tau
    assert small.any() and (~small).any()
    assert torch.equal(c[small], g[small])
    torch.testing.assert_close(cn[~small], torch.full_like(cn[~small], tau), rtol=1e-14, atol=0)
    cos = (c * g).sum(-1) / (cn * norms)
    torch.testing.assert_close(cos, torch.ones_like(cos), rtol=1e-14, atol=1e-14)
    assert torch.equal(clip_by_norm(g, math.inf), g)
    assert torch.equal(clip_by_norm(torch.zeros(3, 4), 1.0), torch.zeros(3, 4))


@pytest.mark.parametrize("foreach", [True, False])
def test_clip_inf_is_sgd_bit_for_bit(foreach: bool) -> None:
    a, b = _mlp(), _mlp()
    _train(a, torch.optim.SGD(a.parameters(), lr=0.05, foreach=foreach), 30)
    _train(b, ClipSGD(b.parameters(), lr=0.05, clip=math.inf, foreach=foreach), 30)
    assert torch.equal(_flat(a), _flat(b))


def test_inactive_clip_is_sgd_and_active_clip_is_sgd_on_clipped_global_gradient() -> None:
    a, b = _mlp(), _mlp()
    _train(a, torch.optim.SGD(a.parameters(), lr=0.05), 10)
    _train(b, ClipSGD(b.parameters(), lr=0.05, clip=1e6), 10)
    assert torch.equal(_flat(a), _flat(b))
    # active: one step equals SGD after torch.nn.utils.clip_grad_norm_ (global norm over all tensors)
    model, ref = _mlp(), _mlp()
    x = torch.randn(16, 5, dtype=torch.float64)
    for m in (model, ref):
        (100 * m(x).square().mean()).backward()
    total = torch.cat([p.grad.reshape(-1) for p in ref.parameters()]).norm()
    assert float(total) > 0.1
    ClipSGD(model.parameters(), lr=0.1, clip=0.1).step()
    with torch.no_grad():
        for p in ref.parameters():
            p.add_(p.grad * (0.1 / total), alpha=-0.1)
    torch.testing.assert_close(_flat(model), _flat(ref), rtol=1e-14, atol=1e-15)


def test_step_moves_at_most_lr_times_clip_and_per_tensor_mode() -> None:
    model = _mlp()
    before = _flat(model)
    x = torch.randn(16, 5, dtype=torch.float64)
    (1e3 * model(x).square().mean()).backward()
    ClipSGD(model.parameters(), lr=0.3, clip=0.7).step()
    assert float((_flat(model) - before).norm()) == pytest.approx(0.3 * 0.7, rel=1e-12)
    # per_tensor: every tensor moves by lr * min(||g_i||, tau)
    model = _mlp()
    before = [p.detach().clone() for p in model.parameters()]
    (1e3 * model(x).square().mean()).backward()
    grads = [p.grad.clone() for p in model.parameters()]
    ClipSGD(model.parameters(), lr=0.3, clip=0.7, clip_mode="per_tensor").step()
    for p, p0, g in zip(model.parameters(), before, grads, strict=True):
        moved = float((p.detach() - p0).norm())
        assert moved == pytest.approx(0.3 * min(float(g.norm()), 0.7), rel=1e-12)


def test_maximize_ascends() -> None:
    a = torch.tensor([3.0, 4.0], dtype=torch.float64, requires_grad=True)
    opt = ClipSGD([a], lr=1.0, clip=1.0, maximize=True)
    (0.5 * a.square().sum()).backward()  # gradient (3, 4), norm 5
    opt.step()
    torch.testing.assert_close(a.detach(), torch.tensor([3.6, 4.8], dtype=torch.float64))


# 3. Projected SGD stays in the ball.
def test_ball_projection_keeps_iterates_in_ball(seed: int) -> None:
    model = _mlp(seed)
    r = 2.0
    BallProjection(r)(list(model.parameters()))
    opt = ClipSGD(model.parameters(), lr=0.5, clip=10.0, projection=BallProjection(r))
    gen = torch.Generator().manual_seed(seed)
    for _ in range(30):
        opt.zero_grad()
        x = torch.randn(16, 5, generator=gen, dtype=torch.float64)
        (50 * (model(x) - 3).square().mean()).backward()
        opt.step()
        assert float(_flat(model).norm()) <= r + 1e-12
    # the projection of a point inside is the identity; outside it lands on the sphere along the ray
    inside = [torch.tensor([0.3, 0.4], dtype=torch.float64)]
    BallProjection(1.0)(inside)
    assert torch.equal(inside[0], torch.tensor([0.3, 0.4], dtype=torch.float64))
    out = [torch.tensor([3.0], dtype=torch.float64), torch.tensor([4.0], dtype=torch.float64)]
    BallProjection(1.0, center=[torch.zeros(1), torch.ones(1)])(out)
    h = 1 / math.sqrt(2)  # offset (3, 3) from the center (0, 1), scaled to unit length
    torch.testing.assert_close(
        torch.cat(out), torch.tensor([h, 1 + h], dtype=torch.float64), rtol=1e-14, atol=0
    )


# 4. Noise-free run reaches a stationary point of the weakly convex problem 1.
def test_noise_free_clip_sgd_reaches_stationarity_on_problem1() -> None:
    prob = NonconvexLeastSquares.make()
    x = torch.zeros(prob.dim, dtype=torch.float64, requires_grad=True)
    opt = ClipSGD([x], lr=0.02, clip=100.0)
    for _ in range(2000):
        opt.zero_grad()
        prob.value(x).backward()
        opt.step()
    assert float(prob.moreau_grad_norm(x.detach())) < 1e-4


# 6. Tail comparison at equal step: the optimizer (per seed, one after the other) vs the batched runner.
def test_batched_runner_matches_optimizer_per_seed() -> None:
    from optarium.problems.heavy_tail import StudentTNoise
    from optarium.problems.sgd_simulation import simulate
    from optarium.problems.weakly_convex import WeaklyConvexOracle

    problem, noise = WeaklyConvexOracle("ls", 0.5), StudentTNoise(1.5)
    gen = torch.Generator().manual_seed(3)
    u = noise.sample((40, 4, problem.dim), torch.Generator().manual_seed(3))
    last, _ = simulate(
        problem, noise, [0.01, 0.01], [2.0, math.inf], seeds=4, steps=40, generator=gen, chunk=40
    )
    for j in range(4):
        for k, clip in enumerate((2.0, math.inf)):
            x = problem.x0.clone().requires_grad_()
            opt = ClipSGD([x], lr=0.01, clip=clip)
            for t in range(40):
                x.grad = problem.grad(x.detach()) + u[t, j]
                opt.step()
            torch.testing.assert_close(
                problem.metric(x.detach().view(1, -1))[0], last[k, j], rtol=1e-10, atol=0
            )


def test_equal_step_tails_clip_vs_sgd_with_movement_control() -> None:
    """Spec test 6 (scaled to fit ~3 s): ν = 1.5, the same η = 0.01 for both, τ = 2, paired noise."""
    from optarium.problems.heavy_tail import StudentTNoise
    from optarium.problems.sgd_simulation import quantile, simulate
    from optarium.problems.weakly_convex import WeaklyConvexOracle

    problem = WeaklyConvexOracle("ls", 0.5)
    start = float(problem.metric(problem.x0.view(1, -1))[0])
    gen = torch.Generator().manual_seed(11)
    last, _ = simulate(problem, StudentTNoise(1.5), [0.01, 0.01, 0.01], [2.0, math.inf, 0.05], seeds=500,
                       steps=600, generator=gen)  # fmt: skip
    clip, sgd, tiny = last
    assert quantile(clip, 0.99) < 0.5 * quantile(sgd, 0.99)
    assert quantile(clip, 0.5) <= quantile(sgd, 0.5)
    assert quantile(clip, 0.5) < 0.5 * start
    # a "clip" that only shrinks the step has flat tails but fails the movement check
    assert quantile(tiny, 0.99) < 0.5 * quantile(sgd, 0.99)
    assert not quantile(tiny, 0.5) < 0.5 * start


# 7. Bad input.
@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"clip": 0.0}, "clip"),
        ({"clip": -1.0}, "clip"),
        ({"clip": float("nan")}, "clip"),
        ({"lr": float("inf")}, "lr"),  # lr = 0 is valid (torch's rule; conformance check zero_lr)
        ({"lr": -0.1}, "lr"),
        ({"lr": float("inf")}, "lr"),
        ({"clip_mode": "layer"}, "clip_mode"),
        ({"nonfinite": "ignore"}, "nonfinite"),
    ],
)
def test_invalid_hyperparameters_raise_value_error_naming_them(kwargs: dict, name: str) -> None:
    x = torch.zeros(2, requires_grad=True)
    with pytest.raises(ValueError, match=rf"^{name}"):
        ClipSGD([x], **{"lr": 0.1, **kwargs})


def test_bad_types_raise_type_error() -> None:
    x = torch.zeros(2, requires_grad=True)
    with pytest.raises(TypeError, match="projection"):
        ClipSGD([x], lr=0.1, projection=3.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="maximize"):
        ClipSGD([x], lr=0.1, maximize=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="clip"):
        ClipSGD([{"params": [x], "clip": -2.0}], lr=0.1)
    with pytest.raises(ValueError, match="radius"):
        BallProjection(0.0)


# 8. Reproducibility, state, schedulers, closures, non-finite gradients.
def test_state_dict_round_trip_and_group_clip() -> None:
    model = _mlp()
    groups = [{"params": model[0].parameters(), "clip": 0.05}, {"params": model[2].parameters()}]
    opt = ClipSGD(groups, lr=0.05, clip=0.2)
    _train(model, opt, 5)
    saved_model, saved = copy.deepcopy(model), copy.deepcopy(opt.state_dict())
    assert [g["clip"] for g in saved["param_groups"]] == [0.05, 0.2]
    _train(model, opt, 5)
    opt2 = ClipSGD([{"params": saved_model[0].parameters()}, {"params": saved_model[2].parameters()}], lr=1.0)
    opt2.load_state_dict(saved)
    _train(saved_model, opt2, 5)
    assert torch.equal(_flat(model), _flat(saved_model))
    bad = copy.deepcopy(saved)
    bad["param_groups"][0]["clip"] = 0.0
    with pytest.raises(ValueError, match="clip"):
        opt2.load_state_dict(bad)


def test_lr_scheduler_and_closure() -> None:
    x = torch.tensor([1.0, -2.0], dtype=torch.float64, requires_grad=True)
    opt = ClipSGD([x], lr=1.0, clip=math.inf)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: 0.5**k)

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = 0.5 * (x**2).sum()
        loss.backward()
        return loss

    with torch.no_grad():
        loss = opt.step(closure)
    assert loss.requires_grad and float(loss.detach()) == 2.5
    assert torch.equal(x.detach(), torch.zeros(2, dtype=torch.float64))
    sched.step()
    assert opt.param_groups[0]["lr"] == 0.5


def test_nonfinite_raise_skip_and_float32_norm_overflow() -> None:
    x = torch.ones(3, requires_grad=True)
    opt = ClipSGD([x], lr=0.1)
    x.grad = torch.tensor([1.0, float("nan"), 0.0])
    with pytest.raises(NonFiniteGradientError):
        opt.step()
    assert torch.equal(x.detach(), torch.ones(3))
    skip = ClipSGD([x], lr=0.1, nonfinite="skip")
    x.grad = torch.tensor([1.0, float("inf"), 0.0])
    skip.step()
    assert skip.skipped_steps == 1 and torch.equal(x.detach(), torch.ones(3))
    # finite float32 gradients whose norm overflows float32 are clipped correctly, not skipped
    x.grad = torch.tensor([3e30, 4e30, 0.0])
    skip.step()
    assert skip.skipped_steps == 1
    torch.testing.assert_close(x.detach(), torch.tensor([1 - 0.1 * 0.6, 1 - 0.1 * 0.8, 1.0]))


def test_determinism_and_dtype_follow_params() -> None:
    def run() -> torch.Tensor:
        x = torch.zeros(20, dtype=torch.float32, requires_grad=True)
        opt = ClipSGD([x], lr=0.01, clip=2.0)
        gen = torch.Generator().manual_seed(5)
        for _ in range(50):
            x.grad = (x.detach() - 1) + student_t(20, 1.5, generator=gen, dtype=torch.float32)
            opt.step()
        return x.detach()

    a, b = run(), run()
    assert a.dtype == torch.float32 and torch.equal(a, b)


@pytest.mark.gpu
def test_cuda_step_matches_cpu() -> None:
    """dtype and device follow the parameters: a CUDA step equals the CPU step."""
    cpu, gpu = _mlp().float(), _mlp().float().cuda()
    x = torch.randn(16, 5)
    for model, xx in ((cpu, x), (gpu, x.cuda())):
        opt = ClipSGD(model.parameters(), lr=0.1, clip=0.5)
        for _ in range(3):
            opt.zero_grad()
            (10 * model(xx).square().mean()).backward()
            opt.step()
    torch.testing.assert_close(_flat(cpu), _flat(gpu).cpu(), rtol=1e-4, atol=1e-5)


# 9. norm_hooks: the squared norms come from the backward pass and the iterates are bit for bit the same.
def _train_f32(norm_hooks: bool, accumulate: int, modify: bool, clip_mode: str = "global") -> torch.Tensor:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    opt = ClipSGD(model.parameters(), lr=0.1, clip=0.05, clip_mode=clip_mode, norm_hooks=norm_hooks)
    gen = torch.Generator().manual_seed(1)
    for _ in range(6):
        opt.zero_grad()
        for _ in range(accumulate):
            x = torch.randn(32, 5, generator=gen)
            (3 * (model(x) - torch.sin(x[:, :1])).square().mean()).backward()
        if norm_hooks:
            assert len(opt._norm_cache) == 4  # every parameter's norm was taken during backward
        if modify:
            model[0].weight.grad.mul_(0.5)  # in place (version bump): must be read again in the step
            model[2].bias.grad = torch.full_like(model[2].bias, 7.0)  # replaced by hand: read again
        opt.step()
    return _flat(model)


@pytest.mark.parametrize("clip_mode", ["global", "per_tensor"])
@pytest.mark.parametrize(("accumulate", "modify"), [(1, False), (3, False), (2, True)])
def test_norm_hooks_give_the_same_iterates_bit_for_bit(accumulate: int, modify: bool, clip_mode: str) -> None:
    ref = _train_f32(False, accumulate, modify, clip_mode)
    assert torch.equal(_train_f32(True, accumulate, modify, clip_mode), ref)
    # the clip was active: the run differs from plain SGD's
    torch.manual_seed(0)
    assert not torch.equal(
        ref, _flat(torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1)))
    )


def test_norm_hooks_stale_cache_is_not_used() -> None:
    """A cached norm whose gradient changed in place is recomputed: the step clips by the current norm."""
    x = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    opt = ClipSGD([x], lr=1.0, clip=1.0, norm_hooks=True)
    (x * torch.tensor([3.0, 4.0], dtype=torch.float64)).sum().backward()  # grad (3, 4), norm 5 cached
    assert float(opt._norm_cache[id(x)][2]) == 25.0
    x.grad.mul_(0.1)  # norm 0.5 < clip: no clipping
    opt.step()
    assert torch.equal(x.detach(), -torch.tensor([3.0, 4.0], dtype=torch.float64) * 0.1)
    assert opt._norm_cache == {}


def test_norm_hooks_survive_deepcopy_pickle_and_state_dict() -> None:
    import pickle

    model = _mlp()
    opt = ClipSGD(model.parameters(), lr=0.05, clip=0.1, norm_hooks=True)
    _train(model, opt, 3)
    for clone in (copy.deepcopy, lambda o: pickle.loads(pickle.dumps(o))):
        twin = clone(opt)
        assert twin.norm_hooks and twin._norm_cache == {}
        p = twin.param_groups[0]["params"][0]
        p.sum().backward()
        assert id(p) in twin._norm_cache and id(p) not in opt._norm_cache  # its own hooks, on its params
        twin.zero_grad()
    # load_state_dict keeps one hook per parameter (no duplicates)
    opt.load_state_dict(opt.state_dict())
    assert len(opt._hook_handles) == 4
    for p in model.parameters():
        assert len(p._post_accumulate_grad_hooks) == 1
    with pytest.raises(TypeError, match="norm_hooks"):
        ClipSGD(model.parameters(), norm_hooks=1)  # type: ignore[arg-type]
