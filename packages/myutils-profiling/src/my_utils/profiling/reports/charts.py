"""The charts of an analysis report, each drawn from one of the report's tables (``plot`` draws).

A chart is made only when its table has rows; nothing here computes a new figure: bars and
lines show the table's numbers (µs shown as ms), and every chart says where its numbers come
from and how they were combined (one rank, one stream, one source). Figures of different
sources or step counts never share an axis unnamed: the section breakdown has one facet per
source, titled with its step count; the top kernels one facet per rank.

Tables read (``my_utils.profiling.model.report`` documents them): ``steps`` (step-time
timeline), ``operations`` (per-section breakdown; kernels when there is no Kineto table),
``ranks`` (rank comparison), ``memory`` (memory trend) and the Kineto analyses'
``kineto_top_kernels``, ``kineto_temporal``, ``kineto_kernel_kinds``, ``kineto_idle`` (per
stream) and ``kineto_idle_device`` (device level).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from my_utils.profiling.analysis.rules._series import AGGREGATE_PREFIXES, GPU_FAMILIES, STEP_TIME
from my_utils.profiling.model.report import AnalysisReport
from my_utils.profiling.reports.formatting import fmt_count, fmt_ms, source_label
from my_utils.profiling.reports.names import ellipsize, short_names
from my_utils.profiling.reports.palette import colour, series_colour
from my_utils.profiling.reports.plot import Chart, Facet, hbar_facets, lines, num, stacked

__all__ = ["Chart", "build_charts", "plot_text"]

from my_utils.profiling.reports.plot import plot_text

#: Bars in a top-N chart.
TOP_BARS = 15
#: Ranks drawn side by side in a per-rank chart; more ranks show the all-ranks rows.
MAX_FACETS = 4
_BYTES = {"b": 1.0, "byte": 1.0, "bytes": 1.0, "kb": 1e3, "mb": 1e6, "gb": 1e9, "kib": 1024.0,
          "mib": 1024.0 ** 2, "gib": 1024.0 ** 3}
_IDLE_NAMES = {"host_wait": "host wait", "kernel_wait": "kernel wait", "other": "other idle"}


def _rank_text(rank: Any) -> str:
    return f"rank {rank}" if rank is not None else "all ranks"


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


def _rank_order(ranks: Iterable[Any]) -> list[Any]:
    # ranks read from a file may be anything: ints in order, then the rest by text, then None
    return sorted(set(ranks), key=lambda x: (x is None, not isinstance(x, int), x if isinstance(x, int) else 0,
                                             str(x)))


#: Line dashes of the step-time sources, in order of first appearance (MyTimer solid, torch.profiler dashed...).
_SOURCE_DASHES = ("solid", "dash", "dot", "dashdot")


def step_time_chart(report: AnalysisReport) -> Chart | None:
    """Step time per step, one line per (rank, source), each with its own colour, a dash per source and a legend
    entry; the note gives each source's step count."""
    rows = report.tables.get("steps") or []
    unit = str(report.summary.get("time_unit", "ms"))
    groups: dict[str, tuple[list[float], list[float]]] = {}
    keys: dict[str, tuple[Any, Any]] = {}
    steps_of: dict[str, set[Any]] = {}
    ranks = _rank_order(_label(r.get("rank")) for r in rows)
    for (source, rank), group in _group(rows, ("source", "rank")).items():
        pts = sorted((r["step"], v) for r in group if num(r.get("step")) is not None
                     and (v := num(r.get("step_time"))) is not None)
        if pts:
            label = f"{_rank_text(rank)} · {source_label(source)}" if source else _rank_text(rank)
            groups[label] = ([p[0] for p in pts], [p[1] for p in pts])
            keys[label] = (rank, source)
            steps_of.setdefault(source_label(source), set()).update(p[0] for p in pts)
    if not groups:
        return None
    sources = list(dict.fromkeys(source for _rank, source in keys.values()))
    # one source: a colour per rank, as on the other per-rank charts; several: a colour per series, so that a
    # rank's MyTimer and torch.profiler lines never share one, and a dash per source
    series = sorted(keys, key=lambda n: (ranks.index(keys[n][0]), sources.index(keys[n][1])))
    colours = {n: series_colour(ranks.index(keys[n][0]) if len(sources) == 1 else i) for i, n in enumerate(series)}
    dashes = {n: _SOURCE_DASHES[sources.index(keys[n][1]) % len(_SOURCE_DASHES)] for n in series}
    note = "; ".join(f"{s}: {fmt_count(len(v))} steps" for s, v in steps_of.items()) if len(steps_of) > 1 else ""
    return lines("chart-step-time", f"Step time ({unit} per step)", {n: groups[n] for n in series}, unit, note,
                 colours, dashes=dashes)


def _is_section(name: str) -> bool:
    return (name != STEP_TIME and not name.startswith(AGGREGATE_PREFIXES) and not name.startswith(GPU_FAMILIES)
            and not name.startswith("ncu"))


def _tree_order(rows: list[Mapping[str, Any]]) -> tuple[list[Mapping[str, Any]], list[int], str] | None:
    """Rows as a hierarchy and their depths: a tree from ``path`` (``iter/forward``), else levels from ``depth``.

    With paths, each parent comes before its children (the larger first); with depths only
    (MyTimer's nesting level, no parent named), the rows are listed level by level. None when
    the rows carry neither (torch operators: inclusive times, said in the chart's note).
    """
    def mean(r: Mapping[str, Any]) -> float:
        return -float(num(r.get("mean")) or 0.0)

    paths = {str(r["path"]): r for r in rows if isinstance(r.get("path"), str) and r["path"]}
    if paths and len(paths) == len(rows):
        children: dict[str, list[str]] = {}
        for p in paths:
            parent = p.rsplit("/", 1)[0] if "/" in p else ""
            children.setdefault(parent if parent in paths else "", []).append(p)
        order: list[Mapping[str, Any]] = []
        depths: list[int] = []

        def walk(parent: str, depth: int) -> None:
            for p in sorted(children.get(parent, ()), key=lambda q: mean(paths[q])):
                order.append(paths[p])
                depths.append(depth)
                walk(p, depth + 1)

        walk("", 0)
        return order, depths, "tree"
    if rows and all(isinstance(r.get("depth"), int) and not isinstance(r.get("depth"), bool) for r in rows):
        levels = sorted(rows, key=lambda r: (int(r["depth"]), mean(r)))
        return levels, [int(r["depth"]) for r in levels], "levels"
    return None


def sections_chart(report: AnalysisReport) -> Chart | None:
    """Where a step's time goes: mean per step of each section, one facet per source (titled with its steps).

    With the regions' ``path`` the bars are a hierarchy (children indented under their parent,
    a parent's bar includes its children); without it, the note says the times are inclusive.
    """
    rows = [r for r in report.tables.get("operations") or [] if isinstance(r.get("name"), str) and r["name"]
            and _is_section(r["name"]) and num(r.get("mean")) is not None]
    if not rows:
        return None
    facets: list[Facet] = []
    notes: list[str] = []
    for (source,), group in _group(rows, ("source",)).items():
        group = sorted(group, key=lambda r: -float(r["mean"]))
        tree = _tree_order(group)
        if tree is not None:
            picked, depths = tree[0][:TOP_BARS], tree[1][:TOP_BARS]
            if tree[2] == "levels" and max(depths, default=0) > 0:
                notes.append(f"{source_label(source)}: regions by nesting level (└ nested); a region's bar includes "
                             "the regions nested in it")
        else:
            picked, depths = group[:TOP_BARS], [0] * min(TOP_BARS, len(group))
            if any(r.get("self_mean") is None for r in picked):
                notes.append(f"{source_label(source)}: inclusive times (a section includes what runs inside it)")
        steps = max((int(r.get("steps") or 0) for r in picked), default=0)
        ranks = sorted({x for r in picked for x in (r.get("ranks") or []) if isinstance(x, int)})
        if len(ranks) > 1:
            basis = f"mean of {fmt_count(steps)} (rank, step) values, ranks {', '.join(map(str, ranks))}"
        else:
            basis = (f"rank {ranks[0]} · " if ranks else "") + f"{fmt_count(steps)} steps"
        unit = str(picked[0].get("unit", "ms"))
        labels = [("\u2003" * d + ("└ " if d else "")) + ellipsize(str(r["name"]), 48)
                  for r, d in zip(picked, depths, strict=True)]
        hover = [f"{r['name']} ({source_label(source)}): {fmt_ms(r.get('mean'), unit)} per step, "
                 f"{fmt_ms(r.get('total'), unit)} in {fmt_count(r.get('steps'))} steps, "
                 f"{fmt_count(r.get('count'))} events" for r in picked]
        facets.append(Facet(f"{source_label(source)} · {basis}", labels,
                            [num(r["mean"]) for r in picked], hover, [str(source)] * len(picked),
                            f"{unit} per step (mean)"))
        if len(group) > len(picked):
            notes.append(f"{source_label(source)}: top {len(picked)} of {len(group)} sections")
    return hbar_facets("chart-sections", "Where a step's time goes (mean per step, by source)", facets, colour,
                       "; ".join(notes), stacked_facets=True)


def ranks_chart(report: AnalysisReport) -> Chart | None:
    """Median step time per rank, one bar per (rank, source of step times): a straggler stands out."""
    rows = [r for r in report.tables.get("ranks") or [] if num(r.get("median_step_time", r.get("mean_step_time")))
            is not None and r.get("rank") is not None]
    if len({_label(r.get("rank")) for r in rows}) < 2:
        return None  # one rank: nothing to compare (its step time is in the headline and the table)
    unit = str(report.summary.get("time_unit", "ms"))
    traces = []
    marks = 0
    for (source,), group in _group(rows, ("source",)).items():
        name = source_label(source) if source else "step time"
        key = "median_step_time" if all(r.get("median_step_time") is not None for r in group) else "mean_step_time"
        traces.append({"type": "bar", "name": name, "x": [_rank_text(r.get("rank")) for r in group],
                       "y": [num(r.get(key)) for r in group], "marker": {"color": colour(str(source or ""))},
                       "hovertext": [f"{_rank_text(r.get('rank'))} · {name}: {key.split('_')[0]} "
                                     f"{fmt_ms(r.get(key), unit)} over {fmt_count(r.get('steps'))} steps"
                                     for r in group], "hoverinfo": "text"})
        marks += len(group)
    from my_utils.profiling.reports.plot import category_axis, layout, value_axis

    fig = {"data": traces, "layout": layout("Median step time per rank", category_axis(), value_axis(unit),
                                            barmode="group", showlegend=len(traces) > 1)}
    return Chart("chart-ranks", "Rank comparison", fig, "bar", marks)


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
                     if num(r.get("step")) is not None and num(r.get("value")) is not None)
        if pts:
            groups[f"{name} ({_rank_text(rank)})"] = ([p[0] for p in pts], [p[1] for p in pts])
    if not groups:
        return None
    return lines("chart-memory", "Memory per step", groups, "MiB" if scaled else "value")


def _kineto_rows(report: AnalysisReport, table: str) -> list[Mapping[str, Any]]:
    return list(report.tables.get(f"kineto_{table}") or [])


def _per_rank_rows(rows: Sequence[Mapping[str, Any]]) -> tuple[list[Any], str]:
    """The ranks to draw: each rank's own rows (up to ``MAX_FACETS``), else the all-ranks rows; and a note."""
    ranks = _rank_order(_label(r.get("rank")) for r in rows if r.get("rank") is not None)
    if ranks and len(ranks) <= MAX_FACETS:
        return ranks, ""
    if any(r.get("rank") is None for r in rows):
        return [None], (f"{len(ranks)} ranks: the all-ranks rows are drawn (sums over ranks); per-rank rows are in "
                        "the table" if ranks else "")
    return ranks[:MAX_FACETS], f"first {MAX_FACETS} of {len(ranks)} ranks"


def kernel_rows(report: AnalysisReport) -> tuple[list[dict[str, Any]], str]:
    """Kernel rows (rank, name, kind, total in ms, count): ``kineto_top_kernels``, else ``kernel:`` operations."""
    kineto = _kineto_rows(report, "top_kernels")
    if kineto:
        return [{"rank": r.get("rank"), "name": str(r["name"]), "kind": str(r.get("kind") or ""),
                 "total": (num(r.get("total_us")) or 0.0) / 1e3, "count": r.get("count"), "unit": "ms",
                 "mean_us": r.get("mean_us")}
                for r in kineto if r.get("name") is not None and num(r.get("total_us")) is not None], \
            "kineto_top_kernels"
    rows = [{"rank": None, "name": str(r["name"])[len("kernel:"):], "kind": "", "total": num(r.get("total")),
             "count": r.get("count"), "unit": str(r.get("unit", "ms"))}
            for r in report.tables.get("operations") or []
            if str(r.get("name", "")).startswith("kernel:") and num(r.get("total")) is not None]
    return rows, "operations"


def kernels_chart(report: AnalysisReport) -> Chart | None:
    """The GPU kernels with the most time, one facet per rank: short names in the margin, full names on hover."""
    rows, table = kernel_rows(report)
    others = [r for r in rows if r["name"] == "others"]
    rows = [r for r in rows if r["name"] != "others"]
    if not rows:
        return None
    ranks, note = _per_rank_rows(rows)
    by_rank = {rank: sorted((r for r in rows if _label(r.get("rank")) == rank), key=lambda r: -float(r["total"]))
               for rank in ranks}
    # one label per kernel across the facets: the kernels on top in any rank, largest first
    best: dict[str, float] = {}
    for rank_rows in by_rank.values():
        for r in rank_rows[:TOP_BARS]:
            best[r["name"]] = max(best.get(r["name"], 0.0), float(r["total"]))
    names = sorted(best, key=lambda n: -best[n])[:TOP_BARS]
    label = dict(zip(names, short_names(names), strict=True))
    facets = []
    for rank, rank_rows in by_rank.items():
        picked = [r for r in rank_rows if r["name"] in label]
        unit = picked[0]["unit"] if picked else "ms"
        facets.append(Facet(_rank_text(rank) if table == "kineto_top_kernels" else "all kernels",
                            [label[r["name"]] for r in picked], [num(r["total"]) for r in picked],
                            [f"{r['name']}\n{_rank_text(rank)}: {fmt_ms(r['total'], unit)} in "
                             f"{fmt_count(r.get('count'))} launches" + (f" ({r['kind']})" if r["kind"] else "")
                             for r in picked],
                            [r["kind"] for r in picked], f"{unit} of GPU time"))
    notes = [n for n in (note, f"top {len(names)} kernels by GPU time (from {table})") if n]
    if others:
        notes.append("the rest: " + ", ".join(f"{_rank_text(r.get('rank'))} {fmt_ms(r['total'])}"
                                              for r in others if _label(r.get("rank")) in ranks))
    return hbar_facets("chart-kernels", "Top GPU kernels (total time per rank)", facets, colour, "; ".join(notes),
                       [label[n] for n in names])


def _pivot(rows: Sequence[Mapping[str, Any]], key: str, value: str, ranks: Sequence[Any],
           scale: float = 1.0, rename: Mapping[str, str] | None = None) -> dict[str, list[float]]:
    """``rows`` (rank, key, value) as one list per ``key`` value, one number per rank (the table's own rows)."""
    index = {rank: i for i, rank in enumerate(ranks)}
    series: dict[str, list[float]] = {}
    for r in rows:
        rank = _label(r.get("rank"))
        v = num(r.get(value))
        if rank not in index or v is None:
            continue
        name = str(r.get(key))
        column = series.setdefault((rename or {}).get(name, name), [0.0] * len(ranks))
        column[index[rank]] = v * scale
    return series


def temporal_chart(report: AnalysisReport) -> Chart | None:
    """Kineto temporal breakdown per rank: compute, non-compute and idle shares of the GPU's span."""
    rows = _kineto_rows(report, "temporal")
    if not rows:
        return None
    ranks, note = _per_rank_rows(rows)
    if len(ranks) > 1 and any(r.get("rank") is None for r in rows):
        ranks = [*ranks, None]  # shares: the all-ranks bar may stand beside the ranks'
    long = [{"rank": r.get("rank"), "part": part.replace("_", "-"), "pct": r.get(f"{part}_pct")}
            for r in rows for part in ("compute", "non_compute", "idle")]
    series = _pivot(long, "part", "pct", ranks)
    return stacked("chart-temporal", "GPU time: compute / non-compute / idle (% of the span)",
                   [_rank_text(r) for r in ranks], series, "% of span", colour, note, "% of span")


def kernel_kinds_chart(report: AnalysisReport) -> Chart | None:
    """Kineto kernel breakdown per rank: computation, communication and memory kernels (ms)."""
    rows = _kineto_rows(report, "kernel_kinds")
    if not rows:
        return None
    ranks, note = _per_rank_rows(rows)
    series = _pivot(rows, "kind", "total_us", ranks, 1e-3)
    return stacked("chart-kernel-kinds", "GPU kernel time by kind (ms)", [_rank_text(r) for r in ranks], series,
                   "ms", colour, note, "ms")


def _lanes(rows: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> list[tuple[Any, ...]]:
    """The distinct ``keys`` tuples of ``rows`` (rank, device, stream), in numeric order."""
    return sorted({tuple(_label(r.get(k)) for k in keys) for r in rows},
                  key=lambda k: tuple((x is None, not isinstance(x, int), x if isinstance(x, int) else 0, str(x))
                                      for x in k))


def _by_lane(rows: Sequence[Mapping[str, Any]], keys: Sequence[str],
             lanes: Sequence[tuple[Any, ...]]) -> dict[str, list[float]]:
    """Idle ms per cause, one number per lane: each row is one lane's own figure (nothing is added up)."""
    index = {lane: i for i, lane in enumerate(lanes)}
    out: dict[str, list[float]] = {}
    for r in rows:
        v = num(r.get("idle_us"))
        if v is None:
            continue
        name = _IDLE_NAMES.get(str(r.get("category")), str(r.get("category")))
        out.setdefault(name, [0.0] * len(lanes))[index[tuple(_label(r.get(k)) for k in keys)]] = v * 1e-3
    return out


def idle_chart(report: AnalysisReport) -> Chart | None:
    """GPU idle time by cause: per (rank, GPU) at device level when the table is there, else per stream; never summed."""
    device = [r for r in _kineto_rows(report, "idle_device") if r.get("rank") is not None or r.get("device") is not None]
    if device:
        keys: tuple[str, ...] = ("rank", "device")
        lanes = _lanes(device, keys)
        labels = [f"{_rank_text(rank)} · GPU {dev}" for rank, dev in lanes]
        return stacked("chart-idle", "GPU idle time by cause (ms; device level: no stream of the GPU busy)", labels,
                       _by_lane(device, keys, lanes), "ms", colour, "", "ms")
    rows = [r for r in _kineto_rows(report, "idle") if r.get("stream") is not None]
    if not rows:
        return None
    keys = ("rank", "device", "stream")
    lanes = _lanes(rows, keys)
    labels = [f"{_rank_text(rank)} · GPU {dev} · stream {stream}" for rank, dev, stream in lanes]
    return stacked("chart-idle", "GPU idle time by cause, per stream (ms; streams overlap, never summed)", labels,
                   _by_lane(rows, keys, lanes), "ms", colour, "", "ms")


def build_charts(report: AnalysisReport) -> list[Chart]:
    """Every chart the report's data allows, in reading order."""
    from my_utils.profiling.reports.kineto_charts import MAKERS as KINETO_MAKERS
    from my_utils.profiling.reports.nsys_charts import MAKERS as NSYS_MAKERS

    makers = (step_time_chart, temporal_chart, kernels_chart, sections_chart, kernel_kinds_chart, idle_chart,
              ranks_chart, memory_chart, *KINETO_MAKERS, *NSYS_MAKERS)
    return [c for c in (make(report) for make in makers) if c is not None]
