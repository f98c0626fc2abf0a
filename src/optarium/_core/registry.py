"""The registry of the 51 methods optarium implements, keyed by slug.

One entry per paper: its slug (the key shared by spec, module, tests, experiment and CLI target), family,
method name, paper title and identifier, where it stands (``status``), the module and experiment that
implement it, and the last verdict measured. ``docs/methods.md`` is generated from this table
(``optarium docs``) and a test fails when the checked-in file is stale.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "FAMILIES",
    "STATUSES",
    "MethodInfo",
    "all_methods",
    "families",
    "get_method",
]

#: Families in the order the index lists them.
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

#: ``planned``: a spec only. ``implemented``: method, tests and experiment exist and run.
#: ``blocked``: cannot be done here; ``notes`` says what would unblock it.
STATUSES: tuple[str, ...] = ("planned", "implemented", "blocked")


@dataclass(frozen=True)
class MethodInfo:
    """One paper's entry in the registry.

    Attributes:
        slug: the key (``gradpower``); module names use underscores (``gradpower.py``).
        family: one of :data:`FAMILIES`.
        method: the method's short name (``GradPower sign-power gradient transform``).
        title: the paper's title.
        paper: the paper's identifier (``arXiv:2505.24275``), or the best reference found.
        status: one of :data:`STATUSES`.
        module: dotted path of the implementing module, or ``None`` while planned.
        experiment: dotted path of the experiment module, or ``None`` while planned.
        last_verdict: the last measured verdict with its scale and deciding figure, or ``""``.
        notes: what is scaled down, reconstructed or blocked.
    """

    slug: str
    family: str
    method: str
    title: str
    paper: str
    status: str = "planned"
    module: str | None = None
    experiment: str | None = None
    last_verdict: str = ""
    notes: str = ""

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"family: unknown family {self.family!r} for {self.slug!r}")
        if self.status not in STATUSES:
            raise ValueError(f"status: unknown status {self.status!r} for {self.slug!r}")

    @property
    def module_name(self) -> str:
        """The slug as a Python module name (``turbo-enn`` -> ``turbo_enn``)."""
        return self.slug.replace("-", "_")


def all_methods() -> tuple[MethodInfo, ...]:
    """All registered methods, in index order (family, then as listed)."""
    from optarium._core._methods import METHODS

    return METHODS


def families() -> tuple[str, ...]:
    """The family names, in index order."""
    return FAMILIES


def get_method(slug: str) -> MethodInfo:
    """The entry for ``slug``; ``KeyError`` naming the slug when there is none."""
    for info in all_methods():
        if info.slug == slug:
            return info
    raise KeyError(f"unknown slug {slug!r}")
