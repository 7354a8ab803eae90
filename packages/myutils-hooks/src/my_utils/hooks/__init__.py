"""myutils-hooks: ``ForwardProfilerHook`` (profiler windows counted in forwards) and ``ModuleProfiler``.

Light at import: the public names are resolved on first access (plugin discovery imports
this package without touching myutils-tracing's capture code), and torch and pandas are
imported only when a profiler times a model or builds a summary.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from my_utils.core.lazy import lazy_exports
from my_utils.hooks._version import __version__

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "ForwardProfilerHook": "my_utils.hooks.forward",
    "ModuleProfiler": "my_utils.hooks.module_profiler",
    "SUMMARY_COLUMNS": "my_utils.hooks.summary",
    "ForwardTraceRecorder": "my_utils.hooks.forward_trace",
    "Sampling": "my_utils.hooks.forward_trace",
    "compare_traces": "my_utils.hooks.trace_compare",
}

__all__ = ["__version__", *_EXPORTS]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from my_utils.hooks.forward import ForwardProfilerHook as ForwardProfilerHook
    from my_utils.hooks.forward_trace import ForwardTraceRecorder as ForwardTraceRecorder
    from my_utils.hooks.forward_trace import Sampling as Sampling
    from my_utils.hooks.module_profiler import ModuleProfiler as ModuleProfiler
    from my_utils.hooks.summary import SUMMARY_COLUMNS as SUMMARY_COLUMNS
    from my_utils.hooks.trace_compare import compare_traces as compare_traces
