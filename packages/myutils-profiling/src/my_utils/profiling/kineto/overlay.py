"""Write a trace back with the analyses drawn on it: the critical path and counter tracks, for Perfetto.

Holistic Trace Analysis' ``overlay_critical_path_analysis`` and ``generate_trace_with_counters``
(checked by ``test_critical_path_overlaid_trace`` and ``test_generate_trace_with_counters``):

* every event on the critical path gets ``args.critical = 1``; each edge of the path whose
  kind is drawn (``critical_path.DRAWN_EDGES``: dependencies, launch delays, syncs; every kind
  with ``all_edges=True``) becomes a flow arrow — a ``"s"``/``"f"`` pair named
  ``critical_path``, ``cat`` the edge kind (``critical_path_kernel_launch_delay``...), args
  ``weight`` and ``critical`` — from the end (or start) of one event to the start (or end) of
  the other; an arrow ending at a GPU activity's end is moved 1 µs inside it so that Perfetto
  binds it to that slice. ``only_critical=True`` keeps, of the complete events, only those on
  the path (annotations stay). With ``all_edges=True`` every edge of the graph is drawn, the
  path's marked ``critical``, except the zero-weight launch edges that only keep causality.
* counter tracks (``"ph": "C"``): ``Queue Length`` per stream (``id`` the stream) and the copy
  bandwidth per subtype (``Memcpy DtoH``..., value ``Memcpy BW`` in GB/s), one point per change.

The trace is streamed twice (once for the analyses, once to copy it): the copy never holds the
whole trace. Output: ``.json`` or ``.json.gz``, written atomically; the input is never replaced.
"""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from my_utils.core.atomic import atomic_write
from my_utils.core.errors import UsageError
from my_utils.core.safe_io import refuse_overwriting_inputs
from my_utils.profiling.kineto.critical_path import DRAWN_EDGES, CriticalPath, critical_path
from my_utils.profiling.kineto.filters import TraceFilter
from my_utils.profiling.kineto.memory_bw import bandwidth_series
from my_utils.profiling.kineto.queue_length import queue_series
from my_utils.profiling.kineto.rank_data import RankData

FLOW_NAME = "critical_path"
_FLOW_CAT = "critical_path_"


@dataclass(frozen=True)
class OverlayResult:
    """What was written: the file, the critical path drawn (None when not asked), the counts added."""

    path: Path
    critical: CriticalPath | None
    marked_events: int
    flows: int
    counter_events: int


def counter_events(d: RankData) -> list[dict[str, Any]]:
    """Queue-length and copy-bandwidth counter events of one rank, in the trace's own time (module docstring)."""
    out: list[dict[str, Any]] = []
    q = queue_series(d)
    for lane, ts, value in zip(q.lanes, q.ts, q.value, strict=True):
        pid, stream = d.lanes[lane]
        for t, v in zip((ts + d.base_us).tolist(), value.tolist(), strict=True):
            out.append({"ph": "C", "name": "Queue Length", "pid": pid, "id": stream, "ts": t,
                        "args": {"Queue Length": int(v)}})
    for subtype, (ts, value, device) in bandwidth_series(d).items():
        for t, v in zip((ts + d.base_us).tolist(), value.tolist(), strict=True):
            out.append({"ph": "C", "name": subtype, "pid": device, "ts": t, "args": {"Memcpy BW": float(v)}})
    return out


def _flows(cp: CriticalPath, where: dict[int, tuple[Any, Any, float, float, bool]], all_edges: bool
           ) -> list[dict[str, Any]]:
    """Flow-event pairs for the drawn edges (``where[index]`` = pid, tid, absolute ts, dur, on a GPU)."""
    out: list[dict[str, Any]] = []
    edges = [e for e in cp.edges if not (e.type == "kernel_launch_delay" and e.weight == 0)] if all_edges else \
        [e for e in cp.edges if e.critical and e.type in DRAWN_EDGES]
    for flow_id, e in enumerate(edges):
        args = {"weight": e.weight, "critical": int(e.critical)}
        for index, at_start, phase in ((e.src, e.src_start, "s"), (e.dst, e.dst_start, "f")):
            pid, tid, ts, dur, gpu = where[index]
            t = ts if at_start else ts + dur - (min(1.0, dur) if gpu else 0.0)
            ev = {"ph": phase, "id": flow_id, "pid": pid, "tid": tid, "ts": t, "cat": _FLOW_CAT + e.type,
                  "name": FLOW_NAME, "args": args}
            if phase == "f":
                ev["bp"] = "e"
            out.append(ev)
    return out


def write_overlay(trace: str | Path, output: str | Path, *, with_critical_path: bool = True,
                  with_counters: bool = True, annotation: str | None = None, instance: int | tuple[int, int] = 0,
                  all_edges: bool = False, only_critical: bool = False, rank: int | None = None,
                  trace_filter: TraceFilter | None = None, zero_weight_launch_edges: bool = False) -> OverlayResult:
    """Copy ``trace`` to ``output`` with the critical path and/or counter tracks drawn (module docstring).

    ``annotation``/``instance`` choose the critical path's window (``critical_path.window_of``);
    ``zero_weight_launch_edges`` as in :func:`~my_utils.profiling.kineto.critical_path.critical_path`;
    ``trace_filter`` keeps part of the trace for the analyses (the copy keeps every event).
    """
    from my_utils.profiling.kineto.read.stream import TraceStream
    from my_utils.profiling.kineto.run import read_rank

    src, out = Path(trace), Path(output)
    if not (out.name.endswith(".json") or out.name.endswith(".json.gz")):
        raise UsageError(f"overlay output {out}: expected a .json or .json.gz file name")
    refuse_overwriting_inputs([out], [src], what="overlay output")
    read = read_rank(src, rank)
    d = read.data if trace_filter is None else trace_filter.apply(read.data)
    cp = critical_path(d, annotation, instance, zero_weight_launch_edges, all_edges) if with_critical_path else None
    counters = counter_events(d) if with_counters else []
    marked = cp.events if cp is not None else frozenset()
    needed = {i for e in cp.edges for i in (e.src, e.dst)} if cp is not None else set()
    where: dict[int, tuple[Any, Any, float, float, bool]] = {}
    metadata: dict[str, Any] = {}

    def events() -> Iterator[dict[str, Any]]:
        stream = TraceStream(src)
        for index, ev in enumerate(stream.events()):
            if index in needed:
                args = ev.get("args")
                gpu = isinstance(args, dict) and isinstance(args.get("device"), int) and args["device"] >= 0
                where[index] = (ev.get("pid"), ev.get("tid"), float(ev.get("ts", 0)), float(ev.get("dur", 0) or 0), gpu)
            if index in marked and ev.get("ph") == "X":
                args = ev.get("args")
                ev = dict(ev, args=dict(args if isinstance(args, dict) else {}, critical=1))
            elif only_critical and ev.get("ph") == "X" and ev.get("cat") not in ("user_annotation", "python_function"):
                continue
            yield ev
        metadata.update(stream.metadata)

    count = _write(out, events, lambda: (_flows(cp, where, all_edges) if cp is not None else []) + counters,
                   metadata)
    return OverlayResult(out, cp, len(marked), count // 2 if cp is not None else 0, len(counters))


def _write(out: Path, events: Any, extra: Any, metadata: dict[str, Any]) -> int:
    """Stream ``events()`` then ``extra()`` into ``{"traceEvents": [...], <metadata>}``; returns the flow events written."""
    with atomic_write(out, "wb") as raw:
        fh: Any = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6) if out.name.endswith(".gz") else raw
        text = io.TextIOWrapper(fh, encoding="utf-8", newline="\n")
        try:
            text.write('{"traceEvents": [\n')
            first = True
            for ev in events():
                text.write(("" if first else ",\n") + json.dumps(ev, ensure_ascii=False))
                first = False
            added = extra()
            for ev in added:
                text.write(("" if first else ",\n") + json.dumps(ev, ensure_ascii=False))
                first = False
            text.write("\n]")
            for key, value in metadata.items():
                if key != "traceEvents":
                    text.write(f",\n{json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}")
            text.write("}\n")
            text.flush()
        finally:
            text.detach()
            if fh is not raw:
                fh.close()
    return sum(1 for e in added if e.get("ph") in ("s", "f"))
