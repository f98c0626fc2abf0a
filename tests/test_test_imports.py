"""Tests of methods never import experiment modules: only tests/experiments/ may.

A method's tests import the method and the problems it is tested on from their families
(``optarium.<family>``, ``optarium.problems``); experiments sit above the families (``experiments ->
families -> _core``), so a method test that reaches into an experiment tests code that is not the method's
and breaks when the experiment is reworked. The check reads every test file's import statements (``import
optarium.experiments...``, ``from optarium.experiments... import ...``, ``from optarium import
experiments``); loading experiments through the registry (``get_experiment``, ``importlib``) is how the CLI,
harness and registry tests are meant to reach them and is not an import statement.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def experiment_imports(source: str) -> list[str]:
    """The ``optarium.experiments`` modules that ``source`` imports by an import statement."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[:2] == ["optarium", "experiments"]]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            parts = node.module.split(".")
            if parts[:2] == ["optarium", "experiments"]:
                found.append(node.module)
            elif parts == ["optarium"]:
                found += [f"optarium.{a.name}" for a in node.names if a.name == "experiments"]
    return found


def test_the_detector_finds_every_import_form() -> None:
    src = (
        "import optarium.experiments.rewa as exp\n"
        "def f():\n"
        "    from optarium.experiments.tcgp import make_function\n"
        "    from optarium import experiments, bo\n"
        "import optarium.experimental_thing\n"
        "from optarium.bo import experiments_helper\n"
    )
    assert experiment_imports(src) == [
        "optarium.experiments.rewa",
        "optarium.experiments.tcgp",
        "optarium.experiments",
    ]
    assert experiment_imports("from optarium.sparse import lasso\nimport optarium\n") == []


def test_no_test_outside_tests_experiments_imports_an_experiment() -> None:
    offenders = {}
    for path in sorted(TESTS.rglob("*.py")):
        rel = path.relative_to(TESTS).as_posix()
        if rel.startswith("experiments/"):
            continue
        found = experiment_imports(path.read_text(encoding="utf-8"))
        if found:
            offenders[rel] = found
    assert not offenders, (
        "tests of methods import experiment modules; move what they need to the method's family or to "
        f"optarium.problems and import it from there: {offenders}"
    )
