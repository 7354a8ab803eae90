"""The canonical views every analysis and named query reads, whatever the exporter version.

:func:`create_views` builds, in SQLite's temporary schema of one connection (the export
itself is never written):

``nsys_kernel``
    ``start, end, dur, device, stream, context, pid, corr, name_id, name, short_name, kind,
    collective, grid_x, grid_y, grid_z, block_x, block_y, block_z, registers`` — ``name`` the
    demangled name (else the short one), ``kind`` the kernel kind of
    :func:`my_utils.profiling.kineto.kinds.kind_of` (``computation``,
    ``communication``, ``memory``, ``other``) and ``collective`` the NCCL collective of a
    communication kernel (:func:`.nccl_ops.collective_of`), both decided once per distinct name.
``nsys_memcpy``
    ``start, end, dur, device, stream, pid, corr, bytes, copy_kind, direction`` (``HtoD``...).
``nsys_memset``
    ``start, end, dur, device, stream, pid, corr, bytes``.
``nsys_gpu_op``
    kernels, copies and sets together: ``start, end, dur, device, stream, pid, corr, op``
    (``kernel``/``memcpy``/``memset``), ``kind`` (copies and sets are ``memory``), ``name``, ``bytes``.
``nsys_runtime`` / ``nsys_osrt``
    CUDA runtime/driver API calls and OS runtime calls: ``start, end, dur, tid, pid, corr, name``
    (the CUDA *backtrace* copies of calls some exports add, ``eventClass`` 67-69, are left out).
``nsys_nvtx``
    NVTX ranges (push/pop and start/end, every era's numbering): ``start, end, dur, tid, pid,
    name, domain_id, domain, event_type``.
``nsys_sync``
    CUDA synchronisation activities: ``start, end, dur, device, stream, pid, sync_type``.
``nsys_gpu``
    ``device, name, sm_count, memory_bandwidth_bps, clock_hz`` (:meth:`NsysExport.gpus`).
``nsys_export``
    one row: ``label, rank, epoch_offset_ns, product_version, schema_version, family``.

Times are nanoseconds on the export's clock; add ``nsys_export.epoch_offset_ns`` for the
UTC epoch. ``pid`` is nsys's global process id (``globalPid``; for CPU tables derived from
``globalTid``), so CPU and GPU rows of one process join on it. An absent table gives an
empty view with the same columns, so every query runs on every export. Rows whose end
precedes their start (an unfinished range) are left out. Every column a view reads is checked
first (:data:`~.read_checks.COLUMN_KINDS`): a value of another storage class is refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from my_utils.core.errors import InputError
from my_utils.profiling.nsys.read_checks import COLUMN_KINDS

if TYPE_CHECKING:
    from my_utils.profiling.nsys.schema import NsysExport

#: ``CUpti_ActivityMemcpyKind``: the copy direction of ``CUPTI_ACTIVITY_KIND_MEMCPY.copyKind``.
COPY_DIRECTIONS: dict[int, str] = {0: "unknown", 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA",
                                   6: "AtoD", 7: "DtoA", 8: "DtoD", 9: "HtoH", 10: "PtoP"}
#: ``NVTX_EVENTS.eventType`` values of ranges: push/pop and start/end (59/60; 70/71 in some eras).
NVTX_RANGE_TYPES: tuple[int, ...] = (59, 60, 70, 71)
NVTX_DOMAIN_CREATE = 75
#: ``eventClass`` of the CUDA *backtrace* rows some exports add to the runtime table (2021.x, 2022.2):
#: the same call again (same correlation id) carrying its call stack, not a second call.
CUDA_BACKTRACE_CLASSES: tuple[int, ...] = (67, 68, 69)

VIEW_COLUMNS: dict[str, tuple[str, ...]] = {
    "nsys_kernel": ("start", "end", "dur", "device", "stream", "context", "pid", "corr", "name_id", "name",
                    "short_name", "kind", "collective", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
                    "registers"),
    "nsys_memcpy": ("start", "end", "dur", "device", "stream", "pid", "corr", "bytes", "copy_kind", "direction"),
    "nsys_memset": ("start", "end", "dur", "device", "stream", "pid", "corr", "bytes"),
    "nsys_runtime": ("start", "end", "dur", "tid", "pid", "corr", "name"),
    "nsys_osrt": ("start", "end", "dur", "tid", "pid", "corr", "name"),
    "nsys_nvtx": ("start", "end", "dur", "tid", "pid", "name", "domain_id", "domain", "event_type"),
    "nsys_sync": ("start", "end", "dur", "device", "stream", "pid", "sync_type"),
}

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
SYNC = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
OSRT = "OSRT_API"
NVTX = "NVTX_EVENTS"


def _empty(view: str) -> str:
    cols = ", ".join(f"NULL AS {c}" for c in VIEW_COLUMNS[view])
    return f"CREATE TEMP VIEW {view} AS SELECT {cols} LIMIT 0"


def _opt(db: NsysExport, table: str, col: str, alias: str = "t") -> str:
    return f"{alias}.{col}" if col in db.columns(table) else "NULL"


def _pid_of_tid(db: NsysExport, table: str) -> str:
    # nsys packs the process into the high bits of a global thread id: globalPid = (globalTid >> 24) << 24
    return "((t.globalTid >> 24) << 24)" if "globalTid" in db.columns(table) else "NULL"


def _strings(db: NsysExport) -> bool:
    return db.has("StringIds", "id", "value")


def _string_join(db: NsysExport, alias: str, col: str) -> tuple[str, str]:
    """(join clause, value expression) for an id column resolved through StringIds."""
    if not _strings(db):
        return "", "NULL"
    return f"LEFT JOIN StringIds {alias} ON {alias}.id = {col}", f"{alias}.value"


def create_views(db: NsysExport) -> None:
    """Create the canonical temporary views on ``db``'s connection (see the module doc)."""
    statements: list[str] = []
    for table, kinds in COLUMN_KINDS.items():  # before any read: one line for a BLOB, TEXT or REAL where a number is
        if table in db.tables:
            db.check_columns(table, kinds)
    _kernel_kinds(db)
    statements.append(_kernel_view(db))
    statements.append(_memcpy_view(db))
    statements.append(_memset_view(db))
    statements.append(_api_view(db, RUNTIME, "nsys_runtime"))
    statements.append(_api_view(db, OSRT, "nsys_osrt"))
    statements.append(_nvtx_view(db))
    statements.append(_sync_view(db))
    statements.append(
        "CREATE TEMP VIEW nsys_gpu_op AS "
        "SELECT start, end, dur, device, stream, pid, corr, 'kernel' AS op, kind, name, NULL AS bytes FROM nsys_kernel "
        "UNION ALL SELECT start, end, dur, device, stream, pid, corr, 'memcpy', 'memory', 'Memcpy ' || direction, "
        "bytes FROM nsys_memcpy "
        "UNION ALL SELECT start, end, dur, device, stream, pid, corr, 'memset', 'memory', 'Memset', bytes "
        "FROM nsys_memset")
    for sql in statements:
        db.query(sql, place="creating the canonical views")
    db.view_sql = tuple(statements)  # shown by `nsys sql views`
    _gpu_table(db)
    _export_table(db)


def _kernel_kinds(db: NsysExport) -> None:
    """One row per distinct kernel name id with its kind (a Python rule table, applied per name, not per row)."""
    from my_utils.profiling.kineto.kinds import kind_of
    from my_utils.profiling.nsys.nccl_ops import collective_of

    db.query("CREATE TEMP TABLE nsys_kernel_kind (id INTEGER PRIMARY KEY, kind TEXT NOT NULL, collective TEXT)",
             place="temp")
    col = _kernel_name_col(db)
    if col is None:
        return
    join, value = _string_join(db, "s", "k.id")
    rows = db.iterate(f"SELECT k.id, {value} FROM (SELECT DISTINCT {col} AS id FROM {KERNEL}) k {join}",
                      place=f"table {KERNEL}")
    batch: list[tuple[int, str, str | None]] = []
    for ident, name in rows:
        if isinstance(ident, int):
            text = str(name) if name is not None else f"kernel#{ident}"
            kind = kind_of(text).value
            batch.append((ident, kind, collective_of(text) if kind == "communication" else None))
    db.executemany("INSERT OR REPLACE INTO temp.nsys_kernel_kind VALUES (?, ?, ?)", batch, place="temp")


def _kernel_name_col(db: NsysExport) -> str | None:
    if KERNEL not in db.tables:
        return None
    col = db.first_column(KERNEL, "demangledName", "shortName", "mangledName")
    if col is None:
        raise InputError(db.path, f"table {KERNEL}",
                         "a kernel name column (demangledName, shortName or mangledName); the table has "
                         + ", ".join(db.columns(KERNEL)))
    return col


def _kernel_view(db: NsysExport) -> str:
    if KERNEL not in db.tables:
        return _empty("nsys_kernel")
    db.require(KERNEL, "start", "end", "deviceId", "streamId")
    col = _kernel_name_col(db)
    short = "shortName" if "shortName" in db.columns(KERNEL) else col
    njoin, nval = _string_join(db, "n", f"t.{col}")
    sjoin, sval = _string_join(db, "sn", f"t.{short}")
    o = lambda c: _opt(db, KERNEL, c)  # noqa: E731
    return (
        "CREATE TEMP VIEW nsys_kernel AS SELECT t.start AS start, t.end AS end, t.end - t.start AS dur, "
        f"t.deviceId AS device, t.streamId AS stream, {o('contextId')} AS context, {o('globalPid')} AS pid, "
        f"{o('correlationId')} AS corr, t.{col} AS name_id, COALESCE({nval}, 'kernel#' || t.{col}) AS name, "
        f"COALESCE({sval}, {nval}, 'kernel#' || t.{col}) AS short_name, COALESCE(kk.kind, 'computation') AS kind, "
        "kk.collective AS collective, "
        f"{o('gridX')} AS grid_x, {o('gridY')} AS grid_y, {o('gridZ')} AS grid_z, {o('blockX')} AS block_x, "
        f"{o('blockY')} AS block_y, {o('blockZ')} AS block_z, {o('registersPerThread')} AS registers "
        f"FROM {KERNEL} t {njoin} {sjoin} LEFT JOIN temp.nsys_kernel_kind kk ON kk.id = t.{col} "
        "WHERE t.end >= t.start"
    )


def _direction_case(col: str) -> str:
    whens = " ".join(f"WHEN {k} THEN '{v}'" for k, v in COPY_DIRECTIONS.items())
    return f"CASE {col} {whens} ELSE 'kind' || {col} END"


def _memcpy_view(db: NsysExport) -> str:
    if MEMCPY not in db.tables:
        return _empty("nsys_memcpy")
    db.require(MEMCPY, "start", "end", "deviceId", "streamId", "copyKind", "bytes")
    o = lambda c: _opt(db, MEMCPY, c)  # noqa: E731
    return (
        "CREATE TEMP VIEW nsys_memcpy AS SELECT t.start AS start, t.end AS end, t.end - t.start AS dur, "
        f"t.deviceId AS device, t.streamId AS stream, {o('globalPid')} AS pid, {o('correlationId')} AS corr, "
        f"t.bytes AS bytes, t.copyKind AS copy_kind, {_direction_case('t.copyKind')} AS direction "
        f"FROM {MEMCPY} t WHERE t.end >= t.start"
    )


def _memset_view(db: NsysExport) -> str:
    if MEMSET not in db.tables:
        return _empty("nsys_memset")
    db.require(MEMSET, "start", "end", "deviceId", "streamId", "bytes")
    o = lambda c: _opt(db, MEMSET, c)  # noqa: E731
    return (
        "CREATE TEMP VIEW nsys_memset AS SELECT t.start AS start, t.end AS end, t.end - t.start AS dur, "
        f"t.deviceId AS device, t.streamId AS stream, {o('globalPid')} AS pid, {o('correlationId')} AS corr, "
        f"t.bytes AS bytes FROM {MEMSET} t WHERE t.end >= t.start"
    )


def _api_view(db: NsysExport, table: str, view: str) -> str:
    if table not in db.tables:
        return _empty(view)
    db.require(table, "start", "end", "nameId")
    join, value = _string_join(db, "s", "t.nameId")
    skip = ""
    if table == RUNTIME and "eventClass" in db.columns(table):
        skip = f" AND t.eventClass NOT IN ({', '.join(str(c) for c in CUDA_BACKTRACE_CLASSES)})"
    return (
        f"CREATE TEMP VIEW {view} AS SELECT t.start AS start, t.end AS end, t.end - t.start AS dur, "
        f"{_opt(db, table, 'globalTid')} AS tid, {_pid_of_tid(db, table)} AS pid, "
        f"{_opt(db, table, 'correlationId')} AS corr, COALESCE({value}, 'api#' || t.nameId) AS name "
        f"FROM {table} t {join} WHERE t.end >= t.start{skip}"
    )


def _nvtx_view(db: NsysExport) -> str:
    db.query("CREATE TEMP TABLE nsys_nvtx_domain (pid INTEGER, domain_id INTEGER, name TEXT)", place="temp")
    if NVTX not in db.tables:
        return _empty("nsys_nvtx")
    db.require(NVTX, "start", "end", "eventType")
    cols = db.columns(NVTX)
    parts = [p for p in ("t.text" if "text" in cols else "",) if p]
    join = ""
    if "textId" in cols and _strings(db):
        join = "LEFT JOIN StringIds s ON s.id = t.textId"
        parts.append("s.value")
    label = f"COALESCE({', '.join(parts)}, '(unnamed)')" if parts else "'(unnamed)'"
    pid = _pid_of_tid(db, NVTX)
    dom = "t.domainId" if "domainId" in cols else "NULL"
    if "domainId" in cols:
        db.query(f"INSERT INTO temp.nsys_nvtx_domain SELECT DISTINCT {pid}, t.domainId, {label} FROM {NVTX} t "
                 f"{join} WHERE t.eventType = {NVTX_DOMAIN_CREATE}", place=f"table {NVTX}")
    types = ", ".join(str(v) for v in NVTX_RANGE_TYPES)
    return (
        "CREATE TEMP VIEW nsys_nvtx AS SELECT t.start AS start, t.end AS end, t.end - t.start AS dur, "
        f"{_opt(db, NVTX, 'globalTid')} AS tid, {pid} AS pid, {label} AS name, {dom} AS domain_id, "
        f"COALESCE(d.name, '') AS domain, t.eventType AS event_type FROM {NVTX} t {join} "
        f"LEFT JOIN temp.nsys_nvtx_domain d ON d.domain_id = {dom} AND d.pid IS {pid} "
        f"WHERE t.eventType IN ({types}) AND t.end >= t.start"
    )


def _sync_view(db: NsysExport) -> str:
    if SYNC not in db.tables:
        return _empty("nsys_sync")
    db.require(SYNC, "start", "end")
    o = lambda c: _opt(db, SYNC, c)  # noqa: E731
    return (
        "CREATE TEMP VIEW nsys_sync AS SELECT t.start AS start, t.end AS end, t.end - t.start AS dur, "
        f"{o('deviceId')} AS device, {o('streamId')} AS stream, {o('globalPid')} AS pid, {o('syncType')} AS sync_type "
        f"FROM {SYNC} t WHERE t.end >= t.start"
    )


def _gpu_table(db: NsysExport) -> None:
    db.query("CREATE TEMP TABLE nsys_gpu (device INTEGER PRIMARY KEY, name TEXT, sm_count INTEGER, "
             "memory_bandwidth_bps REAL, clock_hz REAL)", place="temp")
    db.executemany("INSERT INTO temp.nsys_gpu VALUES (?, ?, ?, ?, ?)",
                   [(g.device, g.name, g.sm_count, g.memory_bandwidth_bps, g.clock_hz) for g in db.gpus()], place="temp")


def _export_table(db: NsysExport) -> None:
    db.query("CREATE TEMP TABLE nsys_export (label TEXT, rank INTEGER, epoch_offset_ns INTEGER, "
             "product_version TEXT, schema_version TEXT, family TEXT)", place="temp")
    m = db.meta
    db.query("INSERT INTO temp.nsys_export VALUES (?, ?, ?, ?, ?, ?)",
             (db.label, db.rank, db.epoch_offset_ns, m.product_version, m.schema_version, m.family), place="temp")
