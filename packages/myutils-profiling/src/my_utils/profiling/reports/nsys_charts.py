"""Charts of an Nsight Systems run, drawn the way the Kineto report's are (one table each, nothing new computed).

Per device, where its span went (``nsys_busy_device`` and ``nsys_setup_idle``: busy, idle inside
setup, and the idle outside setup split into host wait and the rest); the kernels with the most
time per rank (``nsys_top_kernels``); NCCL kernel time per rank split into the time spent waiting
for the last rank and the rest (``nsys_nccl_ranks``). A report of nsys exports also links the
standalone timeline page (``nsys timeline --html``) when one was written beside it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from my_utils.profiling.model.report import AnalysisReport
from my_utils.profiling.reports.formatting import fmt_count, fmt_ms
from my_utils.profiling.reports.names import short_names
from my_utils.profiling.reports.palette import colour
from my_utils.profiling.reports.plot import Chart, Facet, hbar_facets, num, stacked

TOP_BARS = 15
MAX_FACETS = 4
MAX_DEVICES = 64  # bars of the busy chart; a larger run is cut, said in the note
MS = 1e6


def _rows(report: AnalysisReport, table: str) -> list[Mapping[str, Any]]:
    return list(report.tables.get(table) or [])


def _order(keys: Sequence[Any]) -> list[Any]:
    return sorted(set(keys), key=lambda k: (k is None, not isinstance(k, int), k if isinstance(k, int) else 0, str(k)))


def _where(rank: Any, device: Any = None) -> str:
    parts = ([f"rank {rank}"] if rank is not None else []) + ([f"GPU {device}"] if device is not None else [])
    return " · ".join(parts) or "all"


def busy_chart(report: AnalysisReport) -> Chart | None:
    """Per device: busy, idle inside setup, host wait and other idle outside setup (ms; they add up to its span)."""
    rows = _rows(report, "nsys_busy_device")
    if not rows:
        return None
    setup = {(r.get("rank"), r.get("device")): r for r in _rows(report, "nsys_setup_idle")}
    keys = sorted({(r.get("rank"), r.get("device")) for r in rows},
                  key=lambda k: tuple((x is None, x if isinstance(x, int) else 0) for x in k))
    note = f"first {MAX_DEVICES} of {len(keys)} devices" if len(keys) > MAX_DEVICES else ""
    keys = keys[:MAX_DEVICES]
    by = {(r.get("rank"), r.get("device")): r for r in rows}
    series: dict[str, list[float]] = {"busy": [], "setup": [], "host wait": [], "other idle": []}
    for k in keys:
        b, s = by[k], setup.get(k)
        series["busy"].append((num(b.get("busy_ns")) or 0.0) / MS)
        if s is None:  # an older report: the idle is not split
            series["setup"].append(0.0)
            series["host wait"].append(0.0)
            series["other idle"].append((num(b.get("idle_ns")) or 0.0) / MS)
            continue
        series["setup"].append((num(s.get("setup_idle_ns")) or 0.0) / MS)
        series["host wait"].append((num(s.get("outside_host_wait_ns")) or 0.0) / MS)
        series["other idle"].append((num(s.get("outside_other_ns")) or 0.0) / MS)
    series = {name: values for name, values in series.items() if any(values)}
    notes = [n for n in (note, "a device's bar is its span, first to last GPU activity: busy (the union of its "
                         "kernels, copies and sets), idle inside one-off setup work, and idle outside setup "
                         "(host wait: the next work was launched late)") if n]
    return stacked("chart-nsys-busy", "GPU time per device: busy and idle (ms, Nsight Systems)",
                   [_where(*k) for k in keys], series, "ms", colour, "; ".join(notes), "ms")


def kernels_chart(report: AnalysisReport) -> Chart | None:
    """The kernels with the most time, one facet per rank (the first ranks when there are many)."""
    rows = [r for r in _rows(report, "nsys_top_kernels") if num(r.get("total_ns")) is not None and r.get("name")]
    if not rows:
        return None
    ranks = _order([r.get("rank") for r in rows])
    note = f"first {MAX_FACETS} of {len(ranks)} ranks" if len(ranks) > MAX_FACETS else ""
    ranks = ranks[:MAX_FACETS]
    best: dict[str, float] = {}
    for r in rows:
        if r.get("rank") in ranks:
            best[str(r["name"])] = max(best.get(str(r["name"]), 0.0), float(r["total_ns"]))
    names = sorted(best, key=lambda n: -best[n])[:TOP_BARS]
    label = dict(zip(names, short_names(names), strict=True))
    facets = []
    for rank in ranks:
        mine = sorted((r for r in rows if r.get("rank") == rank and str(r["name"]) in label),
                      key=lambda r: -float(r["total_ns"]))
        facets.append(Facet(_where(rank) if rank is not None else "all devices", [label[str(r["name"])] for r in mine],
                            [float(r["total_ns"]) / MS for r in mine],
                            [f"{r['name']}\n{_where(rank)}: {fmt_ms(float(r['total_ns']) / MS)} in "
                             f"{fmt_count(r.get('count'))} launches ({r.get('kind')})" for r in mine],
                            [str(r.get("kind") or "") for r in mine], "ms of kernel time"))
    notes = [n for n in (note, f"top {len(names)} kernels by kernel time (nsys_top_kernels: the top of each kind)")
             if n]
    return hbar_facets("chart-nsys-kernels", "Top GPU kernels (kernel time per rank, Nsight Systems)", facets, colour,
                       "; ".join(notes), [label[n] for n in names])


def nccl_chart(report: AnalysisReport) -> Chart | None:
    """NCCL kernel time per rank: the time spent waiting for the last rank to arrive, and the rest (ms)."""
    rows = [r for r in _rows(report, "nsys_nccl_ranks") if num(r.get("total_ns")) is not None]
    if not rows:
        return None
    ranks = _order([r.get("rank") for r in rows])
    colls = sorted({str(r.get("collective")) for r in rows})
    series: dict[str, list[float]] = {}
    for r in rows:
        i = ranks.index(r.get("rank"))
        tag = f" ({r.get('collective')})" if len(colls) > 1 else ""
        for part, col in (("rank wait", "wait_ns"), ("communication", "transfer_ns")):
            series.setdefault(part + tag, [0.0] * len(ranks))[i] = (num(r.get(col)) or 0.0) / MS
    hosts = {r.get("rank"): r.get("host") for r in _rows(report, "nsys_inputs")}
    labels = [f"rank {k}" + (f" · {hosts[k]}" if hosts.get(k) else "") for k in ranks]
    return stacked("chart-nsys-nccl", "NCCL kernel time per rank: waiting for the last rank, and the rest (ms)",
                   labels, series, "ms", lambda name: colour(name.split(" (")[0]),
                   "a collective's kernel spins until its last rank arrives: that wait is the first part of each bar "
                   "(arrivals on one clock: the exports' UTC anchors)", "ms")


MAKERS = (busy_chart, kernels_chart, nccl_chart)
