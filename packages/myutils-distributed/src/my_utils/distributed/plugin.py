"""The built-in plugin of myutils-distributed, registered through the ``my_utils.plugins`` entry point.

Kept import-light: the ``stragglers`` command is defined inside the hook (typer needs its
signature) and imports the analysis only when it runs, so building the CLI (``myutils
--help``, ``plugins list``) loads nothing of this distribution but this module.
"""

# No ``from __future__ import annotations`` here: typer reads the command's annotations, and
# they name things imported inside the hook, which only eager evaluation can see.
from typing import TYPE_CHECKING

from my_utils.core.hookspecs import hookimpl

if TYPE_CHECKING:
    import typer


@hookimpl
def myutils_cli(app: "typer.Typer") -> None:
    """Add ``myutils stragglers PATH...`` (who is slow across ranks: profile CSVs, Kineto traces, nsys exports)."""
    from typing import Annotated

    import typer

    from my_utils.core.cli.guard import exit_on_error

    @exit_on_error
    def stragglers(
        paths: Annotated[list[str], typer.Argument(
            help="a folder of profile_rank_<rank>.csv files, or Kineto traces and nsys SQLite exports (files, "
            "folders, globs; read through myutils-profiling)", metavar="PATH...")],
        as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
        persistent_fraction: Annotated[float, typer.Option(
            help="a straggler is late in at least this fraction of the compared steps")] = 0.5,
        min_slowdown: Annotated[float, typer.Option(
            help="... late meaning at least this many times the other ranks' median in that step")] = 1.2,
        min_excess_ms: Annotated[float, typer.Option(
            help="an outlying step is at least this many ms above the other ranks' median (and 1.5x it)")] = 20.0,
        executor: Annotated[str | None, typer.Option(
            "--executor", help="'serial' (default: this process), 'process' (parse the ranks in a process pool), "
            "'dask' (joins $DASK_SCHEDULER_ADDRESS, else starts a local cluster) or a Dask scheduler address such "
            "as tcp://host:8786 (its workers must see the rank files at the same paths; the [dask] extra)")
        ] = None,
        workers: Annotated[int | None, typer.Option(
            "--workers", min=1, help="processes for --executor process, or workers of a local Dask cluster "
            "(default: one per CPU)")] = None,
    ) -> None:
        """Who is slow across ranks: per section (MyTimer CSVs) or per step and collective (Kineto, nsys), by host first."""
        from my_utils.core.safe_io import strict_json
        from my_utils.distributed.stragglers.model import StragglerReport
        from my_utils.distributed.stragglers.render import render_text
        from my_utils.distributed.stragglers.run import stragglers_of
        from my_utils.distributed.stragglers.timings_render import render_timings

        report = stragglers_of(paths, persistent_fraction=persistent_fraction, min_slowdown=min_slowdown,
                               min_excess_ms=min_excess_ms, executor=executor, max_workers=workers)
        if as_json:  # strict: a time that overflowed is null, never a bare Infinity/NaN other tools refuse
            typer.echo(strict_json(report.to_dict(), indent=2))
        else:
            typer.echo(render_text(report) if isinstance(report, StragglerReport) else render_timings(report))

    app.command("stragglers")(stragglers)
