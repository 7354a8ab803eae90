"""One or several nsys exports as a Chrome/Perfetto trace: kernels, copies, NVTX and NCCL lanes per rank.

The output is the project's trace contract (ARCHITECTURE.md §5): ``{"traceEvents": [...],
"otherData": {...}}``, one ``pid`` per rank with ``process_name`` metadata, and each rank's
clock in ``otherData["clock"]``. ``ts`` are µs since ``otherData.time_origin_unix_s`` (a
whole second, as ``myutils-profile trace`` writes them) when every export anchors its clock
to UTC, so ranks of one job line up; else µs on each export's own clock (said per rank).

Lanes: ``tid`` = ``GPU_TID + device * 1000 + stream`` for GPU work (kernels in category
``kernel`` or ``nccl``, copies and sets in ``memory``; the offset keeps them apart from OS
thread ids), and the OS thread id for NVTX ranges. Events are
streamed from SQLite in start order and written one by one: memory stays flat whatever the
size (a few open ends per lane are kept, to move a slice that overlaps without nesting to a
sub-lane named "overlapping"). ``max_events`` bounds the file: each rank keeps its first ``max_events / ranks``
events and ``otherData["truncated"]`` says how many were left out per rank.
"""

from __future__ import annotations

import contextlib
import gzip
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from my_utils.profiling.nsys.ranks import expand_inputs
from my_utils.profiling.nsys.schema import NsysExport

TRACE_KIND = "nsys_timeline"
GPU_TID = 1_000_000_000
_GPU = ("SELECT start, dur, device, stream, CASE WHEN kind = 'communication' THEN 'nccl' WHEN op = 'kernel' THEN "
        "'kernel' ELSE 'memory' END AS cat, name, bytes FROM nsys_gpu_op")
_NVTX = "SELECT start, dur, tid, domain, name FROM nsys_nvtx"


class _Lanes:
    """Places each slice on a lane where it nests: a slice overlapping another without nesting in it
    (kernels of one stream can overlap on Hopper with programmatic dependent launch; start/end NVTX
    ranges too) goes to the next sub-lane of its stream or thread, named so in the trace."""

    SUB = 100_000_000

    def __init__(self) -> None:
        self.open: dict[int, list[int]] = {}

    def place(self, tid: int, start: int, end: int) -> tuple[int, bool]:
        """The tid to draw ``[start, end)`` on, and whether that lane is new."""
        k = 0
        while True:
            lane = tid + k * self.SUB
            stack = self.open.get(lane)
            new = stack is None
            stack = [] if stack is None else stack
            while stack and stack[-1] <= start:
                stack.pop()
            if not stack or end <= stack[-1]:
                stack.append(end)
                self.open[lane] = stack
                return lane, new and k > 0
            k += 1


def _events(db: NsysExport, pid: int, limit: int, shift_ns: int) -> Iterator[dict[str, Any]]:
    sql = (f"SELECT * FROM (SELECT 0 AS lane, start, dur, {GPU_TID} + device * 1000 + stream AS tid, cat, name, "
           f"bytes FROM ({_GPU}) UNION ALL SELECT 1, start, dur, tid & 16777215, CASE WHEN domain = '' THEN 'nvtx' "
           f"ELSE 'nvtx:' || domain END, name, NULL FROM ({_NVTX})) ORDER BY start, dur DESC LIMIT ?")
    lanes = _Lanes()
    for _, start, dur, tid, cat, name, nbytes in db.iterate(sql, (limit,), place="timeline"):
        lane, new = lanes.place(tid, start, start + dur)
        if new:
            base = (f"GPU {(tid - GPU_TID) // 1000} stream {(tid - GPU_TID) % 1000}" if tid >= GPU_TID
                    else f"thread {tid}")
            yield {"name": "thread_name", "ph": "M", "pid": pid, "tid": lane,
                   "args": {"name": f"{base} (overlapping {(lane - tid) // _Lanes.SUB})"}}
        ev: dict[str, Any] = {"name": name, "cat": cat, "ph": "X", "pid": pid, "tid": lane,
                              "ts": (start + shift_ns) / 1e3, "dur": dur / 1e3}
        if nbytes is not None:
            ev["args"] = {"bytes": nbytes}
        yield ev


def _metadata(db: NsysExport, pid: int, label: str) -> Iterator[dict[str, Any]]:
    yield {"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": label}}
    yield {"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0, "args": {"sort_index": pid}}
    for device, stream in db.query("SELECT DISTINCT device, stream FROM nsys_gpu_op ORDER BY 1, 2", place="timeline"):
        yield {"name": "thread_name", "ph": "M", "pid": pid, "tid": GPU_TID + device * 1000 + stream,
               "args": {"name": f"GPU {device} stream {stream}"}}


def write_timeline(specs: Sequence[str | Path], output: Path, *, max_events: int = 2_000_000) -> dict[str, Any]:
    """Write the trace of the exports named by ``specs`` to ``output`` (``.json`` or ``.json.gz``), atomically.

    Returns ``otherData`` (ranks, clocks, counts, what was truncated).
    """
    from my_utils.core.atomic import atomic_write

    inputs = expand_inputs(specs)
    per_rank = max(1, max_events // max(len(inputs), 1))
    origin_ns, anchored = _origin(inputs)
    other: dict[str, Any] = {"kind": TRACE_KIND, "ranks": [], "clock": {}, "events": 0, "truncated": {},
                             "time_origin_unix_s": origin_ns // 1_000_000_000 if anchored else None,
                             "time_base": "microseconds since time_origin_unix_s (UTC)" if anchored else
                             "microseconds on each export's own clock (an export has no UTC anchor)"}
    output.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(output, "wb", encoding=None) as raw, contextlib.ExitStack() as stack:
        fh: IO[bytes] = raw
        if output.name.endswith(".gz"):
            fh = stack.enter_context(gzip.GzipFile(fileobj=raw, mode="wb", mtime=0))  # type: ignore[arg-type]
        fh.write(b'{"traceEvents": [\n')
        first = True
        for i, inp in enumerate(inputs):
            rank = inp.rank if inp.rank is not None else i
            with NsysExport(inp.path, rank=rank) as db:
                db.ensure_views()
                label = f"rank {rank} ({db.label})"
                total = db.query("SELECT (SELECT COUNT(*) FROM nsys_gpu_op) + (SELECT COUNT(*) FROM nsys_nvtx)",
                                 place="timeline")[0][0]
                n = 0
                for ev in _metadata(db, rank, label):
                    fh.write((b"" if first else b",\n") + json.dumps(ev, ensure_ascii=False).encode())
                    first = False
                shift = (db.epoch_offset_ns or 0) - origin_ns if anchored else 0
                for ev in _events(db, rank, per_rank, shift):
                    fh.write(b",\n" + json.dumps(ev, ensure_ascii=False).encode())
                    n += ev["ph"] == "X"
                other["ranks"].append({"rank": rank, "label": db.label, "events": n})
                other["clock"][str(rank)] = {
                    "epoch_offset_ns": db.epoch_offset_ns,
                    "base": "UTC epoch (nsys session anchor)" if db.epoch_offset_ns is not None else
                            "the export's own clock (no UTC anchor)",
                    "uncertainty": "the host's clock synchronisation (not measured by nsys)"}
                other["events"] += n
                if total > n:
                    other["truncated"][str(rank)] = total - n
        fh.write(b'\n], "otherData": ' + json.dumps(other).encode() + b"}\n")
    return other


def _origin(inputs: Sequence[Any]) -> tuple[int, bool]:
    """(the whole UTC second before the first event of every export, whether every export is anchored)."""
    starts = []
    for inp in inputs:
        with NsysExport(inp.path) as db:
            if db.epoch_offset_ns is None:
                return 0, False
            db.ensure_views()
            (first,) = db.query("SELECT MIN(m) FROM (SELECT MIN(start) AS m FROM nsys_gpu_op UNION ALL "
                                "SELECT MIN(start) FROM nsys_nvtx)", place="timeline")[0]
            if first is not None:
                starts.append(first + db.epoch_offset_ns)
    return (min(starts) // 1_000_000_000) * 1_000_000_000 if starts else 0, True
