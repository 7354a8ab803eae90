"""myutils-profiling: unified metric events, the collector, the providers, launch templates, and ``open_run``.

Importing this package is light (no torch, numpy, pandas or plotly): the public names are
resolved on first access, and heavy libraries are imported inside the functions that need them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from my_utils.core.lazy import lazy_exports
from my_utils.profiling._version import __version__

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "SCHEMA_VERSION": "my_utils.core.events",
    "EventLogWriter": "my_utils.core.events",
    "MetricEvent": "my_utils.core.events",
    "events_path": "my_utils.core.events",
    "iter_events": "my_utils.core.events",
    "read_events": "my_utils.core.events",
    "write_events": "my_utils.core.events",
    "AnalysisReport": "my_utils.profiling.model.report",
    "Finding": "my_utils.profiling.model.report",
    "MetricsAnalyzer": "my_utils.profiling.analysis.analyzer",
    "MetricsCollector": "my_utils.profiling.collector",
    "ProviderFailure": "my_utils.profiling.collector",
    "load_config": "my_utils.profiling.config",
    "NsysSettings": "my_utils.profiling.launch_args",
    "ProfilingArgs": "my_utils.profiling.launch_args",
    "TorchProfilerSettings": "my_utils.profiling.launch_args",
    "parse_profiling_args": "my_utils.profiling.launch_args",
    "setup_profiling": "my_utils.profiling.launch_args",
    "CProfileStatsProvider": "my_utils.profiling.formats.cprofile",
    "TorchProfilerMetricsProvider": "my_utils.profiling.kineto.read.provider",
    "ModuleProfilerMetricsProvider": "my_utils.profiling.formats.module_profiler",
    "MyTimerMetricsProvider": "my_utils.profiling.formats.mytimer",
    "NcuCsvMetricsProvider": "my_utils.profiling.ncu.provider",
    "NsysSqliteMetricsProvider": "my_utils.profiling.nsys.provider",
    "TableCsvMetricsProvider": "my_utils.profiling.formats.table_csv",
    "get_profiling_templates_dir": "my_utils.profiling.templates",
    "Run": "my_utils.profiling.run.api",
    "open_run": "my_utils.profiling.run.api",
    "kineto_frames": "my_utils.profiling.kineto.frames",
    "TraceFilter": "my_utils.profiling.kineto.filters",
}

__all__ = ["__version__", *_EXPORTS]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from my_utils.core.events import SCHEMA_VERSION as SCHEMA_VERSION
    from my_utils.core.events import EventLogWriter as EventLogWriter
    from my_utils.core.events import MetricEvent as MetricEvent
    from my_utils.core.events import events_path as events_path
    from my_utils.core.events import iter_events as iter_events
    from my_utils.core.events import read_events as read_events
    from my_utils.core.events import write_events as write_events
    from my_utils.profiling.analysis.analyzer import MetricsAnalyzer as MetricsAnalyzer
    from my_utils.profiling.collector import MetricsCollector as MetricsCollector
    from my_utils.profiling.collector import ProviderFailure as ProviderFailure
    from my_utils.profiling.config import load_config as load_config
    from my_utils.profiling.formats.cprofile import CProfileStatsProvider as CProfileStatsProvider
    from my_utils.profiling.formats.module_profiler import (
        ModuleProfilerMetricsProvider as ModuleProfilerMetricsProvider,
    )
    from my_utils.profiling.formats.mytimer import MyTimerMetricsProvider as MyTimerMetricsProvider
    from my_utils.profiling.formats.table_csv import TableCsvMetricsProvider as TableCsvMetricsProvider
    from my_utils.profiling.kineto.filters import TraceFilter as TraceFilter
    from my_utils.profiling.kineto.frames import kineto_frames as kineto_frames
    from my_utils.profiling.kineto.read.provider import (
        TorchProfilerMetricsProvider as TorchProfilerMetricsProvider,
    )
    from my_utils.profiling.launch_args import NsysSettings as NsysSettings
    from my_utils.profiling.launch_args import ProfilingArgs as ProfilingArgs
    from my_utils.profiling.launch_args import TorchProfilerSettings as TorchProfilerSettings
    from my_utils.profiling.launch_args import parse_profiling_args as parse_profiling_args
    from my_utils.profiling.launch_args import setup_profiling as setup_profiling
    from my_utils.profiling.model.report import AnalysisReport as AnalysisReport
    from my_utils.profiling.model.report import Finding as Finding
    from my_utils.profiling.ncu.provider import NcuCsvMetricsProvider as NcuCsvMetricsProvider
    from my_utils.profiling.nsys.provider import NsysSqliteMetricsProvider as NsysSqliteMetricsProvider
    from my_utils.profiling.run.api import Run as Run
    from my_utils.profiling.run.api import open_run as open_run
    from my_utils.profiling.templates import get_profiling_templates_dir as get_profiling_templates_dir
