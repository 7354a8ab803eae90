"""A structural checker for Chrome/Perfetto JSON traces, for tests of every trace the project writes.

``check_trace(doc_or_path)`` returns a list of problems (empty means valid):
- the document is ``{"traceEvents": [...]}`` (or the bare array form);
- every event is an object with a ``ph``; every event but metadata (``M``) has a numeric ``ts``;
- ``B``/``E`` events balance per (pid, tid) lane and nest: an ``E`` closes the innermost open
  ``B`` of its lane, carries its name if it names one, and does not end before it begins;
- ``X`` events have a numeric ``dur >= 0`` and nest per lane (a partial overlap is what Perfetto
  drops as ``slice_drop_overlapping_complete_event``);
- ``M`` events use a known name and the ``*_name`` ones carry a string ``args.name``;
- every pid that has events also has a ``process_name`` metadata event;
- flow events (``s``/``t``/``f``) carry an id, with one ``s`` and one ``f`` per (cat, id);
- no two lanes merge in a viewer: Perfetto takes ``tid 0`` (and a missing tid) in a process
  whose pid is not 0 as that process's main thread, the thread whose tid equals its pid. Two
  such lanes with events become one lane (rank 1's ``step_0`` slices shown in ``step_1``), so
  the nesting rules above are checked on the lanes as Perfetto builds them, and a lane named
  twice with different ``thread_name`` values is reported;
- no event but a global instant has an empty pid (Perfetto's JSON parser fails on it);
- a zero-length B/E pair (B and E at one timestamp) on a lane that has ``X`` events: Perfetto
  (v52) then leaves the slice unended (``dur -1``, deeper slices nest under it) or drops its
  end (``misplaced_end_event``); B/E-only lanes keep such pairs in file order.

Run it on files: ``python -m my_utils.core.testing.trace_check FILE...`` prints one line per
problem (``FILE: problem``) and exits 1 when there is any, 0 with a one-line summary when all
are clean, 2 when a file cannot be read as a JSON trace.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import zlib
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["METADATA_NAMES", "assert_valid_trace", "check_trace", "load_trace", "main", "viewer_lane"]

METADATA_NAMES = frozenset(
    {"process_name", "process_labels", "process_sort_index", "thread_name", "thread_sort_index"}
)
# float microseconds carry about 1 ns of rounding; Perfetto tolerates the same
_SLACK_US = 0.0011


def load_trace(path: str | Path) -> Any:
    """Load a ``.json`` or ``.json.gz`` trace file as decoded JSON."""
    p = Path(path)
    if p.name.endswith(".gz"):
        with gzip.open(p, "rt", encoding="utf-8") as fh:
            return json.load(fh)
    with open(p, encoding="utf-8") as fh:
        return json.load(fh)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def viewer_lane(pid: Any, tid: Any) -> tuple[Any, Any]:
    """The (pid, tid) lane a viewer puts an event in: tid 0 or none is the main thread (tid = pid)."""
    if tid is None or (tid == 0 and pid != 0 and not isinstance(tid, bool)):
        return (pid, pid)
    return (pid, tid)


def _describe(index: int, ev: Mapping[str, Any]) -> str:
    name = str(ev.get("name"))[:60]
    return f"event {index} ({ev.get('ph')} {name!r} pid={ev.get('pid')!r} tid={ev.get('tid')!r})"


def check_trace(doc_or_path: Any, max_problems: int = 50, *, require_process_names: bool = True) -> list[str]:
    """Problems found in a trace (a decoded document, or a path to ``.json``/``.json.gz``).

    ``require_process_names=False`` skips the ``process_name`` rule (for third-party traces:
    torch's own traces use pids such as ``"Spans"`` without naming them).
    """
    doc = load_trace(doc_or_path) if isinstance(doc_or_path, (str, Path)) else doc_or_path
    if isinstance(doc, list):
        doc = {"traceEvents": doc}
    if not isinstance(doc, Mapping):
        return [f"expected a JSON object with 'traceEvents', got {type(doc).__name__}"]
    events = doc.get("traceEvents")
    if not isinstance(events, list):
        return ["expected 'traceEvents' to be a list"]

    problems: list[str] = []

    def report(message: str) -> None:
        problems.append(message)

    open_b: dict[tuple[Any, Any], list[tuple[int, Mapping[str, Any]]]] = defaultdict(list)
    # (start, end, index) of every X event and B/E pair, per lane as the viewer builds it
    spans: dict[tuple[Any, Any], list[tuple[float, float, int]]] = defaultdict(list)
    lanes_with_x: set[tuple[Any, Any]] = set()
    raw_tids: dict[tuple[Any, Any], set[Any]] = defaultdict(set)
    thread_names: dict[tuple[Any, Any], list[str]] = defaultdict(list)
    flows: dict[tuple[Any, str], list[str]] = defaultdict(list)
    pids_used: set[Any] = set()
    pids_named: set[Any] = set()

    for index, ev in enumerate(events):
        if not isinstance(ev, Mapping):
            report(f"event {index}: expected an object, got {type(ev).__name__}")
            continue
        ph = ev.get("ph")
        if not isinstance(ph, str) or not ph:
            report(f"{_describe(index, ev)}: no 'ph'")
            continue
        if ev.get("pid") == "" and not (ph in ("i", "I") and ev.get("s") == "g"):
            report(f"{_describe(index, ev)}: pid '' (empty): Perfetto's JSON parser rejects it "
                   "(json_parser_failure); only a global instant ('s': 'g') may have no pid")
            continue
        if ph == "M":
            name = ev.get("name")
            if name not in METADATA_NAMES:
                report(f"{_describe(index, ev)}: unknown metadata name (known: {', '.join(sorted(METADATA_NAMES))})")
            elif str(name).endswith("_name"):
                args = ev.get("args")
                if not isinstance(args, Mapping) or not isinstance(args.get("name"), str):
                    report(f"{_describe(index, ev)}: metadata {name} needs a string args.name")
                elif name == "process_name":
                    pids_named.add(ev.get("pid"))
                elif args["name"] not in thread_names[(ev.get("pid"), ev.get("tid"))]:
                    thread_names[(ev.get("pid"), ev.get("tid"))].append(args["name"])
            continue
        ts: Any = ev.get("ts")
        if not _is_number(ts):
            report(f"{_describe(index, ev)}: expected a numeric 'ts', got {ts!r}")
            continue
        if ph in ("i", "I") and ev.get("s") in ("g", "p"):
            if ev.get("s") == "p":
                pids_used.add(ev.get("pid"))
            continue  # global and process instants belong to no thread
        pids_used.add(ev.get("pid"))
        lane = viewer_lane(ev.get("pid"), ev.get("tid"))
        if ph in ("B", "E", "X", "i", "I"):
            raw_tids[lane].add(ev.get("tid"))
        if ph == "B":
            open_b[lane].append((index, ev))
        elif ph == "E":
            if not open_b[lane]:
                report(f"{_describe(index, ev)}: 'E' without an open 'B' in its pid/tid lane")
                continue
            b_index, b_ev = open_b[lane].pop()
            if ev.get("name") is not None and ev.get("name") != b_ev.get("name"):
                report(f"{_describe(index, ev)}: 'E' names {ev.get('name')!r} but closes {b_ev.get('name')!r} "
                       f"(event {b_index}): B/E not nested")
            if ts < b_ev["ts"]:
                report(f"{_describe(index, ev)}: 'E' at {ts} before its 'B' at {b_ev['ts']} (event {b_index})")
            else:
                spans[lane].append((float(b_ev["ts"]), float(ts), b_index))
        elif ph == "X":
            dur: Any = ev.get("dur")
            if not _is_number(dur) or dur < 0:
                report(f"{_describe(index, ev)}: 'X' needs a numeric 'dur' >= 0, got {dur!r}")
            else:
                spans[lane].append((float(ts), float(ts) + float(dur), index))
                lanes_with_x.add(lane)
        elif ph in ("s", "t", "f"):
            flow_id = ev.get("id", ev.get("bind_id"))
            if flow_id is None:
                report(f"{_describe(index, ev)}: flow event without an 'id'")
            else:
                flows[(ev.get("cat"), str(flow_id))].append(ph)

    for (pid, tid), names in thread_names.items():
        if len(names) > 1:
            report(f"pid {pid!r} tid {tid!r}: thread_name given {len(names)} times ({', '.join(map(repr, names))}); "
                   "viewers show one name for all its slices")
    for (pid, main_tid), tids in raw_tids.items():
        if len(tids) > 1:
            shown = ", ".join(f"{t!r} {thread_names.get((pid, t), ['(unnamed)'])[0]!r}"
                              for t in sorted(tids, key=repr))
            report(f"pid {pid!r}: tids {shown} are one thread in viewers (tid 0 means the main thread, whose tid "
                   f"is the pid {main_tid!r}), so their slices merge into one lane; give each lane its own tid, "
                   "neither 0 nor the pid")
    for lane, stack in open_b.items():
        for b_index, b_ev in stack:
            report(f"{_describe(b_index, b_ev)}: 'B' never closed in lane pid/tid {lane}")
    for lane in lanes_with_x:  # B/E nest by construction; X events must nest among X and B/E alike
        lane_spans = spans[lane]
        lane_spans.sort(key=lambda s: (s[0], -s[1]))
        enclosing: list[tuple[float, int]] = []  # (end, index) of open slices, innermost last
        for start, end, index in lane_spans:
            while enclosing and enclosing[-1][0] <= start + _SLACK_US:
                enclosing.pop()
            is_x = events[index].get("ph") == "X"
            if enclosing and end > enclosing[-1][0] + _SLACK_US:
                what = "'X'" if is_x else "B/E slice"
                report(f"{_describe(index, events[index])}: {what} overlaps event {enclosing[-1][1]} without nesting")
                continue
            if not is_x and end == start:
                report(f"{_describe(index, events[index])}: a B/E pair at one timestamp on a lane with 'X' events: "
                       "Perfetto leaves it unended (dur -1) or drops its end (misplaced_end_event); write it as "
                       "an 'X' event with dur 0")
            enclosing.append((end, index))
    for (cat, flow_id), phases in flows.items():
        if phases.count("s") != 1 or phases.count("f") != 1:
            report(f"flow cat={cat!r} id={flow_id}: phases {phases}, expected one 's' and one 'f'")
    for pid in sorted(pids_used - pids_named, key=repr) if require_process_names else ():
        report(f"pid {pid!r} has events but no 'process_name' metadata event")
    if len(problems) > max_problems:
        extra = len(problems) - max_problems
        problems = [*problems[:max_problems], f"... and {extra} more problems"]
    return problems


def assert_valid_trace(doc_or_path: Any) -> None:
    """Raise AssertionError listing the problems when ``check_trace`` finds any."""
    problems = check_trace(doc_or_path)
    if problems:
        raise AssertionError("invalid trace:\n  " + "\n  ".join(problems))


_UNREADABLE = (OSError, EOFError, UnicodeDecodeError, ValueError, zlib.error)  # JSONDecodeError is a ValueError


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m my_utils.core.testing.trace_check FILE...``: exit 0 clean, 1 problems, 2 unreadable."""
    parser = argparse.ArgumentParser(
        prog="python -m my_utils.core.testing.trace_check",
        description="Check Chrome/Perfetto JSON traces (.json or .json.gz): one line per problem.")
    parser.add_argument("files", nargs="+", type=Path, metavar="FILE")
    parser.add_argument("--allow-unnamed-processes", action="store_true",
                        help="do not require process_name metadata (torch's own traces leave pids unnamed)")
    parser.add_argument("--max-problems", type=int, default=50, metavar="N", help="per file (default 50)")
    args = parser.parse_args(argv)
    unreadable = with_problems = events = 0
    for path in args.files:
        try:
            doc = load_trace(path)
        except _UNREADABLE as exc:
            unreadable += 1
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc).splitlines()[0]
            print(f"{path}: cannot read a JSON trace ({type(exc).__name__}: {reason})")
            continue
        trace_events = doc if isinstance(doc, list) else doc.get("traceEvents") if isinstance(doc, Mapping) else None
        if not isinstance(trace_events, list):
            unreadable += 1
            print(f"{path}: not a trace: expected a JSON object with a 'traceEvents' list, or a JSON array")
            continue
        events += len(trace_events)
        problems = check_trace(doc, args.max_problems, require_process_names=not args.allow_unnamed_processes)
        for problem in problems:
            print(f"{path}: {problem}")
        with_problems += bool(problems)
    if unreadable:
        return 2
    if with_problems:
        return 1
    print(f"ok: {len(args.files)} trace file(s), {events} events, no problems")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # `... | head`: the reader left; say nothing more
        sys.stderr.close()
        sys.exit(1)
