"""LS²MC-GDA's hot path (one local iteration of every client) against its peers, as measured ratios.

Run: ``python benchmarks/ls2mc_gda.py [--repeats 7] [--threads 1]``.

On the experiment's tanh compositional problem (K = 2, d_x = 20, inner dim 10, float64), N in {4, 16}:

1. :meth:`optarium.distributed.ls2mc_gda.LS2MCGDA.step` with the problem's closed-form VJPs (clients stacked,
   new and old point in one batched call);
2. the same step with the levels' VJPs left to ``torch.func.vjp`` (a user-supplied problem without ``vjp``);
3. a per-client Python loop with ``torch.autograd`` (the naive implementation: one graph per client and
   point), computing the same STORM update;
4. the plug-in step of local SGDA (no old-point evaluation), the cost floor.

Blocks are interleaved over ``--repeats`` rounds; reported are per-step medians and ratios to the first.
Ratios are measured, never asserted.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
from _timing import compare


class _AutoLevel:
    def __init__(self, level: object) -> None:
        self.level = level

    def __call__(self, h: torch.Tensor, batch: object, clients: torch.Tensor) -> torch.Tensor:
        return self.level(h, batch, clients)  # type: ignore[operator]


def _make_loop(p: object, n: int, eta: float) -> Callable[[], None]:
    """The naive per-client autograd implementation of the same STORM iteration."""
    W1, W2 = p.Ws
    gen = torch.Generator().manual_seed(1)
    st = {
        "x": torch.zeros(n, 20, dtype=torch.float64),
        "y": torch.zeros(n, 10, dtype=torch.float64),
        "h1": torch.zeros(n, 10, dtype=torch.float64),
        "h2": torch.zeros(n, 10, dtype=torch.float64),
        "p": torch.zeros(n, 20, dtype=torch.float64),
        "q": torch.zeros(n, 10, dtype=torch.float64),
    }

    def loop_step() -> None:
        b = p.sample(gen, 1)
        a = 0.02
        xo, yo = st["x"], st["y"]
        xn, yn = xo - eta * st["p"], yo + eta * st["q"]
        rows_p, rows_q, h1s, h2s = [], [], [], []
        for i in range(n):
            out = []
            for x, y, h1o, h2o in ((xn[i], yn[i], None, None), (xo[i], yo[i], st["h1"][i], st["h2"][i])):
                xl = x.clone().requires_grad_(True)
                g1 = torch.tanh(W1[i] @ xl) + b[0][0][i]
                h1 = g1 if h1o is None else h1o
                h1l = h1.detach().clone().requires_grad_(True)
                g2 = torch.tanh(W2[i] @ h1l) + b[1][0][i]
                h2 = g2 if h2o is None else h2o
                gu = y + b[2][0][i]
                (v1,) = torch.autograd.grad(g2, h1l, gu)
                (v0,) = torch.autograd.grad(g1, xl, v1 + b[1][1][i])
                out.append((v0 + b[0][1][i], h2.detach() - p.c[i] - 0.1 * y + b[2][1][i], g1, g2))
            (un, vn, g1n, g2n), (uo, vo, g1o, g2o) = out
            h1s.append(g1n.detach() + (1 - a) * (st["h1"][i] - g1o.detach()))
            h2s.append(g2n.detach() + (1 - a) * (st["h2"][i] - g2o.detach()))
            rows_p.append(un + (1 - a) * (st["p"][i] - uo))
            rows_q.append(vn + (1 - a) * (st["q"][i] - vo))
        st.update(
            x=xn,
            y=yn,
            p=torch.stack(rows_p),
            q=torch.stack(rows_q),
            h1=torch.stack(h1s),
            h2=torch.stack(h2s),
        )

    return loop_step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from optarium.distributed.comm import Communicator
    from optarium.distributed.compositional import CompositionalMinimaxProblem, make_tanh_compositional
    from optarium.distributed.ls2mc_gda import LS2MCGDA

    for n in (4, 16):
        p = make_tanh_compositional(n, 20, (10, 10), mu=0.1, sigma=0.5, seed=0)
        auto = CompositionalMinimaxProblem(
            [_AutoLevel(g) for g in p.inner], p.outer, p.sample, n_clients=n, dim_x=20, dim_y=10, like=p.c
        )
        eta, c = 0.03, 0.02 / 0.03**2
        vr = {"lr": eta, "alpha": c, "rho_x": c, "rho_y": c, "omega": 0.1, "gamma_z": 1.0}
        fast = LS2MCGDA(p, Communicator.local(n), **vr)
        slow = LS2MCGDA(auto, Communicator.local(n), **vr)
        plug = LS2MCGDA(
            p,
            Communicator.local(n),
            lr=eta,
            alpha=1 / eta**2,
            rho_x=1 / eta**2,
            rho_y=1 / eta**2,
            smoothing=False,
        )
        loop_step = _make_loop(p, n, eta)

        compare(
            f"one local iteration of all N={n} clients (K=2, d_x=20)",
            {
                "LS2MCGDA.step (closed-form VJPs)": fast.step,
                "LS2MCGDA.step (torch.func.vjp)": slow.step,
                "per-client loop with autograd": loop_step,
                "local SGDA step (plug-in)": plug.step,
            },
            100,
            args.repeats,
        )


if __name__ == "__main__":
    main()
