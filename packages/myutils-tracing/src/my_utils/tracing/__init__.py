"""myutils-tracing: NVTX labelers and profiler capture windows.

Light at import: neither torch nor nvtx (which imports numpy) is imported until a labeler or
backend that needs it is created.
"""

from my_utils.tracing._version import __version__
from my_utils.tracing.capture import (
    CaptureBackend,
    CaptureController,
    CudaProfilerBackend,
    HookEvent,
    ProfileManager,
    arm_on_anomaly,
)
from my_utils.tracing.nvtx_utils import NoOpLabeler, NvtxLabeler, TorchNvtxLabeler, create_labeler

__all__ = [
    "CaptureBackend",
    "CaptureController",
    "CudaProfilerBackend",
    "HookEvent",
    "NoOpLabeler",
    "NvtxLabeler",
    "ProfileManager",
    "TorchNvtxLabeler",
    "__version__",
    "arm_on_anomaly",
    "create_labeler",
]
