"""Write a merged trace so that every file opens: split into parts, or trim to one file, under ``max_mb``.

Viewers fail near 1 GB of JSON (the browser's string and heap limits), whatever the gzip
size, so the budget counts uncompressed bytes. The events are streamed (from
:meth:`my_utils.profiling.trace.stream.Plan.records` or an in-memory :class:`MergedTrace`);
nothing but the open files' buffers is held.

``overflow="split"`` (the default): each part is a complete trace — every metadata event
(process and lane names), ``otherData`` with ``part`` (index, count, files) — holding a
contiguous time range of the events; a flow travels as one record, so no part has half a
flow. ``overflow="trim"``: one file; what is least informative is dropped until it fits —
every flow first, then torch events shorter than a duration threshold, the smallest one
that fits according to the tasks' duration histograms. MyTimer regions and metadata are
never dropped; when they alone do not fit, a ``UsageError`` says which limit would.
``otherData.trimmed`` records the threshold and the kept and dropped counts by kind.
A part can never be smaller than its largest event: an event (or flow) larger than the
limit by itself gets a part of its own, and a warning names it and its size (in
``otherData.warnings`` of that part too); nothing is cut. Every file is written under a
temporary name and all of them are renamed at the end; then what an earlier write of the
same output left (its other parts, or ``T.json`` when this one is split, and the reverse)
is removed, so the folder never mixes two runs' parts. Nothing is left behind on an error.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import math
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from my_utils.core.atomic import _umask
from my_utils.core.errors import UsageError
from my_utils.core.scratch import sweep_temp_files, temp_name
from my_utils.profiling.trace.merge import MergedTrace
from my_utils.profiling.trace.records import (
    THRESHOLDS_US,
    Spilled,
    bucket,
    dump,
    json_chars,
    json_pieces,
    utf8_len,
)
from my_utils.profiling.trace.spill_merge import fields
from my_utils.profiling.trace.stream import Plan, Sizes

_MB = 1 << 20
_TAIL_RESERVE = 4096  # otherData grows by `part` or `trimmed` (and the trim warning) after the budget is set
_FLUSH_BYTES = 1 << 20
OVERFLOW_MODES = ("split", "trim")
# finished lines (trace.spill_merge): key, unit, kind, dur µs, events, bytes, JSON; argument: output files held open
Records = Callable[[int], Iterator[bytes]]


def _part_path(output: Path, i: int) -> Path:
    """``T.part<i>.json`` (or ``.json.gz``) beside ``T.json``."""
    name = output.name
    suffix = ".json.gz" if name.endswith(".json.gz") else ".json" if name.endswith(".json") else ""
    stem = name[: len(name) - len(suffix)] if suffix else name
    return output.with_name(f"{stem}.part{i}{suffix}")


def write_trace(trace: MergedTrace | Plan, output: str | Path, max_mb: float | None = None,
                overflow: str = "split") -> list[Path]:
    """Write ``trace`` to ``output`` (``.json`` or ``.json.gz``); returns the files written.

    Above ``max_mb`` MB of JSON it is split into parts (``overflow="split"``) or trimmed to one
    file (``overflow="trim"``, see the module doc; its warning is in ``otherData.warnings``).
    """
    return write_output(trace, output, max_mb, overflow)[0]


def write_output(trace: MergedTrace | Plan, output: str | Path, max_mb: float | None = None,
                 overflow: str = "split") -> tuple[list[Path], list[str]]:
    """:func:`write_trace`, also returning its warnings (what a trim dropped, a part over the limit)."""
    out = Path(output)
    if not (out.name.endswith(".json") or out.name.endswith(".json.gz")):
        raise UsageError(f"--output {out}: expected a .json or .json.gz file name")
    if overflow not in OVERFLOW_MODES:
        raise UsageError(f"--overflow {overflow}: expected one of {', '.join(OVERFLOW_MODES)}")
    if isinstance(trace, Plan):
        return _write(trace.head, trace.other, trace.records, trace.sizes, out, max_mb, overflow)
    records, sizes = _in_memory(trace)
    head = ",".join(dump(m) for m in trace.metadata).encode()
    return _write(head, trace.other, records, sizes, out, max_mb, overflow)


def _in_memory(trace: MergedTrace) -> tuple[Records, Sizes]:
    """Records and sizes of an in-memory trace, grouped and classified as the streaming merge does."""
    flows: dict[Any, list[dict[str, Any]]] = {}
    items: list[tuple[float, str, float, list[dict[str, Any]]]] = []
    for ev in trace.events:
        if ev.get("ph") in ("s", "t", "f") and "id" in ev:
            flows.setdefault((ev.get("cat"), ev["id"]), []).append(ev)
        elif ev.get("cat") == "mytimer":
            items.append((ev["ts"], "m", float(ev.get("dur", 0.0)), [ev]))
        else:
            x = ev.get("ph") == "X"
            items.append((ev["ts"], "t" if x else "i", float(ev.get("dur", 0.0)) if x else 0.0, [ev]))
    items += [(min(e["ts"] for e in group), "f", 0.0, group) for group in flows.values()]
    items.sort(key=lambda it: it[0])
    hist = [[0, 0] for _ in THRESHOLDS_US]
    counts = {"m": [0, 0], "f": [0, 0]}
    lines = []
    for _ts, kind, dur, group in items:
        texts = [dump(e) for e in group]
        size = sum(utf8_len(t) for t in texts)
        cell = hist[bucket(dur)] if kind in ("t", "i") else counts[kind]
        cell[0] += len(texts)
        cell[1] += size
        data = ",".join(texts).encode()
        lines.append(b"%020d\t%010d\t%s\t%r\t%d\t%d\t%s\n" % (0, 0, kind.encode(), dur, len(texts), len(data) + 1,
                                                               data))
    sizes = Sizes(1, (counts["m"][0], counts["m"][1]), (counts["f"][0], counts["f"][1]),
                  [(c, b) for c, b in hist])
    return (lambda _reserve: iter(lines)), sizes


class _Part:
    """One output file being written (under its temporary name); the tail is added when all parts are known.

    ``head`` (the metadata events) and the :class:`~my_utils.profiling.trace.records.Spilled` values of
    otherData are copied from their scratch files: 1,000 ranks' are megabytes, never held here.
    """

    def __init__(self, raw: IO[bytes], gz: bool, head: bytes | Spilled) -> None:
        self.raw = raw
        self.fh: Any = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) if gz else raw
        self.buf: list[bytes] = [b'{"traceEvents":[']
        self.pending = 0
        self.first = not _length(head)
        self.size = 0
        self.warnings: list[str] = []
        self._copy(head)

    def add(self, data: bytes, size: int) -> None:
        """One record's events (``,``-joined JSON), ``size`` bytes with the separator before them."""
        if not self.first:
            self.buf.append(b",")
        self.first = False
        self.buf.append(data)
        self.pending += size
        self.size += size
        if self.pending >= _FLUSH_BYTES:
            self.flush()

    def add_lines(self, lines: Iterable[bytes]) -> None:
        """Every record of ``lines`` (finished lines, :mod:`~my_utils.profiling.trace.spill_merge`): the fast path
        of a trace written whole (1,000 ranks: millions of records)."""
        buf, pending, first = self.buf, self.pending, self.first
        for line in lines:
            data = line.split(b"\t", 6)[6]
            if first:
                first = False
            else:
                buf.append(b",")
            buf.append(data[:-1])  # without its newline
            pending += len(data)
            if pending >= _FLUSH_BYTES:
                self.fh.write(b"".join(buf))
                buf.clear()
                self.size += pending
                pending = 0
        self.pending, self.first = pending, first
        self.size += pending

    def flush(self) -> None:
        self.fh.write(b"".join(self.buf))
        self.buf, self.pending = [], 0

    def _copy(self, text: bytes | Spilled) -> None:
        """Bytes (or a spilled text's) into the output, buffered as the events are."""
        for block in text.chunks() if isinstance(text, Spilled) else (text,):
            self.buf.append(block)
            self.pending += len(block)
            if self.pending >= _FLUSH_BYTES:
                self.flush()

    def close(self, other: dict[str, Any]) -> None:
        if self.warnings:
            other = {**other, "warnings": [*other.get("warnings", []), *self.warnings]}
        self._copy(b'],"displayTimeUnit":"ms","otherData":')
        for piece in json_pieces(other):
            self._copy(piece if isinstance(piece, Spilled) else piece.encode())
        self._copy(b"}\n")
        self.flush()
        if self.fh is not self.raw:
            self.fh.close()


def _length(text: bytes | Spilled) -> int:
    """Bytes of ``text``."""
    return text.size if isinstance(text, Spilled) else len(text)


def output_names(out: Path) -> re.Pattern[str]:
    """The file names a write of ``out`` produces: ``T.json`` and ``T.part<i>.json`` (``.json.gz`` alike)."""
    name = out.name
    suffix = ".json.gz" if name.endswith(".json.gz") else ".json"
    stem = name[: len(name) - len(suffix)]
    return re.compile(re.escape(stem) + r"(?:\.part[1-9][0-9]*)?" + re.escape(suffix))


class _Staging:
    """The files of one write, each under a temporary name beside its final path until :meth:`commit`.

    ``commit`` renames them all at the end, then removes what an earlier write of the same
    output left that this one did not replace (its other parts, or the single file a split
    write replaces, and the reverse): never a half-new set of parts, never a stale part whose
    ``otherData.part`` claims another set. Temporary names carry this process's owner token,
    so a later write removes those of a killed run (:func:`~my_utils.core.scratch.sweep_temp_files`).
    """

    def __init__(self, out: Path) -> None:
        self.out = out
        self.names = output_names(out)
        self.files: list[list[Any]] = []  # [temporary path, final path, raw handle]
        out.parent.mkdir(parents=True, exist_ok=True)
        sweep_temp_files(out.parent, self.names)

    def open(self, final: Path) -> IO[bytes]:
        """A new binary file that becomes ``final`` on commit."""
        try:
            fd, tmp = tempfile.mkstemp(prefix=temp_name(final), suffix=".tmp", dir=final.parent)
        except OSError as exc:
            raise named(exc, final) from None
        raw = os.fdopen(fd, "wb")
        self.files.append([Path(tmp), final, raw])
        with contextlib.suppress(OSError):
            os.chmod(tmp, 0o666 & ~_umask())  # what a plain open() gives, as atomic_write does
        return raw

    def rename(self, index: int, final: Path) -> None:
        """Make file ``index`` become ``final`` instead."""
        self.files[index][1] = final

    def commit(self) -> list[Path]:
        """Flush, rename every file to its final name, remove the earlier write's leftovers; the final paths."""
        for _tmp, final, raw in self.files:
            try:
                raw.flush()
                os.fsync(raw.fileno())
                raw.close()
            except OSError as exc:
                raise named(exc, final) from None
        from my_utils.core.atomic import replace_all

        # all parts or none: a rename failing half-way restores the earlier write's files
        replace_all([(tmp, final) for tmp, final, _raw in self.files])
        finals = [final for _tmp, final, _raw in self.files]
        self.files = []
        keep = {f.name for f in finals}
        with os.scandir(self.out.parent) as entries:
            stale = [e.path for e in entries if self.names.fullmatch(e.name) and e.name not in keep
                     and e.is_file(follow_symlinks=False)]
        for path in stale:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        return finals

    def abort(self) -> None:
        """Close and remove every temporary file (the earlier outputs stay as they were)."""
        for tmp, _final, raw in self.files:
            with contextlib.suppress(OSError):
                raw.close()
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        self.files = []


# output bytes per byte of the size bound, a little below what real merged traces took (gzip: 0.09-0.11; JSON:
# the bound is nearly exact): refused only when the room is clearly too small
_GZIP_RATIO = 0.08
_JSON_RATIO = 0.9


def check_output_room(out: Path, json_bytes: int) -> None:
    """Refuse before writing when the output's filesystem has clearly less room than the output will take."""
    need = int(json_bytes * (_GZIP_RATIO if out.name.endswith(".gz") else _JSON_RATIO))
    folder = Path(os.path.abspath(out.parent))
    while not folder.exists() and folder.parent != folder:  # the folder is made when the output is written
        folder = folder.parent
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return
    if need > free:
        raise UsageError(f"--output {out}: the merged trace needs about {need / _MB:,.0f} MB and {free / _MB:,.0f} MB "
                         f"are free in {folder}; free some space or write elsewhere")


def named(exc: OSError, path: Path) -> OSError:
    """``exc`` naming ``path`` (the output a person knows, not a hidden temporary or no file at all)."""
    return type(exc)(exc.errno, exc.strerror or str(exc), str(path))


def _describe(data: bytes, events: int) -> str:
    """A short description of the event (or flow) a record holds, for a message."""
    try:
        first, _end = json.JSONDecoder().raw_decode(data.decode())
    except ValueError:
        return "an event"
    name = str(first.get("name", ""))
    short = name if len(name) <= 60 else name[:57] + "..."
    what = "a flow" if events > 1 else "an event"
    return f"{what} named {short!r} ({len(name):,} characters) at ts {first.get('ts')} µs, pid {first.get('pid')}"


def _write(head: bytes | Spilled, other: dict[str, Any], records: Records, sizes: Sizes, out: Path,
           max_mb: float | None, overflow: str) -> tuple[list[Path], list[str]]:
    budget = None
    if max_mb is not None:
        budget = int(max_mb * _MB) - _length(head) - json_chars(other) - _TAIL_RESERVE
    everything = sizes.bound(sizes.mytimer) + sizes.bound(sizes.flows) + sizes.bound(sizes.torch_from(0))
    if budget is not None and overflow == "trim":
        return _write_trimmed(other, records, sizes, out, max_mb or 0.0, budget, head, everything)
    if budget is not None and budget <= 0:
        raise UsageError(f"--max-mb {max_mb:g}: smaller than the trace's own metadata "
                         f"({(_length(head) + json_chars(other)) / _MB:.2f} MB); give a larger limit")
    split = budget is not None and everything > budget
    gz = out.name.endswith(".gz")
    check_output_room(out, everything)
    staging = _Staging(out)
    warnings: list[str] = []
    try:
        parts: list[_Part] = []
        paths: list[Path] = []

        def new_part() -> _Part:
            path = _part_path(out, len(parts) + 1) if split else out
            parts.append(_Part(staging.open(path), gz, head))
            paths.append(path)
            return parts[-1]

        part = new_part()
        # every part stays open until all are known (each one's otherData names them all)
        open_parts = math.ceil(everything / budget) + 1 if split and budget else 1
        try:
            if not split:  # one file: only the events' JSON is needed of each line
                part.add_lines(records(open_parts))
            for line in records(open_parts) if split else ():
                _kind, _dur, events, size, data = fields(line)
                if budget is not None and part.size + size > budget and part.size:
                    part.flush()
                    part = new_part()
                if budget is not None and size > budget:
                    # a part cannot be smaller than its largest event: it gets a part of its own, and a warning
                    warning = (f"--max-mb {max_mb:g}: {_describe(data, events)} is {size / _MB:.2f} MB of JSON by itself, "
                               f"more than the limit; {paths[-1].name} holds it alone and is larger than "
                               f"{max_mb:g} MB (a part cannot be smaller than its largest event)")
                    part.warnings.append(warning)
                    warnings.append(warning)
                part.add(data, size)
            for i, p in enumerate(parts):
                extra = other
                if len(parts) > 1:
                    extra = {**other, "part": {"index": i + 1, "count": len(parts),
                                               "files": [q.name for q in paths]}}
                p.close(extra)
        except OSError as exc:
            raise named(exc, paths[-1]) from None
        if split and len(parts) == 1:
            # the size bound said "several parts" but the exact sizes fit in one: it is the whole trace
            staging.rename(0, out)
        written = staging.commit()
    except BaseException:
        staging.abort()
        raise
    return written, warnings


def _write_trimmed(other: dict[str, Any], records: Records, sizes: Sizes, out: Path, max_mb: float, budget: int,
                   head: bytes | Spilled, everything: int) -> tuple[list[Path], list[str]]:
    kept_min = sizes.bound(sizes.mytimer)
    if kept_min > budget:
        need = (int(max_mb * _MB) - budget + kept_min) / _MB
        raise UsageError(f"--max-mb {max_mb:g} --overflow trim: the metadata and MyTimer regions alone (never "
                         f"trimmed) need {need:.2f} MB; give --max-mb {math.ceil(need * 100) / 100:g} or more, "
                         "or --overflow split")
    drop_flows = everything > budget
    j = 0
    if drop_flows:
        room = budget - kept_min
        j = next((k for k in range(len(THRESHOLDS_US) + 1) if sizes.bound(sizes.torch_from(k)) <= room),
                 len(THRESHOLDS_US))
    threshold = THRESHOLDS_US[j] if j < len(THRESHOLDS_US) else math.inf
    kept = {"m": 0, "t": 0, "i": 0, "f": 0}
    dropped = {"m": 0, "t": 0, "i": 0, "f": 0}
    check_output_room(out, min(everything, budget))
    staging = _Staging(out)
    try:
        try:
            part = _Part(staging.open(out), out.name.endswith(".gz"), head)
            for line in records(1):
                raw, dur, events, size, data = fields(line)
                kind = raw.decode()
                if (kind == "f" and drop_flows) or (kind in ("t", "i") and not dur >= threshold):
                    dropped[kind] += events
                    continue
                kept[kind] += events
                part.add(data, size)
            warning = None
            if drop_flows:
                cut = "every torch event" if j == len(THRESHOLDS_US) else \
                    f"torch events shorter than {threshold:g} µs" if threshold > 0 else "no torch event"
                warning = (f"--max-mb {max_mb:g} --overflow trim: dropped {dropped['f']} flow events and "
                           f"{dropped['t'] + dropped['i']} torch events ({cut}) so that the trace fits; "
                           "otherData.trimmed has the counts (--overflow split keeps everything)")
            trimmed = {"max_mb": max_mb, "torch_min_duration_us": None if threshold == math.inf else threshold,
                       "flows_dropped": drop_flows,
                       "kept": {"mytimer_regions": kept["m"], "torch_slices": kept["t"], "torch_other": kept["i"],
                                "flow_events": kept["f"]},
                       "dropped": {"torch_slices": dropped["t"], "torch_other": dropped["i"],
                                   "flow_events": dropped["f"]}}
            final = {**other, "trimmed": trimmed}
            if warning:
                final["warnings"] = [*other.get("warnings", []), warning]
            part.close(final)
        except OSError as exc:
            raise named(exc, out) from None
        written = staging.commit()
    except BaseException:
        staging.abort()
        raise
    return written, [warning] if warning else []
