"""``CudaProfilerBackend``: cudaProfilerStart/Stop, for ``nsys --capture-range=cudaProfilerApi``."""

from __future__ import annotations

import logging

from my_utils.tracing.capture.backends.base import CaptureBackend
from my_utils.tracing.capture.backends.cuda_seam import CudaProfilerSeam, default_cuda_seam

_log = logging.getLogger("my_utils.tracing.capture")


class CudaProfilerBackend(CaptureBackend):
    """Opens the Nsight Systems capture range with cudaProfilerStart and closes it with cudaProfilerStop.

    ``synchronize=True`` waits for queued GPU work before each call, so the range holds
    exactly the window's kernels. Without a usable CUDA device the backend reports once,
    with the reason, and does nothing (the training loop carries on).
    """

    def __init__(self, synchronize: bool = True, seam: CudaProfilerSeam | None = None) -> None:
        self.synchronize = synchronize
        self._seam = seam
        self._usable: bool | None = None
        self.reason = ""
        self.running = False

    def _ready(self) -> bool:
        if self._usable is None:
            if self._seam is None:
                self._seam = default_cuda_seam()
            status = self._seam.available()
            self._usable, self.reason = status.ok, status.reason
            if not status.ok:
                _log.warning("CudaProfilerBackend does nothing: %s", status.reason)
        return self._usable

    @property
    def available(self) -> bool:
        """Whether cudaProfilerStart/Stop will really be called (checked once)."""
        return self._ready()

    def start(self) -> None:
        """Synchronize (optionally), then cudaProfilerStart."""
        if not self._ready() or self._seam is None:
            return
        if self.synchronize:
            self._seam.synchronize()
        self._seam.profiler_start()
        self.running = True

    def stop(self) -> None:
        """Synchronize (optionally), then cudaProfilerStop."""
        if not self.running or self._seam is None:
            return
        self.running = False
        if self.synchronize:
            self._seam.synchronize()
        self._seam.profiler_stop()
