"""The one check of a memory snapshot's structure: after it, the summary and the cut index without guarding.

A snapshot read from a file is untrusted. ``validate_snapshot`` checks every field that
``summarize``, ``cut`` and the OOM bundle read, and names the first wrong one the way a
user can find it (``device_traces[0][12].time_us``). It also bounds the work: a pickle
can hold one object many times by reference, so a 206 KB file can unpickle to 3e8 trace
entries. Every distinct object costs at least one byte of the file, so with ``budget``
(the file's size) the entries, segments, blocks and frames to visit may not exceed it; a
frames list shared by many entries (torch shares them) is checked once.

The fields (others are kept and ignored):

- ``segments``: a list of dicts with ``address`` and ``total_size`` (ints), optional
  ``device`` (0..1023), ``stream`` (an int), ``segment_type`` (text), ``is_expandable`` (a
  bool) and ``blocks`` (dicts with ``size``; optional ``address``, ``requested_size``,
  ``state`` and ``frames``);
- ``device_traces``: a list (one per device) of lists of entries: dicts with ``action``
  (str), optional ``size`` and ``addr`` (ints), ``frames``, and ``time_us`` (a finite
  number) on every entry when the first entry has one; an ``oom`` entry's optional
  ``device_free`` is an int;
- ``frames``: a list of dicts whose ``name``/``filename`` are text and ``line`` an int;
- ``my_utils_regions`` (optional): dicts with finite ``start_us`` and ``stop_us``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from my_utils.core.errors import InputError

__all__ = ["MAX_ADDRESS", "MAX_DEVICES", "MAX_SIZE", "item_budget", "validate_snapshot"]

MAX_SIZE = 1 << 50  # 1 PiB: no allocation or segment is larger; a bigger size is a corrupt number
MAX_TOTAL = 1 << 62  # the summary sums sizes in int64 arrays
MAX_ADDRESS = (1 << 64) - 1
MAX_DEVICES = 1024  # the cut makes one trace list per device index
MAX_TIME_US = 1e18  # µs: year 33,000; also keeps float arithmetic exact enough
_MIN_BUDGET = 10_000  # a hand-written file of a few bytes may still hold a few entries


def item_budget(file_bytes: int) -> int:
    """How many entries, blocks, segments and frames a file of ``file_bytes`` can hold without shared references."""
    return max(_MIN_BUDGET, int(file_bytes))


class _Checker:
    """One validation pass: the file name for messages, the budget, the frames lists already checked."""

    def __init__(self, where: str | Path, budget: int | None) -> None:
        self.where = where
        self.budget = budget
        self.spent = 0
        self.frames_seen: set[int] = set()

    def fail(self, place: str, expected: str) -> InputError:
        return InputError(self.where, place, expected)

    def spend(self, n: int, place: str, what: str) -> None:
        self.spent += n
        if self.budget is not None and self.spent > self.budget:
            raise self.fail(place, f"{what}: more than a {self.budget}-byte file can hold without repeating shared "
                                   "references (a real snapshot never does); refused rather than walked")

    def integer(self, value: Any, place: str, what: str, high: int, low: int = 0) -> None:
        if type(value) is not int or not low <= value <= high:
            raise self.fail(place, f"expected {what} (an integer from {low} to {high}), got {_shown(value)}")

    def frames(self, frames: Any, place: str, *at: int) -> None:
        """Check a frames list once (torch shares one list among the entries of a stack).

        ``place`` is a format string filled with ``at`` only when something is wrong: the hot
        path formats nothing.
        """
        if id(frames) in self.frames_seen:
            return
        if not isinstance(frames, list):
            raise self.fail(place.format(*at), f"expected a list of stack frames, got {_shown(frames)}")
        self.frames_seen.add(id(frames))
        if self.budget is not None and self.spent + len(frames) > self.budget:
            self.spend(len(frames), place.format(*at), f"{len(frames)} frames")
        self.spent += len(frames)
        for f in frames:
            if type(f) is dict or isinstance(f, dict):
                name, filename, line = f.get("name"), f.get("filename"), f.get("line")
                if (name is None or type(name) is str) and (filename is None or type(filename) is str) \
                        and (line is None or type(line) is int):
                    continue  # the hot path: millions of frames in a big snapshot
            self._bad_frame(frames, place.format(*at))

    def _bad_frame(self, frames: list[Any], place: str) -> None:
        for k, f in enumerate(frames):
            if not isinstance(f, dict):
                raise self.fail(f"{place}[{k}]", f"expected a frame (a dict with name, filename, line), "
                                                 f"got {_shown(f)}")
            for key, kind in (("name", str), ("filename", str), ("line", int)):
                v = f.get(key)
                if v is not None and type(v) is not kind:
                    raise self.fail(f"{place}[{k}].{key}", f"expected {'an int' if kind is int else 'text'} or "
                                                           f"nothing, got {_shown(v)}")


def _shown(value: Any) -> str:
    """A value for a message: its type, and its text when it is a short scalar.

    Containers are named by type only (their repr could recurse without end), huge ints by
    their size (``repr`` refuses ints over 4300 digits).
    """
    if value is None:
        return "none"
    if type(value) is int and value.bit_length() > 128:
        return f"an int of {value.bit_length()} bits"
    if type(value) in (int, float, bool, str, bytes):
        text = repr(value)
        return f"{type(value).__name__} {text}" if len(text) <= 40 else type(value).__name__
    return type(value).__name__


def validate_snapshot(data: Any, where: str | Path, *, budget: int | None = None) -> None:
    """Raise ``InputError`` naming the first field of ``data`` that a memory snapshot cannot have.

    ``budget`` bounds the entries, blocks, segments and frames visited (``item_budget`` of the
    file's size); None checks everything (data made in this process).
    """
    c = _Checker(where, budget)
    if not isinstance(data, dict):
        raise c.fail("top level", f"expected a dict with 'segments' and 'device_traces', got {_shown(data)}")
    _segments(c, data.get("segments"))
    _traces(c, data.get("device_traces", []))
    _regions(c, data.get("my_utils_regions"))


def _segments(c: _Checker, segments: Any) -> None:
    if not isinstance(segments, list):
        raise c.fail("segments", f"expected a list of allocator segments, got {_shown(segments)}")
    c.spend(len(segments), "segments", f"{len(segments)} segments")
    for i, seg in enumerate(segments):
        place = f"segments[{i}]"
        if not isinstance(seg, dict):
            raise c.fail(place, f"expected an allocator segment (a dict with address and total_size), "
                                f"got {_shown(seg)}")
        if "address" not in seg:
            raise c.fail(f"{place}.address", "expected the segment's address (an integer), found none")
        c.integer(seg["address"], f"{place}.address", "an address", MAX_ADDRESS)
        if "total_size" not in seg:
            raise c.fail(f"{place}.total_size", "expected the segment's total_size (bytes), found none")
        c.integer(seg["total_size"], f"{place}.total_size", "a size in bytes", MAX_SIZE)
        if "device" in seg:
            c.integer(seg["device"], f"{place}.device", "a device index", MAX_DEVICES - 1)
        if "stream" in seg:
            c.integer(seg["stream"], f"{place}.stream", "a stream handle", MAX_ADDRESS)
        if "segment_type" in seg and not isinstance(seg["segment_type"], str):
            raise c.fail(f"{place}.segment_type", f"expected text (large or small), got {_shown(seg['segment_type'])}")
        if "is_expandable" in seg and type(seg["is_expandable"]) is not bool:
            raise c.fail(f"{place}.is_expandable", f"expected true or false, got {_shown(seg['is_expandable'])}")
        if "frames" in seg:
            c.frames(seg["frames"], f"{place}.frames")
        blocks = seg.get("blocks", [])
        if not isinstance(blocks, list):
            raise c.fail(f"{place}.blocks", f"expected a list of blocks, got {_shown(blocks)}")
        c.spend(len(blocks), f"{place}.blocks", f"{len(blocks)} blocks")
        for j, block in enumerate(blocks):
            _block(c, block, f"{place}.blocks[{j}]")


def _block(c: _Checker, block: Any, place: str) -> None:
    if not isinstance(block, dict):
        raise c.fail(place, f"expected a block (a dict with size and state), got {_shown(block)}")
    if "size" not in block:
        raise c.fail(f"{place}.size", "expected the block's size (bytes), found none")
    c.integer(block["size"], f"{place}.size", "a size in bytes", MAX_SIZE)
    if "address" in block:
        c.integer(block["address"], f"{place}.address", "an address", MAX_ADDRESS)
    if block.get("requested_size") is not None:
        c.integer(block["requested_size"], f"{place}.requested_size", "a size in bytes", MAX_SIZE)
    if "state" in block and not isinstance(block["state"], str):
        raise c.fail(f"{place}.state", f"expected text (e.g. active_allocated), got {_shown(block['state'])}")
    if "frames" in block:
        c.frames(block["frames"], f"{place}.frames")


def _traces(c: _Checker, traces: Any) -> None:
    if not isinstance(traces, list):
        raise c.fail("device_traces", f"expected a list (one per device) of lists of trace entries, "
                                      f"got {_shown(traces)}")
    for d, trace in enumerate(traces):
        if not isinstance(trace, list):
            raise c.fail(f"device_traces[{d}]", f"expected a list of trace entries, got {_shown(trace)}")
    total = sum(len(t) for t in traces)  # before walking any: a shared-reference bomb is refused here
    c.spend(total, "device_traces", f"{total} trace entries")
    if len(traces) > MAX_DEVICES:
        raise c.fail("device_traces", f"expected at most {MAX_DEVICES} devices, found {len(traces)}")
    first = next((t[0] for t in traces if t), None)
    timed = isinstance(first, dict) and "time_us" in first
    allocated = 0
    for d, trace in enumerate(traces):
        # the hot loop (millions of entries): places are formatted only for the entry that is wrong
        for i, e in enumerate(trace):
            if not isinstance(e, dict):
                raise c.fail(f"device_traces[{d}][{i}]", f"expected a trace entry (a dict with action, size, "
                                                         f"time_us), got {_shown(e)}")
            action = e.get("action")
            if type(action) is not str:
                raise c.fail(f"device_traces[{d}][{i}].action", f"expected the action as text (alloc, "
                                                                f"free_completed, ...), got {_shown(action)}")
            size = e.get("size", 0)
            if type(size) is not int or not 0 <= size <= MAX_SIZE:
                c.integer(size, f"device_traces[{d}][{i}].size", "a size in bytes", MAX_SIZE)
            if action == "alloc":
                allocated += size
            elif action == "oom" and e.get("device_free") is not None:
                c.integer(e["device_free"], f"device_traces[{d}][{i}].device_free", "bytes free on the device",
                          MAX_TOTAL)
            addr = e.get("addr")
            if addr is not None and (type(addr) is not int or not 0 <= addr <= MAX_ADDRESS):
                c.integer(addr, f"device_traces[{d}][{i}].addr", "an address", MAX_ADDRESS)
            if timed:
                t: Any = e.get("time_us")
                if type(t) not in (int, float) or not -MAX_TIME_US <= t <= MAX_TIME_US:  # NaN fails too
                    raise c.fail(f"device_traces[{d}][{i}].time_us",
                                 "expected the entry's time in µs (a finite number), as the trace's first entry "
                                 f"has, got {_shown(t)}")
            frames = e.get("frames")
            if frames is not None:
                c.frames(frames, "device_traces[{}][{}].frames", d, i)
    if allocated > MAX_TOTAL:
        raise c.fail("device_traces", f"expected at most {MAX_TOTAL} bytes allocated over the trace, "
                                      f"found {allocated}")


def _regions(c: _Checker, regions: Any) -> None:
    if regions is None:
        return
    if not isinstance(regions, list):
        raise c.fail("my_utils_regions", f"expected a list of regions, got {_shown(regions)}")
    c.spend(len(regions), "my_utils_regions", f"{len(regions)} regions")
    for i, r in enumerate(regions):
        if not isinstance(r, dict):
            raise c.fail(f"my_utils_regions[{i}]", f"expected a region (a dict with name, start_us, stop_us), "
                                                   f"got {_shown(r)}")
        if "name" in r and not isinstance(r["name"], str):
            raise c.fail(f"my_utils_regions[{i}].name", f"expected the region's name as text, got {_shown(r['name'])}")
        for key in ("start_us", "stop_us"):
            v: Any = r.get(key)
            if type(v) not in (int, float) or not math.isfinite(v) or abs(v) > MAX_TIME_US:
                raise c.fail(f"my_utils_regions[{i}].{key}", f"expected a time in µs (a finite number), "
                                                             f"got {_shown(v)}")
