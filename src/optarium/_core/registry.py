"""The registry of the 51 methods optarium implements, keyed by slug.

One entry per paper: its slug (the key shared by spec, module, tests, experiment and CLI target), family,
method name, paper title and identifier, where it stands (``status``), the kind of object it provides
(``contract``), the module and experiment that implement it, and notes on what is scaled down or
reconstructed.

The entries are data, one TOML file per family: ``src/optarium/_core/methods/<family>.toml``, each a list of
``[[method]]`` tables in the order of the papers index. They are read on first use (``import optarium``
reads nothing) and every entry is validated; a bad entry raises :class:`RegistryError` naming its file and
slug. A new method adds or edits one table in its family's file, nothing else.

The ``module`` field is the one place that maps a slug to its Python module (``clip-sgd-heavy-tail`` ->
``optarium.optim.clip_sgd``): no code derives a module path from a slug.

Verdicts are not registry data: a run records them (``optarium run SLUG --scale full --record``) as files
``verdicts/<slug>/<scale>.json`` (see :mod:`optarium.harness.recorded`), and ``docs/methods.md`` is
generated from both (``optarium docs``).

>>> get_method("clip-sgd-heavy-tail").module
'optarium.optim.clip_sgd'
>>> get_method("gradpower").contract in CONTRACTS
True
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, fields
from functools import lru_cache
from importlib import resources
from typing import Any

from optarium._core.status import METHOD_STATUSES

__all__ = [
    "CONTRACTS",
    "DATA_PACKAGE_DIR",
    "FAMILIES",
    "MethodInfo",
    "RegistryError",
    "all_methods",
    "families",
    "get_method",
    "load_family",
]

#: Families in the order the index lists them; each has one data file ``methods/<family>.toml``.
FAMILIES: tuple[str, ...] = (
    "optim",
    "soft",
    "bo",
    "bilevel",
    "dro",
    "ot",
    "online",
    "stochastic",
    "distributed",
    "combinatorial",
    "sparse",
    "generative",
    "science",
    "rl",
    "llm",
    "kernels",
)

#: What kind of object a method provides, so its author knows which conformance suite it joins:
#:
#: - ``optimizer``: a ``torch.optim.Optimizer`` (or wrapper) that steps model parameters;
#: - ``solver``: a function or object that runs to completion and returns an :class:`optarium._core.Result`;
#: - ``ask-tell``: an :class:`optarium._core.AskTellStrategy` proposing points and told their values;
#: - ``soft``: differentiable relaxations of discrete operations (tensor -> tensor functions and layers);
#: - ``distributed``: runs its clients through a ``Communicator`` (in one process or under ``launch``);
#: - ``online``: a learner that predicts and is updated once per round;
#: - ``loss``: a differentiable objective (a surrogate loss) minimised by any optimizer.
CONTRACTS: tuple[str, ...] = ("optimizer", "solver", "ask-tell", "soft", "distributed", "online", "loss")

_SLUG = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")

#: The folder of the per-family data files, relative to the ``optarium`` package.
DATA_PACKAGE_DIR = ("_core", "methods")


class RegistryError(ValueError):
    """A registry data file is missing, unreadable or holds an invalid entry (the message names both)."""


@dataclass(frozen=True)
class MethodInfo:
    """One paper's entry in the registry.

    Attributes:
        slug: the key (``gradpower``), lower-case words joined by ``-``.
        family: one of :data:`FAMILIES`.
        method: the method's short name (``GradPower sign-power gradient transform``).
        title: the paper's title.
        paper: the paper's identifier (``arXiv:2505.24275``), or the best reference found.
        status: one of :data:`optarium._core.status.METHOD_STATUSES`.
        contract: one of :data:`CONTRACTS`.
        module: dotted path of the implementing module (the only slug -> module mapping), or ``None`` while
            planned; it need not spell the slug (``optarium.bo.pom`` for ``pom-mobo``).
        experiment: dotted path of the experiment module, which registers an experiment under this slug, or
            ``None`` while planned.
        notes: what is scaled down, reconstructed or blocked.
    """

    slug: str
    family: str
    method: str
    title: str
    paper: str
    status: str = "planned"
    contract: str = "solver"
    module: str | None = None
    experiment: str | None = None
    notes: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.slug, str) or not _SLUG.fullmatch(self.slug):
            raise ValueError(f"slug: must be lower-case letters and digits joined by '-', got {self.slug!r}")
        if self.family not in FAMILIES:
            raise ValueError(f"family: unknown family {self.family!r} for {self.slug!r}")
        if self.status not in METHOD_STATUSES:
            raise ValueError(
                f"status: unknown status {self.status!r} for {self.slug!r}; one of {METHOD_STATUSES}"
            )
        if self.contract not in CONTRACTS:
            raise ValueError(
                f"contract: unknown contract {self.contract!r} for {self.slug!r}; one of {CONTRACTS}"
            )
        for name in ("module", "experiment"):
            value = getattr(self, name)
            if value is not None and not value.startswith("optarium."):
                raise ValueError(
                    f"{name}: must be a dotted path under optarium, got {value!r} for {self.slug!r}"
                )
        if self.status == "implemented" and (self.module is None or self.experiment is None):
            raise ValueError(f"status: {self.slug!r} is implemented but names no module or no experiment")


_FIELDS = tuple(f.name for f in fields(MethodInfo))
_REQUIRED = ("slug", "method", "title", "paper", "status", "contract")
_TEXT_FIELDS = {"slug", "method", "title", "paper", "status", "contract", "module", "experiment", "notes"}


def _entry(path: str, family: str, position: int, raw: Any) -> MethodInfo:
    where = f"{path}: entry {position}"
    if not isinstance(raw, dict):
        raise RegistryError(f"{where}: must be a [[method]] table, got {type(raw).__name__}")
    if isinstance(raw.get("slug"), str):
        where = f"{path}: {raw['slug']!r}"
    unknown = sorted(set(raw) - set(_FIELDS))
    if "family" in raw:
        unknown.append("family (implied by the file name)")
    if unknown:
        raise RegistryError(f"{where}: unknown field(s) {', '.join(unknown)}; allowed: {', '.join(_FIELDS)}")
    missing = [k for k in _REQUIRED if k not in raw]
    if missing:
        raise RegistryError(f"{where}: missing field(s) {', '.join(missing)}")
    for key, value in raw.items():
        if key in _TEXT_FIELDS and not isinstance(value, str):
            raise RegistryError(f"{where}: {key}: must be a string, got {type(value).__name__} {value!r}")
    try:
        return MethodInfo(family=family, **raw)
    except ValueError as exc:
        raise RegistryError(f"{where}: {exc}") from None


def load_family(family: str, text: str | None = None) -> tuple[MethodInfo, ...]:
    """The validated entries of ``family``, in file order.

    Reads ``methods/<family>.toml`` from the package, or parses ``text`` when given (used to check a data file
    before it is installed). Raises :class:`RegistryError` naming the file and the slug on any bad entry.
    """
    if family not in FAMILIES:
        raise ValueError(f"family: unknown family {family!r}; one of {FAMILIES}")
    path = "/".join((*DATA_PACKAGE_DIR, f"{family}.toml"))
    if text is None:
        resource = resources.files("optarium").joinpath(*DATA_PACKAGE_DIR, f"{family}.toml")
        try:
            text = resource.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise RegistryError(f"{path}: missing data file of family {family!r}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RegistryError(f"{path}: not valid TOML: {exc}") from None
    extra = sorted(set(data) - {"method"})
    if extra:
        raise RegistryError(f"{path}: unknown top-level key(s) {', '.join(extra)}; only [[method]] tables")
    entries = data.get("method", [])
    if not isinstance(entries, list):
        raise RegistryError(f"{path}: 'method' must be an array of [[method]] tables")
    return tuple(_entry(path, family, i + 1, raw) for i, raw in enumerate(entries))


@lru_cache(maxsize=1)
def all_methods() -> tuple[MethodInfo, ...]:
    """All registered methods, in index order (family, then as listed); read and validated on first call.

    Raises :class:`RegistryError` when a data file is missing or bad, when a slug appears twice, or when the
    data folder holds a file for a family not in :data:`FAMILIES`.
    """
    folder = resources.files("optarium").joinpath(*DATA_PACKAGE_DIR)
    stray = sorted(
        p.name for p in folder.iterdir() if p.name.endswith(".toml") and p.name[:-5] not in FAMILIES
    )
    if stray:
        raise RegistryError(
            f"{'/'.join(DATA_PACKAGE_DIR)}: data file(s) of unknown families: {', '.join(stray)}"
        )
    methods: list[MethodInfo] = []
    seen: dict[str, str] = {}
    for family in FAMILIES:
        for info in load_family(family):
            if info.slug in seen:
                raise RegistryError(
                    f"{'/'.join(DATA_PACKAGE_DIR)}/{family}.toml: {info.slug!r}: slug already registered in "
                    f"{seen[info.slug]}.toml"
                )
            seen[info.slug] = family
            methods.append(info)
    return tuple(methods)


def families() -> tuple[str, ...]:
    """The family names, in index order."""
    return FAMILIES


def get_method(slug: str) -> MethodInfo:
    """The entry for ``slug``; ``KeyError`` naming the slug when there is none."""
    for info in all_methods():
        if info.slug == slug:
            return info
    raise KeyError(f"unknown slug {slug!r}")
