"""docs/methods.md is generated from the registry and not stale; `import optarium` stays cheap."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from optarium._core.registry import FAMILIES, all_methods
from optarium.harness.methods_doc import render_methods_md

ROOT = Path(__file__).resolve().parents[1]


def test_methods_md_is_up_to_date() -> None:
    checked_in = (ROOT / "docs" / "methods.md").read_text(encoding="utf-8")
    assert checked_in == render_methods_md(), "docs/methods.md is stale: run `optarium docs`"


def test_registry_is_complete_and_consistent() -> None:
    methods = all_methods()
    assert len(methods) == 51 and len({m.slug for m in methods}) == 51
    assert {m.family for m in methods} == set(FAMILIES)
    for m in methods:
        if m.status == "implemented":
            assert m.module and m.experiment, m.slug
            __import__(m.module)
            __import__(m.experiment)
        spec = ROOT.parent / "shared" / "papers" / f"{m.slug}.md"
        if spec.parent.exists():
            assert spec.exists(), f"no spec for {m.slug}"


def test_import_optarium_is_cheap() -> None:
    code = (
        "import sys, time; t = time.perf_counter(); import optarium; dt = time.perf_counter() - t; "
        "print(dt, 'torch' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out[1] == "False", "import optarium imported torch"
    assert float(out[0]) < 2.0


def test_family_import_costs_little_beyond_torch() -> None:
    code = (
        "import time; t0 = time.perf_counter(); import torch; t1 = time.perf_counter(); "
        "import optarium.optim, optarium.harness, optarium.problems; t2 = time.perf_counter(); "
        "import sys; print(t2 - t1, 'matplotlib' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert float(out[0]) < 2.0
    assert out[1] == "False", "matplotlib is imported eagerly"


def test_family_packages_leave_heavy_backends_unimported() -> None:
    """BoTorch, GPyTorch, Optuna, pymoo, POT, cvxpy and skfolio load inside the functions that use them."""
    heavy = ("botorch", "gpytorch", "optuna", "pymoo", "ot", "cvxpy", "cvxpylayers", "skfolio", "matplotlib")
    code = (
        "import sys; import optarium.bo, optarium.distributed, optarium.soft; "
        f"print(' '.join(m for m in {heavy!r} if m in sys.modules) or 'none')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "none", f"imported eagerly: {out.strip()}"
