"""``myutils-profile diff``: two analysis reports (or two runs' Kineto traces) → JSON, Markdown and HTML deltas.

Exit 0: compared, nothing over ``--fail-on-regression``; 1: a significant slow-down of at
least that many percent (for CI); 2: bad input, which includes a side with nothing to
compare (an empty trace, a report without operations or steps): a gate that sees no data
does not pass. The outputs are written together at the end (each to a temporary first), and
none is written when anything fails.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from my_utils.core.cli.guard import exit_on_error
from my_utils.profiling.cli._app import app

if TYPE_CHECKING:
    from my_utils.profiling.analysis.diff import DiffResult
    from my_utils.profiling.cli._outputs import StagedOutputs

_TRACE_SUFFIXES = (".json.gz", ".pt.trace.json", ".trace.json")


@app.command("diff")
@exit_on_error
def diff(
    base_report: Path | None = typer.Option(None, "--base-report", help="analysis_report.json of the base run "
                                            "(a Kineto trace is detected and compared as a trace)."),
    target_report: Path | None = typer.Option(None, "--target-report", help="analysis_report.json of the target run."),
    base_trace: list[Path] = typer.Option([], "--base-trace", help="Kineto trace of the base run (repeat per rank)."),
    target_trace: list[Path] = typer.Option([], "--target-trace", help="Kineto trace of the target run (repeat per rank)."),
    output: Path | None = typer.Option(None, "--output", help="Write the full diff as JSON here."),
    markdown: Path | None = typer.Option(None, "--markdown", help="Write a pull-request-ready Markdown summary here."),
    html: Path | None = typer.Option(None, "--html", help="Write an offline HTML page (charts of the largest "
                                     "changes, both runs' hardware, the gate) here."),
    fail_on_regression: float | None = typer.Option(
        None, "--fail-on-regression", metavar="PCT",
        help="Exit 1 when a significant slow-down of at least PCT percent is found (CI gate)."),
    sigmas: float = typer.Option(3.0, "--sigmas", help="A change must exceed this many standard errors of the "
                                 "per-step spread to be significant."),
    min_pct: float = typer.Option(5.0, "--min-pct", help="...and this percentage of the base value."),
    operations: bool = typer.Option(False, "--operations", help="For traces: also match the operations "
                                    "(operator + shape + call stack) across the runs, e.g. when the GPUs differ and "
                                    "kernel names do not pair; reads the traces' operators too (slower)."),
) -> None:
    """Compare two runs: the GPU-level before → after and the step-time change by cause, then per name.

    A change is judged only where both runs have repeated steps (significant: beyond the
    step-to-step spread and --min-pct); runs of one step each are compared descriptively.
    """
    import math

    from my_utils.core.errors import UsageError
    from my_utils.profiling.analysis.diff import diff_reports, diff_traces, load_report
    from my_utils.profiling.cli._outputs import StagedOutputs, exits_on_out_of_memory

    numbers = [sigmas, min_pct] + ([fail_on_regression] if fail_on_regression is not None else [])
    if any(not math.isfinite(x) or x < 0 for x in numbers):
        raise UsageError("--sigmas, --min-pct and --fail-on-regression take finite numbers >= 0")
    bases = list(base_trace) + ([base_report] if base_report and _is_trace(base_report) else [])
    targets = list(target_trace) + ([target_report] if target_report and _is_trace(target_report) else [])
    report_a = base_report if base_report and not _is_trace(base_report) else None
    report_b = target_report if target_report and not _is_trace(target_report) else None
    if (report_a or report_b) and (bases or targets):
        raise UsageError("give two reports (--base-report/--target-report) or two runs' traces "
                         "(--base-trace/--target-trace), not a mix")
    inputs = [*bases, *targets, *(x for x in (report_a, report_b) if x)]
    for p in inputs:
        if not p.exists():
            raise UsageError(f"{p}: no such file; expected an analysis_report.json or a Kineto trace")
    outputs = StagedOutputs(inputs)
    outputs.check(p for p in (output, markdown, html) if p is not None)
    with exits_on_out_of_memory("diff"):
        if bases or targets:
            if not bases or not targets:
                raise UsageError("--base-trace and --target-trace are both needed to compare traces")
            result = diff_traces(bases, targets, sigmas=sigmas, min_pct=min_pct, operations=operations)
        else:
            if report_a is None or report_b is None:
                raise UsageError("--base-report and --target-report are both needed "
                                 "(or --base-trace/--target-trace for Kineto traces)")
            result = diff_reports(load_report(report_a), load_report(report_b), base_label=str(report_a),
                                  target_label=str(report_b), sigmas=sigmas, min_pct=min_pct)
        with outputs:
            _stage(outputs, result, output, markdown, html, fail_on_regression)
    echo_result(result)
    for path in outputs.written:
        typer.echo(f"wrote {path}")
    typer.echo(_summary_line(result))
    if fail_on_regression is not None:
        echo_gate(result, fail_on_regression)


def echo_result(result: DiffResult) -> None:
    """The headline, the warnings and notes (stderr), and the GPU level before → after: what every diff prints first."""
    from my_utils.profiling.reports.diff_rows import accounting_rows, accounting_title, gpu_table

    typer.echo(result.headline)
    for warning in result.warnings:
        typer.echo(f"warning: {warning}", err=True)
    for note in result.notes:
        typer.echo(f"note: {note}", err=True)
    gpu = gpu_table(result)
    if gpu:
        width = max(len(label) for label, *_ in gpu)
        typer.echo("GPU level (base -> target, change):")
        for label, a, b, d in gpu:
            typer.echo(f"  {label:<{width}}  {a} -> {b}  ({d})")
    acc = accounting_rows(result)
    if acc:
        typer.echo(f"{accounting_title(result)} (ms):")
        for part, a, b, d, judged in acc:
            typer.echo(f"  {part}: {a or '.'} -> {b or '.'}  {d}  {judged}".rstrip())


def echo_gate(result: DiffResult, fail_on_regression: float) -> None:
    """The gate's line, its headline included; exit 1 when it failed."""
    gate = result.gate(fail_on_regression)
    caveat = " (the runs' hardware or software differ: see the warning)" if any(
        "different hardware" in w for w in result.warnings) else ""
    if not gate.passed:
        typer.echo(f"regression over {fail_on_regression:g}%: {gate.describe().removeprefix('FAILED: ')}"
                   f"{caveat}. {result.headline}", err=True)
        raise typer.Exit(1)
    typer.echo(f"regression gate ({fail_on_regression:g}%): passed{caveat}. {result.headline}")


def _stage(outputs: StagedOutputs, result: DiffResult, output: Path | None, markdown: Path | None, html: Path | None,
           fail_on_regression: float | None) -> None:
    from my_utils.core.safe_io import strict_json
    from my_utils.profiling.formats.utf8 import utf8_clean
    from my_utils.profiling.reports.diff_markdown import render_markdown

    if output is not None:
        # JSON text is cleaned as data: a surrogate's escape made in the text would not be valid JSON
        outputs.write_text(output, strict_json(utf8_clean(result.to_dict(fail_on_regression)), indent=2) + "\n")
    if markdown is not None:
        outputs.write_text(markdown, render_markdown(result, fail_on_regression))
    if html is not None:
        from my_utils.profiling.reports.diff_html import render_diff_html

        outputs.write_text(html, render_diff_html(result, fail_on_regression))


def _is_trace(path: Path) -> bool:
    """A Kineto trace rather than a report: by name, else by its first bytes (``traceEvents``)."""
    name = path.name.lower()
    if name.endswith(_TRACE_SUFFIXES):
        return True
    if path.name == "analysis_report.json" or not path.is_file():
        return False
    try:
        from my_utils.core.safe_io import open_regular

        with open_regular(path, "rb") as fh:
            head = fh.read(4096)
    except (OSError, ValueError):  # unreadable, or not a regular file: the report reader says why
        return False
    return b'"traceEvents"' in head or b'"schemaVersion"' in head


def _summary_line(result: DiffResult) -> str:
    from my_utils.profiling.reports.diff_rows import pct_text, rows

    s = result.step_time
    verdict = ("significant" if s.significant else "within noise") if s and s.measured else "not judged"
    head = (f"step time {s.base.mean:.3f} -> {s.target.mean:.3f} {s.base.unit} ({pct_text(s)}, {verdict}); "
            if s and s.base and s.target else "")
    _, top, nested = rows(result, 0)
    folded = f" (+{nested} nested in them)" if nested else ""
    what = "largest unjudged change(s) (one sample per side)" if result.descriptive else "significant change(s)"
    return f"{head}{top} {what}{folded} among {len(result.changes)} names"


def render_markdown(result: DiffResult, fail_on_regression: float | None = None) -> str:
    """The Markdown summary (``reports.diff_markdown.render_markdown``; kept here for callers of 0.x)."""
    from my_utils.profiling.reports.diff_markdown import render_markdown as render

    return render(result, fail_on_regression)

