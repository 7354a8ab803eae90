"""Rank files read one at a time by workers, for the collector's streaming read (``ingest``).

A run of 1,000 ranks has 1,000 profile CSVs and 1,000 torch traces. Read by their providers,
a provider's files are parsed together and its events held until the end; here each file is
one call of :func:`~my_utils.profiling.providers.parallel.stream_many`, and the worker that
reads it also stamps its events (source, run id, rank) and, for ``ingest``, turns them into
the events file's lines, so this process only writes bytes and lets them go.

Only the providers of rank files take this path, each through the module-level reader its
own ``_read_files`` loops over (so the events are the same, file by file):
:class:`~my_utils.profiling.providers.mytimer.MyTimerMetricsProvider` (``read_profile_csv_events``)
and :class:`~my_utils.profiling.providers.kineto.TorchProfilerMetricsProvider` (``parse_trace_file``;
its check that no two files claim one rank is made here from each file's first event).
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from my_utils.core.errors import InputError, MyUtilsError
from my_utils.core.events import EventLogWriter, MetricEvent
from my_utils.profiling.providers._files import FileProviderBase, check_distinct_ranks, damaged_errors

__all__ = ["RankFile", "Stamp", "kind_of", "mark_read", "read_rank_file", "stamp", "unread_files"]

#: provider class (module, name) -> (reader "module:function", what a file is, files that must not share a rank)
_KINDS: dict[tuple[str, str], tuple[str, str, str | None]] = {
    ("my_utils.profiling.providers.mytimer", "MyTimerMetricsProvider"):
        ("my_utils.profiling.providers.mytimer:read_profile_csv_events", "profile CSV", None),
    ("my_utils.profiling.providers.kineto", "TorchProfilerMetricsProvider"):
        ("my_utils.profiling.providers.kineto:parse_trace_file", "Kineto trace (.json/.json.gz)", "trace"),
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
    """What a worker sends back for one file read ``as_lines``: the events file's lines, counted, the rank."""

    lines: bytes
    count: int
    sources: tuple[str, ...]
    rank: int | None  # the first event's rank (before stamping), else the provider's rank option


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


def read_rank_file(kind: str, path: str, rank: int | None, how: Stamp | None) -> RankFile | list[MetricEvent]:
    """Task: one rank file read; with ``how``, its events stamped and written as the events file's lines.

    Without ``how`` the events come back as they were read (the caller stamps them and checks ranks).
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
    fd, tmp = tempfile.mkstemp(prefix="myutils-lines-", suffix=".jsonl")
    try:
        os.close(fd)
        # the writer every events file goes through: the lines are those write_events would write
        EventLogWriter(tmp).append(events)
        with open(tmp, "rb") as fh:
            data = fh.read()
    finally:
        os.unlink(tmp)
    return RankFile(data, len(events), sources, first)
