"""The CUDA-event seam of MyTimer: the only place the timer touches ``torch.cuda``.

MyTimer records one event at ``start`` and one at ``stop`` and reads elapsed times only in
``step()``, after a single ``synchronize()``. Tests on the CPU pass a recording fake with the
same four methods (``my_utils.core.testing.fake_cuda.RecordingCudaEvents``); tests marked
``cuda`` use ``TorchCudaEvents`` on a real GPU.
"""

from __future__ import annotations

import sys
from typing import Any, Protocol, runtime_checkable

__all__ = ["CudaEvents", "TorchCudaEvents", "default_cuda_events", "torch_cuda_or_reason"]


def torch_cuda_or_reason() -> tuple[Any, str | None]:
    """``(torch, None)`` when CUDA is usable here, else ``(None, why)``; never raises.

    The one probe behind every CUDA seam (timer events, memory history): importing torch,
    then ``torch.cuda.is_available()``, which raises on some broken driver set-ups.
    """
    try:
        import torch
    except ImportError as exc:
        return None, f"torch cannot be imported ({exc})"
    try:
        if not torch.cuda.is_available():
            return None, "torch.cuda.is_available() is False (no CUDA device or a CPU-only torch build)"
    except Exception as exc:  # a broken driver raises from is_available on some builds
        return None, f"torch.cuda.is_available() failed ({type(exc).__name__}: {exc})"
    return torch, None


@runtime_checkable
class CudaEvents(Protocol):
    """What MyTimer needs from CUDA: timing events, one device synchronisation, elapsed times."""

    def unavailable_reason(self) -> str | None:
        """None when CUDA events can be used, else why not (one line, for a log message)."""
        ...

    def new_event(self) -> Any:
        """A new timing-enabled event (the timer reuses events across steps)."""
        ...

    def record(self, event: Any) -> None:
        """Record ``event`` on the current stream; must not synchronise."""
        ...

    def synchronize(self) -> None:
        """Wait until every recorded event has completed (called once per ``step()``)."""
        ...

    def elapsed_ms(self, start: Any, end: Any) -> float:
        """Milliseconds between two completed events."""
        ...


class TorchCudaEvents:
    """``torch.cuda.Event(enable_timing=True)`` pairs; torch is imported on first use only."""

    def __init__(self, *, import_torch: bool = True) -> None:
        # import_torch=False: use CUDA only if the program already imported torch (global_timer)
        self._import_torch = import_torch
        self._torch: Any = None

    def unavailable_reason(self) -> str | None:
        """Why CUDA events cannot be used here, or None (never raises)."""
        if not self._import_torch and "torch" not in sys.modules:
            return "torch is not imported by this program"
        torch, reason = torch_cuda_or_reason()
        if torch is not None:
            self._torch = torch
        return reason

    def new_event(self) -> Any:
        """A timing-enabled ``torch.cuda.Event``."""
        return self._torch.cuda.Event(enable_timing=True)

    def record(self, event: Any) -> None:
        """``event.record()`` on the current stream (asynchronous)."""
        event.record()

    def synchronize(self) -> None:
        """``torch.cuda.synchronize()``: all streams of the current device."""
        self._torch.cuda.synchronize()

    def elapsed_ms(self, start: Any, end: Any) -> float:
        """``start.elapsed_time(end)``."""
        return float(start.elapsed_time(end))


def default_cuda_events(*, import_torch: bool = True) -> CudaEvents:
    """The seam used when a MyTimer is not given one."""
    return TorchCudaEvents(import_torch=import_torch)
