"""K-way merge of the sorted spill files into *finished* lines, most of it on the workers, few files open at once.

The merge of 1,000 ranks (2,000 spill files, 6.5 million records) in the main process took
longer than all the parallel layout: for each record it split the line, shifted and formatted
its time, wrote ``pid``/``tid`` and encoded the text (~10 µs a record, and ``heapq.merge``'s
key function on top). Now the units are split into groups (:func:`groups`: at most ``fan_in``
spill files each, at least two per worker, balanced by size) and a task per group
(:func:`finish_group`) merges its spill files and writes *finished lines*, sorted::

    <µs·1000 since the time origin, 20 digits>\t<unit, 10 digits>\t<kind>\t<dur µs>\t<events>\t<bytes>\t<JSON>

where ``<JSON>`` is the record's events as they go into the output (``ts``, ``pid``, ``tid``
first, several joined by ``,`` for a flow) and ``<bytes>`` what they add to it (separators
included). The zero-padded key makes byte order the merge order — (time, unit), as before —
so the main process merges the group files with a plain ``heapq.merge`` of their lines (no
key function, no parsing) and writes ``<JSON>``. At most ``fan_in`` files are open in any
process; when there are more groups than that, they are merged in rounds first.
"""

from __future__ import annotations

import contextlib
import heapq
import json
import os
import resource
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from my_utils.profiling.trace.records import Unit, format_us, ids_path, scratch_error

__all__ = ["FAN_IN_MAX", "FD_MARGIN", "UnitSpec", "fields", "finish_group", "finished_lines", "groups", "merge_fan_in",
           "merge_files", "open_fds", "unit_spec"]

FAN_IN_MAX = 256  # spill files merged at once
FD_MARGIN = 16  # files the rest of the command may open meanwhile (imports, the progress bar, a log)
GROUPS_PER_WORKER = 2  # finish tasks per worker (a large torch trace in one group does not hold up the rest)
UnitSpec = tuple[str, int, int]  # spill file, unit index, shift ns (lane -> (pid, tid): in the spill's ids file)


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


def unit_spec(unit: Unit) -> UnitSpec:
    """What a finish task needs of a unit (small, picklable)."""
    return unit.spill, unit.index, unit.shift_ns


def groups(units: Sequence[Unit], fan_in: int, workers: int) -> list[list[Unit]]:
    """The units with records, in groups of at most ``fan_in``: ``GROUPS_PER_WORKER`` per worker at least (as many
    as there are units at most), the largest spill files first into the lightest group."""
    live = [u for u in units if u.records]
    if not live:
        return []
    count = min(len(live), max(-(-len(live) // fan_in), GROUPS_PER_WORKER * max(workers, 1)))
    while -(-len(live) // count) > fan_in:
        count += 1
    out: list[list[Unit]] = [[] for _ in range(count)]
    load = [0] * count
    sizes = {u.index: os.stat(u.spill).st_size for u in live}
    for unit in sorted(live, key=lambda u: -sizes[u.index]):
        best = min((i for i in range(count) if len(out[i]) < fan_in), key=lambda i: load[i])
        out[best].append(unit)
        load[best] += sizes[unit.index]
    return [g for g in out if g]


def _unit_lines(spec: UnitSpec, origin_ns: int) -> Iterator[bytes]:
    """A unit's spill file as finished lines, in its (sorted) order."""
    spill, index, shift = spec
    with open(ids_path(spill), encoding="utf-8") as fh:
        ids = json.load(fh)
    unit = b"%010d" % index
    with open(spill, encoding="utf-8") as fh:
        for line in fh:
            ns, lane, kind, dur, text = line.rstrip("\n").split("\t", 4)
            key = int(ns) + shift
            rel = key - origin_ns
            if rel < 0:  # the origin is the floor of the earliest record: never after one
                raise ValueError(f"record at {key} ns before the time origin {origin_ns} ns in {spill}")
            if kind == "f":
                texts = []
                for delta, flane, ftext in json.loads(text):
                    pid, tid = ids[flane]
                    texts.append(f'{{"ts":{format_us(key + delta - origin_ns)},"pid":{pid},"tid":{tid},{ftext[1:]}')
            else:
                pid, tid = ids[int(lane)]
                texts = [f'{{"ts":{format_us(rel)},"pid":{pid},"tid":{tid},{text[1:]}']
            data = ",".join(texts).encode()
            # bytes in the output: each event and the separator before it
            yield b"%020d\t%s\t%s\t%s\t%d\t%d\t%s\n" % (rel, unit, kind.encode(), dur.encode(), len(texts),
                                                        len(data) + 1, data)


def fields(line: bytes) -> tuple[bytes, float, int, int, bytes]:
    """(kind, dur µs, events, bytes in the output, JSON of the events) of a finished line."""
    _key, _unit, kind, dur, count, size, data = line.split(b"\t", 6)
    return kind, float(dur), int(count), int(size), data[:-1] if data.endswith(b"\n") else data


def finished_lines(specs: Sequence[UnitSpec], origin_ns: int) -> Iterator[bytes]:
    """The finished lines of ``specs`` (one file open per unit) in (time, unit) order."""
    streams = [_unit_lines(s, origin_ns) for s in specs]
    try:
        yield from heapq.merge(*streams)
    finally:
        _close(streams)


def finish_group(specs: Sequence[UnitSpec], origin_ns: int, out: str) -> str:
    """Task: the finished lines of a group of units into ``out`` (sorted); the units' spill files are removed."""
    try:
        with open(out, "wb") as fh:
            fh.writelines(finished_lines(specs, origin_ns))
    except OSError as exc:
        raise scratch_error(exc, out) from None
    for spill, *_rest in specs:
        with contextlib.suppress(OSError):
            os.unlink(spill)
        with contextlib.suppress(OSError):
            os.unlink(ids_path(spill))
    return out


def merge_files(paths: Sequence[str], out: str) -> str:
    """Task: finished-line files merged into one (each removed once read)."""
    try:
        with open(out, "wb") as fh:
            fh.writelines(_merged(paths))
    except OSError as exc:
        raise scratch_error(exc, out) from None
    return out


def _merged(paths: Iterable[str]) -> Iterator[bytes]:
    """The lines of finished-line files in order (a merge over the open files themselves: no generator per line)."""
    files: list[Any] = []
    try:
        for path in paths:
            files.append(open(path, "rb"))  # noqa: SIM115 - closed below
            with contextlib.suppress(OSError):  # POSIX: still read through the open file; elsewhere: with the scratch
                os.unlink(path)
        yield from heapq.merge(*files)
    finally:
        for fh in files:
            fh.close()


def _close(streams: list[Any]) -> None:
    for stream in streams:
        stream.close()  # generators: their files close now


def merged(files: Sequence[str], fan_in: int, folder: Path,
           run: Callable[[Callable[..., str], list[tuple[Any, ...]]], list[str]]) -> Iterator[bytes]:
    """Every finished line of ``files`` in order, at most ``fan_in`` files open here: more are merged in rounds
    by tasks (``run(func, calls)``) into files in ``folder`` first."""
    level = 0
    paths = list(files)
    while len(paths) > fan_in:
        chunks = [paths[i:i + fan_in] for i in range(0, len(paths), fan_in)]
        paths = run(merge_files, [(chunk, str(folder / f"merged_{level}_{g}.tsv")) for g, chunk in enumerate(chunks)])
        level += 1
    return _merged(paths)
