"""The built-in metrics providers (each registered as a plugin, see ``plugin.py``).

Names resolve on first access: describing the plugins imports ``providers.options`` only,
never the parsers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from my_utils.core.lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "CProfileStatsProvider": "my_utils.profiling.formats.cprofile",
    "DcgmDmonProvider": "my_utils.profiling.formats.dcgm",
    "ModuleProfilerMetricsProvider": "my_utils.profiling.formats.module_profiler",
    "NcclInspectorProvider": "my_utils.profiling.formats.nccl_inspector",
    "NcclLogProvider": "my_utils.profiling.formats.nccl_log",
    "MyTimerMetricsProvider": "my_utils.profiling.formats.mytimer",
    "NcuCsvMetricsProvider": "my_utils.profiling.ncu.provider",
    "NsysSqliteMetricsProvider": "my_utils.profiling.nsys.provider",
    "PerfStatProvider": "my_utils.profiling.formats.perf_stat",
    "TableCsvMetricsProvider": "my_utils.profiling.formats.table_csv",
    "TorchProfilerMetricsProvider": "my_utils.profiling.kineto.read.provider",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from my_utils.profiling.formats.cprofile import CProfileStatsProvider as CProfileStatsProvider
    from my_utils.profiling.formats.dcgm import DcgmDmonProvider as DcgmDmonProvider
    from my_utils.profiling.formats.module_profiler import (
        ModuleProfilerMetricsProvider as ModuleProfilerMetricsProvider,
    )
    from my_utils.profiling.formats.mytimer import MyTimerMetricsProvider as MyTimerMetricsProvider
    from my_utils.profiling.formats.nccl_inspector import NcclInspectorProvider as NcclInspectorProvider
    from my_utils.profiling.formats.nccl_log import NcclLogProvider as NcclLogProvider
    from my_utils.profiling.formats.perf_stat import PerfStatProvider as PerfStatProvider
    from my_utils.profiling.formats.table_csv import TableCsvMetricsProvider as TableCsvMetricsProvider
    from my_utils.profiling.kineto.read.provider import (
        TorchProfilerMetricsProvider as TorchProfilerMetricsProvider,
    )
    from my_utils.profiling.ncu.provider import NcuCsvMetricsProvider as NcuCsvMetricsProvider
    from my_utils.profiling.nsys.provider import NsysSqliteMetricsProvider as NsysSqliteMetricsProvider
