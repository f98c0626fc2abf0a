"""Experiment definitions and their registration.

An experiment reproduces one paper's headline claim. It declares, up front, the claim, the verdict rule, the
methods (baselines included) and a configuration per scale, and provides three functions:

- ``run(ctx, method, seed, config)``: trains or solves one (method, seed) unit and reports metrics through
  ``ctx.log(step, **metrics)``; evaluation goes inside ``with ctx.evaluating():`` so it is not timed.
- ``decide(records, config)``: the :class:`Verdict` computed from the records by the stated rule.
- ``plot(records, config)`` (optional): ``{name: matplotlib Figure}``.

``decide`` and ``plot`` are built from the verdict toolkit: record queries, ``combine_outcomes``, the paired
and slope rules in :mod:`optarium.harness.verdicts`, and the standard figures (paired gaps with SE bars,
curves with seed bands) in :mod:`optarium.harness.figures`.

Scales: ``smoke`` (seconds; used by tests; never claims a verdict), ``quick`` (at most 60 s on one core; what
``make run`` runs) and ``full`` (the faithful small-scale version, at most 30 minutes).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from optarium._core.registry import get_method
from optarium._core.validation import check_choice, check_int

__all__ = [
    "OUTCOMES",
    "SCALES",
    "Experiment",
    "Verdict",
    "get_experiment",
    "register",
    "registered_experiments",
]

SCALES: tuple[str, ...] = ("smoke", "quick", "full")
#: Verdict outcomes. ``no verdict`` is reserved for smoke runs, which never claim one.
OUTCOMES: tuple[str, ...] = ("reproduced", "not reproduced", "inconclusive", "no verdict")

Record = Mapping[str, Any]


@dataclass(frozen=True)
class Verdict:
    """The outcome of an experiment, with the figures that decided it.

    Attributes:
        outcome: one of :data:`OUTCOMES`.
        figures: the deciding numbers (name -> value), e.g. mean paired gap, its standard error, n pairs.
        summary: one sentence saying why, in terms of the figures.
    """

    outcome: str
    figures: Mapping[str, Any] = field(default_factory=dict)
    summary: str = ""

    def __post_init__(self) -> None:
        check_choice("outcome", self.outcome, OUTCOMES)
        object.__setattr__(self, "figures", MappingProxyType(dict(self.figures)))

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"outcome": self.outcome, "figures": dict(self.figures), "summary": self.summary}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Verdict:
        """Inverse of :meth:`to_json`."""
        return cls(outcome=data["outcome"], figures=data.get("figures", {}), summary=data.get("summary", ""))


@dataclass(frozen=True)
class Experiment:
    """One paper's reproduction: claim, rule, methods, per-scale configuration and the three functions.

    ``configs[scale]`` must contain ``"seeds"`` (number of seeds; seeds are ``0 .. seeds-1``). It may contain
    ``"methods"`` to restrict the methods at that scale and ``"unit_timeout_s"`` (seconds one unit may take,
    in CPU and wall time both, with a wall-time backstop; see :mod:`optarium.harness.runner`).
    ``distributed_methods`` names the methods whose units read ``config["world_size"]`` (default 1: all
    clients in one process) and then run their clients across that many torch.distributed processes.
    """

    slug: str
    claim: str
    rule: str
    methods: Sequence[str]
    baselines: Sequence[str]
    configs: Mapping[str, Mapping[str, Any]]
    run: Callable[..., None]
    decide: Callable[[Sequence[Record], Mapping[str, Any]], Verdict]
    plot: Callable[[Sequence[Record], Mapping[str, Any]], Mapping[str, Any]] | None = None
    scaled_down: str = ""
    distributed_methods: Sequence[str] = ()

    def __post_init__(self) -> None:
        get_method(self.slug)  # KeyError for an unregistered slug
        if not self.methods:
            raise ValueError("methods: an experiment needs at least one method")
        for b in self.baselines:
            check_choice("baselines", b, self.methods)
        for scale in SCALES:
            if scale not in self.configs:
                raise ValueError(f"configs: missing scale {scale!r}")
            check_int(f"configs[{scale!r}]['seeds']", self.configs[scale].get("seeds"), minimum=1)
            for m in self.configs[scale].get("methods", ()):
                check_choice(f"configs[{scale!r}]['methods']", m, self.methods)
        object.__setattr__(self, "methods", tuple(self.methods))
        object.__setattr__(self, "baselines", tuple(self.baselines))
        for m in self.distributed_methods:
            check_choice("distributed_methods", m, self.methods)
        object.__setattr__(self, "distributed_methods", tuple(self.distributed_methods))
        object.__setattr__(
            self, "configs", MappingProxyType({k: MappingProxyType(dict(v)) for k, v in self.configs.items()})
        )

    def config(self, scale: str, seeds: int | None = None, world_size: int | None = None) -> dict[str, Any]:
        """The configuration at ``scale`` (a fresh dict), with the seed count overridden if given.

        ``world_size`` > 1 sets ``config["world_size"]`` for the :attr:`distributed_methods` (a
        ``ValueError`` if the experiment has none); 1 or ``None`` leaves the default in-process run.
        """
        check_choice("scale", scale, SCALES)
        cfg = dict(self.configs[scale])
        if seeds is not None:
            cfg["seeds"] = check_int("seeds", seeds, minimum=1)
        if world_size is not None:
            world_size = check_int("world_size", world_size, minimum=1)
            if not self.distributed_methods:
                raise ValueError(f"world_size: experiment {self.slug!r} has no distributed methods")
            if world_size > 1:
                cfg["world_size"] = world_size
        cfg.setdefault("methods", self.methods)
        cfg["methods"] = list(cfg["methods"])
        return cfg


_REGISTRY: dict[str, Experiment] = {}


def register(experiment: Experiment) -> Experiment:
    """Register ``experiment`` under its slug (idempotent for re-imports of the same module)."""
    _REGISTRY[experiment.slug] = experiment
    return experiment


def get_experiment(slug: str) -> Experiment:
    """The experiment of ``slug``, importing its module on first use.

    Raises ``KeyError`` for an unknown slug and ``LookupError`` for a known slug without an experiment yet.
    """
    info = get_method(slug)
    if slug not in _REGISTRY:
        if info.experiment is None:
            raise LookupError(f"{slug!r} has no experiment yet (status: {info.status})")
        importlib.import_module(info.experiment)
    if slug not in _REGISTRY:
        raise LookupError(f"module {info.experiment} did not register an experiment for {slug!r}")
    return _REGISTRY[slug]


def registered_experiments(family: str | None = None) -> list[str]:
    """Slugs that have an experiment (optionally only those of ``family``), in registry order."""
    from optarium._core.registry import all_methods

    return [
        m.slug for m in all_methods() if m.experiment is not None and (family is None or m.family == family)
    ]
