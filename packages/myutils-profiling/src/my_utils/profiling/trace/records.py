"""The spill records the layout tasks write and the merge reads: one sorted file per task.

One record a line::

    <unix ns on the rank's clock>\t<lane index>\t<kind>\t<dur µs>\t<JSON of the event without ts/pid/tid>

``kind`` is ``m`` (a MyTimer region), ``t`` (a torch ``X`` slice), ``i`` (another torch event:
instant, counter) or ``f`` (every event of one flow of one file, as one record: a JSON list of
``[ns after the record's time, lane, JSON]``, so no output part ever holds half a flow).
Times are integer ns (a float of unix µs would lose the ns that keep torch slices nested).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from my_utils.core.safe_io import strict_json

__all__ = ["THRESHOLDS_US", "TaskRecords", "Unit", "bucket", "dump", "flow_id", "format_us", "scratch_error",
           "us_to_ns", "utf8_len"]

# candidate duration thresholds of --overflow trim (µs): 0, then 1-2-5 steps from 1 ns to 50 s
THRESHOLDS_US: tuple[float, ...] = (0.0, *(m * 10.0 ** e for e in range(-3, 8) for m in (1, 2, 5)))


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


def flow_id(unit: int, arrow: int) -> int:
    """The id of a file's ``arrow``-th flow: unique in the merged trace, an integer below 2**53 for viewers.

    Ids are renumbered, not kept: ids of different files must not pair up, and Kineto's own
    ids can pass 10**9 (a counter per correlation kind), so no fixed offset would keep them apart.
    """
    return (unit + 1) * 10**9 + arrow


class TaskRecords:
    """Collects one task's records and metadata (inside the worker) and writes its sorted spill file."""

    def __init__(self) -> None:
        # (base label, overlap index, sort key); index in this list = lane index
        self.lanes: list[tuple[str, int, list[Any]]] = []
        self.records: list[tuple[int, int, str, float, str]] = []  # ns, lane, kind, dur_us, text
        self.hist = [[0, 0] for _ in THRESHOLDS_US]  # per duration bucket: torch events, text bytes
        self.counts = {"m": [0, 0], "f": [0, 0]}  # events, text bytes
        self.max_ns: int | None = None  # the latest event time (a flow's last event, not its record's time)

    def lane(self, label: str, j: int, order: list[Any] | None = None) -> int:
        """A new lane (``j``: its overlap index); ``order`` sorts it among the rank's lanes."""
        self.lanes.append((label, j, order if order is not None else [0, "", 0, 0, label]))
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


def scratch_error(exc: OSError, path: Path | str) -> OSError:
    """``exc`` naming the scratch file and what to do (a full $TMPDIR said "No space left on device", no path)."""
    return type(exc)(exc.errno, f"{exc.strerror or exc} (a scratch file of trace, in {Path(path).parent}; trace "
                                f"needs scratch space about the size of its output: set TMPDIR to a folder with "
                                f"more room)", str(path))



@dataclass
class Unit:
    """One task's spill file and what the main process decided for it."""

    rank: int
    spill: Path
    meta: dict[str, Any]
    shift_ns: int = 0
    lane_ids: list[tuple[int, int]] = field(default_factory=list)  # lane index → (pid, tid)
