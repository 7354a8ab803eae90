"""Chart specifications (plotly JSON) built from an ``AnalysisReport``'s tables.

Each chart is plain plotly JSON (``{"data": [...], "layout": {...}}``) so that the HTML
template embeds it as data and one script draws every chart with the plotly.js inlined
once per report; the Python ``plotly`` package is not needed to build them. A chart is
made only when its table has rows; series longer than the point budget are downsampled
(``downsample.minmax_downsample``: spikes survive), so the report's size does not grow
with the run's length.

Every label read from the run (an operation, a kernel, a memory gauge) is untrusted:
plotly interprets a subset of HTML in text, so ``<``, ``>`` and ``&`` are passed as entities
and show as the characters they are.

Tables read (``my_utils.profiling.analysis.model`` documents them): ``steps`` (step-time
timeline), ``operations`` (per-section breakdown and, without a Kineto kernel table, top
kernels), ``ranks`` (rank comparison), ``memory`` (memory trend) and the Kineto analyses'
``kineto_top_kernels``, ``kineto_temporal``, ``kineto_kernel_kinds`` and ``kineto_idle``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from my_utils.profiling.analysis.model import AnalysisReport
from my_utils.profiling.analysis.rules._series import AGGREGATE_PREFIXES, GPU_FAMILIES, STEP_TIME
from my_utils.profiling.reports.downsample import minmax_downsample, split_budget

#: Points one line chart may hold in all its traces (a few hundred KB of JSON at most).
MAX_POINTS_PER_CHART = 4000
#: Lines drawn in one chart; the rest are said in the chart's note.
MAX_TRACES = 32
#: Bars in a top-N chart.
TOP_BARS = 15
_BYTES = {"b": 1.0, "byte": 1.0, "bytes": 1.0, "kb": 1e3, "mb": 1e6, "gb": 1e9, "kib": 1024.0,
          "mib": 1024.0 ** 2, "gib": 1024.0 ** 3}
_LAYOUT: dict[str, Any] = {"height": 360, "margin": {"l": 60, "r": 20, "t": 40, "b": 50},
                           "template": None, "paper_bgcolor": "#ffffff", "plot_bgcolor": "#f7f7f9",
                           "font": {"family": "system-ui, sans-serif", "size": 12}}


@dataclass(frozen=True)
class Chart:
    """One chart of a report: its DOM id, title, plotly JSON and what drawing it must show.

    ``marks`` is the number of SVG marks a browser draws for it: bars (``mark == "bar"``,
    plotly's ``.point`` elements) or line traces (``mark == "line"``, ``.scatterlayer .trace``).
    ``note`` says what was left out or downsampled.
    """

    id: str
    title: str
    figure: Mapping[str, Any]
    mark: str
    marks: int
    note: str = ""

    def figure_json(self) -> str:
        """The figure as strict JSON text (non-finite numbers become null: gaps in the line)."""
        return json.dumps(self.figure, allow_nan=False, separators=(",", ":"), ensure_ascii=False)


def plot_text(value: Any) -> str:
    """``value`` as plotly text: its HTML-like markup becomes entities, so it shows literally."""
    return str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _num(value: Any) -> float | None:
    """A finite float rounded to 6 significant digits (smaller JSON), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    v = float(value)
    return float(f"{v:.6g}") if math.isfinite(v) else None


def _rank_text(rank: Any) -> str:
    return f"rank {rank}" if rank is not None else "no rank"


def _layout(title: str, x_title: str, y_title: str, **extra: Any) -> dict[str, Any]:
    layout = dict(_LAYOUT, title={"text": plot_text(title)}, xaxis={"title": {"text": plot_text(x_title)}},
                  yaxis={"title": {"text": plot_text(y_title)}})
    layout.update(extra)
    return layout


def _label(value: Any) -> int | str | None:
    """A grouping key from a table cell: ints and None as they are, anything else as text (rows are untrusted)."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _group(rows: Iterable[Mapping[str, Any]], keys: Sequence[str]) -> dict[tuple[Any, ...], list[Mapping[str, Any]]]:
    out: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for row in rows:
        out.setdefault(tuple(_label(row.get(k)) for k in keys), []).append(row)
    return out


def _lines(chart_id: str, title: str, groups: Mapping[str, tuple[list[float], list[float]]], x_title: str,
           y_title: str) -> Chart:
    """A line chart of named series, downsampled to the chart's point budget."""
    names = list(groups)[:MAX_TRACES]
    budget = split_budget(MAX_POINTS_PER_CHART, len(names))
    traces: list[dict[str, Any]] = []
    before = after = 0
    for name in names:
        xs, ys = groups[name]
        sx, sy = minmax_downsample(xs, ys, budget)
        before += len(xs)
        after += len(sx)
        traces.append({"type": "scatter", "mode": "lines", "name": plot_text(name), "x": sx, "y": sy})
    notes = []
    if len(groups) > len(names):
        notes.append(f"{len(names)} of {len(groups)} series shown")
    if after < before:
        notes.append(f"downsampled from {before} to {after} points (each bucket's min and max kept)")
    figure = {"data": traces, "layout": _layout(title, x_title, y_title, showlegend=len(traces) > 1)}
    return Chart(chart_id, title, figure, "line", len(traces), "; ".join(notes))


def _bars(chart_id: str, title: str, labels: Sequence[str], values: Sequence[float | None], x_title: str,
          hover: Sequence[str] | None = None, note: str = "") -> Chart:
    """Horizontal bars, largest on top."""
    trace: dict[str, Any] = {"type": "bar", "orientation": "h", "y": [plot_text(x) for x in labels][::-1],
                             "x": list(values)[::-1], "marker": {"color": "#4C78A8"}}
    if hover is not None:
        trace["hovertext"] = [plot_text(h) for h in hover][::-1]
    height = max(220, 60 + 24 * len(labels))
    layout = _layout(title, x_title, "", height=height, margin=dict(_LAYOUT["margin"], l=260),
                     yaxis={"automargin": True, "type": "category"})
    return Chart(chart_id, title, {"data": [trace], "layout": layout}, "bar", len(labels), note)


def scores_chart(report: AnalysisReport) -> Chart | None:
    """Scores 0–100, overall first."""
    if not report.scores:
        return None
    names = sorted(report.scores, key=lambda k: (k != "overall", k))
    values = [_num(report.scores[k]) for k in names]
    trace = {"type": "bar", "x": names, "y": values, "text": [f"{v:.3g}" if v is not None else "" for v in values],
             "textposition": "auto",
             "marker": {"color": ["#54A24B" if (v or 0) >= 80 else "#ECA82C" if (v or 0) >= 50 else "#E45756"
                                  for v in values]}}
    layout = _layout("Scores (0-100)", "", "score", yaxis={"range": [0, 100], "title": {"text": "score"}})
    return Chart("chart-scores", "Scores", {"data": [trace], "layout": layout}, "bar", len(names))


def step_time_chart(report: AnalysisReport) -> Chart | None:
    """Step time per step, one line per (source, rank)."""
    rows = report.tables.get("steps") or []
    unit = str(report.summary.get("time_unit", "ms"))
    groups: dict[str, tuple[list[float], list[float]]] = {}
    for (source, rank), group in _group(rows, ("source", "rank")).items():
        pts = sorted((r["step"], v) for r in group if _num(r.get("step")) is not None
                     and (v := _num(r.get("step_time"))) is not None)
        if pts:
            label = f"{_rank_text(rank)} ({source})" if source else _rank_text(rank)
            groups[label] = ([p[0] for p in pts], [p[1] for p in pts])
    if not groups:
        return None
    return _lines("chart-step-time", "Step time", groups, "step", unit)


def _is_section(name: str) -> bool:
    return (name != STEP_TIME and not name.startswith(AGGREGATE_PREFIXES) and not name.startswith(GPU_FAMILIES)
            and not name.startswith("ncu"))


def sections_chart(report: AnalysisReport) -> Chart | None:
    """Where the time goes: total per section (timed region or operator), the largest first."""
    rows = [r for r in report.tables.get("operations") or [] if isinstance(r.get("name"), str) and r["name"]
            and _is_section(r["name"]) and _num(r.get("total")) is not None]
    if not rows:
        return None
    rows.sort(key=lambda r: -float(r["total"]))
    top = rows[:TOP_BARS]
    labels = [f"{r['name']} ({r.get('source', '')})" if r.get("source") else str(r["name"]) for r in top]
    hover = [f"{r['name']}: total {_num(r['total'])} {r.get('unit', '')}, {r.get('count', '?')} events"
             + (f", {100 * float(r['share']):.1f}% of step time" if _num(r.get("share")) is not None else "")
             for r in top]
    note = f"top {len(top)} of {len(rows)} sections" if len(rows) > len(top) else ""
    unit = str(top[0].get("unit", "ms"))
    return _bars("chart-sections", "Per-section breakdown (total time)", labels, [_num(r["total"]) for r in top],
                 unit, hover, note)


def ranks_chart(report: AnalysisReport) -> Chart | None:
    """Mean step time per rank: a straggler stands out."""
    rows = [r for r in report.tables.get("ranks") or [] if _num(r.get("mean_step_time")) is not None]
    if not rows:
        return None
    unit = str(report.summary.get("time_unit", "ms"))
    labels = [_rank_text(r.get("rank")) for r in rows]
    trace = {"type": "bar", "x": labels, "y": [_num(r["mean_step_time"]) for r in rows],
             "hovertext": [f"{_rank_text(r.get('rank'))}: {r.get('steps', '?')} steps, median "
                           f"{_num(r.get('median_step_time'))} {unit}" for r in rows],
             "marker": {"color": "#72B7B2"}}
    layout = _layout("Mean step time per rank", "", unit, xaxis={"type": "category"})
    return Chart("chart-ranks", "Rank comparison", {"data": [trace], "layout": layout}, "bar", len(rows))


def memory_chart(report: AnalysisReport) -> Chart | None:
    """Memory levels per step, one line per (gauge, rank), in MiB when the unit is bytes."""
    rows = report.tables.get("memory") or []
    groups: dict[str, tuple[list[float], list[float]]] = {}
    scaled = False
    for (name, rank, unit), group in _group(rows, ("name", "rank", "unit")).items():
        factor = _BYTES.get(str(unit).lower())
        scaled = scaled or factor is not None
        scale = factor / 1024.0 ** 2 if factor else 1.0
        pts = sorted((r["step"], float(f"{r['value'] * scale:.6g}")) for r in group
                     if _num(r.get("step")) is not None and _num(r.get("value")) is not None)
        if pts:
            groups[f"{name} ({_rank_text(rank)})"] = ([p[0] for p in pts], [p[1] for p in pts])
    if not groups:
        return None
    return _lines("chart-memory", "Memory trend", groups, "step", "MiB" if scaled else "value")


def _kineto_rows(report: AnalysisReport, table: str) -> list[dict[str, Any]]:
    """The rows of ``kineto_<table>``: the all-ranks rows (``rank`` None) when there are any, else every rank's."""
    rows = report.tables.get(f"kineto_{table}") or []
    combined = [r for r in rows if r.get("rank") is None]
    return combined or list(rows)


def kernel_rows(report: AnalysisReport) -> tuple[list[dict[str, Any]], str]:
    """Kernels by total GPU time (name, total, unit): ``kineto_top_kernels`` summed over ranks, else ``kernel:`` operations."""
    kineto = _kineto_rows(report, "top_kernels")
    if kineto:
        totals: dict[str, float] = {}
        for r in kineto:
            value = _num(r.get("total_us"))
            if r.get("name") is not None and value is not None:
                totals[str(r["name"])] = totals.get(str(r["name"]), 0.0) + value
        return [{"name": k, "total": v / 1e3, "unit": "ms"} for k, v in totals.items()], "kineto_top_kernels"
    rows = [{"name": str(r["name"])[len("kernel:"):], "total": r.get("total"), "unit": r.get("unit", "ms")}
            for r in report.tables.get("operations") or [] if str(r.get("name", "")).startswith("kernel:")]
    return rows, "operations"


def _stacked(chart_id: str, title: str, categories: Sequence[str], series: Mapping[str, Sequence[float]],
             y_title: str, note: str = "") -> Chart:
    """Stacked vertical bars: one trace per series, one bar per category in each (missing values are 0)."""
    traces = [{"type": "bar", "name": plot_text(name), "x": [plot_text(c) for c in categories], "y": list(values)}
              for name, values in series.items()]
    layout = _layout(title, "", y_title, barmode="stack", xaxis={"type": "category"})
    return Chart(chart_id, title, {"data": traces, "layout": layout}, "bar", len(categories) * len(series), note)


def _per_rank(rows: Sequence[Mapping[str, Any]], key: str, value: str,
              all_ranks: bool = False) -> tuple[list[str], dict[str, list[float]]]:
    """``rows`` (rank, key, value) pivoted: rank labels and, per ``key`` value, the summed ``value`` per rank.

    The all-ranks rows (``rank`` None) are kept only with ``all_ranks`` (shares) or when no
    rank has its own rows: beside per-rank times, a sum over ranks would dwarf them.
    """
    if not all_ranks and any(r.get("rank") is not None for r in rows):
        rows = [r for r in rows if r.get("rank") is not None]
    # ranks read from a file may be anything: ints in order, then the rest by text, then None
    ranks = sorted({_label(r.get("rank")) for r in rows},
                   key=lambda x: (x is None, not isinstance(x, int), x if isinstance(x, int) else 0, str(x)))
    index = {rank: i for i, rank in enumerate(ranks)}
    series: dict[str, list[float]] = {}
    for r in rows:
        v = _num(r.get(value))
        if v is None:
            continue
        column = series.setdefault(str(_label(r.get(key))), [0.0] * len(ranks))
        column[index[_label(r.get("rank"))]] += v
    labels = [_rank_text(rank) if rank is not None else "all ranks" for rank in ranks]
    return labels, series


def temporal_chart(report: AnalysisReport) -> Chart | None:
    """Kineto temporal breakdown per rank: idle, compute and non-compute shares of the GPU's span."""
    rows = list(report.tables.get("kineto_temporal") or [])
    if not rows:
        return None
    long = [{"rank": r.get("rank"), "part": part.replace("_", "-"), "pct": r.get(f"{part}_pct")}
            for r in rows for part in ("compute", "non_compute", "idle")]
    labels, series = _per_rank(long, "part", "pct", all_ranks=True)
    return _stacked("chart-temporal", "GPU time: compute / non-compute / idle (%)", labels, series, "% of span")


def kernel_kinds_chart(report: AnalysisReport) -> Chart | None:
    """Kineto kernel breakdown per rank: computation, communication and memory kernels."""
    rows = list(report.tables.get("kineto_kernel_kinds") or [])
    if not rows:
        return None
    labels, series = _per_rank(rows, "kind", "total_us")
    series = {k: [v / 1e3 for v in values] for k, values in series.items()}
    return _stacked("chart-kernel-kinds", "GPU kernel time by kind (ms)", labels, series, "ms")


def idle_chart(report: AnalysisReport) -> Chart | None:
    """Kineto idle-time breakdown per rank (all streams): host wait, kernel wait, other."""
    rows = list(report.tables.get("kineto_idle") or [])
    if not rows:
        return None
    labels, series = _per_rank(rows, "category", "idle_us")
    series = {k.replace("_", " "): [v / 1e3 for v in values] for k, values in series.items()}
    return _stacked("chart-idle", "GPU idle time by cause (ms)", labels, series, "ms")


def kernels_chart(report: AnalysisReport) -> Chart | None:
    """The GPU kernels that took the most time in all."""
    rows, table = kernel_rows(report)
    rows = [r for r in rows if _num(r.get("total")) is not None]
    if not rows:
        return None
    rows.sort(key=lambda r: -float(r["total"]))
    top = rows[:TOP_BARS]
    note = f"top {len(top)} of {len(rows)} kernels (from {table})"
    return _bars("chart-kernels", "Top kernels (GPU time)", [str(r["name"]) for r in top],
                 [_num(r["total"]) for r in top], str(top[0]["unit"]), [str(r["name"]) for r in top], note)


def build_charts(report: AnalysisReport) -> list[Chart]:
    """Every chart the report's data allows, in reading order."""
    makers = (scores_chart, step_time_chart, sections_chart, ranks_chart, memory_chart, kernels_chart,
              temporal_chart, kernel_kinds_chart, idle_chart)
    return [c for c in (make(report) for make in makers) if c is not None]
