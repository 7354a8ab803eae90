"""``myutils-profile history``: keep every analysed run, see trends and change points, gate CI on a run's own past.

``add`` stores reports (``analyze --record`` does it for the report it writes), ``list`` and
``show`` read runs, ``trend`` writes one metric's offline page, ``overview`` the team page, and
``gate`` judges a run against the last comparable runs. The store is ``--store``, else
``$MYUTILS_HISTORY_STORE``, else a SQLite file in the user's data folder (``history.location``).
SQLAlchemy, Alembic and plotly are imported inside the commands: ``--help`` stays light. The commands
that only read (``list``, ``show``, ``trend``, ``overview``, ``gate``) read a SQLite store at the newest
revision without SQLAlchemy (``history.sqlite_reads``); ``add`` and a store to create or upgrade use it.

Exit codes: 0 done; 2 bad input (``gate``: a regression, see there); ``gate`` alone uses 3 for
"could not judge" (too few comparable runs, bad input, no store), so that a CI job can tell a
regression from a broken setup.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer
from typer.core import TyperCommand

from my_utils.core.cli.guard import exit_on_error
from my_utils.profiling.cli._app import app

if TYPE_CHECKING:
    from my_utils.profiling.history.reads import StoreReads
    from my_utils.profiling.history.store import RunStore
    from my_utils.profiling.model.report import AnalysisReport

F = TypeVar("F", bound=Callable[..., Any])
EXIT_REGRESSION = 2
EXIT_NOT_JUDGED = 3

history_app = typer.Typer(name="history", no_args_is_help=True, pretty_exceptions_enable=False,
                          add_completion=False,
                          help="Keep every analysed run; trends, change points and a CI gate against the run's past.")
app.add_typer(history_app, name="history")

_STORE_HELP = ("The run store: a SQLite file, or a postgresql://USER@HOST:PORT/DB URL (default: "
               "$MYUTILS_HISTORY_STORE, else history.sqlite in the user's data folder).")


def _store_option() -> Any:
    return typer.Option(None, "--store", help=_STORE_HELP)


def open_store(location: str | None) -> RunStore:
    """The store at ``location`` (or the environment's / the default), to write to."""
    from my_utils.profiling.history.store import RunStore

    return RunStore(location)


def open_for_reading(location: str | None) -> StoreReads:
    """The store at ``location`` to read from: a SQLite store at the newest revision without SQLAlchemy."""
    from my_utils.profiling.history.sqlite_reads import open_reads

    return open_reads(location)


def _reports(paths: Sequence[Path]) -> list[tuple[Path, AnalysisReport]]:
    """Every report named (a folder: each ``analysis_report.json`` below it), oldest file first, all read first."""
    from my_utils.core.errors import InputError
    from my_utils.profiling.model.report import REPORT_FILE_NAME, AnalysisReport

    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            found = sorted(p.rglob(REPORT_FILE_NAME))
            if not found:
                raise InputError(str(p), None, f"a folder holding at least one {REPORT_FILE_NAME}")
            files.extend(found)
        elif p.is_file():
            files.append(p)
        else:
            raise InputError(str(p), None, f"an existing {REPORT_FILE_NAME} or a folder of them")
    files = sorted(dict.fromkeys(files), key=lambda f: (f.stat().st_mtime, str(f)))
    return [(f, AnalysisReport.load(f)) for f in files]


def _given(workload: str | None, commit: str | None, branch: str | None, config: Path | None,
           config_hash: str | None, host: str | None) -> dict[str, Any]:
    from my_utils.core.errors import UsageError
    from my_utils.profiling.history.context import config_hash_of

    if config is not None and config_hash is not None:
        raise UsageError("give --config FILE or --config-hash HASH, not both")
    return {"workload": workload, "git_commit": commit, "git_branch": branch, "host": host,
            "config_hash": config_hash_of(config) if config is not None else config_hash}


def record(store: RunStore, path: Path, report: AnalysisReport, given: dict[str, Any]) -> str:
    """Store one report; the line that says what happened."""
    from my_utils.profiling.history.context import context_of

    ctx = context_of(report, given, file_time=path.stat().st_mtime)
    result = store.add(report, ctx, source=str(path.resolve()))
    if not result.added:
        return f"already stored as run {result.run_id}: {path}"
    return (f"added run {result.run_id}: {ctx.series.describe()}, commit {ctx.git_commit or 'unknown'}, "
            f"{result.metrics} metrics, from {path}")


def record_report(path: Path, store: str | None) -> str:
    """``analyze --record``: store the report just written at ``path``; the line that says so."""
    from my_utils.profiling.model.report import AnalysisReport

    report = AnalysisReport.load(path)
    with open_store(store) as s:
        return record(s, path, report, {})


@history_app.command("add")
@exit_on_error
def add(
    paths: list[Path] = typer.Argument(..., help="analysis_report.json files, or folders holding them."),
    store: str | None = _store_option(),
    workload: str | None = typer.Option(None, "--workload", help="The workload's name (default: the report's)."),
    commit: str | None = typer.Option(None, "--commit", help="Git commit (default: the CI's variables, else git)."),
    branch: str | None = typer.Option(None, "--branch", help="Git branch (default: the CI's variables, else git)."),
    config: Path | None = typer.Option(None, "--config", help="The run's config file: its sha256 is the config hash."),
    config_hash: str | None = typer.Option(None, "--config-hash", help="The config hash, when you have one."),
    host: str | None = typer.Option(None, "--host", help="The host (default: the report's)."),
) -> None:
    """Store analysed runs; a report stored before is found, not added twice. Every report is read before any is stored."""
    given = _given(workload, commit, branch, config, config_hash, host)
    reports = _reports(paths)
    with open_store(store) as s:
        for path, report in reports:
            typer.echo(record(s, path, report, given))


@history_app.command("list")
@exit_on_error
def list_runs(
    store: str | None = _store_option(),
    workload: str | None = typer.Option(None, "--workload", help="Only this workload."),
    hardware: str | None = typer.Option(None, "--hardware", help="Only hardware whose name holds this (e.g. H100)."),
    last: int = typer.Option(20, "--last", min=1, help="The newest N runs."),
) -> None:
    """List stored runs, oldest of the newest N first."""
    from my_utils.profiling.history.text import run_line

    with open_for_reading(store) as s:
        runs = s.runs(workload, hardware, last=last)
        typer.echo(f"{len(runs)} run(s) in {s.where}")
    for run in runs:
        typer.echo(run_line(run))


@history_app.command("show")
@exit_on_error
def show(
    run_id: int = typer.Argument(..., help="The run's id (`history list`)."),
    store: str | None = _store_option(),
) -> None:
    """Show one run: its context and every metric stored."""
    from my_utils.profiling.history.text import run_detail

    with open_for_reading(store) as s:
        run = s.run(run_id)
        values = s.facts_of(run_id)
    for line in run_detail(run):
        typer.echo(line)
    typer.echo(f"  metrics ({len(values)}):")
    for v in values:
        typer.echo(f"    {v.name} = {v.value:.6g} {v.unit}".rstrip())


def _one_blas_thread() -> None:
    """Let numpy start one BLAS thread in this command, unless the user chose a number.

    The change points sort and sum (no BLAS work), but OpenBLAS starts a thread per core at numpy's
    import, and their start-up spinning cost about as much CPU as the import itself. Only this
    command's process is affected, and only before numpy is imported.
    """
    if "numpy" not in sys.modules:
        for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(name, "1")


def _detect(alpha: float, min_size: int, min_change: float) -> Any:
    from my_utils.core.errors import UsageError
    from my_utils.profiling.history.trend_model import DetectSettings

    if not 0 < alpha < 1 or min_size < 2 or min_change < 0:
        raise UsageError("--alpha takes a number in (0, 1), --min-size an integer >= 2, --min-change a number >= 0")
    return DetectSettings(alpha, min_size, min_change)


@history_app.command("trend")
@exit_on_error
def trend(
    metric: str = typer.Argument(..., help="A metric as stored, e.g. step_time.median, gpu.idle, mfu "
                                           "(`history show RUN` lists a run's)."),
    store: str | None = _store_option(),
    workload: str | None = typer.Option(None, "--workload", help="Only this workload."),
    hardware: str | None = typer.Option(None, "--hardware", help="Only hardware whose name holds this (e.g. H100)."),
    world_size: int | None = typer.Option(None, "--world-size", help="Only this world size."),
    last: int | None = typer.Option(None, "--last", min=2, help="The newest N runs of each series (default: all)."),
    output: Path = typer.Option(Path("history_trend.html"), "--output", help="The offline HTML page to write."),
    alpha: float = typer.Option(1e-3, "--alpha", help="Change points: the adjusted p-value a change must be under."),
    min_size: int = typer.Option(5, "--min-size", help="Change points: fewest runs on each side of a change."),
    min_change: float = typer.Option(2.0, "--min-change", help="Change points: smallest move of the level, in %."),
) -> None:
    """Write METRIC's trend page (one chart per series, change points marked) and print each change."""
    _one_blas_thread()
    from my_utils.core.errors import InputError
    from my_utils.profiling.history.pages import render_page, write_page
    from my_utils.profiling.history.text import trend_lines
    from my_utils.profiling.history.trend_model import NOT_COMPARED, trends

    settings = _detect(alpha, min_size, min_change)
    with open_for_reading(store) as s:
        found = trends(s, metric, workload, hardware, world_size, last, settings)
        where = s.where
        if not found:
            known = sorted(s.metric_names())
            hint = ", ".join(known[:12]) + (", ..." if len(known) > 12 else "") if known else "none yet"
            raise InputError(where, f"metric {metric!r}", f"a metric stored for runs matching the filters "
                                                          f"(stored metrics: {hint})")
    page = render_page(f"{metric}: trend", f"store {where}", found)
    write_page(page, output)
    for t in found:
        for line in trend_lines(t):
            typer.echo(line)
    if len(found) > 1:
        typer.echo(f"note: {NOT_COMPARED}")
    typer.echo(f"wrote {output}")


@history_app.command("overview")
@exit_on_error
def overview(
    store: str | None = _store_option(),
    output: Path = typer.Option(Path("history.html"), "--output", help="The offline HTML page to write."),
    last: int | None = typer.Option(500, "--last", min=2, help="The newest N runs of each series."),
) -> None:
    """Write the team page: every workload's key metrics over time, regressions still in force on top."""
    _one_blas_thread()
    from my_utils.profiling.history.pages import MAX_OVERVIEW_CHARTS, render_page, write_page
    from my_utils.profiling.history.trend_model import overview as build

    with open_for_reading(store) as s:
        found = build(s, last=last)
        where = s.where
    write_page(render_page("Run history: every series", f"store {where}", found, overview=True,
                           max_charts=MAX_OVERVIEW_CHARTS), output)
    regressed = [t for t in found if t.regressed]
    typer.echo(f"{len(found)} trend(s), {len(regressed)} with a regression still in force")
    typer.echo(f"wrote {output}")


class _GateCommand(TyperCommand):
    """``history gate``: a wrong option exits 3 (could not judge), never 2 (which means a regression here)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except Exception as exc:  # typer's own (vendored) click raises its UsageError: exit code 2
            if getattr(exc, "exit_code", None) == 2:
                exc.exit_code = EXIT_NOT_JUDGED  # type: ignore[attr-defined]
            raise


def _not_judged_on_error(func: F) -> F:
    """Any failure of the gate is one line on stderr and exit 3: exit 2 is kept for a regression."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        guarded = exit_on_error(func)
        try:
            return guarded(*args, **kwargs)
        except typer.Exit as exc:
            if exc.exit_code == 2 and not getattr(exc, "regression", False):
                raise typer.Exit(EXIT_NOT_JUDGED) from None
            raise

    return wrapper  # type: ignore[return-value]


class _Regression(typer.Exit):
    regression = True


@history_app.command("gate", cls=_GateCommand)
@_not_judged_on_error
def gate(
    report: Path | None = typer.Argument(None, help="The new run's analysis_report.json (or its folder); default: "
                                                    "the newest stored run (of --workload/--hardware)."),
    store: str | None = _store_option(),
    run_id: int | None = typer.Option(None, "--run", help="Judge this stored run instead."),
    workload: str | None = typer.Option(None, "--workload", help="The workload (default: the run's)."),
    hardware: str | None = typer.Option(None, "--hardware", help="With no REPORT/--run: the newest run on hardware "
                                                                 "whose name holds this."),
    metric: list[str] = typer.Option([], "--metric", help="A metric to judge (repeatable; default: step_time.median, "
                                                          "gpu.idle, comm.exposed, mfu, nsys.iteration_time, those "
                                                          "the run measured)."),
    last: int = typer.Option(30, "--last", min=2, help="Compare with the last N comparable runs."),
    min_runs: int = typer.Option(5, "--min-runs", min=2, help="Fewest comparable runs to judge (else exit 3)."),
    max_p: float = typer.Option(0.01, "--max-p", help="The p-value a regression must be under (shared by the "
                                                      "metrics judged)."),
    min_pct: float = typer.Option(3.0, "--min-pct", help="The smallest change, in % of the baseline's median, that "
                                                         "fails."),
    commit: str | None = typer.Option(None, "--commit", help="REPORT's commit (default: the CI's variables, else git)."),
) -> None:
    """Judge a run against the last N comparable runs (same workload, hardware, world size and config).

    Exit 0: no metric regressed. Exit 2: a regression; stdout holds exactly one Markdown line naming
    the metric, the change and its significance. Exit 3: not judged (fewer than --min-runs comparable
    runs, bad input, no store); one line on stderr says why.
    """
    _one_blas_thread()
    from my_utils.core.errors import UsageError
    from my_utils.profiling.history.gate import GateSettings
    from my_utils.profiling.history.judge import judge_run
    from my_utils.profiling.history.text import gate_lines, gate_markdown

    if not 0 < max_p < 1 or min_pct < 0 or min_runs > last:
        raise UsageError("--max-p takes a number in (0, 1), --min-pct a number >= 0, and --min-runs at most --last")
    if report is not None and run_id is not None:
        raise UsageError("give REPORT or --run, not both")
    settings = GateSettings(last, min_runs, max_p, min_pct)
    loaded = _reports([report])[-1] if report is not None else None
    with open_for_reading(store) as s:
        result = judge_run(s, settings, loaded, run_id, workload, hardware, metric, {"git_commit": commit})
    if result.failed:
        typer.echo(gate_markdown(result))
        raise _Regression(EXIT_REGRESSION)
    lines = gate_lines(result)
    if not result.judged:
        typer.echo(f"not judged: {result.run_label} ({result.series.describe()}): "
                   + "; ".join(line.removeprefix("not judged: ") for line in lines), err=True)
        raise typer.Exit(EXIT_NOT_JUDGED)
    for line in lines:
        typer.echo(line)

