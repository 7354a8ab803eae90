"""The seam around ``torch.cuda.memory``: the only place this distribution calls its history and snapshot APIs.

On a CPU build these calls fail four different ways (RuntimeError, AssertionError,
AttributeError and pynvml's NVMLError, see the torch-on-cpu recipe) or return silent
zeros, so everything goes through ``unavailable_reason()`` first. Tests on the CPU drive
the snapshotter and the OOM recorder through :class:`RecordingCudaMemory`; tests marked
``cuda`` use :class:`TorchCudaMemory` on a real GPU.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from my_utils.core.cuda_events import torch_cuda_or_reason

__all__ = ["CudaMemory", "RecordingCudaMemory", "TorchCudaMemory", "default_cuda_memory"]


@runtime_checkable
class CudaMemory(Protocol):
    """What the snapshotter and the OOM recorder need from the CUDA caching allocator."""

    def unavailable_reason(self) -> str | None:
        """None when the allocator's history can be recorded here, else why not (one line)."""
        ...

    def start_history(self, max_entries: int) -> None:
        """Start recording allocator history (stacks included), keeping ``max_entries`` events."""
        ...

    def stop_history(self) -> None:
        """Stop recording and drop the recorded history."""
        ...

    def snapshot(self) -> dict[str, Any]:
        """The allocator's state and recorded history as a plain dict (``_memory_viz``'s input)."""
        ...

    def memory_stats(self) -> dict[str, Any]:
        """The allocator's counters (``torch.cuda.memory_stats()``)."""
        ...

    def mem_get_info(self) -> tuple[int, int]:
        """(free, total) bytes of the current device."""
        ...


class TorchCudaMemory:
    """The real allocator through ``torch.cuda.memory``; torch is imported on first use only."""

    def __init__(self) -> None:
        self._torch: Any = None

    def unavailable_reason(self) -> str | None:
        """Why CUDA memory history cannot be recorded here, or None (never raises)."""
        torch, reason = torch_cuda_or_reason()
        if torch is not None:
            self._torch = torch
        return reason

    def _cuda(self) -> Any:
        if self._torch is None and self.unavailable_reason() is not None:
            raise RuntimeError("CUDA is not available; ask unavailable_reason() before using TorchCudaMemory")
        return self._torch.cuda

    def start_history(self, max_entries: int) -> None:
        """``torch.cuda.memory._record_memory_history(enabled="all", max_entries=...)``."""
        self._cuda().memory._record_memory_history(enabled="all", max_entries=max_entries)

    def stop_history(self) -> None:
        """``_record_memory_history(enabled=None)``: stops and frees the history."""
        self._cuda().memory._record_memory_history(enabled=None)

    def snapshot(self) -> dict[str, Any]:
        """``torch.cuda.memory._snapshot()``."""
        return dict(self._cuda().memory._snapshot())

    def memory_stats(self) -> dict[str, Any]:
        """``torch.cuda.memory_stats()``."""
        return dict(self._cuda().memory_stats())

    def mem_get_info(self) -> tuple[int, int]:
        """``torch.cuda.mem_get_info()``."""
        free, total = self._cuda().mem_get_info()
        return int(free), int(total)


@dataclass
class RecordingCudaMemory:
    """A recording stand-in: every call is appended to ``calls``; ``snapshot()`` returns ``state``.

    ``unavailable`` makes it answer "no CUDA" with that reason; ``fail_on`` names a method
    that raises RuntimeError (a driver error in the middle of a run).
    """

    state: dict[str, Any] = field(default_factory=lambda: {"segments": [], "device_traces": [[]]})
    stats: dict[str, Any] = field(default_factory=dict)
    free_total: tuple[int, int] = (0, 0)
    unavailable: str | None = None
    fail_on: str | None = None
    calls: list[tuple[str, Any]] = field(default_factory=list)
    recording: bool = False

    def _maybe_fail(self, what: str) -> None:
        if self.fail_on == what:
            raise RuntimeError(f"fake CUDA failure in {what}")

    def unavailable_reason(self) -> str | None:
        """The configured reason, or None."""
        self.calls.append(("unavailable_reason", None))
        return self.unavailable

    def start_history(self, max_entries: int) -> None:
        """Record the call; history is on."""
        self._maybe_fail("start_history")
        self.calls.append(("start_history", max_entries))
        self.recording = True

    def stop_history(self) -> None:
        """Record the call; history is off."""
        self._maybe_fail("stop_history")
        self.calls.append(("stop_history", None))
        self.recording = False

    def snapshot(self) -> dict[str, Any]:
        """A deep copy of ``state`` (a later change must not alter a saved snapshot)."""
        self._maybe_fail("snapshot")
        self.calls.append(("snapshot", None))
        return copy.deepcopy(self.state)

    def memory_stats(self) -> dict[str, Any]:
        """A copy of ``stats``."""
        self._maybe_fail("memory_stats")
        self.calls.append(("memory_stats", None))
        return dict(self.stats)

    def mem_get_info(self) -> tuple[int, int]:
        """``free_total``."""
        self._maybe_fail("mem_get_info")
        self.calls.append(("mem_get_info", None))
        return self.free_total


def default_cuda_memory() -> CudaMemory:
    """The seam used when none is given: the real allocator."""
    return TorchCudaMemory()
