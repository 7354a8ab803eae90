"""Trend charts as plotly JSON: the same figure drawn on the pages and returned in Python.

One chart per trend: every run as a point (its value exactly as stored, the run, commit and branch
on hover), the level between changes as a step line, and each change marked at its first run with
its size and commit. Text read from the store (commits, branches, workload names) goes through
``plot_text``, so markup in it shows as the characters it is. :func:`to_figures` wraps the same JSON
in ``plotly.graph_objects.Figure`` for a notebook.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from my_utils.profiling.history.trend_model import Trend
from my_utils.profiling.reports.plot import Chart, layout, plot_text, value_axis

RUNS_COLOUR, LEVEL_COLOUR, WORSE_COLOUR, BETTER_COLOUR = "#4E79A7", "#9C755F", "#E15759", "#59A14F"


def when(seconds: float) -> str:
    """A run's time as plotly reads a date (UTC, to the second)."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seconds))


def short(commit: str | None) -> str:
    """A commit as shown: its first 10 characters, or ``unknown``."""
    return commit[:10] if commit else "unknown"


def p_text(p: float) -> str:
    """A p-value as shown: "< 1e-12" below that (the normal tail underflows to 0 there), else 2 digits."""
    return "< 1e-12" if p < 1e-12 else f"{p:.2g}"


def change_label(trend: Trend, index: int) -> str:
    """``+5.2% at run 812 (commit abc1234def)``: one change as the chart and the pages say it."""
    c = trend.changes[index]
    config = "; the config changed there" if c.config_changed else ""
    return (f"{c.point.change_pct:+.1f}% ({'worse' if c.worse else 'better'}) from run {c.run_id}, "
            f"commit {short(c.commit)}{config}")


def trend_chart(trend: Trend, chart_id: str) -> Chart:
    """The chart of one trend (module docstring)."""
    s = trend.series
    unit = f" ({s.unit})" if s.unit else ""
    x = [when(t) for t in s.times]
    hover = [[rid, plot_text(short(c)), plot_text(b or "unknown")] for rid, c, b in
             zip(s.run_ids, s.commits, s.branches, strict=True)]
    runs: dict[str, Any] = {
        "type": "scatter", "mode": "lines+markers", "name": "runs", "x": x, "y": list(s.values),
        "customdata": hover, "marker": {"size": 5, "color": RUNS_COLOUR}, "line": {"width": 1, "color": RUNS_COLOUR},
        "hovertemplate": "run %{customdata[0]}<br>commit %{customdata[1]}<br>branch %{customdata[2]}<br>"
                         "%{x}<br>%{y:,.6g}" + plot_text(unit) + "<extra></extra>"}
    data: list[dict[str, Any]] = [runs]
    shapes: list[dict[str, Any]] = []
    if trend.changes:
        data.append({"type": "scatter", "mode": "lines", "name": "level (median between changes)", "x": x,
                     "y": trend.levels(), "line": {"shape": "hv", "width": 2, "color": LEVEL_COLOUR},
                     "hoverinfo": "skip"})
        marks = [c.point.index for c in trend.changes]
        data.append({"type": "scatter", "mode": "markers", "name": "change points", "x": [x[i] for i in marks],
                     "y": [s.values[i] for i in marks],
                     "text": [plot_text(change_label(trend, k)) for k in range(len(marks))],
                     "marker": {"size": 12, "symbol": "diamond-open", "line": {"width": 2},
                                "color": [WORSE_COLOUR if c.worse else BETTER_COLOUR for c in trend.changes]},
                     "hovertemplate": "%{text}<extra>change</extra>"})
        shapes = [{"type": "line", "xref": "x", "yref": "paper", "x0": x[i], "x1": x[i], "y0": 0, "y1": 1,
                   "line": {"dash": "dot", "width": 1, "color": WORSE_COLOUR if c.worse else BETTER_COLOUR}}
                  for i, c in zip(marks, trend.changes, strict=True)]
    title = f"{s.metric} — {s.key.describe()}"
    fig_layout = layout(title, {"title": {"text": "run time (UTC)"}, "type": "date", "automargin": True},
                        value_axis(s.metric + unit), shapes=shapes, showlegend=True,
                        legend={"orientation": "h", "y": -0.25})
    note = (f"{len(s)} run(s), {len(trend.changes)} change point(s)" +
            (": " + "; ".join(change_label(trend, k) for k in range(len(trend.changes))) if trend.changes else ""))
    return Chart(chart_id, title, {"data": data, "layout": fig_layout}, "line", len(data), note)


def trend_charts(trends: Sequence[Trend], prefix: str = "trend") -> list[Chart]:
    """One chart per trend, ids ``<prefix>-0``, ``<prefix>-1``..."""
    return [trend_chart(t, f"{prefix}-{i}") for i, t in enumerate(trends)]


def to_figures(trends: Sequence[Trend]) -> list[Any]:
    """The trends' charts as ``plotly.graph_objects.Figure`` objects (for a notebook), same data as the pages."""
    import plotly.graph_objects as go

    out = []
    for chart in trend_charts(trends):
        fig = go.Figure(chart.figure)
        fig.update_layout(title={"text": plot_text(chart.title)})
        out.append(fig)
    return out
