"""What the Kineto analyses return: one rank's tables, and all ranks' tables together."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from my_utils.profiling.kineto.annotations import AnnotationRow
from my_utils.profiling.kineto.health import HealthRow
from my_utils.profiling.kineto.idle import DeviceIdleRow, IdleRow
from my_utils.profiling.kineto.kernels import KernelKindRow, KernelStat
from my_utils.profiling.kineto.launch import LaunchOutlier, LaunchRow
from my_utils.profiling.kineto.overlap import OverlapRow
from my_utils.profiling.kineto.profiler_overhead import ProfilerOverheadRow
from my_utils.profiling.kineto.rows import Row
from my_utils.profiling.kineto.sync import SyncRow
from my_utils.profiling.kineto.temporal import TemporalRow


@dataclass(frozen=True)
class RankAnalysis:
    """Every table of one trace file (one rank); small, so it crosses process boundaries cheaply.

    ``overlap`` is None on a rank without GPU activity (no all-zero row); ``context`` is the
    trace's own description of the run (``kineto.context.trace_context``); ``warnings`` say
    what had to be assumed (a trace without a rank).
    """

    file: str
    rank: int | None
    rank_source: str
    events: int
    temporal: TemporalRow | None
    kernel_kinds: tuple[KernelKindRow, ...]
    kernel_stats: tuple[KernelStat, ...]
    idle: tuple[IdleRow, ...]
    overlap: OverlapRow | None
    launch: LaunchRow | None
    launch_outliers: tuple[LaunchOutlier, ...]
    annotations: tuple[AnnotationRow, ...]
    health: tuple[HealthRow, ...]
    idle_device: tuple[DeviceIdleRow, ...] = ()
    sync: tuple[SyncRow, ...] = ()
    profiler_overhead: ProfilerOverheadRow | None = None
    context: dict[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    tables: dict[str, tuple[dict[str, Any], ...]] = field(default_factory=dict)
    trace_filter: str = ""


@dataclass(frozen=True)
class KinetoAnalysis:
    """The HTA-style analyses of every rank present; rows with ``rank`` None cover all ranks.

    ``to_rows()`` gives the plain JSON tables (``kineto_temporal``, ``kineto_kernel_kinds``,
    ``kineto_top_kernels``, ``kineto_idle``, ``kineto_overlap``, ``kineto_launch``,
    ``kineto_launch_outliers``, ``kineto_annotations``, ``kineto_health``, ``kineto_inputs``,
    ``kineto_idle_device``, ``kineto_sync``, ``kineto_profiler_overhead``, ``kineto_context``)
    that the analyzer puts into ``AnalysisReport.tables``. ``kineto_idle`` has per-stream rows
    only: idle summed over streams would count shared idle once per stream.
    ``warnings`` (not a table) say what had to be assumed.

    ``tables`` holds the tables of the registered analyses (``kineto.registry``: critical path,
    queue length, ...), every rank's rows together plus any across-ranks rows, keyed by table
    name without the ``kineto_`` prefix; ``to_rows()`` adds them after the core tables.
    ``trace_filter`` says which part of each trace was analysed (``TraceFilter.describe()``).
    """

    ranks: tuple[int | None, ...]
    inputs: tuple[dict[str, Any], ...]
    temporal: tuple[TemporalRow, ...]
    kernel_kinds: tuple[KernelKindRow, ...]
    top_kernels: tuple[KernelStat, ...]
    idle: tuple[IdleRow, ...]
    overlap: tuple[OverlapRow, ...]
    launch: tuple[LaunchRow, ...]
    launch_outliers: tuple[LaunchOutlier, ...]
    annotations: tuple[AnnotationRow, ...]
    health: tuple[HealthRow, ...]
    idle_device: tuple[DeviceIdleRow, ...] = ()
    sync: tuple[SyncRow, ...] = ()
    profiler_overhead: tuple[ProfilerOverheadRow, ...] = ()
    context: tuple[dict[str, Any], ...] = ()
    warnings: tuple[str, ...] = ()
    tables: dict[str, tuple[dict[str, Any], ...]] = field(default_factory=dict)
    trace_filter: str = ""

    def to_rows(self) -> dict[str, list[dict[str, Any]]]:
        """Every table as a list of JSON-ready dicts, keyed ``kineto_<table>``."""
        out: dict[str, list[dict[str, Any]]] = {}
        for f in fields(self):
            if f.name in ("ranks", "warnings", "tables", "trace_filter"):
                continue
            value: Sequence[Any] = getattr(self, f.name)
            out[f"kineto_{f.name}"] = [v.to_row() if isinstance(v, Row) else dict(v) for v in value]
        for name, rows in self.tables.items():
            if not name.startswith("_"):  # private tables cross ranks only (``kineto.registry``)
                out[f"kineto_{name}"] = [dict(r) for r in rows]
        return out
