"""myutils-tracing: NVTX labelers and profiler capture windows.

Light at import: the public names are resolved on first access, and neither torch nor nvtx
(which imports numpy) is imported until a labeler or backend that needs it is created.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from my_utils.core.lazy import lazy_exports
from my_utils.tracing._version import __version__

_CAPTURE = "my_utils.tracing.capture"
_NVTX = "my_utils.tracing.nvtx_utils"
_PATCHING = "my_utils.tracing.patching"
# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "CaptureBackend": _CAPTURE,
    "CaptureController": _CAPTURE,
    "CudaProfilerBackend": _CAPTURE,
    "HookEvent": _CAPTURE,
    "ProfileManager": _CAPTURE,
    "arm_on_anomaly": _CAPTURE,
    "NoOpLabeler": _NVTX,
    "NvtxLabeler": _NVTX,
    "TorchNvtxLabeler": _NVTX,
    "create_labeler": _NVTX,
    "MethodPatcher": _PATCHING,
    "PatchedCall": _PATCHING,
    "patched": _PATCHING,
}

__all__ = ["__version__", *_EXPORTS]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from my_utils.tracing.capture import CaptureBackend as CaptureBackend
    from my_utils.tracing.capture import CaptureController as CaptureController
    from my_utils.tracing.capture import CudaProfilerBackend as CudaProfilerBackend
    from my_utils.tracing.capture import HookEvent as HookEvent
    from my_utils.tracing.capture import ProfileManager as ProfileManager
    from my_utils.tracing.capture import arm_on_anomaly as arm_on_anomaly
    from my_utils.tracing.nvtx_utils import NoOpLabeler as NoOpLabeler
    from my_utils.tracing.nvtx_utils import NvtxLabeler as NvtxLabeler
    from my_utils.tracing.nvtx_utils import TorchNvtxLabeler as TorchNvtxLabeler
    from my_utils.tracing.nvtx_utils import create_labeler as create_labeler
    from my_utils.tracing.patching import MethodPatcher as MethodPatcher
    from my_utils.tracing.patching import PatchedCall as PatchedCall
    from my_utils.tracing.patching import patched as patched
