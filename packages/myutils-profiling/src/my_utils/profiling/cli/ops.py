"""``myutils-profile ops``: the operation model of Kineto traces as CSV files and one Excel workbook, or a replay.

``ops TRACE... --output-dir D`` writes ``op_categories.csv``, ``op_operators.csv``, ``op_shapes.csv``,
``op_coverage.csv``, ``op_memory.csv``, ``memory_peaks.csv`` and ``ops.xlsx`` (a sheet per table;
``--no-xlsx`` without openpyxl). ``--replay OP`` (or ``--replay top``) writes ``replay.py`` instead:
a standalone script re-running the ``--top`` operations with random data. Exit 2 on bad input.
"""

from __future__ import annotations

from pathlib import Path

import typer

from my_utils.core.cli.guard import exit_on_error
from my_utils.profiling.cli._app import app


@app.command("ops")
@exit_on_error
def ops(
    trace: list[Path] = typer.Argument(..., help="Kineto traces (.json/.json.gz), or folders of rank traces."),
    output_dir: Path = typer.Option(..., "--output-dir", help="Folder for the CSV files, the workbook or the script."),
    xlsx: bool = typer.Option(True, "--xlsx/--no-xlsx", help="Also write ops.xlsx, one sheet per table (needs "
                              "openpyxl: pip install 'myutils-profiling\\[excel]')."),
    replay: str | None = typer.Option(None, "--replay", help="Write replay.py re-running this operator "
                                      "(aten:: optional), or 'top' for the operations with the most GPU time, "
                                      "instead of the tables; one trace file."),
    top: int = typer.Option(1, "--top", help="Operations (distinct argument sets) the replay script runs."),
    executor: str = typer.Option("process", "--executor", help="'serial' or 'process' (one worker per rank)."),
) -> None:
    """Operations against the roofline: GPU time by category, operator and argument shapes, memory per operator."""
    from my_utils.core.atomic import atomic_write
    from my_utils.core.errors import UsageError

    if top < 1:
        raise UsageError(f"--top {top}: expected a positive number")
    if replay is not None:
        from my_utils.profiling.kineto.ops.replay import replay_from_trace

        if len(trace) != 1 or trace[0].is_dir():
            raise UsageError("--replay reads one trace file; name one file")
        script = replay_from_trace(trace[0], None if replay == "top" else replay, top)
        out = output_dir / "replay.py"
        with atomic_write(out) as fh:
            fh.write(script)
        typer.echo(f"wrote {out}")
        return
    from my_utils.profiling.kineto.ops.frames import op_frames
    from my_utils.profiling.reports.table_export import write_tables

    frames = op_frames(trace, executor=executor)
    for path in write_tables(frames, output_dir, xlsx=xlsx, workbook="ops"):
        typer.echo(f"wrote {path}")
