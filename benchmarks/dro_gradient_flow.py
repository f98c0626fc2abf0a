"""GFS-DRO's hot paths against their peers, as ratios measured in one run.

Run: ``python benchmarks/dro_gradient_flow.py [--repeats 5] [--threads 1]``.

1. One inner sampling run of the uncertain least-squares experiment (N = 20 points, M = 8 particles,
   K = 200 Langevin steps, clip to [-1, 1]): :meth:`SinkhornDROSampler.sample` with the closed-form
   ``value_and_grad`` and with autograd on the loss, against a vectorised NumPy loop of the same update (the
   official script's approach) and against a torch loop over the data points (one point at a time).
2. The SVGD direction for N = 64 groups of M = 16 particles in d = 2: :func:`svgd_direction` (batched over
   groups) against a loop over the groups calling it on one group at a time.
3. WFR vs WGF vs SVGD vs dual, one sampling run each on the same instance (the cost of the samplers relative
   to each other).

Blocks are interleaved over ``--repeats`` rounds; reported are per-call medians and the ratio of medians.
Ratios are measured, never asserted.
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import torch
from _timing import compare


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from optarium.dro.gradient_flow import SinkhornDROSampler, svgd_direction
    from optarium.experiments.dro_gradient_flow import _Instance

    inst = _Instance(0, 10, 20)
    theta = torch.randn(10, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 0.3
    lam, eps, eta, k, m = 0.1, 0.5, 0.01, 200, 8
    kw = {"n_particles": m, "inner_steps": k, "inner_lr": eta, "lam": lam, "eps": eps, "clamp": (-1.0, 1.0)}
    wgf = SinkhornDROSampler("wgf", **kw)

    def ours_closed() -> None:
        wgf.sample(None, inst.xi, value_and_grad=lambda z: inst.value_and_grad(theta, z))

    def ours_autograd() -> None:
        wgf.sample(lambda z: inst.loss(theta, z), inst.xi)

    A0, A1, b = inst.A0.numpy(), inst.A1.numpy(), inst.b.numpy()
    th, xi = theta.numpy(), inst.xi.numpy()[:, 0]
    rng = np.random.default_rng(0)

    def numpy_loop() -> None:
        u, v = A0 @ th - b, A1 @ th
        c1, c2 = 2 * (u @ v) / 10, 2 * (v @ v) / 10
        z = np.repeat(xi[:, None], m, 1)
        sd = math.sqrt(2 * eta * lam * eps)
        for _ in range(k):
            g = c1 + c2 * z - 2 * lam * (z - xi[:, None])
            z = np.clip(z + eta * g + sd * rng.standard_normal(z.shape), -1, 1)

    def torch_per_point() -> None:
        for i in range(inst.xi.shape[0]):
            wgf.sample(None, inst.xi[i : i + 1], value_and_grad=lambda z: inst.value_and_grad(theta, z))

    compare(
        "WGF inner run, N=20, M=8, K=200 (float64)",
        {
            "ours, closed-form value_and_grad": ours_closed,
            "ours, autograd on the loss": ours_autograd,
            "numpy vectorised loop (official style)": numpy_loop,
            "ours, one data point at a time": torch_per_point,
        },
        3,
        args.repeats,
        unit="ms",
    )

    g = torch.Generator().manual_seed(2)
    z = torch.randn(64, 16, 2, generator=g, dtype=torch.float64)
    sc = torch.randn(64, 16, 2, generator=g, dtype=torch.float64)

    def batched() -> None:
        svgd_direction(z, sc)

    def per_group() -> None:
        for i in range(64):
            svgd_direction(z[i : i + 1], sc[i : i + 1])

    svgd_cases = {"batched": batched, "loop over groups": per_group}
    compare("SVGD direction, 64 groups x 16 particles, d=2", svgd_cases, 20, args.repeats, unit="ms")

    cases = {}
    for method in ("wgf", "wfr", "svgd", "wrm", "dual"):
        s = SinkhornDROSampler(method, **{**kw, "n_particles": 1 if method == "wrm" else m,
                                          "eps": 0.0 if method == "wrm" else eps})  # fmt: skip

        def run(s: SinkhornDROSampler = s) -> None:
            s.sample(None, inst.xi, value_and_grad=lambda z: inst.value_and_grad(theta, z))

        cases[method] = run
    compare("samplers against each other (one inner run each)", cases, 3, args.repeats, unit="ms")


if __name__ == "__main__":
    main()
