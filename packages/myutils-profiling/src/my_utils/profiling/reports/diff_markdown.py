"""A diff as Markdown ready to paste into a pull request; every outside string is text, never markup.

Names, labels, units and hardware strings come from traces and reports someone else wrote.
Each goes through :func:`md_text`: one line (every line break, ``\\r`` included, becomes a
space, so a value can neither start a heading nor end a table row), cut with an ellipsis,
then ``reports.environment.md_escape`` (``<``, ``>``, ``&`` as entities; backslashes before
Markdown syntax, ``|`` included). Values never start a line. A property test renders what
this module writes with markdown-it-py and finds no heading, HTML or table row it did not put there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from my_utils.profiling.reports.diff_rows import (
    accounting_rows,
    accounting_title,
    energy_line,
    gpu_table,
    hardware_rows,
    listing_line,
    rows,
    short_name,
    step_line,
)
from my_utils.profiling.reports.environment import md_escape

if TYPE_CHECKING:
    from my_utils.profiling.analysis.diff import DiffResult

MARKDOWN_ROWS = 25  # a pull-request comment stays readable; the JSON holds every row
_INDENT = "\u2003"  # an em space per level below the first: table cells keep it, Markdown does not read it


def md_text(value: Any, limit: int = 200) -> str:
    """``value`` as inline Markdown text: one line, at most ``limit`` characters, escaped."""
    return md_escape(short_name(str(value), limit))


def render_markdown(result: DiffResult, fail_on_regression: float | None = None) -> str:
    """The Markdown summary of ``result`` (the gate's verdict when ``fail_on_regression`` is given)."""
    lines = [f"### Profile diff: {md_text(result.base, 120)} → {md_text(result.target, 120)}", "",
             f"**{md_text(result.headline, 1200)}**", ""]
    for warning in result.warnings:
        lines += [f"> **Warning:** {md_text(warning, 1200)}", ""]
    for note in result.notes:
        lines += [f"> **Note:** {md_text(note, 600)}", ""]
    gpu = gpu_table(result)
    if gpu:
        lines += ["| GPU level | base | target | change |", "|---|---:|---:|---:|"]
        lines += [f"| {md_text(label, 80)} | {md_text(a)} | {md_text(b)} | {md_text(d)} |" for label, a, b, d in gpu]
        lines.append("")
    account = accounting_rows(result)
    if account:
        lines += [f"| {md_text(accounting_title(result), 80)} | base | target | Δ (ms) | judged |",
                  "|---|---:|---:|---:|---|"]
        lines += [f"| {md_text(part, 80)} | {md_text(a)} | {md_text(b)} | {md_text(d)} | {md_text(j, 60)} |"
                  for part, a, b, d, j in account]
        lines.append("")
    hardware = hardware_rows(result)
    if hardware:
        lines += ["| | base | target |", "|---|---|---|"]
        lines += [f"| {md_text(label, 40)}{' (differs)' if differs else ''} | {md_text(a, 120)} | "
                  f"{md_text(b, 120)} |" for label, a, b, differs in hardware]
        lines.append("")
    step = step_line(result)
    if step is not None:
        lines += [f"**Step time:** {md_text(step, 200)}", ""]
    energy = energy_line(result)
    if energy is not None:
        lines += [f"**Energy per step:** {md_text(energy, 200)}", ""]
    if fail_on_regression is not None:
        gate = result.gate(fail_on_regression)
        caveat = " (the runs' hardware or software differ: see the warning)" if any(
            "different hardware" in w for w in result.warnings) else ""
        lines += [f"**Regression gate ({fail_on_regression:g}%):** {md_text(gate.describe(), 400)}{caveat}", ""]
    shown, top, nested = rows(result, MARKDOWN_ROWS)
    lines.append(md_text(listing_line(result, top, nested), 600))
    lines.append("")
    if shown:
        per = "step" if result.sampling == "per step" else "sample"
        lines += [f"| name | status | base / {per} | target / {per} | Δ / {per} | Δ % | Δ count / {per} |",
                  "|---|---|---:|---:|---:|---:|---:|"]
        for r in shown:
            nest = f"{_INDENT * (r.depth - 1)}↳ " if r.depth else ""
            lines.append(f"| {nest}{md_escape(r.shown)} | {md_text(r.status, 20)} | {md_text(r.base)} | "
                         f"{md_text(r.target)} | {md_text(r.delta)} | {md_text(r.pct)} | {md_text(r.count)} |")
        left = top + nested - len(shown)
        if left > 0:
            lines += ["", f"…and {left} more in the JSON output."]
    if result.operations is not None:  # the operation-matched diff (kineto.ops.op_diff)
        from my_utils.profiling.reports import ops_diff_rows

        lines += ["", f"**{ops_diff_rows.TITLE}:** {md_text(ops_diff_rows.summary_line(result.operations), 1200)}", "",
                  "| " + " | ".join(ops_diff_rows.HEADERS) + " |", "|---|---|---|---:|---:|---:|---:|---:|"]
        lines += ["| " + " | ".join(md_text(c, 160) for c in row) + " |"
                  for row in ops_diff_rows.table_rows(result.operations, MARKDOWN_ROWS)]
    if result.kineto:  # figures of the Kineto analyses that changed (critical path, MFU, queues, collectives...)
        lines += ["", "| Kineto table | key | figure | base | target | Δ % |", "|---|---|---|---:|---:|---:|"]
        for k in result.kineto[:MARKDOWN_ROWS]:
            key = ", ".join(f"{n}={v}" for n, v in dict(k.get("key") or {}).items())
            lines.append(f"| {md_text(k.get('table', ''), 40)} | {md_text(key, 80)} | {md_text(k.get('metric', ''), 40)} | "
                         f"{_figure(k.get('base'))} | {_figure(k.get('target'))} | {_figure(k.get('delta_pct'), '+.1f')} |")
    return "\n".join(lines) + "\n"


def _figure(value: object, spec: str = ",.3f") -> str:
    """A number of the Kineto comparison, or an en dash where the figure is missing."""
    return format(value, spec) if isinstance(value, (int, float)) and not isinstance(value, bool) else "–"
