"""The history's words: the gate's one Markdown line, its pass lines, and the lines of ``list``/``show``/``trend``.

Everything read from the store (workload, hardware, commit, branch, metric names from traces) is
untrusted: in Markdown it goes through ``reports.environment.md_escape`` inside a one-line, bounded
text, so a name can neither open a block nor carry HTML.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from my_utils.profiling.history.figures import change_label, p_text, short, when
from my_utils.profiling.history.records import StoredRun
from my_utils.profiling.history.trend_model import Trend
from my_utils.profiling.reports.environment import md_escape

if TYPE_CHECKING:  # the trend's lines need no gate (its statistics import the rules' module)
    from my_utils.profiling.history.gate import GateResult, MetricVerdict


def _md(value: object, limit: int = 120) -> str:
    text = " ".join(str(value).split())
    return md_escape(text if len(text) <= limit else text[:limit - 1] + "…")


def _num(value: float | None, unit: str) -> str:
    if value is None:
        return "not measured"
    return f"{value:,.4g}{(' ' + unit) if unit else ''}"


def _p(p: float | None) -> str:
    if p is None:
        return "-"
    shown = p_text(p)
    return f"p {shown}" if shown.startswith("<") else f"p = {shown}"


def _sigmas(v: MetricVerdict) -> str:
    return "∞σ" if v.sigmas is not None and math.isinf(v.sigmas) else f"{v.sigmas or 0.0:.1f}σ"


def _baseline(v: MetricVerdict) -> str:
    n = len(v.baseline.values)
    return f"the median of the last {n} comparable run(s)" + (" since their last change point"
                                                             if v.baseline.since_change else "")


def gate_markdown(result: GateResult) -> str:
    """The one Markdown line of a failed gate: metric, change, significance, the series and the run."""
    worst, *others = result.regressions
    line = (f"**Regression** in {_md(worst.metric, 200)}: {worst.change_pct:+.1f}% "
            f"({_md(_num(worst.value, worst.unit))} against {_md(_num(worst.median, worst.unit))}, "
            f"{_baseline(worst)}), {_p(worst.p_value)} ({_sigmas(worst)}); {_md(result.run_label, 200)}; "
            f"{_md(result.series.describe(), 300)}.")
    if others:
        line += " Also: " + "; ".join(f"{_md(v.metric, 200)} {v.change_pct:+.1f}% ({_p(v.p_value)})"
                                      for v in others) + "."
    return line


def gate_lines(result: GateResult) -> list[str]:
    """What a gate that did not fail prints: one line per metric, judged or not."""
    out = []
    for v in result.verdicts:
        if not v.judged:
            out.append(f"not judged: {v.metric}: {v.reason}")
            continue
        out.append(f"{'passed' if not v.regression else 'REGRESSION'}: {v.metric} {_num(v.value, v.unit)}, "
                   f"{v.change_pct:+.1f}% against {_num(v.median, v.unit)} ({_baseline(v)}), {_p(v.p_value)}")
    return out


def run_line(run: StoredRun) -> str:
    """One run in ``history list``: id, time, series, commit, branch, host."""
    c = run.context
    world = "?" if c.world_size is None else str(c.world_size)
    return (f"{run.id:>6}  {when(c.run_time)}  {c.workload}  {run.hardware}  world {world}  "
            f"{short(c.git_commit)}  {c.git_branch or '-'}  {c.host or '-'}")


def run_detail(run: StoredRun) -> list[str]:
    """The context lines of ``history show``."""
    c = run.context
    return [f"run {run.id}", f"  workload:     {c.workload}", f"  hardware:     {run.hardware}",
            f"  world size:   {c.world_size if c.world_size is not None else 'unknown'}",
            f"  GPU:          {c.gpu_model or 'unknown'} x {c.gpu_count or '?'}", f"  host:         {c.host or 'unknown'}",
            f"  commit:       {c.git_commit or 'unknown'}", f"  branch:       {c.git_branch or 'unknown'}",
            f"  config hash:  {c.config_hash or 'unknown'}", f"  tool version: {c.tool_version or 'unknown'}",
            f"  run time:     {when(c.run_time)} UTC", f"  added:        {when(run.added_time)} UTC",
            f"  source:       {run.source or '-'}", f"  fingerprint:  {run.fingerprint}"]


def trend_lines(trend: Trend) -> list[str]:
    """``history trend``'s lines for one series: its runs, level now, and each change."""
    s = trend.series
    out = [f"{s.metric} — {s.key.describe()}: {len(s)} run(s), latest {_num(s.values[-1], s.unit)}, "
           f"{len(trend.changes)} change point(s)"]
    out += [f"  change: {change_label(trend, i)} at {when(c.time)} UTC; level {_num(c.point.before, s.unit)} -> "
            f"{_num(c.point.after, s.unit)} ({_p(c.point.p_value)})" for i, c in enumerate(trend.changes)]
    return out
