"""TuRBO-ENN as an Optuna sampler: relative sampling, errors, and a SIGKILL-and-resume durability test."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from pathlib import Path

import pytest
import torch

optuna = pytest.importorskip("optuna", reason="the sampler targets Optuna's BaseSampler API")

from optarium.bo.optuna_sampler import STATE_KEY, turbo_enn_sampler  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.WARNING)

SETTINGS = {"batch_size": 3, "seed": 0, "num_candidates": 100}


def objective(trial) -> float:
    x = [trial.suggest_float(f"x{i}", -2.0, 2.0) for i in range(3)]
    lr = trial.suggest_float("lr", 1e-4, 1.0, log=True)
    return sum((v - 0.3) ** 2 for v in x) + (torch.tensor(lr).log10().item() + 2.0) ** 2


def test_study_uses_the_strategy_and_is_deterministic() -> None:
    runs = []
    for _ in range(2):
        sampler = turbo_enn_sampler(**SETTINGS)
        study = optuna.create_study(sampler=sampler)
        study.optimize(objective, n_trials=30)
        runs.append([t.params for t in study.trials])
        strat = sampler.strategy
        assert strat is not None and len(strat.Y) == 30 and strat.minimize
        assert strat.best_y == study.best_value
        assert STATE_KEY in study.user_attrs
    assert runs[0] == runs[1]
    assert study.best_value < 0.5
    assert all(1e-4 <= p["lr"] <= 1.0 for p in runs[0])
    up = optuna.create_study(sampler=turbo_enn_sampler(**SETTINGS), direction="maximize")
    up.optimize(lambda t: -objective(t), n_trials=5)
    assert not up.sampler.strategy.minimize


def mixed(trial) -> float:
    """Every kind of Optuna parameter: linear, log and stepped floats, linear and log ints, a categorical."""
    x = trial.suggest_float("x", -2.0, 2.0)
    lr = trial.suggest_float("lr", 1e-4, 1.0, log=True)
    frac = trial.suggest_float("frac", 0.0, 1.0, step=0.25)
    n = trial.suggest_int("n", 1, 10)
    width = trial.suggest_int("width", 1, 64, log=True)
    act = trial.suggest_categorical("act", ["relu", "tanh", None])
    penalty = {"relu": 0.0, "tanh": 1.0, None: 2.0}[act]
    return (
        (x - 0.3) ** 2
        + (torch.tensor(lr).log10().item() + 2) ** 2
        + (frac - 0.5) ** 2
        + 0.1 * (n - 7) ** 2
        + (0.01 * abs(width - 8) + penalty)
    )


def test_every_optuna_distribution_is_searched_and_decodes_to_valid_values() -> None:
    runs = []
    for _ in range(2):
        study = optuna.create_study(sampler=turbo_enn_sampler(**SETTINGS))
        study.optimize(mixed, n_trials=36)
        runs.append([t.params for t in study.trials])
    assert runs[0] == runs[1]  # deterministic under the seed, categoricals included
    proposed = [t for t in study.trials if "optarium" in t.user_attrs]
    assert len(proposed) >= 30  # all but the first trial came from the strategy
    for t in study.trials:
        p = t.params
        assert -2 <= p["x"] <= 2 and 1e-4 <= p["lr"] <= 1 and p["frac"] in (0.0, 0.25, 0.5, 0.75, 1.0)
        assert isinstance(p["n"], int) and 1 <= p["n"] <= 10 and isinstance(p["width"], int)
        assert 1 <= p["width"] <= 64 and p["act"] in ("relu", "tanh", None)
    assert len({p["act"] for p in runs[0]}) == 3 and len({p["n"] for p in runs[0]}) > 3
    strat = study.sampler.strategy
    assert strat.dim == 3 + 2 + 3  # x, lr, frac, n, width as one coordinate each; act one-hot in three
    assert study.best_trials[0].params["act"] == "relu" and study.best_value < 1.0
    info = proposed[-1].user_attrs["optarium"]
    assert info["strategy"] == "TurboENN" and info["told"] == 35 and info["state_bytes"] > 1000
    assert info["ask_seconds"] >= 0 and "last_fit_seconds" in info
    frame = study.trials_dataframe()
    assert "user_attrs_optarium" in frame.columns


def test_multi_objective_studies_run_through_pom_and_single_objective_strategies_refuse() -> None:
    from optarium.bo.optuna_sampler import pom_sampler

    def two(trial) -> tuple[float, float]:
        x = trial.suggest_float("x", 0.0, 1.0)
        k = trial.suggest_int("k", 1, 3)
        return x**2 + 0.1 * k, (1 - x) ** 2 - 0.1 * k  # the second is maximised below

    study = optuna.create_study(
        directions=["minimize", "maximize"], sampler=pom_sampler(seed=0, batch_size=4)
    )
    study.optimize(two, n_trials=12)
    strat = study.sampler.strategy
    assert strat.n_objectives == 2 and strat.minimize and strat.Y.shape == (12, 2)
    told = {t.number: t.values for t in study.trials if t.number in study.sampler._told_set}
    first = min(told)
    assert strat.Y[0].tolist() == pytest.approx([told[first][0], -told[first][1]])  # maximised: negated
    assert study.best_trials and study.trials[-1].user_attrs["optarium"]["strategy"] == "POM"
    mo = optuna.create_study(sampler=turbo_enn_sampler(), directions=["minimize", "minimize"])
    with pytest.raises(ValueError, match=r"^study: a multi-objective study needs"):
        mo.optimize(lambda t: (t.suggest_float("x", 0, 1), 1.0), n_trials=1, catch=())


def _child(db: str, marker: str, kill_at: int, total: int) -> None:
    """One worker process: create or resume the SQLite study and run it up to ``total`` completed trials."""
    torch.set_num_threads(1)
    study = optuna.create_study(
        study_name="s", storage=f"sqlite:///{db}", load_if_exists=True, sampler=turbo_enn_sampler(**SETTINGS)
    )

    def obj(trial) -> float:
        value = objective(trial)
        if trial.number == kill_at and not os.path.exists(marker):
            Path(marker).touch()
            time.sleep(120)  # killed here, mid-evaluation
        return value

    done = len(study.get_trials(states=(optuna.trial.TrialState.COMPLETE,)))
    study.optimize(obj, n_trials=total - done)


def test_sigkill_mid_run_then_resume_loses_nothing_and_continues_the_same_run(tmp_path: Path) -> None:
    """A real worker process (forked, so it does not pay torch's import again) is killed with SIGKILL while
    evaluating trial 13; a second process resumes the SQLite study."""
    total, kill_at = 24, 13
    db, marker = str(tmp_path / "study.db"), str(tmp_path / "marker")
    ctx = multiprocessing.get_context("fork")
    proc = ctx.Process(target=_child, args=(db, marker, kill_at, total))
    proc.start()
    deadline = time.monotonic() + 15
    while not os.path.exists(marker):
        assert proc.is_alive() and time.monotonic() < deadline
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.join()
    assert proc.exitcode == -signal.SIGKILL
    storage = f"sqlite:///{db}"
    killed = optuna.load_study(study_name="s", storage=storage)
    before = [t for t in killed.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(before) == kill_at and killed.trials[kill_at].state == optuna.trial.TrialState.RUNNING

    resume = ctx.Process(target=_child, args=(db, marker, kill_at, total))
    resume.start()
    resume.join(30)
    assert resume.exitcode == 0
    resumed = optuna.load_study(study_name="s", storage=storage)
    complete = [t for t in resumed.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(complete) == total
    # nothing completed before the kill was lost or changed
    assert [(t.number, t.params, t.value) for t in complete[:kill_at]] == [
        (t.number, t.params, t.value) for t in before
    ]
    # the resumed run is the uninterrupted one: same points and values in the same order
    reference = optuna.create_study(sampler=turbo_enn_sampler(**SETTINGS))
    reference.optimize(objective, n_trials=total)
    assert [(t.params, t.value) for t in complete] == [(t.params, t.value) for t in reference.trials]


def _worker(db: str, n_trials: int, start: str) -> None:
    """One of two parallel workers on one SQLite study (the same seed: the harder case)."""
    torch.set_num_threads(1)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(
        study_name="par",
        storage=f"sqlite:///{db}",
        load_if_exists=True,
        sampler=turbo_enn_sampler(**SETTINGS),
    )
    while not os.path.exists(start):
        time.sleep(0.01)

    def obj(trial) -> float:
        value = objective(trial)
        time.sleep(0.02)  # evaluations overlap between the workers
        return value

    study.optimize(obj, n_trials=n_trials)


def test_two_processes_on_one_sqlite_study_propose_distinct_points_and_lose_nothing(tmp_path: Path) -> None:
    """Issue 12: two workers (40 trials each) on one SQLite file gave 21 duplicate points of 80 before; the
    sampler now sees the other worker's RUNNING and COMPLETE trials."""
    db, start = str(tmp_path / "par.db"), str(tmp_path / "start")
    optuna.create_study(study_name="par", storage=f"sqlite:///{db}")
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_worker, args=(db, 40, start)) for _ in range(2)]
    for p in procs:
        p.start()
    Path(start).touch()
    for p in procs:
        p.join(240)
        assert p.exitcode == 0
    study = optuna.load_study(study_name="par", storage=f"sqlite:///{db}")
    trials = study.trials
    assert len(trials) == 80
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in trials)
    points = [tuple(sorted(t.params.items())) for t in trials]
    assert len(set(points)) == 80, f"{80 - len(set(points))} duplicate points of 80"
