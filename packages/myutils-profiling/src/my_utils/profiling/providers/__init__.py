"""The seven built-in metrics providers (each registered as a plugin, see ``plugin.py``)."""

from my_utils.profiling.providers.cprofile import CProfileStatsProvider
from my_utils.profiling.providers.kineto import TorchProfilerMetricsProvider
from my_utils.profiling.providers.module_profiler import ModuleProfilerMetricsProvider
from my_utils.profiling.providers.mytimer import MyTimerMetricsProvider
from my_utils.profiling.providers.ncu import NcuCsvMetricsProvider
from my_utils.profiling.providers.nsys import NsysSqliteMetricsProvider
from my_utils.profiling.providers.table_csv import TableCsvMetricsProvider

__all__ = [
    "CProfileStatsProvider",
    "ModuleProfilerMetricsProvider",
    "MyTimerMetricsProvider",
    "NcuCsvMetricsProvider",
    "NsysSqliteMetricsProvider",
    "TableCsvMetricsProvider",
    "TorchProfilerMetricsProvider",
]
