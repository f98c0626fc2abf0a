"""Any ask/tell strategy (TuRBO-ENN first) as an Optuna sampler: Optuna's studies, storages and dashboards.

:func:`turbo_enn_sampler` (or :func:`asktell_sampler` with any strategy factory) returns an
``optuna.samplers.BaseSampler``:

- *relative sampling*: the search space is the intersection of the completed trials' spaces
  (``IntersectionSearchSpace``, as Optuna's own model-based samplers do); each trial gets the next point of a
  batch of ``batch_size`` points asked from the strategy; a parameter outside that space (the first trial,
  before any space is known, or a new parameter) is drawn by the *independent* sampler (by default a
  ``RandomSampler`` seeded per trial from ``(seed, trial number, parameter)``, so workers sharing a storage
  never draw the same independent values). A parameter fixed by ``low == high`` is left out of the relative
  space (as Optuna's model-based samplers do) and always takes its one value.
- parameters: every distribution of Optuna, encoded the way Optuna's own model-based samplers encode them
  (its ``_SearchSpaceTransform``): floats linear or in log space (``log=True``), integers and stepped floats
  as continuous coordinates over ``[low - step/2, high + step/2]`` (in log space for ``log=True`` integers)
  rounded to the grid when decoded, categoricals one-hot (one coordinate in ``[0, 1]`` per choice, the
  largest wins when decoded). The strategy therefore sees a box, and every point it proposes decodes to
  valid parameter values. A distribution type Optuna adds later raises ``ValueError`` naming the parameter.
- single- and multi-objective studies: one direction sets the strategy's ``minimize``; several directions
  (``optuna.create_study(directions=[...])``) need a multi-objective strategy (:func:`pom_sampler`, or a
  factory accepting ``n_objectives``), which is told every objective signed for minimisation (a maximised
  objective negated) and built with ``minimize=True``; a single-objective factory raises ``ValueError``.
- each COMPLETE trial is told to the strategy (in ``after_trial``, and at every ask the trials completed
  by other workers of the same storage); failed or pruned trials are not.
- dashboard data: every trial the strategy proposed carries the user attribute ``"optarium"`` (its point as
  reserved, the strategy class, points told, the last snapshot's size in bytes, the seconds the sampler
  spent up to the reservation and, for TuRBO strategies, the last surrogate fit and acquisition seconds),
  which ``optuna-dashboard`` and ``study.trials_dataframe()`` show. Written in the same storage call as
  the reservation below, so it costs no extra transaction.

Parallel workers (several processes on one storage, or ``n_jobs > 1``). At every ask the sampler reads the
study: every trial that already holds a point (RUNNING in another worker, COMPLETE, FAIL, ...) is excluded,
so a proposal equal to one of them is skipped for the next; a new batch is asked from a copy of the strategy
told the other workers' RUNNING points with a *constant liar* (the worst value observed so far, as Optuna's
``constant_liar`` does), so the batch moves away from points being evaluated elsewhere. Two workers with
the same seed therefore share the initial design instead of repeating it. If the strategy keeps proposing
taken points, the trial falls back to the independent sampler.

Pickling: the sampler pickles (so does a study using it, Optuna's resume recipe); the strategy is not part
of the pickle and is rebuilt from the study's snapshot at the next ask.

Durability (stop, crash, resume). The study's storage holds every completed evaluation; the sampler adds
a snapshot of the strategy under the study user attribute ``"optarium:sampler"``, written at every ask:
the strategy's ``state_dict()`` *without* its data (the trust region, counters, generator state, pending
design, fitted parameters; serialised with ``torch.save`` and base64), the numbers of the trials it had been
told (in order, as ranges), the points not yet handed out, the points handed to trials still running and
the writing process (host, pid). A new
sampler on the same study (another process after ``kill -9``) rebuilds the strategy's data from those COMPLETE
trials, loads the snapshot, tells the trials completed after the snapshot, and re-offers the points of trials
that never completed (they were killed mid-evaluation) before asking for new ones. A sequential study resumed
this way continues exactly as the uninterrupted one would (same points, same values). Without a snapshot (a
study run with another sampler) the strategy is warm-started from all completed trials. Concurrent worker
processes each hold their own strategy (told every worker's completed trials) and take turns writing the
snapshot; it names the process that wrote it, and a point handed to a trial that never completed is
re-offered only when that process is dead (checked on the same host), so a live worker's running point is
never handed out twice. Between two workers choosing at the same moment, the point is reserved in the
trial's user attribute ``"optarium"`` (key ``point``) and checked again: the later of the two picks another.

Optuna is imported on the first call, never at import time of :mod:`optarium.bo`.
"""

from __future__ import annotations

import base64
import copy
import functools
import inspect
import io
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from optarium._core.asktell import AskTellStrategy
from optarium._core.seeding import derive_seed
from optarium._core.validation import check_int

__all__ = [
    "ATTR_KEY",
    "POM_SAMPLER_DEFAULTS",
    "STATE_KEY",
    "asktell_sampler",
    "pom_sampler",
    "sampler_class",
    "turbo_enn_sampler",
]

#: The study user attribute holding the sampler's snapshot.
STATE_KEY = "optarium:sampler"
#: The trial user attribute holding the point the sampler reserved for the trial (before Optuna stores its
#: params) and the strategy's bookkeeping that optuna-dashboard shows.
ATTR_KEY = "optarium"

StrategyFactory = Callable[[torch.Tensor, bool], AskTellStrategy]


def _encode_state(state: dict[str, Any]) -> str:
    buf = io.BytesIO()
    torch.save(state, buf)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _decode_state(text: str) -> dict[str, Any]:
    return torch.load(io.BytesIO(base64.b64decode(text)), weights_only=True)


def _ranges(numbers: Sequence[int]) -> list[list[int]]:
    out: list[list[int]] = []
    for n in numbers:
        if out and n == out[-1][1] + 1:
            out[-1][1] = n
        else:
            out.append([n, n])
    return out


def _expand(ranges: Sequence[Sequence[int]]) -> list[int]:
    return [n for a, b in ranges for n in range(int(a), int(b) + 1)]


def _owner() -> dict[str, Any]:
    return {"host": socket.gethostname(), "pid": os.getpid()}


def _owner_dead(owner: Any) -> bool:
    """Whether the process that wrote a snapshot is known to be gone (same host, no such pid)."""
    if not isinstance(owner, dict) or owner.get("host") != socket.gethostname():
        return not isinstance(owner, dict)  # an old snapshot without an owner: treat as dead (resume)
    pid = int(owner.get("pid", -1))
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OSError):
        return False
    return False


def _key(values: Sequence[Any]) -> tuple[Any, ...]:
    """A hashable identity of parameter values: numbers to 12 significant digits, other choices by repr."""
    return tuple(
        float(f"{float(v):.12g}") if isinstance(v, (int, float)) and not isinstance(v, bool) else repr(v)
        for v in values
    )


def _accepts_n_objectives(factory: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "n_objectives" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def _pom_factory(
    bounds: torch.Tensor,
    minimize: bool,
    *,
    n_objectives: int = 2,
    batch_size: int,
    seed: int,
    kwargs: dict[str, Any],
) -> AskTellStrategy:
    from optarium.bo.pom import POM

    return POM(bounds, n_objectives=n_objectives, minimize=minimize, seed=seed, **kwargs)


def _turbo_enn_factory(
    bounds: torch.Tensor, minimize: bool, *, batch_size: int, seed: int, kwargs: dict[str, Any]
) -> AskTellStrategy:
    from optarium.bo.turbo_enn import TurboENN

    return TurboENN(bounds, batch_size=batch_size, minimize=minimize, seed=seed, **kwargs)


def __getattr__(name: str) -> Any:
    """``AskTellSampler`` (the class is built on first use, so that Optuna loads lazily; pickle finds it)."""
    if name == "AskTellSampler":
        return sampler_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def sampler_class() -> type:
    """The ``optuna.samplers.BaseSampler`` subclass ``AskTellSampler`` (built on first use)."""
    import numpy as np
    import optuna
    from optuna._transform import _SearchSpaceTransform
    from optuna.distributions import (
        CategoricalDistribution,
        FloatDistribution,
        IntDistribution,
        distribution_to_json,
    )
    from optuna.samplers import BaseSampler, RandomSampler
    from optuna.search_space import IntersectionSearchSpace
    from optuna.study import StudyDirection
    from optuna.trial import TrialState

    def check_distribution(name: str, dist: Any) -> None:
        if not isinstance(dist, (FloatDistribution, IntDistribution, CategoricalDistribution)):
            raise ValueError(
                f"search_space: parameter {name!r} has {dist!r}; the optarium ask/tell sampler supports "
                "Optuna's FloatDistribution, IntDistribution and CategoricalDistribution"
            )

    class AskTellSampler(BaseSampler):
        """An Optuna sampler that delegates relative sampling to an optarium ask/tell strategy."""

        def __init__(
            self,
            factory: StrategyFactory,
            *,
            batch_size: int = 1,
            seed: int | None = 0,
            independent_sampler: BaseSampler | None = None,
        ) -> None:
            if not callable(factory):
                raise TypeError(f"factory: must be callable (bounds, minimize) -> strategy, got {factory!r}")
            if seed is not None:
                seed = check_int("seed", seed, minimum=0)
            if independent_sampler is not None and not isinstance(independent_sampler, BaseSampler):
                raise TypeError(
                    "independent_sampler: must be an optuna BaseSampler or None, got "
                    f"{type(independent_sampler).__name__}"
                )
            self._factory = factory
            self._batch_size = check_int("batch_size", batch_size, minimum=1)
            self._seed = seed
            self._user_independent = independent_sampler
            self._init_runtime()

        def _init_runtime(self) -> None:
            self._intersection = IntersectionSearchSpace()
            self._lock = threading.RLock()
            self._reset()

        def __getstate__(self) -> dict[str, Any]:
            """The configuration only: the strategy is rebuilt from the study's snapshot at the next ask."""
            return {
                "factory": self._factory,
                "batch_size": self._batch_size,
                "seed": self._seed,
                "independent": self._user_independent,
            }

        def __setstate__(self, state: dict[str, Any]) -> None:
            self._factory = state["factory"]
            self._batch_size = state["batch_size"]
            self._seed = state["seed"]
            self._user_independent = state["independent"]
            self._init_runtime()

        def _reset(self) -> None:
            self.strategy: AskTellStrategy | None = None
            self._names: list[str] = []
            self._log: list[bool] = []
            self._signature: list[Any] = []
            self._told: list[int] = []
            self._told_set: set[int] = set()
            self._queue: list[list[float]] = []
            self._handed: dict[int, list[float]] = {}
            self._zombies: set[int] = set()
            self._study_key: Any = None
            self._signs: list[float] = []
            self._transform: Any = None
            self._state_bytes = 0

        # ------------------------------------------------------------ Optuna API
        def reseed_rng(self) -> None:
            if self._user_independent is not None:
                self._user_independent.reseed_rng()

        def infer_relative_search_space(self, study: Any, trial: Any) -> dict[str, Any]:
            if study._is_multi_objective() and not _accepts_n_objectives(self._factory):
                raise ValueError(
                    "study: a multi-objective study needs a multi-objective strategy (pom_sampler, or a "
                    "factory that accepts n_objectives); this sampler's factory builds a single-objective one"
                )
            space = self._intersection.calculate(study)
            for name, dist in space.items():
                check_distribution(name, dist)
            # a parameter fixed by low == high has nothing to optimise (and would be an empty box)
            return {n: d for n, d in sorted(space.items()) if not d.single()}

        def sample_independent(self, study: Any, trial: Any, param_name: str, param_distribution: Any) -> Any:
            check_distribution(param_name, param_distribution)
            if param_distribution.single():
                return (
                    param_distribution.to_external_repr(0)
                    if isinstance(param_distribution, CategoricalDistribution)
                    else param_distribution.low
                )
            if self._user_independent is not None:
                return self._user_independent.sample_independent(study, trial, param_name, param_distribution)
            seed = (
                None
                if self._seed is None
                else derive_seed(self._seed, "independent", trial.number, param_name) % 2**32
            )
            return RandomSampler(seed=seed).sample_independent(study, trial, param_name, param_distribution)

        def sample_relative(self, study: Any, trial: Any, search_space: dict[str, Any]) -> dict[str, Any]:
            if not search_space:
                return {}
            started = time.perf_counter()
            with self._lock:
                self._sync(study, search_space)
                assert self.strategy is not None
                others = [t for t in study.get_trials(deepcopy=False) if t.number != trial.number]
                complete = [
                    t for t in others if t.state == TrialState.COMPLETE and t.number not in self._told_set
                ]
                if complete:  # completed by another worker since the last ask
                    self._tell(study, [(t, t.values) for t in complete])
                taken = self._taken(others)
                for _ in range(8):
                    row = self._next_free(others, taken, search_space)
                    if row is None:  # the strategy keeps proposing taken points: an independent draw instead
                        self._save(study)
                        return {}
                    point = self._decode(row, search_space)
                    values = [point[n] for n in self._names]
                    # reserve the point (in the trial's "optarium" attribute, one write with the dashboard
                    # figures), then look again: of two workers that picked it at the same moment, the later
                    # writer sees the earlier's reservation and picks another
                    study._storage.set_trial_user_attr(
                        trial._trial_id, ATTR_KEY, self._dashboard(values, started)
                    )
                    again = [t for t in study.get_trials(deepcopy=False) if t.number != trial.number]
                    if _key(values) not in self._taken(again):
                        break
                    taken.add(_key(values))
                else:
                    self._save(study)
                    return {}
                self._handed[trial.number] = row
                self._save(study)
                return point

        def _dashboard(self, values: list[Any], started: float) -> dict[str, Any]:
            """The trial's ``"optarium"`` user attribute: the reserved point and the dashboard figures."""
            assert self.strategy is not None
            info: dict[str, Any] = {
                "point": values,
                "strategy": type(self.strategy).__name__,
                "told": len(self._told),
                "state_bytes": self._state_bytes,
                "ask_seconds": round(time.perf_counter() - started, 6),
            }
            timings = getattr(self.strategy, "timings", None)
            if isinstance(timings, dict):
                for name, values in timings.items():
                    if values:
                        info[f"last_{name}_seconds"] = round(float(values[-1]), 6)
            return info

        def _taken(self, trials: Sequence[Any]) -> set[tuple[float, ...]]:
            """The points held by ``trials`` (their parameters, or a reservation made while sampling)."""
            out = set()
            for t in trials:
                if t.number in self._zombies:
                    continue
                row = self._decoded_row(t.params)
                if row is None:
                    reserved = t.user_attrs.get(ATTR_KEY)
                    point = reserved.get("point") if isinstance(reserved, dict) else None
                    row = list(point) if isinstance(point, list) else None
                if row is not None and len(row) == len(self._names):
                    out.add(_key(row))
            return out

        def _next_free(
            self, others: Sequence[Any], taken: set[Any], space: dict[str, Any]
        ) -> list[float] | None:
            assert self.strategy is not None
            for _ in range(4):
                while self._queue:
                    row = self._queue.pop(0)
                    decoded = self._decode(row, space)
                    if _key([decoded[n] for n in self._names]) not in taken:
                        return row
                self._queue = self._ask_batch(others)
            return None

        def _ask_batch(self, others: Sequence[Any]) -> list[list[float]]:
            """A batch from the strategy, or from a copy told the other workers' RUNNING points as liars."""
            assert self.strategy is not None
            running = [
                row
                for t in others
                if t.state == TrialState.RUNNING
                and t.number not in self._handed
                and t.number not in self._zombies
                and (row := self._encode(t.params)) is not None
            ]
            if not running or self.strategy.Y.numel() == 0:
                return self.strategy.ask(self._batch_size).tolist()
            y = self.strategy.Y
            lie = y.amax(0) if self.strategy.minimize else y.amin(0)  # the worst value, per objective
            liar = copy.deepcopy(self.strategy)
            dt = liar.dtype
            liar.tell(torch.tensor(running, dtype=dt), lie.to(dt).expand(len(running), *y.shape[1:]).clone())
            batch = liar.ask(self._batch_size).tolist()
            self.strategy.generator.set_state(liar.generator.get_state())
            return batch

        def _decoded_row(self, params: dict[str, Any]) -> list[Any] | None:
            if not all(n in params for n in self._names):
                return None
            return [params[n] for n in self._names]

        def before_trial(self, study: Any, trial: Any) -> None:
            if self._user_independent is not None:
                self._user_independent.before_trial(study, trial)

        def after_trial(self, study: Any, trial: Any, state: Any, values: Sequence[float] | None) -> None:
            if self._user_independent is not None:
                self._user_independent.after_trial(study, trial, state, values)
            with self._lock:
                self._handed.pop(trial.number, None)
                if state != TrialState.COMPLETE or values is None or self.strategy is None:
                    return
                self._tell(study, [(trial, list(values))])

        # ------------------------------------------------------------ internals
        def _space_signature(self, space: dict[str, Any]) -> list[Any]:
            return [[n, distribution_to_json(d)] for n, d in sorted(space.items())]

        def _encode(self, params: dict[str, Any]) -> list[float] | None:
            """The strategy's coordinates of ``params`` (``None`` if a parameter is missing or invalid)."""
            if not all(n in params for n in self._names):
                return None
            space = self._transform._search_space
            for n in self._names:
                dist = space[n]
                try:
                    if not dist._contains(dist.to_internal_repr(params[n])):
                        return None
                except (TypeError, ValueError):
                    return None
            row = self._transform.transform({n: params[n] for n in self._names})
            return np.clip(row, self._transform.bounds[:, 0], self._transform.bounds[:, 1]).tolist()

        def _decode(self, row: Sequence[float], space: dict[str, Any]) -> dict[str, Any]:
            x = np.clip(
                np.asarray(row, dtype=float), self._transform.bounds[:, 0], self._transform.bounds[:, 1]
            )
            return self._transform.untransform(x)

        def _objectives(self, values: Any) -> list[float]:
            """A trial's values as the strategy is told them: multi-objective ones signed for minimisation."""
            vals = [float(v) for v in (values if isinstance(values, (list, tuple)) else [values])]
            return [s * v for s, v in zip(self._signs, vals, strict=True)] if self._signs else vals

        def _tell(self, study: Any, trials: Sequence[tuple[Any, Any]]) -> None:
            assert self.strategy is not None
            rows, ys, nums = [], [], []
            for t, values in sorted(trials, key=lambda tv: tv[0].number):
                if t.number in self._told_set:
                    continue
                row = self._encode(t.params)
                if row is None:
                    continue
                rows.append(row)
                ys.append(self._objectives(values))
                nums.append(t.number)
            if not rows:
                return
            dt = self.strategy.dtype
            y = torch.tensor(ys, dtype=dt)
            self.strategy.tell(torch.tensor(rows, dtype=dt), y if self._signs else y[:, 0])
            self._told.extend(nums)
            self._told_set.update(nums)

        def _sync(self, study: Any, space: dict[str, Any]) -> None:
            signature = self._space_signature(space)
            key = (id(study._storage), study._study_id)
            if self.strategy is not None and signature == self._signature and key == self._study_key:
                return
            self._reset()
            self._study_key = key
            self._signature = signature
            self._names = [s[0] for s in signature]
            self._transform = _SearchSpaceTransform(
                {n: space[n] for n in self._names},
                transform_log=True,
                transform_step=True,
                transform_0_1=False,
            )
            bounds = torch.tensor(self._transform.bounds.T.copy(), dtype=torch.float64)
            directions = study.directions
            if len(directions) > 1:
                self._signs = [1.0 if d == StudyDirection.MINIMIZE else -1.0 for d in directions]
                self.strategy = self._factory(bounds, True, n_objectives=len(directions))
            else:
                self._signs = []
                self.strategy = self._factory(bounds, study.direction == StudyDirection.MINIMIZE)
            if not isinstance(self.strategy, AskTellStrategy):
                raise TypeError(
                    f"factory: must return an AskTellStrategy, got {type(self.strategy).__name__}"
                )
            complete = {t.number: t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))}
            snap = study.user_attrs.get(STATE_KEY)
            if isinstance(snap, dict) and snap.get("space") == signature:
                self._load_snapshot(snap, complete)
            self._tell(study, [(t, t.values) for t in complete.values()])

        def _load_snapshot(self, snap: dict[str, Any], complete: dict[int, Any]) -> None:
            assert self.strategy is not None
            told = _expand(snap["told"])
            if not all(n in complete for n in told):
                return  # inconsistent snapshot: fall back to a warm start from the completed trials
            rows = [self._encode(complete[n].params) for n in told]
            if any(r is None for r in rows):
                return
            dt = self.strategy.dtype
            state = _decode_state(snap["state"])
            state["X"] = torch.tensor(rows, dtype=dt).reshape(len(told), len(self._names))
            y = torch.tensor([self._objectives(complete[n].values) for n in told], dtype=dt)
            state["Y"] = y if self._signs else y[:, 0]
            self.strategy.load_state_dict(state)
            self._told = list(told)
            self._told_set = set(told)
            stale: list[Any] = []
            if _owner_dead(snap.get("owner")):  # its unfinished trials were killed: re-offer their points
                handed = sorted((int(k), v) for k, v in snap["handed"].items())
                stale = [row for n, row in handed if n not in complete]
                self._zombies = {n for n, _ in handed if n not in complete}
            self._queue = [list(map(float, r)) for r in stale] + [list(map(float, r)) for r in snap["queue"]]

        def _save(self, study: Any) -> int:
            """Write the snapshot; returns its encoded state's size in bytes."""
            assert self.strategy is not None
            state = self.strategy.state_dict()
            state.pop("X", None)
            state.pop("Y", None)
            encoded = _encode_state(state)
            self._state_bytes = len(encoded)
            study.set_user_attr(
                STATE_KEY,
                {
                    "version": 2,
                    "owner": _owner(),
                    "space": self._signature,
                    "told": _ranges(self._told),
                    "state": encoded,
                    "queue": self._queue,
                    "handed": {str(k): v for k, v in self._handed.items()},
                },
            )
            return len(encoded)

    AskTellSampler.__module__ = __name__
    AskTellSampler.__qualname__ = "AskTellSampler"
    del optuna
    return AskTellSampler


def asktell_sampler(
    factory: StrategyFactory,
    *,
    batch_size: int = 1,
    seed: int | None = 0,
    independent_sampler: Any = None,
) -> Any:
    """An Optuna sampler driven by ``factory(bounds, minimize) -> AskTellStrategy``.

    ``bounds`` is the ``(2, d)`` box of the encoded parameters in sorted-name order (see the module
    docstring: log-scaled parameters in log units, integers and steps widened by half a step, one
    coordinate per categorical choice); ``minimize`` follows the study's direction. For a multi-objective
    study the factory is called as ``factory(bounds, True, n_objectives=m)``. ``batch_size`` points are asked
    at a time and handed to consecutive trials; ``seed`` seeds the independent (random) sampler.
    """
    return sampler_class()(factory, batch_size=batch_size, seed=seed, independent_sampler=independent_sampler)


def pom_sampler(*, batch_size: int = 4, seed: int = 0, **kwargs: Any) -> Any:
    """POM (batch multi-objective BO, :class:`~optarium.bo.POM`) as an Optuna sampler for studies with
    several ``directions`` (``kwargs`` go to ``POM`` over :data:`POM_SAMPLER_DEFAULTS`; each objective is
    told signed for minimisation).

    Example:
        >>> import optuna
        >>> study = optuna.create_study(directions=["minimize", "maximize"], sampler=pom_sampler(seed=0))
        >>> f = lambda t: (t.suggest_float("x", 0, 1) ** 2, t.suggest_int("n", 1, 4) - t.params["x"])
        >>> study.optimize(f, n_trials=10)
        >>> len(study.best_trials) >= 1
        True
    """
    settings = {**POM_SAMPLER_DEFAULTS, **kwargs}
    factory = functools.partial(_pom_factory, batch_size=batch_size, seed=seed, kwargs=settings)
    return asktell_sampler(factory, batch_size=batch_size, seed=seed)


#: :func:`pom_sampler`'s POM settings unless overridden: fewer candidates and posterior draws than POM's
#: own defaults (which cost seconds per ask), sized for interactive Optuna studies.
POM_SAMPLER_DEFAULTS: dict[str, Any] = {"num_candidates": 512, "num_mc_samples": 128, "screen_size": 200}


def turbo_enn_sampler(*, batch_size: int = 1, seed: int = 0, **kwargs: Any) -> Any:
    """TuRBO-ENN as an Optuna sampler (``kwargs`` go to :class:`~optarium.bo.turbo_enn.TurboENN`).

    Example:
        >>> import optuna
        >>> study = optuna.create_study(sampler=turbo_enn_sampler(batch_size=2, seed=0))
        >>> study.optimize(lambda t: (t.suggest_float("x", -2, 2) - 1) ** 2, n_trials=12)
        >>> len(study.trials)
        12
    """
    factory = functools.partial(_turbo_enn_factory, batch_size=batch_size, seed=seed, kwargs=dict(kwargs))
    return asktell_sampler(factory, batch_size=batch_size, seed=seed)
