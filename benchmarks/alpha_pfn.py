"""α-PFN acquisition time per proposal against BoTorch's entropy search at equal candidate counts.

Run: ``nice -n 10 python benchmarks/alpha_pfn.py [--repeats 10] [--n 30] [--dims 1,2] [--cands 512,1024]``.

One proposal scores a fixed set of scrambled Sobol candidates on a dataset of ``n`` uniform points of a GP
prior draw, one torch thread, process CPU time (``time.process_time``), median and interquartile range over
``--repeats`` (interleaved):

- ``alpha-pfn``: :class:`optarium.bo.pfn.AlphaPFNAcquisition` ``fit`` + one forward pass over the candidates,
  for a head of the default size (emsize 64, 4 layers, 4 heads, MLP 128, 64 buckets; its cost does not depend
  on the weights, so a randomly initialised one is timed);
- ``gp-mes``: MAP fit of a BoTorch ``SingleTaskGP`` (``fit_gpytorch_mll``) + ``qMaxValueEntropy`` with 16
  max-value samples over the candidates + evaluation;
- ``gp-jes``: the same fit + ``get_optimal_samples`` (32 optima) + ``qJointEntropySearch`` + evaluation.

The spec's targets (reported, never asserted): GP-JES / α-PFN >= 3x in 2-D with 1,024 candidates (optimum
sampling and MAP fitting included); GP-MES / α-PFN >= 5x on the quick's 15-point 1-D setting.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch


def _head(dim: int):
    from optarium.bo.pfn import AlphaPFNHead, BarDistribution, GPRFFPrior, PFNRegressor, PFNTransformer

    torch.manual_seed(0)
    cfg = {"max_dim": dim, "n_out": 64, "emsize": 64, "nlayers": 4, "nheads": 4, "nhid": 128}
    bar = BarDistribution(torch.linspace(-1, 3, 65))
    ppd = PFNRegressor(PFNTransformer(**{**cfg, "n_out": 256}), BarDistribution(torch.linspace(-3, 3, 257)),
                       GPRFFPrior((dim,)), standardize=True, conditioning=("none", "f_opt"))  # fmt: skip
    return AlphaPFNHead(PFNTransformer(**cfg), bar, ppd, "MES").eval()


def _data(dim: int, n: int, n_cand: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    from optarium.bo.pfn import GPRFFPrior

    gen = torch.Generator().manual_seed(0)
    _, x, y = GPRFFPrior((dim,), lengthscale=0.2).sample_datasets(1, n, dim, gen)
    cand = torch.quasirandom.SobolEngine(dim, scramble=True, seed=1).draw(n_cand, dtype=torch.float64)
    return x[0].double(), y[0].double(), cand


def _fit(X: torch.Tensor, Y: torch.Tensor):
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import SingleTaskGP
    from gpytorch.mlls import ExactMarginalLogLikelihood

    model = SingleTaskGP(X, Y[:, None])
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    return model


def pipelines(
    dim: int, head
) -> dict[str, Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]]:
    """name -> f(X, Y, candidates) -> acquisition values."""
    from botorch.acquisition.joint_entropy_search import qJointEntropySearch
    from botorch.acquisition.max_value_entropy_search import qMaxValueEntropy
    from botorch.acquisition.utils import get_optimal_samples

    from optarium.bo.pfn import AlphaPFNAcquisition

    def pfn(X, Y, C):
        with torch.no_grad():
            return AlphaPFNAcquisition(head).fit(X, Y)(C)

    def mes(X, Y, C):
        acq = qMaxValueEntropy(_fit(X, Y), candidate_set=C, num_mv_samples=16)
        with torch.no_grad():
            return acq(C[:, None, :])

    def jes(X, Y, C):
        model = _fit(X, Y)
        bounds = torch.stack([torch.zeros(dim), torch.ones(dim)]).double()
        xs, fs = get_optimal_samples(model, bounds=bounds, num_optima=32)
        acq = qJointEntropySearch(model, optimal_inputs=xs, optimal_outputs=fs, estimation_type="LB")
        with torch.no_grad():
            return acq(C[:, None, :])

    return {"alpha-pfn": pfn, "gp-mes": mes, "gp-jes": jes}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--n", type=int, default=30)
    ap.add_argument("--dims", default="1,2")
    ap.add_argument("--cands", default="512,1024")
    args = ap.parse_args()
    torch.set_num_threads(1)
    for dim in (int(d) for d in args.dims.split(",")):
        head = _head(dim)
        fns = pipelines(dim, head)
        for n_cand in (int(c) for c in args.cands.split(",")):
            X, Y, C = _data(dim, args.n, n_cand)
            for f in fns.values():  # warm-up
                f(X, Y, C)
            times: dict[str, list[float]] = {k: [] for k in fns}
            for _ in range(args.repeats):
                for k, f in fns.items():
                    t0 = time.process_time()
                    f(X, Y, C)
                    times[k].append(time.process_time() - t0)
            med = {k: statistics.median(v) for k, v in times.items()}
            line = [f"d={dim} candidates={n_cand} n={args.n}:"]
            for k, v in times.items():
                q = statistics.quantiles(v, n=4) if len(v) > 1 else [v[0]] * 3
                line.append(f"{k} {1e3 * med[k]:.1f} ms [IQR {1e3 * q[0]:.1f}-{1e3 * q[2]:.1f}]")
            line.append(
                f"MES/PFN {med['gp-mes'] / med['alpha-pfn']:.1f}x "
                f"JES/PFN {med['gp-jes'] / med['alpha-pfn']:.1f}x"
            )
            print("  ".join(line), flush=True)


if __name__ == "__main__":
    main()
