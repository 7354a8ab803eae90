"""The streaming merge: each rank's regions and each torch trace laid out by its own task, then k-way merged.

Memory of the main process does not grow with the rank count. It makes one pass over the
metric events: every MyTimer region goes to its rank's spill file (buffered, at most
``_FLUSH_BYTES`` held for all ranks together), the few ``clock_sync`` records and
each rank's step starts (for the uncertainty warning) stay in memory. Then one task per
rank's regions and one per torch trace (:func:`layout_regions`, :func:`layout_torch`) run
through :func:`my_utils.profiling.providers.parallel.run_many`, the local-process / Dask
path of ingest. A task holds one rank's regions or one trace's events: it packs them into
lanes (:func:`my_utils.profiling.trace.lanes.pack`) and writes them to its own spill file
*sorted by time*, one record a line::

    <unix ns on the rank's clock>\\t<lane index>\\t<kind>\\t<dur µs>\\t<JSON of the event without ts/pid/tid>

``kind`` is ``m`` (a MyTimer region), ``t`` (a torch ``X`` slice), ``i`` (another torch event:
instant, counter) or ``f`` (every ``s``/``t``/``f`` event of one flow of one file, as one
record: a JSON list of ``[ns after the record's time, lane, JSON]``, so no output part ever
holds half a flow). Kineto writes one start and an end per kernel when one launch runs several
kernels: each end becomes its own arrow from a copy of the start, since viewers pair one start
with one end. An end whose start is outside the window cannot be drawn: such events are left
out and counted in ``otherData.unpaired_flow_events_dropped``, so that the merged trace passes
the checker. A task returns small metadata only (rank, host, lane names, first and
last time, event counts and byte/duration histograms, which ``--overflow trim`` uses).

The main process then assigns pids (rank + 1) and tids (unique, above every pid, in the
order of the in-memory layout), picks the time origin and ``heapq.merge``-s the sorted spill
files, shifted by each rank's clock offset, into the output: :meth:`Plan.records` yields each
record's finished JSON texts, writing ``ts`` (µs since ``time_origin_unix_s``, exact to the
ns), ``pid`` and ``tid`` in front of the stored text without parsing it again.
"""

from __future__ import annotations

import contextlib
import heapq
import json
import math
import os
import resource
import shutil
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from my_utils.core.errors import InputError, UsageError
from my_utils.core.events import MetricEvent
from my_utils.core.safe_io import strict_json
from my_utils.profiling.providers.scratch import make_scratch
from my_utils.profiling.trace.clock import (
    CLOCK_SYNC_NAME,
    ClockSync,
    clock_sync_from_attrs,
    latest_per_rank,
    rebase,
    uncertainty_warnings,
)
from my_utils.profiling.trace.discover import find_named_traces
from my_utils.profiling.trace.lanes import pack

TRACE_SCHEMA_VERSION = "1.0"
SCRATCH_PREFIX = "myutils-trace-"
NO_RANK = -1
# candidate duration thresholds of --overflow trim (µs): 0, then 1-2-5 steps from 1 ns to 50 s
THRESHOLDS_US: tuple[float, ...] = (0.0, *(m * 10.0 ** e for e in range(-3, 8) for m in (1, 2, 5)))
_FLUSH_BYTES = 1 << 20  # region lines buffered in the main process (all ranks together) before they are spilled
_FLOW_PHASES = ("s", "t", "f")
FAN_IN_MAX = 256  # spill files merged at once (issue 24: 2,008 open at 1,000 ranks passed common limits)
_FD_MARGIN = 16  # files the rest of the command may open meanwhile (imports, the progress bar, a log)


def dump(obj: Any) -> str:
    """Compact JSON, as written into the trace; a NaN or infinity (in a torch event's args) becomes null."""
    return strict_json(obj, separators=(",", ":"), default=str)


def us_to_ns(us: float) -> int:
    """µs (int or float, possibly ~1e15 unix µs) → integer ns, without going through a ~1e18 float."""
    if isinstance(us, int):
        return us * 1000
    whole = math.floor(us)
    return int(whole) * 1000 + round((us - whole) * 1000)


def format_us(ns: int) -> str:
    """Integer ns → µs with 3 decimals, exactly (a float would lose ns at unix-epoch magnitudes)."""
    sign, ns = ("-", -ns) if ns < 0 else ("", ns)
    return f"{sign}{ns // 1000}.{ns % 1000:03d}"


def utf8_len(text: str) -> int:
    """Bytes of ``text`` in UTF-8, without encoding it when it is ASCII (most event texts are)."""
    return len(text) if text.isascii() else len(text.encode())


def bucket(dur_us: float) -> int:
    """Index into :data:`THRESHOLDS_US` of the largest threshold ``<= dur_us`` (0 for negative)."""
    return max(bisect_right(THRESHOLDS_US, dur_us) - 1, 0)


def _thread_label(ev: dict[str, Any]) -> str:
    pid, tid = ev.get("pid"), ev.get("tid")
    return f"{pid}/{tid}" if pid not in (None, "") or tid not in (None, "") else "process-wide"


def flow_id(unit: int, arrow: int) -> int:
    """The id of a file's ``arrow``-th flow: unique in the merged trace, an integer below 2**53 for viewers.

    Ids are renumbered, not kept: ids of different files must not pair up, and Kineto's own
    ids can pass 10**9 (a counter per correlation kind), so no fixed offset would keep them apart.
    """
    return (unit + 1) * 10**9 + arrow


class _Unit:
    """Collects one task's records and metadata (inside the worker)."""

    def __init__(self) -> None:
        self.lanes: list[tuple[str, int]] = []  # (base label, overlap index); index in this list = lane index
        self.records: list[tuple[int, int, str, float, str]] = []  # ns, lane, kind, dur_us, text
        self.hist = [[0, 0] for _ in THRESHOLDS_US]  # per duration bucket: torch events, text bytes
        self.counts = {"m": [0, 0], "f": [0, 0]}  # events, text bytes
        self.max_ns: int | None = None  # the latest event time (a flow's last event, not its record's time)

    def lane(self, label: str, j: int) -> int:
        self.lanes.append((label, j))
        return len(self.lanes) - 1

    def add(self, ns: int, lane: int, kind: str, dur: float, text: str, events: int = 1, size: int = 0,
            extent: int = 0) -> None:
        """One record at ``ns``; ``extent``: ns from it to its last event (a flow's end)."""
        self.records.append((ns, lane, kind, dur, text))
        if self.max_ns is None or ns + extent > self.max_ns:
            self.max_ns = ns + extent
        size = size or utf8_len(text)
        if kind in ("t", "i"):
            cell = self.hist[bucket(dur)]
            cell[0] += 1
            cell[1] += size
        else:
            self.counts[kind][0] += events
            self.counts[kind][1] += size

    def finish(self, out: str, **meta: Any) -> dict[str, Any]:
        self.records.sort(key=lambda r: r[0])  # stable: same-time records keep the lane order
        try:
            with open(out, "w", encoding="utf-8") as fh:
                fh.writelines(f"{ns}\t{lane}\t{kind}\t{dur!r}\t{text}\n"
                              for ns, lane, kind, dur, text in self.records)
        except OSError as exc:
            raise scratch_error(exc, out) from None
        return {**meta, "lanes": self.lanes, "records": len(self.records),
                "min_ns": self.records[0][0] if self.records else None, "max_ns": self.max_ns,
                "hist": self.hist, "counts": self.counts}


def layout_regions(spill: str, out: str) -> dict[str, Any]:
    """Task: one rank's MyTimer regions (the spill file of :func:`distribute`) → lanes → sorted records."""
    by_lane: dict[str, list[dict[str, Any]]] = defaultdict(list)
    with open(spill, encoding="utf-8") as fh:
        for i, line in enumerate(fh):
            lane, ts_s, ms, name, args = json.loads(line)
            ns = us_to_ns(ts_s * 1e6)
            by_lane[lane].append({"ns": ns, "dur": round(ms * 1e3, 3), "name": name, "args": args, "i": i})
    base = min((e["ns"] for evs in by_lane.values() for e in evs), default=0)
    unit = _Unit()
    for name in sorted(by_lane):
        evs = by_lane[name]
        for e in evs:
            e["ts"] = (e["ns"] - base) / 1e3
        for j, lane_events in enumerate(pack(evs)):
            idx = unit.lane(name, j)
            for e in lane_events:
                unit.add(e["ns"], idx, "m", e["dur"], dump({"ph": "X", "cat": "mytimer", "name": e["name"],
                                                           "dur": e["dur"], "args": e["args"]}))
    return unit.finish(out, kind="regions")


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
    unit = _Unit()
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


@dataclass
class _Rank:
    host: str = ""
    regions: Path | None = None
    step_starts: dict[int, float] = field(default_factory=dict)  # unix s, before alignment
    units: list[int] = field(default_factory=list)  # indexes into Plan.units


_MAX_UNIX_S = 1e11  # the year 5138: a larger timestamp is a broken number, not a time


def _region_place(e: MetricEvent, n: int, where: str) -> tuple[str, str]:
    """(file, place) of the ``n``-th event: the CSV row it came from, else its index in the events."""
    if "file" in e.attrs and "line" in e.attrs:
        return str(e.attrs["file"]), f"line {e.attrs['line']}"
    return where, f"event {n} ({e.name!r}, rank {e.rank}, step {e.step})"


def _check_region(e: MetricEvent, n: int, where: str) -> None:
    """A region must be placeable: finite unix seconds and a finite duration >= 0 (ms)."""
    ts, value = e.ts, e.value
    if not isinstance(ts, (int, float)) or not -_MAX_UNIX_S <= ts <= _MAX_UNIX_S:
        raise InputError(*_region_place(e, n, where), f"ts to be finite unix seconds; found {ts!r}")
    if not isinstance(value, (int, float)) or not 0 <= value <= _MAX_UNIX_S * 1e3:
        raise InputError(*_region_place(e, n, where), f"a MyTimer duration to be a finite number of ms >= 0; "
                                                       f"found {value!r}")


def distribute(events: Iterable[MetricEvent], folder: Path,
               where: str = "the events") -> tuple[dict[int, _Rank], list[ClockSync], set[str]]:
    """The one pass over the events: regions to per-rank spill files, clock records and step starts kept,
    and the names of the torch traces the events came from (their ``attrs.file``). ``where`` names the
    events in messages."""
    ranks: dict[int, _Rank] = {}
    syncs: list[ClockSync] = []
    trace_names: set[str] = set()
    buffers: dict[int, list[str]] = defaultdict(list)
    pending = 0

    def rank_of(r: int | None) -> _Rank:
        key = NO_RANK if r is None else r
        if key not in ranks:
            ranks[key] = _Rank()
        return ranks[key]

    def flush() -> None:
        for key, lines in buffers.items():
            path = ranks[key].regions
            assert path is not None
            try:
                with open(path, "a", encoding="utf-8") as fh:
                    fh.write("\n".join(lines) + "\n")
            except OSError as exc:
                raise scratch_error(exc, path) from None
        buffers.clear()

    for n, e in enumerate(events, 1):
        if e.name == CLOCK_SYNC_NAME:
            if e.rank is not None:
                syncs.append(clock_sync_from_attrs(e.rank, e.attrs, str(e.attrs.get("file", "events"))))
                rank_of(e.rank).host = rank_of(e.rank).host or str(e.attrs.get("host", "") or "")
            continue
        if e.source != "mytimer" or e.kind != "duration" or e.ts is None or e.name == "step_time":
            if e.source == "torch_profiler" and e.attrs.get("file"):
                trace_names.add(str(e.attrs["file"]))
            continue  # aggregates (one value per step) are not spans of a timeline
        _check_region(e, n, where)
        key = NO_RANK if e.rank is None else e.rank
        r = rank_of(e.rank)
        r.host = r.host or str(e.attrs.get("host", "") or "")
        if r.regions is None:
            r.regions = folder / f"regions_{key}.jsonl"
        lane = "mytimer cuda" if e.attrs.get("clock") == "cuda" else "mytimer"
        args = {"step": e.step, "duration_ms": e.value}
        args.update({k: v for k, v in e.attrs.items() if k in ("path", "depth", "node_id", "file")})
        line = dump([lane, e.ts, e.value, e.name, args])
        buffers[key].append(line)
        pending += len(line) + 64  # the str object's own size, roughly
        if pending >= _FLUSH_BYTES:
            flush()
            pending = 0
        if lane == "mytimer" and e.attrs.get("depth") == 0 and e.step is not None:
            r.step_starts[e.step] = min(r.step_starts.get(e.step, math.inf), e.ts)
    flush()
    return ranks, syncs, trace_names


@dataclass
class Unit:
    """One task's spill file and what the main process decided for it."""

    rank: int
    spill: Path
    meta: dict[str, Any]
    shift_ns: int = 0
    lane_ids: list[tuple[int, int]] = field(default_factory=list)  # lane index → (pid, tid)


@dataclass
class Sizes:
    """Upper bounds of what each kind of event adds to the output, for splitting and trimming."""

    overhead: int  # bytes an event adds besides its stored text (ts, pid, tid, separator), at most
    mytimer: tuple[int, int]  # events, text bytes
    flows: tuple[int, int]
    torch_hist: list[tuple[int, int]]  # per THRESHOLDS_US bucket: events, text bytes

    def bound(self, kept: tuple[int, int]) -> int:
        """Bytes of ``kept`` = (events, text bytes) in the output, at most."""
        return kept[1] + kept[0] * self.overhead

    def torch_from(self, j: int) -> tuple[int, int]:
        """Torch events (and their bytes) at least ``THRESHOLDS_US[j]`` µs long; ``j = len`` keeps none."""
        cells = self.torch_hist[j:]
        return sum(c for c, _b in cells), sum(b for _c, b in cells)


@dataclass
class Plan:
    """A merge laid out and ready to stream: metadata, otherData, and the sorted spill files."""

    metadata: list[dict[str, Any]]
    other: dict[str, Any]
    warnings: list[str]
    units: list[Unit]
    origin_ns: int
    sizes: Sizes
    events: int  # events (not metadata) the output will hold, untrimmed
    folder: Path | None = None  # the scratch folder (intermediate merges of more than fan_in files go there)
    fan_in: int = FAN_IN_MAX  # spill files open at once, at most (what the open-file limit allowed)

    def records(self, reserve: int = 1) -> Iterator[tuple[str, float, list[str]]]:
        """(kind, dur µs, finished JSON texts) in time order: one text, or every event of one flow.

        At most ``fan_in`` spill files are open at once (fewer when ``reserve`` other files, the
        outputs, must stay open beside them): more units are first merged in groups into
        intermediate files, level by level, in the same order.
        """
        fan = min(self.fan_in, merge_fan_in(reserve))
        streams: list[Iterator[tuple[int, int, str]]] = [_unit_stream(u) for u in self.units if u.meta["records"]]
        lane_ids = [u.lane_ids for u in self.units]
        origin = self.origin_ns
        try:
            level = 0
            while len(streams) > fan:
                streams = [self._premerge(group, level, g) if len(group) > 1 else group[0]
                           for g, group in enumerate(streams[i:i + fan] for i in range(0, len(streams), fan))]
                level += 1
            for key, index, rest in heapq.merge(*streams, key=lambda r: (r[0], r[1])):
                lane, kind, dur, text = rest.rstrip("\n").split("\t", 3)
                ids = lane_ids[index]
                if kind == "f":
                    texts = []
                    for delta, flane, ftext in json.loads(text):
                        pid, tid = ids[flane]
                        texts.append(f'{{"ts":{format_us(key + delta - origin)},"pid":{pid},"tid":{tid},{ftext[1:]}')
                    yield kind, 0.0, texts
                else:
                    pid, tid = ids[int(lane)]
                    yield kind, float(dur), [f'{{"ts":{format_us(key - origin)},"pid":{pid},"tid":{tid},{text[1:]}']
        finally:
            for stream in streams:
                stream.close()  # type: ignore[attr-defined]  # generators: their files close now

    def _premerge(self, group: list[Iterator[tuple[int, int, str]]], level: int, g: int) -> Iterator[
            tuple[int, int, str]]:
        """Merge ``group`` into one sorted intermediate file (lines: shifted ns, unit index, the record)."""
        if self.folder is None:
            raise UsageError("Plan.records: more spill files than may be open at once and no scratch folder")
        path = self.folder / f"merge_{level}_{g}.tsv"
        try:
            with open(path, "w", encoding="utf-8") as fh:
                fh.writelines(f"{key}\t{index}\t{rest}" for key, index, rest in
                              heapq.merge(*group, key=lambda r: (r[0], r[1])))
        except OSError as exc:
            raise scratch_error(exc, path) from None
        finally:
            for stream in group:
                stream.close()  # type: ignore[attr-defined]
        return _merged_stream(path)


def _unit_stream(unit: Unit) -> Iterator[tuple[int, int, str]]:
    """A unit's spill file as (ns on the reference clock, unit index, the rest of the line)."""
    shift, index = unit.shift_ns, unit.meta["index"]
    with open(unit.spill, encoding="utf-8") as fh:
        for line in fh:
            ns, rest = line.split("\t", 1)
            yield int(ns) + shift, index, rest


def _merged_stream(path: Path) -> Iterator[tuple[int, int, str]]:
    """An intermediate file of :meth:`Plan._premerge`, read back; removed once read."""
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                ns, index, rest = line.split("\t", 2)
                yield int(ns), int(index), rest
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


def scratch_error(exc: OSError, path: Path | str) -> OSError:
    """``exc`` naming the scratch file and what to do (a full $TMPDIR said "No space left on device", no path)."""
    return type(exc)(exc.errno, f"{exc.strerror or exc} (a scratch file of trace, in {Path(path).parent}; trace "
                                f"needs scratch space about the size of its output: set TMPDIR to a folder with "
                                f"more room)", str(path))


def _open_fds() -> int:
    """File descriptors this process holds now (Linux, macOS); a generous guess elsewhere."""
    for folder in ("/proc/self/fd", "/dev/fd"):
        with contextlib.suppress(OSError):
            return len(os.listdir(folder))
    return 64


def merge_fan_in(reserve: int = 0, wanted: int = FAN_IN_MAX) -> int:
    """Spill files the merge may hold open at once: the soft open-file limit (raised toward ``wanted`` when the
    hard limit allows) less the files open now, ``reserve`` more and a margin; at most ``FAN_IN_MAX``."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ValueError, OSError):
        return FAN_IN_MAX
    open_now = _open_fds()
    needed = open_now + reserve + _FD_MARGIN + min(wanted, FAN_IN_MAX)
    if soft != resource.RLIM_INFINITY and soft < needed:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (needed if hard == resource.RLIM_INFINITY
                                                        else min(needed, hard), hard))
            soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY:
        return FAN_IN_MAX
    return min(FAN_IN_MAX, soft - open_now - reserve - _FD_MARGIN)


@contextlib.contextmanager
def planned(events: Iterable[MetricEvent], torch_traces: Sequence[Any] = (), *, reference_rank: int = 0,
            auto_align: bool = True, sources: Sequence[str] = (), executor: Any = None,
            max_workers: int | None = None, generator: str = "my_utils.profiling.trace.merge_trace",
            traces_beside: Path | None = None) -> Iterator[Plan]:
    """Lay the merge out in a temporary folder; the :class:`Plan` is valid inside the block.

    ``torch_traces`` are paths (read by the tasks) or already read ``TorchTrace`` objects (laid out
    in this process). With ``traces_beside``, the torch traces the events name (``attrs.file``)
    are added, found in that folder or below it in the same pass over the events
    (:func:`~my_utils.profiling.trace.discover.find_named_traces`; those not found are warned about). The folder and
    every spill file are removed when the block ends, however.
    """
    from my_utils.profiling.providers.parallel import run_many

    # named by this process: a later run removes it if this one is killed (SIGKILL runs no finally)
    folder = make_scratch(SCRATCH_PREFIX)
    try:
        ranks, syncs, trace_names = distribute(events, folder, sources[0] if len(sources) == 1 else "the events")
        found_warnings: list[str] = []
        if traces_beside is not None:
            named, found_warnings = find_named_traces(traces_beside, trace_names)
            torch_traces = [*torch_traces, *named]
        region_keys = sorted(k for k, r in ranks.items() if r.regions is not None)
        calls: list[tuple[Any, ...]] = [(str(ranks[k].regions), str(folder / f"unit_{i}.tsv"))
                                        for i, k in enumerate(region_keys)]
        n = len(calls)
        paths = [t for t in torch_traces if not hasattr(t, "events")]
        read = [t for t in torch_traces if hasattr(t, "events")]
        # before the parallel work: the merge must be able to open its files, the tasks to write theirs
        fan_in = merge_fan_in(reserve=4 * (max_workers or os.cpu_count() or 1), wanted=n + len(torch_traces))
        if fan_in < 2:
            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            raise UsageError(f"the open-file limit ({soft}, hard limit {hard}) leaves no room to merge the "
                             f"{n + len(torch_traces)} spill files of trace (it needs about "
                             f"{_open_fds() + _FD_MARGIN + 2 + 4 * (max_workers or 1)}); raise it (ulimit -n)")
        check_scratch_room(folder, [str(t) for t in paths])
        metas = run_many(_task, [("regions", *c) for c in calls]
                         + [("torch", str(p), str(folder / f"unit_{n + i}.tsv"), n + i) for i, p in enumerate(paths)],
                         executor, max_workers)
        metas += [torch_records(t, str(folder / f"unit_{n + len(paths) + i}.tsv"), n + len(paths) + i)
                  for i, t in enumerate(read)]
        units: list[Unit] = []
        for i, meta in enumerate(metas):
            meta["index"] = i
            if meta["kind"] == "regions":
                key = region_keys[i]
            else:
                key = NO_RANK if meta["rank"] is None else meta["rank"]
                if key not in ranks:
                    ranks[key] = _Rank()
                ranks[key].host = ranks[key].host or meta["host"]
            ranks[key].units.append(i)
            units.append(Unit(key, folder / f"unit_{i}.tsv", meta))
        plan = _plan(ranks, syncs, units, reference_rank, auto_align, sources, generator)
        plan.warnings[:0] = found_warnings  # the same list as otherData.warnings
        plan.folder, plan.fan_in = folder, fan_in
        yield plan
    finally:
        shutil.rmtree(folder, ignore_errors=True)


SPILL_PER_TRACE_BYTE = 0.7  # spill bytes per byte of uncompressed torch trace, at least (0.69-0.87 on real traces)


def _json_size(path: str) -> int:
    """Uncompressed size of a trace file: its size, or a gzip's own record of it (modulo 4 GiB)."""
    try:
        with open(path, "rb") as fh:
            if fh.read(2) != b"\x1f\x8b":
                return os.fstat(fh.fileno()).st_size
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(size - 4, 0))
            raw = int.from_bytes(fh.read(4), "little")
    except OSError:
        return 0
    while raw < size:  # the trailer keeps the size modulo 4 GiB; a trace compresses, it never grows
        raw += 1 << 32
    return raw


def check_scratch_room(folder: Path, traces: Sequence[str]) -> None:
    """Refuse before the work when ``folder``'s filesystem has clearly less room than the spill files will take."""
    need = int(SPILL_PER_TRACE_BYTE * sum(_json_size(t) for t in traces))
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return
    if need > free:
        raise UsageError(f"trace needs about {need / (1 << 20):,.0f} MB of scratch space for its spill files in "
                         f"{folder.parent} and {free / (1 << 20):,.0f} MB are free there; set TMPDIR to a folder "
                         "with more room (scratch space about the size of the output is needed)")


def _task(kind: str, *args: Any) -> dict[str, Any]:
    """One task of :func:`planned` (module level: process pools and Dask workers import it)."""
    return layout_regions(*args) if kind == "regions" else layout_torch(*args)


def _pid(rank: int, ranks: dict[int, _Rank]) -> int:
    return rank + 1 if rank != NO_RANK else max([k for k in ranks if k != NO_RANK], default=-1) + 2


def _plan(ranks: dict[int, _Rank], syncs: list[ClockSync], units: list[Unit], reference_rank: int,
          auto_align: bool, sources: Sequence[str], generator: str) -> Plan:
    warnings: list[str] = []
    measured = latest_per_rank(syncs)
    offsets = rebase(measured, reference_rank) if auto_align else {}
    if auto_align and len([k for k in ranks if k != NO_RANK]) > 1:
        missing = sorted(k for k in ranks if k not in offsets and k not in (NO_RANK, reference_rank))
        if missing:
            warnings.append(f"ranks {missing} have no clock_sync record: their timestamps are used as recorded "
                            "(call my_utils.distributed.align_clocks on every rank to measure the offsets)")
    shifts: dict[int, tuple[float, float]] = {}  # rank -> (shift for MyTimer, shift for torch), seconds
    for k in ranks:
        s = offsets.get(k)
        shifts[k] = (0.0, 0.0) if s is None else (0.0 if s.applied else s.offset_s, s.offset_s)
    aligned_starts = {k: {step: t + shifts[k][0] for step, t in r.step_starts.items()} for k, r in ranks.items()}
    warnings += uncertainty_warnings(offsets, aligned_starts, reference_rank)
    for u in units:
        u.shift_ns = us_to_ns(shifts[u.rank][0 if u.meta["kind"] == "regions" else 1] * 1e6)
    starts = [u.meta["min_ns"] + u.shift_ns for u in units if u.meta["min_ns"] is not None]
    origin_s = math.floor(min(starts) / 1e9) if starts else 0
    origin_ns = origin_s * 1_000_000_000
    metadata = _layout(ranks, units)
    torch_paths = {k: [units[i].meta["path"] for i in r.units if units[i].meta["kind"] == "torch"]
                   for k, r in ranks.items()}
    other = {
        "schema_version": TRACE_SCHEMA_VERSION,
        "generator": generator,
        "time_base": "microseconds since time_origin_unix_s on the reference rank's clock",
        "time_origin_unix_s": origin_s,
        "reference_rank": reference_rank,
        "auto_align_ranks": auto_align,
        "clock_offsets": {str(k): {**(offsets[k].to_dict() if k in offsets else
                                      {"offset_s": None, "uncertainty_s": None, "reference_rank": None,
                                       "applied": None}),
                                   "shift_mytimer_s": shifts[k][0], "shift_torch_s": shifts[k][1]}
                          for k in sorted(ranks) if k != NO_RANK},
        "ranks": [{"rank": None if k == NO_RANK else k, "pid": _pid(k, ranks), "host": r.host or None,
                   "torch_traces": torch_paths[k]} for k, r in sorted(ranks.items())],
        "sources": list(sources) + [u.meta["path"] for u in units if u.meta["kind"] == "torch"],
        "warnings": warnings,
    }
    unpaired = sum(u.meta.get("unpaired_flow_events", 0) for u in units)
    if unpaired:
        other["unpaired_flow_events_dropped"] = unpaired
    return Plan(metadata, other, warnings, units, origin_ns, _sizes(units, metadata, origin_ns),
                sum(u.meta["counts"]["m"][0] + u.meta["counts"]["f"][0] + sum(c for c, _b in u.meta["hist"])
                    for u in units))


def _layout(ranks: dict[int, _Rank], units: list[Unit]) -> list[dict[str, Any]]:
    """Process and lane metadata; fills each unit's lane → (pid, tid) (the in-memory layout's order)."""
    metadata: list[dict[str, Any]] = []
    next_tid = max((_pid(k, ranks) for k in ranks), default=0) + 1
    for sort_index, (k, r) in enumerate(sorted(ranks.items(), key=lambda kv: (kv[0] == NO_RANK, kv[0]))):
        pid = _pid(k, ranks)
        label = "rank unknown" if k == NO_RANK else f"rank {k}"
        metadata.append({"ph": "M", "name": "process_name", "pid": pid, "tid": pid,
                         "args": {"name": f"{label} ({r.host or 'unknown host'})"}})
        metadata.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": pid,
                         "args": {"sort_index": sort_index}})
        n_torch = sum(units[i].meta["kind"] == "torch" for i in r.units)
        lanes: list[tuple[str, int, Unit, int]] = []  # final base name, overlap index, unit, lane index
        t = 0
        for i in r.units:
            u = units[i]
            if u.meta["kind"] == "torch":
                t += 1
            u.lane_ids = [(0, 0)] * len(u.meta["lanes"])
            for idx, (base, j) in enumerate(u.meta["lanes"]):
                name = base if u.meta["kind"] == "regions" else f"torch{'' if n_torch == 1 else f' #{t}'}: {base}"
                lanes.append((name, j, u, idx))
        for name, j, u, idx in sorted(lanes, key=lambda x: (not x[0].startswith("mytimer"), x[0], x[1])):
            tid, next_tid = next_tid, next_tid + 1
            u.lane_ids[idx] = (pid, tid)
            metadata.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                             "args": {"name": name if j == 0 else f"{name} (overlapping {j})"}})
            metadata.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                             "args": {"sort_index": len(metadata)}})
    return metadata


def _sizes(units: list[Unit], metadata: list[dict[str, Any]], origin_ns: int) -> Sizes:
    ends = [u.meta["max_ns"] + u.shift_ns for u in units if u.meta["max_ns"] is not None]
    starts = [u.meta["min_ns"] + u.shift_ns for u in units if u.meta["min_ns"] is not None]
    widest = max([len(format_us(t - origin_ns)) for t in ends + starts] or [0])
    ids = [m["tid"] for m in metadata] + [m["pid"] for m in metadata]
    digits = len(str(max(ids, default=0)))
    # '{"ts":T,"pid":P,"tid":T,' replaces the text's '{', and a ',' separates events
    overhead = len('{"ts":,"pid":,"tid":,') - 1 + widest + 2 * digits + 1
    hist = [(sum(u.meta["hist"][b][0] for u in units), sum(u.meta["hist"][b][1] for u in units))
            for b in range(len(THRESHOLDS_US))]

    def total(kind: str) -> tuple[int, int]:
        return (sum(u.meta["counts"][kind][0] for u in units), sum(u.meta["counts"][kind][1] for u in units))

    return Sizes(overhead, total("m"), total("f"), hist)
