"""The examples in public docstrings and every Python block of the README run as written: they are API.

Docstring examples run as doctests, one test per module that has any (found by reading the source, so
collection imports nothing). README blocks run one by one as scripts in a fresh interpreter inside a
temporary folder, so a block that forgets to define a name fails with ``NameError`` and a block that spawns
processes (``launch``) re-imports its own file as it would for a user.
"""

from __future__ import annotations

import doctest
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "optarium"


def _modules_with_examples() -> list[str]:
    names = []
    for path in sorted(SRC.rglob("*.py")):
        if ">>> " not in path.read_text(encoding="utf-8"):
            continue
        rel = path.relative_to(SRC.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        names.append(".".join(parts))
    return names


def _readme_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def test_examples_are_found() -> None:
    """The discovery itself works (the parametrised tests below would pass vacuously if it did not)."""
    assert len(_modules_with_examples()) >= 10
    assert len(_readme_blocks()) >= 5


@pytest.mark.parametrize("module", _modules_with_examples())
def test_docstring_examples_run(module: str) -> None:
    mod = importlib.import_module(module)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = [t for t in finder.find(mod, module) if t.examples]
    assert tests, f"{module}: the source has '>>> ' but no doctest was found"
    # one pass that keeps its own report: a second pass would run on globals the first one cleared and
    # report NameErrors instead of the real failure
    report: list[str] = []
    for t in tests:
        runner.run(t, out=report.append)
    results = runner.summarize(verbose=False)
    if results.failed:
        pytest.fail(f"{module}: {results.failed} of {results.attempted} examples failed\n" + "".join(report))


@pytest.mark.parametrize("index", range(len(_readme_blocks())), ids=lambda i: f"block{i + 1}")
def test_readme_block_runs(index: int, tmp_path: Path) -> None:
    script = tmp_path / f"readme_block_{index + 1}.py"
    script.write_text(_readme_blocks()[index], encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, script.name], cwd=tmp_path, capture_output=True, text=True, timeout=240
    )
    assert proc.returncode == 0, f"README block {index + 1} failed:\n{proc.stderr[-3000:]}"
