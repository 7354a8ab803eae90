"""The headline of a report as terminal lines: what ``analyze`` prints after writing the report.

The same facts the page opens on (``report.headline``: the verdict and the top findings), in
plain text: the verdict's lines, the three findings to fix first with what each could save
(the page's own impact text, ``reports.context``), the run's context and step time, and where
the full report is. Names read from the run stay inert: control characters become ``?`` so a
kernel name cannot move the cursor or colour the terminal.
"""

from __future__ import annotations

from pathlib import Path

from my_utils.profiling.model.report import AnalysisReport

__all__ = ["headline_lines"]


def _inert(text: str) -> str:
    return "".join(ch if ch.isprintable() else "?" for ch in text)


def headline_lines(report: AnalysisReport, where: Path | None = None) -> list[str]:
    """The verdict, the fixes to make first (at most 3, each with what it could save), the context, the report's path."""
    from my_utils.profiling.reports.context import _impact_text
    from my_utils.profiling.reports.headline import _context_line, _facts_of, fact_value

    head = report.headline or {}
    verdict = head.get("verdict") or {}
    said = [_inert(str(line)) for line in verdict.get("lines") or [] if not str(line).startswith("Fix first")]
    lines = [f"verdict: {said[0] if said else _inert(str(verdict.get('bound') or 'not measured'))}"]
    lines += [f"  {line}" for line in said[1:]]
    by_id = {f.id: f for f in report.findings}
    top = [by_id[i] for i in head.get("top_findings") or [] if i in by_id]
    if top:
        lines.append("fix first:")
        for n, f in enumerate(top, start=1):
            saves = _impact_text(f, short=True)
            lines.append(f"  {n}. {_inert(f.title)}" + (f" ({_inert(saves)})" if saves else ""))
    else:
        lines.append("fix first: nothing the analysis could rank (no finding outside capture validity)")
    context = {f.id: f for f in _facts_of(report, head.get("context"))}
    figures = {f.id: f for f in _facts_of(report, head.get("facts"))}
    run = [_context_line(context)] if context else []
    step = figures.get("step_time.median")
    if step is not None and step.measured:
        run.append(f"step {fact_value(step)} median")
    if run:
        lines.append("run: " + _inert(" · ".join(run)))
    if where is not None:
        lines.append(f"report: {where}")
    return lines
