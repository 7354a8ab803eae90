"""Profile CSV -> Chrome/Perfetto trace JSON (``csv_to_trace``).

One process per rank, named ``rank R (host)``; START/END pairs become ``B``/``E`` slices, in µs.
Two layouts of the threads (lanes) inside a process:

- ``"rank"`` (the default): one lane per rank (per timer tag); every step is a parent slice
  ``step N`` (an ``X`` event) holding that step's regions. A run of 1,000 steps is one lane.
  Regions of zero µs are ``X`` events there (on a lane with ``X`` events Perfetto leaves a
  B/E pair at one timestamp unended); every other region is a ``B``/``E`` pair.
- ``"step"``: one lane per step (``step_N``), the seed's layout; 1,000 steps are 1,000 lanes.

Why the ids are what they are: viewers treat a tid equal to its pid as the process's main thread
and Perfetto keys threads by tid across the whole trace, so ``tid 0`` (or any tid reused in two
processes, or equal to a pid) silently merges lanes: rank 1's ``step_0`` slices ended up in its
``step_1`` lane. Here pid = rank + 1 (pid 0 is the idle "swapper" process in Perfetto's model),
and every tid is unique in the file and larger than every pid. Lanes are named with
``thread_name`` and ordered with ``thread_sort_index``.

START and END rows are paired by ``node_id`` (MyTimer rows) or else by name, innermost first.
Pairs that would not nest inside their lane (hand-written rows that overlap) go to an extra
lane (``... (overlapping N)``), so every lane stays properly nested. Rows without a partner,
and rows of other types (marks), become instant events.
"""

from __future__ import annotations

import gzip
import json
import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Union

from my_utils.core.atomic import atomic_write
from my_utils.core.errors import InputError, UsageError
from my_utils.core.paths import StrPath, as_paths
from my_utils.core.profile_csv import ProfileRow, iter_profile_rows
from my_utils.core.safe_io import utf8_text

__all__ = [
    "TRACE_SCHEMA_VERSION",
    "ClockOffset",
    "TraceLayout",
    "csv_to_trace",
    "find_profile_csvs",
    "profile_rows_to_trace",
]

TRACE_SCHEMA_VERSION = 2
_RANK_RE = re.compile(r"rank[_-]?(\d+)\Z")
_CSV_RE = re.compile(r"profile_rank_(\d+)\.csv")
_Key = tuple[int, int, int]  # (µs, line, tie-break): the order things happened


class TraceLayout(str, Enum):
    """How lanes (threads) are laid out inside each rank's process."""

    RANK = "rank"
    STEP = "step"


@dataclass(frozen=True, slots=True)
class ClockOffset:
    """The clock offset a rank's GlobalLogger applied (``set_time_offset``), and its uncertainty."""

    offset_s: float
    uncertainty_s: float | None = None


ClockOffsets = Mapping[Union[int, str], Union[ClockOffset, float]]


@dataclass(slots=True)
class _Span:
    """A slice: a START/END pair, or (``row is None``) the parent slice of a step."""

    name: str
    start_us: int
    end_us: int
    start_key: _Key
    end_key: _Key
    group: int  # spans nest only inside a span of the same group (the step, in the rank layout)
    args: dict[str, Any]
    cat: str
    end_args: dict[str, Any] = field(default_factory=dict)
    is_step: bool = False


@dataclass(frozen=True, slots=True)
class _Proc:
    machine_id: str
    rank: int | None
    host: str
    pid: int

    @property
    def name(self) -> str:
        if self.rank is None:
            return self.machine_id
        return f"rank {self.rank} ({self.host})" if self.host else f"rank {self.rank}"


def _region_span(start: ProfileRow, end: ProfileRow, group: int) -> _Span:
    start_us = round(start.timestamp_unix * 1e6)
    end_us = max(start_us, round(end.timestamp_unix * 1e6))  # a clock step back must not end before the start
    meta = start.metadata_dict()
    args: dict[str, Any] = {"step": start.step, "duration_ms": end.duration_ms, "metadata": start.metadata}
    for key in ("node_id", "parent_id", "depth"):
        if meta.get(key, "").lstrip("-").isdigit():
            args[key] = int(meta[key])
    # at equal µs, a START opens after a parent (tie 1) and an END closes before it (tie 0)
    return _Span(start.event_name, start_us, end_us, (start_us, start.line, 1), (end_us, end.line, 0), group, args,
                 "MyTimer" if "node_id" in meta else "profile_event",
                 {"duration_ms": end.duration_ms, "metadata": end.metadata})


def _step_span(step: int, spans: list[_Span]) -> _Span:
    start = min(s.start_key for s in spans)
    end = max(s.end_key for s in spans)
    return _Span(f"step {step}", start[0], end[0], (start[0], start[1], 0), (end[0], end[1], 1), step,
                 {"step": step, "regions": len(spans)}, "step", is_step=True)


def _pack(spans: list[_Span]) -> list[list[_Span]]:
    """Spans into lanes in which they nest; a span nests only in a span of its own group.

    A span goes where an open span of its group can hold it, else into the first lane that
    is idle at its start, else into a new lane.
    """
    spans = sorted(spans, key=lambda s: s.start_key)
    lanes: list[list[_Span]] = []
    stacks: list[list[_Span]] = []  # open spans per lane, innermost last
    for span in spans:
        for stack in stacks:
            while stack and stack[-1].end_key < span.start_key:
                stack.pop()
        target = next((i for i, st in enumerate(stacks)
                       if st and st[-1].group == span.group and span.end_key <= st[-1].end_key), None)
        if target is None:
            target = next((i for i, st in enumerate(stacks) if not st), None)
        if target is None:
            lanes.append([])
            stacks.append([])
            target = len(lanes) - 1
        lanes[target].append(span)
        stacks[target].append(span)
    return lanes


def _lane_events(spans: list[_Span], pid: int, tid: int, zero_as_x: bool) -> list[dict[str, Any]]:
    """Events of one lane in nesting order (spans already sorted by start).

    Step slices are ``X`` events: tools that read our traces take ``B`` events for regions.
    With ``zero_as_x``, a region of zero µs is an ``X`` event too: on a lane with ``X`` events,
    Perfetto leaves a B/E pair at one timestamp unended or drops its end (``misplaced_end_event``).
    """
    events: list[dict[str, Any]] = []
    open_spans: list[tuple[_Span, bool]] = []  # (span, written as X)

    for span in spans:
        while open_spans and open_spans[-1][0].end_key < span.start_key:
            done, complete = open_spans.pop()
            if not complete:
                events.append({"name": done.name, "ph": "E", "ts": done.end_us, "pid": pid, "tid": tid,
                               "args": done.end_args})
        complete = span.is_step or (zero_as_x and span.end_us == span.start_us)
        event = {"name": span.name, "cat": span.cat, "ph": "X" if complete else "B", "ts": span.start_us,
                 "pid": pid, "tid": tid, "args": span.args}
        if complete:
            event["dur"] = span.end_us - span.start_us
        events.append(event)
        open_spans.append((span, complete))
    while open_spans:
        done, complete = open_spans.pop()
        if not complete:
            events.append({"name": done.name, "ph": "E", "ts": done.end_us, "pid": pid, "tid": tid,
                           "args": done.end_args})
    return events


def _processes(machines: list[str]) -> dict[str, _Proc]:
    """pid = rank + 1 when every machine_id ends in a distinct ``rank<N>``; else order of appearance + 1."""
    parsed: list[tuple[int | None, str]] = []
    for machine in machines:
        m = _RANK_RE.search(machine)
        parsed.append((int(m.group(1)), machine[: m.start()].rstrip("_-")) if m else (None, machine))
    ranks = [r for r, _ in parsed]
    by_rank = None not in ranks and len(set(ranks)) == len(ranks)
    return {machine: _Proc(machine, rank, host, (rank + 1 if by_rank and rank is not None else i + 1))
            for i, (machine, (rank, host)) in enumerate(zip(machines, parsed, strict=True))}


def _pair_rows(rows: list[ProfileRow], group_of: Any) -> tuple[list[_Span], list[tuple[ProfileRow, str]]]:
    """START/END rows of one lane group -> spans, and the rows left over (as instants, with a note)."""
    open_rows: list[tuple[tuple[int, str, str | None], ProfileRow]] = []
    spans: list[_Span] = []
    instants: list[tuple[ProfileRow, str]] = []
    for row in rows:
        kind = row.event_type.upper()
        if kind in ("START", "END"):
            key = (row.step, row.event_name, row.metadata_dict().get("node_id"))
            if kind == "START":
                open_rows.append((key, row))
                continue
            for i in range(len(open_rows) - 1, -1, -1):
                if open_rows[i][0] == key:
                    start = open_rows.pop(i)[1]
                    spans.append(_region_span(start, row, group_of(start)))
                    break
            else:
                instants.append((row, "END without a START"))
        else:
            instants.append((row, ""))
    instants.extend((row, "START without an END") for _, row in open_rows)
    return spans, instants


def _clock_entry(proc: _Proc, offsets: ClockOffsets) -> dict[str, float | None]:
    value = offsets.get(proc.machine_id)
    if value is None and proc.rank is not None:
        value = offsets.get(proc.rank)
    if value is None:
        return {"offset_s": None, "uncertainty_s": None}
    offset = value if isinstance(value, ClockOffset) else ClockOffset(float(value))
    return {"offset_s": offset.offset_s, "uncertainty_s": offset.uncertainty_s}


def _check_offsets(offsets: ClockOffsets, procs: Iterable[_Proc]) -> None:
    known = {p.machine_id for p in procs} | {p.rank for p in procs if p.rank is not None}
    for key, value in offsets.items():
        if key not in known:
            raise UsageError(f"csv_to_trace(clock_offsets=...): key {key!r} is neither a rank nor a machine_id of "
                             f"the rows (ranks and machines: {sorted(map(str, known))}); fix the key")
        numbers = [value.offset_s, value.uncertainty_s] if isinstance(value, ClockOffset) else [value]
        if not all(v is None or (isinstance(v, (int, float)) and math.isfinite(v)) for v in numbers):
            raise UsageError(f"csv_to_trace(clock_offsets=...): {key!r} -> {value!r}; expected seconds as finite "
                             "numbers (a float or ClockOffset(offset_s, uncertainty_s))")


def profile_rows_to_trace(rows: Iterable[ProfileRow], sources: Sequence[str] = (), *,
                          layout: TraceLayout | str = TraceLayout.RANK,
                          clock_offsets: ClockOffsets | None = None) -> dict[str, Any]:
    """Build the trace document (``{"traceEvents": [...], "otherData": {...}}``) from profile rows.

    ``layout`` is ``"rank"`` (default: one lane per rank and timer tag, steps as parent
    slices) or ``"step"`` (one lane per step). ``clock_offsets`` maps a rank (or a
    machine_id) to the offset its GlobalLogger applied, recorded in ``otherData``; the
    timestamps are not shifted again.
    """
    try:
        mode = TraceLayout(layout)
    except ValueError:
        raise UsageError(f"csv_to_trace(layout={layout!r}): expected 'rank' or 'step'") from None
    by_group: dict[tuple[str, int | str], list[ProfileRow]] = defaultdict(list)
    machines: dict[str, None] = {}
    for row in rows:
        machines.setdefault(row.machine_id)
        sub: int | str = row.step if mode is TraceLayout.STEP else row.metadata_dict().get("tag", "")
        by_group[(row.machine_id, sub)].append(row)
    procs = _processes(list(machines))
    offsets = clock_offsets or {}
    _check_offsets(offsets, procs.values())

    # lanes per process in display order: (name, spans, instants)
    lanes: dict[str, list[tuple[str, list[_Span], list[tuple[ProfileRow, str]]]]] = defaultdict(list)
    for (machine, sub), group_rows in sorted(by_group.items(), key=lambda kv: _group_order(kv[0][1])):
        if mode is TraceLayout.STEP:
            spans, instants = _pair_rows(group_rows, lambda row: 0)
            base = f"step_{sub}"
        else:
            spans, instants = _pair_rows(group_rows, lambda row: row.step)
            per_step: dict[int, list[_Span]] = defaultdict(list)
            for span in spans:
                per_step[span.group].append(span)
            spans.extend(_step_span(step, members) for step, members in per_step.items())
            base = str(sub) or "main"
        packed = _pack(spans) or [[]]
        for k, lane_spans in enumerate(packed):
            name = base if k == 0 else f"{base} (overlapping {k})"
            lanes[machine].append((name, lane_spans, instants if k == 0 else []))

    ordered = sorted(procs.values(), key=lambda p: (p.rank is None, p.rank if p.rank is not None else 0, p.pid))
    next_tid = max((p.pid for p in procs.values()), default=0) + 1
    metadata: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    for sort_index, proc in enumerate(ordered):
        pid = proc.pid
        metadata.append({"name": "process_name", "ph": "M", "pid": pid, "tid": pid, "args": {"name": proc.name}})
        metadata.append({"name": "process_sort_index", "ph": "M", "pid": pid, "tid": pid,
                         "args": {"sort_index": sort_index}})
        for lane_index, (name, lane_spans, instants) in enumerate(lanes[proc.machine_id]):
            tid, next_tid = next_tid, next_tid + 1
            metadata.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}})
            metadata.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid,
                             "args": {"sort_index": lane_index}})
            events.extend(_lane_events(lane_spans, pid, tid, zero_as_x=mode is TraceLayout.RANK))
            events.extend(_instant(row, note, pid, tid) for row, note in instants)

    return {
        "traceEvents": metadata + events,
        "displayTimeUnit": "ms",
        "otherData": {
            "schema_version": TRACE_SCHEMA_VERSION,
            "generator": "my_utils.core.trace.csv_to_trace",
            "layout": mode.value,
            "sources": list(sources),
            "time_base": "unix epoch, microseconds; GlobalLogger time offsets already applied",
            "machines": {p.machine_id: p.pid for p in ordered},
            "ranks": [{"pid": p.pid, "rank": p.rank, "host": p.host, "machine_id": p.machine_id,
                       "process_name": p.name, "clock_offset": _clock_entry(p, offsets)} for p in ordered],
        },
    }


def _group_order(sub: int | str) -> tuple[int, int | str]:
    # steps in numeric order; tags in name order with the untagged lane first
    return (0, sub) if isinstance(sub, int) else (1, sub)


def _instant(row: ProfileRow, note: str, pid: int, tid: int) -> dict[str, Any]:
    args: dict[str, Any] = {"step": row.step, "event_type": row.event_type, "duration_ms": row.duration_ms,
                            "metadata": row.metadata}
    if note:
        args["unmatched"] = note
    return {"name": row.event_name, "cat": "profile_event", "ph": "i", "s": "t",
            "ts": round(row.timestamp_unix * 1e6), "pid": pid, "tid": tid, "args": args}


def find_profile_csvs(paths: StrPath | Sequence[StrPath]) -> list[Path]:
    """Files named directly, and the ``profile_rank_<R>.csv`` files of folders (in rank order)."""
    found: list[Path] = []
    for path in as_paths(paths, "csv_path"):
        if path.is_dir():
            ranked = [(int(m.group(1)), p) for p in path.iterdir() if (m := _CSV_RE.fullmatch(p.name)) and p.is_file()]
            in_dir = [p for _, p in sorted(ranked)]
            if not in_dir:
                raise InputError(path, None, "expected profile_rank_<rank>.csv files in this folder; found none")
            found.extend(in_dir)
        else:
            found.append(path)
    if not found:
        raise InputError("csv_to_trace", None, "expected at least one profile CSV or folder")
    return found


def _utf8_strings(obj: Any) -> Any:
    """``obj`` with every string (keys too) passed through ``utf8_text``."""
    if isinstance(obj, str):
        return utf8_text(obj)
    if isinstance(obj, dict):
        return {_utf8_strings(k): _utf8_strings(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_utf8_strings(v) for v in obj]
    return obj


def csv_to_trace(csv_path: StrPath | Sequence[StrPath], out_json: StrPath, *,
                 layout: TraceLayout | str = TraceLayout.RANK, clock_offsets: ClockOffsets | None = None) -> Path:
    """Convert profile CSVs (a file, a folder of ``profile_rank_<R>.csv``, or a list) into one trace file.

    ``layout="rank"`` (the default) gives one lane per rank with each step a parent slice of
    its regions; ``layout="step"`` gives one lane per step (the seed's layout). ``out_json``
    ending in ``.gz`` is written gzip-compressed. The file is written atomically; a malformed
    CSV raises ``InputError`` (file, line, what was expected) and writes nothing. Returns the
    path written.
    """
    paths = find_profile_csvs(csv_path)
    rows: list[ProfileRow] = []
    for path in paths:
        rows.extend(iter_profile_rows(path))
    doc = profile_rows_to_trace(rows, sources=[str(p) for p in paths], layout=layout, clock_offsets=clock_offsets)
    out = Path(out_json)
    text = json.dumps(doc, separators=(",", ":"), ensure_ascii=False)
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:  # a name (or a path from os.fsdecode) with a lone surrogate: \xNN instead
        data = json.dumps(_utf8_strings(doc), separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    with atomic_write(out, "wb") as fh:
        fh.write(gzip.compress(data, mtime=0) if out.name.endswith(".gz") else data)
    return out
