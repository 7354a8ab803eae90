"""``StepClock``: how long each step took, and whether a capture window was profiling it.

The controller sees every step begin (a new iteration in any event) and every window start
and stop, so it can tell a step profiled from start to end (``inside``) from one no window
touched (``outside``) and from one a window started or stopped in (``partial``: it holds
the profiler's start-up or its export, not its steady cost). A trace written at a window's
end carries the steps since the previous window, so a report can measure what profiling
cost per step, with its noise, from the trace alone (profiling's ``capture.overhead`` fact).

A step's time is from its first event to the next step's first event, on one monotonic
clock; the step still running when a window closes is not in that window's record.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

StepState = Literal["inside", "outside", "partial"]


@dataclass(frozen=True)
class StepTime:
    """One finished step: its number, its duration in ms, and how a capture window covered it."""

    step: int
    ms: float
    state: StepState

    def to_json(self) -> dict[str, object]:
        return {"step": self.step, "ms": round(self.ms, 6), "state": self.state}


class StepClock:
    """Step durations and their capture state; ``take()`` hands over (and forgets) the finished steps."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter, keep: int = 100_000) -> None:
        self._clock = clock
        self._keep = keep
        self._finished: list[StepTime] = []
        self._step: int | None = None
        self._start = 0.0
        self._capturing_at_start = False
        self._changed = False

    def step_started(self, step: int, capturing: bool) -> None:
        """Step ``step`` began; ``capturing``: whether a window is profiling as it begins."""
        now = self._clock()
        if self._step is not None and step > self._step:  # a step counted backwards is a new run: no duration
            state: StepState = "partial" if self._changed else "inside" if self._capturing_at_start else "outside"
            self._finished.append(StepTime(self._step, (now - self._start) * 1e3, state))
            if len(self._finished) > self._keep:  # a run that never closes a window: keep the recent steps
                del self._finished[: len(self._finished) - self._keep]
        self._step, self._start, self._capturing_at_start, self._changed = step, now, capturing, False

    def capture_changed(self) -> None:
        """A window started or stopped during the current step."""
        self._changed = True

    def take(self) -> tuple[StepTime, ...]:
        """The steps finished since the last ``take()``, oldest first."""
        out, self._finished = tuple(self._finished), []
        return out
