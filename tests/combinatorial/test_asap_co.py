"""Tests for ASAP (asap-co) and the TSP/CVRP routing layer it uses (spec tests 1-7, 9)."""

from __future__ import annotations

import itertools
import pickle

import numpy as np
import pytest
import torch

from optarium.combinatorial.asap import (
    ASAPPolicy,
    AttentionPolicy,
    SelectionHead,
    adapt,
    fomaml_selection,
    param_hash,
    train_pomo,
)
from optarium.combinatorial.routing import (
    brute_force_tsp,
    check_cvrp,
    check_tour,
    cvrp_cost,
    cvrp_instances,
    distance_matrix,
    held_karp,
    nearest_neighbour,
    optimal_next_sets,
    ortools_cvrp,
    ortools_tsp,
    repair_cvrp,
    repair_tour,
    tour_length,
    tsp_instances,
    two_opt,
)


def _policy(k: int = 3, seed: int = 0, d: int = 16) -> ASAPPolicy:
    torch.manual_seed(seed)
    pol = ASAPPolicy(AttentionPolicy(d, 1, heads=2), SelectionHead(d), k=k)
    # a non-trivial selection head (the default starts as a pass-through)
    with torch.no_grad():
        for p in pol.selection.net[2].parameters():
            p.normal_(0.0, 0.5)
    return pol


def _sampler(n: int, dist: str = "uniform"):
    return lambda b, g: tsp_instances(b, n, dist, generator=g)


# ---------------------------------------------------------------- routing layer


def test_held_karp_equals_brute_force_and_ortools():
    g = torch.Generator().manual_seed(1)
    for dist in ("uniform", "gmm3"):
        for x in tsp_instances(3, 8, dist, generator=g, dtype=torch.float64):
            d = distance_matrix(x)
            length, tour, _ = held_karp(d)
            bf, _ = brute_force_tsp(d)
            assert length == pytest.approx(bf, abs=1e-12)
            assert float(tour_length(x, torch.tensor(tour))) == pytest.approx(length, abs=1e-12)
            assert ortools_tsp(x, 0.1)[0] == pytest.approx(length, rel=1e-5)


def test_optimal_next_sets_agree_with_brute_force_on_all_states():
    g = torch.Generator().manual_seed(2)
    n = 6
    for x in tsp_instances(2, n, generator=g, dtype=torch.float64):
        d = distance_matrix(x).numpy()
        _, tour, C = held_karp(d)
        # brute force cost-to-go: from current j with visited S, finish the rest and return to 0
        for r in range(0, n - 1):
            for rest in itertools.combinations(range(1, n), r):
                for j in (0, *rest) if r == 0 else rest:
                    S = 1 | sum(1 << v for v in rest)
                    left = [v for v in range(n) if not (S >> v) & 1]
                    best, arg = np.inf, set()
                    for perm in itertools.permutations(left):
                        path = [j, *perm, 0]
                        c = sum(d[path[i], path[i + 1]] for i in range(len(path) - 1))
                        if c < best - 1e-9:
                            best, arg = c, {perm[0]}
                        elif abs(c - best) <= 1e-9:
                            arg.add(perm[0])
                    assert C[S, j] == pytest.approx(best, abs=1e-10)
                    assert set(optimal_next_sets(d, C, S, j)) == arg
        # step 1: both neighbours of the start on an optimal tour are optimal
        assert {tour[1], tour[-1]} <= set(optimal_next_sets(d, C, 1, 0))


def test_generators_heuristics_and_feasibility():
    g = torch.Generator().manual_seed(3)
    c = tsp_instances(5, 15, "gmm3", generator=g)
    assert c.shape == (5, 15, 2) and float(c.min()) >= 0 and float(c.max()) <= 1
    nn = nearest_neighbour(c)
    t2 = two_opt(c, nn)
    assert check_tour(nn, 15).all() and check_tour(t2, 15).all()
    assert (tour_length(c, t2) <= tour_length(c, nn) + 1e-6).all()
    assert not check_tour(torch.tensor([0, 1, 1, 3]), 4)
    fixed = repair_tour([2, 2, 7, 0], 4)
    assert fixed.tolist() == [2, 0, 1, 3] and check_tour(fixed, 4)
    inst = cvrp_instances(1, 10, capacity=30, generator=g)
    dem = inst["demands"][0]
    assert int(dem.min()) >= 1 and int(dem.max()) <= 9
    cost, seq = ortools_cvrp(inst["depot"][0], inst["coords"][0], dem, 30, 0.2)
    assert check_cvrp(seq, dem, 30)
    assert cost == pytest.approx(cvrp_cost(inst["depot"][0], inst["coords"][0], seq))
    r = repair_cvrp([3, 3, 0, 99], dem, 30)
    assert check_cvrp(r, dem, 30) and not check_cvrp([0, 1, 0], dem, 30)
    assert not check_cvrp(torch.tensor([0, *range(1, 11), 0]), dem, int(dem.max()))


# ---------------------------------------------------------------- ASAP policy


def test_candidate_mask_selection_stays_in_topk():
    pol = _policy(k=3)
    g = torch.Generator().manual_seed(4)
    c = tsp_instances(4, 9, generator=g)
    with torch.no_grad():
        for decode in ("greedy", "sample"):
            out = pol.rollout(c, decode=decode, generator=g, record=True)
            tours = out["tours"]
            chosen = tours[..., 1:]  # (B, P, n-1)
            top = out["proposal_logits"].topk(3, -1).indices
            n_feas = (~out["visited"]).sum(-1)
            for t in range(8):
                kk = min(3, int(n_feas[0, 0, t]))
                assert (chosen[..., t, None] == top[..., t, :kk]).any(-1).all()
            assert check_tour(tours, 9).all()


def test_limits_k1_greedy_base_and_full_k_base_distribution():
    torch.manual_seed(5)
    prop = AttentionPolicy(16, 1, heads=2)
    c = tsp_instances(3, 8, generator=torch.Generator().manual_seed(5))
    base = ASAPPolicy(prop, None)
    k1 = ASAPPolicy(prop, _policy(k=1).selection, k=1)
    with torch.no_grad():
        assert torch.equal(base.rollout(c)["tours"], k1.rollout(c)["tours"])
        full = ASAPPolicy(prop, SelectionHead(16), k=8)  # pass-through head, k = n
        b = base.rollout(c, decode="sample", generator=torch.Generator().manual_seed(9))
        with pytest.warns(UserWarning, match="k=8"):
            a = full.rollout(c, tours=b["tours"])  # the base's sampled tours, scored by ASAP
            g_full = full.rollout(c)["tours"]
        g_base = base.rollout(c)["tours"]
    # same log-probability of every trajectory -> the same distribution over tours; same greedy tours
    torch.testing.assert_close(a["logp"], b["logp"])
    assert torch.isfinite(a["logp"]).all() and torch.equal(g_base, g_full)


def test_recall_monotone_in_k():
    pol = _policy()
    c = tsp_instances(6, 8, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    pol = pol.double()
    with torch.no_grad():
        out = ASAPPolicy(pol.proposal, None).rollout(c, starts=0, record=True)
    recalls = []
    for k in range(1, 8):
        hits = total = 0
        for b in range(6):
            d = distance_matrix(c[b])
            _, _, C = held_karp(d)
            masks = (out["visited"][b, 0].long() * (1 << torch.arange(8))).sum(-1)
            for t in range(7):
                kk = min(k, 7 - t)
                cand = out["proposal_logits"][b, 0, t].topk(kk).indices.tolist()
                opt = optimal_next_sets(d, C, int(masks[t]), int(out["current"][b, 0, t]))
                hits += bool(set(cand) & set(opt))
                total += 1
        recalls.append(hits / total)
    assert all(a <= b for a, b in itertools.pairwise(recalls)) and recalls[-1] == 1.0


def test_adaptation_isolation_and_full_finetune_changes_proposal():
    pol = _policy()
    g = torch.Generator().manual_seed(7)
    h0 = param_hash(pol.proposal)
    res = adapt(pol, _sampler(8, "gmm3"), steps=3, lr=1e-2, only="selection", batch=4, generator=g)
    assert res.extras["hash_after"]["proposal"] == h0 == res.extras["hash_before"]["proposal"]
    assert res.extras["hash_after"]["selection"] != res.extras["hash_before"]["selection"]
    assert param_hash(pol.proposal) == h0 and param_hash(res.extras["policy"].proposal) == h0  # not in place
    full = adapt(pol, _sampler(8, "gmm3"), steps=2, lr=1e-2, only="all", batch=4, generator=g)
    assert full.extras["hash_after"]["proposal"] != h0
    pickle.loads(pickle.dumps(res.history))


def test_adapt_deterministic_and_gap_trace():
    pol = _policy()
    c = tsp_instances(5, 7, generator=torch.Generator().manual_seed(8), dtype=torch.float64)
    opt = torch.tensor([held_karp(distance_matrix(x))[0] for x in c])
    pol = pol.double()
    kw = {"steps": 4, "lr": 1e-2, "batch": 4, "eval_coords": c, "eval_opt": opt, "eval_every": 2}
    s = lambda b, g: tsp_instances(b, 7, "gmm3", generator=g, dtype=torch.float64)  # noqa: E731
    r1 = adapt(pol, s, generator=torch.Generator().manual_seed(1), **kw)
    r2 = adapt(pol, s, generator=torch.Generator().manual_seed(1), **kw)
    assert r1.history == r2.history and r1.history.steps == (0, 2, 4)
    assert min(r1.history.metrics["gap"]) >= -1e-12  # never below the exact optimum


def test_maml_inner_step_decreases_surrogate_on_same_trajectories():
    pol = _policy().double()
    for dist in ("uniform", "gmm3", "gmm5"):  # every task
        c = tsp_instances(8, 7, dist, generator=torch.Generator().manual_seed(10), dtype=torch.float64)
        out = pol.rollout(c, decode="sample", generator=torch.Generator().manual_seed(3))
        adv = (out["length"] - out["length"].mean(-1, keepdim=True)).detach()  # fixed baseline
        params = list(pol.selection.parameters())
        loss = (adv * out["logp"]).mean()
        grads = torch.autograd.grad(loss, params)
        fast = ASAPPolicy(pol.proposal, SelectionHead(16), k=3).double()
        with torch.no_grad():
            for p, q, gr in zip(fast.selection.parameters(), params, grads, strict=True):
                p.copy_(q - 1e-3 * gr)
            replay = pol.rollout(c, tours=out["tours"])
            stepped = fast.rollout(c, tours=out["tours"])
        torch.testing.assert_close(replay["logp"], out["logp"].detach())
        assert float((adv * stepped["logp"]).mean()) < float(loss.detach())


def test_fomaml_and_train_pomo_run_and_keep_proposal_fixed():
    pol = _policy()
    h0 = param_hash(pol.proposal)
    res = fomaml_selection(
        pol,
        [_sampler(7), _sampler(7, "gmm3")],
        meta_steps=2,
        batch=4,
        tasks_per_step=2,
        generator=torch.Generator().manual_seed(0),
    )
    assert res.n_iter == 2 and param_hash(pol.proposal) == h0
    assert all(p.requires_grad for p in pol.proposal.parameters())
    tr = train_pomo(pol, _sampler(7), steps=3, batch=4, generator=torch.Generator().manual_seed(0))
    assert tr.n_iter == 3 and param_hash(pol.proposal) != h0


def test_train_pomo_improves_on_random_policy():
    torch.manual_seed(0)
    pol = ASAPPolicy(AttentionPolicy(32, 1, heads=2), None)
    c = tsp_instances(64, 8, generator=torch.Generator().manual_seed(11))
    with torch.no_grad():
        before = pol.rollout(c, starts=0)["length"].mean()
    train_pomo(pol, _sampler(8), steps=60, batch=32, lr=3e-3, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        after = pol.rollout(c, starts=0)["length"].mean()
    assert after < 0.9 * before


def test_bad_input():
    prop = AttentionPolicy(8, 1, heads=2)
    for k in (0, -1, True):
        with pytest.raises(ValueError, match="k"):
            ASAPPolicy(prop, SelectionHead(8), k=k)
    with pytest.raises(TypeError, match="proposal"):
        ASAPPolicy("x", None)  # type: ignore[arg-type]
    pol = ASAPPolicy(prop, SelectionHead(8), k=2)
    bad = torch.rand(2, 5, 2)
    bad[0, 1, 0] = float("nan")
    with pytest.raises(ValueError, match="coords"):
        pol.rollout(bad)
    with pytest.raises(ValueError, match="decode"):
        pol.rollout(torch.rand(1, 5, 2), decode="beam")
    with pytest.raises(ValueError, match="only"):
        adapt(pol, _sampler(5), steps=1, only="proposal")
    with pytest.raises(ValueError, match="only"):
        adapt(ASAPPolicy(prop, None), _sampler(5), steps=1)
    with pytest.raises(ValueError, match="distribution"):
        tsp_instances(2, 5, "ring")
    with pytest.raises(ValueError, match="n"):
        tsp_instances(2, 1)
    with pytest.raises(ValueError, match="dist"):
        held_karp(torch.rand(20, 20))
    with pytest.raises(ValueError, match="capacity"):
        repair_cvrp([1], torch.tensor([5]), 3)


# ---------------------------------------------------------------- CVRP policy (same classes, problem="cvrp")


def _cvrp_policy(k: int = 3, seed: int = 0, d: int = 16) -> ASAPPolicy:
    torch.manual_seed(seed)
    pol = ASAPPolicy(AttentionPolicy(d, 1, heads=2, problem="cvrp"), SelectionHead(d), k=k)
    with torch.no_grad():
        for p in pol.selection.net[2].parameters():
            p.normal_(0.0, 0.5)
    return pol


def _cvrp_sampler(n: int, capacity: int = 30, dist: str = "uniform"):
    return lambda b, g: cvrp_instances(b, n, dist, capacity=capacity, generator=g)


def test_cvrp_masks_never_allow_infeasible_moves_and_tours_are_feasible():
    """Re-derive every state from the sequence alone: the recorded mask equals the capacity/visit rule,
    every chosen move is feasible and among the top-k feasible proposals, and routes match routing.py."""
    pol = _cvrp_policy(k=3)
    n, cap = 9, 12  # tight capacity: many depot returns, many capacity-masked customers
    inst = cvrp_instances(3, n, capacity=cap, generator=torch.Generator().manual_seed(20))
    g = torch.Generator().manual_seed(21)
    n_masked = 0
    with torch.no_grad():
        for decode, starts in (("greedy", "pomo"), ("sample", "pomo"), ("sample", 0), ("greedy", 4)):
            out = pol.rollout(inst, decode=decode, starts=starts, generator=g, record=True)
            seqs, lp = out["tours"], out["proposal_logits"]
            offset = 1 if starts == 0 else 2
            for b in range(3):
                dem = inst["demands"][b]
                for p in range(seqs.shape[1]):
                    seq = seqs[b, p].tolist()
                    assert seq[0] == 0 and seq[-1] == 0
                    if starts == "pomo":
                        assert seq[1] == p + 1
                    load, seen, cur = cap, set(), 0
                    if offset == 2:
                        seen.add(seq[1])
                        load, cur = cap - int(dem[seq[1] - 1]), seq[1]
                    for t in range(lp.shape[2]):
                        bad = torch.tensor(
                            [cur == 0 and len(seen) < n]
                            + [j in seen or int(dem[j - 1]) > load for j in range(1, n + 1)]
                        )
                        assert torch.equal(out["infeasible"][b, p, t], bad)
                        n_masked += int(bad[1:].sum()) - len(seen)
                        nxt = seq[t + offset]
                        assert not bad[nxt]
                        feas = (~bad).nonzero().flatten()
                        top = feas[lp[b, p, t, feas].topk(min(3, len(feas))).indices].tolist()
                        assert nxt in top
                        if nxt == 0:
                            load = cap
                        else:
                            seen.add(nxt)
                            load -= int(dem[nxt - 1])
                        cur = nxt
                    assert check_cvrp(seqs[b, p], dem, cap)
                    assert float(out["length"][b, p]) == pytest.approx(
                        cvrp_cost(inst["depot"][b], inst["coords"][b], seqs[b, p]), abs=1e-5
                    )
    assert n_masked > 0  # the capacity rule was exercised, not only the visited rule
    best = pol.solve(inst)[1]
    for b in range(3):  # OR-Tools (guided local search) is no worse than an untrained policy's best start
        ref, _ = ortools_cvrp(inst["depot"][b], inst["coords"][b], inst["demands"][b], cap, 0.2)
        assert ref <= float(best[b]) + 1e-6


def test_cvrp_limits_k1_greedy_base_and_full_k_base_distribution():
    torch.manual_seed(22)
    prop = AttentionPolicy(16, 1, heads=2, problem="cvrp")
    inst = cvrp_instances(3, 7, capacity=15, generator=torch.Generator().manual_seed(22))
    base = ASAPPolicy(prop, None)
    k1 = ASAPPolicy(prop, _cvrp_policy(k=1).selection, k=1)
    full = ASAPPolicy(prop, SelectionHead(16), k=8)  # pass-through head, k = n + 1 nodes
    with torch.no_grad():
        assert torch.equal(base.rollout(inst)["tours"], k1.rollout(inst)["tours"])
        for starts in ("pomo", 0):
            b = base.rollout(inst, decode="sample", starts=starts, generator=torch.Generator().manual_seed(9))
            with pytest.warns(UserWarning, match="k=8"):
                a = full.rollout(inst, starts=starts, tours=b["tours"])
            torch.testing.assert_close(a["logp"], b["logp"])
            assert torch.isfinite(a["logp"]).all() and torch.equal(a["length"], b["length"])


def test_cvrp_train_adapt_isolation_and_improvement():
    torch.manual_seed(0)
    pol = ASAPPolicy(AttentionPolicy(32, 1, heads=2, problem="cvrp"), SelectionHead(32), k=3)
    test = cvrp_instances(32, 8, generator=torch.Generator().manual_seed(23))
    with torch.no_grad():
        before = pol.rollout(test, starts=0)["length"].mean()
    train_pomo(pol, _cvrp_sampler(8), steps=40, batch=16, lr=3e-3, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        after = pol.rollout(test, starts=0)["length"].mean()
    assert after < 0.9 * before
    h0 = param_hash(pol.proposal)
    opt = torch.tensor(
        [ortools_cvrp(test["depot"][i], test["coords"][i], test["demands"][i], 30, 0.05)[0] for i in range(4)]
    )
    ev = {key: v[:4] for key, v in test.items()}
    res = adapt(
        pol,
        _cvrp_sampler(8, dist="gmm3"),
        steps=2,
        lr=1e-2,
        batch=4,
        eval_coords=ev,
        eval_opt=opt,
        eval_every=1,
        generator=torch.Generator().manual_seed(1),
    )
    assert res.extras["hash_after"]["proposal"] == h0 == param_hash(pol.proposal)
    assert res.extras["hash_after"]["selection"] != res.extras["hash_before"]["selection"]
    assert min(res.history.metrics["gap"]) > -1e-3  # OR-Tools is (near) optimal at n = 8


def test_cvrp_bad_input():
    pol = _cvrp_policy()
    inst = cvrp_instances(2, 5, capacity=10, generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="problem"):
        AttentionPolicy(8, 1, heads=2, problem="vrp")
    with pytest.raises(TypeError, match="coords"):
        pol.rollout(torch.rand(2, 5, 2))
    with pytest.raises(ValueError, match="lacks"):
        pol.rollout({"coords": inst["coords"]})
    bad = {**inst, "demands": inst["demands"].clone()}
    bad["demands"][0, 0] = 11
    with pytest.raises(ValueError, match="demands"):
        pol.rollout(bad)
    nan = {**inst, "coords": inst["coords"].clone()}
    nan["coords"][1, 2, 0] = float("nan")
    with pytest.raises(ValueError, match="coords"):
        pol.rollout(nan)
    with pytest.raises(ValueError, match="starts"):
        pol.rollout(inst, starts=6)
