"""Rank files read one at a time by workers, for the collector's streaming read (``ingest``).

A run of 1,000 ranks has 1,000 profile CSVs and 1,000 torch traces. Read by their providers,
a provider's files are parsed together and its events held until the end; here each file is
one call of :func:`~my_utils.profiling.formats.parallel.stream_many`, and the worker that
reads it also stamps its events (source, run id, rank) and, for ``ingest``, turns them into
the events file's lines, so this process only copies bytes and lets them go.

**Spill files.** The lines go back through a file the worker writes into the call's spill
folder (:func:`read_rank_files`), not through the result: this process copies it into the events
file in the kernel (``copy_file_range``) and removes it. Sent as results, the 725 MB of lines
of 1,000 generated ranks were pickled, sent and unpickled once more each, and on Dask they
crossed the cluster's TCP connections and both event loops; as a file they cost a write and
a kernel copy, and a result is a few numbers, so Dask takes larger batches. A worker that
cannot see the folder (a cluster whose workers do not share this machine's ``$TMPDIR``)
sends the lines back in the result, as before.

Only the providers of rank files take this path, each through the module-level reader its
own ``_read_files`` loops over (so the events are the same, file by file):
:class:`~my_utils.profiling.formats.mytimer.MyTimerMetricsProvider` (``read_profile_csv_events``)
and :class:`~my_utils.profiling.kineto.read.provider.TorchProfilerMetricsProvider` (``parse_trace_file``;
its check that no two files claim one rank is made here from each file's first event).
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from my_utils.core.errors import InputError, MyUtilsError
from my_utils.core.events import EventLogWriter, MetricEvent
from my_utils.profiling.formats._files import FileProviderBase, check_distinct_ranks, damaged_errors

__all__ = ["SPILL_PREFIX", "RankFile", "Stamp", "kind_of", "mark_read", "read_rank_file", "read_rank_files", "stamp",
           "unread_files"]

SPILL_PREFIX = "myutils-ingest-"  # the spill folder's name in $TMPDIR (:func:`my_utils.core.scratch.make_scratch`)

#: provider class (module, name) -> (reader "module:function", what a file is, files that must not share a rank)
_KINDS: dict[tuple[str, str], tuple[str, str, str | None]] = {
    ("my_utils.profiling.formats.mytimer", "MyTimerMetricsProvider"):
        ("my_utils.profiling.formats.mytimer:read_profile_csv_events", "profile CSV", None),
    ("my_utils.profiling.kineto.read.provider", "TorchProfilerMetricsProvider"):
        ("my_utils.profiling.kineto.read.provider:parse_trace_file", "Kineto trace (.json/.json.gz)", "trace"),
}


@dataclass(frozen=True)
class Stamp:
    """What the collector fills in on events that lack it (``MetricsCollector._stamp``)."""

    source: str
    run_id: str
    rank: int | None
    step: int | None = None


def stamp(event: MetricEvent, how: Stamp) -> MetricEvent:
    """``event`` with its missing source, run id, rank and step filled in from ``how``."""
    changes: dict[str, Any] = {}
    if not event.source:
        changes["source"] = how.source
    if not event.run_id:
        changes["run_id"] = how.run_id
    if event.rank is None and how.rank is not None:
        changes["rank"] = how.rank
    if event.step is None and how.step is not None:
        changes["step"] = how.step
    return dataclasses.replace(event, **changes) if changes else event


@dataclass(frozen=True)
class RankFile:
    """What a worker sends back for one file read as lines: the events file's lines (or the file holding
    them), counted, their sources, the rank."""

    lines: bytes
    count: int
    sources: tuple[str, ...]
    rank: int | None  # the first event's rank (before stamping), else the provider's rank option
    spilled: str | None = None  # the spill file holding the lines (``lines`` is then empty)

    def copy_to(self, out: IO[bytes]) -> None:
        """Append the lines to ``out`` (a file opened for appending in binary) and remove the spill file."""
        if self.spilled is None:
            out.write(self.lines)
            return
        out.flush()
        with open(self.spilled, "rb") as src:
            _copy_range(src.fileno(), out.fileno(), os.fstat(src.fileno()).st_size)
        os.unlink(self.spilled)

    def discard(self) -> None:
        """Remove the spill file of lines that will not be used (a provider that failed)."""
        if self.spilled is not None:
            try:
                os.unlink(self.spilled)
            except FileNotFoundError:
                pass


def _copy_range(src: int, dst: int, size: int) -> None:
    """``size`` bytes from ``src``'s start to ``dst``'s end: in the kernel where it can, else through a buffer."""
    copy = getattr(os, "copy_file_range", None)
    while size > 0 and copy is not None:
        try:
            done = copy(src, dst, size)
        except OSError:  # an older kernel or across filesystems (EXDEV): the buffered copy goes on from here
            break
        if done == 0:
            return  # the file is shorter than it was: what it held was copied
        size -= done
    while size > 0:
        chunk = os.read(src, min(size, 1 << 20))
        if not chunk:
            return
        view = memoryview(chunk)
        while view:
            view = view[os.write(dst, view):]
        size -= len(chunk)


def kind_of(provider: Any) -> str | None:
    """The reader key of a provider of rank files read from files, or None (read by its own ``collect``)."""
    cls = type(provider)
    key = (cls.__module__, cls.__name__)
    if key not in _KINDS or not isinstance(provider, FileProviderBase) or provider.path == Path():
        return None
    return f"{key[0]}:{key[1]}"


def unread_files(provider: FileProviderBase) -> list[Path]:
    """The provider's files not read before (what its ``collect`` would read now)."""
    fresh = []
    for file in provider.files():
        st = file.stat()
        if (file.resolve(), st.st_size, st.st_mtime_ns) not in provider._done:
            fresh.append(file)
    return fresh


def mark_read(provider: FileProviderBase, files: Iterable[Path]) -> None:
    """Remember ``files`` as read by ``provider`` (its ``collect`` will not return them again)."""
    for file in files:
        st = file.stat()
        provider._done.add((file.resolve(), st.st_size, st.st_mtime_ns))


def check_ranks(kind: str, ranks: dict[Path, int | None]) -> None:
    """The provider's own check across its files (a torch trace per rank), once all were read."""
    what = _KINDS[tuple(kind.split(":", 1))][2]  # type: ignore[index]
    if what is not None:
        check_distinct_ranks(ranks, what)


def _reader(kind: str) -> tuple[Callable[[Path, int | None], list[MetricEvent]], str]:
    import importlib

    target, what, _distinct = _KINDS[tuple(kind.split(":", 1))]  # type: ignore[index]
    module, name = target.split(":")
    return getattr(importlib.import_module(module), name), what


def read_rank_file(kind: str, path: str, rank: int | None, how: Stamp | None,
                   spill: str | None = None) -> RankFile | list[MetricEvent]:
    """Task: one rank file read; with ``how``, its events stamped and written as the events file's lines.

    The lines go to a new file in the folder ``spill`` when this process can see that folder,
    else back in the result. Without ``how`` the events come back as they were read (the caller
    stamps them and checks ranks).
    """
    reader, what = _reader(kind)
    file = Path(path)
    try:
        events = reader(file, rank)
    except MyUtilsError:
        raise
    except damaged_errors() as exc:  # a reader that let a decoding error through: bad input, said on one line
        raise InputError(file, None, f"a readable {what} ({type(exc).__name__}: {exc})") from None
    if how is None:
        return events
    first = next((e.rank for e in events), rank)
    events = [stamp(e, how) for e in events]
    sources = tuple(sorted({e.source for e in events}))
    spilled = spill is not None and os.path.isdir(spill)
    fd, tmp = tempfile.mkstemp(prefix="rank-" if spilled else "myutils-lines-", suffix=".jsonl",
                               dir=spill if spilled else None)
    try:
        os.close(fd)
        # the writer every events file goes through: the lines are those write_events would write
        EventLogWriter(tmp).append(events)
        if spilled:
            return RankFile(b"", len(events), sources, first, tmp)
        with open(tmp, "rb") as fh:
            data = fh.read()
    except BaseException:
        os.unlink(tmp)  # a spill file nobody will read
        raise
    os.unlink(tmp)
    return RankFile(data, len(events), sources, first)


def read_rank_files(calls: Sequence[tuple[Any, ...]], executor: Any, max_workers: int | None,
                    keep_going: bool) -> Generator[Any, None, None]:
    """:func:`read_rank_file` for each call ``(kind, path, rank, how)``, in call order as they come
    (:func:`~my_utils.profiling.formats.parallel.stream_many`).

    Calls with ``how`` write their lines into a spill folder made for this read
    (``$TMPDIR/myutils-ingest-<owner>-...``), removed when the generator ends or is closed; a
    killed command's folder is removed by the next one. When every worker sees that folder
    (always, on this machine), a result is a few numbers and Dask takes larger batches.
    """
    from my_utils.core.lifecycle import remove_scratch
    from my_utils.core.scratch import make_scratch
    from my_utils.profiling.formats.parallel import runner

    folder = str(make_scratch(SPILL_PREFIX)) if any(call[3] is not None for call in calls) else None
    try:
        with runner(executor, max_workers, len(calls), __name__) as run:
            small = folder is not None and run.sees(folder)
            yield from run.stream(read_rank_file, [(*call, folder) for call in calls], keep_going=keep_going,
                                  small_results=small)
    finally:
        if folder is not None:
            remove_scratch(folder)
