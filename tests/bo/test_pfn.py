"""α-PFN: bar-distribution entropy and moments, the RFF GP prior, network invariances, the acquisition and the
ask/tell strategy's contract (fast, untrained networks); and, with the trained fixed-lengthscale test networks
(``slow``: they are trained once, minutes of CPU, and cached), agreement with exact GP quantities in 1-D:
the posterior predictive, the f*-conditional, and the information gain I(y(x); f*) by Monte Carlo."""

from __future__ import annotations

import io
import math

import pytest
import torch

from optarium.bo._pfn_cache import RECIPES
from optarium.bo.pfn import (
    AlphaPFNAcquisition,
    BarDistribution,
    GPRFFPrior,
    PFNBayesOpt,
    PFNTransformer,
    _argmax_on,
    _argmax_on_grid2,
    _optimum_grid,
    style_vector,
    train_pfn,
    untrained_head,
)

D = torch.float64
LS, NOISE = 0.2, 1e-3


# ---------------------------------------------------------------------------------------------- bars
def test_bar_single_bucket_entropy_is_log_width() -> None:
    borders = torch.tensor([-2.0, -1.0, 0.0, 0.5, 2.0, 3.0], dtype=D)
    bar = BarDistribution(borders)
    logits = torch.full((5,), -1e4, dtype=D)
    logits[3] = 0.0
    assert float(bar.entropy(logits)) == pytest.approx(math.log(1.5), abs=1e-9)
    mean, var = bar.mean_var(logits)
    assert float(mean) == pytest.approx(1.25) and float(var) == pytest.approx(1.5**2 / 12)


def test_bar_discretised_normal_entropy_and_moments() -> None:
    borders = torch.linspace(-6, 6, 1001, dtype=D)
    bar = BarDistribution(borders)
    cdf = torch.special.ndtr(borders)
    cdf[0], cdf[-1] = 0.0, 1.0
    logits = torch.log((cdf[1:] - cdf[:-1]).clamp_min(1e-300))
    assert float(bar.entropy(logits)) == pytest.approx(0.5 * math.log(2 * math.pi * math.e), abs=1e-2)
    mean, var = bar.mean_var(logits)
    assert abs(float(mean)) < 1e-6 and float(var) == pytest.approx(1.0, abs=1e-3)
    y = torch.linspace(-3, 3, 13, dtype=D)
    dens = bar.log_density(logits.expand(13, -1), y).exp()
    ref = torch.exp(-(y**2) / 2) / math.sqrt(2 * math.pi)
    assert torch.allclose(dens, ref, atol=2e-3)
    assert torch.allclose(bar.cdf(logits.expand(13, -1), y), torch.special.ndtr(y), atol=2e-3)


def test_bar_tails_integrate_to_their_bucket_mass() -> None:
    borders = torch.tensor([-1.0, 0.0, 1.0, 2.0, 4.0], dtype=D)
    bar = BarDistribution(borders)
    logits = torch.tensor([0.3, -0.2, 0.1, 0.7], dtype=D)
    p = torch.softmax(logits, -1)
    left = torch.linspace(-60, 0, 200001, dtype=D)
    right = torch.linspace(2, 80, 200001, dtype=D)
    for grid, mass in ((left, p[0]), (right, p[-1])):
        dens = bar.log_density(logits.expand(grid.numel(), -1), grid).exp()
        assert float(torch.trapezoid(dens, grid)) == pytest.approx(float(mass), abs=1e-4)
    # half of each tail's mass within its bucket width, and the CDF ends at 0 and 1
    assert float(bar.cdf(logits, torch.tensor(-1.0, dtype=D))) == pytest.approx(float(p[0]) / 2, abs=1e-9)
    assert float(bar.cdf(logits, torch.tensor(1e6, dtype=D))) == pytest.approx(1.0, abs=1e-9)
    # the mean from the moments equals the density's first moment
    grid = torch.linspace(-60, 80, 400001, dtype=D)
    dens = bar.log_density(logits.expand(grid.numel(), -1), grid).exp()
    assert float(torch.trapezoid(grid * dens, grid)) == pytest.approx(float(bar.mean(logits)), abs=1e-3)


def test_bar_rejects_bad_borders() -> None:
    with pytest.raises(ValueError, match="borders"):
        BarDistribution(torch.tensor([0.0, 1.0, 1.0, 2.0]))
    with pytest.raises(ValueError, match="num_buckets"):
        BarDistribution.from_samples(torch.randn(10), 50)


# ---------------------------------------------------------------------------------------------- prior
def test_rff_prior_covariance_and_optimum() -> None:
    prior = GPRFFPrior((1,), num_features=256, lengthscale=LS, noise_sd=NOISE)
    gen = torch.Generator().manual_seed(0)
    x = torch.tensor([[0.3], [0.4], [0.7]])
    cov = torch.zeros(3, 3)
    for _ in range(8):  # 2,000 functions in chunks (the optimum search holds a (b, 256, M) tensor)
        draw = prior.sample_functions(250, 1, gen)
        f = draw(x.expand(250, -1, -1))
        cov += f.T @ f / 2000
    ref = torch.exp(-(torch.cdist(x, x) ** 2) / (2 * LS**2))
    assert torch.allclose(cov, ref, atol=0.08)
    draw = prior.sample_functions(64, 1, gen)
    dense = torch.linspace(0, 1, 4001)[:, None]
    fmax = torch.cat([draw(c.expand(64, -1, -1)) for c in dense.split(1000)], 1).max(1).values
    assert float((fmax - draw.f_opt).max()) < 2e-4  # the refined grid optimum is the function's maximum
    vals = draw(draw.x_opt[:, None, :]).squeeze(1)
    assert torch.allclose(vals, draw.f_opt, atol=1e-5)


def test_prior_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="lengthscale"):
        GPRFFPrior((1,), lengthscale=-1.0)
    with pytest.raises(ValueError, match="lengthscale"):
        GPRFFPrior((1,), lengthscale=("gamma", 1.0, 1.0))
    with pytest.raises(ValueError, match="dims"):
        GPRFFPrior(())


def test_hyperprior_recipe_draws_lognormal_lengthscales_per_function_and_dimension() -> None:
    """The full scale's prior (recipe ``hyper-ls``): log lengthscale ~ N(log 0.2, 0.5^2), independently per
    function and dimension, and the RFF frequencies really are scaled by them."""
    prior = GPRFFPrior.from_config(RECIPES["hyper-ls"]["prior"])
    assert prior.dims == (1, 2) and prior.lengthscale == ("lognormal", math.log(0.2), 0.5)
    gen = torch.Generator().manual_seed(0)
    draws = [prior.sample_functions(128, 2, gen) for _ in range(4)]  # 1,024 log-lengthscales
    ls = torch.cat([d.lengthscale for d in draws]).double()
    assert ls.shape == (512, 2)
    logl = ls.log()
    n = logl.numel()
    # moments: mean within 4 SE (0.5 / sqrt(n)), sd within 4 SE (0.5 / sqrt(2n)); a sd of 0.25 or 0.75, or
    # the paper's v1 location -0.75 + log(d) / 2, would fail
    assert abs(float(logl.mean()) - math.log(0.2)) < 4 * 0.5 / math.sqrt(n)
    assert abs(float(logl.std()) - 0.5) < 4 * 0.5 / math.sqrt(2 * n)
    assert abs(float(torch.corrcoef(logl.T)[0, 1])) < 4 / math.sqrt(512)  # independent per dimension
    # the frequencies of each function and dimension have scale 1 / lengthscale (M = 256 features)
    omega = torch.cat([d.omega for d in draws]).double()  # (512, M, 2)
    est = 1 / omega.square().mean(1).sqrt()
    assert float((est / ls).log().abs().median()) < 0.1
    one = prior.sample_functions(256, 1, gen).lengthscale.double().log()  # 1-D: the same law
    assert one.shape == (256, 1) and abs(float(one.mean()) - math.log(0.2)) < 4 * 0.5 / math.sqrt(256)


def test_fast_2d_grid_optimum_equals_the_direct_grid_and_the_dense_maximum() -> None:
    prior = GPRFFPrior.from_config(RECIPES["hyper-ls"]["prior"])
    draw = prior.sample_functions(16, 2, torch.Generator().manual_seed(1))
    grid, _ = _optimum_grid(2)
    x_fast, f_fast = _argmax_on_grid2(draw, grid)
    _, f_dir = _argmax_on(draw, grid.expand(16, -1, -1))
    assert torch.allclose(f_fast, f_dir, atol=1e-4)
    assert torch.allclose(draw(x_fast[:, None, :]).squeeze(1), f_fast, atol=1e-4)
    t = torch.linspace(0, 1, 401)  # a dense grid, by the fast evaluation checked against the direct one above
    _, fmax = _argmax_on_grid2(draw, torch.cartesian_prod(t, t))
    assert bool((draw.f_opt >= fmax - 1e-3).all())  # the refined optimum is at least the dense maximum
    assert torch.allclose(draw(draw.x_opt[:, None, :]).squeeze(1), draw.f_opt, atol=1e-5)


def test_hyperprior_2d_network_tokens_and_shapes() -> None:
    """The recipe's 2-D network: style token [x* (2), 1{x*}, f*, 1{f*}], 1-D inputs zero-padded, logits of
    shape (b, m, buckets) in both dimensions, each network under 1 MB."""
    rec = RECIPES["hyper-ls"]
    s1, s2 = rec["stage1"], rec["stage2"]
    assert s2["kind"] == "MES" and "f_opt" in s1["conditioning"] and s1["standardize"]
    torch.manual_seed(0)
    net = PFNTransformer(2, s1["num_buckets"], x_encoder=s1["x_encoder"]).eval()
    style = style_vector(3, 2, torch.tensor([[0.1, 0.9]] * 3), torch.tensor([1.5, 2.0, 2.5]), torch.zeros(1))
    assert style.shape == (3, 5)
    assert torch.equal(style[0], torch.tensor([0.1, 0.9, 1.0, 1.5, 1.0]))
    xc2, xq2 = torch.rand(3, 7, 2), torch.rand(3, 4, 2)
    yc = torch.randn(3, 7)
    assert net(xc2, yc, xq2, style).shape == (3, 4, s1["num_buckets"])
    xc1, xq1 = xc2[..., :1], xq2[..., :1]
    out1 = net(xc1, yc, xq1, style)
    pad = torch.nn.functional.pad
    # a 1-D dataset is zero-padded inside, and the dimension token tells it from a 2-D one with x2 = 0
    assert not torch.allclose(out1, net(pad(xc1, (0, 1)), yc, pad(xq1, (0, 1)), style))
    assert out1.shape == (3, 4, s1["num_buckets"])
    assert not torch.allclose(net(xc2, yc, xq2), net(xc2, yc, xq2, style))  # the style token is read
    buf = io.BytesIO()
    torch.save(net.state_dict(), buf)
    assert buf.tell() < 1_000_000
    # stage-1 training on the 1-D/2-D hyperprior runs in both dimensions (tiny network, few steps)
    prior = GPRFFPrior.from_config(rec["prior"])
    ppd = train_pfn(prior, conditioning=("none", "f_opt"), emsize=16, nlayers=1, nheads=2, nhid=16,
                    num_buckets=16, steps=3, batch_size=8, max_context=5, n_query=4, seed=0)  # fmt: skip
    assert ppd.net.max_dim == 2 and ppd.standardize
    for d in (1, 2):
        assert ppd.logits(torch.rand(2, 5, d), torch.randn(2, 5), torch.rand(2, 3, d)).shape == (2, 3, 16)


def test_recipe_cache_trains_once_then_loads_the_same_network(tmp_path, monkeypatch) -> None:
    """A (tiny) hyperprior recipe is trained from code under the training lock, cached, and reloaded."""
    from optarium.bo import _pfn_cache

    tiny = {"num_buckets": 16, "max_context": 5, "n_query": 4, "batch_size": 8, "steps": 2, "emsize": 16,
            "nlayers": 1, "nheads": 2, "nhid": 16}  # fmt: skip
    rec = {"prior": RECIPES["hyper-ls"]["prior"], "stage1": {**tiny, "conditioning": ["none", "f_opt"]},
           "stage2": {**tiny, "kind": "MES"}}  # fmt: skip
    monkeypatch.setenv("OPTARIUM_CACHE_DIR", str(tmp_path))
    monkeypatch.setitem(_pfn_cache.RECIPES, "tiny-test", rec)
    monkeypatch.setattr(_pfn_cache, "_HEADS", {})
    head = _pfn_cache.cached_head("tiny-test")
    path = _pfn_cache.cache_path("tiny-test")
    assert path.exists() and path.parent == tmp_path / "alpha-pfn" and head.max_dim == 2
    _pfn_cache._HEADS.clear()
    again = _pfn_cache.cached_head("tiny-test")
    assert again is not head
    for a, b in zip(head.state_dict().values(), again.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    with pytest.raises(ValueError, match="name"):
        _pfn_cache.cached_head("no-such-recipe")


# ---------------------------------------------------------------------------------------------- network
def test_network_is_invariant_to_context_order_and_other_queries() -> None:
    torch.manual_seed(0)
    net = PFNTransformer(2, 8, emsize=16, nlayers=2, nheads=2, nhid=16).eval()
    xc, yc, xq = torch.rand(2, 7, 2), torch.randn(2, 7), torch.rand(2, 5, 2)
    out = net(xc, yc, xq)
    perm = torch.randperm(7)
    assert torch.allclose(net(xc[:, perm], yc[:, perm], xq), out, atol=1e-5)
    assert torch.allclose(net(xc, yc, xq[:, :2]), out[:, :2], atol=1e-5)  # queries never see each other
    assert net(xc[..., :1], yc, xq[..., :1]).shape == (2, 5, 8)  # d < max_dim is padded
    with pytest.raises(ValueError, match="max_dim"):
        net(torch.rand(1, 3, 3), torch.randn(1, 3), torch.rand(1, 2, 3))


def test_fourier_x_encoder_keeps_the_invariances_and_round_trips() -> None:
    torch.manual_seed(0)
    net = PFNTransformer(2, 8, emsize=16, nlayers=2, nheads=2, nhid=16, x_encoder="fourier").eval()
    xc, yc, xq = torch.rand(2, 7, 2), torch.randn(2, 7), torch.rand(2, 5, 2)
    out = net(xc, yc, xq)
    perm = torch.randperm(7)
    assert torch.allclose(net(xc[:, perm], yc[:, perm], xq), out, atol=1e-5)
    assert torch.allclose(net(xc, yc, xq[:, :2]), out[:, :2], atol=1e-5)
    other = PFNTransformer(2, 8, emsize=16, nlayers=2, nheads=2, nhid=16, x_encoder="fourier")
    other.load_state_dict(net.state_dict())
    assert torch.equal(other.eval()(xc, yc, xq), out)
    with pytest.raises(ValueError, match="x_encoder"):
        PFNTransformer(2, 8, x_encoder="mlp")


def test_training_lowers_the_nll_and_is_seeded() -> None:
    prior = GPRFFPrior((1,), num_features=32, lengthscale=LS, noise_sd=NOISE)
    kw = {"standardize": False, "emsize": 16, "nlayers": 1, "nheads": 2, "nhid": 16, "num_buckets": 32,
          "batch_size": 16, "max_context": 8, "n_query": 8, "lr": 3e-3, "seed": 3}  # fmt: skip
    a, b = train_pfn(prior, steps=10, **kw), train_pfn(prior, steps=10, **kw)
    for pa, pb in zip(a.net.parameters(), b.net.parameters(), strict=True):
        assert torch.equal(pa, pb)
    losses: list[float] = []
    train_pfn(prior, steps=150, callback=lambda s, loss: losses.append(loss), **kw)
    assert sum(losses[-30:]) / 30 < sum(losses[:20]) / 20 - 0.05


# ---------------------------------------------------------------------------------------------- acquisition
def test_acquisition_contract_and_invariances() -> None:
    head = untrained_head(2, seed=1)
    X, Y = torch.rand(6, 2, dtype=D), torch.randn(6, dtype=D)
    cand = torch.rand(50, 1, 2, dtype=D)
    acq = AlphaPFNAcquisition(head).fit(X, Y)
    v = acq(cand)
    assert v.shape == (50,) and v.dtype == D
    # standardisation inside fit: a positive affine change of Y changes nothing
    assert torch.allclose(AlphaPFNAcquisition(head).fit(X, 3 * Y - 7)(cand), v, atol=1e-5)
    perm = torch.randperm(6)
    assert torch.allclose(AlphaPFNAcquisition(head).fit(X[perm], Y[perm])(cand), v, atol=1e-5)
    with pytest.raises(ValueError, match="q = 1"):
        acq(torch.rand(5, 2, 2, dtype=D))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        acq(cand + 1.0)
    with pytest.raises(ValueError, match="train_Y"):
        AlphaPFNAcquisition(head).fit(X, Y[:3])
    one = AlphaPFNAcquisition(head).fit(X[:1], Y[:1])(cand)  # one point: standardisation skipped, no NaN
    assert torch.isfinite(one).all()
    with pytest.raises(RuntimeError, match="fit"):
        AlphaPFNAcquisition(head)(cand)


def test_strategy_model_and_direction() -> None:
    head = untrained_head(2, seed=2)
    bounds = torch.tensor([[-1.0, 0.0], [1.0, 5.0]], dtype=D)
    f = lambda x: ((x - 0.2) ** 2).sum(-1)  # noqa: E731
    opt = PFNBayesOpt(bounds, head, n_init=3, n_candidates=64, seed=0)
    with pytest.raises(RuntimeError, match="tell"):
        _ = opt.model
    for _ in range(3):
        x = opt.ask(2)
        opt.tell(x, f(x))
    post = opt.model.posterior(torch.tensor([[0.0, 1.0], [0.5, 4.0]], dtype=D))
    # the model in user units is the stage-1 predictive of the signed standardised targets mapped back
    Xu = (opt.X - bounds[0]) / (bounds[1] - bounds[0])
    t = -opt.standardized_Y()
    xq = (torch.tensor([[0.0, 1.0], [0.5, 4.0]], dtype=D) - bounds[0]) / (bounds[1] - bounds[0])
    m, v = head.ppd.mean_var(Xu[None].float(), t[None].float(), xq[None].float())
    mu, sd, _ = opt.standardization()
    assert torch.allclose(post.mean.reshape(-1), (mu - sd * m[0]).to(D), atol=1e-5)
    assert torch.allclose(post.variance.reshape(-1), (sd**2 * v[0]).to(D), rtol=1e-4)
    with pytest.raises(ValueError, match="head"):
        PFNBayesOpt(torch.tensor([[0.0] * 3, [1.0] * 3], dtype=D), head)


# ---------------------------------------------------------------------------------------------- exact GP
def _k(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.exp(-((a[:, None] - b[None]) ** 2) / (2 * LS**2))


def _gp_posterior(xc: torch.Tensor, yc: torch.Tensor, xq: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact joint posterior of f on ``xq`` (1-D points) under the test prior."""
    K = _k(xc, xc) + NOISE**2 * torch.eye(xc.numel(), dtype=D)
    L = torch.linalg.cholesky(K)
    Ks = _k(xc, xq)
    A = torch.cholesky_solve(Ks, L)
    return A.T @ yc, _k(xq, xq) - Ks.T @ A


def _vasicek(y: torch.Tensor) -> torch.Tensor:
    """m-spacing entropy estimates of each row of ``y`` (n samples per row)."""
    n = y.shape[-1]
    m = max(1, round(math.sqrt(n) / 2))
    s = y.sort(-1).values
    idx = torch.arange(n)
    hi, lo = (idx + m).clamp(max=n - 1), (idx - m).clamp(min=0)
    gaps = (s[..., hi] - s[..., lo]).clamp_min(1e-12)
    return torch.log(n / (2 * m) * gaps).mean(-1)


def _mes_reference(xc: torch.Tensor, yc: torch.Tensor, grid: torch.Tensor, idx: torch.Tensor, gen):
    """Monte-Carlo I(y(x); f*) at ``grid[idx]``: 20,000 joint posterior draws on ``grid`` (f* = their max),
    noise added, H[y | D, f*] by 30 quantile bins of f* and an m-spacing estimate per bin."""
    mean, cov = _gp_posterior(xc, yc, grid)
    L = torch.linalg.cholesky(cov + 1e-8 * torch.eye(grid.numel(), dtype=D))
    f = mean + torch.randn(20000, grid.numel(), generator=gen, dtype=D) @ L.T
    fstar = f.max(1).values
    y = f[:, idx] + NOISE * torch.randn(20000, idx.numel(), generator=gen, dtype=D)
    var = cov.diagonal()[idx].clamp_min(0) + NOISE**2
    h_marg = 0.5 * torch.log(2 * math.pi * math.e * var)
    order = fstar.argsort()
    h_cond = torch.stack([_vasicek(y[b].T) for b in order.chunk(30)]).mean(0)
    return h_marg - h_cond, f, fstar


def _dataset(seed: int, n: int) -> tuple[torch.Tensor, torch.Tensor, float]:
    """``n`` noisy observations of one prior draw, and the draw's maximum f*."""
    gen = torch.Generator().manual_seed(1000 + seed)
    prior = GPRFFPrior((1,), lengthscale=LS, noise_sd=NOISE)
    draw, x, y = prior.sample_datasets(1, n, 1, gen)
    return x[0, :, 0].double(), y[0].double(), float(draw.f_opt[0])


@pytest.fixture(scope="module")
def head():
    from optarium.bo._pfn_cache import cached_head

    return cached_head("fixed-l0.2")


_UNDERTRAINED = pytest.mark.xfail(
    strict=True,
    reason="the cached toy networks (recipe fixed-l0.2: 2,000 + 1,200 steps, ~5 CPU-min) are "
    "undertrained: the stage-1 predictive sd stays ~0.16 at observed points and barely reacts to f*, so "
    "the targets and the MES head miss the spec's agreement bounds (figures in the registry notes); "
    "strict: a better-trained "
    "recipe must make these pass",
)


@pytest.mark.slow  # needs the trained test networks (cached; minutes of CPU to train when missing)
@_UNDERTRAINED
def test_stage1_matches_the_exact_gp_posterior(head) -> None:
    ppd = head.ppd
    xq = torch.linspace(0, 1, 101, dtype=D)
    errs_m, errs_s, above = [], [], []
    for s in range(10):
        xc, yc, fstar = _dataset(s, 2 + s)
        mean, cov = _gp_posterior(xc, yc, xq)
        sd = (cov.diagonal().clamp_min(0) + NOISE**2).sqrt()
        args = (xc[None, :, None].float(), yc[None].float(), xq[None, :, None].float())
        with torch.no_grad():
            m, v = ppd.mean_var(*args)
            logits = ppd.logits(*args, f_opt=torch.tensor([fstar]))
        errs_m.append(float((m[0].double() - mean).abs().mean()))
        errs_s.append(float((v[0].double().sqrt() - sd).abs().mean()))
        # conditioned on the true maximum f*, almost no predictive mass lies above it
        above.append(float((1 - ppd.bar.cdf(logits[0], torch.full((101,), fstar + 3 * NOISE))).mean()))
    print(
        f"stage 1: mean |mean err| {sum(errs_m) / 10:.3f}, mean |sd err| {sum(errs_s) / 10:.3f}, "
        f"max mass above f* {max(above):.4f}"
    )
    assert sum(errs_m) / 10 < 0.1, errs_m
    assert sum(errs_s) / 10 < 0.1, errs_s
    assert max(above) < 0.05, above


@pytest.mark.slow
@_UNDERTRAINED
def test_mes_head_and_targets_match_the_exact_information_gain(head) -> None:
    grid = torch.linspace(0, 1, 400, dtype=D)
    idx = torch.arange(0, 400, 4)
    xq = grid[idx]
    gen = torch.Generator().manual_seed(7)
    mad_h, cor_h, mad_g, cor_g, overlap, hits, neg, obs = [], [], [], [], [], [], [], []
    for s in range(20):
        xc, yc, _ = _dataset(s, 3 + s % 8)
        ref, _, fstar = _mes_reference(xc, yc, grid, idx, gen)
        with torch.no_grad():
            a = head.value(xc[None, :, None].float(), yc[None].float(), xq[None, :, None].float())[0].double()
        top = ref.max()
        k = 10
        overlap.append(len(set(a.topk(k).indices.tolist()) & set(ref.topk(k).indices.tolist())) / k)
        hits.append(int(a.argmax()) in set(ref.topk(k).indices.tolist()))
        neg.append(float(a.min()) / max(float(a.max()), 1e-9))
        if s < 10:
            mad_h.append(float((a - ref).abs().mean() / top))
            cor_h.append(float(torch.corrcoef(torch.stack([a, ref]))[0, 1]))
            # the one-sample targets averaged over 500 posterior functions sharing D
            fs = fstar[:500].float()
            b = fs.numel()
            xcb, ycb = xc[None, :, None].float().expand(b, -1, -1), yc[None].float().expand(b, -1)
            xqb = xq[None, :, None].float().expand(b, -1, -1)
            with torch.no_grad():
                g = (
                    (head.ppd.entropy(xcb, ycb, xqb) - head.ppd.entropy(xcb, ycb, xqb, f_opt=fs))
                    .mean(0)
                    .double()
                )
            mad_g.append(float((g - ref).abs().mean() / top))
            cor_g.append(float(torch.corrcoef(torch.stack([g, ref]))[0, 1]))
            at_obs = head.value(xc[None, :, None].float(), yc[None].float(), xc[None, :, None].float())[0]
            obs.append(float(at_obs.detach().max()) / max(float(a.max()), 1e-9))
    print(
        f"head: mad/max {sum(mad_h) / 10:.3f} pearson {sum(cor_h) / 10:.3f}; targets: mad/max "
        f"{sum(mad_g) / 10:.3f} pearson {sum(cor_g) / 10:.3f}; top-10 overlap {sum(overlap) / 20:.2f}, "
        f"argmax hits {sum(hits)}/20; min/max {min(neg):.3f}; at-observed/max {max(obs):.3f}"
    )
    assert sum(mad_g) / 10 < 0.25 and sum(cor_g) / 10 > 0.8, (mad_g, cor_g)
    assert sum(mad_h) / 10 < 0.25 and sum(cor_h) / 10 > 0.8, (mad_h, cor_h)
    assert sum(overlap) / 20 >= 0.5 and sum(hits) / 20 >= 0.8, (overlap, hits)
    # the unclipped head is (almost) non-negative and near zero at observed points (noiseless limit)
    assert min(neg) >= -0.02 and max(obs) < 0.05, (neg, obs)


# ---------------------------------------------------------------------- the hyperprior (full-scale) model
_HYPER_LS_MU, _HYPER_LS_SIGMA, _HYPER_MEAN_SD = math.log(0.2), 0.5, 0.5


def _gp_1d(xc, yc, xq, ls):
    """Exact 1-D posterior predictive of y (mean, sd) under RBF(ls) + constant mean ~ N(0, 0.5^2), for
    every lengthscale in ``ls`` ``(L,)``: ``(L, m)`` each, and the log marginal likelihoods ``(L,)``."""

    def k(a, b):
        sq = ((a[:, None] - b[None]) ** 2)[None]
        return torch.exp(-sq / (2 * ls[:, None, None] ** 2)) + _HYPER_MEAN_SD**2

    n = xc.numel()
    K = k(xc, xc) + NOISE**2 * torch.eye(n, dtype=D)
    L = torch.linalg.cholesky(K)
    Ks = k(xc, xq)
    alpha = torch.cholesky_solve(yc[None, :, None].expand(ls.numel(), -1, -1), L)[..., 0]
    mean = (Ks * alpha[:, :, None]).sum(1)
    A = torch.cholesky_solve(Ks, L)
    var = (1 + _HYPER_MEAN_SD**2) - (Ks * A).sum(1) + NOISE**2
    logml = -0.5 * (yc[None] * alpha).sum(-1) - L.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    return mean, var.clamp_min(1e-12).sqrt(), logml - 0.5 * n * math.log(2 * math.pi)


def _model_averaged_gp(xc, yc, xq):
    """The hyperprior's exact predictive: the lengthscale integrated out by quadrature (401 nodes of
    log l in mu +- 5 sigma, weights = prior density x marginal likelihood); mixture mean and sd."""
    z = torch.linspace(-5, 5, 401, dtype=D)
    ls = torch.exp(_HYPER_LS_MU + _HYPER_LS_SIGMA * z)
    mean, sd, logml = _gp_1d(xc, yc, xq, ls)
    w = torch.softmax(logml - 0.5 * z**2, 0)[:, None]
    m = (w * mean).sum(0)
    return m, ((w * (sd**2 + mean**2)).sum(0) - m**2).clamp_min(0).sqrt()


@pytest.fixture(scope="module")
def hyper_head():
    from optarium.bo._pfn_cache import cached_head

    return cached_head("hyper-ls")


def test_model_averaged_gp_reference_is_exact_and_discriminative() -> None:
    """The reference of the hyperprior test: a single-node average is the fixed-lengthscale GP, the
    averaged predictive is the moment-matched mixture, and with few points it differs from the fixed
    l = 0.2 GP by more than the test's 0.1 tolerance (otherwise the test could not tell them apart)."""
    xc, yc = torch.tensor([0.1, 0.5, 0.9], dtype=D), torch.tensor([0.3, -0.8, 0.6], dtype=D)
    xq = torch.linspace(0, 1, 51, dtype=D)
    m1, _, _ = _gp_1d(xc, yc, xq, torch.tensor([0.2], dtype=D))
    Kc = torch.exp(-((xc[:, None] - xc[None]) ** 2) / (2 * 0.04)) + 0.25 + NOISE**2 * torch.eye(3, dtype=D)
    Ks = torch.exp(-((xc[:, None] - xq[None]) ** 2) / (2 * 0.04)) + 0.25
    assert torch.allclose(m1[0], Ks.T @ torch.linalg.solve(Kc, yc), atol=1e-10)
    diffs = []
    for s in range(10):
        gen = torch.Generator().manual_seed(2000 + s)
        prior = GPRFFPrior((1,), lengthscale=("lognormal", _HYPER_LS_MU, _HYPER_LS_SIGMA), noise_sd=NOISE,
                           mean_sd=_HYPER_MEAN_SD)  # fmt: skip
        _, x, y = prior.sample_datasets(1, 3 + s % 3, 1, gen)
        xc, yc = x[0, :, 0].double(), y[0].double()
        _, sd_avg = _model_averaged_gp(xc, yc, xq)
        _, sd_fix, _ = _gp_1d(xc, yc, xq, torch.tensor([0.2], dtype=D))
        diffs.append(float((sd_avg - sd_fix[0]).abs().mean() / yc.std()))
    assert sum(diffs) / len(diffs) > 0.1, diffs


@pytest.mark.slow  # needs the full scale's trained hyper-ls networks (cached; ~16 CPU-min to train)
@pytest.mark.xfail(
    strict=True,
    reason="the hyper-ls stage-1 network (3,000 steps, against the paper's 250k) gets the predictive mean "
    "about right but not the spread: measured 2026-12-03, mean |mean err| 0.144 and mean |sd err| 0.724 in "
    "standardised units against the model-averaged GP (0.694 against the fixed l = 0.2 GP: it is not closer "
    "to the averaged one), sd 3-6x too large away from the data (the bar tails), and up to 17 % of the "
    "f*-conditioned mass above f*; strict: a better-trained recipe must make this pass",
)
def test_hyperprior_stage1_matches_the_model_averaged_gp(hyper_head) -> None:
    """Spec test 2 for the main model: the hyper-ls stage-1 predictive against the model-averaged GP on
    1-D hyperprior draws (mean abs error < 0.1 in standardised units, for the mean and the sd), and with
    f* given almost no predictive mass above f*."""
    ppd = hyper_head.ppd
    xq = torch.linspace(0, 1, 101, dtype=D)
    prior = GPRFFPrior((1,), lengthscale=("lognormal", _HYPER_LS_MU, _HYPER_LS_SIGMA), noise_sd=NOISE,
                       mean_sd=_HYPER_MEAN_SD)  # fmt: skip
    errs_m, errs_s, above, fixed_gap = [], [], [], []
    for s in range(10):
        gen = torch.Generator().manual_seed(3000 + s)
        draw, x, y = prior.sample_datasets(1, 3 + s, 1, gen)
        xc, yc, fstar = x[0, :, 0].double(), y[0].double(), float(draw.f_opt[0])
        mean, sd = _model_averaged_gp(xc, yc, xq)
        scale = float(yc.std())
        args = (xc[None, :, None].float(), yc[None].float(), xq[None, :, None].float())
        with torch.no_grad():
            m, v = ppd.mean_var(*args)
            logits = ppd.logits(*args, f_opt=torch.tensor([fstar]))
        errs_m.append(float((m[0].double() - mean).abs().mean()) / scale)
        errs_s.append(float((v[0].double().sqrt() - sd).abs().mean()) / scale)
        _, sd_fix, _ = _gp_1d(xc, yc, xq, torch.tensor([0.2], dtype=D))
        fixed_gap.append(float((v[0].double().sqrt() - sd_fix[0]).abs().mean()) / scale)
        f_std = (fstar + 3 * NOISE - float(yc.mean())) / scale
        above.append(float((1 - ppd.bar.cdf(logits[0], torch.full((101,), f_std))).mean()))
    print(
        f"hyper-ls stage 1 vs model-averaged GP: mean |mean err| {sum(errs_m) / 10:.3f}, mean |sd err| "
        f"{sum(errs_s) / 10:.3f} (vs the fixed l = 0.2 GP: {sum(fixed_gap) / 10:.3f}), max mass above f* "
        f"{max(above):.4f}"
    )
    assert sum(errs_m) / 10 < 0.1, errs_m
    assert sum(errs_s) / 10 < 0.1, errs_s
    assert max(above) < 0.05, above


def test_bar_distribution_agrees_with_pfns_full_support() -> None:
    pfns_bar = pytest.importorskip("pfns.model.bar_distribution", reason="pfns 0.4.2 is the reference")
    gen = torch.Generator().manual_seed(0)
    borders = torch.cat([torch.zeros(1), torch.rand(40, generator=gen) + 0.05]).cumsum(0) - 10.0
    ref = pfns_bar.FullSupportBarDistribution(borders)
    ours = BarDistribution(borders)
    logits = torch.randn(200, 40, generator=gen)
    y = torch.linspace(float(borders[0]) - 3, float(borders[-1]) + 3, 200)  # both tails and the interior
    assert torch.allclose(ours.nll(logits, y), ref(logits, y), atol=1e-4)
    assert torch.allclose(ours.mean(logits), ref.mean(logits), atol=1e-4)
    assert torch.allclose(ours.mean_var(logits)[1], ref.variance(logits), rtol=1e-3, atol=1e-4)
