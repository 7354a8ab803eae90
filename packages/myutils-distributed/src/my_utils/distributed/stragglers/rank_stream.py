"""One rank's profile CSV as a stream of steps: per section, its time and its first start.

Streaming (``iter_profile_rows``): only the current step is held. A section's time in a step
is the sum of its instances: an END's ``duration_ms`` (MyTimer writes it), else END minus the
latest open START of that name (regions nest, so by name is enough; no metadata is parsed,
which halves the cost per row). Its start is the earliest START in the step. ``CLOCK_SYNC`` rows set the
clock offset of the rows after them (added when the row says ``applied=0``; with
``applied=1`` the writer already added it).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from my_utils.core.errors import InputError
from my_utils.core.profile_csv import iter_profile_rows
from my_utils.distributed.clock_record import ClockSyncRecord, parse_clock_sync_row

__all__ = ["RankStep", "iter_rank_steps"]


@dataclass(slots=True)
class RankStep:
    """One step of one rank: ``sections[name] = [total ms, first start (unix s, corrected)]``."""

    step: int
    sections: dict[str, list[float]] = field(default_factory=dict)


def iter_rank_steps(path: Path, clocks: list[ClockSyncRecord]) -> Iterator[RankStep]:
    """The steps of ``path`` in file order; ``clocks`` receives every ``CLOCK_SYNC`` record met.

    Steps must not go back (one training run per file): a step smaller than the one before
    is an ``InputError`` naming the line.
    """
    where = str(path)
    shift = 0.0  # seconds added to timestamps (from CLOCK_SYNC rows with applied=0)
    current: RankStep | None = None
    done_steps = -(2**63)
    open_starts: dict[str, list[float]] = {}
    for row in iter_profile_rows(path):
        kind = row.event_type
        if kind not in ("START", "END"):
            record = parse_clock_sync_row(row, where)
            if record is not None:
                clocks.append(record)
                shift = 0.0 if record.applied else record.offset_s
            continue
        if current is None or row.step != current.step:
            if row.step < done_steps or (current is not None and row.step < current.step):
                raise InputError(where, f"line {row.line}",
                                 f"steps in increasing order (step {row.step} after step "
                                 f"{current.step if current else done_steps}); stragglers reads one run per file")
            if current is not None:
                done_steps = current.step
                yield current
            current = RankStep(row.step)
            open_starts.clear()
        ts = row.timestamp_unix + shift
        name = row.event_name
        if kind == "START":
            open_starts.setdefault(name, []).append(ts)
            continue
        starts = open_starts.get(name)
        start = starts.pop() if starts else None
        duration = row.duration_ms
        if duration <= 0 and start is not None:
            duration = (ts - start) * 1e3
        if start is None:
            start = ts - duration / 1e3
        entry = current.sections.get(name)
        if entry is None:
            current.sections[name] = [duration, start]
        else:
            entry[0] += duration
            entry[1] = min(entry[1], start)
    if current is not None:
        yield current
