"""MyTimer regions on their way to the timeline: one pass over the events into per-rank spill files, then lanes.

:func:`distribute` is the one pass over metric events (in the main process, for an events
file): every MyTimer region goes to its rank's spill file (buffered, at most ``_FLUSH_BYTES``
held for all ranks together); the few ``clock_sync`` records and each rank's host stay in
memory. :func:`distribute_csv` is the same pass over one profile CSV, run as a
task (process pool or Dask): the worker reads the CSV, so the main process never parses a
row (1,000 ranks' CSVs took it 42-46 s); it returns what the pass keeps in memory. A rank's
regions are its spill files in input order; :func:`layout_regions` (a task) packs them into
lanes and writes the rank's sorted records (:mod:`my_utils.profiling.trace.records`), and its
step starts (the earliest top-level region of each step, for the clock-uncertainty warning) to
``<records>.steps.json``: the main process reads them one rank at a time (:func:`step_starts`), so
it never holds every rank's steps (200 steps were ~9 KB a rank).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from my_utils.core.errors import InputError
from my_utils.core.events import MetricEvent
from my_utils.profiling.trace.clock import CLOCK_SYNC_NAME, ClockSync, clock_sync_from_attrs
from my_utils.profiling.trace.lanes import pack
from my_utils.profiling.trace.records import TaskRecords, dump, scratch_error, us_to_ns

__all__ = ["NO_RANK", "RankRegions", "distribute", "distribute_csv", "layout_regions", "step_starts", "steps_path"]

NO_RANK = -1
_FLUSH_BYTES = 1 << 20  # region lines buffered (all ranks together) before they are spilled
_MAX_UNIX_S = 1e11  # the year 5138: a larger timestamp is a broken number, not a time


@dataclass
class RankRegions:
    """What the pass keeps of one rank: its host and its spill files (in input order)."""

    host: str = ""
    regions: list[str] = field(default_factory=list)
    units: list[int] = field(default_factory=list)  # indexes into Plan.units

    def merge(self, other: RankRegions) -> None:
        """Fold in what a later input said of the same rank (the first host named wins, as in one pass)."""
        self.host = self.host or other.host
        self.regions += other.regions


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


class _Pass:
    """The pass over events: regions to spill files named ``<prefix><rank>.jsonl`` in ``folder``."""

    def __init__(self, folder: Path, prefix: str, where: str) -> None:
        self.folder, self.prefix, self.where = folder, prefix, where
        self.ranks: dict[int, RankRegions] = {}
        self.syncs: list[ClockSync] = []
        self.trace_names: set[str] = set()
        self.buffers: dict[int, list[str]] = defaultdict(list)
        self.pending = 0

    def rank_of(self, r: int | None) -> RankRegions:
        key = NO_RANK if r is None else r
        if key not in self.ranks:
            self.ranks[key] = RankRegions()
        return self.ranks[key]

    def flush(self) -> None:
        for key, lines in self.buffers.items():
            path = self.ranks[key].regions[0]
            try:
                with open(path, "a", encoding="utf-8") as fh:
                    fh.write("\n".join(lines) + "\n")
            except OSError as exc:
                raise scratch_error(exc, path) from None
        self.buffers.clear()
        self.pending = 0

    def add(self, e: MetricEvent, n: int) -> None:
        if e.name == CLOCK_SYNC_NAME:
            if e.rank is not None:
                self.syncs.append(clock_sync_from_attrs(e.rank, e.attrs, str(e.attrs.get("file", "events"))))
                r = self.rank_of(e.rank)
                r.host = r.host or str(e.attrs.get("host", "") or "")
            return
        if e.source != "mytimer" or e.kind != "duration" or e.ts is None or e.name == "step_time":
            if e.source == "torch_profiler" and e.attrs.get("file"):
                self.trace_names.add(str(e.attrs["file"]))
            return  # aggregates (one value per step) are not spans of a timeline
        _check_region(e, n, self.where)
        key = NO_RANK if e.rank is None else e.rank
        r = self.rank_of(e.rank)
        r.host = r.host or str(e.attrs.get("host", "") or "")
        if not r.regions:
            r.regions.append(str(self.folder / f"{self.prefix}{key}.jsonl"))
        lane = "mytimer cuda" if e.attrs.get("clock") == "cuda" else "mytimer"
        args = {"step": e.step, "duration_ms": e.value}
        args.update({k: v for k, v in e.attrs.items() if k in ("path", "depth", "node_id", "file")})
        line = dump([lane, e.ts, e.value, e.name, args])
        self.buffers[key].append(line)
        self.pending += len(line) + 64  # the str object's own size, roughly
        if self.pending >= _FLUSH_BYTES:
            self.flush()


def distribute(events: Iterable[MetricEvent], folder: Path,
               where: str = "the events") -> tuple[dict[int, RankRegions], list[ClockSync], set[str]]:
    """The one pass over the events: regions to per-rank spill files, clock records kept, and the names of the torch traces the events came from (their ``attrs.file``). ``where`` names the
    events in messages."""
    state = _Pass(folder, "regions_", where)
    for n, e in enumerate(events, 1):
        state.add(e, n)
    state.flush()
    return state.ranks, state.syncs, state.trace_names


def distribute_csv(csv: str, folder: str, index: int) -> dict[str, Any]:
    """Task: :func:`distribute` over one profile CSV (its regions to ``regions_c<index>_<rank>.jsonl``).

    The clock records are checked as ``clock_sync_events`` checks them (each names its rank
    and carries the fields alignment needs), after the regions, as a second pass would.
    Returns ``{"ranks": {rank: RankRegions}, "syncs": [ClockSync]}``.
    """
    from my_utils.profiling.formats.mytimer import read_profile_csv_events

    state = _Pass(Path(folder), f"regions_c{index}_", csv)
    events = read_profile_csv_events(Path(csv))
    for n, e in enumerate(events, 1):
        state.add(e, n)
    state.flush()
    for e in events:
        if e.name != CLOCK_SYNC_NAME:
            continue
        place = f"{csv}:{e.attrs.get('line')}"
        if e.rank is None:
            raise InputError(place, "CLOCK_SYNC row", "a machine_id ending in _rank<r> (or a rank in the file name)")
        clock_sync_from_attrs(e.rank, e.attrs, place)
    return {"ranks": state.ranks, "syncs": state.syncs}


def steps_path(records: str | Path) -> str:
    """A rank's step starts, beside its records: ``[[step, unix s], ...]``."""
    return f"{records}.steps.json"


def step_starts(records: str | Path) -> dict[int, float]:
    """The step starts :func:`layout_regions` wrote beside ``records`` (unix s, before alignment)."""
    try:
        with open(steps_path(records), encoding="utf-8") as fh:
            return {step: t for step, t in json.load(fh)}
    except FileNotFoundError:
        return {}


def layout_regions(spills: str | Sequence[str], out: str) -> dict[str, Any]:
    """Task: one rank's MyTimer regions (its spill files, in order) → lanes → sorted records, and step starts."""
    by_lane: dict[str, list[dict[str, Any]]] = defaultdict(list)
    starts: dict[Any, float] = {}  # step -> its earliest top-level CPU region (unix s)
    i = 0
    for spill in [spills] if isinstance(spills, str) else spills:
        with open(spill, encoding="utf-8") as fh:
            for line in fh:
                lane, ts_s, ms, name, args = json.loads(line)
                ns = us_to_ns(ts_s * 1e6)
                by_lane[lane].append({"ns": ns, "dur": round(ms * 1e3, 3), "name": name, "args": args, "i": i})
                i += 1
                step = args["step"]
                if lane == "mytimer" and args.get("depth") == 0 and step is not None:
                    starts[step] = min(starts.get(step, math.inf), ts_s)
    if starts:
        try:
            with open(steps_path(out), "w", encoding="utf-8") as fh:
                fh.write(dump(list(starts.items())))
        except OSError as exc:
            raise scratch_error(exc, out) from None
    base = min((e["ns"] for evs in by_lane.values() for e in evs), default=0)
    unit = TaskRecords()
    for name in sorted(by_lane):
        evs = by_lane[name]
        for e in evs:
            e["ts"] = (e["ns"] - base) / 1e3
        for j, lane_events in enumerate(pack(evs)):
            idx = unit.lane(name, j)
            for e in lane_events:
                unit.add(e["ns"], idx, "m", e["dur"], dump({"ph": "X", "cat": "mytimer", "name": _shown(e),
                                                           "dur": e["dur"], "args": e["args"]}))
    return unit.finish(out, kind="regions")


def _shown(region: dict[str, Any]) -> str:
    """A step's slice (a top-level region) says its step: ``iter · step 6``; the name alone is in args.region."""
    args = region["args"]
    if args.get("depth") == 0 and args.get("step") is not None:
        args["region"] = region["name"]
        return f"{region['name']} · step {args['step']}"
    return str(region["name"])
