"""myutils-hooks: ``ForwardProfilerHook`` (profiler windows counted in forwards) and ``ModuleProfiler``.

Importing this package stays light: torch and pandas are imported only when a profiler
times a model or builds a summary.
"""

from my_utils.hooks._version import __version__
from my_utils.hooks.forward import ForwardProfilerHook
from my_utils.hooks.module_profiler import ModuleProfiler
from my_utils.hooks.summary import SUMMARY_COLUMNS

__all__ = ["SUMMARY_COLUMNS", "ForwardProfilerHook", "ModuleProfiler", "__version__"]
