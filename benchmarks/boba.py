"""BoBa's hot paths against their peers, as CPU-time ratios measured in one run.

Run: ``python benchmarks/boba.py [--repeats 5] [--threads 1]``.

1. One screening round (surrogate refit + arm choice + member draws + inference + top-b pick), BoBa with
   I = 1,000 and k = 6 against full-library screening (:class:`~optarium.bo.boba.PoolScreening`, scoring
   every unevaluated product) on the spec's synthetic libraries of N = 3e4 and 1e6 products, 2,000
   evaluated (same surrogate).
2. The same BoBa round on lazy libraries (100 arms, features generated from the indices) of N = 1e8
   against N = 1e6: the ratio should stay near 1 (time per round independent of N).
3. The bootstrap-ridge ensemble (5 members, 2,000 x 24, fit + predict on 30,000) against 5 scikit-learn
   ``Ridge`` fits and predictions on the same resamples.

CPU time (``time.process_time``), median over ``--repeats``; ratios are measured, never asserted.
"""

from __future__ import annotations

import argparse
import copy
import time

import torch
from _timing import median_seconds


def _warm(opt, oracle, n: int):
    while opt.n_evaluated < n:
        idx = opt.ask()
        opt.tell(idx, oracle(idx))
    return opt


def _round(opt, repeats: int) -> float:
    """CPU time of one ``ask`` from the same state (restored untimed before each call)."""
    state = copy.deepcopy(opt.state_dict())
    return median_seconds(
        opt.ask, repeats, setup=lambda: opt.load_state_dict(copy.deepcopy(state)), clock=time.process_time
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from optarium.bo.boba import BoBa, BootstrapRidge, PartitionedLibrary, PoolScreening, SyntheticLibrary

    print("1. one round at 2,000 evaluations: BoBa (I = 1,000, k = 6) vs full-library screening")
    for n_a, n_b, M in ((300, 100, 30), (1000, 1000, 50)):
        syn = SyntheticLibrary(n_a, n_b, M, seed=0)
        common = {"maximize": True, "batch_size": 100, "n_init": 300, "seed": 0}
        boba = _warm(BoBa(syn.library, arms_per_round=6, inference_budget=1000, **common), syn.oracle, 2000)
        full = _warm(PoolScreening(syn.library, **common), syn.oracle, 2000)
        tb, tf = _round(boba, args.repeats), _round(full, args.repeats)
        print(
            f"  N = {syn.n_items:>9,}: BoBa {tb * 1e3:8.2f} ms  full {tf * 1e3:8.2f} ms  "
            f"full / BoBa {tf / tb:7.1f}x"
        )

    print("2. BoBa round on lazy libraries of N = 1e6 and 1e8 (same features, I, k, b)")

    def feats(idx: torch.Tensor) -> torch.Tensor:
        a, b = idx // 10_000, idx % 10_000
        g = torch.stack(
            [torch.sin(a * (0.37 + j)) for j in range(12)] + [torch.cos(b * (0.11 + j)) for j in range(12)]
        )
        return g.T.to(torch.float64)

    times = {}
    for n in (1_000_000, 100_000_000):
        lib = PartitionedLibrary(feats, partition_sizes=[n // 100] * 100)
        lazy = BoBa(
            lib, maximize=True, arms_per_round=6, inference_budget=1000, batch_size=100, n_init=300, seed=0
        )
        lazy = _warm(lazy, lambda i: feats(i)[:, 0] + feats(i)[:, 13], 2000)
        times[n] = _round(lazy, args.repeats)
    print(
        f"  lazy N = 1e6: {times[1_000_000] * 1e3:8.2f} ms  "
        f"lazy N = 1e8: {times[100_000_000] * 1e3:8.2f} ms  "
        f"ratio {times[100_000_000] / times[1_000_000]:5.2f}x"
    )

    print("3. bootstrap ridge (5 x 2,000 x 24, predict 30,000) vs 5 scikit-learn Ridge")
    from sklearn.linear_model import Ridge

    g = torch.Generator().manual_seed(0)
    X = torch.randn(2000, 24, generator=g, dtype=torch.float64)
    y = X @ torch.randn(24, generator=g, dtype=torch.float64)
    P = torch.randn(30_000, 24, generator=g, dtype=torch.float64)
    model = BootstrapRidge()

    def ours() -> object:
        model.fit(X, y, torch.Generator().manual_seed(1))
        return model.predict(P)

    Xn, yn, Pn = X.numpy(), y.numpy(), P.numpy()

    def sk() -> object:
        idx = torch.randint(0, 2000, (5, 2000), generator=torch.Generator().manual_seed(1)).numpy()
        return [Ridge(alpha=1.0).fit(Xn[i], yn[i]).predict(Pn) for i in idx]

    to = median_seconds(ours, args.repeats, clock=time.process_time)
    ts = median_seconds(sk, args.repeats, clock=time.process_time)
    print(f"  ours {to * 1e3:8.2f} ms  scikit-learn {ts * 1e3:8.2f} ms  sklearn / ours {ts / to:5.2f}x")


if __name__ == "__main__":
    main()
