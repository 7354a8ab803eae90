"""K-way merge of the sorted spill files with a bounded number of files open at once.

``heapq.merge`` over every task's file held two files per rank open (2,008 at 1,000 ranks,
past common limits). At most :func:`merge_fan_in` files are open: more are first merged in
groups into intermediate files, level by level, keyed by (time, unit index) as the final merge
is, so the order — and the output — is the same.
"""

from __future__ import annotations

import contextlib
import heapq
import os
import resource
from collections.abc import Iterator, Sequence
from pathlib import Path

from my_utils.profiling.trace.records import Unit, scratch_error

__all__ = ["FAN_IN_MAX", "FD_MARGIN", "merge_fan_in", "merged", "open_fds"]

FAN_IN_MAX = 256  # spill files merged at once
FD_MARGIN = 16  # files the rest of the command may open meanwhile (imports, the progress bar, a log)
Stream = Iterator[tuple[int, int, str]]  # (ns on the reference clock, unit index, the rest of the record's line)


def _unit_stream(unit: Unit) -> Iterator[tuple[int, int, str]]:
    """A unit's spill file as (ns on the reference clock, unit index, the rest of the line)."""
    shift, index = unit.shift_ns, unit.meta["index"]
    with open(unit.spill, encoding="utf-8") as fh:
        for line in fh:
            ns, rest = line.split("\t", 1)
            yield int(ns) + shift, index, rest


def _merged_stream(path: Path) -> Iterator[tuple[int, int, str]]:
    """An intermediate file of :func:`_premerge`, read back; removed once read."""
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                ns, index, rest = line.split("\t", 2)
                yield int(ns), int(index), rest
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


def open_fds() -> int:
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
    open_now = open_fds()
    needed = open_now + reserve + FD_MARGIN + min(wanted, FAN_IN_MAX)
    if soft != resource.RLIM_INFINITY and soft < needed:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (needed if hard == resource.RLIM_INFINITY
                                                        else min(needed, hard), hard))
            soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY:
        return FAN_IN_MAX
    return min(FAN_IN_MAX, soft - open_now - reserve - FD_MARGIN)



def merged(units: Sequence[Unit], folder: Path | None, fan_in: int) -> tuple[Stream, list[Stream]]:
    """(every record of ``units`` in (time, unit) order, the streams to close when done), ``fan_in`` files open."""
    streams: list[Stream] = [_unit_stream(u) for u in units if u.meta["records"]]
    level = 0
    try:
        while len(streams) > fan_in:
            if folder is None:
                raise ValueError("more spill files than may be open at once, and no folder for intermediates")
            streams = [_premerge(group, folder / f"merge_{level}_{g}.tsv") if len(group) > 1 else group[0]
                       for g, group in enumerate(streams[i:i + fan_in] for i in range(0, len(streams), fan_in))]
            level += 1
    except BaseException:
        _close(streams)
        raise
    return heapq.merge(*streams, key=lambda r: (r[0], r[1])), streams


def _close(streams: list[Stream]) -> None:
    for stream in streams:
        stream.close()  # type: ignore[attr-defined]  # generators: their files close now


def _premerge(group: list[Stream], path: Path) -> Stream:
    """Merge ``group`` into one sorted intermediate file (lines: ns, unit index, the record)."""
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.writelines(f"{key}\t{index}\t{rest}" for key, index, rest in
                          heapq.merge(*group, key=lambda r: (r[0], r[1])))
    except OSError as exc:
        raise scratch_error(exc, path) from None
    finally:
        _close(group)
    return _merged_stream(path)
