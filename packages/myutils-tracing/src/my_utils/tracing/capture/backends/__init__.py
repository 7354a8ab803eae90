"""Capture backends shipped with myutils-tracing (each also registered as a plugin)."""

from my_utils.tracing.capture.backends.base import CaptureBackend
from my_utils.tracing.capture.backends.cuda_profiler import CudaProfilerBackend
from my_utils.tracing.capture.backends.cuda_seam import (
    Availability,
    CudaProfilerSeam,
    CudartSeam,
    TorchCudaSeam,
)
from my_utils.tracing.capture.backends.recording import RecordedWindow, RecordingBackend
from my_utils.tracing.capture.backends.torch_profiler import TorchProfilerBackend

__all__ = [
    "Availability",
    "CaptureBackend",
    "CudaProfilerBackend",
    "CudaProfilerSeam",
    "CudartSeam",
    "RecordedWindow",
    "RecordingBackend",
    "TorchCudaSeam",
    "TorchProfilerBackend",
]
