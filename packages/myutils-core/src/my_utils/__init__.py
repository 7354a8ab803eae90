"""my_utils: profiling, tracing and debugging tools for PyTorch training and serving.

This file is the namespace root shared by every ``myutils-*`` distribution; only
``myutils-core`` ships it. It resolves the seed's top-level names (``create_labeler``,
``ProfileManager``, ...) lazily from their homes, so ``import my_utils`` stays light.
"""

from pkgutil import extend_path

# Portions of the namespace installed on other sys.path entries (editable or mixed
# installs) join this package through extend_path.
__path__ = extend_path(__path__, __name__)

import sys as _sys
from typing import TYPE_CHECKING, Any


def __getattr__(name: str) -> Any:
    """Resolve a seed top-level name from its home module (PEP 562); see ``core._legacy``."""
    from my_utils.core._legacy import module_getattr

    # the caller's frame tells `from my_utils import X` (ImportError with the pip hint) from
    # attribute access and hasattr (AttributeError, so hasattr answers False)
    value = module_getattr(name, _sys._getframe(1))
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """List the names defined here plus the legacy names whose distribution is installed."""
    from my_utils.core._legacy import available_legacy_names

    return sorted(set(globals()) | set(available_legacy_names()))


if TYPE_CHECKING:  # what type checkers and IDEs see; runtime resolution is lazy
    from my_utils.core.logger import GlobalLogger as GlobalLogger
    from my_utils.core.logger import get_global_logger as get_global_logger
    from my_utils.core.timer import MyTimer as MyTimer
    from my_utils.core.timer import global_timer as global_timer
    from my_utils.distributed.clock_sync import ClockSynchronizer as ClockSynchronizer
    from my_utils.distributed.clock_sync import (
        SocketClockSynchronizer as SocketClockSynchronizer,
    )
    from my_utils.hooks.forward import ForwardProfilerHook as ForwardProfilerHook
    from my_utils.hooks.module_profiler import ModuleProfiler as ModuleProfiler
    from my_utils.memory.gpu_tracker import GPU_Performance_Tracker as GPU_Performance_Tracker
    from my_utils.memory.snapshot import global_snapshotter as global_snapshotter
    from my_utils.profiling.templates import (
        get_profiling_templates_dir as get_profiling_templates_dir,
    )
    from my_utils.tracing.capture import CaptureBackend as CaptureBackend
    from my_utils.tracing.capture import CaptureController as CaptureController
    from my_utils.tracing.capture import CudaProfilerBackend as CudaProfilerBackend
    from my_utils.tracing.capture import HookEvent as HookEvent
    from my_utils.tracing.capture import ProfileManager as ProfileManager
    from my_utils.tracing.nvtx_utils import NoOpLabeler as NoOpLabeler
    from my_utils.tracing.nvtx_utils import NvtxLabeler as NvtxLabeler
    from my_utils.tracing.nvtx_utils import TorchNvtxLabeler as TorchNvtxLabeler
    from my_utils.tracing.nvtx_utils import create_labeler as create_labeler
