"""The spill records the layout tasks write and the merge reads: one sorted file per task.

One record a line::

    <unix ns on the rank's clock>\t<lane index>\t<kind>\t<dur µs>\t<JSON of the event without ts/pid/tid>

``kind`` is ``m`` (a MyTimer region), ``t`` (a torch ``X`` slice), ``i`` (another torch event:
instant, counter) or ``f`` (every event of one flow of one file, as one record: a JSON list of
``[ns after the record's time, lane, JSON]``, so no output part ever holds half a flow).
Times are integer ns (a float of unix µs would lose the ns that keep torch slices nested).

Beside each spill file ``S`` the task writes ``S.lanes.json`` (its lanes: label, overlap index,
sort key); the main process writes ``S.ids.json`` (lane → [pid, tid]), which the finish task reads.
The main process keeps none of this per unit (:class:`Unit` is a few ints): 1,000 ranks' lanes,
metadata and ``otherData`` held in memory were ~40-60 KB a rank until the output was written.
"""

from __future__ import annotations

import contextlib
import math
import os
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from my_utils.core.safe_io import strict_json

__all__ = ["THRESHOLDS_US", "JsonSpill", "Spilled", "TaskRecords", "Unit", "bucket", "dump", "flow_id", "format_us",
           "ids_path", "json_chars", "json_pieces", "lanes_path", "materialized", "scratch_error", "unit_spill", "us_to_ns", "utf8_len"]

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
        """Write the sorted spill file ``out`` and its lanes (``out.lanes.json``); the task's small metadata."""
        self.records.sort(key=lambda r: r[0])  # stable: same-time records keep the lane order
        try:
            with open(out, "w", encoding="utf-8") as fh:
                fh.writelines(f"{ns}\t{lane}\t{kind}\t{dur!r}\t{text}\n"
                              for ns, lane, kind, dur, text in self.records)
            with open(lanes_path(out), "w", encoding="utf-8") as fh:
                fh.write(dump(self.lanes))
        except OSError as exc:
            raise scratch_error(exc, out) from None
        return {**meta, "records": len(self.records),
                "min_ns": self.records[0][0] if self.records else None, "max_ns": self.max_ns,
                "hist": self.hist, "counts": self.counts}


def lanes_path(spill: str | Path) -> str:
    """The lanes of a spill file (written by its task): ``[[label, overlap index, sort key], ...]``."""
    return f"{spill}.lanes.json"


def ids_path(spill: str | Path) -> str:
    """Lane → ``[pid, tid]`` of a spill file (written by the main process, read by the finish task)."""
    return f"{spill}.ids.json"


def scratch_error(exc: OSError, path: Path | str) -> OSError:
    """``exc`` naming the scratch file and what to do (a full $TMPDIR said "No space left on device", no path)."""
    return type(exc)(exc.errno, f"{exc.strerror or exc} (a scratch file of trace, in {Path(path).parent}; trace "
                                f"needs scratch space about the size of its output: set TMPDIR to a folder with "
                                f"more room)", str(path))



class Unit:
    """One task's spill file and what the main process keeps of it (a few ints: 1,000 ranks are 2,000 units)."""

    __slots__ = ("folder", "index", "kind", "max_ns", "min_ns", "rank", "records", "shift_ns")

    def __init__(self, rank: int, folder: str, index: int, kind: str, records: int, min_ns: int | None,
                 max_ns: int | None) -> None:
        self.rank, self.folder, self.index, self.kind = rank, folder, index, kind
        self.records, self.min_ns, self.max_ns = records, min_ns, max_ns
        self.shift_ns = 0

    @property
    def spill(self) -> str:
        """The unit's spill file, ``unit_<index>.tsv`` in the scratch folder (made when asked, not kept)."""
        return unit_spill(self.folder, self.index)


def unit_spill(folder: str | Path, index: int) -> str:
    """The spill file of unit ``index`` in ``folder``."""
    return os.path.join(folder, f"unit_{index}.tsv")


@dataclass(frozen=True)
class Spilled:
    """A JSON value whose text is in a scratch file: written into the output in pieces, never held whole."""

    path: str
    size: int  # bytes (UTF-8)
    chars: int  # characters (what ``len`` of the text would be)

    def chunks(self, size: int = 1 << 20) -> Iterator[bytes]:
        """The text's bytes, in pieces."""
        with open(self.path, "rb") as fh:
            while block := fh.read(size):
                yield block

    def text(self) -> str:
        """The whole text (the small in-memory API only)."""
        return b"".join(self.chunks()).decode()


class JsonSpill:
    """Writes a JSON list or object into a scratch file item by item (``dump`` of each), as ``dump`` of the whole
    would write it; :meth:`close` gives the :class:`Spilled` value. ``brackets``: ``"[]"``, ``"{}"``, or ``""`` for
    the bare ``,``-joined items (the metadata events the output's ``traceEvents`` begins with)."""

    def __init__(self, path: Path | str, brackets: str = "[]") -> None:
        self.path = str(path)
        opening, self.closing = brackets[:1], brackets[1:]
        try:
            self.fh = open(self.path, "w", encoding="utf-8")  # noqa: SIM115 - closed by close()
        except OSError as exc:
            raise scratch_error(exc, self.path) from None
        self.size = self.chars = 0
        self.first = True
        self._put(opening)

    def _put(self, text: str) -> None:
        try:
            self.fh.write(text)
        except OSError as exc:
            with contextlib.suppress(OSError):
                self.fh.close()
            raise scratch_error(exc, self.path) from None
        self.chars += len(text)
        self.size += utf8_len(text)

    def item(self, value: Any) -> None:
        """One list item."""
        self._put(("" if self.first else ",") + dump(value))
        self.first = False

    def entry(self, key: str, value: Any) -> None:
        """One object entry."""
        self._put(("" if self.first else ",") + dump(key) + ":" + dump(value))
        self.first = False

    def raw(self, text: str) -> None:
        """Text already JSON (a list item, with its separator added here)."""
        self._put(("" if self.first else ",") + text)
        self.first = False

    def close(self) -> Spilled:
        self._put(self.closing)
        try:
            self.fh.close()
        except OSError as exc:
            raise scratch_error(exc, self.path) from None
        return Spilled(self.path, self.size, self.chars)


def json_pieces(obj: dict[str, Any]) -> Iterator[str | Spilled]:
    """``dump(obj)`` in pieces, a :class:`Spilled` value as itself (its text stays in its file)."""
    yield "{"
    for n, (key, value) in enumerate(obj.items()):
        head = ("," if n else "") + dump(key) + ":"
        if isinstance(value, Spilled):
            yield head
            yield value
        else:
            yield head + dump(value)
    yield "}"


def json_chars(obj: dict[str, Any]) -> int:
    """``len(dump(obj))`` without making it."""
    return sum(p.chars if isinstance(p, Spilled) else len(p) for p in json_pieces(obj))


def materialized(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` with every :class:`Spilled` value read back (the small in-memory API only)."""
    import json

    return {k: json.loads(v.text()) if isinstance(v, Spilled) else v for k, v in obj.items()}
