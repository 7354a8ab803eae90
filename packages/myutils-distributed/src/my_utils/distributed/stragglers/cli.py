"""``myutils stragglers LOG_DIR``: added to the CLI by this distribution's ``myutils_cli`` hook."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from my_utils.core.cli.guard import exit_on_error

__all__ = ["stragglers"]


@exit_on_error
def stragglers(
    log_dir: Annotated[Path, typer.Argument(help="folder with profile_rank_<rank>.csv files")],
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
    persistent_fraction: Annotated[float, typer.Option(
        help="a straggler is slowest in at least this fraction of steps")] = 0.5,
    min_slowdown: Annotated[float, typer.Option(
        help="... and on average at least this many times the other ranks' median")] = 1.2,
) -> None:
    """Per section across ranks: min / median / max with their ranks, slowdown, persistent stragglers."""
    from my_utils.distributed.stragglers.analysis import analyze_stragglers
    from my_utils.distributed.stragglers.render import render_text

    report = analyze_stragglers(log_dir, persistent_fraction=persistent_fraction, min_slowdown=min_slowdown)
    typer.echo(json.dumps(report.to_dict(), indent=2) if as_json else render_text(report))
