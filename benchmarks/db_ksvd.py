"""DB-KSVD's time per epoch against scikit-learn's MiniBatchDictionaryLearning and a TopK SAE, as ratios.

Run: ``python benchmarks/db_ksvd.py [--repeats 3] [--threads 1] [--n 10000]``.

Planted problem m = 64, K = 256, k = 5 (:func:`optarium.sparse.planted_dictionary`, float32 for torch,
float64 for scikit-learn, which converts to it anyway), equal dictionary size and sparsity:

1. One DB-KSVD iteration over all ``n`` samples (dictionary update with atom batch 8, then matching-pursuit
   coding of every sample), and its two halves alone.
2. One epoch of ``MiniBatchDictionaryLearning(n_components=256, batch_size=256, max_iter=1)`` (its l1 fit,
   LARS by default and ``fit_algorithm="cd"``), plus its OMP transform with 5 nonzeros of the same samples
   (the coding DB-KSVD's epoch includes).
3. One epoch of TopK-SAE training (n / 256 Adam steps, batch 256).
4. Scaling: one DB-KSVD iteration at n / 2, n and 2 n (CPU time; roughly linear is expected).

CPU seconds (``time.process_time``) of each call, median over ``--repeats``; ratios to DB-KSVD's epoch.
Measured, never asserted.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch
from _timing import median_seconds


def _cpu(fn: Callable[[], object], repeats: int) -> float:
    return median_seconds(fn, repeats, clock=time.process_time)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--n", type=int, default=10_000)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from sklearn.decomposition import MiniBatchDictionaryLearning
    from sklearn.linear_model import orthogonal_mp_gram

    from optarium.sparse import db_ksvd, ksvd_dictionary_update, matching_pursuit, planted_dictionary
    from optarium.sparse.db_ksvd import TopKSAE

    m, K, k, n = 64, 256, 5, args.n
    Y, _, _ = planted_dictionary(2 * n, m, K, k, seed=0, dtype=torch.float32)
    Yn = Y[:n]
    res = db_ksvd(Yn, K, k, max_iter=2, tol=0.0, seed=0)  # a dictionary and codes after 2 iterations
    D = res.x["components"].T.contiguous()
    idx, val = res.x["indices"].T.contiguous(), res.x["values"].T.contiguous()
    order = torch.randperm(K, generator=torch.Generator().manual_seed(0))

    def ksvd_iter(Ys: torch.Tensor) -> Callable[[], object]:
        return lambda: db_ksvd(Ys, K, k, max_iter=1, tol=0.0, seed=0, init=res.x["components"])

    t_epoch = _cpu(ksvd_iter(Yn), args.repeats)
    # db_ksvd(max_iter=1) codes twice (start and after the update): subtract one coding
    t_code = _cpu(lambda: matching_pursuit(Yn.T, D, k), args.repeats)
    t_update = _cpu(lambda: ksvd_dictionary_update(Yn.T.contiguous(), D, idx, val, order, 8), args.repeats)
    Y64 = Yn.double().numpy()
    rows: dict[str, float] = {
        "db-ksvd iteration (update + coding)": t_update + t_code,
        "  dictionary update (atom batch 8)": t_update,
        "  matching-pursuit coding": t_code,
    }
    for alg in ("lars", "cd"):
        est = MiniBatchDictionaryLearning(
            n_components=K, batch_size=256, max_iter=1, fit_algorithm=alg, alpha=0.1, random_state=0
        )
        rows[f"sklearn MBDL epoch (fit {alg})"] = _cpu(lambda est=est: est.fit(Y64), args.repeats)
    comp = res.x["components"].double().numpy()
    gram = comp @ comp.T
    rows["sklearn OMP coding (orthogonal_mp_gram)"] = _cpu(
        lambda: orthogonal_mp_gram(gram, comp @ Y64.T, n_nonzero_coefs=k), args.repeats
    )
    sae = TopKSAE(m, K, k, generator=torch.Generator().manual_seed(0))
    opt = torch.optim.Adam(sae.parameters(), lr=1e-3)

    def sae_epoch() -> None:
        for s in range(0, n, 256):
            xb = Yn[s : s + 256]
            rec, _ = sae(xb)
            loss = ((rec - xb) ** 2).sum(1).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            sae.normalize_decoder()

    rows["TopK SAE epoch (batch 256)"] = _cpu(sae_epoch, args.repeats)
    base = rows["db-ksvd iteration (update + coding)"]
    print(f"\nm={m} K={K} k={k} n={n}, CPU seconds (median of {args.repeats}), {args.threads} thread(s)")
    for name, t in rows.items():
        print(f"  {name:<42} {t:8.3f} s   ratio to db-ksvd iteration {t / base:6.2f}x", flush=True)
    print(f"  (db_ksvd(max_iter=1) end to end, incl. its initial coding: {t_epoch:.3f} s)")
    print("\nscaling of one DB-KSVD iteration in n")
    prev = None
    for nn in (n // 2, n, 2 * n):
        t = _cpu(ksvd_iter(Y[:nn]), args.repeats) - _cpu(lambda nn=nn: matching_pursuit(Y[:nn].T, D, k), 1)
        extra = f"   x{t / prev:.2f} for x2 samples" if prev else ""
        print(f"  n={nn:<7} {t:8.3f} s{extra}", flush=True)
        prev = t


if __name__ == "__main__":
    main()
