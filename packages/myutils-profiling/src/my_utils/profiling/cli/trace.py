"""``myutils-profile trace``: metric events (+ torch traces) of many ranks → one merged Chrome/Perfetto trace.

Exit 0 when every input was read and every part written; 2 for bad input (nothing is
written then, and the temporary files are gone). Warnings (missing clock records, clock
uncertainty above the gaps it would compare, what ``--overflow trim`` dropped) go to stderr
and into ``otherData.warnings``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from my_utils.core.cli.guard import exit_on_error
from my_utils.profiling.cli._app import app

if TYPE_CHECKING:
    from my_utils.core.events import MetricEvent


@app.command("trace")
@exit_on_error
def trace(
    events: Path | None = typer.Option(None, "--events", help="metrics_events.jsonl (or its folder), or "
                                       "profile_rank_<r>.csv files (a file or a folder) whose CLOCK_SYNC rows carry "
                                       "the measured offsets; optional when --torch-trace is given."),
    output: Path = typer.Option(..., "--output", help="Merged trace: T.json or T.json.gz."),
    auto_align_ranks: bool = typer.Option(False, "--auto-align-ranks", help="Put every rank on the reference "
                                          "rank's clock with its measured offset (clock_sync records); never by "
                                          "heuristics, so a consistently late rank stays late."),
    reference_rank: int = typer.Option(0, "--reference-rank", help="The rank whose clock the timeline uses."),
    torch_trace: list[Path] = typer.Option([], "--torch-trace", help="A torch.profiler trace of the same run, or a "
                                           "folder of them (repeatable; default: the traces the events name, found in "
                                           "the events' folder or below it; a trace elsewhere is merged only when "
                                           "named here)."),
    max_mb: float | None = typer.Option(None, "--max-mb", help="Keep every output file under this many MB of "
                                        "JSON, so that it opens in a viewer (they fail near 1 GB); see --overflow."),
    overflow: str = typer.Option("split", "--overflow", help="What --max-mb does with a larger trace: 'split' "
                                 "writes T.part1.json, T.part2.json, ... (contiguous time ranges, each a complete "
                                 "trace); 'trim' writes one file, dropping flow arrows first, then the shortest "
                                 "torch events, never MyTimer regions (otherData.trimmed counts what went)."),
    executor: str | None = typer.Option(None, "--executor", help="Where ranks and torch traces are laid out: "
                                        "'serial', 'process' (default for several), 'dask' (joins "
                                        "$DASK_SCHEDULER_ADDRESS, else starts a local cluster) or a Dask scheduler "
                                        "address such as tcp://host:8786 (its workers must see $TMPDIR)."),
    workers: int | None = typer.Option(None, "--workers", help="Processes (or Dask workers of a local cluster) "
                                       "to use; default: one per CPU."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar on stderr."),
    full_paths: bool = typer.Option(False, "--full-paths", help="Write the inputs' paths into otherData as given "
                                    "(default: relative to the working folder, or the file name alone for a file "
                                    "outside it, so that a shared trace shows no one's folders)."),
) -> None:
    """Merge every rank's MyTimer regions and torch traces into one timeline, one process per rank.

    Streams: each rank's regions and each torch trace are laid out by their own task (the
    local-process / Dask path of ingest) and merged from sorted temporary files, so the
    memory of this process does not grow with the rank count.
    """
    from my_utils.core.lifecycle import sigterm_exits

    with sigterm_exits():  # SIGTERM cleans up as Ctrl-C does: no temporary output, no scratch folder left
        _trace(events, output, auto_align_ranks, reference_rank, torch_trace, max_mb, overflow, executor, workers,
               quiet, full_paths)


def _trace(events: Path | None, output: Path, auto_align_ranks: bool, reference_rank: int, torch_trace: list[Path],
           max_mb: float | None, overflow: str, executor: str | None, workers: int | None, quiet: bool,
           full_paths: bool = False) -> None:
    from my_utils.core.errors import InputError, UsageError
    from my_utils.core.progress import progress
    from my_utils.core.safe_io import check_regular
    from my_utils.core.scratch import sweep_temp_files
    from my_utils.profiling.trace.stream import planned
    from my_utils.profiling.trace.write import OVERFLOW_MODES, output_names, write_output

    if max_mb is not None and max_mb <= 0:
        raise UsageError(f"--max-mb {max_mb:g}: expected a positive size in MB")
    if overflow not in OVERFLOW_MODES:
        raise UsageError(f"--overflow {overflow}: expected one of {', '.join(OVERFLOW_MODES)}")
    if workers is not None and workers <= 0:
        raise UsageError(f"--workers {workers}: expected a positive number")
    if not output.name.endswith((".json", ".json.gz")):
        raise UsageError(f"--output {output}: expected a .json or .json.gz file name")
    # what a killed run of this output left (its temporaries; its scratch folder goes when the scratch is made)
    sweep_temp_files(output.parent, output_names(output))
    if events is None and not torch_trace:
        raise UsageError("give --events (MyTimer regions, clock records) or --torch-trace (or both)")
    source, csvs = _resolve_events(events) if events is not None else (None, [])
    from my_utils.core.safe_io import refuse_overwriting_inputs
    from my_utils.profiling.cli.analyze import expand_traces

    # a folder gives its traces, as `analyze --trace` reads one
    torch_trace = [f for t in torch_trace for f in (expand_traces([t]) if t.is_dir() else [t])]

    # before any work: the output (or a part of it) must never replace what it is made from
    inputs = [p for p in (source, *csvs, *torch_trace) if p is not None and p.is_file()]
    parts = [output, output.with_name(output.name.replace(".json", ".part1.json", 1))]
    refuse_overwriting_inputs(parts, inputs, what="--output")
    names = output_names(output)
    clash = next((p for p in inputs if p.parent.resolve() == output.parent.resolve() and names.fullmatch(p.name)), None)
    if clash is not None:  # a split write would remove or replace it as one of this output's parts
        raise UsageError(f"--output {output}: the input {clash} is named like one of this output's files; "
                         "choose another --output name")
    for t in torch_trace:
        check_regular(t)  # a FIFO or a device would block the reader (or never end)
        if not t.is_file():
            raise InputError(str(t), None, "an existing torch.profiler trace (.json or .json.gz)")
    # without --torch-trace: the traces the events name, found in their folder (in the same pass)
    beside = source.parent if source is not None and not torch_trace else None
    # absolute: a cluster's workers resolve a relative path against their own folder; the CSVs are read there
    with progress(3, "trace", enabled=not quiet) as bar, \
            planned(_jsonl_events(source), [str(p.absolute()) for p in torch_trace], reference_rank=reference_rank,
                    auto_align=auto_align_ranks, sources=[str(p) for p in ([source] if source else csvs)],
                    executor=executor, max_workers=workers, traces_beside=beside,
                    csvs=[str(p.absolute()) for p in csvs], full_paths=full_paths) as plan:
        bar.advance()
        if not plan.events:
            raise InputError(str(events or torch_trace[0]), None, "MyTimer regions (source 'mytimer', kind "
                             "'duration') or torch trace events to put on the timeline; found none")
        for warning in plan.warnings:
            typer.echo(f"warning: {warning}", err=True)
        bar.advance()
        paths, written_warnings = write_output(plan, output, max_mb, overflow)
        bar.advance()
    for warning in written_warnings:
        typer.echo(f"warning: {warning}", err=True)
    for p in paths:
        typer.echo(f"wrote {p}")


def _resolve_events(path: Path) -> tuple[Path | None, list[Path]]:
    """(metrics_events.jsonl, []) or (None, profile CSVs)."""
    from my_utils.core.errors import InputError
    from my_utils.core.events import EVENTS_FILE_NAME
    from my_utils.core.safe_io import check_regular

    if path.is_dir():
        check_regular(path / EVENTS_FILE_NAME)  # a FIFO of that name would block the reader forever
        if (path / EVENTS_FILE_NAME).is_file():
            return path / EVENTS_FILE_NAME, []
        csvs = sorted(path.glob("profile_rank_*.csv"))
        for csv in csvs:
            check_regular(csv)
        if csvs:
            return None, csvs
        raise InputError(str(path), None, f"a folder holding {EVENTS_FILE_NAME} or profile_rank_<r>.csv files")
    check_regular(path)
    if not path.is_file():
        raise InputError(str(path), None, f"an existing {EVENTS_FILE_NAME} or profile CSV")
    if path.suffix == ".csv":
        return None, [path]
    return path, []


def _jsonl_events(path: Path | None) -> Iterator[MetricEvent]:
    from my_utils.core.errors import InputError, MyUtilsError
    from my_utils.core.events import iter_events

    if path is None:
        return
    n = 0
    try:
        for event in iter_events(path):
            n += 1
            yield event
    except (OverflowError, RecursionError, ValueError) as exc:
        # the reader's own checks name the line; a number or a nesting it cannot hold at all still is
        # bad input, not a crash
        if isinstance(exc, MyUtilsError):
            raise
        raise InputError(path, f"event {n + 1}", f"metric events with numbers and nesting a JSON reader can "
                                                   f"hold ({type(exc).__name__}: {exc})") from None
