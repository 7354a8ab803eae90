"""The clocks ``ModuleProfiler`` times modules with: ``perf_counter_ns`` on the CPU, CUDA events on a GPU.

A clock hands out *marks* on the hot path (``mark()``, called twice per module call) and
turns pairs of marks into milliseconds (``elapsed_ms``). A ``deferred`` clock's marks are
readable only after ``settle()``: an event recorded in a forward hook completes only when
the GPU reaches it, so reading it inside the hook would synchronise every module call;
instead the profiler keeps the pairs and reads them all after one ``settle()`` (a
synchronize) in ``stop()`` or ``summary()``. On the CPU a mark is already a time: the
post hook converts at once, and nothing waits for ``stop()``.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Protocol

from my_utils.core.errors import UsageError
from my_utils.tracing.capture.backends.cuda_seam import Availability

_log = logging.getLogger("my_utils.hooks")

__all__ = ["Availability", "CpuClock", "CudaEventClock", "ModuleClock", "choose_clock", "cuda_status"]


class ModuleClock(Protocol):
    """What ``ModuleProfiler`` needs from a clock."""

    #: short name shown in summaries and logs ("cpu" or "cuda")
    name: str
    #: True when marks are readable only after ``settle()`` (the profiler then keeps pairs until then)
    deferred: bool
    # optional ``ns_marks``: True when marks are int ns and ``elapsed_ms(a, b) == (b - a) / 1e6``;
    # the profiler then keeps ``b - a`` and divides when the times are read (cheaper per call)

    def mark(self) -> Any:
        """A point in time (cheap: called twice per module call)."""

    def settle(self) -> None:
        """Make every mark handed out so far readable (a device synchronize on CUDA)."""

    def elapsed_ms(self, start: Any, end: Any) -> float:
        """Milliseconds from ``start`` to ``end`` (both settled marks)."""


class CpuClock:
    """``time.perf_counter_ns``: a mark is an int of nanoseconds, nothing to settle."""

    name = "cpu"
    deferred = False
    ns_marks = True  # elapsed_ms below is (end - start) / 1e6 of int ns marks

    def __init__(self) -> None:
        # an attribute, not a method: the hook calls it without a bound-method lookup
        self.mark = time.perf_counter_ns

    def settle(self) -> None:
        """Nothing to wait for on the CPU."""

    @staticmethod
    def elapsed_ms(start: int, end: int) -> float:
        """``(end - start)`` ns in ms."""
        return (end - start) / 1e6


class CudaEventClock:
    """``torch.cuda.Event(enable_timing=True)`` recorded on the current stream.

    GPU time between two events, as the seed measured it; ``settle()`` synchronises the
    device once so that every pending event can be read.
    """

    name = "cuda"
    deferred = True

    def __init__(self) -> None:
        import torch

        self._event = torch.cuda.Event
        self._synchronize = torch.cuda.synchronize

    def mark(self) -> Any:
        """Record a timing event on the current stream."""
        event = self._event(enable_timing=True)
        event.record()
        return event

    def settle(self) -> None:
        """torch.cuda.synchronize(): every recorded event has completed afterwards."""
        self._synchronize()

    @staticmethod
    def elapsed_ms(start: Any, end: Any) -> float:
        """``start.elapsed_time(end)`` (ms, float)."""
        return float(start.elapsed_time(end))


def cuda_status() -> Availability:
    """Whether CUDA events can time modules here, and why not."""
    try:
        import torch
    except ImportError as exc:
        return Availability(False, f"torch is not importable ({exc})")
    if not torch.cuda.is_available():
        return Availability(False, f"torch {torch.__version__} sees no CUDA device "
                                   f"(CUDA build: {torch.version.cuda or 'none (CPU build)'})")
    return Availability(True)


def _on_cuda(model: Any) -> bool:
    """Whether the model's first parameter (else buffer) lives on a CUDA device."""
    for tensors in (model.parameters(), model.buffers()):
        for tensor in tensors:
            return bool(tensor.device.type == "cuda")
    return False


def choose_clock(model: Any, use_cuda: bool | None) -> ModuleClock:
    """CUDA events when asked (``use_cuda=True``) or when ``use_cuda=None`` and the model is on CUDA.

    ``use_cuda=True`` without a usable GPU logs one warning with the reason and falls back
    to the CPU clock (instrumentation never stops a run for its environment).
    """
    if use_cuda is not None and not isinstance(use_cuda, bool):
        raise UsageError(f"ModuleProfiler(use_cuda={use_cuda!r}): expected True, False or None (decide from "
                         "the model's device)")
    if use_cuda is False:
        return CpuClock()
    status = cuda_status()
    if use_cuda is None:
        return CudaEventClock() if status.ok and _on_cuda(model) else CpuClock()
    if not status.ok:
        _log.warning("ModuleProfiler(use_cuda=True) times on the CPU with perf_counter_ns: %s", status.reason)
        return CpuClock()
    return CudaEventClock()
