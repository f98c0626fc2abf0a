"""``optarium``'s lazy subpackages are found at run time (every registry family with a package, and the shared
packages); ``import optarium`` stays cheap (no family, no torch, no optional back-end) and each resolves."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import optarium
from optarium._core.registry import FAMILIES

SRC = Path(__file__).resolve().parents[2] / "src" / "optarium"
NON_FAMILY = {"_core", "problems", "testing", "experiments", "harness"}
FAMILY_PACKAGES = {f for f in FAMILIES if (SRC / f / "__init__.py").exists()}
PACKAGES = {p.parent.name for p in SRC.glob("*/__init__.py")}
HEAVY = (
    "torch",
    "botorch",
    "gpytorch",
    "ot",
    "cvxpy",
    "cvxpylayers",
    "optuna",
    "pymoo",
    "skfolio",
    "matplotlib",
)


def _python(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout


def test_import_optarium_imports_no_family_and_no_backend() -> None:
    code = (
        "import sys, json; import optarium; names = dir(optarium); "
        "print(json.dumps({'loaded': sorted(m for m in sys.modules if m.startswith('optarium')), "
        f"'heavy': [m for m in {HEAVY!r} if m in sys.modules], 'dir': names, 'all': optarium.__all__}}))"
    )
    out = json.loads(_python(code))
    assert out["loaded"] == ["optarium"], "import optarium (and dir) imported subpackages"
    assert out["heavy"] == [], f"import optarium imported {out['heavy']}"
    assert FAMILY_PACKAGES | NON_FAMILY <= PACKAGES <= set(out["dir"])
    assert set(out["all"]) == {"__version__"} | {m for m in PACKAGES if m[0] != "_"}
    assert not set(out["dir"]) & (set(FAMILIES) - FAMILY_PACKAGES), "a family without a package is listed"


def test_families_once_missing_now_resolve() -> None:
    assert {"optim", "soft", "bo", "distributed"} <= FAMILY_PACKAGES
    for name in sorted(PACKAGES):
        module = getattr(optarium, name)
        assert module.__name__ == f"optarium.{name}"


def test_unknown_names_and_families_without_a_package_raise() -> None:
    for name in ("nope", *sorted(set(FAMILIES) - FAMILY_PACKAGES)):
        with pytest.raises(AttributeError, match=f"has no attribute '{name}'"):
            getattr(optarium, name)
