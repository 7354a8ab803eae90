"""Charts of the registered Kineto analyses, where Holistic Trace Analysis plots them.

Each reads one table of the report and computes nothing new: the CUDA queue length over time
per stream (``kineto_queue_length_series``, already bounded to 400 points per stream with every
extreme kept), the critical path's breakdown per rank (``kineto_critical_path_breakdown``), and
the bus bandwidth of each kind of collective against its link (``kineto_collectives``), and the
operations against the roofline (``kineto_op_shapes``: ``reports.roofline_chart``). The
kernel-sequence table is a table (``kineto_kernel_sequences``), drawn with the others.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from my_utils.profiling.model.report import AnalysisReport
from my_utils.profiling.reports.palette import colour
from my_utils.profiling.reports.plot import (
    Chart,
    Facet,
    hbar_facets,
    layout,
    num,
    plot_text,
    stacked,
    value_axis,
)

_BOUND_NAMES = {"cpu_bound": "CPU", "gpu_compute_bound": "GPU compute", "gpu_communication_bound": "communication",
                "gpu_kernel_launch_overhead": "launch delay", "gpu_kernel_kernel_overhead": "kernel gaps"}
MAX_STREAMS = 8


def _rows(report: AnalysisReport, table: str) -> list[Mapping[str, Any]]:
    return list(report.tables.get(f"kineto_{table}") or [])


def queue_length_chart(report: AnalysisReport) -> Chart | None:
    """Queue length over time, one step line per (rank, device, stream)."""
    rows = _rows(report, "queue_length_series")
    groups: dict[str, tuple[list[float], list[float]]] = {}
    for r in rows:
        t, v = num(r.get("ts_us")), num(r.get("queue_length"))
        if t is None or v is None:
            continue
        name = f"rank {r.get('rank')} · GPU {r.get('device')} · stream {r.get('stream')}"
        xs, ys = groups.setdefault(name, ([], []))
        xs.append(t / 1e3)
        ys.append(v)
    if not groups:
        return None
    names = sorted(groups, key=lambda n: -max(groups[n][1]))[:MAX_STREAMS]
    traces = [{"type": "scatter", "mode": "lines", "line": {"shape": "hv"}, "name": plot_text(n),
               "x": groups[n][0], "y": groups[n][1],
               "hovertemplate": f"{plot_text(n)}<br>%{{x:,.1f}} ms: %{{y:d}} queued<extra></extra>"} for n in names]
    note = f"{len(names)} of {len(groups)} streams (the deepest queues)" if len(groups) > len(names) else ""
    title = "CUDA launch queue length over time (operations launched, not yet started)"
    figure = {"data": traces, "layout": layout(title, value_axis("ms since the trace's first event"),
                                               value_axis("queued operations"), showlegend=len(traces) > 1)}
    return Chart("chart-queue-length", title, figure, "line", len(traces), note, tuple(names))


def critical_path_chart(report: AnalysisReport) -> Chart | None:
    """What the critical path is made of, per rank (% of its length)."""
    rows = _rows(report, "critical_path_breakdown")
    if not rows:
        return None
    ranks = sorted({r.get("rank") for r in rows}, key=lambda x: (x is None, x if isinstance(x, int) else 0))
    series: dict[str, list[float]] = {}
    for r in rows:
        name = _BOUND_NAMES.get(str(r.get("bound_by")), str(r.get("bound_by")))
        series.setdefault(name, [0.0] * len(ranks))[ranks.index(r.get("rank"))] = num(r.get("pct")) or 0.0
    windows = {r.get("rank"): r.get("window") for r in _rows(report, "critical_path")}
    note = "; ".join(f"rank {k}: {v}" for k, v in windows.items() if v)
    return stacked("chart-critical-path", "Critical path by kind (% of its length)", [f"rank {r}" for r in ranks],
                   series, "% of the path", colour, note, "% of the path")


def collectives_chart(report: AnalysisReport) -> Chart | None:
    """Bus bandwidth of each kind of collective (GB/s), one panel per rank; the link's speed in the hover."""
    rows = [r for r in _rows(report, "collectives") if num(r.get("busbw_gbps")) is not None]
    if not rows:
        return None
    facets = []
    for rank in sorted({r.get("rank") for r in rows}, key=lambda x: (x is None, x if isinstance(x, int) else 0))[:4]:
        mine = sorted((r for r in rows if r.get("rank") == rank), key=lambda r: -(num(r.get("total_us")) or 0))[:15]
        labels = [f"{r.get('collective')} {float(r.get('message_bytes') or 0) / 2**20:,.1f} MiB {r.get('dtype')}"
                  for r in mine]
        hovers = [f"{lab}\nbusbw {num(r.get('busbw_gbps')) or 0:,.1f} GB/s\nlink: {r.get('link')}"
                  + (f" ({num(r.get('link_pct')) or 0:,.0f}% of it)" if num(r.get('link_pct')) is not None else "")
                  for lab, r in zip(labels, mine, strict=True)]
        facets.append(Facet(f"rank {rank}", labels, [num(r.get("busbw_gbps")) for r in mine], hovers,
                            ["communication" if not r.get("flagged") else "idle" for r in mine]))
    note = "flagged (under a quarter of the link) in the idle colour"
    return hbar_facets("chart-collectives", "Bus bandwidth per collective (GB/s, NCCL-tests' definition)", facets,
                       colour, note, "GB/s")


def _roofline(report: AnalysisReport) -> Chart | None:
    from my_utils.profiling.reports.roofline_chart import roofline_chart

    return roofline_chart(report)


MAKERS = (critical_path_chart, queue_length_chart, collectives_chart, _roofline)
