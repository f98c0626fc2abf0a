"""``minimize(f, bounds, budget, strategy)``: the plain ask/evaluate/tell loop returning a :class:`Result`.

The loop asks ``batch_size`` points, evaluates ``f`` on them, tells the values, and stops when ``budget``
evaluations were spent (status ``"max_iter"``), if ``target`` is given once the best value is at or below it
(``"converged"``), and if ``time_limit_s`` is given once that many seconds have passed (``"timeout"``,
checked after each batch). A rich progress bar shows evaluations and the best value (``progress=False``
hides it). :func:`solver_cases` declares the loop's case of the solver conformance suite
(:mod:`optarium.testing.solvers`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from optarium._core.asktell import AskTellStrategy
from optarium._core.result import Result, Trace
from optarium._core.validation import check_choice, check_finite, check_int, check_nonnegative, check_type

__all__ = ["STRATEGIES", "make_strategy", "minimize", "solver_cases"]

#: Names accepted as ``strategy``.
STRATEGIES = ("turbo-enn", "turbo-enn-pareto", "turbo-gp", "turbo-zero", "random")


def make_strategy(
    name: str, bounds: torch.Tensor, *, batch_size: int = 1, seed: int = 0, **kwargs: Any
) -> AskTellStrategy:
    """A minimising strategy by name (:data:`STRATEGIES`) with its defaults."""
    from optarium.bo.turbo_enn import RandomSearch, TurboENN, TurboGP, TurboZero

    check_choice("strategy", name, STRATEGIES)
    if name == "random":
        return RandomSearch(bounds, seed=seed, **kwargs)
    if name == "turbo-gp":
        return TurboGP(bounds, batch_size=batch_size, seed=seed, **kwargs)
    if name == "turbo-zero":
        return TurboZero(bounds, batch_size=batch_size, seed=seed, **kwargs)
    acq = "pareto" if name == "turbo-enn-pareto" else "ucb"
    return TurboENN(bounds, batch_size=batch_size, acquisition=acq, seed=seed, **kwargs)


def _evaluate(f: Callable[..., Any], x: torch.Tensor, batched: bool) -> torch.Tensor:
    if batched:
        y = f(x)
    else:
        y = [f(row) for row in x]
    y = torch.as_tensor(y if not isinstance(y, list) else [float(v) for v in y], dtype=x.dtype).to(x.device)
    y = y.reshape(-1)
    if y.shape[0] != x.shape[0]:
        raise ValueError(f"f: returned {y.shape[0]} values for {x.shape[0]} points")
    return y


def minimize(
    f: Callable[..., Any],
    bounds: torch.Tensor,
    budget: int,
    strategy: AskTellStrategy | str = "turbo-enn",
    *,
    batch_size: int = 1,
    progress: bool = True,
    batched: bool = True,
    target: float | None = None,
    seed: int = 0,
    time_limit_s: float | None = None,
) -> Result:
    """Minimise the black box ``f`` over the box ``bounds`` with ``budget`` evaluations.

    Args:
        f: with ``batched=True`` maps a ``(q, d)`` tensor to ``q`` values; else a ``(d,)`` tensor to a float.
        bounds: ``(2, d)`` box (must equal the strategy's bounds when a strategy object is given).
        budget: number of evaluations.
        strategy: an :class:`~optarium._core.asktell.AskTellStrategy` with ``minimize=True`` or a name from
            :data:`STRATEGIES` (built with ``batch_size`` and ``seed``).
        batch_size: points per ask (the last batch is cut to the remaining budget).
        progress: show a rich progress bar.
        batched: how ``f`` is called.
        target: stop once the best value is <= target (status ``"converged"``).
        seed: seed of a strategy built by name.
        time_limit_s: stop (status ``"timeout"``) once this many seconds have passed, checked after each
            batch.

    Returns:
        :class:`~optarium._core.result.Result` with ``x`` the best point, ``value`` its value, ``n_iter`` the
        number of batches, ``history`` (``evaluations``, ``best``, ``batch_best``, ``seconds`` per batch) and
        ``extras`` ``X``, ``Y`` (all evaluations) and ``strategy``.
    """
    check_type("bounds", bounds, torch.Tensor)
    budget = check_int("budget", budget, minimum=1)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    check_type("progress", progress, bool)
    if target is not None:
        target = check_finite("target", target)
    if time_limit_s is not None:
        time_limit_s = check_nonnegative("time_limit_s", time_limit_s)
    if isinstance(strategy, str):
        strategy = make_strategy(strategy, bounds, batch_size=batch_size, seed=seed)
    check_type("strategy", strategy, AskTellStrategy)
    if not strategy.minimize:
        raise ValueError("strategy: must minimise (minimize=True); negate f to maximise")
    if not torch.equal(bounds.to(strategy.bounds), strategy.bounds):
        raise ValueError("bounds: differ from the strategy's bounds")

    rows: list[dict[str, float]] = []
    start = time.perf_counter()
    status = "max_iter"
    bar: Any = None
    if progress:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        bar = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("best {task.fields[best]}"),
            TimeElapsedColumn(),
            transient=True,
        )
        bar.start()
        task = bar.add_task(type(strategy).__name__, total=budget, best="-")
    try:
        used = 0
        while used < budget:
            q = min(batch_size, budget - used)
            x = strategy.ask(q)
            y = _evaluate(f, x, batched)
            strategy.tell(x, y)
            used += q
            best = strategy.best_y
            rows.append(
                {
                    "step": len(rows) + 1,
                    "evaluations": used,
                    "best": best,
                    "batch_best": float(y.min()),
                    "seconds": time.perf_counter() - start,
                }
            )
            if bar is not None:
                bar.update(task, advance=q, best=f"{best:.6g}")
            if target is not None and best <= target:
                status = "converged"
                break
            if time_limit_s is not None and time.perf_counter() - start >= time_limit_s and used < budget:
                status = "timeout"
                break
    finally:
        if bar is not None:
            bar.stop()
    return Result(
        x=strategy.best_x,
        value=strategy.best_y,
        status=status,
        n_iter=len(rows),
        history=Trace.from_rows(rows),
        wall_time_s=time.perf_counter() - start,
        extras={"X": strategy.X.clone(), "Y": strategy.Y.clone(), "strategy": strategy},
    )


def solver_cases() -> list[Any]:
    """The conformance case of :func:`minimize` (random search on a 2-d quadratic; see
    :mod:`optarium.testing.solvers`).

    Float64 only: black-box strategies store their data in float64 by contract (a float32 box is converted).
    ``diverged`` is unreachable by design: the best value can only decrease, and NaN or infinite values of
    ``f`` are rejected by ``tell`` with a ``ValueError`` naming ``y``.
    """
    from optarium._core.solver import SolverCase

    def f(x: torch.Tensor) -> torch.Tensor:
        return ((x - 0.5) ** 2).sum(-1)

    def solve(*, dtype: torch.dtype, device: Any, seed: int, **overrides: Any) -> Result:
        bounds = torch.tensor([[-2.0, -2.0], [2.0, 2.0]], dtype=dtype, device=device)
        kw: dict[str, Any] = {"budget": 24, "strategy": "random", "batch_size": 4, "progress": False}
        kw.update(seed=seed, **overrides)
        return minimize(f, bounds, **kw)

    def best(res: Result) -> float:
        return float(f(torch.as_tensor(res.x).detach().cpu().to(torch.float64)))

    return [
        SolverCase(
            name="bo-minimize",
            solve=solve,
            statuses={
                "converged": {"target": 0.05, "budget": 400},
                "max_iter": {"budget": 10},  # batches of 4, 4 and 2
                "timeout": {"time_limit_s": 0.0, "budget": 400},
            },
            max_iter=3,
            tolerance_holds=lambda res: best(res) <= 0.05,
            optimality=best,  # the minimum is 0 at (0.5, 0.5)
            optimality_tol=0.05,
            invalid=[
                ({"budget": 0}, "budget"),
                ({"batch_size": 0}, "batch_size"),
                ({"strategy": "nope"}, "strategy"),
                ({"progress": "yes"}, "progress"),
                ({"target": float("nan")}, "target"),
                ({"time_limit_s": -1.0}, "time_limit_s"),
            ],
            stochastic=True,
            dtypes=("float64",),
            timing_metrics=("seconds",),
            exempt={
                "diverged": "unreachable by design: the best value only decreases and tell() rejects NaN or "
                "infinite values of f with a ValueError naming y (tests/bo/test_minimize.py and the ask/tell "
                "conformance suite check that)",
            },
        )
    ]
