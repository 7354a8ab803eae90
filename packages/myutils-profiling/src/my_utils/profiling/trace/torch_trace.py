"""A torch.profiler (Kineto) trace placed on the unix clock, for the merged timeline.

A Kineto trace starts at its own zero: ``ts`` is µs since ``baseTimeNanoseconds`` (unix
epoch ns, written by torch ≥ 2.1), so ``unix_us = baseTimeNanoseconds / 1000 + ts``. Older
traces without it already carry epoch µs in ``ts``; a trace with neither cannot be placed
and is refused (no guessing: a wrong guess would invent lateness).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from my_utils.core.errors import InputError

_EPOCH_US_MIN = 946_684_800e6  # 2000-01-01: smaller ts values are relative, not unix µs
_MAX_US = 1e17  # µs: the year 5138 as unix time; a larger ts or dur is a broken number, not a time
_KEEP = frozenset("XiICsft")
_HANDLER_NAME = re.compile(r"(.+)_\d+\.\d+\.pt\.trace\.json(?:\.gz)?")  # phases merged; B/E of Kineto traces are rare and not re-nested here


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}...{text[-8:]} ({len(text)} characters)"


def _check_time(path: Path, index: int, key: str, value: float, low: float) -> None:
    """``value`` (µs) must be finite and within [low, _MAX_US]: beyond, no clock can place it."""
    if not low <= value <= _MAX_US:  # also NaN
        raise InputError(path, f"traceEvents[{index}].{key}", f"a finite time in µs between {low:g} and "
                                                             f"{_MAX_US:.0e}; found {_short(value)}")


@dataclass
class TorchTrace:
    """The events of one rank's torch trace, ``ts`` still relative; ``base_us`` maps them to unix µs."""

    path: Path
    rank: int | None
    host: str
    base_us: float
    events: list[dict[str, Any]] = field(default_factory=list)
    thread_names: dict[tuple[Any, Any], str] = field(default_factory=dict)
    dropped: dict[str, int] = field(default_factory=dict)
    base_ns: int | None = None  # the exact base when the trace gives one (base_us, a float, rounds to 1/4 µs)
    process_labels: dict[Any, str] = field(default_factory=dict)  # pid -> "CPU", "GPU 0", ...


def read_torch_trace(path: str | Path, rank: int | None = None) -> TorchTrace:
    """Stream a ``.json``/``.json.gz`` Kineto trace; the rank comes from ``distributedInfo``, the name, or ``rank``."""
    from my_utils.profiling.formats._files import rank_from_name
    from my_utils.profiling.kineto.read.stream import TraceStream

    p = Path(path)
    stream = TraceStream(p)
    events: list[dict[str, Any]] = []
    names: dict[tuple[Any, Any], str] = {}
    labels: dict[Any, str] = {}
    dropped: dict[str, int] = {}
    min_ts = float("inf")
    for ev in stream.events():
        ph = ev.get("ph")
        if ph == "M":
            args = ev.get("args")
            if ev.get("name") == "thread_name" and isinstance(args, dict):
                names[(ev.get("pid"), ev.get("tid"))] = str(args.get("name", ""))
            elif ev.get("name") == "process_labels" and isinstance(args, dict):
                labels[ev.get("pid")] = str(args.get("labels", ""))  # "CPU", "GPU 0"
            continue
        if ph not in _KEEP or not isinstance(ev.get("ts"), (int, float)) or isinstance(ev["ts"], bool):
            dropped[str(ph)] = dropped.get(str(ph), 0) + 1
            continue
        if ph == "X" and (not isinstance(ev.get("dur"), (int, float)) or isinstance(ev["dur"], bool)):
            dropped["X without dur"] = dropped.get("X without dur", 0) + 1
            continue
        index = stream.event_count - 1
        _check_time(p, index, "ts", ev["ts"], -_MAX_US)
        if ph == "X":
            _check_time(p, index, "dur", ev["dur"], 0.0)
        min_ts = min(min_ts, ev["ts"])
        events.append(ev)
    meta = stream.metadata
    base_ns = meta.get("baseTimeNanoseconds")
    if isinstance(base_ns, (int, float)) and not isinstance(base_ns, bool) and base_ns > 0:
        if not base_ns < _MAX_US * 1e3:  # also NaN and infinity
            raise InputError(p, "baseTimeNanoseconds", f"the unix time of the trace's zero in ns (below "
                                                       f"{_MAX_US * 1e3:.0e}); found {_short(base_ns)}")
        base_us = float(base_ns) / 1e3
        exact_ns: int | None = int(base_ns)
    elif not events or min_ts >= _EPOCH_US_MIN:
        base_us, exact_ns = 0.0, 0
    else:
        raise InputError(p, "baseTimeNanoseconds", "a trace written by torch >= 2.1 (it records the unix time of its "
                                                   "zero), or with unix-epoch µs timestamps; this one has neither")
    info = meta.get("distributedInfo")
    found = info.get("rank") if isinstance(info, dict) else None
    if not isinstance(found, int) or isinstance(found, bool):
        found = rank_from_name(p)
    if found is None:
        found = rank
    host = meta.get("hostname") or meta.get("host_name") or ""
    if not host and (named := _HANDLER_NAME.fullmatch(p.name)):
        host = named.group(1)  # torch's tensorboard_trace_handler names files <host>_<pid>.<ms>.pt.trace.json
    return TorchTrace(p, found, str(host), base_us, events, names, dropped, exact_ns, labels)
