"""One rank's profile CSV as a stream of steps: per section, its time and its first start.

Streaming (``iter_profile_rows``): only the current step is held. A section's time in a step
is the sum of its instances: an END's ``duration_ms`` (MyTimer writes it), else END minus the
latest open START of that name (regions nest, so by name is enough; no metadata is parsed,
which halves the cost per row). Its start is the earliest START in the step. ``CLOCK_SYNC`` rows set the
clock offset of the rows after them (added when the row says ``applied=0``; with
``applied=1`` the writer already added it).

Untrusted input: only regular files are opened (a FIFO named like a rank file would block
forever); a duration that is not finite (``nan``, ``inf``, ``1e999``, a 400-digit number)
is refused naming its line. A file holding bytes that are not UTF-8 (older versions wrote a
region name made by ``os.fsdecode`` as such) is read: from the first undecodable line on,
through a copy in which each such byte is shown as ``\\xNN``, as the writer now does.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from my_utils.core.errors import InputError
from my_utils.core.profile_csv import ProfileRow, iter_profile_rows
from my_utils.core.safe_io import check_regular, open_regular
from my_utils.core.step_log import steplog_path
from my_utils.distributed.clock_record import ClockSyncRecord, parse_clock_sync_row

_NOT_UTF8 = "expected UTF-8 text"

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
    check_regular(path)
    check_regular(steplog_path(path))  # the reader renders a pending step log into the CSV first
    where = str(path)
    shift = 0.0  # seconds added to timestamps (from CLOCK_SYNC rows with applied=0)
    current: RankStep | None = None
    done_steps = -(2**63)
    open_starts: dict[str, list[float]] = {}
    for row in _rows(path):
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
        if not math.isfinite(duration):  # also -inf: "not written" is 0 or empty, never -inf
            raise InputError(where, f"line {row.line}", f"a finite duration in 'duration_ms' for "
                             f"{row.event_name!r}, got {duration!r}")
        if duration <= 0 and start is not None:
            duration = (ts - start) * 1e3
        if not math.isfinite(duration):
            raise InputError(where, f"line {row.line}", f"a finite duration (END minus START) for "
                             f"{row.event_name!r}, got {duration!r}")
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


def _rows(path: Path) -> Iterator[ProfileRow]:
    """``iter_profile_rows(path)``; from a line that is not UTF-8 on, the rows of an escaped copy."""
    last = 0
    try:
        for row in iter_profile_rows(path):
            last = row.line
            yield row
    except InputError as exc:
        if exc.expected != _NOT_UTF8:
            raise
    else:
        return
    with tempfile.TemporaryDirectory(prefix="myutils-stragglers-") as scratch:
        copy = Path(scratch) / path.name
        with open_regular(path, "rb") as src, open(copy, "wb") as dst:
            for raw in src:  # line by line: a bounded copy, the same line numbers
                dst.write(raw.decode("utf-8", "backslashreplace").encode("utf-8"))
        try:
            for row in iter_profile_rows(copy):
                if row.line > last:
                    yield row
        except InputError as exc:  # name the user's file, not the copy
            raise InputError(path, exc.place, exc.expected) from None
