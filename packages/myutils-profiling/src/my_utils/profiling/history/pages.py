"""The history's offline HTML pages: one metric's trends, and the team overview with regressions on top.

Both are one jinja2 template (``templates/history.html.j2``, autoescaped) with the charts of
``history.figures`` embedded as JSON and plotly.js inlined once: the file opens without a network.
Pages only draw what ``history.trend_model`` computed; nothing here detects or judges.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from my_utils.profiling.history.figures import change_label, short, trend_charts, when
from my_utils.profiling.history.trend_model import NOT_COMPARED, Trend

TEMPLATES = Path(__file__).resolve().parent / "templates"
#: Charts the overview draws at most (regressions first); the table lists every trend.
MAX_OVERVIEW_CHARTS = 40


def _num(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    return f"{value:,.4g}{(' ' + unit) if unit else ''}"


def _cell(text: Any, css: str = "", href: str = "") -> dict[str, str]:
    return {"text": str(text), "css": css, "href": href}


def _changes_table(trends: Sequence[Trend], charts: dict[int, str]) -> dict[str, Any]:
    rows = []
    for i, t in enumerate(trends):
        for c in reversed(t.changes):
            rows.append({"css": "worse" if c.worse else "better", "cells": [
                _cell(t.series.key.describe(), href=f"#{charts[i]}" if i in charts else ""),
                _cell(c.run_id, "num"), _cell(short(c.commit)), _cell(c.branch or "unknown"), _cell(when(c.time)),
                _cell(_num(c.point.before, t.series.unit), "num"), _cell(_num(c.point.after, t.series.unit), "num"),
                _cell(f"{c.point.change_pct:+.1f}%", "num"), _cell(f"{c.point.p_value:.2g}", "num"),
                _cell(("worse" if c.worse else "better") + ("; config changed" if c.config_changed else ""),
                      "verdict")]})
    return {"id": "changes", "title": "Change points (newest first in each series)", "rows": rows,
            "columns": ["series", "first run after", "commit", "branch", "time (UTC)", "level before",
                        "level after", "change", "p-value", "direction"],
            "empty": "No change point: every series stayed at one level."}


def _overview_table(trends: Sequence[Trend], charts: dict[int, str]) -> dict[str, Any]:
    rows = []
    for i, t in enumerate(trends):
        s, c = t.series, t.latest_change
        rows.append({"css": ("worse" if t.regressed else "better") if c else "", "cells": [
            _cell(s.key.describe(), href=f"#{charts[i]}" if i in charts else ""), _cell(s.metric),
            _cell(len(s), "num"), _cell(_num(s.values[-1], s.unit), "num"),
            _cell(change_label(t, len(t.changes) - 1) if c else "no change", "verdict"),
            _cell(when(c.time) if c else "-")]})
    return {"id": "overview", "title": "Every series' key metrics (regressions still in force first)",
            "rows": rows, "columns": ["series", "metric", "runs", "latest", "latest change", "since (UTC)"],
            "empty": "The store holds no run with these metrics."}


def render_page(title: str, where: str, trends: Sequence[Trend], overview: bool = False,
                max_charts: int | None = None) -> str:
    """The HTML text of a trend page (``overview`` False) or of the team overview."""
    import jinja2
    from markupsafe import Markup

    from my_utils.profiling.reports.render import json_for_script, plotly_js

    drawn = list(trends[:max_charts] if max_charts is not None else trends)
    charts = trend_charts(drawn)
    chart_ids = {i: c.id for i, c in enumerate(charts)}
    tables = [_overview_table(trends, chart_ids)] if overview else []
    tables.append(_changes_table(trends, chart_ids))
    left_out = len(trends) - len(drawn)
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                             undefined=jinja2.StrictUndefined)
    return env.get_template("history.html.j2").render(
        title=title, where=f"{where}; written {when(time.time())} UTC" +
        (f"; {left_out} more trend(s) are in the table only" if left_out > 0 else ""),
        not_compared=NOT_COMPARED, tables=tables, no_charts="No run in the store has this metric.",
        charts=[{"id": c.id, "title": c.title, "marks": c.marks, "note": c.note,
                 "json": Markup(json_for_script(c.figure_json()))} for c in charts],
        plotly_js=Markup(plotly_js()))


def write_page(text: str, path: str | Path) -> Path:
    """Write a page atomically (temp file, then rename); return its path."""
    from my_utils.core.atomic import atomic_write

    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(target) as fh:
        fh.write(text)
    return target
