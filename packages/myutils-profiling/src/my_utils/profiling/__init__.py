"""myutils-profiling: unified metric events, the collector, the seven providers, launch templates.

Importing this package is light (no torch, numpy, pandas or plotly): heavy libraries are
imported inside the functions that need them.
"""

from my_utils.core.events import (
    SCHEMA_VERSION,
    EventLogWriter,
    MetricEvent,
    events_path,
    iter_events,
    read_events,
    write_events,
)
from my_utils.profiling._version import __version__
from my_utils.profiling.collector import MetricsCollector, ProviderFailure
from my_utils.profiling.config import load_config
from my_utils.profiling.launch_args import (
    NsysSettings,
    ProfilingArgs,
    TorchProfilerSettings,
    parse_profiling_args,
    setup_profiling,
)
from my_utils.profiling.providers import (
    CProfileStatsProvider,
    ModuleProfilerMetricsProvider,
    MyTimerMetricsProvider,
    NcuCsvMetricsProvider,
    NsysSqliteMetricsProvider,
    TableCsvMetricsProvider,
    TorchProfilerMetricsProvider,
)
from my_utils.profiling.templates import get_profiling_templates_dir

__all__ = [
    "SCHEMA_VERSION",
    "CProfileStatsProvider",
    "EventLogWriter",
    "MetricEvent",
    "MetricsCollector",
    "ModuleProfilerMetricsProvider",
    "MyTimerMetricsProvider",
    "NcuCsvMetricsProvider",
    "NsysSettings",
    "NsysSqliteMetricsProvider",
    "ProfilingArgs",
    "ProviderFailure",
    "TableCsvMetricsProvider",
    "TorchProfilerMetricsProvider",
    "TorchProfilerSettings",
    "__version__",
    "events_path",
    "get_profiling_templates_dir",
    "iter_events",
    "load_config",
    "parse_profiling_args",
    "read_events",
    "setup_profiling",
    "write_events",
]
