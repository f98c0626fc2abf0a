"""Optuna sampler overhead: 100 trials on a SQLite study, optarium's TuRBO-ENN sampler against Optuna's
RandomSampler and TPESampler, with a profile of where the ask/tell sampler's extra time goes.

Run: ``nice -n 10 python benchmarks/optuna_sampler.py [--trials 100] [--dim 4] [--clock wall|cpu]``.

Each sampler runs the same cheap objective (a shifted sphere over ``--dim`` floats) for ``--trials`` trials
on a fresh SQLite file, interleaved, and the total time is reported with the ratio to RandomSampler. The
TuRBO-ENN run is then repeated under ``cProfile`` and its cumulative time is split into what is ours (the
strategy's ``ask``/``tell``, the snapshot's ``state_dict`` + ``torch.save`` encoding, the search-space
transform) and what is Optuna's storage (the study reads of ``get_trials`` and the SQLite writes of the
snapshot user attribute, the trial's ``"optarium"`` user attribute and the reservation system attribute).
Nothing is asserted: the figures are for the closing note and the docs.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import tempfile
import time
from pathlib import Path

_CLOCK = {"wall": time.perf_counter, "cpu": time.process_time}


def _objective(dim: int):
    def f(trial) -> float:
        return sum((trial.suggest_float(f"x{i}", -5.0, 5.0) - 1.0) ** 2 for i in range(dim))

    return f


def _sampler(name: str, seed: int):
    import optuna

    from optarium.bo.optuna_sampler import turbo_enn_sampler

    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed)
    return turbo_enn_sampler(seed=seed)


def run(name: str, trials: int, dim: int, folder: Path, clock, seed: int = 0) -> float:
    import optuna

    db = folder / f"{name}-{seed}.db"
    study = optuna.create_study(storage=f"sqlite:///{db}", sampler=_sampler(name, seed))
    t0 = clock()
    study.optimize(_objective(dim), n_trials=trials)
    return clock() - t0


#: Profile rows (function-name fragments, matched against ``file:function``) grouped into what they are.
GROUPS = {
    "strategy ask/tell (ours)": ("asktell.py:ask", "asktell.py:tell"),
    "snapshot encode (ours)": ("optuna_sampler.py:_encode_state",),
    "search-space transform": ("_transform.py:transform", "_transform.py:untransform"),
    "storage: snapshot + attributes": ("set_study_user_attr", "set_trial_user_attr", "set_trial_system_attr"),
    "storage: get_trials reads": ("get_all_trials",),
    "sampler total (sample_relative)": ("optuna_sampler.py:sample_relative",),
    "study.optimize total": ("study.py:optimize",),
}


def profile(trials: int, dim: int, folder: Path) -> dict[str, float]:
    import optuna

    study = optuna.create_study(storage=f"sqlite:///{folder / 'profiled.db'}", sampler=_sampler("turbo", 1))
    prof = cProfile.Profile()
    prof.enable()
    study.optimize(_objective(dim), n_trials=trials)
    prof.disable()
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    out = {}
    for group, needles in GROUPS.items():
        total = 0.0
        for (file, _, func), (_, _, _, cum, _) in stats.items():
            key = f"{Path(file).name}:{func}"
            if any(n in key for n in needles):
                total += cum
        out[group] = total
    return out


def main() -> None:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--dim", type=int, default=4)
    ap.add_argument("--clock", choices=sorted(_CLOCK), default="wall")
    args = ap.parse_args()
    clock = _CLOCK[args.clock]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        times = {n: run(n, args.trials, args.dim, folder, clock) for n in ("random", "tpe", "turbo")}
        print(f"{args.trials} trials on SQLite, {args.dim} floats ({args.clock} seconds):")
        for n, t in times.items():
            print(f"  {n:>7}: {t:7.2f} s  ({t / times['random']:.2f}x RandomSampler)")
        prof = profile(args.trials, args.dim, folder)
        print("TuRBO-ENN run under cProfile (cumulative seconds; groups may nest):")
        for group, t in prof.items():
            print(f"  {group:<34} {t:7.2f}")


if __name__ == "__main__":
    main()
