"""Every registered experiment at smoke scale: it runs, records, plots, decides, and withholds its verdict.

An experiment whose own test module runs its smoke scale and calls ``check_smoke`` is checked there (see
``conftest.py``), so no smoke scale runs twice; ``smoke_slug`` is parametrised over the others.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from optarium.harness.experiment import registered_experiments
from optarium.harness.runner import run_experiment


def test_every_experiment_is_smoke_checked_once(smoke_elsewhere: dict[str, str]) -> None:
    unknown = set(smoke_elsewhere) - set(registered_experiments())
    assert not unknown, f"check_smoke called for unregistered experiments: {sorted(unknown)}"


def test_smoke_run(smoke_slug: str, tmp_path: Path, check_smoke: Callable[[str, Any], None]) -> None:
    out = run_experiment(smoke_slug, "smoke", out=tmp_path, jobs=1)
    check_smoke(smoke_slug, out)


@pytest.mark.slow
@pytest.mark.parametrize("slug", registered_experiments())
def test_quick_run_decides(slug: str, tmp_path: Path) -> None:
    """Claim scale (quick): every unit finishes and the stated rule reaches a verdict (whichever it is)."""
    out = run_experiment(slug, "quick", out=tmp_path, jobs=2)
    assert all(u["status"] == "done" for u in out.units)
    assert out.verdict.outcome in ("reproduced", "not reproduced", "inconclusive")
