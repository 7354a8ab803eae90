"""NCCL message sizes from NCCL's own NVTX payloads, attributed to the kernels they launched — or why there are none.

Since NCCL 2.16.2 (its release notes: "Extend NVTX instrumentation with call arguments") every
NCCL call opens an NVTX range in the ``NCCL`` domain (``ncclAllReduce``, ``ncclSend``,
``ncclGroupEnd``...) carrying a binary payload whose layout NCCL registers as a schema: the
export lists the schemas in ``NVTX_PAYLOAD_SCHEMAS`` / ``NVTX_PAYLOAD_SCHEMA_ENTRIES`` (each
entry's ``name``, ``type`` and byte ``offset``; NCCL names the size ``Message size [bytes]``, a
``size_t``, the per-rank count × the type's size: ``sendcount`` for all-gather, ``recvcount`` for
reduce-scatter) and each call's bytes in ``NVTX_EVENTS.binaryData``. The bytes are written only
by ``nsys export --include-blobs=true`` (nsys 2026.x records the choice as
``EXPORT_PARAM_INCLUDE_BLOBS``); every real export we hold — 2024.5 and 2026.2 — has the
schemas but no bytes, so sizes are recorded nowhere in them, and the tables say so.

A ``binaryData`` value starts with a 32-byte header of four little-endian 64-bit words — the
NVTX domain id, the schema id, the payload's size and its offset — then the payload: the
layout nsys 2026.x writes as decoded by GindaChen/nsys-ai's ``nccl_communicator.py`` (a third
party: NVIDIA documents the column as "Binary payload"). A value is decoded only when its header
names the event's own domain and a registered schema that has the size entry, and the payload
holds that entry; anything else is "undecodable", never a guessed size. A value stored as hex
text is read as the bytes it spells.

Attribution (SQL): an NCCL kernel's launching CUDA call (correlation id) runs on one thread;
the NCCL calls of that thread that started after the thread's previous NCCL launch and before
this one are the calls this kernel carries out (one call, or the calls of a group, which NCCL
fuses into one launch at ``ncclGroupEnd``). Its size is the sum of those calls' sizes of its
own collective; for a ``SendRecv`` kernel, the larger of the summed sends and the summed receives
(per direction, as the link figures are). :func:`kernel_sizes` leaves one row per NCCL kernel in
the temporary table ``nsys_nccl_size``: ``pid, device, start, end, bytes, calls, note`` (``bytes``
null and ``note`` the reason when unknown).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from my_utils.profiling.nsys.schema import NsysExport

SIZE_FIELD = "Message size [bytes]"
NCCL_DOMAIN = "NCCL"
NCCL_PAYLOAD_SINCE = "2.16.2"
HEADER = struct.Struct("<QQQQ")
#: Bytes of the integer payload entry types (``NVTX_PAYLOAD_ENTRY_TYPE_*`` of ``nvToolsExtPayload.h``, LP64).
INT_BYTES: dict[int, int] = {5: 4, 6: 4, 7: 8, 8: 8, 9: 8, 10: 8, 15: 4, 16: 4, 17: 8, 18: 8, 22: 8}
_NEED = (f"NCCL NVTX payloads need NCCL >= {NCCL_PAYLOAD_SINCE} and an export with their bytes "
         "(nsys export --include-blobs=true)")
#: Why a kernel's size is unknown, by the kind of evidence found (one table, so each sentence is written once).
REASONS: dict[str, str] = {
    "no_nvtx": f"size not recorded in this export: no NVTX ranges of NCCL (profile with --trace nvtx); {_NEED}",
    "no_schema": (f"size not recorded in this export: NCCL's NVTX ranges carry no size schema (NCCL older than "
                  f"{NCCL_PAYLOAD_SINCE}); {_NEED}"),
    "no_bytes": ("size not recorded in this export: NCCL registered its size payload, but the export left the "
                 "payload bytes out (NVTX_EVENTS.binaryData empty); re-export with nsys export --include-blobs=true"),
    "no_call": ("size not recorded: no NCCL call with a size ran on the launching thread since its previous NCCL "
                "launch (a CUDA graph replay, or a launch from another thread)"),
    "undecodable": ("size not recorded: the NCCL call's payload bytes could not be decoded (header names no size "
                    "schema of the call's domain)"),
    "other": "size not recorded: the NCCL calls before this launch are of another collective",
}


@dataclass(frozen=True)
class SizeSchema:
    """A registered NCCL payload schema that has the size entry: where the size is and how wide."""

    domain_id: int
    schema_id: int
    offset: int
    width: int


def size_schemas(db: NsysExport) -> dict[tuple[int, int], SizeSchema]:
    """The registered payload schemas that have NCCL's size entry, by (domain id, schema id)."""
    if not db.has("NVTX_PAYLOAD_SCHEMA_ENTRIES", "domainId", "schemaId", "name", "type", "offset"):
        return {}
    rows = db.query('SELECT DISTINCT domainId, schemaId, type, COALESCE("offset", 0) FROM NVTX_PAYLOAD_SCHEMA_ENTRIES '
                    "WHERE name = ?", (SIZE_FIELD,), place="table NVTX_PAYLOAD_SCHEMA_ENTRIES")
    out: dict[tuple[int, int], SizeSchema] = {}
    for dom, sid, typ, off in rows:
        width = INT_BYTES.get(typ) if isinstance(typ, int) else None
        if isinstance(dom, int) and isinstance(sid, int) and isinstance(off, int) and width is not None:
            out[(dom, sid)] = SizeSchema(dom, sid, off, width)
    return out


def decode_size(blob: Any, domain_id: int | None, schemas: dict[tuple[int, int], SizeSchema]) -> int | None:
    """The message size in one ``binaryData`` value (module doc), or None when it cannot be decoded."""
    if isinstance(blob, str):
        blob = blob.encode("utf-8", "surrogateescape")
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        return None
    data = bytes(blob)
    if len(data) >= 2 * HEADER.size and len(data) % 2 == 0 and all(c in b"0123456789abcdefABCDEF" for c in data):
        data = bytes.fromhex(data.decode("ascii"))
    if len(data) < HEADER.size:
        return None
    dom, sid, _size, _offset = HEADER.unpack_from(data)
    schema = schemas.get((dom, sid))
    if schema is None or (domain_id is not None and dom != domain_id):
        return None
    at = HEADER.size + schema.offset
    if at + schema.width > len(data):
        return None
    return int.from_bytes(data[at:at + schema.width], "little")


def export_reason(db: NsysExport, schemas: dict[tuple[int, int], SizeSchema]) -> str | None:
    """The reason (a key of :data:`REASONS`) no NCCL call of the export has a size, or None when some may."""
    db.query("DROP TABLE IF EXISTS temp.nsys_nccl_domain", place="temp")
    # NCCL's domain by its name; a sliced export may have lost the domain's naming event: then an unnamed
    # non-default domain whose ranges are NCCL's function names (ncclAllReduce, ncclGroupEnd...)
    db.query("CREATE TEMP TABLE nsys_nccl_domain AS SELECT DISTINCT pid, domain_id FROM nsys_nvtx WHERE domain = ? "
             "OR (domain = '' AND domain_id IS NOT NULL AND domain_id != 0 AND name GLOB 'nccl[A-Z]*')",
             (NCCL_DOMAIN,), place="NVTX ranges")
    if not db.query("SELECT 1 FROM temp.nsys_nccl_domain LIMIT 1", place="temp"):
        return "no_nvtx"
    if not schemas:
        return "no_schema"
    if "binaryData" not in db.columns("NVTX_EVENTS"):
        return "no_bytes"
    blobs = db.query("SELECT 1 FROM NVTX_EVENTS WHERE binaryData IS NOT NULL LIMIT 1", place="table NVTX_EVENTS")
    return None if blobs else "no_bytes"


def _calls(db: NsysExport, schemas: dict[tuple[int, int], SizeSchema]) -> Iterator[tuple[Any, ...]]:
    """(tid, start, name, bytes) of every NCCL call (range of the NCCL domain), its payload decoded."""
    cols = db.columns("NVTX_EVENTS")
    types = "59, 60, 70, 71"  # the range event types of every era (views.NVTX_RANGE_TYPES)
    text = "t.text" if "text" in cols else "NULL"
    join = "LEFT JOIN StringIds s ON s.id = t.textId" if "textId" in cols and db.has("StringIds", "id") else ""
    name = f"COALESCE({text}, s.value)" if join else text
    sql = (f"SELECT t.globalTid, t.start, {name}, t.domainId, CAST(t.binaryData AS BLOB) FROM NVTX_EVENTS t {join} "
           f"JOIN temp.nsys_nccl_domain d ON d.domain_id = t.domainId AND d.pid IS ((t.globalTid >> 24) << 24) "
           f"WHERE t.eventType IN ({types}) AND t.end >= t.start")
    for tid, start, label, dom, blob in db.iterate(sql, place="NCCL NVTX payloads"):
        size = decode_size(blob, dom, schemas) if blob is not None else None
        yield tid, start, str(label or ""), size, blob is not None


def kernel_sizes(db: NsysExport) -> str | None:
    """Fill ``temp.nsys_nccl_size`` (module doc); return the export-wide reason key when no kernel can have a size."""
    db.ensure_views()
    db.query("DROP TABLE IF EXISTS temp.nsys_nccl_size", place="temp")
    db.query("CREATE TEMP TABLE nsys_nccl_size (pid INTEGER, device INTEGER, start INTEGER, end INTEGER, "
             "bytes INTEGER, calls INTEGER, note TEXT)", place="temp")
    schemas = size_schemas(db)
    reason = export_reason(db, schemas) if "NVTX_EVENTS" in db.tables else "no_nvtx"
    if reason is not None:
        return reason
    db.query("CREATE TEMP TABLE nsys_nccl_call (tid INTEGER, start INTEGER, name TEXT, bytes INTEGER, blob INTEGER)",
             place="temp")
    db.conn.executemany("INSERT INTO temp.nsys_nccl_call VALUES (?, ?, ?, ?, ?)",
                        ((tid, s, n, b, int(has)) for tid, s, n, b, has in _calls(db, schemas)))
    db.query("CREATE INDEX temp.nsys_nccl_call_at ON nsys_nccl_call (tid, start)", place="temp")
    sql = ("WITH launch AS ("
           "  SELECT k.pid, k.device, k.start, k.end, k.collective, r.tid, r.start AS t,"
           "         LAG(r.start) OVER (PARTITION BY r.tid ORDER BY r.start) AS prev"
           "  FROM nsys_kernel k JOIN nsys_runtime r ON r.pid IS k.pid AND r.corr = k.corr"
           "  WHERE k.kind = 'communication')"
           " SELECT l.pid, l.device, l.start, l.end, l.collective, c.name, c.bytes, c.blob FROM launch l"
           " LEFT JOIN nsys_nccl_call c ON c.tid = l.tid AND c.start <= l.t AND c.start > COALESCE(l.prev, -9223372036854775807)"
           " ORDER BY l.pid, l.device, l.start, l.end")
    out: list[tuple[Any, ...]] = []
    key: tuple[Any, ...] | None = None
    calls: list[tuple[str, int | None, int]] = []
    coll: str | None = None
    for pid, device, start, end, collective, name, size, blob in db.iterate(sql, place="NCCL kernels and calls"):
        if (pid, device, start, end) != key:
            if key is not None:
                out.append((*key, *_fold(coll, calls)))
            key, coll, calls = (pid, device, start, end), collective, []
        if name is not None:
            calls.append((str(name), size, int(blob or 0)))
        if len(out) >= 1000:
            db.conn.executemany("INSERT INTO temp.nsys_nccl_size VALUES (?, ?, ?, ?, ?, ?, ?)", out)
            out = []
    if key is not None:
        out.append((*key, *_fold(coll, calls)))
    db.conn.executemany("INSERT INTO temp.nsys_nccl_size VALUES (?, ?, ?, ?, ?, ?, ?)", out)
    # kernels launched by no traced CUDA call (no correlation) have no row above: say why
    db.query("INSERT INTO temp.nsys_nccl_size SELECT k.pid, k.device, k.start, k.end, NULL, 0, ? FROM nsys_kernel k "
             "WHERE k.kind = 'communication' AND NOT EXISTS (SELECT 1 FROM temp.nsys_nccl_size z WHERE z.pid IS k.pid "
             "AND z.device IS k.device AND z.start = k.start AND z.end = k.end)", (REASONS["no_call"],), place="temp")
    return None


def _fold(collective: str | None, calls: list[tuple[str, int | None, int]]) -> tuple[int | None, int, str | None]:
    """(bytes, calls counted, reason) of one kernel from the NCCL calls attributed to it (module doc)."""
    if not calls:
        return None, 0, REASONS["no_call"]
    op = (collective or "").lower()
    if op == "sendrecv":
        sends = [c for c in calls if c[0].lower() == "ncclsend"]
        recvs = [c for c in calls if c[0].lower() == "ncclrecv"]
        mine = sends + recvs
    else:
        mine = [c for c in calls if c[0].lower() == "nccl" + op]
        sends, recvs = mine, []
    if not mine:
        return None, 0, REASONS["other"]
    if any(size is None for _, size, _ in mine):
        undecoded = any(size is None and blob for _, size, blob in mine)
        return None, len(mine), REASONS["undecodable" if undecoded else "no_bytes"]
    total = max(sum(s or 0 for _, s, _ in sends), sum(s or 0 for _, s, _ in recvs))
    return total, len(mine), None


@dataclass(frozen=True)
class SizeRow:
    """One rank's collectives of one kind and size (``nsys_nccl_sizes``): the Kineto collectives table's figures.

    ``message_bytes`` is NCCL's per-rank size (None: not recorded, ``size_source`` says why); ``algbw`` NCCL-tests'
    ``S`` × count over the summed kernel time, ``busbw`` that × ``bus_factor(collective, ranks)``; ``link_gbps`` the
    GPU's per-direction NVLink figure and ``link_pct`` the busbw's share of it (``link`` names it, or why not).
    """

    rank: int
    collective: str
    ranks: int
    message_bytes: int | None
    size_source: str
    count: int
    total_ns: int
    mean_ns: float
    algbw_gbps: float | None
    busbw_gbps: float | None
    link_gbps: float | None
    link_pct: float | None
    link: str


class SizeTally:
    """Counts and kernel time per (rank, collective, size, source) while the collectives stream past."""

    def __init__(self, dbs: dict[int, NsysExport], devices: dict[int, int | None]) -> None:
        self._dbs = dbs
        self._devices = devices
        self._acc: dict[tuple[int, str, int | None, str], list[int]] = {}

    def add(self, rank: int, collective: str, size: int | None, source: str, dur_ns: int) -> None:
        """Count one kernel of ``rank``."""
        a = self._acc.setdefault((rank, collective, size, source), [0, 0])
        a[0] += 1
        a[1] += dur_ns

    def rows(self, group: dict[str, int]) -> tuple[SizeRow, ...]:
        """The rows, most time first; ``group`` gives each collective's number of participating ranks."""
        from my_utils.profiling.kineto.collectives import link_speed
        from my_utils.profiling.nsys.nccl_ops import bus_bandwidth

        out = []
        for (rank, coll, size, source), (count, total) in self._acc.items():
            n = group.get(coll, 1)
            # one participant: the group's size is unknown (all-reduce's factor would read 0), so no bandwidth
            bw = bus_bandwidth(coll, size * count, total, n) if size is not None and n > 1 else None
            db = self._dbs[rank]
            gpus = db.gpus()
            name = next((g.name for g in gpus if g.device == self._devices.get(rank)), None)
            link, link_name = link_speed(name, len(gpus) or None, n, source="the export")
            share = 100.0 * bw[1] / link if bw is not None and link == link and link > 0 else None
            out.append(SizeRow(rank, coll, n, size, source, count, total, total / count, bw[0] if bw else None,
                               bw[1] if bw else None, link if link == link else None, share, link_name))
        out.sort(key=lambda r: (-r.total_ns, r.rank, r.collective))
        return tuple(out)
