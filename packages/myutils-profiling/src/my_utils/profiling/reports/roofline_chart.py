"""The roofline chart: one point per operation and shape, placed by arithmetic intensity and achieved
throughput, sized by its GPU time, under the roofs of the GPU it ran on.

It reads ``kineto_op_shapes`` (``kineto.ops.breakdown``) and computes nothing new: x is the
modelled FLOPs per byte (the low end of the range), y the achieved TFLOP/s, the marker's area
its GPU time, the colour its category; each distinct roof of the rows (a dtype's peak and the
memory bandwidth) is drawn as ``min(peak, intensity × bandwidth)``. Work with no FLOPs (copies)
has no place on a log scale and is left out, as are rows the model could not cost; the note
says how much GPU time the chart shows. :func:`roofline_figure` gives the same figure as a
``plotly.graph_objects.Figure`` (the notebook API); the HTML report draws it with the others.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from my_utils.profiling.reports.palette import series_colour
from my_utils.profiling.reports.plot import Chart, layout, num, plot_text, value_axis

MAX_POINTS = 400
_CATEGORY_ORDER = ("gemm", "attention", "conv", "elementwise", "reduction", "norm", "softmax", "embedding",
                   "optimizer", "communication", "copy", "other", "inductor")


def roofline_chart_from_rows(rows: Sequence[Mapping[str, Any]], chart_id: str = "chart-roofline") -> Chart | None:
    """The chart of ``kineto_op_shapes`` rows (module docstring); None when no row can be placed."""
    placed = [r for r in rows if (num(r.get("intensity_low")) or 0) > 0 and (num(r.get("tflops")) or 0) > 0]
    if not placed:
        return None
    total = sum(num(r.get("gpu_us")) or 0.0 for r in rows)
    placed.sort(key=lambda r: -(num(r.get("gpu_us")) or 0.0))
    shown = placed[:MAX_POINTS]
    biggest = max(num(r.get("gpu_us")) or 0.0 for r in shown) or 1.0
    traces: list[dict[str, Any]] = []
    by_cat: dict[str, list[Mapping[str, Any]]] = {}
    for r in shown:
        by_cat.setdefault(str(r.get("category") or "other"), []).append(r)
    order = sorted(by_cat, key=lambda c: _CATEGORY_ORDER.index(c) if c in _CATEGORY_ORDER else 99)
    for i, cat in enumerate(order):
        pts = by_cat[cat]
        traces.append({
            "type": "scatter", "mode": "markers", "name": plot_text(cat),
            "x": [num(r.get("intensity_low")) for r in pts], "y": [num(r.get("tflops")) for r in pts],
            "marker": {"size": [6 + 34 * math.sqrt((num(r.get("gpu_us")) or 0.0) / biggest) for r in pts],
                       "color": series_colour(i), "opacity": 0.75, "line": {"width": 0.5, "color": "#333"}},
            "text": [plot_text(_hover(r)) for r in pts],
            "hovertemplate": "%{text}<extra></extra>"})
    xs = [num(r.get("intensity_low")) or 1.0 for r in shown]
    lo, hi = min(xs) / 4, max(xs) * 4
    roofs = {(num(r.get("peak_tflops")), num(r.get("bandwidth_gbps")), str(r.get("roof") or "")) for r in shown
             if num(r.get("peak_tflops")) and num(r.get("bandwidth_gbps"))}
    for peak, bw, label in sorted(roofs, key=lambda t: -(t[0] or 0)):
        if peak is None or bw is None:
            continue
        ridge = peak * 1e3 / bw  # FLOP per byte where the two roofs meet
        pts_x = [lo, *([ridge] if lo < ridge < hi else []), hi]
        traces.append({"type": "scatter", "mode": "lines", "name": plot_text(f"roof: {label}"),
                       "x": pts_x, "y": [min(peak, x * bw / 1e3) for x in pts_x],
                       "line": {"color": "#555", "dash": "dash", "width": 1}, "hoverinfo": "skip"})
    shown_us = sum(num(r.get("gpu_us")) or 0.0 for r in shown)
    note = (f"{len(shown)} operation shapes holding {100 * shown_us / total:.0f}% of the GPU time of the table's "
            f"rows" if total else "")
    title = "Operations against the roofline (achieved TFLOP/s by FLOPs per byte; marker area: GPU time)"
    figure = {"data": traces, "layout": layout(
        title, value_axis("arithmetic intensity (FLOP per byte, modelled)", type="log"),
        value_axis("achieved TFLOP/s", type="log"), showlegend=True, height=460)}
    # marks: the points a browser draws (plotly's ``.point`` elements, counted as for bars); the roofs are lines
    return Chart(chart_id, title, figure, "bar", len(shown), note, tuple(order))


def _hover(r: Mapping[str, Any]) -> str:
    pct_low, pct_high = num(r.get("roofline_pct_low")), num(r.get("roofline_pct_high"))
    roof = "" if pct_low is None else f"{pct_low:.0f}%" + ("" if pct_high is None or abs(pct_high - pct_low) < 0.5
                                                          else f"–{pct_high:.0f}%") + " of the roofline"
    return (f"{r.get('operator')} {r.get('input_dims') or ''}\n{r.get('calls')} calls, "
            f"{(num(r.get('gpu_us')) or 0) / 1e3:,.2f} ms, {num(r.get('tflops')) or 0:,.2f} TFLOP/s, "
            f"{num(r.get('gbps')) or 0:,.1f} GB/s\n{r.get('bound') or ''} {roof}").replace("\n", "<br>")


def roofline_chart(report: Any) -> Chart | None:
    """The chart of an analysis report's ``kineto_op_shapes`` table."""
    return roofline_chart_from_rows(list(report.tables.get("kineto_op_shapes") or []))


def roofline_figure(shapes: Any) -> Any:
    """The roofline as a ``plotly.graph_objects.Figure``, from ``op_shapes`` rows or their DataFrame."""
    import plotly.graph_objects as go

    rows = shapes.to_dict("records") if hasattr(shapes, "to_dict") else list(shapes)
    chart = roofline_chart_from_rows(rows)
    if chart is None:
        return go.Figure(layout={"title": {"text": "no operation could be placed on the roofline (no modelled FLOPs "
                                                    "with GPU time)"}})
    fig = go.Figure(chart.figure)
    fig.update_layout(title={"text": chart.title}, template=None)
    return fig
