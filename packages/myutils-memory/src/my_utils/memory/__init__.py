"""myutils-memory: memory snapshots, the OOM recorder and the GPU/host monitor (see the README).

Names resolve on first use, so ``import my_utils.memory`` stays light (no torch, no plotting).
"""

from my_utils.core.lazy import lazy_exports
from my_utils.memory._version import __version__ as __version__

_EXPORTS = {
    "MemorySnapshotter": "my_utils.memory.snapshot",
    "global_snapshotter": "my_utils.memory.snapshot",
    "OomRecorder": "my_utils.memory.oom",
    "install_oom_recorder": "my_utils.memory.oom",
    "GPU_Performance_Tracker": "my_utils.memory.gpu_tracker",
    "MonitorSamplesMetricsProvider": "my_utils.memory.samples_provider",
    "load_snapshot": "my_utils.memory.snapshot_io",
    "summarize_snapshot": "my_utils.memory.snapshot_summary",
    "allocator_findings": "my_utils.memory.allocator_advice",
    "cut_snapshot": "my_utils.memory.snapshot_cut",
    "read_samples": "my_utils.memory.samples_file",
}

__all__ = sorted([*_EXPORTS, "__version__"])

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
