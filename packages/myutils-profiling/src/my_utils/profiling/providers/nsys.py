"""NsysSqliteMetricsProvider: Nsight Systems ``nsys export --type sqlite`` databases.

Everything is aggregated inside SQLite (one GROUP BY per activity table, names joined
from ``StringIds``), so a database with millions of rows costs a few queries, not a
Python loop. Works with the 2021 and 2022 export schemas (columns are checked, not
assumed) and ignores tables it does not know (Extra-P adds its own). The database is
opened read-only and immutable: nothing is ever written next to the input.

Emitted names share the Kineto vocabulary: ``kernel:<name>``, ``gpu.kernel_time``,
``gpu.kernel_count``, ``memcpy:<direction>``, ``gpu.memcpy_time``, ``memset:<kind>``,
``gpu.memset_time``, ``runtime:<api>``, ``nvtx:<range>``, ``gpu.sync_time``.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from my_utils.core.errors import InputError, UnsupportedInputError
from my_utils.core.events import MetricEvent
from my_utils.profiling.providers._files import FileProviderBase, rank_from_name, read_head

_MAGIC = b"SQLite format 3\x00"
# CUpti_ActivityMemcpyKind
_COPY_KIND = {0: "unknown", 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA",
              8: "DtoD", 9: "HtoH", 10: "PtoP"}
_NVTX_RANGES = (59, 60, 70, 71)  # push/pop and start/end ranges (2021 and 2022 numbering)


class _Db:
    def __init__(self, path: Path) -> None:
        self.path = path
        uri = path.resolve().as_uri() + "?mode=ro&immutable=1"
        try:
            self.conn = sqlite3.connect(uri, uri=True)
        except sqlite3.Error as exc:
            raise InputError(path, None, f"a readable SQLite database ({exc})") from None
        # names in a damaged file may not be UTF-8: read them with U+FFFD rather than fail on one byte
        self.conn.text_factory = _text
        try:
            self.tables = {r[0] for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        except (sqlite3.Error, UnicodeDecodeError) as exc:
            self.conn.close()
            # sqlite builds some messages from the damaged schema text itself (not always UTF-8)
            raise InputError(path, "sqlite_master", f"a readable SQLite database ({_reason(exc)})") from None
        self._columns: dict[str, set[str]] = {}

    def columns(self, table: str) -> set[str]:
        if table not in self._columns:
            rows = self.query(table, f'PRAGMA table_info("{table}")')
            self._columns[table] = {r[1] for r in rows}
        return self._columns[table]

    def has(self, table: str, *cols: str) -> bool:
        return table in self.tables and set(cols) <= self.columns(table)

    def query(self, table: str, sql: str) -> list[tuple[Any, ...]]:
        try:
            return self.conn.execute(sql).fetchall()
        except (sqlite3.Error, UnicodeDecodeError) as exc:
            raise InputError(self.path, f"table {table}", f"a readable nsys table ({_reason(exc)})") from None


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


def _reason(exc: BaseException) -> str:
    if isinstance(exc, UnicodeDecodeError):  # raised while sqlite formatted its own error message
        return "the database is damaged: " + exc.object.decode("utf-8", errors="replace")
    return str(exc)


def read_nsys_sqlite(path: Path, rank: int | None = None) -> list[MetricEvent]:
    """Aggregate one nsys SQLite export into metric events."""
    db = _Db(path)
    try:
        return _read(db, path, rank if rank is not None else rank_from_name(path))
    finally:
        db.conn.close()


def _read(db: _Db, path: Path, rank: int | None) -> list[MetricEvent]:
    known = {t for t in db.tables if t.startswith("CUPTI_ACTIVITY_KIND_") or t in ("NVTX_EVENTS", "OSRT_API")}
    if "StringIds" not in db.tables or not known:
        shown = ", ".join(sorted(db.tables)[:8]) or "none"
        raise UnsupportedInputError(
            path, None, f"an Nsight Systems export (StringIds and CUPTI_ACTIVITY_KIND_* tables); found tables: {shown}"
        )
    ts0 = None
    if db.has("TARGET_INFO_SESSION_START_TIME", "utcEpochNs"):
        row = db.query("TARGET_INFO_SESSION_START_TIME", "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")
        if row and isinstance(row[0][0], int):
            ts0 = row[0][0] / 1e9
    base: dict[str, Any] = {"file": path.name}
    gpus = _gpus(db)
    if gpus:
        base["gpus"] = gpus
    out: list[MetricEvent] = []

    def emit(name: str, value: float, kind: str, unit: str, first_ns: Any = None, **attrs: Any) -> None:
        ts = ts0 + first_ns / 1e9 if ts0 is not None and isinstance(first_ns, (int, float)) else None
        out.append(MetricEvent(name=name, value=float(value), kind=kind, unit=unit, source="nsys_sqlite",
                               rank=rank, ts=ts, attrs={**base, **attrs}))

    def grouped(table: str, label_sql: str, join: str = "", extra: str = "") -> list[tuple[Any, ...]]:
        return db.query(table, (
            f"SELECT {label_sql} AS label, COUNT(*), SUM(t.end - t.start), MIN(t.end - t.start), "
            f"MAX(t.end - t.start), MIN(t.start){extra} FROM {table} t {join} "
            "WHERE t.end IS NOT NULL GROUP BY label ORDER BY label"
        ))

    def per_name(prefix: str, rows: list[tuple[Any, ...]], **attrs: Any) -> tuple[float, int]:
        total_ns, count = 0.0, 0
        for label, cnt, tot, mn, mx, first, *rest in rows:
            tot = tot or 0
            extra = {"bytes": rest[0]} if rest and rest[0] is not None else {}
            emit(f"{prefix}:{label}", tot / 1e6, "duration", "ms", first, category=prefix, op=str(label),
                 count=cnt, mean_ms=tot / cnt / 1e6, min_ms=(mn or 0) / 1e6, max_ms=(mx or 0) / 1e6,
                 **extra, **attrs)
            total_ns += tot
            count += cnt
        return total_ns, count

    k = "CUPTI_ACTIVITY_KIND_KERNEL"
    if db.has(k, "start", "end"):
        col = "demangledName" if "demangledName" in db.columns(k) else "shortName"
        rows = grouped(k, f"COALESCE(s.value, 'kernel#' || t.{col})", f"LEFT JOIN StringIds s ON s.id = t.{col}")
        total, count = per_name("kernel", rows)
        emit("gpu.kernel_time", total / 1e6, "duration", "ms", count=count)
        emit("gpu.kernel_count", count, "counter", "count")
    m = "CUPTI_ACTIVITY_KIND_MEMCPY"
    if db.has(m, "start", "end", "copyKind"):
        rows = grouped(m, "t.copyKind", extra=", SUM(t.bytes)" if "bytes" in db.columns(m) else "")
        rows = [(_COPY_KIND.get(r[0], f"kind{r[0]}"), *r[1:]) for r in rows]
        total, count = per_name("memcpy", rows)
        emit("gpu.memcpy_time", total / 1e6, "duration", "ms", count=count)
    s = "CUPTI_ACTIVITY_KIND_MEMSET"
    if db.has(s, "start", "end"):
        rows = grouped(s, "'memset'", extra=", SUM(t.bytes)" if "bytes" in db.columns(s) else "")
        total, count = per_name("memset", rows)
        emit("gpu.memset_time", total / 1e6, "duration", "ms", count=count)
    r = "CUPTI_ACTIVITY_KIND_RUNTIME"
    if db.has(r, "start", "end", "nameId"):
        per_name("runtime", grouped(r, "COALESCE(s.value, 'api#' || t.nameId)", "LEFT JOIN StringIds s ON s.id = t.nameId"))
    y = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
    if db.has(y, "start", "end"):
        rows = grouped(y, "'sync'")
        if rows:
            emit("gpu.sync_time", (rows[0][2] or 0) / 1e6, "duration", "ms", rows[0][5], count=rows[0][1])
    n = "NVTX_EVENTS"
    if db.has(n, "start", "end", "eventType"):
        text = "t.text" if "text" in db.columns(n) else "NULL"
        join = "LEFT JOIN StringIds s ON s.id = t.textId" if "textId" in db.columns(n) else ""
        label = f"COALESCE({text}, s.value, '(unnamed)')" if join else f"COALESCE({text}, '(unnamed)')"
        types = ",".join(str(v) for v in _NVTX_RANGES)
        rows = db.query(n, (
            f"SELECT {label} AS label, COUNT(*), SUM(t.end - t.start), MIN(t.end - t.start), "
            f"MAX(t.end - t.start), MIN(t.start) FROM {n} t {join} "
            f"WHERE t.end IS NOT NULL AND t.eventType IN ({types}) GROUP BY label ORDER BY label"
        ))
        per_name("nvtx", rows)
    return out


def _gpus(db: _Db) -> list[str]:
    for table in ("TARGET_INFO_GPU", "TARGET_INFO_CUDA_GPU"):
        if db.has(table, "name"):
            return sorted({str(r[0]) for r in db.query(table, f"SELECT name FROM {table}") if r[0]})
    return []


class NsysSqliteMetricsProvider(FileProviderBase):
    """Metrics from Nsight Systems SQLite exports (a file, or a folder of ``.sqlite`` files)."""

    name = "nsys_sqlite"
    patterns = ("*.sqlite", "*.db")
    what = "nsys SQLite export"

    def sniff(self, file: Path) -> None:
        """Refuse anything that is not an SQLite database (e.g. ``nsys stats`` console text)."""
        head = read_head(file, 16)
        if head != _MAGIC:
            hint = "; this looks like text (nsys console output?): export with `nsys export --type sqlite`" \
                if head[:1].isascii() and head.strip() else ""
            raise UnsupportedInputError(file, "byte 0", f"an SQLite database (nsys export --type sqlite){hint}")

    def _read_files(self, files: list[Path]) -> list[MetricEvent]:
        out: list[MetricEvent] = []
        for f in files:
            self.sniff(f)
            out.extend(read_nsys_sqlite(f, self.rank))
        return out
