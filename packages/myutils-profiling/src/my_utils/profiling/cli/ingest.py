"""``myutils-profile ingest``: read every input a collector config names into metric events."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer

from my_utils.core.cli.guard import exit_on_error
from my_utils.profiling.cli._app import app


@app.command("ingest")
@exit_on_error
def ingest(
    config: Path = typer.Option(..., "--config", help="Collector config (JSON or YAML) naming providers and inputs."),
    analyze: bool = typer.Option(
        False, "--analyze", help="Also analyse the events: writes analysis_report.json (and .md/.html) beside them."),
    workload: str | None = typer.Option(None, "--workload", help="Thresholds profile for --analyze: pretrain, "
                                                                 "finetune or inference (default: the config's "
                                                                 "analysis.workload, else pretrain)."),
    output_dir: Path | None = typer.Option(None, "--output-dir", help="Overrides the config's output_dir."),
    ignore_provider_errors: bool = typer.Option(
        False, "--ignore-provider-errors",
        help="Skip providers that fail (each said once on stderr, all named in the summary) instead of failing.",
    ),
    executor: str | None = typer.Option(None, "--executor", help="Where rank files (profile CSVs, torch traces) "
                                        "are read: 'serial', 'process', 'dask' (joins $DASK_SCHEDULER_ADDRESS, else "
                                        "starts a local cluster) or a Dask scheduler address such as tcp://host:8786 "
                                        "(its workers must see the inputs at the same paths); default: a provider's "
                                        "executor option, else processes for large inputs."),
    workers: int | None = typer.Option(None, "--workers", help="Processes (or Dask workers of a local cluster) "
                                       "to use; default: one per CPU."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar on stderr."),
) -> None:
    """Read every input named in the config and write <output_dir>/metrics_events.jsonl.

    Exit 0 only when every provider was read (or skipped on request with
    --ignore-provider-errors); 2 for bad input (a malformed config or file); 1 when a
    provider fails for another reason. Nothing is written when the command fails.
    With --analyze the reports go beside the events (analysis_report.json, .md, .html).
    Events are written as each rank file is read (provider order, then file order), so
    memory does not grow with the number of ranks; --analyze reads them back from the file.
    """
    from my_utils.core.errors import ProviderError, UsageError
    from my_utils.core.lifecycle import sigterm_exits
    from my_utils.profiling.cli._outputs import exits_on_out_of_memory
    from my_utils.profiling.cli.analyze import WORKLOADS

    if analyze and workload is not None and workload not in WORKLOADS:
        # checked before any work so that a failing command leaves nothing behind
        raise UsageError(f"--workload {workload!r}: expected one of {', '.join(WORKLOADS)}")
    if workers is not None and workers <= 0:
        raise UsageError(f"--workers {workers}: expected a positive number")
    try:
        with exits_on_out_of_memory("ingest"), _warnings_to_stderr(), sigterm_exits():
            for line in _ingest(config, output_dir, ignore_provider_errors, quiet, analyze, workload, executor,
                                workers):
                typer.echo(line)
    except ProviderError as exc:  # not bad input: a bug or a library failure (exit 1, one line)
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None


def _ingest(config: Path, output_dir: Path | None, ignore_provider_errors: bool, quiet: bool, analyze: bool,
            workload: str | None, executor: str | None, workers: int | None) -> list[str]:
    """Stream every provider's events into the staged events file, then (``analyze``) analyse that file; all the
    outputs land together. Returns the lines to say."""
    from my_utils.core.errors import ConfigError
    from my_utils.core.progress import progress
    from my_utils.profiling.cli._outputs import StagedOutputs
    from my_utils.profiling.cli.analyze import check_workload, stage_reports
    from my_utils.profiling.collector import MetricsCollector
    from my_utils.profiling.examples.lookup import resolve_config_path

    config, shipped = resolve_config_path(config)  # the seed's example path, or an example's bare name
    if shipped:
        typer.echo(f"note: reading the example shipped with myutils-profiling: {config}", err=True)
    overrides = {"output_dir": output_dir} if output_dir is not None else {}
    collector = MetricsCollector.from_config(config, ignore_provider_errors=ignore_provider_errors, **overrides)
    if not collector.providers and not collector.failures:
        raise ConfigError(config, "providers", "at least one enabled provider entry, e.g. "
                                               '{"provider": "mytimer", "input": "profile_rank_0.csv"}; '
                                               "an ingest that reads nothing would write an empty events file")
    settings = collector.analysis_settings
    chosen = workload or (settings.workload if settings is not None else "pretrain")
    if analyze:
        check_workload(chosen)
    # every file a provider reads, as the config names it (a link to it counts: refused by inode)
    inputs = [config, *(p for p in (*collector.inputs, *(getattr(x, "path", None) for x in collector.providers))
                        if isinstance(p, Path) and p.is_file())]
    outputs = StagedOutputs(inputs)
    outputs.check([collector.events_path])
    read: list[tuple[Path, int, list[str]]] = []  # (the staged events file, events, sources)

    def stream(tmp: Path) -> None:
        with progress(len(collector.providers), "ingest", enabled=not quiet) as bar:
            read.append((tmp, *collector.stream_to(tmp, bar, executor, workers)))

    with outputs:
        outputs.write_with(collector.events_path, stream)
        staged, count, sources = read[0]
        if analyze:
            # the analyzer streams the events file just written (not yet renamed into place)
            traces = collector.trace_files()
            stage_reports(outputs, staged, chosen, collector.events_path.parent, traces or None,
                          ["json", "markdown", "html"], quiet, settings, events_file=collector.events_path,
                          nsight=_nsight_files(collector))
    lines = [f"wrote {count} metric events from {len(collector.providers)} provider(s) "
             f"({', '.join(sources) or 'none'}) to {collector.events_path}"]
    if collector.failures:
        skipped = "; ".join(f"{f.place} ({f.provider})" for f in collector.failures)
        lines.append(f"skipped {len(collector.failures)} provider(s) (--ignore-provider-errors): {skipped}")
    lines += [f"wrote {p}" for p in outputs.written if p != collector.events_path]
    return lines


def _nsight_files(collector: Any) -> dict[str, Any] | None:
    """The Nsight exports the collector's providers read, for the Nsight analyses of ``--analyze`` (None: none)."""
    found: dict[str, Any] = {"nsys": [], "ncu": []}
    for provider in collector.providers:
        kind = {"nsys_sqlite": "nsys", "ncu_csv": "ncu"}.get(str(getattr(provider, "name", "")))
        if kind is not None and callable(getattr(provider, "files", None)):
            found[kind] += provider.files()
    return found if found["nsys"] or found["ncu"] else None


@contextlib.contextmanager
def _warnings_to_stderr() -> Iterator[None]:
    """Show the collector's warnings (a skipped provider) once each on stderr during the command."""
    import logging
    import sys

    logger = logging.getLogger("my_utils.profiling")
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter("warning: %(message)s"))
    propagate = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False  # said here, once; not again by a root handler
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate
