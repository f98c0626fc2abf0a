"""The solver conformance suite: the checks every solver returning a :class:`~optarium._core.Result` passes.

A solver joins by declaring :class:`~optarium._core.solver.SolverCase` objects beside its code, in a
module-level function ``solver_cases()`` of its module; :func:`solver_cases` here finds them in every module
of the families that have a method in the registry, and ``tests/conformance/test_solvers.py`` runs every
check on every case. The checks are public so a user can run them on a solver of their own.

The checks (:data:`CHECKS`):

- ``finite_fields``: the base run returns a ``Result`` with a finite ``value``, finite tensors in ``x``, a
  finite ``wall_time_s``, finite history metrics (the starting row may hold ``inf`` for a quantity that
  needs a previous iterate, never NaN), and history steps that increase and end at ``n_iter``;
- ``converged``: the ``converged`` run says so and the stated tolerance holds at ``x`` (recomputed by the
  case, not read from the solver's own history);
- ``max_iter``: the ``max_iter`` run says so and ``n_iter`` equals the case's ``max_iter``;
- ``diverged``: the ``diverged`` run is reported (not raised) with status ``diverged`` and a value that is
  not NaN;
- ``timeout``: the ``timeout`` run says so and its ``wall_time_s`` reached the ``time_limit_s`` it was given;
- ``determinism``: two runs with one seed agree in everything but the clock; with ``stochastic``, another
  seed gives other iterates;
- ``dtype_device``: every tensor of ``x`` and ``extras`` is on the input's device (CPU, and CUDA when
  available), and every floating tensor has the input's dtype (float32 and float64 unless the case says
  otherwise);
- ``optimality``: the case's optimality residual (or distance to a known optimum) of the ``converged`` run
  is within its tolerance;
- ``bad_input``: each invalid argument raises ``ValueError`` or ``TypeError`` whose message starts with the
  argument's name;
- ``picklable``: the result survives a pickle round trip unchanged.

A case may be exempt from a check, with the reason (which of the solver's own tests covers the property).
"""

from __future__ import annotations

import importlib
import itertools
import math
import pickle
import pkgutil
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch

from optarium._core.result import Result, same
from optarium._core.solver import SolverCase

__all__ = [
    "CHECKS",
    "SolverCase",
    "check_bad_input",
    "check_converged",
    "check_determinism",
    "check_diverged",
    "check_dtype_device",
    "check_finite_fields",
    "check_max_iter",
    "check_optimality",
    "check_picklable",
    "check_timeout",
    "devices",
    "solver_cases",
]


def devices() -> list[str]:
    """The devices the ``dtype_device`` check runs on: the CPU, and CUDA when available."""
    return ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def solver_cases() -> list[SolverCase]:
    """Every declared case: ``solver_cases()`` of each module in the registry's family packages.

    Every family of the registry (:data:`optarium._core.registry.FAMILIES`) that has a package so far is
    walked (``optarium.<family>`` and its public submodules), so a solver module joins by defining the
    function, with no list to edit here. Case names must be unique.
    """
    from optarium._core.registry import FAMILIES

    families = list(FAMILIES)
    cases: list[SolverCase] = []
    seen: set[str] = set()
    for module in _family_modules(families):
        declare = getattr(module, "solver_cases", None)
        if not callable(declare):
            continue
        for case in declare():
            if not isinstance(case, SolverCase):
                raise TypeError(f"{module.__name__}.solver_cases: returned {type(case).__name__}")
            if case.name in seen:
                raise ValueError(f"{module.__name__}.solver_cases: duplicate case name {case.name!r}")
            seen.add(case.name)
            cases.append(case)
    return cases


def _family_modules(families: list[str]) -> Iterator[Any]:
    for family in families:
        try:
            pkg = importlib.import_module(f"optarium.{family}")
        except ModuleNotFoundError:
            continue
        yield pkg
        for info in pkgutil.walk_packages(getattr(pkg, "__path__", []), prefix=f"{pkg.__name__}."):
            if any(part.startswith("_") for part in info.name.split(".")):
                continue
            yield importlib.import_module(info.name)


# ------------------------------------------------------------------------------------------------ helpers


def _tensors(obj: Any, path: str = "x") -> Iterator[tuple[str, torch.Tensor]]:
    """(path, tensor) for every tensor in a structure of tensors, mappings, lists and tuples."""
    if isinstance(obj, torch.Tensor):
        yield path, obj
    elif isinstance(obj, Mapping):
        for k, v in obj.items():
            yield from _tensors(v, f"{path}[{k!r}]")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from _tensors(v, f"{path}[{i}]")


def _status_run(case: SolverCase, status: str) -> tuple[Result, Mapping[str, Any]]:
    if status not in case.statuses:
        raise AssertionError(
            f"{case.name}: declares no run that ends {status!r} (add it to statuses, or exempt the check "
            "with the reason)"
        )
    overrides = case.statuses[status]
    res = case.run(**overrides)
    if not isinstance(res, Result):
        raise AssertionError(f"{case.name}: returned {type(res).__name__}, not a Result")
    if res.status != status:
        raise AssertionError(
            f"{case.name}: the {status!r} run ended {res.status!r} after {res.n_iter} iterations"
        )
    return res, overrides


# ------------------------------------------------------------------------------------------------ checks


def check_finite_fields(case: SolverCase) -> None:
    """The base run's fields are finite and its history ends at ``n_iter``."""
    res = case.run()
    assert isinstance(res, Result), f"{case.name}: returned {type(res).__name__}, not a Result"
    assert math.isfinite(res.value), f"{case.name}: value {res.value!r} is not finite ({res.status})"
    assert math.isfinite(res.wall_time_s), f"{case.name}: wall_time_s {res.wall_time_s!r}"
    for path, t in _tensors(res.x):
        if t.is_floating_point() or t.is_complex():
            assert bool(torch.isfinite(t).all()), f"{case.name}: {path} has non-finite entries"
    steps = res.history.steps
    assert all(a < b for a, b in itertools.pairwise(steps)), f"{case.name}: steps {steps}"
    if steps:
        assert steps[-1] == res.n_iter, f"{case.name}: history ends at {steps[-1]}, n_iter is {res.n_iter}"
    for name, values in res.history.metrics.items():
        # the starting row may hold inf for a quantity that needs a previous iterate (a change); never NaN
        bad = [
            (k, v)
            for k, v in zip(steps, values, strict=True)
            if math.isnan(v) or (k > 0 and not math.isfinite(v))
        ]
        assert not bad, f"{case.name}: history metric {name!r} has non-finite (step, value) {bad[:3]}"


def check_converged(case: SolverCase) -> None:
    """``converged`` means the stated tolerance holds at ``x``."""
    res, _ = _status_run(case, "converged")
    assert case.tolerance_holds(res), (
        f"{case.name}: status 'converged' after {res.n_iter} iterations, but the stated tolerance does not "
        "hold at x"
    )


def check_max_iter(case: SolverCase) -> None:
    """``max_iter`` means ``n_iter`` equals the iteration budget."""
    res, _ = _status_run(case, "max_iter")
    assert res.n_iter == case.max_iter, (
        f"{case.name}: status 'max_iter' with n_iter {res.n_iter}, the budget is {case.max_iter}"
    )


def check_diverged(case: SolverCase) -> None:
    """A diverging run is reported with status ``diverged`` (not raised), and its value is not NaN."""
    res, _ = _status_run(case, "diverged")
    assert not math.isnan(res.value), f"{case.name}: a diverged run reports value NaN (report inf)"


def check_timeout(case: SolverCase) -> None:
    """``timeout`` means the solver's seconds reached its ``time_limit_s``."""
    res, overrides = _status_run(case, "timeout")
    limit = overrides.get("time_limit_s")
    assert limit is not None, f"{case.name}: the timeout run must give its budget as time_limit_s"
    assert res.wall_time_s >= float(limit), (
        f"{case.name}: status 'timeout' after {res.wall_time_s:.3g} s, below the budget {limit} s"
    )


def _same_run(a: Result, b: Result, timing: tuple[str, ...]) -> list[str]:
    differ = [f for f in ("status", "n_iter") if getattr(a, f) != getattr(b, f)]
    if not same(a.value, b.value):
        differ.append("value")
    if not same(a.x, b.x):
        differ.append("x")
    if a.history.steps != b.history.steps:
        differ.append("history steps")
    for name in set(a.history.metrics) | set(b.history.metrics):
        if name not in timing and not same(a.history.metrics.get(name), b.history.metrics.get(name)):
            differ.append(f"history {name!r}")
    return differ


def check_determinism(case: SolverCase) -> None:
    """One seed gives one run (clock readings aside); with ``stochastic``, another seed another one."""
    a = case.run(seed=0, **case.determinism)
    b = case.run(seed=0, **case.determinism)
    differ = _same_run(a, b, case.timing_metrics)
    assert not differ, f"{case.name}: two runs with the same seed differ in {', '.join(differ)}"
    if case.stochastic:
        c = case.run(seed=1, **case.determinism)
        assert not same(a.x, c.x), f"{case.name}: seeds 0 and 1 give the same x (is the seed used?)"


def check_dtype_device(case: SolverCase) -> None:
    """Tensors of ``x`` and ``extras`` follow the input's device, floating ones its dtype."""
    for dtype in case.dtypes:
        dt = getattr(torch, dtype) if isinstance(dtype, str) else dtype
        for device in devices():
            res = case.run(dtype=dt, device=device)
            found = list(_tensors(res.x)) + list(_tensors(dict(res.extras), "extras"))
            assert any(p.startswith("x") for p, _ in found), f"{case.name}: x holds no tensor"
            for path, t in found:
                assert t.device.type == torch.device(device).type, (
                    f"{case.name}: {path} is on {t.device}, the input on {device}"
                )
                if t.is_floating_point():
                    assert t.dtype == dt, f"{case.name}: {path} is {t.dtype}, the input {dt}"


def check_optimality(case: SolverCase) -> None:
    """The optimality residual of the ``converged`` run is within the case's tolerance."""
    res = case.run(**case.statuses.get("converged", {}))
    r = float(case.optimality(res))
    assert r <= case.optimality_tol, (
        f"{case.name}: optimality residual {r:.3g} above {case.optimality_tol:.3g} (status {res.status})"
    )


def check_bad_input(case: SolverCase) -> None:
    """Each invalid argument raises ``ValueError``/``TypeError`` whose message starts with its name."""
    assert case.invalid, f"{case.name}: declares no invalid arguments"
    for overrides, name in case.invalid:
        try:
            case.run(**overrides)
        except (ValueError, TypeError) as exc:
            assert re.match(rf"{re.escape(name)}\b", str(exc)), (
                f"{case.name}: {dict(overrides)} raised {type(exc).__name__} {str(exc)!r}, which does not "
                f"start with {name!r}"
            )
        except Exception as exc:
            raise AssertionError(
                f"{case.name}: {dict(overrides)} raised {type(exc).__name__} ({exc}), not a "
                f"ValueError/TypeError naming {name}"
            ) from exc
        else:
            raise AssertionError(f"{case.name}: {dict(overrides)} was accepted; expected an error on {name}")


def check_picklable(case: SolverCase) -> None:
    """The result survives a pickle round trip unchanged (so it can come back from another process)."""
    res = case.run()
    try:
        back = pickle.loads(pickle.dumps(res))
    except Exception as exc:
        raise AssertionError(f"{case.name}: the Result does not pickle: {exc!r}") from exc
    assert back == res, f"{case.name}: the Result changed in a pickle round trip"


#: Check name -> check function, in the order the suite runs them.
CHECKS: Mapping[str, Callable[[SolverCase], None]] = {
    "finite_fields": check_finite_fields,
    "converged": check_converged,
    "max_iter": check_max_iter,
    "diverged": check_diverged,
    "timeout": check_timeout,
    "determinism": check_determinism,
    "dtype_device": check_dtype_device,
    "optimality": check_optimality,
    "bad_input": check_bad_input,
    "picklable": check_picklable,
}
