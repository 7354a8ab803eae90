"""Per-rank step and collective times read from other tools' files: the seam between readers and analyses.

A distribution that analyses ranks (``myutils stragglers``) must not import the one that reads
profiler files (myutils-profiling): distributions import core only. So core defines the value
that crosses (:class:`RankTimings`, frozen) and an entry-point group, :data:`ENTRY_POINT_GROUP`,
whose entries are callables ``(paths) -> list[RankTimings] | None`` (:class:`RankTimingsReader`):
a reader returns the timings of the files it can read, one per rank, and None (or an empty list)
when none of the paths is of its kind. Discovery goes through core's entry-point cache, and each
reader's import and call is contained like a plugin's (:func:`read_rank_timings`): one broken
reader is named and the others still run.

The files a reader would take are told by :func:`timing_file_kind`, from their first bytes only,
so that a command can say which distribution to install when no reader is.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from my_utils.core.entry_point_cache import EntryPointLike

__all__ = [
    "ENTRY_POINT_GROUP",
    "KINETO_TRACE",
    "NSYS_EXPORT",
    "READER_DISTRIBUTION",
    "CollectiveArrival",
    "RankTimings",
    "RankTimingsReader",
    "ReaderFailure",
    "StepSpan",
    "TimingsRead",
    "read_rank_timings",
    "timing_file_kind",
]

#: The entry-point group of rank-timings readers.
ENTRY_POINT_GROUP = "my_utils.rank_timings"
#: What :func:`timing_file_kind` calls the files it recognises.
KINETO_TRACE = "Kineto trace"
NSYS_EXPORT = "nsys SQLite export"
#: The distribution that reads both kinds (said when no reader is installed).
READER_DISTRIBUTION = "myutils-profiling"

_SQLITE_MAGIC = b"SQLite format 3\x00"
_HEAD = 1 << 14


@dataclass(frozen=True, slots=True)
class StepSpan:
    """One training step of one rank: its index and its start and end (µs on the rank's clock)."""

    step: int
    start_us: float
    end_us: float

    @property
    def ms(self) -> float:
        """The step's duration in ms."""
        return (self.end_us - self.start_us) / 1e3


@dataclass(frozen=True, slots=True)
class CollectiveArrival:
    """One occurrence of a collective on one rank.

    ``name`` and ``seq`` identify the occurrence across ranks (the same collective on every rank
    has the same pair: the process group and collective with torch's sequence number, else the
    kernel name and its occurrence); ``arrival_us`` is the rank's kernel start (it arrives there
    and waits for the last rank), ``end_us`` the kernel's end; ``step`` the step it ran in, if known.
    """

    name: str
    seq: int
    arrival_us: float
    end_us: float
    step: int | None = None


@dataclass(frozen=True, slots=True)
class RankTimings:
    """The step and collective times one rank's file holds.

    ``source`` is the file, ``kind`` what it is (:data:`KINETO_TRACE`, :data:`NSYS_EXPORT`),
    ``rank_source`` where the rank came from (``distributedInfo``, ``environment PMI_RANK``...),
    ``host`` the machine when the file names it (None: not recorded, never guessed). ``clock``
    says what the µs count from (ranks on different hosts share no clock unless it says so).
    ``setup_end_us``: when the rank's one-off setup before its first collective ended
    (communicator initialisation), when the file shows it. ``notes`` say what could not be read.
    """

    rank: int
    source: str
    kind: str
    rank_source: str = ""
    host: str | None = None
    clock: str = ""
    steps: tuple[StepSpan, ...] = ()
    collectives: tuple[CollectiveArrival, ...] = ()
    setup_end_us: float | None = None
    notes: tuple[str, ...] = ()


class RankTimingsReader(Protocol):
    """An entry of :data:`ENTRY_POINT_GROUP`: the timings of the ``paths`` it can read; None: none is its kind.

    Bad input of its kind raises ``my_utils.core.errors.InputError`` naming the file.
    """

    def __call__(self, paths: Sequence[Path]) -> list[RankTimings] | None: ...


@dataclass(frozen=True, slots=True)
class ReaderFailure:
    """A reader that could not be imported or failed unexpectedly: its entry-point name, distribution and why."""

    name: str
    distribution: str | None
    reason: str


@dataclass(frozen=True, slots=True)
class TimingsRead:
    """What the installed readers made of some paths: the timings, the readers that broke, those switched off.

    ``disabled``: one line per reader that ``MYUTILS_DISABLE_PLUGINS`` switched off (never imported).
    """

    timings: list[RankTimings] = field(default_factory=list)
    readers: int = 0
    failures: list[ReaderFailure] = field(default_factory=list)
    disabled: list[str] = field(default_factory=list)


def timing_file_kind(path: Path) -> str | None:
    """:data:`NSYS_EXPORT` or :data:`KINETO_TRACE` from the file's first bytes; None for anything else.

    Only the head is read (decompressed for gzip): SQLite's magic, or a JSON object whose head
    holds ``"traceEvents"`` (Kineto writes its metadata first and events after them, so the head
    can also end inside metadata: ``"schemaVersion"`` and ``"distributedInfo"`` count too).
    """
    try:
        with open(path, "rb") as fh:
            head = fh.read(_HEAD)
    except OSError:
        return None
    if head.startswith(_SQLITE_MAGIC):
        return NSYS_EXPORT
    if head[:2] == b"\x1f\x8b":
        try:
            head = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, _HEAD)
        except zlib.error:
            return None
    text = head.lstrip()
    if text.startswith(b"{") and any(k in text for k in (b'"traceEvents"', b'"schemaVersion"', b'"distributedInfo"')):
        return KINETO_TRACE
    return None


def read_rank_timings(paths: Sequence[Path], entry_points: Sequence[EntryPointLike] | None = None) -> TimingsRead:
    """Ask every installed reader (:data:`ENTRY_POINT_GROUP`) for the timings of ``paths``.

    Each reader's import and call run contained, as a plugin's do (``my_utils.core.plugin_calls``):
    one that fails becomes a :class:`ReaderFailure`, the others still run. ``InputError`` from a
    reader (any ``MyUtilsError``) is bad input, not a broken reader: it propagates. A reader named in
    ``MYUTILS_DISABLE_PLUGINS`` (its entry-point name, or ``DISTRIBUTION:NAME``) is never imported, as a
    plugin is not. ``entry_points`` replaces the installed ones (tests).
    """
    from my_utils.core.entry_point_cache import cached_entry_points
    from my_utils.core.errors import MyUtilsError
    from my_utils.core.plugin_calls import (
        call_bounded,
        contained,
        describe_failure,
        import_timeout,
        plugin_output,
    )
    from my_utils.core.plugin_policy import DisableList, disabled_names, disabled_reason

    eps = cached_entry_points(ENTRY_POINT_GROUP) if entry_points is None else entry_points
    timings: list[RankTimings] = []
    failures: list[ReaderFailure] = []
    readers = 0
    disabled: list[str] = []
    switched_off = DisableList.parse(disabled_names())
    for ep in eps:
        name = ep.name
        dist = ep.dist.name if ep.dist is not None else None
        entry = switched_off.plugin_entry(name) or switched_off.component_entry(name, name, dist)
        if entry is not None:
            disabled.append(f"reader {name!r} ({dist or 'no distribution'}): {disabled_reason(entry)}")
            continue
        try:
            with plugin_output():
                reader = call_bounded(ep.load, import_timeout(), f"import of {ep.value!r}")
                readers += 1
                with contained():
                    found = reader(list(paths))
        except MyUtilsError:  # bad input (InputError) or misuse: the user's to fix, not a broken reader
            raise
        except Exception as exc:  # a reader must never take the command down
            failures.append(ReaderFailure(name, dist, describe_failure(exc)))
            continue
        if found is None:
            continue
        for item in found:
            if not isinstance(item, RankTimings):
                failures.append(ReaderFailure(name, dist, f"returned {type(item).__name__}, expected RankTimings"))
                break
            timings.append(item)
    return TimingsRead(timings, readers, failures, disabled)
