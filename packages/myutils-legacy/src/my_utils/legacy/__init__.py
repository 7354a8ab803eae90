"""myutils-legacy: the seed's ``ProfilerWrapper`` and ``create_profiler_context`` (DITProfiler).

Re-exports only; importing this package does not import torch.
"""

from my_utils.legacy._version import __version__
from my_utils.legacy.dit_profiler import create_profiler_context
from my_utils.legacy.profiler_wrapper import ProfilerWrapper

__all__ = ["ProfilerWrapper", "__version__", "create_profiler_context"]
