"""The history's offline HTML pages: one metric's trends, and the team overview with regressions on top.

Each page is built here from Python strings, every text from the store passed through
``html.escape`` (:func:`_e`), with the charts of ``history.figures`` embedded as JSON and plotly.js
inlined once: the file opens without a network. Not a jinja2 template like the reports: importing
and compiling one cost a ``history trend`` as much as all its own work (issue 41's budget is 200 ms),
and this page has two tables and a list of charts. Pages only draw what ``history.trend_model``
computed; nothing here detects or judges.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any

from my_utils.profiling.history.figures import change_label, p_text, short, trend_charts, when
from my_utils.profiling.history.trend_model import NOT_COMPARED, Trend

#: Charts the overview draws at most (regressions first); the table lists every trend.
MAX_OVERVIEW_CHARTS = 40

# nothing may leave the machine: no request of any kind, only this file's own scripts and styles
_HEAD = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; \
style-src 'unsafe-inline'; img-src data: blob:; font-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
  body {{ font-family: system-ui, sans-serif; margin: 0 auto; max-width: 1320px; padding: .6rem 2rem 2rem; color: #222; }}
  h1 {{ margin: .2rem 0; font-size: 1.5rem; }} h2 {{ border-bottom: 1px solid #ddd; padding-bottom: .2rem; margin-top: 2rem; }}
  .where, .note, figcaption {{ color: #555; font-size: .85rem; }}
  .table-wrap {{ max-width: 100%; overflow-x: auto; }}
  table {{ border-collapse: collapse; font-size: .82rem; margin: .5rem 0; }}
  th, td {{ border: 1px solid #ddd; padding: .2rem .45rem; text-align: left; vertical-align: top; }}
  th {{ background: #f3f3f5; font-weight: 600; }} td.num {{ white-space: nowrap; text-align: right; font-variant-numeric: tabular-nums; }}
  tr.worse td.verdict {{ color: #b3261e; font-weight: 650; }} tr.better td.verdict {{ color: #2e7d32; }}
  .plot {{ width: 100%; min-height: 320px; }}
  figure.chart {{ margin: 1rem 0 1.5rem; }}
</style>
</head>
<body>
<h1>{title}</h1>
<p class="where">{where}</p>
<p class="note" id="not-compared">{not_compared}</p>
"""

# draws every chart from its JSON; the body's data-charts-drawn says how many (the browser tests wait for it)
_DRAW = """<script>
(function () {
  var divs = document.querySelectorAll("div.plot[data-marks]");
  var drawn = [];
  divs.forEach(function (div) {
    var spec = JSON.parse(document.getElementById(div.id + "-data").textContent);
    drawn.push(Plotly.newPlot(div, spec.data, spec.layout, {displaylogo: false, responsive: true}));
  });
  Promise.all(drawn).then(function () {
    document.body.setAttribute("data-charts-drawn", String(drawn.length));
  }, function (err) { console.error("a chart could not be drawn: " + err); });
})();
</script>
</body>
</html>
"""


def _e(value: Any) -> str:
    """``value`` as HTML text or attribute value: ``& < > " '`` escaped."""
    return escape(str(value), quote=True)


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
                _cell(f"{c.point.change_pct:+.1f}%", "num"), _cell(p_text(c.point.p_value), "num"),
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
    from my_utils.profiling.reports.render import json_for_script, plotly_js

    drawn = list(trends[:max_charts] if max_charts is not None else trends)
    charts = trend_charts(drawn)
    chart_ids = {i: c.id for i, c in enumerate(charts)}
    tables = [_overview_table(trends, chart_ids)] if overview else []
    tables.append(_changes_table(trends, chart_ids))
    left_out = len(trends) - len(drawn)
    shown_where = (f"{where}; written {when(time.time())} UTC" +
                   (f"; {left_out} more trend(s) are in the table only" if left_out > 0 else ""))
    parts = [_HEAD.format(title=_e(title), where=_e(shown_where), not_compared=_e(NOT_COMPARED))]
    parts.extend(_table_html(t) for t in tables)
    parts.append("<h2>Charts</h2>\n")
    for c in charts:
        parts.append(f'<figure class="chart">\n  <div id="{_e(c.id)}" class="plot" data-marks="{_e(c.marks)}" '
                     f'aria-label="{_e(c.title)}"></div>\n'
                     # JSON safe inside a script element as it is (json_for_script): never HTML-escaped
                     f'  <script type="application/json" id="{_e(c.id)}-data">{json_for_script(c.figure_json())}'
                     f'</script>\n  <figcaption>{_e(c.title)}: {_e(c.note)}</figcaption>\n</figure>\n')
    if not charts:
        parts.append('<p class="note">No run in the store has this metric.</p>\n')
    parts.append('<p class="note">Generated by myutils-profiling history; works offline (plotly.js is inside '
                 'this file).</p>\n')
    parts.append(f"<script>{plotly_js()}</script>\n")
    parts.append(_DRAW)
    return "".join(parts)


def _table_html(table: dict[str, Any]) -> str:
    """One section: its title, then its table (or the sentence saying it is empty)."""
    out = [f'<section class="table" id="{_e(table["id"])}">\n  <h2>{_e(table["title"])}</h2>\n']
    if not table["rows"]:
        out.append(f'  <p class="note">{_e(table["empty"])}</p>\n</section>\n')
        return "".join(out)
    out.append('  <div class="table-wrap"><table>\n    <thead><tr>')
    out.extend(f"<th>{_e(col)}</th>" for col in table["columns"])
    out.append("</tr></thead>\n    <tbody>\n")
    for row in table["rows"]:
        out.append(f'      <tr class="{_e(row["css"])}">')
        for cell in row["cells"]:
            text = _e(cell["text"])
            if cell["href"]:
                text = f'<a href="{_e(cell["href"])}">{text}</a>'
            out.append(f'<td class="{_e(cell["css"])}">{text}</td>')
        out.append("</tr>\n")
    out.append("    </tbody>\n  </table></div>\n</section>\n")
    return "".join(out)


def write_page(text: str, path: str | Path) -> Path:
    """Write a page atomically (temp file, then rename); return its path."""
    from my_utils.core.atomic import atomic_write

    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(target) as fh:
        fh.write(text)
    return target
