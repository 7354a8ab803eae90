"""One adapter for every Nsight Systems SQLite export schema, 2021 to 2026.

The exporter changed its layout several times; everything above this module reads one
shape instead. What differs, and how it is detected (never assumed from a version string):

- **Export metadata**: ``EXPORT_META_DATA`` (2022.1-2022.x, schema 2.x), ``META_DATA_EXPORT``
  (2023.3 and newer, schema 3.x), or none at all (2021.x). :class:`ExportMeta` holds the
  product and schema versions when written, and which table said so.
- **GPU description**: ``TARGET_INFO_GPU`` with ``id``/``cuDevice`` and the SM and memory
  figures (2022+), a short ``TARGET_INFO_GPU`` with ``deviceId`` beside
  ``TARGET_INFO_CUDA_GPU`` (2021.x), or no GPU table (sliced exports drop it).
- **Kernel names**: ``demangledName``/``shortName`` ids into ``StringIds``, with
  ``mangledName`` from 2022 on; a missing id is shown as ``kernel#<id>``.
- **Time base**: nanoseconds on the session clock, or already on the UTC epoch when the
  export was normalised (``EXPORT_PARAM_TIME_NORMALIZE``); :attr:`NsysExport.epoch_offset_ns`
  puts either on the epoch so that ranks of one job line up.

Tables this module does not know (``ENUM_*``, the ``EXTRAP_*`` caches Extra-P adds, D3D,
Vulkan ...) are ignored. A known table that lacks a column every export has written is
bad input: :class:`~my_utils.core.errors.InputError` names the file, the table and the
column. The database is opened read-only and immutable; nothing is written next to it
(the canonical views of :mod:`.views` live in SQLite's temporary schema).

An export is untrusted input (:mod:`.read_checks`): a view named like an nsys table is
refused, every statement runs under a budget of SQLite steps and is stopped past it, and
:meth:`NsysExport.check_columns` refuses a value of the wrong storage class before use.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from my_utils.core.errors import InputError, UnsupportedInputError
from my_utils.profiling.nsys.read_checks import (
    NSYS_TABLE_NAME,
    PROGRESS_STEP,
    STEPS_ENV,
    ColumnKind,
    shown,
    step_budget,
)

SQLITE_MAGIC = b"SQLite format 3\x00"
#: Timestamps above this are already on the UTC epoch (2003-11 in ns), below it on the session clock.
EPOCH_THRESHOLD_NS = 10**18


@dataclass(frozen=True)
class ExportMeta:
    """What the exporter wrote about itself; ``family`` names the table it came from (or ``none``)."""

    family: str  # "META_DATA_EXPORT", "EXPORT_META_DATA" or "none"
    product_version: str | None
    schema_version: str | None
    time_normalized: bool | None  # True: timestamps already on the UTC epoch
    derived_from: str | None = None  # a sliced export names its parent

    @property
    def era(self) -> str:
        """A human label of the schema era: ``2021.x (no export metadata)``, ``2022.1.1.61``..."""
        return self.product_version or "2021.x or older (no export metadata)"


@dataclass(frozen=True)
class GpuInfo:
    """One GPU the export describes (figures absent from older exports are None)."""

    device: int
    name: str
    sm_count: int | None = None
    memory_bandwidth_bps: float | None = None  # bytes per second, as the export reports it
    clock_hz: float | None = None
    memory_bytes: int | None = None
    compute_capability: str | None = None
    source_table: str = ""



def _text(raw: bytes) -> str:
    # names and metadata of real exports are not always UTF-8 (a user name in Latin-1)
    return raw.decode("utf-8", errors="replace")


def _reason(exc: BaseException) -> str:
    if isinstance(exc, UnicodeDecodeError):  # sqlite built its message from damaged schema text
        return "the database is damaged: " + exc.object.decode("utf-8", errors="replace")
    return str(exc)


def quote_ident(name: str) -> str:
    """``name`` as an SQL identifier (double quotes doubled)."""
    return '"' + name.replace('"', '""') + '"'


class NsysExport:
    """One ``nsys export --type sqlite`` database, opened read-only, its schema read once.

    Use as a context manager (or call :meth:`close`). ``label`` names the export in tables
    (the file name by default); ``rank`` is the rank it was given by the caller, if any.
    :meth:`query` runs SQL and turns every SQLite failure into one ``InputError`` line that
    names the file and what was being read.
    """

    def __init__(self, path: str | Path, *, rank: int | None = None, label: str | None = None) -> None:
        self.path = Path(path)
        self.rank = rank
        self.label = label or self.path.name
        check_header(self.path)
        self.step_budget = step_budget(self.path.stat().st_size)  # before connecting: a bad setting leaks nothing
        self._steps = 0
        uri = self.path.resolve().as_uri() + "?mode=ro&immutable=1"
        try:
            self.conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
        except sqlite3.Error as exc:
            raise InputError(self.path, None, f"a readable SQLite database ({exc})") from None
        self.conn.text_factory = _text
        _math_functions(self.conn)
        self.conn.set_progress_handler(self._progress, PROGRESS_STEP)
        try:
            rows = self.conn.execute("SELECT name, type FROM sqlite_master WHERE type IN ('table', 'view')").fetchall()
        except (sqlite3.Error, UnicodeDecodeError) as exc:
            self.conn.close()
            raise InputError(self.path, "sqlite_master", f"a readable SQLite database ({_reason(exc)})") from None
        views = sorted(str(r[0]) for r in rows if r[1] == "view" and NSYS_TABLE_NAME.match(str(r[0])))
        if views:
            self.conn.close()
            raise InputError(self.path, f"table {views[0]}",
                             f"a table {views[0]!r} (nsys exports write tables); found a view in its place, which "
                             "may never finish: export the report again with `nsys export --type sqlite`")
        self.tables: frozenset[str] = frozenset(str(r[0]) for r in rows if r[1] == "table")
        self._columns: dict[str, tuple[str, ...]] = {}
        self._checked: set[str] = set()
        self.meta = self._read_meta()
        if "StringIds" not in self.tables and not any(t.startswith("CUPTI_ACTIVITY_KIND_") for t in self.tables):
            shown = ", ".join(sorted(self.tables)[:8]) or "none"
            self.conn.close()
            raise UnsupportedInputError(
                self.path, None,
                f"an Nsight Systems export (StringIds and CUPTI_ACTIVITY_KIND_* tables); found tables: {shown}")
        self.epoch_offset_ns = self._epoch_offset()
        self._views_made = False
        self.view_sql: tuple[str, ...] = ()  # the CREATE TEMP VIEW statements, once made

    # -- plumbing --------------------------------------------------------------------

    def __enter__(self) -> NsysExport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (the temporary views go with it)."""
        self.conn.close()

    def columns(self, table: str) -> tuple[str, ...]:
        """The columns of ``table`` in order (empty when the table is absent)."""
        if table not in self._columns:
            if table not in self.tables:
                self._columns[table] = ()
            else:
                rows = self.query(f"PRAGMA table_info({quote_ident(table)})", place=f"table {table}")
                self._columns[table] = tuple(str(r[1]) for r in rows)
        return self._columns[table]

    def has(self, table: str, *cols: str) -> bool:
        """Whether ``table`` exists and has every column in ``cols``."""
        return table in self.tables and set(cols) <= set(self.columns(table))

    def require(self, table: str, *cols: str) -> None:
        """Refuse a known table that lacks a column every export writes (one line: file, table, column)."""
        have = set(self.columns(table))
        for col in cols:
            if col not in have:
                raise InputError(self.path, f"table {table}",
                                 f"a column {col!r} (every nsys export writes it); the table has "
                                 f"{', '.join(self.columns(table)) or 'no columns'}")

    def first_column(self, table: str, *candidates: str) -> str | None:
        """The first of ``candidates`` that ``table`` has (a column that moved between versions)."""
        have = set(self.columns(table))
        return next((c for c in candidates if c in have), None)

    def _progress(self) -> int:
        """SQLite's progress handler: stop the statement once it has taken its budget of steps."""
        self._steps += PROGRESS_STEP
        return 1 if self._steps > self.step_budget else 0

    def _failed(self, exc: BaseException, place: str) -> InputError:
        """The one line of a statement that failed, or that was stopped past its budget of steps."""
        if isinstance(exc, sqlite3.OperationalError) and self._steps > self.step_budget:
            return InputError(self.path, place, f"a query that ends within {self.step_budget:,} SQLite steps; it was "
                                                "stopped there (an endless join or a damaged table?). Raise "
                                                f"${STEPS_ENV} if this export really needs more")
        return InputError(self.path, place, f"a readable nsys export ({_reason(exc)})")

    def query(self, sql: str, params: Mapping[str, Any] | Sequence[Any] = (), *,
              place: str = "query") -> list[tuple[Any, ...]]:
        """All rows of ``sql`` (use for aggregates: the caller bounds the row count)."""
        self._steps = 0
        try:
            return self.conn.execute(sql, params).fetchall()
        except (sqlite3.Error, UnicodeDecodeError, OverflowError) as exc:
            raise self._failed(exc, place) from None

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]], *, place: str = "query") -> None:
        """``sql`` once per row (inserts into temporary tables), under the same budget and errors as :meth:`query`."""
        self._steps = 0
        try:
            self.conn.executemany(sql, rows)
        except (sqlite3.Error, UnicodeDecodeError, OverflowError) as exc:
            raise self._failed(exc, place) from None

    def check_columns(self, table: str, kinds: Mapping[str, ColumnKind]) -> None:
        """Refuse ``table`` when one of its columns in ``kinds`` holds a value of another kind, in one line.

        Checked once per table, in one pass, before anything reads it: a BLOB or TEXT where a
        time is read, a REAL device id... would give wrong figures, a crash, or a lane loop.
        Columns the table lacks are skipped (the views make them NULL).
        """
        have = self.columns(table)
        cols = [c for c in kinds if c in have]
        if table in self._checked or not cols:
            return
        self._checked.add(table)
        where = " OR ".join(f"NOT {kinds[c].condition(quote_ident(c))}" for c in cols)
        listed = ", ".join(quote_ident(c) for c in cols)
        rows = self.query(f"SELECT rowid, {listed} FROM {quote_ident(table)} WHERE {where} LIMIT 1",
                          place=f"table {table}")
        if not rows:
            return
        rowid, values = rows[0][0], rows[0][1:]
        for col, value in zip(cols, values, strict=True):
            if not kinds[col].accepts(value):
                raise InputError(self.path, f"table {table} row {rowid}",
                                 f"{kinds[col].expected(col, table, value)}; found {shown(value)}")

    def iterate(self, sql: str, params: Mapping[str, Any] | Sequence[Any] = (), *,
                place: str = "query", batch: int = 1000) -> Iterator[tuple[Any, ...]]:
        """Rows of ``sql`` a batch at a time (memory stays bounded whatever the row count)."""
        _, cur = self.description(sql, params, place=place)
        return self.iterate_cursor(cur, place=place, batch=batch)

    def description(self, sql: str, params: Mapping[str, Any] | Sequence[Any] = (), *,
                    place: str = "query") -> tuple[list[str], sqlite3.Cursor]:
        """The column names and an open cursor of ``sql`` (read it with :meth:`iterate_cursor`)."""
        self._steps = 0
        try:
            cur = self.conn.execute(sql, params)
        except (sqlite3.Error, UnicodeDecodeError, OverflowError) as exc:
            raise self._failed(exc, place) from None
        return [d[0] for d in cur.description or ()], cur

    def iterate_cursor(self, cur: sqlite3.Cursor, *, place: str = "query",
                       batch: int = 1000) -> Iterator[tuple[Any, ...]]:
        """The rows of an open cursor a batch at a time, SQLite failures as one InputError line."""
        try:
            while True:
                rows = cur.fetchmany(batch)
                if not rows:
                    return
                yield from rows
        except (sqlite3.Error, UnicodeDecodeError, OverflowError) as exc:
            raise self._failed(exc, place) from None

    def ensure_views(self) -> None:
        """Create the canonical temporary views (:mod:`.views`) once per connection."""
        if not self._views_made:
            from my_utils.profiling.nsys.views import create_views

            create_views(self)
            self._views_made = True

    # -- what the export says about itself --------------------------------------------

    def _read_meta(self) -> ExportMeta:
        for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
            if self.has(table, "name", "value"):
                values = dict(self.query(f"SELECT name, value FROM {table}", place=f"table {table}"))
                norm = values.get("EXPORT_PARAM_TIME_NORMALIZE")
                return ExportMeta(
                    family=table, product_version=_str(values.get("EXPORT_PRODUCT_VERSION")),
                    schema_version=_str(values.get("EXPORT_SCHEMA_VERSION")),
                    time_normalized=None if norm is None else str(norm).strip().lower() == "true",
                    derived_from=_str(values.get("DERIVED_FROM")),
                )
        return ExportMeta("none", None, None, None)

    def _epoch_offset(self) -> int | None:
        """What to add to a timestamp to put it on the UTC epoch (None: the export does not say)."""
        probe = None
        for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS", "OSRT_API"):
            if self.has(table, "start"):
                probe = self.query(f"SELECT MIN(start) FROM {table}", place=f"table {table}")[0][0]
                if isinstance(probe, int):
                    break
        if self.meta.time_normalized or (isinstance(probe, int) and probe >= EPOCH_THRESHOLD_NS):
            return 0
        if self.has("TARGET_INFO_SESSION_START_TIME", "utcEpochNs"):
            row = self.query("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1",
                             place="table TARGET_INFO_SESSION_START_TIME")
            if row and isinstance(row[0][0], int):
                return int(row[0][0])
        return None

    def gpus(self) -> tuple[GpuInfo, ...]:
        """The CUDA GPUs the export describes, by CUDA device ordinal (empty when it has no GPU table).

        2022+ ``TARGET_INFO_GPU`` reports bytes/s and Hz and lists non-CUDA adapters too
        (``smCount`` 0, e.g. an integrated GPU on a laptop): those are left out, and the CUDA
        ordinal is ``cuDevice`` (``id`` can differ from it). 2021's ``TARGET_INFO_CUDA_GPU``
        reports kB/s and kHz: converted here.
        """
        t = "TARGET_INFO_GPU"
        dev = self.first_column(t, "cuDevice", "id")
        if dev and self.has(t, "name", "smCount", "memoryBandwidth", "clockRate"):
            cc = "computeMajor || '.' || computeMinor" if self.has(t, "computeMajor", "computeMinor") else "NULL"
            mem = "totalMemory" if self.has(t, "totalMemory") else "NULL"
            rows = self.query(f"SELECT {dev}, name, smCount, memoryBandwidth, clockRate, {mem}, {cc} FROM {t} "
                              f"WHERE smCount > 0 ORDER BY {dev}, smCount DESC", place=f"table {t}")
            out: dict[int, GpuInfo] = {}
            for r in rows:
                if isinstance(r[0], int) and r[0] not in out:
                    out[r[0]] = GpuInfo(r[0], str(r[1] or ""), _int(r[2]), _float(r[3]), _float(r[4]), _int(r[5]),
                                        _str(r[6]), t)
            return tuple(out.values())
        t = "TARGET_INFO_CUDA_GPU"
        if self.has(t, "name", "deviceId", "numMultiprocessors", "globalMemoryBandwidth", "coreClockRate"):
            size = "globalMemorySize" if self.has(t, "globalMemorySize") else "NULL"
            cc = ("computeCapabilityMajor || '.' || computeCapabilityMinor"
                  if self.has(t, "computeCapabilityMajor", "computeCapabilityMinor") else "NULL")
            rows = self.query(f"SELECT deviceId, name, numMultiprocessors, globalMemoryBandwidth * 1000.0, "
                              f"coreClockRate * 1000.0, {size}, {cc} FROM {t} ORDER BY deviceId", place=f"table {t}")
            return tuple(GpuInfo(int(r[0]), str(r[1] or ""), _int(r[2]), _float(r[3]), _float(r[4]), _int(r[5]),
                                 _str(r[6]), t) for r in rows if isinstance(r[0], int))
        t = "TARGET_INFO_GPU"
        dev = self.first_column(t, "deviceId", "cuDevice", "id")
        if dev and self.has(t, "name"):
            rows = self.query(f"SELECT {dev}, name FROM {t} ORDER BY {dev}", place=f"table {t}")
            return tuple(GpuInfo(int(r[0]), str(r[1] or ""), source_table=t) for r in rows if isinstance(r[0], int))
        return ()


def _math_functions(conn: sqlite3.Connection) -> None:
    """``sqrt`` for the queries' standard deviations, where SQLite was built without its math functions."""
    try:
        conn.execute("SELECT sqrt(4.0)").fetchone()
    except sqlite3.OperationalError:
        conn.create_function("sqrt", 1, _sqrt, deterministic=True)


def _sqrt(x: Any) -> float | None:
    return math.sqrt(x) if isinstance(x, (int, float)) and x >= 0 else None


def check_header(path: Path) -> None:
    """Refuse a file that is not an SQLite database (nsys console text is said to be one), in one line."""
    from my_utils.core.safe_io import open_regular

    try:
        with open_regular(path) as fh:
            head = fh.read(16)
    except OSError as exc:
        raise InputError(path, None, f"a readable file ({exc.strerror or exc})") from None
    if head != SQLITE_MAGIC:
        hint = ("; this looks like text (nsys console output?): export with `nsys export --type sqlite`"
                if head[:1].isascii() and head.strip() else "")
        raise UnsupportedInputError(path, "byte 0", f"an SQLite database (nsys export --type sqlite){hint}")


def _str(v: Any) -> str | None:
    return None if v is None else str(v)


def _int(v: Any) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _float(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
