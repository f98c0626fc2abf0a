"""The generic smoke-run checks, shared by ``test_all_smoke.py`` and the experiments' own smoke tests.

Every registered experiment is run at smoke scale exactly once in the default suite: by its own test
module when that module calls ``check_smoke("<slug>", out)`` on its run (which adds the experiment's specific
assertions), otherwise by ``test_all_smoke.py``. Running each smoke scale once, in-process (``jobs=1``),
keeps the suite inside its budget; the worker-process path of the runner is tested in
``tests/harness/test_runner.py``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
_CALL = re.compile(r"check_smoke\(\s*\"([a-z0-9-]+)\"")


def generic_smoke_checks(slug: str, out: Any) -> None:
    """What every smoke run must show: all units done, one per (method, seed), no verdict, figures, files."""
    from optarium.harness.experiment import get_experiment

    experiment = get_experiment(slug)
    failed = [(u["method"], u["seed"], u["status"], u["error"]) for u in out.units if u["status"] != "done"]
    assert not failed, failed
    config = experiment.config("smoke")
    assert len(out.units) == len(config["methods"]) * config["seeds"]
    assert out.verdict.outcome == "no verdict"
    assert out.verdict.figures, "the verdict rule produced no deciding figures"
    assert not out.summary["figure_errors"]
    if experiment.plot is not None:
        assert list((out.run_dir / "figures").glob("*.png"))
    for name in ("config.json", "environment.json", "records.jsonl", "summary.json", "verdict.json"):
        assert (out.run_dir / name).exists()


def slugs_with_own_smoke_test() -> dict[str, str]:
    """slug -> test file, for the experiment test modules that call ``check_smoke("<slug>", ...)``."""
    found: dict[str, str] = {}
    for path in sorted(HERE.glob("test_*.py")):
        if path.name == "test_all_smoke.py":
            continue
        for slug in _CALL.findall(path.read_text(encoding="utf-8")):
            found[slug] = path.name
    return found


@pytest.fixture
def check_smoke() -> Callable[[str, Any], None]:
    """:func:`generic_smoke_checks`, for an experiment's own smoke test."""
    return generic_smoke_checks


@pytest.fixture
def smoke_elsewhere() -> dict[str, str]:
    """:func:`slugs_with_own_smoke_test`."""
    return slugs_with_own_smoke_test()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``smoke_slug``: every registered experiment that has no smoke test of its own."""
    if "smoke_slug" in metafunc.fixturenames:
        from optarium.harness.experiment import registered_experiments

        elsewhere = slugs_with_own_smoke_test()
        metafunc.parametrize("smoke_slug", [s for s in registered_experiments() if s not in elsewhere])
