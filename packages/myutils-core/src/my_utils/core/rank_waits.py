"""Working or waiting: how long each rank waited in one step of one timed section for the other ranks.

A synchronous collective (DDP's gradient all-reduce at the end of ``backward``) makes every
rank leave it together, so the rank that came in first waits there for the last one: its
section looks long although the cause is another rank's earlier section. From the ranks'
start and time in a section, one step at a time, :func:`step_waits` gives each rank's head
start over the last rank to come in when it counts as waiting:

- ``strict``: the rank left within :data:`ALIGNED` of its head start of the last rank (closer to
  leaving with it than to leaving a head start before it) and within that rank's own time in the
  section (after waiting, both finish the same collective), and the head start is at least
  :data:`CLEAR_HEAD` of that rank's time (clear in one step: a rank stalled on its own for about
  the head start of a rank with a short section ends near it by chance, but not within its time);
- ``loose``: also when it did not leave clearly before that rank (:data:`HALFWAY`; a rank
  descheduled after the collective leaves later), for sections known to end in a collective.

Whether a section ends in a collective is known over steps: ranks that came in apart leave
together, so the spread of its ends is a small share of the spread of its starts
(``spread_ratio``; :func:`ends_in_collective` takes their median). ``my_utils stragglers`` and
the profiling rules both read waits through this module, so they agree.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["ALIGNED", "CLEAR_HEAD", "COLLECTIVE_SPREAD", "HALFWAY", "MIN_HEAD", "MIN_STEPS", "StepWaits",
           "ends_in_collective", "step_waits"]

#: A rank that came in ``head`` ahead of the last rank and left within this share of ``head`` of it
#: waited for it (a 200 ms head start, ends 2 ms apart; on its own it would have left ``head``
#: before), when ``head`` is at least :data:`CLEAR_HEAD` of the last rank's time in the section.
#: Either rank may be descheduled after the collective, so either may leave some ms later.
ALIGNED = 0.5
CLEAR_HEAD = 0.25
#: In a section that ends in a collective, a rank waited unless it left more than this share of its
#: head start before the last rank (on its own it would have left a whole head start before).
HALFWAY = 0.5
#: A section ends in a collective when the median over steps of (spread of its ends) / (spread of
#: its starts) is at most this, over at least :data:`MIN_STEPS` steps that can tell.
COLLECTIVE_SPREAD = 0.25
MIN_STEPS = 3
#: Starts that spread less than this share of the last rank's time in the section tell nothing.
MIN_HEAD = 0.05


@dataclass(frozen=True, slots=True)
class StepWaits:
    """One step of one section: ms each rank waited (``strict``, ``loose``) and the spread ratio."""

    strict: dict[int, float]
    loose: dict[int, float]
    spread_ratio: float | None  # None when the starts spread too little to tell


def step_waits(times: Mapping[int, tuple[float, float]]) -> StepWaits:
    """Waits of one step from ``{rank: (ms in the section, start in unix s)}`` (module docstring)."""
    if len(times) < 2:
        return StepWaits({}, {}, None)
    last_in = max(times, key=lambda r: (times[r][1], r))
    last_ms, latest = times[last_in]
    first = min(start for _ms, start in times.values())
    last_out = latest + last_ms / 1e3
    least = MIN_HEAD * last_ms / 1e3  # s: a smaller head start tells nothing
    ratio = None
    if latest - first > least:
        ends = [start + ms / 1e3 for ms, start in times.values()]
        ratio = (max(ends) - min(ends)) / (latest - first)
    strict: dict[int, float] = {}
    loose: dict[int, float] = {}
    for rank, (ms, start) in times.items():
        head = latest - start  # s this rank came in before the last one
        if head <= least:
            continue
        apart = start + ms / 1e3 - last_out  # s this rank left after the last one came out
        late_by = apart / head  # 0: left with it; -1: as if on its own
        waited = min(head * 1e3, ms)
        if abs(late_by) <= ALIGNED and head * 1e3 >= CLEAR_HEAD * last_ms and abs(apart) * 1e3 <= last_ms:
            strict[rank] = waited
        if late_by >= -HALFWAY:
            loose[rank] = waited
    return StepWaits(strict, loose, ratio)


def ends_in_collective(spread_ratios: Iterable[float | None]) -> bool:
    """Whether a section's steps say it ends in a collective (the ``spread_ratio`` of each step)."""
    known = [r for r in spread_ratios if r is not None]
    return len(known) >= MIN_STEPS and statistics.median_low(known) <= COLLECTIVE_SPREAD
