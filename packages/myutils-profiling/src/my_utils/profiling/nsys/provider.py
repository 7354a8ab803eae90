"""NsysSqliteMetricsProvider: Nsight Systems ``nsys export --type sqlite`` databases.

The export is read through :class:`my_utils.profiling.nsys.schema.NsysExport` and its
canonical views (``nsys_kernel``, ``nsys_memcpy``, ``nsys_runtime``, ``nsys_nvtx``...), the
same adapter the ``nsys`` analyses use: one reader for every exporter schema from 2021 to
2026, the CUDA *backtrace* copies of API calls that 2021.x and 2022.2 exports add left out
(an own reader counted every such call twice), tables it does not know ignored, the
database opened read-only and immutable (nothing is ever written next to the input).
Everything is aggregated inside SQLite (one GROUP BY per view), so a database with
millions of rows costs a few queries, not a Python loop.

Emitted names share the Kineto vocabulary: ``kernel:<name>``, ``gpu.kernel_time``,
``gpu.kernel_count``, ``memcpy:<direction>``, ``gpu.memcpy_time``, ``memset:memset``,
``gpu.memset_time``, ``runtime:<api>``, ``nvtx:<range>``, ``gpu.sync_time``; GPU metrics
(``--gpu-metrics-devices``) by their canonical names (``gpu.sm_active:<gpu>``, see
``my_utils.core.metric_names``), one mean per metric and GPU. Timestamps are
on the UTC epoch (``NsysExport.epoch_offset_ns``), or None when the export has no clock anchor.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from my_utils.core.events import MetricEvent
from my_utils.profiling.formats._files import FileProviderBase, rank_from_name
from my_utils.profiling.nsys.schema import NsysExport, check_header
from my_utils.profiling.nsys.views import KERNEL, MEMCPY, MEMSET

SOURCE = "nsys_sqlite"
_STATS = "COUNT(*), SUM(dur), MIN(dur), MAX(dur), MIN(start)"


def read_nsys_sqlite(path: Path, rank: int | None = None) -> list[MetricEvent]:
    """Aggregate one nsys SQLite export into metric events (rank: given, else from the file name)."""
    with NsysExport(path, rank=rank if rank is not None else rank_from_name(path)) as db:
        return export_events(db)


def export_events(db: NsysExport) -> list[MetricEvent]:
    """The events of an open export (its rank is ``db.rank``); the views are made when not yet there.

    The ``nsys`` analyses call this on the connection they already hold, so an export that is
    both ingested and analysed in one command is opened once.
    """
    db.ensure_views()
    offset = db.epoch_offset_ns
    base: dict[str, Any] = {"file": db.path.name}
    gpus = sorted({g.name for g in db.gpus() if g.name})
    if gpus:
        base["gpus"] = gpus
    out: list[MetricEvent] = []

    def emit(name: str, value: float, kind: str, unit: str, first_ns: Any = None, **attrs: Any) -> None:
        ts = (first_ns + offset) / 1e9 if offset is not None and isinstance(first_ns, (int, float)) else None
        out.append(MetricEvent(name=name, value=float(value), kind=kind, unit=unit, source=SOURCE,
                               rank=db.rank, ts=ts, attrs={**base, **attrs}))

    def per_name(prefix: str, sql: str) -> tuple[float, int]:
        total_ns, count = 0.0, 0
        for label, cnt, tot, mn, mx, first, *rest in db.query(sql, place=f"{prefix} totals"):
            if not cnt:  # an aggregate over an empty view
                continue
            tot = tot or 0
            extra = {"bytes": rest[0]} if rest and rest[0] is not None else {}
            emit(f"{prefix}:{label}", tot / 1e6, "duration", "ms", first, category=prefix, op=str(label),
                 count=cnt, mean_ms=tot / cnt / 1e6, min_ms=(mn or 0) / 1e6, max_ms=(mx or 0) / 1e6, **extra)
            total_ns += tot
            count += cnt
        return total_ns, count

    if KERNEL in db.tables:
        total, count = per_name("kernel", f"SELECT name, {_STATS} FROM nsys_kernel GROUP BY name_id ORDER BY name")
        emit("gpu.kernel_time", total / 1e6, "duration", "ms", count=count)
        emit("gpu.kernel_count", count, "counter", "count")
    if MEMCPY in db.tables:
        total, count = per_name("memcpy", f"SELECT direction, {_STATS}, SUM(bytes) FROM nsys_memcpy "
                                          "GROUP BY direction ORDER BY direction")
        emit("gpu.memcpy_time", total / 1e6, "duration", "ms", count=count)
    if MEMSET in db.tables:
        total, count = per_name("memset", f"SELECT 'memset', {_STATS}, SUM(bytes) FROM nsys_memset")
        emit("gpu.memset_time", total / 1e6, "duration", "ms", count=count)
    per_name("runtime", f"SELECT name, {_STATS} FROM nsys_runtime GROUP BY name ORDER BY name")
    (n, sync_ns, first), = db.query("SELECT COUNT(*), SUM(dur), MIN(start) FROM nsys_sync", place="sync totals")
    if n:
        emit("gpu.sync_time", (sync_ns or 0) / 1e6, "duration", "ms", first, count=n)
    per_name("nvtx", f"SELECT name, {_STATS} FROM nsys_nvtx GROUP BY name ORDER BY name")
    if {"GPU_METRICS", "TARGET_INFO_GPU_METRICS"} <= set(db.tables):
        _gpu_metrics(db, emit)
    return out


def _gpu_metrics(db: NsysExport, emit: Any) -> None:
    """``--gpu-metrics-devices`` samples, one mean per metric and GPU: named by the canonical metric where
    ``my_utils.core.metric_names`` knows it (``gpu.sm_active:<gpu>``), else ``nsys.gpu_metric.<name>:<gpu>``."""
    from my_utils.core.metric_names import lookup

    sql = ("SELECT t.typeName, t.metricName, COUNT(*), AVG(m.value), MIN(m.value), MAX(m.value), MIN(m.timestamp) "
           "FROM GPU_METRICS m JOIN (SELECT DISTINCT typeId, typeName, metricId, metricName "
           "FROM TARGET_INFO_GPU_METRICS) t ON m.typeId = t.typeId AND m.metricId = t.metricId "
           "GROUP BY m.typeId, m.metricId ORDER BY t.typeName, t.metricName")
    for gpu, metric, n, mean, low, high, first in db.query(sql, place="GPU metrics"):
        found = lookup("nsys", str(metric))
        unit = str(metric)[str(metric).rindex("[") + 1:-1] if str(metric).endswith("]") and "[" in str(metric) else ""
        name = found[0].name if found is not None else f"nsys.gpu_metric.{str(metric).split(' [')[0]}"
        emit(f"{name}:{gpu}", float(mean) * (found[1].scale if found else 1.0), "ratio",
             found[0].unit if found else unit, first, nsys_metric=str(metric), gpu=str(gpu), count=n,
             min=float(low) * (found[1].scale if found else 1.0), max=float(high) * (found[1].scale if found else 1.0))


class NsysSqliteMetricsProvider(FileProviderBase):
    """Metrics from Nsight Systems SQLite exports (a file, or a folder of ``.sqlite`` files)."""

    name = "nsys_sqlite"
    patterns = ("*.sqlite", "*.db")
    what = "nsys SQLite export"

    def sniff(self, file: Path) -> None:
        """Refuse anything that is not an SQLite database (e.g. ``nsys stats`` console text)."""
        check_header(file)

    def _read_files(self, files: list[Path]) -> list[MetricEvent]:
        out: list[MetricEvent] = []
        for f in files:
            self.sniff(f)
            out.extend(read_nsys_sqlite(f, self.rank))
        return out
