"""Lay out one torch trace for the merge: its threads as lanes, its flows as whole records.

Runs in a task (:func:`layout_torch`) with that trace's events only. Overlapping slices of a
thread move to extra lanes (:func:`my_utils.profiling.trace.lanes.pack`). Flows: Kineto writes
one start and an end per kernel when one launch runs several kernels; each end becomes its own
arrow from a copy of the start, since viewers pair one start with one end. An end whose start is
outside the window cannot be drawn: such events are left out and counted
(``otherData.unpaired_flow_events_dropped``), so that the merged trace passes the checker.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from my_utils.profiling.trace.lanes import pack
from my_utils.profiling.trace.records import TaskRecords, dump, flow_id, us_to_ns, utf8_len

__all__ = ["layout_torch", "torch_records"]

_FLOW_PHASES = ("s", "t", "f")


def _thread_label(ev: dict[str, Any]) -> str:
    pid, tid = ev.get("pid"), ev.get("tid")
    return f"{pid}/{tid}" if pid not in (None, "") or tid not in (None, "") else "process-wide"


def layout_torch(path: str, out: str, index: int) -> dict[str, Any]:
    """Task: read one torch trace (its events only in this process) → lanes → sorted records."""
    from my_utils.profiling.trace.torch_trace import read_torch_trace

    return torch_records(read_torch_trace(path), out, index)


def torch_records(tt: Any, out: str, index: int) -> dict[str, Any]:
    """Lay out a read :class:`~my_utils.profiling.trace.torch_trace.TorchTrace`; ``index`` makes its flow ids unique."""
    base_ns = tt.base_ns if getattr(tt, "base_ns", None) is not None else us_to_ns(tt.base_us)
    slices: dict[str, list[dict[str, Any]]] = defaultdict(list)
    others: dict[str, list[tuple[int, dict[str, Any]]]] = defaultdict(list)
    flows: dict[tuple[Any, Any], list[tuple[int, str, dict[str, Any]]]] = {}
    for ev in tt.events:
        thread = tt.thread_names.get((ev.get("pid"), ev.get("tid"))) or _thread_label(ev)
        ns = base_ns + us_to_ns(ev["ts"])
        ph = ev.get("ph")
        if ph == "X":
            slices[thread].append({"ns": ns, "ts": ev["ts"], "dur": ev["dur"], "ev": ev})
        elif ph in _FLOW_PHASES and "id" in ev:
            flows.setdefault((ev.get("cat"), ev["id"]), []).append((ns, thread, ev))
            others.setdefault(thread, [])
        else:
            others[thread].append((ns, ev))
    unit = TaskRecords()
    first_lane: dict[str, int] = {}
    for thread in sorted(set(slices) | set(others)):
        for j, lane_events in enumerate(pack(slices.get(thread, [])) or [[]]):
            idx = unit.lane(thread, j)
            if j == 0:
                first_lane[thread] = idx
            for s in lane_events:
                unit.add(s["ns"], idx, "t", float(s["dur"]), dump(_strip(s["ev"])))
        for ns, ev in others.get(thread, []):
            unit.add(ns, first_lane[thread], "i", 0.0, dump(_strip(ev)))
    unpaired = 0
    arrows_made = 0
    for group in flows.values():
        phases = [ev["ph"] for _n, _t, ev in group]
        n_s, n_f = phases.count("s"), phases.count("f")
        if n_s != 1 or n_f == 0 or (n_f > 1 and "t" in phases):
            # an arrow without its start (it began before the window) or without an end: nothing to draw
            unpaired += len(group)
            continue
        if n_f == 1:
            arrows = [group]
        else:
            # one launch, several kernels (Kineto writes one 's' and an 'f' per kernel): viewers pair one
            # start with one end, so each end gets its own arrow from a copy of the start
            s_item = next(item for item in group if item[2]["ph"] == "s")
            arrows = [[s_item, end] for end in sorted((item for item in group if item[2]["ph"] == "f"),
                                                      key=lambda item: item[0])]
        for items_of in arrows:
            new_id = flow_id(index, arrows_made)
            arrows_made += 1
            start = min(ns for ns, _t, _e in items_of)
            items = [(ns - start, first_lane[thread], dump(_strip(ev, new_id))) for ns, thread, ev in items_of]
            unit.add(start, -1, "f", 0.0, dump(items), events=len(items),
                     size=sum(utf8_len(text) for _d, _l, text in items), extent=max(d for d, _l, _t in items))
    return unit.finish(out, kind="torch", rank=tt.rank, host=tt.host, path=str(tt.path), unpaired_flow_events=unpaired)


def _strip(ev: dict[str, Any], new_id: Any = None) -> dict[str, Any]:
    out = {k: v for k, v in ev.items() if k not in ("ts", "pid", "tid")}
    if new_id is not None:
        out["id"] = new_id
    return out
