"""Lay out one torch trace for the merge: its threads as lanes, its flows as whole records.

Runs in a task (:func:`layout_torch`) with that trace's events only. Overlapping slices of a
thread move to extra lanes (:func:`my_utils.profiling.trace.lanes.pack`). Flows: Kineto writes
one start and an end per kernel when one launch runs several kernels; each end becomes its own
arrow from a copy of the start, since viewers pair one start with one end. An end whose start is
outside the window cannot be drawn: such events are left out and counted
(``otherData.unpaired_flow_events_dropped``), so that the merged trace passes the checker. A
trace with no flow events at all (sampled or filtered traces) gets its launch → kernel arrows
from ``args.correlation``, which every launch and kernel carries (``otherData.arrows_from_correlation``).
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from my_utils.profiling.trace.lanes import pack
from my_utils.profiling.trace.records import TaskRecords, dump, flow_id, us_to_ns, utf8_len

__all__ = ["layout_torch", "torch_records"]

_FLOW_PHASES = ("s", "t", "f")


def layout_torch(path: str, out: str, index: int) -> dict[str, Any]:
    """Task: read one torch trace (its events only in this process) → lanes → sorted records."""
    from my_utils.profiling.trace.torch_trace import read_torch_trace

    return torch_records(read_torch_trace(path), out, index)


_DEVICE = re.compile(r"(GPU|MTIA|XPU|HPU|NPU) (\d+)")
_RUNTIME_CATS = frozenset({"cuda_runtime", "cuda_driver", "runtime"})  # a launch on the host (legacy: Runtime)
_DEVICE_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"})  # what a launch ran


class _Lanes:
    """The lane of each (pid, tid) of a trace: its name and where it sorts (CPU threads first, then devices)."""

    def __init__(self, tt: Any) -> None:
        self.tt = tt
        self.seen: dict[tuple[Any, Any], tuple[str, tuple[Any, ...]]] = {}

    def of(self, ev: dict[str, Any]) -> tuple[str, tuple[Any, ...]]:
        key = (ev.get("pid"), ev.get("tid"))
        found = self.seen.get(key)
        if found is None:
            found = self.seen[key] = self._name(*key)
        return found

    def _name(self, pid: Any, tid: Any) -> tuple[str, tuple[Any, ...]]:
        thread = self.tt.thread_names.get((pid, tid), "").strip()
        labels = getattr(self.tt, "process_labels", {})
        device = _DEVICE.fullmatch(str(labels.get(pid, "")).strip())
        if device is None:
            if not thread:
                thread = f"{pid}/{tid}" if pid not in (None, "") or tid not in (None, "") else "process-wide"
            return thread, (0, "", 0, 0, thread)
        kind, number = device.group(1), int(device.group(2))
        if kind == "GPU":
            # Kineto: tid is the stream (a number, or "stream 7" in older traces); the name says it too
            digits = re.search(r"\d+", str(tid)) or re.search(r"\d+", thread)
            stream = int(digits.group()) if digits else -1
            return f"GPU {number} · stream {stream if digits else tid}", (1, kind, number, stream, "")
        return f"{kind} {number} · {thread or tid}", (1, kind, number, 0, thread or str(tid))


def _correlation_flows(tt: Any, lanes: _Lanes, base_ns: int) -> dict[Any, list[tuple[int, str, dict[str, Any]]]]:
    """Launch → kernel arrows from ``args.correlation`` (for a trace that carries no flow events of its own)."""
    launches: dict[Any, tuple[int, str]] = {}
    ran: dict[Any, list[tuple[int, str]]] = defaultdict(list)
    for ev in tt.events:
        args = ev.get("args")
        if ev.get("ph") != "X" or not isinstance(args, dict) or args.get("correlation") is None:
            continue
        cat = str(ev.get("cat", "")).lower()
        if cat in _RUNTIME_CATS:
            launches[args["correlation"]] = (base_ns + us_to_ns(ev["ts"]), lanes.of(ev)[0])
        elif cat in _DEVICE_CATS:
            ran[args["correlation"]].append((base_ns + us_to_ns(ev["ts"]), lanes.of(ev)[0]))
    flows: dict[Any, list[tuple[int, str, dict[str, Any]]]] = {}
    for corr, (ns, lane) in launches.items():
        if corr in ran:
            arrow = {"cat": "ac2g", "name": "ac2g", "id": corr}
            flows[("ac2g", corr)] = [(ns, lane, {"ph": "s", **arrow})] + [
                (k_ns, k_lane, {"ph": "f", "bp": "e", **arrow}) for k_ns, k_lane in ran[corr]]
    return flows


def torch_records(tt: Any, out: str, index: int) -> dict[str, Any]:
    """Lay out a read :class:`~my_utils.profiling.trace.torch_trace.TorchTrace`; ``index`` makes its flow ids unique.

    Lanes: one per thread, named by the trace (``thread_name``); a device's streams are named
    ``GPU d · stream s`` and sort below the CPU threads. A global instant (``"s": "g"``) becomes an
    instant of the rank's process (``"s": "p"``): globally it would land on a track of no process.
    A trace without flow events gets launch → kernel arrows from ``args.correlation``.
    """
    base_ns = tt.base_ns if getattr(tt, "base_ns", None) is not None else us_to_ns(tt.base_us)
    lanes = _Lanes(tt)
    slices: dict[str, list[dict[str, Any]]] = defaultdict(list)
    others: dict[str, list[tuple[int, dict[str, Any]]]] = defaultdict(list)
    flows: dict[Any, list[tuple[int, str, dict[str, Any]]]] = {}
    process_wide: list[tuple[int, dict[str, Any]]] = []
    for ev in tt.events:
        thread = lanes.of(ev)[0]
        ns = base_ns + us_to_ns(ev["ts"])
        ph = ev.get("ph")
        if ph == "X":
            slices[thread].append({"ns": ns, "ts": ev["ts"], "dur": ev["dur"], "ev": ev})
        elif ph in _FLOW_PHASES and "id" in ev:
            flows.setdefault((ev.get("cat"), ev["id"]), []).append((ns, thread, ev))
            others.setdefault(thread, [])
        elif ph in ("i", "I") and ev.get("s") == "g":
            process_wide.append((ns, {**ev, "s": "p"}))
        else:
            others[thread].append((ns, ev))
    built = 0
    if not flows:
        flows = _correlation_flows(tt, lanes, base_ns)
        built = len(flows)
    if process_wide and not slices and not others:
        others["process-wide"] = []
    order = {name: key for name, key in lanes.seen.values()}
    unit = TaskRecords()
    first_lane: dict[str, int] = {}
    for thread in sorted(set(slices) | set(others), key=lambda t: (order.get(t, (0, "", 0, 0, t)), t)):
        for j, lane_events in enumerate(pack(slices.get(thread, [])) or [[]]):
            idx = unit.lane(thread, j, list(order.get(thread, (0, "", 0, 0, thread))))
            if j == 0:
                first_lane[thread] = idx
            for s in lane_events:
                unit.add(s["ns"], idx, "t", float(s["dur"]), dump(_strip(s["ev"])))
        for ns, ev in others.get(thread, []):
            unit.add(ns, first_lane[thread], "i", 0.0, dump(_strip(ev)))
    for ns, ev in process_wide:  # process-scoped: any lane of the process holds them
        unit.add(ns, 0, "i", 0.0, dump(_strip(ev)))
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
    return unit.finish(out, kind="torch", rank=tt.rank, host=tt.host, path=str(tt.path), unpaired_flow_events=unpaired,
                       arrows_from_correlation=arrows_made if built else 0)


def _strip(ev: dict[str, Any], new_id: Any = None) -> dict[str, Any]:
    out = {k: v for k, v in ev.items() if k not in ("ts", "pid", "tid")}
    if new_id is not None:
        out["id"] = new_id
    return out
