"""Metric events (MyTimer regions) + torch.profiler traces of many ranks → one timeline on one clock.

One process per rank (pid = rank + 1; pid 0 is Perfetto's idle process), named
``rank R (host)``. Inside it: a ``mytimer`` lane (CPU regions), ``mytimer cuda`` (CUDA
times of the same regions, when timed) and one lane per thread of the rank's torch trace.
Every tid is unique in the file and above every pid (Perfetto keys threads by tid).

Clocks: MyTimer events are unix seconds already corrected by the rank's logger when the
``clock_sync`` record says ``applied=1``; torch traces run on the rank's own clock. With
``auto_align`` each rank's *measured* offset (re-based onto ``reference_rank``) is added
where it was not applied yet; without a record, timestamps are kept as recorded and a
warning says so. Output ``ts`` are µs since ``otherData.time_origin_unix_s`` (a whole
second): unix µs as doubles would lose the nanoseconds that keep torch slices nested.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from my_utils.core.events import MetricEvent
from my_utils.profiling.trace.clock import (
    CLOCK_SYNC_NAME,
    ClockSync,
    clock_sync_from_attrs,
    latest_per_rank,
    rebase,
    uncertainty_warnings,
)
from my_utils.profiling.trace.lanes import pack
from my_utils.profiling.trace.torch_trace import TorchTrace

TRACE_SCHEMA_VERSION = "1.0"
_NO_RANK = -1


@dataclass
class MergedTrace:
    """The merged document in pieces: ``metadata`` (M events), ``events`` (the rest), ``other`` (otherData)."""

    metadata: list[dict[str, Any]]
    events: list[dict[str, Any]]
    other: dict[str, Any]
    warnings: list[str] = field(default_factory=list)

    def document(self) -> dict[str, Any]:
        """The whole trace as one JSON object (``write_trace`` streams it instead)."""
        return {"traceEvents": self.metadata + self.events, "displayTimeUnit": "ms", "otherData": self.other}


@dataclass
class _Rank:
    rank: int
    host: str = ""
    regions: list[tuple[str, float, float, dict[str, Any]]] = field(default_factory=list)  # lane, start_us, dur_us
    torch: list[TorchTrace] = field(default_factory=list)
    step_starts: dict[int, float] = field(default_factory=dict)  # unix s, before alignment


def merge_trace(events: Iterable[MetricEvent], torch_traces: Sequence[TorchTrace] = (), *,
                reference_rank: int = 0, auto_align: bool = True, sources: Sequence[str] = ()) -> MergedTrace:
    """Build the merged timeline (see the module doc); ``events`` is streamed once."""
    ranks: dict[int, _Rank] = {}
    syncs: list[ClockSync] = []

    def rank_of(r: int | None) -> _Rank:
        key = _NO_RANK if r is None else r
        if key not in ranks:
            ranks[key] = _Rank(key)
        return ranks[key]

    for e in events:
        if e.name == CLOCK_SYNC_NAME:
            if e.rank is not None:
                syncs.append(clock_sync_from_attrs(e.rank, e.attrs, str(e.attrs.get("file", "events"))))
                rank_of(e.rank).host = rank_of(e.rank).host or str(e.attrs.get("host", "") or "")
            continue
        if e.source != "mytimer" or e.kind != "duration" or e.ts is None or e.name == "step_time":
            continue  # aggregates (one value per step) are not spans of a timeline
        r = rank_of(e.rank)
        r.host = r.host or str(e.attrs.get("host", "") or "")
        lane = "mytimer cuda" if e.attrs.get("clock") == "cuda" else "mytimer"
        args = {"step": e.step, "duration_ms": e.value}
        args.update({k: v for k, v in e.attrs.items() if k in ("path", "depth", "node_id", "file")})
        r.regions.append((lane, e.ts * 1e6, e.value * 1e3, {"name": e.name, "args": args}))
        if lane == "mytimer" and e.attrs.get("depth") == 0 and e.step is not None:
            r.step_starts[e.step] = min(r.step_starts.get(e.step, math.inf), e.ts)
    for tt in torch_traces:
        r = rank_of(tt.rank)
        r.torch.append(tt)
        r.host = r.host or tt.host

    warnings: list[str] = []
    measured = latest_per_rank(syncs)
    offsets = rebase(measured, reference_rank) if auto_align else {}
    if auto_align and len([k for k in ranks if k != _NO_RANK]) > 1:
        missing = sorted(k for k in ranks if k not in offsets and k not in (_NO_RANK, reference_rank))
        if missing:
            warnings.append(f"ranks {missing} have no clock_sync record: their timestamps are used as recorded "
                            "(call my_utils.distributed.align_clocks on every rank to measure the offsets)")
    shifts: dict[int, tuple[float, float]] = {}  # rank -> (shift for MyTimer, shift for torch), seconds
    for k in ranks:
        s = offsets.get(k)
        shifts[k] = (0.0, 0.0) if s is None else (0.0 if s.applied else s.offset_s, s.offset_s)
    aligned_starts = {k: {step: t + shifts[k][0] for step, t in r.step_starts.items()} for k, r in ranks.items()}
    warnings += uncertainty_warnings(offsets, aligned_starts, reference_rank)

    starts = [start + shifts[k][0] * 1e6 for k, r in ranks.items() for _l, start, _d, _a in r.regions]
    starts += [tt.base_us + min((e["ts"] for e in tt.events), default=0.0) + shifts[k][1] * 1e6
               for k, r in ranks.items() for tt in r.torch if tt.events]
    origin_s = math.floor(min(starts) / 1e6) if starts else 0
    metadata, out = _layout(ranks, shifts, origin_s * 1e6)
    other = {
        "schema_version": TRACE_SCHEMA_VERSION,
        "generator": "my_utils.profiling.trace.merge_trace",
        "time_base": "microseconds since time_origin_unix_s on the reference rank's clock",
        "time_origin_unix_s": origin_s,
        "reference_rank": reference_rank,
        "auto_align_ranks": auto_align,
        "clock_offsets": {str(k): {**(offsets[k].to_dict() if k in offsets else
                                      {"offset_s": None, "uncertainty_s": None, "reference_rank": None,
                                       "applied": None}),
                                   "shift_mytimer_s": shifts[k][0], "shift_torch_s": shifts[k][1]}
                          for k in sorted(ranks) if k != _NO_RANK},
        "ranks": [{"rank": None if k == _NO_RANK else k, "pid": _pid(k, ranks), "host": r.host or None,
                   "torch_traces": [str(t.path) for t in r.torch]} for k, r in sorted(ranks.items())],
        "sources": list(sources) + [str(t.path) for t in torch_traces],
        "warnings": warnings,
    }
    return MergedTrace(metadata, out, other, warnings)


def _pid(rank: int, ranks: dict[int, _Rank]) -> int:
    return rank + 1 if rank != _NO_RANK else max([k for k in ranks if k != _NO_RANK], default=-1) + 2


def _layout(ranks: dict[int, _Rank], shifts: dict[int, tuple[float, float]],
            origin_us: float) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    metadata: list[dict[str, Any]] = []
    out: list[dict[str, Any]] = []
    next_tid = max((_pid(k, ranks) for k in ranks), default=0) + 1
    for sort_index, (k, r) in enumerate(sorted(ranks.items(), key=lambda kv: (kv[0] == _NO_RANK, kv[0]))):
        pid = _pid(k, ranks)
        label = "rank unknown" if k == _NO_RANK else f"rank {k}"
        metadata.append({"ph": "M", "name": "process_name", "pid": pid, "tid": pid,
                         "args": {"name": f"{label} ({r.host or 'unknown host'})"}})
        metadata.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": pid,
                         "args": {"sort_index": sort_index}})
        lanes: dict[str, list[dict[str, Any]]] = defaultdict(list)
        others: dict[str, list[dict[str, Any]]] = defaultdict(list)
        shift_my, shift_torch = shifts[k][0] * 1e6 - origin_us, shifts[k][1] * 1e6 - origin_us
        for lane, start, dur, extra in r.regions:
            lanes[lane].append({"ph": "X", "cat": "mytimer", "name": extra["name"],
                                "ts": round(start + shift_my, 3), "dur": round(dur, 3), "args": extra["args"]})
        for i, tt in enumerate(r.torch):
            delta = tt.base_us + shift_torch
            for ev in tt.events:
                thread = tt.thread_names.get((ev.get("pid"), ev.get("tid"))) or _thread_label(ev)
                lane = f"torch{'' if len(r.torch) == 1 else f' #{i + 1}'}: {thread}"
                new = dict(ev)
                new["ts"] = round(ev["ts"] + delta, 3)
                if ev["ph"] in ("s", "f", "t") and "id" in ev:
                    new["id"] = _flow_id(ev["id"], k, i)
                (lanes if ev.get("ph") == "X" else others)[lane].append(new)
        for name in sorted(set(lanes) | set(others), key=lambda n: (not n.startswith("mytimer"), n)):
            packed = pack(lanes.get(name, [])) or [[]]
            for j, lane_events in enumerate(packed):
                tid, next_tid = next_tid, next_tid + 1
                lane_name = name if j == 0 else f"{name} (overlapping {j})"
                metadata.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                                 "args": {"name": lane_name}})
                metadata.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                                 "args": {"sort_index": len(metadata)}})
                batch = lane_events + (others.get(name, []) if j == 0 else [])
                for ev in batch:
                    ev["pid"], ev["tid"] = pid, tid
                out.extend(batch)
    out.sort(key=lambda e: e["ts"])
    return metadata, out


def _thread_label(ev: dict[str, Any]) -> str:
    pid, tid = ev.get("pid"), ev.get("tid")
    return f"{pid}/{tid}" if pid not in (None, "") or tid not in (None, "") else "process-wide"


def _flow_id(old: Any, rank: int, index: int) -> Any:
    # flow ids of different files must not pair up; viewers want integers where there were integers
    if isinstance(old, int) and not isinstance(old, bool) and 0 <= old < 10**9:
        return ((rank + 2) * 100 + index) * 10**9 + old
    return f"r{rank}.{index}.{old}"


def events_with_traces(events_path: Path) -> list[Path]:
    """Torch traces named by the events' ``attrs.file`` that lie beside the events file."""
    from my_utils.core.events import iter_events

    names = {str(e.attrs.get("file")) for e in iter_events(events_path)
             if e.source == "torch_profiler" and e.attrs.get("file")}
    return sorted(p for n in names if (p := events_path.parent / Path(n).name).is_file())
