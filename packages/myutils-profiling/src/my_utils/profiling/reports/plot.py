"""The chart primitives every report page draws with: plotly JSON, one look, one colour table.

A :class:`Chart` is plain plotly JSON (``{"data": [...], "layout": {...}}``) that a page embeds
as data and draws with the plotly.js inlined once; the Python ``plotly`` package is not needed
to build one. The primitives fix what every chart must do alike:

- value axes read like the tables: thousands separators, never e-notation (``exponentformat``
  ``none``), a unit in the axis title;
- a step axis has integer ticks only (``step_axis``);
- horizontal bar charts put their labels in a fixed left margin (short names) and the full
  name in the hover text (``hbar_facets``), one facet per rank or source on its own axis, each
  titled, so figures of different sources or step counts never share an axis unnamed;
- colours come from ``palette`` (one colour per category across all charts).

Every label read from the run is untrusted: plotly interprets a subset of HTML in text, so
``plot_text`` passes ``<``, ``>`` and ``&`` as entities and they show as the characters they are.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from my_utils.profiling.reports.downsample import minmax_downsample, split_budget
from my_utils.profiling.reports.palette import series_colour

#: Points one line chart may hold in all its traces (a few hundred KB of JSON at most).
MAX_POINTS_PER_CHART = 4000
#: Lines drawn in one chart; the rest are said in the chart's note.
MAX_TRACES = 32
#: Left margin (px) of a horizontal bar chart: room for a short name (``names.MAX_LABEL``).
LABEL_MARGIN = 380
#: Ticks a step axis shows at most.
MAX_STEP_TICKS = 12
FONT = {"family": "system-ui, sans-serif", "size": 12}
_BASE: dict[str, Any] = {"height": 340, "margin": {"l": 70, "r": 20, "t": 24, "b": 50}, "template": None,
                         "paper_bgcolor": "#ffffff", "plot_bgcolor": "#f7f7f9", "font": FONT,
                         "separators": ".,", "hoverlabel": {"namelength": -1}}


@dataclass(frozen=True)
class Chart:
    """One chart of a report: its DOM id, title, plotly JSON and what drawing it must show.

    ``marks`` is the number of SVG marks a browser draws for it: bars (``mark == "bar"``,
    plotly's ``.point`` elements) or line traces (``mark == "line"``, ``.scatterlayer .trace``).
    ``note`` says what was left out, downsampled or how figures were combined; ``labels`` are the
    category labels a reader sees on its axis (what a browser test looks for).
    """

    id: str
    title: str
    figure: Mapping[str, Any]
    mark: str
    marks: int
    note: str = ""
    labels: tuple[str, ...] = field(default_factory=tuple)

    def figure_json(self) -> str:
        """The figure as strict JSON text (non-finite numbers become null: gaps in the line)."""
        return json.dumps(self.figure, allow_nan=False, separators=(",", ":"), ensure_ascii=False)


def plot_text(value: Any) -> str:
    """``value`` as plotly text: its HTML-like markup becomes entities, so it shows literally."""
    return str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def num(value: Any) -> float | None:
    """A finite float rounded to 6 significant digits (smaller JSON), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    v = float(value)
    return float(f"{v:.6g}") if math.isfinite(v) else None


def value_axis(title: str, **extra: Any) -> dict[str, Any]:
    """A numeric axis: separators, no e-notation, ``title`` (with its unit)."""
    axis = {"title": {"text": plot_text(title)}, "separatethousands": True, "exponentformat": "none",
            "automargin": True, "zeroline": True}
    axis.update(extra)
    return axis


def step_axis(steps: Sequence[float], title: str = "step") -> dict[str, Any]:
    """An axis of step numbers: integer ticks only (``dtick`` a whole number), no separators."""
    whole = [int(s) for s in steps if float(s).is_integer()]
    axis: dict[str, Any] = {"title": {"text": plot_text(title)}, "tickformat": "d", "separatethousands": False}
    if whole:
        lo, hi = min(whole), max(whole)
        axis.update(tickmode="linear", tick0=lo, dtick=max(1, math.ceil((hi - lo + 1) / MAX_STEP_TICKS)))
        if lo == hi:
            axis["range"] = [lo - 1, hi + 1]
    return axis


def category_axis(**extra: Any) -> dict[str, Any]:
    """An axis of labels (ranks, names): never read as numbers."""
    axis: dict[str, Any] = {"type": "category", "automargin": True}
    axis.update(extra)
    return axis


def layout(title: str, xaxis: Mapping[str, Any], yaxis: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    """The base look with the two axes; ``title`` is kept as the figure's ``meta`` (the page shows it as a heading)."""
    out = dict(_BASE, meta={"title": plot_text(title)}, xaxis=dict(xaxis), yaxis=dict(yaxis))
    out.update(extra)
    return out


def lines(chart_id: str, title: str, groups: Mapping[str, tuple[list[float], list[float]]], y_title: str,
          note: str = "", colours: Mapping[str, str] | None = None, x_title: str = "step",
          dashes: Mapping[str, str] | None = None) -> Chart:
    """A line chart of named series over steps (integer ticks), downsampled to the chart's point budget.

    ``colours`` / ``dashes`` (plotly's ``solid``, ``dash``, ``dot``...) by series name; a series
    without a colour takes the next of the series colours.
    """
    names = list(groups)[:MAX_TRACES]
    budget = split_budget(MAX_POINTS_PER_CHART, len(names))
    traces: list[dict[str, Any]] = []
    before = after = 0
    all_x: list[float] = []
    for i, name in enumerate(names):
        xs, ys = groups[name]
        sx, sy = minmax_downsample(xs, ys, budget)
        before += len(xs)
        after += len(sx)
        all_x.extend(sx[:1] + sx[-1:])
        colour = (colours or {}).get(name) or series_colour(i)
        traces.append({"type": "scatter", "mode": "lines+markers" if len(sx) <= 40 else "lines",
                       "name": plot_text(name), "x": sx, "y": sy,
                       "line": {"color": colour, "dash": (dashes or {}).get(name) or "solid"},
                       "marker": {"color": colour, "size": 5},
                       "hovertemplate": f"{plot_text(name)}<br>step %{{x:d}}: %{{y:,.2f}} {plot_text(y_title)}"
                                        "<extra></extra>"})
    notes = [note] if note else []
    if len(groups) > len(names):
        notes.append(f"{len(names)} of {len(groups)} series shown")
    if after < before:
        notes.append(f"downsampled from {before:,} to {after:,} points (each bucket's min and max kept)")
    figure = {"data": traces, "layout": layout(title, step_axis(all_x, x_title), value_axis(y_title),
                                               showlegend=len(traces) > 1)}
    return Chart(chart_id, title, figure, "line", len(traces), "; ".join(notes), tuple(names))


@dataclass(frozen=True)
class Facet:
    """One panel of a horizontal bar chart: its title and bars (label, value, hover, colour category).

    Hover texts are plain text (escaped when drawn); a newline starts a new hover line.
    """

    title: str
    labels: Sequence[str]
    values: Sequence[float | None]
    hover: Sequence[str]
    categories: Sequence[str] = ()
    x_title: str = "ms"


def hbar_facets(chart_id: str, title: str, facets: Sequence[Facet], colour_of: Any, note: str = "",
                order: Sequence[str] | None = None, stacked_facets: bool = False) -> Chart:
    """Horizontal bars, largest on top, labels in a fixed left margin, one facet per rank or source.

    Side by side (the default) the facets share one label axis (``order`` lists every label,
    top first; a facet may hold a subset): the same kernels on every rank. With
    ``stacked_facets`` each facet has its own labels and axes, one above the other: sections of
    different sources. ``colour_of`` maps a bar's category (kernel kind, source) to its colour;
    the legend shows each category once. Each facet's value axis is titled with what it measures.
    """
    n = max(1, len(facets))
    traces: list[dict[str, Any]] = []
    axes: dict[str, Any] = {}
    annotations: list[dict[str, Any]] = []
    shown_legend: set[str] = set()
    marks = 0
    shared = list(order) if order is not None else list(dict.fromkeys(x for f in facets for x in f.labels))
    rows = sum(len(f.labels) for f in facets) if stacked_facets else len(shared)
    height = max(240, 150 + 24 * rows + (60 * (n - 1) if stacked_facets else 0))
    gap_px = 60
    top = 1.0
    gap = 0.04 if n > 1 else 0.0
    width = (1.0 - gap * (n - 1)) / n
    for i, facet in enumerate(facets):
        suffix = "" if i == 0 else str(i + 1)
        if stacked_facets:
            share = (24 * len(facet.labels) + 10) / (height - 150)
            y_domain = [max(0.0, top - share), top]
            x_domain = [0.0, 1.0]
            top = y_domain[0] - gap_px / (height - 150)
            labels = list(facet.labels)
            axes[f"yaxis{suffix}"] = category_axis(
                categoryorder="array", categoryarray=[plot_text(x) for x in labels[::-1]], automargin=False,
                tickfont={"size": 11}, domain=y_domain, anchor=f"x{suffix}")
            x_anchor = f"y{suffix}"
            title_at = {"x": 0.5, "y": y_domain[1]}
        else:
            lo = i * (width + gap)
            x_domain = [lo, lo + width]
            x_anchor = "y"
            title_at = {"x": lo + width / 2, "y": 1.0}
        # stacked: the unit goes in the facet's title (an axis title would run into the next facet's)
        axes[f"xaxis{suffix}"] = value_axis("" if stacked_facets else facet.x_title, domain=x_domain,
                                            anchor=x_anchor, rangemode="tozero")
        if i and not stacked_facets:  # ranks side by side: one scale, so equal bars mean equal times
            axes[f"xaxis{suffix}"]["matches"] = "x"
        heading = f"{facet.title} · {facet.x_title}" if stacked_facets else facet.title
        annotations.append({"text": plot_text(heading), **title_at, "xref": "paper", "yref": "paper",
                            "yanchor": "bottom", "showarrow": False, "font": {"size": 12, "color": "#333"}})
        cats = list(facet.categories) or [""] * len(facet.labels)
        by_cat: dict[str, list[int]] = {}
        for j, c in enumerate(cats):
            by_cat.setdefault(c, []).append(j)
        for cat, idx in by_cat.items():
            traces.append({"type": "bar", "orientation": "h", "name": plot_text(cat or facet.title),
                           "y": [plot_text(facet.labels[j]) for j in idx], "x": [facet.values[j] for j in idx],
                           "hovertext": [plot_text(facet.hover[j]).replace("\n", "<br>") for j in idx],
                           "hoverinfo": "text",
                           "marker": {"color": colour_of(cat)}, "xaxis": f"x{suffix}",
                           "yaxis": f"y{suffix}" if stacked_facets else "y", "legendgroup": plot_text(cat),
                           "showlegend": bool(cat) and cat not in shown_legend})
            shown_legend.add(cat)
            marks += len(idx)
    if not stacked_facets:
        axes["yaxis"] = category_axis(categoryorder="array", categoryarray=[plot_text(x) for x in shared[::-1]],
                                      automargin=False, tickfont={"size": 11})
    labels_seen = shared if not stacked_facets else [x for f in facets for x in f.labels]
    fig_layout = layout(title, axes.pop("xaxis"), axes.pop("yaxis"), height=height,
                        margin=dict(_BASE["margin"], l=LABEL_MARGIN, t=30, b=50 if stacked_facets else 120), barmode="overlay",
                        annotations=annotations,
                        showlegend=not stacked_facets and len(shown_legend - {""}) > 1,
                        legend={"orientation": "h", "x": 0, "y": -70 / (height - 150), "yanchor": "top"})
    fig_layout.update(axes)
    return Chart(chart_id, title, {"data": traces, "layout": fig_layout}, "bar", marks, note, tuple(labels_seen))


def stacked(chart_id: str, title: str, categories: Sequence[str], series: Mapping[str, Sequence[float]],
            y_title: str, colour_of: Any, note: str = "", hover_unit: str = "") -> Chart:
    """Stacked vertical bars: one trace per series (coloured by ``colour_of(series name)``), one bar per category."""
    unit = plot_text(hover_unit or y_title)
    traces = [{"type": "bar", "name": plot_text(name), "x": [plot_text(c) for c in categories], "y": list(values),
               "marker": {"color": colour_of(name)},
               "hovertemplate": f"%{{x}} · {plot_text(name)}: %{{y:,.2f}} {unit}<extra></extra>"}
              for name, values in series.items()]
    fig_layout = layout(title, category_axis(), value_axis(y_title), barmode="stack",
                        legend={"traceorder": "normal"})
    return Chart(chart_id, title, {"data": traces, "layout": fig_layout}, "bar", len(categories) * len(series), note,
                 tuple(categories))
