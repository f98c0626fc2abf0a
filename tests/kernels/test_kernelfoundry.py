"""KernelFoundry (CPU analogue): archive, gate, descriptor, bugs, islands, sampling, tuning, prompts."""

from __future__ import annotations

import itertools
import os
import shutil

import numpy as np
import pytest

from optarium.kernels import kernelfoundry as kf

HAS_GCC = shutil.which("gcc") is not None
needs_gcc = pytest.mark.skipif(not HAS_GCC, reason="gcc is not on PATH: the C evaluator cannot compile")
# small shapes (odd ones included) so a subprocess evaluation takes well under a second
SMALL_MM = kf.KernelTask("matmul", (32, 32, 32), ((33, 31, 35), (16, 16, 16)), 1e-4, 1e-4)
SMALL_SM = kf.KernelTask("softmax", (64, 64), ((63, 33), (16, 32)), 1e-4, 1e-5)
SMALL_LN = kf.KernelTask("layernorm", (64, 64), ((63, 33), (16, 32)), 1e-4, 1e-5)
SMALL_CV = kf.KernelTask("conv2d", (8, 16, 16, 8), ((5, 7, 9, 3), (4, 8, 8, 4)), 1e-4, 1e-5)
SMALL = {"matmul": SMALL_MM, "softmax": SMALL_SM, "layernorm": SMALL_LN, "conv2d": SMALL_CV}


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    """One compile cache per module: a kernel source is compiled once, whichever test needs it."""
    return tmp_path_factory.mktemp("kf-cache")


# ------------------------------------------------------------------------------------------ archive
def test_archive_insertion_rules_and_qd_monotone() -> None:
    a = kf.MapElitesArchive(3, 4)
    assert a.add((0, 1, 2), 5.0, "x") == 2  # empty cell
    assert a.add((0, 1, 2), 5.0, "tie") == 0  # a tie is rejected (pyribs status 0)
    assert a.add((0, 1, 2), 4.0, "worse") == 0
    assert a.add((0, 1, 2), 5.5, "better") == 1 and a.elites[(0, 1, 2)]["item"] == "better"
    assert a.index((-0.5, 0.49, 3.5)) == (0, 0, 3) and a.index((3, 2, 1)) == (3, 2, 1)
    rng = np.random.default_rng(0)
    qd = a.qd_score()
    for _ in range(200):
        a.add(tuple(int(v) for v in rng.integers(0, 4, 3)), float(rng.random() * 10))
        assert a.qd_score() >= qd
        qd = a.qd_score()
    b = kf.MapElitesArchive()
    b.load_state_dict(a.state_dict())
    assert b.elites == a.elites and len(b) == len(a) <= 64


def test_archive_agrees_with_pyribs_grid_archive() -> None:
    ribs = pytest.importorskip("ribs.archives", reason="pyribs is the reference archive (kernels extra)")
    ref = ribs.GridArchive(solution_dim=1, dims=[4, 4, 4], ranges=[(-0.5, 3.5)] * 3)
    ours = kf.MapElitesArchive(3, 4)
    rng = np.random.default_rng(1)
    for i in range(150):
        meas = rng.uniform(-0.5, 3.5, 3) if i % 2 else rng.integers(0, 4, 3).astype(float)
        fit = float(rng.integers(0, 12)) / 2  # coarse values: many ties
        st = ref.add(np.zeros((1, 1)), np.array([fit]), meas[None])["status"][0]
        assert ours.add(tuple(meas), fit) == int(st)
    data = ref.data()
    cells = ref.int_to_grid_index(data["index"])
    got = {tuple(int(v) for v in c): float(f) for c, f in zip(cells, data["objective"], strict=True)}
    assert got == {k: e["fitness"] for k, e in ours.elites.items()}


def test_fitness_gate_any_correct_beats_any_incorrect() -> None:
    fast_wrong = kf.gated(4, 2.0)  # runs 2x faster than the reference but wrong values
    slow_right = kf.gated(5, 0.01)
    assert fast_wrong.speedup == 0.0 and fast_wrong.fitness == 4.0
    assert slow_right.fitness > fast_wrong.fitness
    ev = kf.CostModelEvaluator(kf.tasks.matmul(256))
    best_ir = {
        "order": "ikj",
        "tile": 32,
        "restrict": True,
        "simd": True,
        "omp": 2,
        "unroll": 4,
        "fma": True,
        "prefetch": True,
        "bug": None,
    }
    assert ev(best_ir).speedup > 2.0 and ev({**best_ir, "bug": "race"}).fitness == 4.0
    assert ev(kf.tasks.matmul(256).seed_ir()).fitness == pytest.approx(6.0)


@needs_gcc
def test_ladder_codes_from_the_c_evaluator(tmp_path) -> None:
    ev = kf.CEvaluator(SMALL_MM, threads=1, repeats=1, workdir=tmp_path)
    seed = kf.render("matmul", SMALL_MM.seed_ir())
    sig = "void kernel(const float *A, const float *B, float *C, int M, int N, int K) {"
    assert ev(seed).perf_score == 5
    assert ev(sig + " for (int i = 0; i < M i++) C[i] = 0; }").perf_score == 0  # syntax error
    assert ev(sig + " float *p = 3.5f; }").perf_score == 1  # compile (type) error
    assert ev(sig + " undefined_thing(A); }").perf_score == 1  # implicit declaration is an error
    assert ev(sig + " *(volatile int *)0 = 1; }").perf_score == 2  # segfault in the subprocess
    assert (
        ev(seed.replace("C[i*N + j] = acc;", "if (j) C[i*N + j] = acc;")).perf_score == 3
    )  # not all written
    assert ev(seed.replace("C[i*N + j] = acc;", "C[i*N + j] = 2.0f * acc;")).perf_score == 4
    assert list(tmp_path.glob("*.so")) and not list(tmp_path.glob("../src"))


# ------------------------------------------------------------------------------------------ descriptor
@pytest.mark.parametrize(
    ("snippet", "levels"),
    [
        ("for (int i = 0; i < n; i++) y[i] = x[i];", (0, 0, 0)),
        ("float *restrict y; #pragma omp parallel for\n", (1, 0, 1)),
        ("for (int i0 = 0; i0 < M; i0 += 32) c = fmaf(a, b, c);\n#pragma omp simd\n", (2, 1, 2)),
        (
            "__builtin_prefetch(p); float online_m;\n"
            "#pragma omp parallel for collapse(2)\n#pragma omp simd\n",
            (3, 2, 3),
        ),
        ("y[j] = expf(x[j] - m); s += y[j]; __m256 v = _mm256_add_ps(a, b);", (0, 3, 0)),
        ("{ y[j] = expf(x[j] - m); s += y[j]; }", (0, 1, 0)),
    ],
)
def test_descriptor_table(snippet: str, levels: tuple[int, int, int]) -> None:
    d = kf.RegexDescriptor("c")
    assert d(snippet) == levels and d(snippet) == d(snippet)


def test_rendered_kernels_span_the_grid() -> None:
    d = kf.RegexDescriptor()
    cells, per_task = set(), {}
    for task in ("matmul", "softmax", "layernorm", "conv2d"):
        space = kf._space(task)
        per_task[task] = set()
        for vals in itertools.product(*space.values()):
            per_task[task].add(d(kf.render(task, {**dict(zip(space, vals, strict=True)), "bug": None})))
        cells |= per_task[task]
    assert len(cells) >= 20 and all(0 <= v <= 3 for c in cells for v in c)
    # the new tasks: layer norm reaches compute levels 0-2 (three-pass, fused fmaf, Welford online);
    # the convolution every memory level (restrict, h0 row tiles, prefetch) and collapse(2)
    assert {c[1] for c in per_task["layernorm"]} == {0, 1, 2}
    assert {c[0] for c in per_task["conv2d"]} == {0, 1, 2, 3}
    assert {c[2] for c in per_task["conv2d"]} == {0, 1, 2, 3}
    assert len(per_task["layernorm"]) >= 20 and len(per_task["conv2d"]) >= 20


# ------------------------------------------------------------------------------------------ new tasks
_GOOD = {  # correct variants covering every structural branch of the two templates
    "layernorm": [
        {"algo": "three", "simd": True, "restrict": True, "omp": 1, "unroll": 4},
        {"algo": "fused", "simd": True, "omp": 1, "unroll": 2, "prefetch": True},
        {"algo": "welford", "restrict": True, "unroll": 4},
    ],
    "conv2d": [
        {"simd": True, "fma": True, "omp": 2, "unroll": 4, "prefetch": True},
        {"order": "row", "restrict": True, "simd": True, "omp": 2, "unroll": 4, "fma": True},
        {"tile": 4, "restrict": True, "simd": True, "omp": 1, "unroll": 2, "prefetch": True},
    ],
}
_WRONG = {  # deliberately wrong: the bias dropped / the padding offset lost
    "layernorm": ("* G[j] + Bt[j];", "* G[j];"),
    "conv2d": ("int ih = oh + kh - 1;", "int ih = oh + kh;"),
}


@pytest.fixture(scope="module")
def new_task_evaluators(cache_dir):
    """One C evaluator per new task (OMP_NUM_THREADS=2), shared by the tests: the seed is timed once."""
    return {n: kf.CEvaluator(SMALL[n], threads=2, repeats=1, workdir=cache_dir) for n in _GOOD}


@needs_gcc
@pytest.mark.parametrize(("name", "i"), [(n, i) for n in ("layernorm", "conv2d") for i in range(-1, 3)])
def test_new_task_correct_variants_pass_the_gate(name, i, new_task_evaluators) -> None:
    task, ev = SMALL[name], new_task_evaluators[name]
    src = kf.render(name, {**task.seed_ir(), **(_GOOD[name][i] if i >= 0 else {})})  # -1: the seed
    r = ev(src)
    assert r.perf_score == 5 and r.speedup > 0 and r.runtime_ms > 0, r.log
    assert all(0 <= v <= 3 for v in kf.RegexDescriptor()(src))


@needs_gcc
@pytest.mark.parametrize("name", ["layernorm", "conv2d"])
def test_new_task_wrong_variant_is_rejected(name, new_task_evaluators) -> None:
    src = kf.render(name, {**SMALL[name].seed_ir(), **_GOOD[name][0]})
    old, new = _WRONG[name]
    assert old in src
    r = new_task_evaluators[name](src.replace(old, new))
    assert r.perf_score == 4 and r.fitness == 4.0 and "wrong values" in r.log
    with pytest.raises(ValueError, match="sources"):
        new_task_evaluators[name].time_interleaved([])


def test_reference_outputs_match_direct_formulas() -> None:
    from optarium.kernels._cworker import make_inputs, out_shape

    x, g, b = (a.astype(np.float64) for a in make_inputs("layernorm", [5, 7], 0))
    mu, var = x.mean(1, keepdims=True), x.var(1, keepdims=True)
    np.testing.assert_allclose(
        kf.reference("layernorm", [x, g, b]), (x - mu) / np.sqrt(var + 1e-5) * g + b, rtol=1e-12
    )
    shape = [3, 5, 6, 2]  # (CI, H, W, CO)
    x, w, bias = (a.astype(np.float64) for a in make_inputs("conv2d", shape, 0))
    xp = np.pad(x[0], ((0, 0), (1, 1), (1, 1)))
    want = np.zeros(out_shape("conv2d", shape))
    for co, oh, ow in itertools.product(range(2), range(5), range(6)):
        want[0, co, oh, ow] = bias[co] + (xp[:, oh : oh + 3, ow : ow + 3] * w[co]).sum()
    np.testing.assert_allclose(kf.reference("conv2d", [x, w, bias]), want, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="task"):
        kf.reference("conv3d", [x])


@pytest.mark.parametrize("name", ["layernorm", "conv2d"])
def test_new_tasks_on_the_cost_model_and_the_search(name) -> None:
    task = getattr(kf.tasks, name)()
    ev = kf.CostModelEvaluator(task)
    assert ev(task.seed_ir()).fitness == pytest.approx(6.0)
    best = {**task.seed_ir(), **_GOOD[name][0], "restrict": True, "omp": 1}
    assert ev(best).speedup > 2.0 and ev({**best, "bug": "remainder"}).fitness == 4.0
    # proposals aimed at a target cell land there far more often than untargeted ones
    m, d, rng = kf.RuleMutator(task, bug_rate=0.0), kf.RegexDescriptor(), np.random.default_rng(0)
    target, axis, level = ((0, 2, 0), 1, 2) if name == "layernorm" else ((2, 1, 3), 2, 3)
    hit = [
        d(kf.render(name, m.propose(task.seed_ir(), (), target, None, rng)))[axis] == level
        for _ in range(100)
    ]
    free = [
        d(kf.render(name, m.propose(task.seed_ir(), (), None, None, rng)))[axis] == level for _ in range(100)
    ]
    assert np.mean(hit) > 0.6 and np.mean(hit) > np.mean(free) + 0.4
    r1, r2 = (kf.KernelFoundry(task, seed=2).run(40) for _ in range(2))
    assert r1.history == r2.history and r1.value > 6.0 and r1.extras["perf_score"] == 5
    assert all(0 <= v <= 3 for c in r1.extras["archive"].elites for v in c)


# ------------------------------------------------------------------------------------------ bugs
@needs_gcc
@pytest.mark.parametrize("name", ["matmul", "softmax", "layernorm", "conv2d"])
def test_remainder_bug_passes_powers_of_two_fails_odd(name, cache_dir) -> None:
    task = SMALL[name]
    bug = kf.render(task.name, {**task.seed_ir(), "bug": "remainder", "unroll": 4})
    even = kf.KernelTask(task.name, task.time_shape, (task.check_shapes[1],), task.rtol, task.atol)
    assert kf.CEvaluator(even, threads=1, repeats=1, workdir=cache_dir)(bug).perf_score == 5
    assert kf.CEvaluator(task, threads=1, repeats=1, workdir=cache_dir)(bug).perf_score in (3, 4)


_RACE_OK = {
    "softmax": {"algo": "fused", "simd": True, "omp": 1, "restrict": True},
    "layernorm": _GOOD["layernorm"][1],
    "conv2d": _GOOD["conv2d"][1],
}


@needs_gcc
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="races rarely show with fewer than 2 cores")
@pytest.mark.parametrize("name", ["softmax", "layernorm", "conv2d"])
def test_race_bug_is_caught_with_two_threads(name, cache_dir) -> None:
    task = SMALL[name]
    ev = kf.CEvaluator(task, threads=2, repeats=1, workdir=cache_dir)
    bug = kf.render(name, {**task.seed_ir(), "bug": "race"})
    assert "omp parallel for" in bug
    assert any(ev(bug).perf_score == 4 for _ in range(5))
    assert ev(kf.render(name, {**task.seed_ir(), **_RACE_OK[name]})).perf_score == 5


def test_mutator_injects_bugs_at_its_rate() -> None:
    task = kf.tasks.softmax()
    m = kf.RuleMutator(task, bug_rate=0.05)
    rng = np.random.default_rng(0)
    n = sum(m.propose(task.seed_ir(), (), None, None, rng)["bug"] is not None for _ in range(2000))
    assert abs(n / 2000 - 0.05) < 4 * np.sqrt(0.05 * 0.95 / 2000)
    child = m.propose(task.seed_ir(), (), (0, 2, 0), None, np.random.default_rng(1))
    assert kf.RegexDescriptor()(kf.render("softmax", child))[1] == 2 or child["bug"]


# ------------------------------------------------------------------------------------------ the search
def _grown(seed: int = 0, **kw) -> kf.KernelFoundry:
    s = kf.KernelFoundry(kf.tasks.matmul(), seed=seed, template_tuning=False, **kw)
    for _ in range(12):
        c = s.ask()
        s.tell(c, [s.evaluator(x) for x in c])
    return s


def test_ring_migration_copies_the_best_at_the_rate() -> None:
    s = _grown(migration_interval=1000)
    before = [list(i) for i in s.islands]
    s.migrate()
    for i, isl in enumerate(before):
        j = (i + 1) % s.n_islands
        k = int(np.ceil(s.migration_rate * len(isl)))
        for c in isl[:k]:
            assert c.source in {x.source for x in s.islands[j]} or len(s.islands[j]) == s.island_size
        assert len(s.islands[j]) <= s.island_size
    best0 = before[0][0]
    assert best0.result.fitness <= s.islands[1][0].result.fitness


def test_parent_sampling_ratios() -> None:
    s = _grown()
    s.sample_log.clear()
    for _ in range(3000):
        s.sample_parent()
    for name, p in zip(("exploit", "explore", "random"), s.ratios, strict=True):
        f = s.sample_log.count(name) / 3000
        assert abs(f - p) < 4 * np.sqrt(p * (1 - p) / 3000), (name, f)


def test_template_tuner_finds_the_grid_optimum() -> None:
    seen: list[dict] = []

    def ev(ir, src):
        seen.append(ir)
        return kf.gated(5, 10.0 - abs(ir["tile"] - 32) / 16 - abs(ir["unroll"] - 4))

    out = kf.tune_templates("matmul", kf.tasks.matmul().seed_ir(), ev, 64, np.random.default_rng(0))
    best = max(out, key=lambda t: t[1].fitness)[0]
    assert (best["tile"], best["unroll"]) == (32, 4) and len(out) == 12
    assert all(ir["order"] == "ijk" and not ir["simd"] for ir in seen)  # structure fixed


def test_prompt_population_fitness_and_sampling() -> None:
    pop = kf.PromptPopulation(kf.default_strategy("matmul"), usage_penalty=0.05)
    rng = np.random.default_rng(0)
    pop.uses[0] = 5
    j = pop.rewrite(rng)
    assert j == 1 and len(pop.prompts) == 2
    for sc in (3.0, 7.0, 5.0):
        pop.report(0, sc)
    pop.report(1, 4.0)
    assert pop.fitness == [7.0, 4.0]
    picks = [pop.sample(np.random.default_rng(i)) for i in range(200)]
    assert picks.count(0) > picks.count(1)
    pop.uses[0] += 200  # overuse lowers its score
    s = pop.scores()
    assert s[0] < 7.0 - 9.0 and s[1] > s[0]


def test_determinism_result_and_state_round_trip() -> None:
    r1 = kf.KernelFoundry(kf.tasks.softmax(), seed=3).run(40)
    r2 = kf.KernelFoundry(kf.tasks.softmax(), seed=3).run(40)
    assert r1.history == r2.history and r1.x == r2.x and r1.n_iter == 40
    assert r1.value >= 5.0 + 1.0 and r1.extras["perf_score"] == 5 and len(r1.extras["archive"]) > 3
    a, b = _grown(seed=5), _grown(seed=6)
    b.load_state_dict(a.state_dict())
    for s in (a, b):
        c = s.ask()
        s.tell(c, [s.evaluator(x) for x in c])
    assert a.history == b.history


def test_baselines_use_the_budget() -> None:
    t = kf.tasks.matmul()
    for f in (kf.random_search, kf.greedy_hill_climb):
        r = f(t, budget=30, seed=0)
        assert r.n_iter == 30 and len(r.history) == 30 and r.value >= 6.0 - 1e-9
        assert r == f(t, budget=30, seed=0)
    g = kf.greedy_hill_climb(t, budget=30, seed=0)
    best = np.array(g.history.metrics["best"])
    assert (np.diff(best) >= 0).all()


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="axes"):
        kf.RegexDescriptor(axes=("memory_opt", "tensor_cores"))
    with pytest.raises(ValueError, match="bins"):
        kf.MapElitesArchive(3, 0)
    with pytest.raises(ValueError, match="dims"):
        kf.MapElitesArchive(0, 4)
    with pytest.raises(ValueError, match="budget"):
        kf.KernelFoundry(kf.tasks.matmul()).run(0)
    with pytest.raises(ValueError, match="budget"):
        kf.random_search(kf.tasks.matmul(), budget=0)
    with pytest.raises(ValueError, match="ratios"):
        kf.KernelFoundry(kf.tasks.matmul(), ratios=(0.5, 0.2, 0.1))
    with pytest.raises(ValueError, match="measures"):
        kf.MapElitesArchive(3, 4).add((1, 2), 1.0)
    with pytest.raises(ValueError, match="perf_score"):
        kf.gated(6, 1.0)
    with pytest.raises(ValueError, match="task"):
        kf.render("conv", {})
    with pytest.raises(ValueError, match="rows"):
        kf.tasks.layernorm(0, 16)
    with pytest.raises(ValueError, match="channels"):
        kf.tasks.conv2d(0)
    with pytest.raises(TypeError, match="source"):
        kf.RegexDescriptor()(3)
    s = kf.KernelFoundry(kf.tasks.matmul())
    with pytest.raises(ValueError, match="results"):
        s.tell(s.ask(), [])
