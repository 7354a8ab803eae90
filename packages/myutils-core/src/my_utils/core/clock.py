"""Unix time for profile rows: ``perf_counter_ns`` plus one offset per process, so time never runs back.

``MyTimer`` measures regions with ``perf_counter_ns`` (monotonic) and writes them as unix
time. It used to read the wall clock and ``perf_counter_ns`` one after the other at every
``step()``: a preemption between the two reads (a loaded machine) moved that step's whole
time base by the length of the preemption, so a step could start before the previous one
ended and a trace drew adjacent steps overlapping (a second lane). Now the offset between the
two clocks is measured once per process, as the tightest of a few paired reads, and every
timestamp is ``perf_counter_ns() + offset``: ordered exactly like ``perf_counter_ns``, and step
N's end is never after step N+1's start.

``perf_counter_ns`` is ``CLOCK_MONOTONIC`` on Linux, which NTP slews like the wall clock, so the
two do not drift apart; a wall clock *stepped* during the run (``date -s``) is not followed
until ``reanchor()`` is called. Cross-rank alignment is the job of the clock offsets
(``GlobalLogger.set_time_offset``), which are added on top.
"""

from __future__ import annotations

import threading
import time
from time import perf_counter_ns

__all__ = ["reanchor", "unix_now_ns", "unix_offset_ns"]

_READS = 5  # paired reads per measurement; the tightest pair is kept
_state: dict[str, int | None] = {"offset": None}
_lock = threading.Lock()


def _pair() -> tuple[int, int]:
    """(gap between the two perf reads, wall - perf at their midpoint)."""
    before = perf_counter_ns()
    wall = time.time_ns()
    after = perf_counter_ns()
    return after - before, wall - (before + after) // 2


def _measure() -> int:
    # a pair preempted between its reads has a wide gap: the tightest pair is the truest
    return min(_pair() for _ in range(_READS))[1]


def unix_offset_ns() -> int:
    """Nanoseconds to add to ``perf_counter_ns()`` to get unix time (measured once per process)."""
    offset = _state["offset"]
    if offset is None:
        with _lock:
            offset = _state["offset"]
            if offset is None:
                offset = _state["offset"] = _measure()
    return offset


def unix_now_ns() -> int:
    """Now, in unix nanoseconds, on the same time base as every MyTimer region."""
    return perf_counter_ns() + unix_offset_ns()


def reanchor() -> int:
    """Measure the offset again (after the wall clock was set); return the new offset.

    Timestamps written afterwards may jump (backwards too) by the change of the wall clock.
    """
    with _lock:
        offset = _state["offset"] = _measure()
    return offset
