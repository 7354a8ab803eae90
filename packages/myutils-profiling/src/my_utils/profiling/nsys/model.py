"""What the Nsight Systems analyses return: tables of rows (already aggregated in SQL) and summaries.

A :class:`Table` is a named query's result with the export's rank in front; a report or a
rule reads it as JSON rows (``records()``). An :class:`ExportSummary` holds every table of
one export, its iterations and what it could not measure; :meth:`ExportSummary.facts` turns
the numbers into facts for the analyzer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from my_utils.profiling.nsys.schema import ExportMeta, GpuInfo


@dataclass(frozen=True)
class Table:
    """Column names and rows (small: every table is an aggregate or a bounded top-N)."""

    name: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]

    def records(self) -> list[dict[str, Any]]:
        """The rows as JSON-ready dicts."""
        return [dict(zip(self.columns, r, strict=True)) for r in self.rows]

    def column(self, name: str) -> list[Any]:
        """One column's values, in row order (none for an empty table, whose columns may be unknown)."""
        if not self.rows:
            return []
        i = self.columns.index(name)
        return [r[i] for r in self.rows]

    def where(self, **key: Any) -> list[dict[str, Any]]:
        """The rows whose columns equal ``key``."""
        return [r for r in self.records() if all(r.get(k) == v for k, v in key.items())]

    def __len__(self) -> int:
        return len(self.rows)


def concat(name: str, tables: Sequence[Table]) -> Table:
    """Tables of the same columns (one per rank) as one."""
    if not tables:
        return Table(name, (), ())
    cols = tables[0].columns
    return Table(name, cols, tuple(r for t in tables for r in t.rows))


@dataclass(frozen=True)
class IterationOutlier:
    """An iteration whose time stands out (robust z-score over the median and MAD of its process)."""

    pid: int | None
    iteration: int
    cpu_ns: int
    robust_z: float
    position: str  # "first", "last" or "middle": a slow first one is often warm-up


@dataclass(frozen=True)
class IterationStats:
    """Per-iteration time of one process: how many, median/p90/max, idle share and outliers."""

    pid: int | None
    count: int
    median_ns: float
    p90_ns: float
    max_ns: int
    min_ns: int
    first_start: int
    last_end: int
    gpu_busy_ns: int
    gpu_window_ns: int
    overlap_ns: int
    communication_ns: int
    outliers: tuple[IterationOutlier, ...]


@dataclass(frozen=True)
class Iterations:
    """Iterations found from NVTX: the range pattern and how it was chosen, per-iteration rows, stats per process."""

    pattern: str
    chosen: str  # "given" or "default"
    table: Table
    stats: tuple[IterationStats, ...]
    names: tuple[str, ...] = ()  # the distinct range names the pattern matched (a few)


@dataclass(frozen=True)
class ExportSummary:
    """Everything measured on one export; ``not_measured`` maps a topic to why the export could not give it."""

    label: str
    path: str
    rank: int | None
    meta: ExportMeta
    gpus: tuple[GpuInfo, ...]
    epoch_offset_ns: int | None
    tables: Mapping[str, Table]
    iterations: Iterations | None = None
    not_measured: Mapping[str, str] = field(default_factory=dict)
    host: str | None = None  # the host it was captured on (``hosts.export_host``), None: not recorded
    host_source: str = ""

    def table(self, name: str) -> Table:
        """The table ``name`` (``nsys_busy_device``...); an empty one when absent."""
        return self.tables.get(name) or Table(name, (), ())

    def facts(self) -> list[Any]:
        """The facts of this export (see :mod:`.summary_facts`)."""
        from my_utils.profiling.nsys.summary_facts import export_facts

        return export_facts(self)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view: export info, every table's rows, iterations, not-measured reasons and facts."""
        it = self.iterations
        return {
            "label": self.label, "rank": self.rank, "host": self.host, "host_source": self.host_source,
            "exporter": {"family": self.meta.family, "product_version": self.meta.product_version,
                         "schema_version": self.meta.schema_version, "era": self.meta.era},
            "gpus": [{"device": g.device, "name": g.name, "sm_count": g.sm_count,
                      "memory_bandwidth_bps": g.memory_bandwidth_bps} for g in self.gpus],
            "epoch_offset_ns": self.epoch_offset_ns,
            "tables": {name: t.records() for name, t in self.tables.items()},
            "iterations": None if it is None else {
                "pattern": it.pattern, "chosen": it.chosen, "names": list(it.names),
                "rows": it.table.records(),
                "stats": [{**{k: v for k, v in vars(s).items() if k != "outliers"},
                           "outliers": [vars(o) for o in s.outliers]} for s in it.stats]},
            "not_measured": dict(self.not_measured),
            "facts": [f.to_dict() for f in self.facts()],
        }
