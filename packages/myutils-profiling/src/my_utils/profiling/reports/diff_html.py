"""A diff as one offline HTML page: the headline, warnings, the GPU level before → after, the gate, hardware, charts, rows.

Built like the analysis report (``reports.render``): the jinja2 template ``diff.html.j2``
(autoescaped), plotly JSON beside each chart's ``<div>``, plotly.js inlined once, and a
Content-Security-Policy that forbids every request, so the page opens offline and nothing it
shows can run. Chart labels are run data: ``charts.plot_text`` turns their markup into
entities, and long names are cut in the middle, distinct where the names are (the full name is
in the hover text and in the JSON). The first screen holds the headline, the like-for-like
warnings and the GPU-level table; ``nsys diff`` and ``ncu diff`` draw the same page.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from my_utils.core.atomic import atomic_write
from my_utils.profiling.reports.charts import Chart, plot_text
from my_utils.profiling.reports.diff_rows import (
    accounting_rows,
    accounting_title,
    energy_line,
    gpu_table,
    hardware_rows,
    listing_line,
    name_labels,
    rows,
    short_name,
    step_line,
)

if TYPE_CHECKING:
    from my_utils.profiling.analysis.diff import DiffResult, OpChange

TEMPLATE = "diff.html.j2"


@dataclass(frozen=True)
class ExtraTable:
    """A table a tool's page adds below the rows (``ncu diff``: every metric of every kernel)."""

    title: str
    headers: tuple[str, ...]
    rows: list[tuple[str, ...]]

HTML_ROWS = 60  # the page stays readable; the JSON holds every row
TOP_BARS = 15
LABEL_CHARS = 48
SLOWER, FASTER, NEUTRAL = "#E45756", "#54A24B", "#4C78A8"


def _bar_chart(chart_id: str, title: str, changes: list[OpChange], values: list[float], axis: str) -> Chart:
    """A horizontal bar per change, the largest on top; red where the target is slower or does more."""
    # bars on one axis category would be drawn on one row: cut names stay distinct
    labels = [plot_text(label) for label in name_labels([c.name for c in changes], LABEL_CHARS)]
    hover = [plot_text(short_name(c.name, 300)) for c in changes]
    figure: dict[str, Any] = {
        "data": [{"type": "bar", "orientation": "h", "x": [float(f"{v:.6g}") for v in values], "y": labels,
                  "hovertext": hover, "hoverinfo": "text+x",
                  "marker": {"color": [SLOWER if v > 0 else FASTER if v < 0 else NEUTRAL for v in values]}}],
        "layout": {"title": {"text": plot_text(title)}, "height": 120 + 26 * max(len(changes), 1),
                   "margin": {"l": 360, "r": 30, "t": 40, "b": 50}, "template": None,
                   "paper_bgcolor": "#ffffff", "plot_bgcolor": "#f7f7f9",
                   "font": {"family": "system-ui, sans-serif", "size": 12},
                   "xaxis": {"title": {"text": plot_text(axis)}, "zeroline": True, "separatethousands": True},
                   "yaxis": {"autorange": "reversed", "automargin": False}},
    }
    return Chart(chart_id, title, figure, "bar", len(changes))


def build_diff_charts(result: DiffResult) -> list[Chart]:
    """The two charts: largest per-step time changes (counted ones only) and largest count changes."""
    folded = result.folded()
    top = [c for c in result.largest() if c.name not in folded][:TOP_BARS]
    units = {c.unit for c in top}
    unit = f" ({units.pop()})" if len(units) == 1 else ""
    charts = []
    which = "unjudged (one sample per side)" if result.descriptive else "significant"
    per = "step" if result.sampling == "per step" else "sample"
    if top:
        charts.append(_bar_chart("chart-duration", f"Largest {which} changes in time per {per} (top {len(top)})",
                                 top, [c.delta for c in top], f"Δ time per {per}{unit}"))
    counted = sorted((c for c in result.changes if c.count_delta), key=lambda c: -abs(c.count_delta))[:TOP_BARS]
    if counted:
        charts.append(_bar_chart("chart-count", f"Largest changes in occurrences per step (top {len(counted)})",
                                 counted, [c.count_delta for c in counted], "Δ occurrences per step"))
    return charts


def render_diff_html(result: DiffResult, fail_on_regression: float | None = None, tool: str = "Profile",
                     extra: ExtraTable | None = None, gate: tuple[bool, str, str] | None = None) -> str:
    """The page as text; ``tool`` names the command in the title (``Profile``, ``nsys``, ``ncu``).

    ``extra`` adds a table below the rows (its first :data:`HTML_ROWS` rows); ``gate`` is a
    gate judged by the tool itself, ``(passed, threshold, text)``, instead of ``result.gate``.
    """
    from markupsafe import Markup

    from my_utils.profiling.reports.environment import environment
    from my_utils.profiling.reports.render import json_for_script, plotly_js

    shown, top, nested = rows(result, HTML_ROWS)
    if extra is None and result.operations is not None:  # the operation-matched diff (kineto.ops.op_diff)
        from my_utils.profiling.reports import ops_diff_rows

        extra = ExtraTable(f"{ops_diff_rows.TITLE}. {ops_diff_rows.summary_line(result.operations)}",
                           ops_diff_rows.HEADERS, ops_diff_rows.table_rows(result.operations))
    judged = result.gate(fail_on_regression) if fail_on_regression is not None else None
    if judged is not None:
        gate = (judged.passed, f"{judged.threshold:g}", judged.describe())
    charts = build_diff_charts(result)
    context = {
        "title": f"{tool} diff: {short_name(result.base, 120)} → {short_name(result.target, 120)}", "tool": tool,
        "headline": short_name(result.headline, 1500), "notes": [short_name(n, 600) for n in result.notes],
        "gpu": gpu_table(result), "accounting": accounting_rows(result),
        "accounting_title": accounting_title(result), "listing": listing_line(result, top, nested),
        "per": "step" if result.sampling == "per step" else "sample",
        "base": result.base, "target": result.target, "warnings": [short_name(w, 1200) for w in result.warnings],
        "hardware": hardware_rows(result), "step": step_line(result), "energy": energy_line(result),
        "gate": None if gate is None else {"threshold": gate[1], "passed": gate[0], "text": short_name(gate[2], 400)},
        "extra": None if extra is None else {"title": extra.title, "headers": extra.headers,
                                             "rows": extra.rows[:HTML_ROWS], "more": len(extra.rows) - HTML_ROWS},
        "hardware_differs": any("different hardware" in w for w in result.warnings),
        "rows": shown, "descriptive": result.descriptive, "top": top, "nested": nested, "names": len(result.changes),
        "more": top + nested - len(shown),
        "sigmas": f"{result.settings.get('sigmas', 3):g}", "min_pct": f"{result.settings.get('min_pct', 5):g}",
        "charts": [{"id": c.id, "title": c.title, "mark": c.mark, "marks": c.marks,
                    "json": Markup(json_for_script(c.figure_json()))} for c in charts],
        "plotly_js": Markup(plotly_js()),
    }
    return environment("html").get_template(TEMPLATE).render(context)


def write_diff_html(result: DiffResult, path: str | Path, fail_on_regression: float | None = None,
                    tool: str = "Profile") -> Path:
    """Render the page, then write it atomically to ``path`` (a failure writes nothing)."""
    text = render_diff_html(result, fail_on_regression, tool)
    target = Path(path)
    with atomic_write(target) as fh:
        fh.write(text)
    return target
