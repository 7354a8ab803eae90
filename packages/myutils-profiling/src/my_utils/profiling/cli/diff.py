"""``myutils-profile diff``: two analysis reports (or two runs' Kineto traces) → JSON and Markdown deltas.

Exit 0: compared, nothing over ``--fail-on-regression``; 1: a significant slow-down of at
least that many percent (for CI); 2: bad input. Both outputs are written atomically, and
neither is written when the inputs are bad.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from my_utils.core.cli.guard import exit_on_error
from my_utils.profiling.cli._app import app

if TYPE_CHECKING:
    from my_utils.profiling.analysis.diff import DiffResult, OpChange

_TRACE_SUFFIXES = (".json.gz", ".pt.trace.json", ".trace.json")
MARKDOWN_ROWS = 25  # a pull-request comment stays readable; the JSON holds every row


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
    fail_on_regression: float | None = typer.Option(
        None, "--fail-on-regression", metavar="PCT",
        help="Exit 1 when a significant slow-down of at least PCT percent is found (CI gate)."),
    sigmas: float = typer.Option(3.0, "--sigmas", help="A change must exceed this many standard errors of the "
                                 "per-step spread to be significant."),
    min_pct: float = typer.Option(5.0, "--min-pct", help="...and this percentage of the base value."),
) -> None:
    """Compare two runs by name: count and duration deltas, flagging only changes above the noise."""
    from my_utils.core.errors import UsageError
    from my_utils.profiling.analysis.diff import diff_reports, diff_traces
    from my_utils.profiling.analysis.model import AnalysisReport

    if sigmas < 0 or min_pct < 0 or (fail_on_regression is not None and fail_on_regression < 0):
        raise UsageError("--sigmas, --min-pct and --fail-on-regression take numbers >= 0")
    bases = list(base_trace) + ([base_report] if base_report and _is_trace(base_report) else [])
    targets = list(target_trace) + ([target_report] if target_report and _is_trace(target_report) else [])
    report_a = base_report if base_report and not _is_trace(base_report) else None
    report_b = target_report if target_report and not _is_trace(target_report) else None
    if (report_a or report_b) and (bases or targets):
        raise UsageError("give two reports (--base-report/--target-report) or two runs' traces "
                         "(--base-trace/--target-trace), not a mix")
    for p in [*bases, *targets, *(x for x in (report_a, report_b) if x)]:
        if not p.is_file():
            raise UsageError(f"{p}: no such file; expected an analysis_report.json or a Kineto trace")
    if bases or targets:
        if not bases or not targets:
            raise UsageError("--base-trace and --target-trace are both needed to compare traces")
        result = diff_traces(bases, targets, sigmas=sigmas, min_pct=min_pct)
    else:
        if report_a is None or report_b is None:
            raise UsageError("--base-report and --target-report are both needed "
                             "(or --base-trace/--target-trace for Kineto traces)")
        result = diff_reports(AnalysisReport.load(report_a), AnalysisReport.load(report_b),
                              base_label=str(report_a), target_label=str(report_b), sigmas=sigmas, min_pct=min_pct)
    for warning in result.warnings:
        typer.echo(f"warning: {warning}", err=True)
    _write(output, json.dumps(result.to_dict(), indent=2, allow_nan=False) + "\n")
    _write(markdown, render_markdown(result, fail_on_regression))
    typer.echo(_summary_line(result))
    if fail_on_regression is not None:
        bad = result.regressions(fail_on_regression)
        if bad:
            names = ", ".join(f"{c.name} {c.delta_pct:+.1f}%" if c.delta_pct is not None else f"{c.name} (new)"
                              for c in bad[:5])
            typer.echo(f"regression over {fail_on_regression:g}%: {names}", err=True)
            raise typer.Exit(1)


def _is_trace(path: Path) -> bool:
    """A Kineto trace rather than a report: by name, else by its first bytes (``traceEvents``)."""
    name = path.name.lower()
    if name.endswith(_TRACE_SUFFIXES):
        return True
    if path.name == "analysis_report.json" or not path.is_file():
        return False
    try:
        with path.open("rb") as fh:
            head = fh.read(4096)
    except OSError:
        return False
    return b'"traceEvents"' in head or b'"schemaVersion"' in head


def _write(path: Path | None, text: str) -> None:
    if path is None:
        return
    from my_utils.core.atomic import atomic_write

    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path) as fh:
        fh.write(text)


def _summary_line(result: DiffResult) -> str:
    step = result.step_time
    head = (f"step time {step.base.mean:.3f} -> {step.target.mean:.3f} {step.base.unit} "
            f"({_pct(step)}, {'significant' if step.significant else 'within noise'}); "
            if step and step.base and step.target else "")
    return f"{head}{len(result.significant)} significant change(s) among {len(result.changes)} names"


def _pct(c: OpChange) -> str:
    return "new" if c.base is None else "gone" if c.target is None else (
        f"{c.delta_pct:+.1f}%" if c.delta_pct is not None else "n/a")


def _cell(text: str) -> str:
    # names come from the traces: inside a code span '<' stays text, but '|' would end the cell
    return text.replace("`", "'").replace("|", "\\|").replace("\n", " ")[:120]


def _prose(text: str) -> str:
    # outside a code span markup would render: show it as text
    return text.replace("<", "&lt;").replace("\n", " ")


def render_markdown(result: DiffResult, fail_on_regression: float | None = None) -> str:
    """A Markdown summary ready to paste into a pull request (the JSON keeps every row)."""
    lines = [f"### Profile diff: `{_cell(result.base)}` → `{_cell(result.target)}`", ""]
    lines += [f"> **Warning:** {_prose(w)}" for w in result.warnings] + ([""] if result.warnings else [])
    step = result.step_time
    if step and step.base and step.target:
        verdict = "significant" if step.significant else "within noise"
        lines.append(f"**Step time:** {step.base.mean:.3f} → {step.target.mean:.3f} {step.base.unit} "
                     f"({_pct(step)}, {verdict}; noise ±{step.noise:.3f})")
        lines.append("")
    if fail_on_regression is not None:
        bad = result.regressions(fail_on_regression)
        lines += [f"**Regression gate ({fail_on_regression:g}%):** " + ("FAILED" if bad else "passed"), ""]
    sig = result.significant
    settings = result.settings
    lines.append(f"{len(sig)} significant change(s) among {len(result.changes)} names "
                 f"(> {settings.get('sigmas', 3):g} standard errors of the per-step spread and "
                 f"> {settings.get('min_pct', 5):g}% of the base).")
    lines.append("")
    if sig:
        lines += ["| name | status | base / step | target / step | Δ | Δ % | Δ count / step |",
                  "|---|---|---:|---:|---:|---:|---:|"]
        for c in sig[:MARKDOWN_ROWS]:
            side = c.base or c.target
            unit = side.unit if side else ""
            lines.append(f"| `{_cell(c.name)}` | {c.status} | {_num(c.base)} | {_num(c.target)} | "
                         f"{c.delta:+.3f} {unit} | {_pct(c)} | {c.count_delta:+g} |")
        if len(sig) > MARKDOWN_ROWS:
            lines.append(f"\n…and {len(sig) - MARKDOWN_ROWS} more in the JSON output.")
    if result.kineto:  # figures of the Kineto analyses (critical path, MFU, queues, collectives...)
        lines += ["", "| Kineto table | key | figure | base | target | Δ % |", "|---|---|---|---:|---:|---:|"]
        for k in result.kineto[:MARKDOWN_ROWS]:
            key = ", ".join(f"{n}={v}" for n, v in k["key"].items())
            lines.append(f"| {k['table']} | `{_cell(key)}` | {k['metric']} | {_fig(k['base'])} | "
                         f"{_fig(k['target'])} | {_fig(k['delta_pct'], '+.1f')} |")
    return "\n".join(lines) + "\n"


def _fig(v: object, spec: str = ",.3f") -> str:
    return "–" if not isinstance(v, (int, float)) else format(v, spec)


def _num(s: object) -> str:
    mean = getattr(s, "mean", None)
    return "–" if mean is None else f"{mean:.3f} ± {getattr(s, 'std', 0.0):.3f}"
