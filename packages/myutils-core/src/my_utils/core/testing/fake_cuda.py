"""A recording stand-in for the CUDA-event seam (``my_utils.core.cuda_events.CudaEvents``).

It behaves like CUDA where it matters to a timer: ``record`` is asynchronous (an event has no
time until the device "completes" it at the next ``synchronize``), and ``elapsed_ms`` on an
event that is not completed raises, as ``torch.cuda.Event.elapsed_time`` does. Every call is
appended to ``calls``, so tests can assert when synchronisation happened.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from time import perf_counter_ns

__all__ = ["FakeCudaEvent", "FakeCudaNotReady", "RecordingCudaEvents"]


class FakeCudaNotReady(RuntimeError):
    """Raised like CUDA's "device not ready" when an event is read before it completed."""


@dataclass(eq=False)
class FakeCudaEvent:
    """One fake timing event; ``serial`` numbers the events created by one seam."""

    serial: int
    recorded_ns: int | None = None  # device time, known once the event completed
    pending_ns: int | None = None  # host time of the last record, not yet completed
    records: int = 0


@dataclass
class RecordingCudaEvents:
    """The fake seam. ``gpu_scale`` stretches host time into "device" time (2.0: kernels twice
    as long as the host region); ``unavailable`` makes it answer "no CUDA" with that reason;
    ``fail_on`` names a method ("record", "synchronize", "elapsed_ms") that raises RuntimeError."""

    gpu_scale: float = 1.0
    unavailable: str | None = None
    fail_on: str | None = None
    clock: Callable[[], int] = perf_counter_ns
    calls: list[tuple[str, int]] = field(default_factory=list)
    events: list[FakeCudaEvent] = field(default_factory=list)

    def _maybe_fail(self, what: str) -> None:
        if self.fail_on == what:
            raise RuntimeError(f"fake CUDA failure in {what}")

    def unavailable_reason(self) -> str | None:
        """The configured reason, or None."""
        self.calls.append(("unavailable_reason", -1))
        return self.unavailable

    def new_event(self) -> FakeCudaEvent:
        """A fresh event."""
        event = FakeCudaEvent(serial=len(self.events))
        self.events.append(event)
        self.calls.append(("new_event", event.serial))
        return event

    def record(self, event: FakeCudaEvent) -> None:
        """Queue the event; it completes at the next synchronize."""
        self._maybe_fail("record")
        event.pending_ns = self.clock()
        event.recorded_ns = None
        event.records += 1
        self.calls.append(("record", event.serial))

    def synchronize(self) -> None:
        """Complete every queued event."""
        self._maybe_fail("synchronize")
        for event in self.events:
            if event.pending_ns is not None:
                event.recorded_ns = round(event.pending_ns * self.gpu_scale)
                event.pending_ns = None
        self.calls.append(("synchronize", -1))

    def elapsed_ms(self, start: FakeCudaEvent, end: FakeCudaEvent) -> float:
        """Device milliseconds between two completed events; raises if either is pending."""
        self._maybe_fail("elapsed_ms")
        self.calls.append(("elapsed_ms", start.serial))
        if start.recorded_ns is None or end.recorded_ns is None:
            raise FakeCudaNotReady("elapsed_ms on an event that has not completed (no synchronize since record)")
        return (end.recorded_ns - start.recorded_ns) / 1e6

    def count(self, name: str) -> int:
        """How many times method ``name`` was called."""
        return sum(1 for call, _ in self.calls if call == name)
