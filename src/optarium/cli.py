"""The ``optarium`` command: ``list``, ``run SLUG``, ``suite``, ``report`` and ``docs``.

Bad input (unknown slug or family, bad scale, a count below 1, an unwritable output directory) prints one line
naming the problem and exits with status 2, without a traceback. Ctrl-C stops a run cleanly, keeps the units
that finished, and exits with status 130.

``optarium run SLUG --scale quick|full --record`` (and ``optarium suite --record``) also writes the verdict to
``verdicts/<slug>/<scale>.json`` (:mod:`optarium.harness.recorded`; ``--verdicts DIR`` or
``$OPTARIUM_VERDICTS`` choose another folder); ``docs``, ``list`` and ``report`` show the recorded verdicts.
A refused ``--record`` (smoke scale, a unit that did not finish, an unwritable folder) exits 2 with one line.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from optarium._core.registry import CONTRACTS, FAMILIES, all_methods, get_method
from optarium._core.status import METHOD_STATUSES

__all__ = ["cli", "main"]

_SCALES = ("smoke", "quick", "full")


def _console() -> Any:
    from rich.console import Console

    console = Console()
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(width=140)  # logs and CI: do not squeeze tables into 80 columns
    return console


def _writable_dir(path: Path, option: str) -> Path:
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".optarium-write-check-"):
            pass
    except OSError as exc:
        raise click.UsageError(f"{option}: cannot write to {path}: {exc.strerror or exc}") from None
    return path


def _check_slug(slug: str) -> None:
    try:
        info = get_method(slug)
    except KeyError:
        raise click.UsageError(
            f"unknown slug {slug!r}; `optarium list` shows the {len(all_methods())} slugs"
        ) from None
    if info.experiment is None:
        raise click.UsageError(f"{slug!r} has no experiment yet (status: {info.status})")


_VERDICTS_HELP = "Recorded verdicts folder [default: $OPTARIUM_VERDICTS, else the checkout's verdicts/]."


def _verdicts_option(func: Any) -> Any:
    return click.option("--verdicts", type=click.Path(path_type=Path), default=None, help=_VERDICTS_HELP)(
        func
    )


def _executor_options(func: Any) -> Any:
    """The executor options: ``--executor``, Ray's ``--address``, submitit's folder/cluster/parameters."""
    options = [
        click.option(
            "--executor",
            type=click.Choice(["local", "ray", "slurm"]),
            default="local",
            show_default=True,
            help="Where units run: local processes, Ray tasks, or a Slurm job array (cluster extra).",
        ),
        click.option(
            "--address", default=None, help="Ray: an existing cluster's address (default: a local one)."
        ),
        click.option(
            "--submitit-folder",
            type=click.Path(path_type=Path),
            default=None,
            help="Slurm: submitit's folder for logs and pickles [default: OUT/.submitit].",
        ),
        click.option(
            "--cluster",
            type=click.Choice(["slurm", "local", "debug"]),
            default=None,
            help="Slurm: submitit's cluster (default: Slurm if available; local runs the array here).",
        ),
        click.option(
            "--slurm",
            "slurm_options",
            multiple=True,
            metavar="KEY=VALUE",
            help="Slurm: a submitit parameter, e.g. --slurm slurm_partition=cpu --slurm timeout_min=60.",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _parse_slurm(pairs: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.UsageError(f"--slurm: expected KEY=VALUE, got {pair!r}")
        try:
            out[key] = int(value)
        except ValueError:
            out[key] = value
    return out


def _make_executor(
    name: str, jobs: int, out: Path, address: str | None, folder: Path | None, cluster: str | None, slurm: Any
) -> Any:
    """The executor of the command line's options; a misplaced option is a one-line usage error."""
    from optarium.harness.executors import make_executor

    params = _parse_slurm(slurm)
    if name == "slurm" and folder is None:
        folder = out / ".submitit"
    try:
        return make_executor(
            name, jobs=jobs, address=address, folder=folder, cluster=cluster, parameters=params or None
        )
    except ValueError as exc:
        raise click.UsageError(f"--executor {name}: {exc}") from None


def _recorded(verdicts: Path | None) -> dict[tuple[str, str], Any]:
    """The recorded verdicts, a bad file turned into a one-line usage error."""
    from optarium.harness.recorded import load_recorded

    try:
        return load_recorded(verdicts)
    except ValueError as exc:
        raise click.UsageError(f"--verdicts: {str(exc).removeprefix('verdicts_dir: ')}") from None


def _figures_text(figures: dict[str, Any], limit: int = 5) -> str:
    parts = []
    for k, v in list(figures.items())[:limit]:
        parts.append(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}")
    return "; ".join(parts)


_STYLE = {"reproduced": "green", "not reproduced": "red", "inconclusive": "yellow", "no verdict": "dim"}


def _print_outcomes(outcomes: Sequence[Any]) -> None:
    from rich.table import Table

    table = Table(title="optarium results", show_lines=True)
    for col in ("slug", "scale", "claim", "verdict", "deciding figures", "units"):
        table.add_column(col, overflow="fold", ratio={"claim": 3, "deciding figures": 3}.get(col, 1))
    for o in outcomes:
        done = sum(u["status"] == "done" for u in o.units)
        style = _STYLE.get(o.verdict.outcome, "")
        table.add_row(
            o.slug,
            o.scale,
            o.claim,
            f"[{style}]{o.verdict.outcome}[/]",
            o.verdict.summary or _figures_text(dict(o.verdict.figures)),
            f"{done}/{len(o.units)} done" + (f"\n({o.reused} reused)" if o.reused else ""),
        )
    _console().print(table)
    for o in outcomes:
        _console().print(f"[dim]{o.slug} ({o.scale}): {o.run_dir}[/]")


def _execute(runner: Any, **kwargs: Any) -> list[Any]:
    """Run ``runner`` with a rich progress bar over units; turn Ctrl-C into a one-line message."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from optarium.harness.runner import RunInterrupted

    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=_console(),
        transient=False,
    ) as progress:
        task = progress.add_task("units", total=0)

        def on_start(slug: str, n: int) -> None:
            total = progress.tasks[0].total or 0
            progress.update(task, total=total + n, description=slug)

        def on_unit(slug: str, unit: dict[str, Any]) -> None:
            progress.update(task, advance=1, description=f"{slug}: {unit['method']} seed {unit['seed']}")
            if unit["status"] != "done":
                progress.console.print(
                    f"[yellow]{slug}: {unit['method']} seed {unit['seed']}: {unit['status']}[/]"
                )

        try:
            result = runner(on_start=on_start, on_unit=on_unit, **kwargs)
        except RunInterrupted as exc:
            progress.stop()
            click.echo(f"optarium: interrupted: kept {exc.kept} finished units in {exc.run_dir}", err=True)
            sys.stdout.flush()
            sys.stderr.flush()
            # Every finished unit is already on disk (fsync per unit). Exit without the interpreter's exit
            # handlers: concurrent.futures joins its pool's management thread there, which can block for
            # good once the workers were terminated mid-write.
            os._exit(130)
    return result if isinstance(result, list) else [result]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="optarium")
def cli() -> None:
    """optarium: the optimization methods of 51 ICML 2026 papers, each with a reproduction of its claim."""


@cli.command("list")
@click.option("--family", type=click.Choice(FAMILIES), help="Only this family.")
@click.option("--status", type=click.Choice(METHOD_STATUSES), help="Only methods with this status.")
@click.option("--contract", type=click.Choice(CONTRACTS), help="Only methods with this contract.")
@_verdicts_option
def list_cmd(family: str | None, status: str | None, contract: str | None, verdicts: Path | None) -> None:
    """List the registered methods with their recorded verdicts."""
    from rich.table import Table

    from optarium.harness.recorded import RECORD_SCALES

    recorded = _recorded(verdicts)
    rows = [
        m
        for m in all_methods()
        if (family is None or m.family == family)
        and (status is None or m.status == status)
        and (contract is None or m.contract == contract)
    ]
    table = Table(title=f"{len(rows)} methods")
    for col in ("slug", "family", "method", "status", "contract", "paper", "recorded verdicts"):
        table.add_column(col, overflow="fold")
    for m in rows:
        texts = [recorded[(m.slug, s)] for s in RECORD_SCALES if (m.slug, s) in recorded]
        verdict_text = "; ".join(f"{r.scale}: {r.outcome}" for r in texts) or "-"
        table.add_row(m.slug, m.family, m.method, m.status, m.contract, m.paper, verdict_text)
    _console().print(table)


@cli.command("run")
@click.argument("slug")
@click.option("--scale", type=click.Choice(_SCALES), default="quick", show_default=True)
@click.option(
    "--seeds", type=click.IntRange(min=1), default=None, help="Number of seeds (default: the scale's)."
)
@click.option(
    "--out", type=click.Path(path_type=Path), default=Path("runs"), show_default=True, help="Runs root."
)
@click.option("--jobs", type=click.IntRange(min=1), default=1, show_default=True, help="Processes for units.")
@click.option("--force", is_flag=True, help="Re-run units even if an identical run stored them.")
@click.option(
    "--world-size",
    type=click.IntRange(min=1),
    default=None,
    help="Run the experiment's distributed methods as this many torch.distributed (gloo) processes.",
)
@click.option(
    "--record",
    is_flag=True,
    help="Write the verdict to VERDICTS/<slug>/<scale>.json (quick or full; every unit must finish).",
)
@_verdicts_option
@_executor_options
def run_cmd(
    slug: str,
    scale: str,
    seeds: int | None,
    out: Path,
    jobs: int,
    force: bool,
    world_size: int | None,
    record: bool,
    verdicts: Path | None,
    executor: str,
    address: str | None,
    submitit_folder: Path | None,
    cluster: str | None,
    slurm_options: tuple[str, ...],
) -> None:
    """Run one experiment: its method and baselines over seeds, then the verdict (recorded with --record)."""
    _check_slug(slug)
    _writable_dir(out, "--out")
    if record:
        verdicts = _record_target(scale, verdicts)
    from optarium.harness.experiment import get_experiment
    from optarium.harness.runner import run_experiment

    if world_size is not None and not get_experiment(slug).distributed_methods:
        raise click.UsageError(f"--world-size: {slug!r} has no distributed methods")
    runner = _make_executor(executor, jobs, out, address, submitit_folder, cluster, slurm_options)
    outcomes = _execute(
        run_experiment,
        slug=slug,
        scale=scale,
        seeds=seeds,
        out=out,
        jobs=jobs,
        force=force,
        world_size=world_size,
        executor=runner,
    )
    _print_outcomes(outcomes)
    if record:
        _record(outcomes, verdicts)
    _exit_if_units_failed(outcomes)


def _record_target(scale: str, verdicts: Path | None) -> Path:
    """Check, before anything runs, that ``--record`` can succeed: not smoke, a writable verdicts folder."""
    from optarium.harness.recorded import default_verdicts_dir

    if scale == "smoke":
        raise click.UsageError("--record: smoke runs never claim a verdict; record a quick or full run")
    return _writable_dir(verdicts if verdicts is not None else default_verdicts_dir(), "--verdicts")


def _record(outcomes: Sequence[Any], verdicts: Path) -> None:
    """Record the verdict of each outcome's run; runs that cannot stand as a verdict make one usage error
    (exit 2) naming each of them, after the others were recorded."""
    from optarium.harness.recorded import record_run

    refused = []
    for o in outcomes:
        try:
            path = record_run(o.run_dir, verdicts)
        except ValueError as exc:
            text = str(exc)
            if text.startswith("verdicts_dir: "):
                raise click.UsageError(f"--verdicts: {text.removeprefix('verdicts_dir: ')}") from None
            refused.append((o.slug, text.removeprefix("run_dir: ")))
            continue
        click.echo(f"recorded {path}")
    if len(outcomes) == 1 and refused:
        raise click.UsageError(f"--record: nothing recorded: {refused[0][1]}")
    if refused:
        reasons = " | ".join(f"{slug}: {reason}" for slug, reason in refused)
        raise click.UsageError(f"--record: {len(refused)} of {len(outcomes)} runs not recorded: {reasons}")


@cli.command("suite")
@click.option("--scale", type=click.Choice(_SCALES), default="quick", show_default=True)
@click.option("--family", type=click.Choice(FAMILIES), default=None, help="Only this family.")
@click.option(
    "--seeds", type=click.IntRange(min=1), default=None, help="Number of seeds (default: each scale's)."
)
@click.option(
    "--jobs", type=click.IntRange(min=1), default=None, help="Processes for units [default: CPU count]."
)
@click.option(
    "--out", type=click.Path(path_type=Path), default=Path("runs"), show_default=True, help="Runs root."
)
@click.option("--force", is_flag=True, help="Re-run units even if an identical run stored them.")
@click.option(
    "--record",
    is_flag=True,
    help="Write each verdict to VERDICTS/<slug>/<scale>.json (quick or full; every unit must finish).",
)
@_verdicts_option
@_executor_options
def suite_cmd(
    scale: str,
    family: str | None,
    seeds: int | None,
    jobs: int | None,
    out: Path,
    force: bool,
    record: bool,
    verdicts: Path | None,
    executor: str,
    address: str | None,
    submitit_folder: Path | None,
    cluster: str | None,
    slurm_options: tuple[str, ...],
) -> None:
    """Run every registered experiment (of a family) at one scale, units in parallel over the cores."""
    _writable_dir(out, "--out")
    if record:
        verdicts = _record_target(scale, verdicts)
    from optarium.harness.experiment import registered_experiments
    from optarium.harness.runner import run_suite

    if not registered_experiments(family):
        raise click.UsageError(f"--family: no experiments registered for family {family!r} yet")
    n_jobs = jobs or os.cpu_count() or 1
    runner = _make_executor(executor, n_jobs, out, address, submitit_folder, cluster, slurm_options)
    outcomes = _execute(
        run_suite,
        scale=scale,
        family=family,
        seeds=seeds,
        out=out,
        jobs=n_jobs,
        force=force,
        executor=runner,
    )
    _print_outcomes(outcomes)
    if record:
        _record(outcomes, verdicts)
    _exit_if_units_failed(outcomes)


def _exit_if_units_failed(outcomes: Sequence[Any]) -> None:
    """Exit 1, with one line, when any unit failed (status ``error`` or ``timeout``) or an experiment finished
    no unit at all. A ``diverged`` unit is a measured result (a method that blew up), not a failure."""
    failed = []
    for o in outcomes:
        bad: dict[str, int] = {}
        for u in o.units:
            if u["status"] in ("error", "timeout"):
                bad[u["status"]] = bad.get(u["status"], 0) + 1
        done = sum(u["status"] == "done" for u in o.units)
        if bad or not done:
            kinds = ", ".join(f"{k}: {v}" for k, v in sorted(bad.items())) or "none finished"
            where = f"see {o.run_dir}/units.jsonl"
            failed.append(f"{o.slug} {sum(bad.values())} of {len(o.units)} ({kinds}; {where})")
    if failed:
        click.echo(f"optarium: units failed: {'; '.join(failed)}", err=True)
        sys.exit(1)


@cli.command("report")
@click.option(
    "--runs", type=click.Path(path_type=Path), default=Path("runs"), show_default=True, help="Runs root."
)
@click.option(
    "--out", type=click.Path(path_type=Path), default=None, help="HTML file [default: RUNS/report.html]."
)
@_verdicts_option
def report_cmd(runs: Path, out: Path | None, verdicts: Path | None) -> None:
    """Write the self-contained HTML report of the stored runs and the recorded verdicts.

    Runs whose stored verdict cannot be read (e.g. a file cut short by a kill) are left out, listed in the
    report and named in a warning; the command still exits 0.
    """
    if not runs.is_dir():
        raise click.UsageError(f"--runs: {runs} is not a folder of stored runs (`optarium run` makes one)")
    out = out if out is not None else runs / "report.html"
    _writable_dir(out.parent, "--out")
    from optarium.harness.report import unreadable_runs, write_report

    _recorded(verdicts)  # a bad verdict file is a one-line error, not a traceback
    path = write_report(runs, out, verdicts_dir=verdicts)
    click.echo(f"wrote {path}")
    bad = unreadable_runs(runs)
    if bad:
        click.echo(
            f"optarium: warning: {len(bad)} stored run(s) could not be read and are left out: {bad[0]}"
            + (f" (and {len(bad) - 1} more, listed in the report)" if len(bad) > 1 else ""),
            err=True,
        )


@cli.command("docs")
@click.option("--out", type=click.Path(path_type=Path), default=Path("docs/methods.md"), show_default=True)
@click.option(
    "--check",
    is_flag=True,
    help="Exit 1 if the file differs from the registry and recorded verdicts instead of writing.",
)
@_verdicts_option
def docs_cmd(out: Path, check: bool, verdicts: Path | None) -> None:
    """Generate docs/methods.md from the registry and the recorded verdicts."""
    from optarium.harness.methods_doc import render_methods_md, write_methods_md

    _recorded(verdicts)  # a bad verdict file is a one-line error, not a traceback
    if check:
        if not out.is_file():
            raise click.UsageError(
                f"--out: {out} does not exist; run `optarium docs --check` in the repository or pass --out"
            )
        current = out.read_text(encoding="utf-8")
        if current != render_methods_md(verdicts):
            click.echo(f"optarium: {out} is stale; run `optarium docs`", err=True)
            sys.exit(1)
        click.echo(f"{out} is up to date")
        return
    _writable_dir(out.parent, "--out")
    click.echo(f"wrote {write_methods_md(out, verdicts)}")


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: run the CLI with one-line errors (exit 2) and a clean Ctrl-C (exit 130)."""
    try:
        code = cli.main(
            args=list(argv) if argv is not None else None, prog_name="optarium", standalone_mode=False
        )
    except click.exceptions.UsageError as exc:
        click.echo(f"optarium: error: {exc.format_message()}", err=True)
        sys.exit(2)
    except click.exceptions.Abort:
        click.echo("optarium: interrupted", err=True)
        sys.exit(130)
    except KeyboardInterrupt:
        click.echo("optarium: interrupted", err=True)
        sys.exit(130)
    except click.exceptions.ClickException as exc:
        click.echo(f"optarium: error: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
