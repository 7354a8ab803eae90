"""Per-rank clock offsets, as measured by ``align_clocks`` and recorded in each rank's profile.

The distributed part measures each rank's offset to a reference rank (NTP-style round
trips; uncertainty = half the best round trip) and writes it as a ``CLOCK_SYNC`` row of
``profile_rank_<r>.csv`` (myutils-distributed README). As a metric event it is
``name="clock_sync"``, ``kind="info"``, ``value=offset_s`` with ``attrs`` ``offset_s``,
``uncertainty_s``, ``reference_rank``, ``applied`` (0/1) and optionally ``best_rtt_s``/``host``.

Alignment only ever adds these *measured* offsets. It never moves a rank to make its
steps start together with the others: a rank that is consistently late (a straggler)
stays late by exactly as much as it was.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from my_utils.core.errors import InputError, UsageError
from my_utils.core.events import MetricEvent

CLOCK_SYNC_NAME = "clock_sync"
_MACHINE_RANK = re.compile(r"_rank(\d+)$")


@dataclass(frozen=True)
class ClockSync:
    """One rank's offset to the reference clock: add ``offset_s`` to its local timestamps."""

    rank: int
    offset_s: float
    uncertainty_s: float
    reference_rank: int
    applied: bool  # the rank's logger already added it to the MyTimer timestamps

    def to_dict(self) -> dict[str, object]:
        """JSON form, as written into ``otherData.clock_offsets``."""
        return {"offset_s": self.offset_s, "uncertainty_s": self.uncertainty_s,
                "reference_rank": self.reference_rank, "applied": self.applied}


def clock_sync_from_attrs(rank: int, attrs: Mapping[str, object], where: str) -> ClockSync:
    """Validate a ``clock_sync`` event's attrs; InputError names ``where`` and the field."""
    def number(key: str) -> float:
        value = attrs.get(key)
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                pass
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            raise InputError(where, f"clock_sync of rank {rank}", f"a finite number in attrs.{key}, got {value!r}")
        return float(value)

    ref = number("reference_rank")
    applied = attrs.get("applied", 1)
    return ClockSync(rank, number("offset_s"), abs(number("uncertainty_s")), int(ref),
                     str(applied).strip().lower() in ("1", "true"))


def latest_per_rank(syncs: Iterable[ClockSync]) -> dict[int, ClockSync]:
    """The last measurement of each rank wins (a re-sync replaces the older estimate)."""
    out: dict[int, ClockSync] = {}
    for s in syncs:
        out[s.rank] = s
    return out


def rebase(syncs: Mapping[int, ClockSync], reference_rank: int) -> dict[int, ClockSync]:
    """Offsets to ``reference_rank``'s clock, from offsets measured against another reference.

    offset(r → R) = offset(r → M) − offset(R → M); the uncertainties add. When ``reference_rank``
    is the measured reference (or has no row of its own) nothing changes.
    """
    if not syncs:
        return {}
    refs = {s.reference_rank for s in syncs.values()}
    if len(refs) > 1:
        raise UsageError(f"clock offsets were measured against several reference ranks {sorted(refs)}; "
                         "re-run align_clocks with one reference_rank for every rank")
    (measured_ref,) = refs
    if reference_rank == measured_ref:
        return dict(syncs)
    anchor = syncs.get(reference_rank)
    if anchor is None:
        raise UsageError(f"--reference-rank {reference_rank}: that rank has no clock_sync record (ranks with one: "
                         f"{sorted(syncs)}); pick one of them or the measured reference {measured_ref}")
    return {r: ClockSync(r, s.offset_s - anchor.offset_s,
                         s.uncertainty_s + (anchor.uncertainty_s if r != reference_rank else 0.0),
                         reference_rank, s.applied) for r, s in syncs.items()}


def uncertainty_warnings(offsets: Mapping[int, ClockSync], step_starts: Mapping[int, Mapping[int, float]],
                         reference_rank: int) -> list[str]:
    """Warn for each rank whose clock uncertainty exceeds the step-start gaps it would be compared by.

    ``step_starts[rank][step]`` is the aligned start of that step in seconds. The gap of a
    rank is the median |start(rank) − start(reference)| over the steps both have; below the
    uncertainty, lateness cannot be told apart from clock error.
    """
    ref = step_starts.get(reference_rank, {})
    out: list[str] = []
    for rank, sync in sorted(offsets.items()):
        if rank == reference_rank or rank not in step_starts:
            continue
        gaps = [abs(t - ref[s]) for s, t in step_starts[rank].items() if s in ref]
        if not gaps:
            continue
        gap = statistics.median(gaps)
        if sync.uncertainty_s > gap:
            out.append(f"rank {rank}: clock uncertainty ±{sync.uncertainty_s * 1e3:.3f} ms exceeds the median "
                       f"{gap * 1e3:.3f} ms gap between its step starts and rank {reference_rank}'s; differences "
                       "that small are clock error, not lateness (re-sync over a quieter network)")
    return out


def clock_sync_events(path: str | Path) -> list[MetricEvent]:
    """The ``CLOCK_SYNC`` rows of a profile CSV as ``clock_sync`` metric events, validated.

    The MyTimer provider turns the rows into events (one reader of profile CSVs); this checks
    that each carries a rank and the fields alignment needs.
    """
    from my_utils.profiling.formats.mytimer import read_profile_csv_events

    out: list[MetricEvent] = []
    for event in read_profile_csv_events(Path(path)):
        if event.name != CLOCK_SYNC_NAME:
            continue
        where = f"{path}:{event.attrs.get('line')}"
        if event.rank is None:
            raise InputError(where, "CLOCK_SYNC row", "a machine_id ending in _rank<r> (or a rank in the file name)")
        clock_sync_from_attrs(event.rank, event.attrs, where)
        out.append(event)
    return out
