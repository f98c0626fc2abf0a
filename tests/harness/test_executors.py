"""Executors: the same experiment run in this process, in a local pool, as Ray tasks on a real local Ray
instance and as a submitit job array (its local executor) stores the same run; bad options raise."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from optarium.harness.executors import (
    LocalExecutor,
    RayExecutor,
    SlurmExecutor,
    error_unit,
    make_executor,
)
from optarium.harness.runner import run_experiment

SLUG = "robust-satisficing"  # a real registered experiment (workers import it by name); smoke costs ~3 CPU-s
TIMING = ("attempt",)  # plus every measured time: names with "second" or ending in "time_s"


def _timing(key: str) -> bool:
    return key in TIMING or "second" in key or key.endswith("time_s")


def _stored(run_dir: Path) -> tuple[list[Any], list[Any], Any, Any]:
    """The run's records and units without timings or attempt ids, in a canonical order, and its verdict."""

    def clean(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return sorted(
            ({k: v for k, v in r.items() if not _timing(k)} for r in rows),
            key=lambda r: json.dumps(r, sort_keys=True),
        )

    def lines(name: str) -> list[dict[str, Any]]:
        return [json.loads(x) for x in (run_dir / name).read_text().splitlines() if x.strip()]

    verdict = json.loads((run_dir / "verdict.json").read_text())
    summary = json.loads((run_dir / "summary.json").read_text())
    for method in summary["methods"].values():
        method["final"] = {k: v for k, v in method["final"].items() if not _timing(k)}
    verdict["figures"] = {k: v for k, v in verdict["figures"].items() if not _timing(k)}
    return clean(lines("records.jsonl")), clean(lines("units.jsonl")), verdict, summary


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, ...]:
    out = run_experiment(SLUG, "smoke", seeds=1, out=tmp_path_factory.mktemp("local"))
    assert all(u["status"] == "done" for u in out.units) and len(out.units) > 1
    return _stored(out.run_dir)


def test_a_local_pool_stores_the_same_run(reference: tuple[Any, ...], tmp_path: Path) -> None:
    out = run_experiment(SLUG, "smoke", seeds=1, out=tmp_path, executor=LocalExecutor(jobs=2))
    assert _stored(out.run_dir) == reference


def test_ray_tasks_on_a_local_loopback_instance_store_the_same_run(
    reference: tuple[Any, ...], tmp_path: Path
) -> None:
    ray = pytest.importorskip("ray", reason="Ray is in the cluster extra, which make test installs")
    executor = RayExecutor(jobs=2)
    out = run_experiment(SLUG, "smoke", seeds=1, out=tmp_path, executor=executor)
    assert not ray.is_initialized()  # the instance it started was stopped
    assert _stored(out.run_dir) == reference
    assert "loopback" in executor.describe()


def test_a_submitit_job_array_stores_the_same_run(reference: tuple[Any, ...], tmp_path: Path) -> None:
    pytest.importorskip("submitit", reason="submitit is in the cluster extra, which make test installs")
    executor = SlurmExecutor(tmp_path / "submitit", cluster="local", parameters={"timeout_min": 10})
    out = run_experiment(SLUG, "smoke", seeds=1, out=tmp_path / "runs", executor=executor)
    assert _stored(out.run_dir) == reference
    arrays = list((tmp_path / "submitit" / SLUG / "smoke").glob("*_submitted.pkl"))
    assert len(arrays) == len(reference[1])  # one array task per unit


def test_make_executor_and_bad_options() -> None:
    assert isinstance(make_executor("local", jobs=3), LocalExecutor)
    assert isinstance(make_executor("ray", address="ray://head:10001"), RayExecutor)
    slurm = make_executor("slurm", parameters={"slurm_partition": "cpu"})
    assert isinstance(slurm, SlurmExecutor) and slurm.parameters == {"slurm_partition": "cpu"}
    with pytest.raises(ValueError, match="executor"):
        make_executor("dask")
    with pytest.raises(ValueError, match="address"):
        make_executor("local", address="ray://x")
    with pytest.raises(ValueError, match="slurm"):
        make_executor("ray", parameters={"slurm_partition": "cpu"})
    with pytest.raises(ValueError, match="cluster"):
        SlurmExecutor(cluster="kubernetes")
    with pytest.raises(ValueError, match="jobs"):
        LocalExecutor(jobs=0)
    with pytest.raises(TypeError, match="executor"):
        run_experiment(SLUG, "smoke", executor="ray")  # type: ignore[arg-type]
    unit = error_unit("m", 3, "died")
    assert unit["status"] == "error" and unit["seed"] == 3 and unit["n_records"] == 0
