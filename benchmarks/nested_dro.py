"""Nested DRO's hot paths against peers, as ratios measured in one run.

Run: ``python benchmarks/nested_dro.py [--repeats 7] [--threads 1]``.

(a) One fit on the quick experiment's instance (n = 200, d = 5, contaminated; float64):
``NestedDRORegressor`` (chi^2 outer, W2 inner, squared loss, the alternation of exact weight steps and
reweighted-least-squares parameter steps) against its rho = 0 special case (W2-DRO, one parameter step),
scikit-learn's ``HuberRegressor`` (L-BFGS-B) and the cvxpy/Clarabel solve of the pessimistic chi^2-DRO dual
(the experiment's baseline, compiled once, solve only).
(b) One training step of a 5-64-1 MLP on the same data (forward, loss, backward, SGD): ERM against the
nested criterion ``NestedDRO`` (chi^2 outer, fixed gamma = 10, 10 fixed-point steps of the inner
maximisation) and the same criterion with rho = 0 (WRM), so the cost of the outer reweighting shows as
nested / WRM.
Blocks are interleaved over ``--repeats`` rounds; reported are per-call medians and the ratios of medians.
Measured, never asserted.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
from _timing import medians


def _fit_bench() -> dict[str, Callable[[], object]]:
    import math

    import cvxpy as cp
    from sklearn.linear_model import HuberRegressor

    from optarium.dro.nested import NestedDRORegressor
    from optarium.problems.contaminated import contaminated_regression

    p = contaminated_regression(0, n_test=10)
    X, y = p.X, p.y
    Xn, yn = X.numpy(), y.numpy()
    w, b, eta = cp.Variable(5), cp.Variable(), cp.Variable()
    r = yn - Xn @ w - b
    prob = cp.Problem(
        cp.Minimize(eta + math.sqrt(1.2) * cp.norm(cp.pos(cp.square(r) - eta), 2) / math.sqrt(200))
    )
    prob.solve(solver="CLARABEL")  # compile once
    return {
        "nested_chi2": lambda: NestedDRORegressor(rho=0.1, radius=0.1).fit(X, y),
        "w2_dro": lambda: NestedDRORegressor(rho=0.0, radius=0.1).fit(X, y),
        "sklearn_huber": lambda: HuberRegressor(alpha=0.0, max_iter=1000).fit(Xn, yn),
        "cvxpy_chi2_dro": lambda: prob.solve(solver="CLARABEL"),
    }


def _step_bench() -> dict[str, Callable[[], object]]:
    from optarium.dro.nested import NestedDRO
    from optarium.problems.contaminated import contaminated_regression

    p = contaminated_regression(0, n_test=10)
    X, y = p.X.float(), p.y.float()
    out: dict[str, Callable[[], object]] = {}
    for name in ("erm", "wrm", "nested"):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(5, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1))
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        crit = NestedDRO("chi2", 0.1 if name == "nested" else 0.0, radius=0.1, gamma=10.0, inner_steps=10)

        def fn(out_: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
            return (out_[:, 0] - t) ** 2

        def step(model=model, opt=opt, crit=crit, name=name) -> None:  # type: ignore[no-untyped-def]
            opt.zero_grad()
            loss = fn(model(X), y).mean() if name == "erm" else crit(fn, model, X, y)[0]
            loss.backward()
            opt.step()

        out[name] = step
    return out


def main() -> None:
    """Time (a) the fits and (b) the training steps; print medians and ratios."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    fits = medians(_fit_bench(), args.repeats, number=3)
    print("(a) one fit, median seconds:")
    for k, v in fits.items():
        print(f"  {k:16s} {v * 1e3:9.2f} ms   nested_chi2 / {k}: {fits['nested_chi2'] / v:6.2f}x")
    steps = medians(_step_bench(), args.repeats, number=20)
    print("(b) one MLP training step, median seconds:")
    for k, v in steps.items():
        print(f"  {k:16s} {v * 1e3:9.3f} ms   nested / {k}: {steps['nested'] / v:6.2f}x")


if __name__ == "__main__":
    main()
