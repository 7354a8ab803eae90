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

:func:`read_timeline` is the one pass over the exports: it hands each rank, lane and slice to
:class:`TimelineSink` objects. The trace writer is one sink; the standalone HTML page
(:mod:`.timeline_html`) is another, so one command reads each export once and both outputs
hold the same lanes and slices.
"""

from __future__ import annotations

import contextlib
import gzip
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, NamedTuple, Protocol

from my_utils.profiling.formats.ranks import expand_inputs
from my_utils.profiling.nsys.schema import NsysExport

TRACE_KIND = "nsys_timeline"
GPU_TID = 1_000_000_000
_GPU = ("SELECT start, dur, device, stream, CASE WHEN kind = 'communication' THEN 'nccl' WHEN op = 'kernel' THEN "
        "'kernel' ELSE 'memory' END AS cat, name, bytes FROM nsys_gpu_op")
_NVTX = "SELECT start, dur, tid, domain, name FROM nsys_nvtx"


class Lane(NamedTuple):
    """A lane as both outputs name it: the trace's ``tid``, its stream's or thread's ``base`` tid, ``sub``
    (0: the lane itself; k: its k-th "overlapping" sub-lane) and its ``name``."""

    tid: int
    base: int
    sub: int
    name: str


class Slice(NamedTuple):
    """One slice on its lane: ``depth`` is its nesting level there (0: outermost), ``start`` and ``dur`` are
    ns on the timeline's clock (the export's clock plus the rank's ``shift_ns``), ``cat`` the trace's category
    (``kernel``, ``nccl``, ``memory``, ``nvtx`` or ``nvtx:<domain>``), ``nbytes`` a copy's or set's size."""

    lane: int
    depth: int
    start: int
    dur: int
    cat: str
    name: str
    nbytes: int | None


@dataclass(frozen=True)
class TimelineRun:
    """What every rank shares: the clock (``origin_ns`` on the UTC epoch when ``anchored``) and the bound."""

    origin_ns: int
    anchored: bool
    max_events: int
    per_rank: int
    ranks: int


@dataclass(frozen=True)
class TimelineRank:
    """One export's place in the timeline: its rank, file, clock shift, the events it holds and what it ran on."""

    rank: int
    label: str
    path: Path
    shift_ns: int
    epoch_offset_ns: int | None
    total: int  # GPU operations and NVTX ranges in the export (kept or not)
    version: str  # the exporter's version, or its era when unrecorded
    gpus: tuple[str, ...]  # the models of the devices its GPU work ran on (empty: not recorded)


class TimelineSink(Protocol):
    """Receives one pass over the exports: ``begin``, then per rank ``rank``, its lanes and slices, ``rank_done``."""

    def begin(self, run: TimelineRun) -> None:
        """Called once before the first rank."""

    def rank(self, info: TimelineRank) -> None:
        """Called before the rank's lanes and slices."""

    def lane(self, rank: int, lane: Lane) -> None:
        """A lane of ``rank``: its GPU streams first, then each sub-lane when its first slice comes."""

    def slice(self, rank: int, s: Slice) -> None:
        """A slice of ``rank``, in start order (longest first at one start)."""

    def rank_done(self, info: TimelineRank, kept: int) -> None:
        """Called after the rank's last slice; ``kept`` slices were given (``info.total - kept`` left out)."""


class _Lanes:
    """Places each slice on a lane where it nests: a slice overlapping another without nesting in it
    (kernels of one stream can overlap on Hopper with programmatic dependent launch; start/end NVTX
    ranges too) goes to the next sub-lane of its stream or thread, named so in the trace."""

    SUB = 100_000_000

    def __init__(self) -> None:
        self.open: dict[int, list[int]] = {}

    def place(self, tid: int, start: int, end: int) -> tuple[int, int, bool]:
        """The tid to draw ``[start, end)`` on, its nesting depth there, and whether that sub-lane is new."""
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
                return lane, len(stack) - 1, new and k > 0
            k += 1


def _base_name(tid: int) -> str:
    return (f"GPU {(tid - GPU_TID) // 1000} stream {(tid - GPU_TID) % 1000}" if tid >= GPU_TID
            else f"thread {tid}")


def _slices(db: NsysExport, limit: int, shift_ns: int) -> Iterator[Lane | Slice]:
    sql = (f"SELECT * FROM (SELECT 0 AS lane, start, dur, {GPU_TID} + device * 1000 + stream AS tid, cat, name, "
           f"bytes FROM ({_GPU}) UNION ALL SELECT 1, start, dur, tid & 16777215, CASE WHEN domain = '' THEN 'nvtx' "
           f"ELSE 'nvtx:' || domain END, name, NULL FROM ({_NVTX})) ORDER BY start, dur DESC LIMIT ?")
    lanes = _Lanes()
    for _, start, dur, tid, cat, name, nbytes in db.iterate(sql, (limit,), place="timeline"):
        lane, depth, new = lanes.place(tid, start, start + dur)
        if new:
            sub = (lane - tid) // _Lanes.SUB
            yield Lane(lane, tid, sub, f"{_base_name(tid)} (overlapping {sub})")
        yield Slice(lane, depth, start + shift_ns, dur, cat, name, nbytes)


def _gpu_lanes(db: NsysExport) -> Iterator[Lane]:
    for device, stream in db.query("SELECT DISTINCT device, stream FROM nsys_gpu_op ORDER BY 1, 2", place="timeline"):
        tid = GPU_TID + device * 1000 + stream
        yield Lane(tid, tid, 0, f"GPU {device} stream {stream}")


def _gpu_models(db: NsysExport) -> tuple[str, ...]:
    used = {r[0] for r in db.query("SELECT DISTINCT device FROM nsys_gpu_op", place="timeline")}
    return tuple(sorted({g.name for g in db.gpus() if g.device in used and g.name}))


def read_timeline(specs: Sequence[str | Path], sinks: Sequence[TimelineSink], *,
                  max_events: int = 2_000_000) -> TimelineRun:
    """One pass over the exports named by ``specs``, handing every rank, lane and slice to each of ``sinks``.

    Each rank keeps its first ``max_events / ranks`` events in start order.
    """
    inputs = expand_inputs(specs)
    origin_ns, anchored = _origin(inputs)
    run = TimelineRun(origin_ns, anchored, max_events, max(1, max_events // max(len(inputs), 1)), len(inputs))
    for sink in sinks:
        sink.begin(run)
    for i, inp in enumerate(inputs):
        rank = inp.rank if inp.rank is not None else i
        with NsysExport(inp.path, rank=rank) as db:
            db.ensure_views()
            total = db.query("SELECT (SELECT COUNT(*) FROM nsys_gpu_op) + (SELECT COUNT(*) FROM nsys_nvtx)",
                             place="timeline")[0][0]
            info = TimelineRank(rank, db.label, inp.path, (db.epoch_offset_ns or 0) - origin_ns if anchored else 0,
                                db.epoch_offset_ns, total, db.meta.era, _gpu_models(db))
            for sink in sinks:
                sink.rank(info)
            for lane in _gpu_lanes(db):
                for sink in sinks:
                    sink.lane(rank, lane)
            kept = 0
            for item in _slices(db, run.per_rank, info.shift_ns):
                if isinstance(item, Slice):
                    kept += 1
                    for sink in sinks:
                        sink.slice(rank, item)
                else:
                    for sink in sinks:
                        sink.lane(rank, item)
            for sink in sinks:
                sink.rank_done(info, kept)
    return run


class _TraceSink:
    """Writes the Chrome/Perfetto trace as the slices come, and gathers ``otherData``."""

    def __init__(self, fh: IO[bytes]) -> None:
        self.fh = fh
        self.first = True
        self.other: dict[str, Any] = {}

    def _write(self, ev: dict[str, Any]) -> None:
        self.fh.write((b"" if self.first else b",\n") + json.dumps(ev, ensure_ascii=False).encode())
        self.first = False

    def begin(self, run: TimelineRun) -> None:
        self.other = {"kind": TRACE_KIND, "ranks": [], "clock": {}, "events": 0, "truncated": {},
                      "time_origin_unix_s": run.origin_ns // 1_000_000_000 if run.anchored else None,
                      "time_base": "microseconds since time_origin_unix_s (UTC)" if run.anchored else
                      "microseconds on each export's own clock (an export has no UTC anchor)"}
        self.fh.write(b'{"traceEvents": [\n')

    def rank(self, info: TimelineRank) -> None:
        pid = info.rank
        self._write({"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                     "args": {"name": f"rank {pid} ({info.label})"}})
        self._write({"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0, "args": {"sort_index": pid}})

    def lane(self, rank: int, lane: Lane) -> None:
        self._write({"name": "thread_name", "ph": "M", "pid": rank, "tid": lane.tid, "args": {"name": lane.name}})

    def slice(self, rank: int, s: Slice) -> None:
        ev: dict[str, Any] = {"name": s.name, "cat": s.cat, "ph": "X", "pid": rank, "tid": s.lane,
                              "ts": s.start / 1e3, "dur": s.dur / 1e3}
        if s.nbytes is not None:
            ev["args"] = {"bytes": s.nbytes}
        self._write(ev)

    def rank_done(self, info: TimelineRank, kept: int) -> None:
        other = self.other
        other["ranks"].append({"rank": info.rank, "label": info.label, "events": kept})
        other["clock"][str(info.rank)] = {
            "epoch_offset_ns": info.epoch_offset_ns,
            "base": "UTC epoch (nsys session anchor)" if info.epoch_offset_ns is not None else
                    "the export's own clock (no UTC anchor)",
            "uncertainty": "the host's clock synchronisation (not measured by nsys)"}
        other["events"] += kept
        if info.total > kept:
            other["truncated"][str(info.rank)] = info.total - kept

    def end(self) -> None:
        self.fh.write(b'\n], "otherData": ' + json.dumps(self.other).encode() + b"}\n")


def write_timeline(specs: Sequence[str | Path], output: Path, *, max_events: int = 2_000_000,
                   sinks: Sequence[TimelineSink] = (), compress: bool | None = None) -> dict[str, Any]:
    """Write the trace of the exports named by ``specs`` to ``output`` (``.json`` or ``.json.gz``), atomically.

    ``sinks`` get the same pass (e.g. the HTML page), so the exports are read once. ``compress``
    gzips the output (default: when its name ends with ``.gz``). Returns ``otherData`` (ranks,
    clocks, counts, what was truncated).
    """
    from my_utils.core.atomic import atomic_write

    output.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(output, "wb", encoding=None) as raw, contextlib.ExitStack() as stack:
        fh: IO[bytes] = raw
        if output.name.endswith(".gz") if compress is None else compress:
            fh = stack.enter_context(gzip.GzipFile(fileobj=raw, mode="wb", mtime=0))  # type: ignore[arg-type]
        trace = _TraceSink(fh)
        read_timeline(specs, [trace, *sinks], max_events=max_events)
        trace.end()
    return trace.other


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
