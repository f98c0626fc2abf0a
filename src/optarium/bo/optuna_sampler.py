"""Any ask/tell strategy (TuRBO-ENN first) as an Optuna sampler: Optuna's studies, storages and dashboards.

:func:`turbo_enn_sampler` (or :func:`asktell_sampler` with any strategy factory) returns an
``optuna.samplers.BaseSampler``:

- *relative sampling*: the search space is the intersection of the completed trials' spaces
  (``IntersectionSearchSpace``, as Optuna's own model-based samplers do); each trial gets the next point of a
  batch of ``batch_size`` points asked from the strategy; a parameter outside that space (the first trial,
  before any space is known, or a new parameter) is drawn by the *independent* sampler (``RandomSampler``).
- supported parameters: continuous ``FloatDistribution`` (linear or ``log=True``, optimised in log space).
  Integer, categorical and stepped float parameters raise ``ValueError`` naming the parameter.
- single-objective studies only (``ValueError`` otherwise); the study's direction sets ``minimize``.
- each COMPLETE trial is told to the strategy (in ``after_trial``); failed or pruned trials are not.

Durability (stop, crash, resume). The study's storage holds every completed evaluation; the sampler adds
a snapshot of the strategy under the study user attribute ``"optarium:sampler"``, written at every ask:
the strategy's ``state_dict()`` *without* its data (the trust region, counters, generator state, pending
design, fitted parameters; serialised with ``torch.save`` and base64), the numbers of the trials it had been
told (in order, as ranges), the points not yet handed out and the points handed to trials still running. A new
sampler on the same study (another process after ``kill -9``) rebuilds the strategy's data from those COMPLETE
trials, loads the snapshot, tells the trials completed after the snapshot, and re-offers the points of trials
that never completed (they were killed mid-evaluation) before asking for new ones. A sequential study resumed
this way continues exactly as the uninterrupted one would (same points, same values). Without a snapshot (a
study run with another sampler) the strategy is warm-started from all completed trials. One sampler process
per study at a time: concurrent processes would each hold their own strategy and overwrite each other's
snapshot (threads of one process, ``n_jobs > 1``, share the sampler and are fine).

Optuna is imported on the first call, never at import time of :mod:`optarium.bo`.
"""

from __future__ import annotations

import base64
import functools
import io
import math
import threading
from collections.abc import Callable, Sequence
from typing import Any

import torch

from optarium._core.asktell import AskTellStrategy
from optarium._core.validation import check_int

__all__ = ["STATE_KEY", "asktell_sampler", "sampler_class", "turbo_enn_sampler"]

#: The study user attribute holding the sampler's snapshot.
STATE_KEY = "optarium:sampler"

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


@functools.cache
def sampler_class() -> type:
    """The ``optuna.samplers.BaseSampler`` subclass ``AskTellSampler`` (built on first use)."""
    import optuna
    from optuna.distributions import FloatDistribution
    from optuna.samplers import BaseSampler, RandomSampler
    from optuna.search_space import IntersectionSearchSpace
    from optuna.study import StudyDirection
    from optuna.trial import TrialState

    def check_distribution(name: str, dist: Any) -> None:
        if not isinstance(dist, FloatDistribution) or dist.step is not None:
            raise ValueError(
                f"search_space: parameter {name!r} has {dist!r}; the optarium ask/tell sampler supports "
                "continuous FloatDistribution parameters only (no int, categorical or stepped floats yet)"
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
            self._factory = factory
            self._batch_size = check_int("batch_size", batch_size, minimum=1)
            self._independent = independent_sampler or RandomSampler(seed=seed)
            self._intersection = IntersectionSearchSpace()
            self._lock = threading.RLock()
            self._reset()

        def _reset(self) -> None:
            self.strategy: AskTellStrategy | None = None
            self._names: list[str] = []
            self._log: list[bool] = []
            self._signature: list[Any] = []
            self._told: list[int] = []
            self._told_set: set[int] = set()
            self._queue: list[list[float]] = []
            self._handed: dict[int, list[float]] = {}
            self._study_key: Any = None

        # ------------------------------------------------------------ Optuna API
        def reseed_rng(self) -> None:
            self._independent.reseed_rng()

        def infer_relative_search_space(self, study: Any, trial: Any) -> dict[str, Any]:
            if study._is_multi_objective():
                raise ValueError("study: multi-objective studies are not supported by this sampler yet")
            space = self._intersection.calculate(study)
            for name, dist in space.items():
                check_distribution(name, dist)
            return dict(sorted(space.items()))

        def sample_independent(self, study: Any, trial: Any, param_name: str, param_distribution: Any) -> Any:
            check_distribution(param_name, param_distribution)
            return self._independent.sample_independent(study, trial, param_name, param_distribution)

        def sample_relative(self, study: Any, trial: Any, search_space: dict[str, Any]) -> dict[str, Any]:
            if not search_space:
                return {}
            with self._lock:
                self._sync(study, search_space)
                assert self.strategy is not None
                if not self._queue:
                    self._queue = self.strategy.ask(self._batch_size).tolist()
                row = self._queue.pop(0)
                self._handed[trial.number] = row
                self._save(study)
                return self._decode(row, search_space)

        def before_trial(self, study: Any, trial: Any) -> None:
            self._independent.before_trial(study, trial)

        def after_trial(self, study: Any, trial: Any, state: Any, values: Sequence[float] | None) -> None:
            self._independent.after_trial(study, trial, state, values)
            with self._lock:
                self._handed.pop(trial.number, None)
                if state != TrialState.COMPLETE or values is None or self.strategy is None:
                    return
                self._tell(study, [(trial, values[0])])

        # ------------------------------------------------------------ internals
        def _space_signature(self, space: dict[str, Any]) -> list[Any]:
            return [[n, float(d.low), float(d.high), bool(d.log)] for n, d in sorted(space.items())]

        def _encode(self, params: dict[str, Any]) -> list[float] | None:
            if not all(n in params for n in self._names):
                return None
            row = []
            for name, lo, hi, log in self._signature:
                v = float(params[name])
                v = math.log(v) if log else v
                lo_, hi_ = (math.log(lo), math.log(hi)) if log else (lo, hi)
                row.append(min(max(v, lo_), hi_))
            return row

        def _decode(self, row: Sequence[float], space: dict[str, Any]) -> dict[str, Any]:
            out = {}
            for (name, lo, hi, log), v in zip(self._signature, row, strict=True):
                val = math.exp(v) if log else float(v)
                out[name] = min(max(val, lo), hi)
            return out

        def _tell(self, study: Any, trials: Sequence[tuple[Any, float]]) -> None:
            assert self.strategy is not None
            rows, ys, nums = [], [], []
            for t, value in sorted(trials, key=lambda tv: tv[0].number):
                if t.number in self._told_set:
                    continue
                row = self._encode(t.params)
                if row is None:
                    continue
                rows.append(row)
                ys.append(float(value))
                nums.append(t.number)
            if not rows:
                return
            dt = self.strategy.dtype
            self.strategy.tell(torch.tensor(rows, dtype=dt), torch.tensor(ys, dtype=dt))
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
            lo = [math.log(s[1]) if s[3] else s[1] for s in signature]
            hi = [math.log(s[2]) if s[3] else s[2] for s in signature]
            bounds = torch.tensor([lo, hi], dtype=torch.float64)
            minimize = study.direction == StudyDirection.MINIMIZE
            self.strategy = self._factory(bounds, minimize)
            if not isinstance(self.strategy, AskTellStrategy):
                raise TypeError(
                    f"factory: must return an AskTellStrategy, got {type(self.strategy).__name__}"
                )
            complete = {t.number: t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))}
            snap = study.user_attrs.get(STATE_KEY)
            if isinstance(snap, dict) and snap.get("space") == signature:
                self._load_snapshot(snap, complete)
            self._tell(study, [(t, t.value) for t in complete.values()])

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
            state["Y"] = torch.tensor([complete[n].value for n in told], dtype=dt)
            self.strategy.load_state_dict(state)
            self._told = list(told)
            self._told_set = set(told)
            stale = [
                row for n, row in sorted((int(k), v) for k, v in snap["handed"].items()) if n not in complete
            ]
            self._queue = [list(map(float, r)) for r in stale] + [list(map(float, r)) for r in snap["queue"]]

        def _save(self, study: Any) -> None:
            assert self.strategy is not None
            state = self.strategy.state_dict()
            state.pop("X", None)
            state.pop("Y", None)
            study.set_user_attr(
                STATE_KEY,
                {
                    "version": 1,
                    "space": self._signature,
                    "told": _ranges(self._told),
                    "state": _encode_state(state),
                    "queue": self._queue,
                    "handed": {str(k): v for k, v in self._handed.items()},
                },
            )

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

    ``bounds`` is the ``(2, d)`` box of the float parameters in sorted-name order (log-scaled parameters in
    log units); ``minimize`` follows the study's direction. ``batch_size`` points are asked at a time and
    handed to consecutive trials; ``seed`` seeds the independent (random) sampler.
    """
    return sampler_class()(factory, batch_size=batch_size, seed=seed, independent_sampler=independent_sampler)


def turbo_enn_sampler(*, batch_size: int = 1, seed: int = 0, **kwargs: Any) -> Any:
    """TuRBO-ENN as an Optuna sampler (``kwargs`` go to :class:`~optarium.bo.turbo_enn.TurboENN`).

    Example:
        >>> import optuna
        >>> study = optuna.create_study(sampler=turbo_enn_sampler(batch_size=2, seed=0))
        >>> study.optimize(lambda t: (t.suggest_float("x", -2, 2) - 1) ** 2, n_trials=12)
        >>> len(study.trials)
        12
    """
    from optarium.bo.turbo_enn import TurboENN

    def factory(bounds: torch.Tensor, minimize: bool) -> AskTellStrategy:
        return TurboENN(bounds, batch_size=batch_size, minimize=minimize, seed=seed, **kwargs)

    return asktell_sampler(factory, batch_size=batch_size, seed=seed)
