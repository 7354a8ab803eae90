"""Profile CSV -> Chrome/Perfetto trace JSON (``csv_to_trace``).

Layout of the trace: one pid per machine/rank (``machine_id``), with ``process_name`` metadata;
one tid per step (``thread_name`` ``step_<n>``); each START/END pair becomes a ``B``/``E`` pair,
timestamps in µs. START and END rows are paired by ``node_id`` (MyTimer rows) or else by name,
innermost first. Pairs that would not nest inside their step lane (hand-written rows that
overlap) go to an extra lane of that step, so every lane stays balanced and properly nested.
Rows that have no partner, and rows of other types (marks), become instant events.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from my_utils.core.atomic import atomic_write
from my_utils.core.profile_csv import ProfileRow, iter_profile_rows

__all__ = ["TRACE_SCHEMA_VERSION", "csv_to_trace", "profile_rows_to_trace"]

TRACE_SCHEMA_VERSION = 1
_RANK_RE = re.compile(r"rank[_-]?(\d+)$")


@dataclass(frozen=True, slots=True)
class _Span:
    start: ProfileRow
    end: ProfileRow
    order: int

    @property
    def start_us(self) -> int:
        return round(self.start.timestamp_unix * 1e6)

    @property
    def end_us(self) -> int:
        # a clock step backwards must not produce an E before its B
        return max(self.start_us, round(self.end.timestamp_unix * 1e6))

    # Equal µs timestamps are ordered by line in the file, which is the order things happened
    @property
    def start_key(self) -> tuple[int, int]:
        return (self.start_us, self.start.line)

    @property
    def end_key(self) -> tuple[int, int]:
        return (self.end_us, self.end.line)


def _pair_key(row: ProfileRow, meta: dict[str, str]) -> tuple[str, str | None]:
    return (row.event_name, meta.get("node_id"))


def _pids(machine_ids: list[str]) -> dict[str, int]:
    """pid = rank when every machine_id ends in a distinct ``rank<N>``; else order of appearance."""
    ranks = [_RANK_RE.search(m) for m in machine_ids]
    if all(ranks):
        numbers = [int(r.group(1)) for r in ranks if r]
        if len(set(numbers)) == len(numbers):
            return dict(zip(machine_ids, numbers, strict=True))
    return {m: i for i, m in enumerate(machine_ids)}


def _nest_into_lanes(spans: list[_Span]) -> list[list[_Span]]:
    """Split spans into sub-lanes in which they nest (first fit, in start order)."""
    spans = sorted(spans, key=lambda s: (s.start_key, s.order))
    lanes: list[list[_Span]] = []
    stacks: list[list[tuple[int, int]]] = []  # open end keys per lane, innermost last
    for span in spans:
        for lane, stack in zip(lanes, stacks, strict=True):
            while stack and stack[-1] < span.start_key:
                stack.pop()
            if not stack or span.end_key <= stack[-1]:
                lane.append(span)
                stack.append(span.end_key)
                break
        else:
            lanes.append([span])
            stacks.append([span.end_key])
    return lanes


def _span_events(spans: list[_Span], pid: int, tid: int) -> list[dict[str, Any]]:
    """B/E events of one lane, emitted in nesting order."""
    events: list[dict[str, Any]] = []
    open_spans: list[_Span] = []

    def close(span: _Span) -> None:
        events.append({"name": span.start.event_name, "ph": "E", "ts": span.end_us, "pid": pid, "tid": tid,
                       "args": {"duration_ms": span.end.duration_ms, "metadata": span.end.metadata}})

    for span in spans:  # already in start order
        while open_spans and open_spans[-1].end_key < span.start_key:
            close(open_spans.pop())
        meta = span.start.metadata_dict()
        args: dict[str, Any] = {"step": span.start.step, "duration_ms": span.end.duration_ms,
                                "metadata": span.start.metadata}
        for key in ("node_id", "parent_id", "depth"):
            if meta.get(key, "").lstrip("-").isdigit():
                args[key] = int(meta[key])
        events.append({"name": span.start.event_name, "cat": "MyTimer" if "node_id" in meta else "profile_event",
                       "ph": "B", "ts": span.start_us, "pid": pid, "tid": tid, "args": args})
        open_spans.append(span)
    while open_spans:
        close(open_spans.pop())
    return events


def profile_rows_to_trace(rows: Iterable[ProfileRow], sources: Sequence[str] = ()) -> dict[str, Any]:
    """Build the trace document (``{"traceEvents": [...], "otherData": {...}}``) from profile rows."""
    by_lane: dict[tuple[str, int], list[ProfileRow]] = defaultdict(list)
    machines: list[str] = []
    seen: set[str] = set()
    for row in rows:
        if row.machine_id not in seen:
            seen.add(row.machine_id)
            machines.append(row.machine_id)
        by_lane[(row.machine_id, row.step)].append(row)
    pids = _pids(machines)

    spans_by_lane: dict[tuple[str, int], list[_Span]] = {}
    instants: list[tuple[ProfileRow, str]] = []
    order = 0
    for lane, lane_rows in by_lane.items():
        open_rows: list[tuple[tuple[str, str | None], ProfileRow]] = []
        spans: list[_Span] = []
        for row in lane_rows:
            kind = row.event_type.upper()
            if kind == "START":
                open_rows.append((_pair_key(row, row.metadata_dict()), row))
            elif kind == "END":
                key = _pair_key(row, row.metadata_dict())
                for i in range(len(open_rows) - 1, -1, -1):
                    if open_rows[i][0] == key:
                        spans.append(_Span(open_rows.pop(i)[1], row, order))
                        order += 1
                        break
                else:
                    instants.append((row, "END without a START"))
            else:
                instants.append((row, ""))
        instants.extend((row, "START without an END") for _, row in open_rows)
        spans_by_lane[lane] = spans

    events: list[dict[str, Any]] = []
    threads: dict[tuple[int, int], str] = {}
    max_step = max((step for _, step in by_lane), default=0)
    extra_tid = max_step + 1
    for (machine, step), spans in spans_by_lane.items():
        pid = pids[machine]
        for sub, lane_spans in enumerate(_nest_into_lanes(spans)):
            if sub == 0:
                tid = step
                threads[(pid, tid)] = f"step_{step}"
            else:
                tid = extra_tid
                extra_tid += 1
                threads[(pid, tid)] = f"step_{step} (overlapping {sub})"
            events.extend(_span_events(lane_spans, pid, tid))
    for row, note in instants:
        pid, tid = pids[row.machine_id], row.step
        threads.setdefault((pid, tid), f"step_{row.step}")
        args: dict[str, Any] = {"step": row.step, "event_type": row.event_type,
                                "duration_ms": row.duration_ms, "metadata": row.metadata}
        if note:
            args["unmatched"] = note
        events.append({"name": row.event_name, "cat": "profile_event", "ph": "i", "s": "t",
                       "ts": round(row.timestamp_unix * 1e6), "pid": pid, "tid": tid, "args": args})

    metadata: list[dict[str, Any]] = []
    for machine in machines:
        pid = pids[machine]
        metadata.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": machine}})
        metadata.append({"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0, "args": {"sort_index": pid}})
    for (pid, tid), name in sorted(threads.items()):
        metadata.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}})
        metadata.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid, "args": {"sort_index": tid}})
    return {
        "traceEvents": metadata + events,
        "displayTimeUnit": "ms",
        "otherData": {
            "schema_version": TRACE_SCHEMA_VERSION,
            "generator": "my_utils.core.trace.csv_to_trace",
            "sources": list(sources),
            "time_base": "unix epoch, microseconds; GlobalLogger time offsets already applied",
            "machines": {m: pids[m] for m in machines},
        },
    }


def csv_to_trace(csv_path: str | Path | Sequence[str | Path], out_json: str | Path) -> Path:
    """Convert one profile CSV (or several: one per rank) into a Chrome/Perfetto trace file.

    ``out_json`` ending in ``.gz`` is written gzip-compressed. The file is written atomically;
    a malformed CSV raises ``InputError`` (file, line, what was expected) and writes nothing.
    Returns the path written.
    """
    paths = [Path(csv_path)] if isinstance(csv_path, (str, Path)) else [Path(p) for p in csv_path]
    rows: list[ProfileRow] = []
    for path in paths:
        rows.extend(iter_profile_rows(path))
    doc = profile_rows_to_trace(rows, sources=[str(p) for p in paths])
    out = Path(out_json)
    data = json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    with atomic_write(out, "wb") as fh:
        fh.write(gzip.compress(data, mtime=0) if out.name.endswith(".gz") else data)
    return out
