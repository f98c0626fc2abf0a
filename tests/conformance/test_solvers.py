"""Every declared solver case passes every solver conformance check (see optarium.testing.solvers), and each
check catches a deliberately broken solver."""

from __future__ import annotations

import math
import warnings
from typing import Any

import pytest
import torch

from optarium._core.solver import SolverCase, SolverLoop
from optarium._core.validation import check_positive
from optarium.testing.solvers import CHECKS, solver_cases

CASES = solver_cases()


@pytest.mark.parametrize("check", list(CHECKS), ids=str)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_conformance(case: SolverCase, check: str) -> None:
    if check in case.exempt:
        pytest.skip(f"{case.name} is exempt from {check}: {case.exempt[check]}")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a case runs without warnings
        CHECKS[check](case)


def test_cases_are_declared_beside_their_solvers_and_found_through_the_registry() -> None:
    names = {c.name for c in CASES}
    assert {"dual-accelerated-local-sgd", "fedavg", "scaffold", "bo-minimize"} <= names


def test_exemptions_carry_reasons() -> None:
    for case in CASES:
        for check, reason in case.exempt.items():
            assert check in CHECKS and len(reason) > 40, f"{case.name}: exemption of {check} needs a reason"


# ----------------------------------------------------------------------------------------- the suite can fail

A = torch.tensor([1.0, 4.0], dtype=torch.float64)  # f(x) = sum(A x^2) / 2 - b.x, x* = b / A
B = torch.tensor([1.0, -2.0], dtype=torch.float64)


def _toy(broken: str = "") -> SolverCase:
    """Gradient descent on a 2-d quadratic with SolverLoop; ``broken`` names the one thing done wrong."""

    def solver(
        a: torch.Tensor,
        b: torch.Tensor,
        *,
        lr: float = 0.2,
        max_iter: int = 50,
        tol: float | None = None,
        noise: float = 0.0,
        seed: int = 0,
        time_limit_s: float | None = None,
    ) -> Any:
        if broken != "silent_bad_input":
            lr = check_positive("lr", lr)
        gen = torch.Generator().manual_seed(seed)
        x = torch.zeros_like(b)
        loop = SolverLoop(
            max_iter - 1 if broken == "off_by_one" else max_iter,
            tol=None if tol is None else (1e4 * tol if broken == "false_convergence" else tol),
            criterion="grad_norm",
            time_limit_s=None if broken == "ignores_time_limit" else time_limit_s,
            blowup=None if broken == "no_divergence_check" else 1e12,
            watch=() if broken == "no_divergence_check" else None,
        )

        def grad(z: torch.Tensor) -> torch.Tensor:
            return a * z - b + (0.01 if broken == "biased" else 0.0)

        def evaluate(k: int) -> dict[str, float]:
            return {"objective": float((0.5 * a * x * x - b * x).sum()), "grad_norm": float(grad(x).norm())}

        for _ in loop.iterate(evaluate):
            z = (
                torch.randn(x.shape, dtype=x.dtype)
                if broken == "global_rng"
                else torch.randn(x.shape, generator=gen, dtype=x.dtype)
            )
            x = x - lr * (grad(x) + noise * z.to(x))
        out = x.to(torch.float64) if broken == "float64_always" else x
        extras = {"callback": lambda: None} if broken == "unpicklable" else {}
        res = loop.result(out, value=lambda: float((0.5 * a * x * x - b * x).sum()), extras=extras)
        if broken == "nan_value":
            import dataclasses

            res = dataclasses.replace(res, value=math.nan)
        return res

    def solve(*, dtype: torch.dtype, device: Any, seed: int, **kw: Any) -> Any:
        return solver(A.to(device, dtype), B.to(device, dtype), seed=seed, **kw)

    def true_grad_norm(res: Any) -> float:
        return float((A * res.x.double().cpu() - B).norm())

    return SolverCase(
        name=f"toy-{broken or 'ok'}",
        solve=solve,
        statuses={
            "converged": {"tol": 1e-8, "max_iter": 500},
            "max_iter": {"max_iter": 5},
            "diverged": {"lr": 1.0},  # 1 - 4 lr = -3: the second coordinate explodes
            "timeout": {"time_limit_s": 0.0, "max_iter": 2000},
        },
        max_iter=5,
        tolerance_holds=lambda res: true_grad_norm(res) <= 1e-8,
        optimality=lambda res: float((res.x.double().cpu() - B / A).norm()),
        optimality_tol=1e-7,
        invalid=[({"lr": -1.0}, "lr")],
        determinism={"noise": 0.1},
        stochastic=True,
    )


def test_the_reference_toy_passes_every_check() -> None:
    for check in CHECKS.values():
        check(_toy())


@pytest.mark.parametrize(
    ("broken", "check", "message"),
    [
        ("nan_value", "finite_fields", "value nan is not finite"),
        ("false_convergence", "converged", "tolerance does not hold"),
        ("biased", "converged", "tolerance does not hold"),
        ("off_by_one", "max_iter", "n_iter 4, the budget is 5"),
        ("no_divergence_check", "diverged", "the 'diverged' run ended 'max_iter'"),
        ("ignores_time_limit", "timeout", "the 'timeout' run ended 'max_iter'"),
        ("global_rng", "determinism", "same seed differ in"),
        ("float64_always", "dtype_device", "is torch.float64, the input torch.float32"),
        ("biased", "optimality", "optimality residual"),
        ("silent_bad_input", "bad_input", "was accepted"),
        ("unpicklable", "picklable", "does not pickle"),
    ],
)
def test_each_check_catches_a_broken_solver(broken: str, check: str, message: str) -> None:
    with pytest.raises(AssertionError, match=message):
        CHECKS[check](_toy(broken))
