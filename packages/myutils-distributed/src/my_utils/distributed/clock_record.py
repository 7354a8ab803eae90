"""Where a rank's clock offset is written down: one ``CLOCK_SYNC`` row in its profile CSV.

The profile CSV keeps its eight columns; the offset travels as a mark row::

    timestamp_unix, readable_time, machine_id, step, clock_sync, CLOCK_SYNC, 0.0,
    offset_s=0.002345;uncertainty_s=0.000041;reference_rank=0;applied=1;best_rtt_s=0.000090

``offset_s`` is the reference rank's clock minus this rank's clock (seconds), ± ``uncertainty_s``
(a bound: half the width of the interval every kept round trip allows). ``applied=1`` means
``GlobalLogger.set_time_offset(offset_s)`` was called before the row was written, so this row
and every later one are already on the reference clock; ``applied=0`` means a reader must add
``offset_s`` to the timestamps from this row on. Readers: ``myutils stragglers`` and the
merged traces of myutils-profiling (per-rank offsets in ``otherData``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from my_utils.core.errors import InputError
from my_utils.core.profile_csv import ProfileRow, format_metadata
from my_utils.distributed.clock_estimate import ClockEstimate

__all__ = [
    "CLOCK_SYNC_EVENT_NAME",
    "CLOCK_SYNC_EVENT_TYPE",
    "ClockSyncRecord",
    "clock_sync_metadata",
    "parse_clock_sync_row",
    "record_clock_sync",
]

CLOCK_SYNC_EVENT_TYPE = "CLOCK_SYNC"
CLOCK_SYNC_EVENT_NAME = "clock_sync"


@dataclass(frozen=True, slots=True)
class ClockSyncRecord:
    """A ``CLOCK_SYNC`` row read back: the offset of one rank against ``reference_rank``."""

    offset_s: float
    uncertainty_s: float
    reference_rank: int
    applied: bool
    best_rtt_s: float | None = None


def clock_sync_metadata(estimate: ClockEstimate, reference_rank: int, applied: bool) -> str:
    """The metadata text of a ``CLOCK_SYNC`` row (``key=value;...``, floats in full precision)."""
    return format_metadata({
        "offset_s": repr(float(estimate.offset_s)),
        "uncertainty_s": repr(float(estimate.uncertainty_s)),
        "reference_rank": int(reference_rank),
        "applied": 1 if applied else 0,
        "best_rtt_s": repr(float(estimate.best_rtt_s)),
    })


def _number(meta: dict[str, str], key: str, row: ProfileRow, where: str) -> float:
    text = meta.get(key)
    try:
        value = float(text) if text is not None else math.nan
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise InputError(where, f"line {row.line}",
                         f"a CLOCK_SYNC row needs {key}=<finite seconds> in its metadata, got {text!r}")
    return value


def parse_clock_sync_row(row: ProfileRow, where: str = "profile CSV") -> ClockSyncRecord | None:
    """The record of a ``CLOCK_SYNC`` row, None for any other row; a malformed one is an ``InputError``."""
    if row.event_type != CLOCK_SYNC_EVENT_TYPE:
        return None
    meta = row.metadata_dict()
    offset = _number(meta, "offset_s", row, where)
    uncertainty = _number(meta, "uncertainty_s", row, where)
    reference = meta.get("reference_rank", "")
    applied = meta.get("applied", "1")
    if not reference.lstrip("-").isdigit() or applied not in ("0", "1"):
        raise InputError(where, f"line {row.line}", "a CLOCK_SYNC row needs reference_rank=<int> and applied=0|1, "
                         f"got reference_rank={reference!r} applied={applied!r}")
    rtt = meta.get("best_rtt_s")
    try:
        best_rtt = float(rtt) if rtt else None
    except ValueError:
        best_rtt = None
    return ClockSyncRecord(offset, uncertainty, int(reference), applied == "1", best_rtt)


def record_clock_sync(
    estimate: ClockEstimate, reference_rank: int, *, logger: Any = None, step: int = 0, apply: bool = True
) -> None:
    """Apply ``estimate`` to the GlobalLogger (when ``apply``) and write its ``CLOCK_SYNC`` row.

    The offset is applied first, so the row itself carries a corrected timestamp. ``logger``
    defaults to the process's ``GlobalLogger()`` (set it up first, or the row is dropped with a
    warning, as for any row).
    """
    if logger is None:
        from my_utils.core.logger import GlobalLogger

        logger = GlobalLogger()
    if apply:
        logger.set_time_offset(estimate.offset_s)
    logger.log_profile_event(step, CLOCK_SYNC_EVENT_NAME, CLOCK_SYNC_EVENT_TYPE, 0.0,
                             clock_sync_metadata(estimate, reference_rank, apply))
