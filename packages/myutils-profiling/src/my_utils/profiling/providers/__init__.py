"""The built-in metrics providers (each registered as a plugin, see ``plugin.py``).

Names resolve on first access: describing the plugins imports ``providers.options`` only,
never the parsers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from my_utils.core.lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "CProfileStatsProvider": "my_utils.profiling.providers.cprofile",
    "DcgmDmonProvider": "my_utils.profiling.providers.dcgm",
    "ModuleProfilerMetricsProvider": "my_utils.profiling.providers.module_profiler",
    "NcclInspectorProvider": "my_utils.profiling.providers.nccl_inspector",
    "NcclLogProvider": "my_utils.profiling.providers.nccl_log",
    "MyTimerMetricsProvider": "my_utils.profiling.providers.mytimer",
    "NcuCsvMetricsProvider": "my_utils.profiling.providers.ncu",
    "NsysSqliteMetricsProvider": "my_utils.profiling.providers.nsys",
    "PerfStatProvider": "my_utils.profiling.providers.perf_stat",
    "TableCsvMetricsProvider": "my_utils.profiling.providers.table_csv",
    "TorchProfilerMetricsProvider": "my_utils.profiling.providers.kineto",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from my_utils.profiling.providers.cprofile import CProfileStatsProvider as CProfileStatsProvider
    from my_utils.profiling.providers.dcgm import DcgmDmonProvider as DcgmDmonProvider
    from my_utils.profiling.providers.kineto import (
        TorchProfilerMetricsProvider as TorchProfilerMetricsProvider,
    )
    from my_utils.profiling.providers.module_profiler import (
        ModuleProfilerMetricsProvider as ModuleProfilerMetricsProvider,
    )
    from my_utils.profiling.providers.mytimer import MyTimerMetricsProvider as MyTimerMetricsProvider
    from my_utils.profiling.providers.nccl_inspector import NcclInspectorProvider as NcclInspectorProvider
    from my_utils.profiling.providers.nccl_log import NcclLogProvider as NcclLogProvider
    from my_utils.profiling.providers.ncu import NcuCsvMetricsProvider as NcuCsvMetricsProvider
    from my_utils.profiling.providers.nsys import NsysSqliteMetricsProvider as NsysSqliteMetricsProvider
    from my_utils.profiling.providers.perf_stat import PerfStatProvider as PerfStatProvider
    from my_utils.profiling.providers.table_csv import TableCsvMetricsProvider as TableCsvMetricsProvider
