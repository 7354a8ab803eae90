"""``myutils-profile analyze``: metric events → ``analysis_report.json`` (and Markdown/HTML when available)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from my_utils.core.cli.guard import exit_on_error
from my_utils.profiling.cli._app import app

WORKLOADS = ("pretrain", "finetune", "inference")  # analysis.workloads.WORKLOADS; a test keeps them equal


@app.command("analyze")
@exit_on_error
def analyze(
    events: Path = typer.Option(..., "--events", help="metrics_events.jsonl written by a collector or by ingest."),
    workload: str = typer.Option("pretrain", "--workload", help=f"Thresholds profile: {', '.join(WORKLOADS)}."),
    output_dir: Path = typer.Option(Path("./analysis_out"), "--output-dir", help="Where the reports are written."),
    trace: list[Path] = typer.Option(
        [], "--trace", help="A torch.profiler trace of the run for the Kineto analyses (repeatable; default: the "
                            "trace files named in the events, found beside the events file)."),
    formats: str = typer.Option("json,markdown,html", "--formats",
                                help="Reports to write, comma-separated: json, markdown, html."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar on stderr."),
    trace_filter: str | None = typer.Option(
        None, "--filter", help="Part of each trace the Kineto analyses read, ';'-separated: first_iteration, "
                               "iterations=N[,N], time=START:END, device=gpu|cpu, name=REGEX, under=NAME[#POS]."),
) -> None:
    """Analyse metric events and write <output-dir>/analysis_report.json (and .md/.html).

    Exit 0 when every report was written; 2 for bad input (a malformed events file, an
    unknown workload or format); nothing is written when the command fails.
    """
    report_paths = run_analysis(events, workload, output_dir, trace or None, formats, quiet,
                                trace_filter=trace_filter)
    for path in report_paths:
        typer.echo(f"wrote {path}")


def run_analysis(events: Path, workload: str, output_dir: Path, traces: list[Path] | None, formats: str,
                 quiet: bool, settings: Any = None, trace_filter: str | None = None) -> list[Path]:
    """Analyse ``events`` and write the requested reports; shared by ``analyze`` and ``ingest --analyze``.

    ``settings`` (a config's ``AnalysisSettings``) gives the rules and their options.
    """
    from my_utils.core.errors import InputError, UsageError
    from my_utils.profiling.analysis.analyzer import MetricsAnalyzer
    from my_utils.profiling.analysis.workloads import WORKLOADS as PROFILES
    from my_utils.profiling.collector import REPORT_FORMATS, write_report

    if workload not in PROFILES:
        raise UsageError(f"--workload {workload!r}: expected one of {', '.join(PROFILES)}")
    wanted = [f.strip().lower() for f in formats.split(",") if f.strip()]
    bad = [f for f in wanted if f not in REPORT_FORMATS]
    if bad or not wanted:
        raise UsageError(f"--formats {formats!r}: expected a comma-separated list of json, markdown, html")
    if not events.is_file():
        raise InputError(str(events), None, "an existing metrics_events.jsonl file (written by a collector or ingest)")
    for t in traces or []:
        if not t.is_file():
            raise InputError(str(t), None, "an existing torch.profiler trace file (.json or .json.gz)")
    kept = None
    if trace_filter:
        from my_utils.profiling.analysis.kineto.filters import TraceFilter

        kept = TraceFilter.parse(trace_filter)
    rules = list(settings.rules) if settings is not None and settings.rules is not None else None
    rule_options = settings.rule_options if settings is not None else None
    report = MetricsAnalyzer(events, workload, traces=traces, progress=not quiet, rules=rules,
                             rule_options=rule_options, trace_filter=kept).analyze()
    if "json" not in wanted:
        wanted.insert(0, "json")  # the machine-readable report is always written: diff reads it
    written: list[Path] = []
    for fmt in dict.fromkeys("markdown" if f == "md" else f for f in wanted):
        try:
            written.append(write_report(report, fmt, None, output_dir))
        except UsageError as exc:
            if fmt == "json" or "not available" not in str(exc):
                raise
            typer.echo(f"note: {fmt} report skipped: the reports part is not installed in this version", err=True)
    return written
