"""The registry: per-family TOML data read lazily, validated with errors naming file and slug, index order,
the status and contract vocabularies, and the module field as the one slug -> module mapping."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from optarium._core import registry
from optarium._core.registry import (
    CONTRACTS,
    FAMILIES,
    MethodInfo,
    RegistryError,
    all_methods,
    get_method,
    load_family,
)
from optarium._core.status import METHOD_STATUSES
from optarium.harness import experiment as experiment_mod

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "optarium"
INDEX = ROOT.parent / "shared" / "papers" / "INDEX.md"
DATA = SRC / "_core" / "methods"

GOOD = """
[[method]]
slug = "toy-method"
method = "A toy"
title = "Toy"
paper = "arXiv:0000.00000"
status = "planned"
contract = "solver"
"""


def _index_order() -> list[tuple[str, str]]:
    family, order = None, []
    for line in INDEX.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            family = line[3:].strip()
        m = re.match(r"\| \[([a-z0-9-]+)\]\(\1\.md\) \|", line)
        if m:
            order.append((family, m.group(1)))
    return order


def test_one_data_file_per_family_and_nothing_else() -> None:
    assert sorted(p.stem for p in DATA.glob("*.toml")) == sorted(FAMILIES)
    assert sorted(p.name for p in DATA.iterdir() if not p.name.endswith(".toml")) in ([], ["__pycache__"])


@pytest.mark.skipif(
    not INDEX.exists(), reason="the papers index (../shared/papers/INDEX.md) is not checked out"
)
def test_entries_follow_the_papers_index_order() -> None:
    order = _index_order()
    assert len(order) == 51
    assert [(m.family, m.slug) for m in all_methods()] == order
    assert list(dict.fromkeys(f for f, _ in order)) == list(FAMILIES)


def test_vocabularies() -> None:
    methods = all_methods()
    assert len(methods) == 51 and len({m.slug for m in methods}) == 51
    assert {m.status for m in methods} <= set(METHOD_STATUSES)
    assert {m.contract for m in methods} == set(CONTRACTS)  # every contract is used by some method
    assert not hasattr(registry, "STATUSES"), "the registry's own STATUSES name is gone: use METHOD_STATUSES"
    expected = {
        "gradpower": "optimizer",
        "softtorch": "soft",
        "turbo-enn": "ask-tell",
        "dual-accelerated-local-sgd": "distributed",
        "anytime-coco": "online",
        "gipo": "loss",
        "srgw": "solver",
    }
    assert {s: get_method(s).contract for s in expected} == expected


def test_data_is_read_lazily_and_once() -> None:
    all_methods.cache_clear()
    first = all_methods()
    assert all_methods() is first
    assert get_method("tcgp").family == "bo"
    with pytest.raises(KeyError, match="unknown slug 'no-such'"):
        get_method("no-such")


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (
            GOOD.replace('status = "planned"', 'status = "done"'),
            r"'toy-method': status: unknown status 'done'",
        ),
        (GOOD.replace('contract = "solver"', 'contract = "magic"'), r"'toy-method': contract: unknown"),
        (GOOD.replace('contract = "solver"\n', ""), r"'toy-method': missing field\(s\) contract"),
        (GOOD + 'last_verdict = "x"\n', r"'toy-method': unknown field\(s\) last_verdict"),
        (GOOD + 'family = "bo"\n', r"'toy-method': unknown field\(s\) family \(implied by the file name\)"),
        (GOOD.replace('paper = "arXiv:0000.00000"', "paper = 3"), r"'toy-method': paper: must be a string"),
        (GOOD.replace('"planned"', '"implemented"'), r"'toy-method': status: .* names no module"),
        (GOOD + 'module = "clip_sgd"\n', r"'toy-method': module: must be a dotted path under optarium"),
        (GOOD.replace('"toy-method"', '"Toy_Method"'), r"'Toy_Method': slug: must be lower-case"),
        (GOOD.replace('slug = "toy-method"\n', ""), r"optim\.toml: entry 1: missing field\(s\) slug"),
        ("[[method]\n", r"optim\.toml: not valid TOML"),
        ('title = "x"\n', r"optim\.toml: unknown top-level key\(s\) title"),
    ],
)
def test_bad_entries_name_file_and_slug(text: str, needle: str) -> None:
    with pytest.raises(
        RegistryError, match=r"^_core/methods/optim\.toml: " + needle.removeprefix(r"optim\.toml: ")
    ):
        load_family("optim", text)


def test_a_good_entry_takes_its_family_from_the_file() -> None:
    (info,) = load_family("rl", GOOD)
    assert info == MethodInfo("toy-method", "rl", "A toy", "Toy", "arXiv:0000.00000", "planned", "solver")
    with pytest.raises(ValueError, match=r"^family: unknown family 'nope'"):
        load_family("nope", GOOD)


def test_a_slug_registered_twice_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    real = registry.load_family
    monkeypatch.setattr(registry, "load_family", lambda f: real(f, GOOD) if f in ("bo", "rl") else real(f))
    all_methods.cache_clear()
    try:
        with pytest.raises(
            RegistryError, match=r"rl\.toml: 'toy-method': slug already registered in bo\.toml"
        ):
            all_methods()
    finally:
        monkeypatch.undo()
        all_methods.cache_clear()
    assert len(all_methods()) == 51


def test_module_field_is_the_one_slug_to_module_mapping() -> None:
    """Every implemented method's module and experiment import, the experiment registers under the slug,
    and modules need not spell their slug: nothing derives a module path from a slug."""
    implemented = [m for m in all_methods() if m.status == "implemented"]
    assert len(implemented) >= 11
    for m in implemented:
        assert m.module and m.experiment, m.slug
        importlib.import_module(m.module)
        importlib.import_module(m.experiment)
        assert m.slug in experiment_mod._REGISTRY, f"{m.experiment} registers no experiment for {m.slug!r}"
        assert experiment_mod._REGISTRY[m.slug].slug == m.slug
        assert experiment_mod.get_experiment(m.slug).slug == m.slug
    assert get_method("clip-sgd-heavy-tail").module == "optarium.optim.clip_sgd"
    assert get_method("pom-mobo").module == "optarium.bo.pom"
    assert not hasattr(MethodInfo, "module_name")
    derived = [
        str(p.relative_to(ROOT))
        for p in SRC.rglob("*.py")
        if re.search(r"""slug\.replace\(\s*["']-["']""", p.read_text(encoding="utf-8"))
    ]
    assert derived == [], f"module paths derived from slugs in {derived}"
