"""BoBa: UCB1 regret, limit cases, accounting, partition signal, ablation order, invariances, lazy scale,
state round trips and bad input (spec ``boba.md``, "Tests that would show it works")."""

from __future__ import annotations

import pytest
import torch

from optarium.bo.boba import (
    UCB1,
    BoBa,
    BootstrapRidge,
    EpsilonGreedy,
    PartitionedLibrary,
    PoolScreening,
    SyntheticLibrary,
    ThompsonGaussian,
    UniformArms,
    _distinct_uniform,
    stratified_sample,
)

DT = torch.float64


def _screen(opt, oracle, evaluations: int) -> list[torch.Tensor]:
    batches = []
    while opt.n_evaluated < evaluations:
        idx = opt.ask()
        if idx.numel() == 0:
            break
        opt.tell(idx, oracle(idx))
        batches.append(idx)
    return batches


def _quick_run(seed: int, method: str) -> tuple[float, BoBa | PoolScreening, SyntheticLibrary]:
    syn = SyntheticLibrary(300, 100, 30, seed=seed)
    init = stratified_sample(syn.library, 300, torch.Generator().manual_seed(1000 + seed))
    common = {"maximize": True, "batch_size": 100, "init_indices": init, "seed": seed}
    if method == "random":
        opt = PoolScreening(syn.library, surrogate=None, **common)
    else:
        lib = syn.random_library if method == "random-partitions" else syn.library
        opt = BoBa(lib, arms_per_round=6, inference_budget=1000, **common)
    _screen(opt, syn.oracle, 2000)
    top = syn.top_mask(0.01)
    return float(top[opt.index].sum() / top.sum()), opt, syn


# ------------------------------------------------------------------------------------------ 1. UCB1
def test_ucb1_regret_is_sublinear_on_a_bernoulli_bandit() -> None:
    """Spec test 1: plain UCB1 (c = 1, s = 1), 5 arms p = 0.1..0.5, 20 seeds vectorised."""
    S, K, T = 20, 5, 50_000
    p = torch.linspace(0.1, 0.5, K, dtype=DT)
    g = torch.Generator().manual_seed(0)
    u = torch.rand(T, S, generator=g, dtype=DT)
    bandit = UCB1(c=1.0, scale=None)
    counts = torch.zeros(S, K, dtype=DT)
    sums = torch.zeros(S, K, dtype=DT)
    regret = torch.zeros(S, dtype=DT)
    marks = {}
    rows = torch.arange(S)
    gaps = p.max() - p
    for t in range(T):
        mean = sums / counts.clamp(min=1)
        a = bandit.index(mean, counts, float(t)).argmax(-1)
        r = (u[t] < p[a]).to(DT)
        counts[rows, a] += 1
        sums[rows, a] += r
        regret += gaps[a]
        if t + 1 in (500, 5000, 50_000):
            marks[t + 1] = regret.clone()
            if t + 1 == 5000:
                best_share = float((counts[:, -1] / 5000).mean())
    assert float((marks[5000] / marks[500]).mean()) < 5
    assert float((marks[50_000] / marks[5000]).mean()) < 3.5
    assert best_share > 0.7


# ----------------------------------------------------------------------------------- 2. limit cases
def test_all_arms_and_full_budget_select_exactly_the_full_library_batches() -> None:
    """Spec test 2a: k = M and I = all unevaluated members -> the batches of full-library BO."""
    syn = SyntheticLibrary(60, 20, 6, seed=3)
    for acq in ("greedy", "ucb"):
        boba = BoBa(
            syn.library,
            maximize=True,
            arms_per_round=6,
            batch_size=20,
            inference_budget=None,
            n_init=30,
            acquisition=acq,
            seed=7,
        )
        full = PoolScreening(syn.library, maximize=True, batch_size=20, n_init=30, acquisition=acq, seed=7)
        a, b = _screen(boba, syn.oracle, 200), _screen(full, syn.oracle, 200)
        assert len(a) == len(b) == 10
        for x, y in zip(a, b, strict=True):
            assert torch.equal(x, y)
        assert boba.inference_calls == full.inference_calls


class _Constant:
    def fit(self, X, y, generator):
        pass

    def predict(self, X):
        z = torch.zeros(X.shape[0], dtype=X.dtype)
        return z, z


def test_constant_surrogate_and_uniform_arms_select_uniformly_over_partitions() -> None:
    """Spec test 2b: chi-square over per-partition counts of 200 rounds' selections, p > 0.01."""
    from scipy.stats import chisquare

    M, size = 10, 200
    X = torch.randn(M * size, 3, generator=torch.Generator().manual_seed(0), dtype=DT)
    lib = PartitionedLibrary(X, partition_sizes=[size] * M)
    opt = BoBa(
        lib,
        maximize=True,
        surrogate=_Constant(),
        bandit=UniformArms(),
        arms_per_round=1,
        batch_size=5,
        inference_budget=5,
        n_init=M,
        seed=1,
    )
    _screen(opt, lambda i: torch.zeros(i.numel(), dtype=DT), M + 200 * 5)
    arm, _ = lib.locate(opt.index[M:])
    counts = torch.bincount(arm, minlength=M)
    assert int(counts.sum()) == 1000
    assert chisquare(counts.numpy()).pvalue > 0.01


# ------------------------------------------------------------------------------------- 3. accounting
def test_inference_accounting_no_repeats_and_arm_membership() -> None:
    syn = SyntheticLibrary(60, 20, 6, seed=0)
    opt = BoBa(
        syn.library, maximize=True, arms_per_round=2, batch_size=20, inference_budget=60, n_init=30, seed=0
    )
    batches = _screen(opt, syn.oracle, 330)
    h = opt.history
    assert (
        opt.inference_calls
        == sum(h["inference_calls"])
        == sum(sum(d.values()) for d in h["inference_per_arm"])
    )
    assert torch.unique(opt.index).numel() == opt.index.numel() == 330
    for r, idx in enumerate(batches[1:]):
        arm, _ = syn.library.locate(idx)
        allowed = set(h["chosen_arms"][r]) | set(h["fallback_arms"][r])
        assert set(arm.tolist()) <= allowed
    assert all(sum(d.values()) == 60 for d in h["inference_per_arm"])  # exact budget while arms are large


def test_largest_remainder_allocation() -> None:
    syn = SyntheticLibrary(60, 20, 6, seed=0)
    opt = BoBa(syn.library, maximize=True, batch_size=5, inference_budget=10, seed=0)
    alloc = opt._allocate(torch.tensor([100, 50, 3]), 20)
    assert int(alloc.sum()) == 20 and alloc.tolist() == [13, 7, 0]
    assert opt._allocate(torch.tensor([2, 3]), 20).tolist() == [2, 3]


def test_distinct_uniform_draws_on_the_rejection_path() -> None:
    g = torch.Generator().manual_seed(0)
    excluded = torch.arange(0, 10_000_000, 1000)
    draws = torch.cat([_distinct_uniform(10_000_000, 500, excluded, g) for _ in range(20)])
    assert torch.unique(draws[:500]).numel() == 500
    assert not bool(torch.isin(draws, excluded).any())
    mean = float(draws.double().mean()) / 1e7
    assert abs(mean - 0.5) < 4 * (1 / 12) ** 0.5 / (draws.numel() ** 0.5)


# ------------------------------------------------------------------------- 4./5. partitions, ablations
def test_privileged_arms_get_the_pulls_and_ucb_beats_the_ablations() -> None:
    """Spec tests 4 and 5 on the quick library: the 3 privileged arms of 30 get >= 30 % of the
    post-initialisation pulls (20 seeds); BoBa-UCB beats random partitions and random (10 paired seeds)."""
    shares, gaps_rp, gaps_rand = [], [], []
    for seed in range(20):
        rec, opt, syn = _quick_run(seed, "ucb")
        pulls = [a for r in opt.history["chosen_arms"] for a in r]
        priv = set(syn.privileged_arms.tolist())
        shares.append(sum(a in priv for a in pulls) / len(pulls))
        if seed < 10:
            gaps_rp.append(rec - _quick_run(seed, "random-partitions")[0])
            gaps_rand.append(rec - _quick_run(seed, "random")[0])
    assert sum(shares) / len(shares) >= 0.30
    for gaps in (gaps_rp, gaps_rand):
        t = torch.tensor(gaps, dtype=DT)
        assert float(t.mean()) > 2 * float(t.std() / len(gaps) ** 0.5)


# ------------------------------------------------------------------------------------- 6. invariance
def test_affine_rescaling_and_direction_do_not_change_the_selections() -> None:
    syn = SyntheticLibrary(60, 20, 6, seed=1)

    def run(f, maximize: bool) -> torch.Tensor:
        opt = BoBa(
            syn.library,
            maximize=maximize,
            arms_per_round=2,
            batch_size=20,
            inference_budget=60,
            n_init=30,
            seed=4,
        )
        _screen(opt, f, 230)
        return opt.index

    ref = run(syn.oracle, True)
    assert torch.equal(ref, run(lambda i: 3.0 * syn.oracle(i) + 5.0, True))
    assert torch.equal(ref, run(lambda i: -syn.oracle(i), False))


# ------------------------------------------------------------------------------------ 7. scalability
def test_lazy_library_of_1e8_items_keeps_memory_independent_of_n() -> None:
    calls: list[int] = []

    def feats(idx: torch.Tensor) -> torch.Tensor:
        calls.append(idx.numel())
        x = idx.to(DT).unsqueeze(-1)
        return torch.cat([torch.sin(x * 1e-3), torch.cos(x * 7e-7), (idx % 97).to(DT).unsqueeze(-1) / 97], -1)

    lib = PartitionedLibrary(feats, partition_sizes=[1_000_000] * 100)
    assert lib.n_items == 100_000_000
    opt = BoBa(lib, maximize=True, arms_per_round=2, batch_size=10, inference_budget=100, n_init=100, seed=0)
    _screen(opt, lambda i: torch.sin(i.to(DT) * 1e-3), 130)
    assert opt.inference_calls == 300 and max(calls) <= 100
    big = [k for k, v in opt.state_dict().items() if isinstance(v, torch.Tensor) and v.numel() > 10_000]
    assert not big and all(p.numel() <= 130 for p in opt._eval_pos)


# --------------------------------------------------------------------- state, determinism, surrogate
@pytest.mark.parametrize("bandit", [UCB1(), ThompsonGaussian(), EpsilonGreedy(0.3)])
def test_state_dict_round_trip_resumes_exactly(bandit) -> None:
    syn = SyntheticLibrary(60, 20, 6, seed=2)

    def make() -> BoBa:
        return BoBa(
            syn.library,
            maximize=True,
            bandit=bandit,
            arms_per_round=2,
            batch_size=20,
            inference_budget=60,
            n_init=30,
            discount=0.95,
            seed=5,
        )

    a = make()
    _screen(a, syn.oracle, 90)
    pending = a.ask()  # a pending batch is part of the state
    b = make()
    b.load_state_dict(a.state_dict())
    assert torch.equal(b.ask(), pending)
    for opt in (a, b):
        opt.tell(pending, syn.oracle(pending))
    assert torch.equal(torch.cat(_screen(a, syn.oracle, 190)), torch.cat(_screen(b, syn.oracle, 190)))
    assert torch.equal(a.counts, b.counts) and a.inference_calls == b.inference_calls
    p = PoolScreening(syn.library, maximize=True, batch_size=20, subset=100, n_init=30, seed=1)
    _screen(p, syn.oracle, 70)
    q = PoolScreening(syn.library, maximize=True, batch_size=20, subset=100, n_init=30, seed=1)
    q.load_state_dict(p.state_dict())
    assert torch.equal(p.ask(), q.ask())
    with pytest.raises(ValueError, match="state_dict"):
        b.load_state_dict({k: v for k, v in a.state_dict().items() if k != "counts"})
    with pytest.raises(TypeError, match="state_dict"):
        b.load_state_dict([1])


def test_determinism_under_a_seed_and_best() -> None:
    syn = SyntheticLibrary(60, 20, 6, seed=2)

    def run(seed: int) -> BoBa:
        opt = BoBa(
            syn.library,
            maximize=True,
            arms_per_round=2,
            batch_size=20,
            inference_budget=60,
            n_init=30,
            seed=seed,
        )
        _screen(opt, syn.oracle, 150)
        return opt

    a, b, c = run(0), run(0), run(1)
    assert torch.equal(a.index, b.index) and not torch.equal(a.index, c.index)
    idx, y = a.best(5)
    assert torch.equal(y, torch.sort(syn.oracle(a.index), descending=True).values[:5])
    assert torch.equal(syn.oracle(idx), y)


def test_bootstrap_ridge_matches_scikit_learn_per_member() -> None:
    from sklearn.linear_model import Ridge

    g = torch.Generator().manual_seed(0)
    X = torch.randn(80, 6, generator=g, dtype=DT)
    y = X @ torch.randn(6, generator=g, dtype=DT) + 0.3 * torch.randn(80, generator=g, dtype=DT) + 2.0
    model = BootstrapRidge(n_models=3, alpha=1.0)
    gen = torch.Generator().manual_seed(9)
    model.fit(X, y, gen)
    idx = torch.randint(0, 80, (3, 80), generator=torch.Generator().manual_seed(9))
    preds = []
    for m in range(3):
        sk = Ridge(alpha=1.0).fit(X[idx[m]].numpy(), y[idx[m]].numpy())
        torch.testing.assert_close(model.w[m], torch.from_numpy(sk.coef_), rtol=1e-9, atol=1e-10)
        preds.append(torch.from_numpy(sk.predict(X.numpy())))
    mean, sd = model.predict(X)
    torch.testing.assert_close(mean, torch.stack(preds).mean(0), rtol=1e-9, atol=1e-10)
    torch.testing.assert_close(sd, torch.stack(preds).std(0), rtol=1e-9, atol=1e-10)


# --------------------------------------------------------------------------------------- 8. bad input
def test_bad_input_raises_naming_the_argument() -> None:
    X = torch.randn(20, 2, dtype=DT)
    with pytest.raises(ValueError, match="partition_ids"):
        PartitionedLibrary(X, torch.tensor([0] * 10 + [2] * 10))
    with pytest.raises(ValueError, match="partition_sizes"):
        PartitionedLibrary(X, partition_sizes=[20, 0])
    with pytest.raises(ValueError, match="features"):
        PartitionedLibrary(X[:5], partition_sizes=[10, 10])
    lib = PartitionedLibrary(X, partition_sizes=[10, 10])
    with pytest.raises(ValueError, match="inference_budget"):
        BoBa(lib, maximize=True, batch_size=5, inference_budget=4)
    with pytest.raises(ValueError, match="batch_size"):
        BoBa(lib, maximize=True, batch_size=0)
    with pytest.raises(TypeError, match="maximize"):
        BoBa(lib, maximize=1, batch_size=5)
    with pytest.raises(TypeError, match="bandit"):
        BoBa(lib, maximize=True, batch_size=5, bandit="ucb")
    opt = BoBa(lib, maximize=True, batch_size=5, inference_budget=5, seed=0)
    idx = opt.ask()
    with pytest.raises(ValueError, match="scores"):
        opt.tell(idx, torch.full((idx.numel(),), float("nan")))
    with pytest.raises(ValueError, match="index"):
        opt.tell(idx + 1, torch.zeros(idx.numel()))
    with pytest.raises(TypeError, match="scores"):
        opt.tell(idx, [0.0] * idx.numel())


def test_small_arms_fall_back_and_the_run_stops_cleanly_when_exhausted() -> None:
    X = torch.randn(20, 2, generator=torch.Generator().manual_seed(0), dtype=DT)
    lib = PartitionedLibrary(X, partition_sizes=[10, 10])
    opt = BoBa(lib, maximize=True, arms_per_round=1, batch_size=7, inference_budget=7, n_init=2, seed=0)
    batches = _screen(opt, lambda i: X[i, 0], 10**6)
    assert opt.n_evaluated == 20 and opt.ask().numel() == 0
    assert any(opt.history["fallback_arms"]) and sum(b.numel() for b in batches) == 20
