"""NCCL message sizes and bus bandwidth from NCCL's NVTX payloads, recomputed by independent SQL and decoding.

No real export keeps the payload bytes (every one here was exported without ``--include-blobs``: their
``NVTX_EVENTS.binaryData`` is empty, which the tests check), so the exports with payloads are *generated*: copies
of the real 6-rank ring all-reduce (nsys 2024.5, NCCL's 2-entry size schema) and of the real 2-GPU SendRecv run
(nsys 2026.2, NCCL's communicator-id schemas), whose NCCL ranges get ``binaryData`` values laid out as the schemas
those very exports register say (header of four 64-bit words, then the payload). Everything else is the real rows.
"""

from __future__ import annotations

import shutil
import sqlite3
import struct
from collections import defaultdict
from pathlib import Path
from typing import Any

import nsys_real as H  # nsys_real.py beside this file, registered by conftest.py
import pytest

from my_utils.profiling.kineto.collectives import bus_factor as kineto_bus_factor
from my_utils.profiling.nsys import nccl_ops
from my_utils.profiling.nsys.nccl_sizes import REASONS, decode_size, size_schemas
from my_utils.profiling.nsys.run import analyze_run
from my_utils.profiling.nsys.schema import NsysExport

SIZE = "Message size [bytes]"
NSYSAI = "nsys/nsysai__mfu_2gpu_before.sqlite"
MIB2 = 2 * 1024 * 1024


def schema_with_size(conn: sqlite3.Connection) -> tuple[int, int, int, int]:
    """(domain, schema, size offset, payload length) of a registered schema with NCCL's size entry, read raw."""
    dom, sid, off = conn.execute('SELECT domainId, schemaId, COALESCE("offset", 0) FROM NVTX_PAYLOAD_SCHEMA_ENTRIES '
                                 "WHERE name = ? ORDER BY schemaId LIMIT 1", (SIZE,)).fetchone()
    end = conn.execute('SELECT MAX(COALESCE("offset", 0)) FROM NVTX_PAYLOAD_SCHEMA_ENTRIES WHERE schemaId = ?',
                       (sid,)).fetchone()[0]
    return dom, sid, off, end + 8


def blob(dom: int, sid: int, off: int, length: int, size: int) -> bytes:
    payload = bytearray(length)
    payload[off:off + 8] = struct.pack("<Q", size)
    return struct.pack("<QQQQ", dom, sid, length, 32) + bytes(payload)


def write_payloads(path: Path, sizes: dict[str, Any], *, hex_text: bool = False) -> dict[int, int]:
    """Give every NCCL range named in ``sizes`` a payload (size = ``sizes[name](k)``, k-th such range of its thread);
    return rowid -> size written."""
    conn = sqlite3.connect(path)
    dom, sid, off, length = schema_with_size(conn)
    written: dict[int, int] = {}
    seen: dict[tuple[int, str], int] = defaultdict(int)
    rows = conn.execute("SELECT n.rowid, n.globalTid, s.value FROM NVTX_EVENTS n JOIN StringIds s ON s.id = n.textId "
                        "WHERE n.domainId = ? AND n.eventType = 59 ORDER BY n.start", (dom,)).fetchall()
    for rowid, tid, name in rows:
        if name in sizes:
            size = sizes[name](seen[(tid, name)])
            seen[(tid, name)] += 1
            data = blob(dom, sid, off, length, size)
            conn.execute("UPDATE NVTX_EVENTS SET binaryData = ? WHERE rowid = ?",
                         (data.hex() if hex_text else data, rowid))
            written[rowid] = size
    conn.commit()
    conn.close()
    return written


def ring(real_fixtures: Any, tmp_path: Path, size: int | None = MIB2, **kw: Any) -> list[Path]:
    out = []
    for i in range(6):
        dst = tmp_path / f"report_{i}.sqlite"
        shutil.copyfile(H.export_path(real_fixtures, f"ring:{i}"), dst)
        if size is not None:
            write_payloads(dst, {"ncclAllReduce": lambda k: size}, **kw)
        out.append(dst)
    return out


def decoded_sizes(path: Path) -> list[int]:
    """Every NCCL payload's size, decoded here from the raw blob and the raw schema rows."""
    conn = sqlite3.connect(path)
    entries = {(d, s): o for d, s, o in conn.execute(
        'SELECT domainId, schemaId, COALESCE("offset", 0) FROM NVTX_PAYLOAD_SCHEMA_ENTRIES WHERE name = ?', (SIZE,))}
    out = []
    for (data,) in conn.execute("SELECT CAST(binaryData AS BLOB) FROM NVTX_EVENTS WHERE binaryData IS NOT NULL"):
        if all(c in b"0123456789abcdef" for c in data):
            data = bytes.fromhex(data.decode())
        dom, sid = struct.unpack_from("<QQ", data)
        out.append(struct.unpack_from("<Q", data, 32 + entries[(dom, sid)])[0])
    conn.close()
    return out


def kernel_and_call(path: Path) -> tuple[int, int, int]:
    """(kernel start, end, size of the ncclAllReduce range enclosing its launching call on the same thread), raw."""
    ((start, end, data),) = H.raw(path, "SELECT k.start, k.end, CAST(n.binaryData AS BLOB) "
                                        "FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                                        "JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId "
                                        "JOIN NVTX_EVENTS n ON n.globalTid = r.globalTid AND n.start <= r.start "
                                        "AND n.end >= r.end JOIN StringIds s ON s.id = n.textId "
                                        "WHERE s.value = 'ncclAllReduce'")
    return start, end, struct.unpack_from("<Q", data, 32)[0]


def test_the_real_exports_keep_no_payload_bytes_and_every_collective_says_so(real_fixtures: Any, tmp_path: Path) -> None:
    for key in [*H.RING, NSYSAI]:
        path = H.export_path(real_fixtures, key)
        assert H.raw(path, "SELECT COUNT(*) FROM NVTX_EVENTS WHERE binaryData IS NOT NULL") == [(0,)]
        assert H.raw(path, "SELECT COUNT(*) FROM NVTX_PAYLOAD_SCHEMA_ENTRIES WHERE name = ?", (SIZE,))[0][0] > 0
    ring(real_fixtures, tmp_path, size=None)
    for run in (analyze_run([tmp_path]), analyze_run([real_fixtures / NSYSAI])):
        a = run.nccl
        assert a is not None and a.sizes
        assert all(r.message_bytes is None and r.busbw_gbps is None and r.size_source == REASONS["no_bytes"]
                   for r in a.sizes)
        assert all(c.message_bytes is None and c.busbw_gbps is None for c in a.worst_skew)
        rows = run.tables()["nsys_nccl_sizes"].records()
        assert rows and all("size not recorded in this export" in r["size_source"] for r in rows)
        busbw = [f for f in run.facts() if f.id.startswith("nsys.nccl_busbw:")]
        assert busbw and all(not f.measured and "--include-blobs=true" in (f.not_measured or "") for f in busbw)


def test_ring_allreduce_sizes_from_payloads(real_fixtures: Any, tmp_path: Path) -> None:
    files = ring(real_fixtures, tmp_path)
    run = analyze_run([str(tmp_path / "report_%q{RANK}.sqlite")])
    a = run.nccl
    assert a is not None
    truth = [kernel_and_call(f) for f in files]
    assert [t[2] for t in truth] == [MIB2] * 6 and all(decoded_sizes(f) == [MIB2] for f in files)
    gpus_per_host = [H.raw(f, "SELECT COUNT(*) FROM TARGET_INFO_GPU WHERE smCount > 0")[0][0] for f in files]
    for r in a.sizes:
        start, end, size = truth[r.rank]
        algbw = size / (end - start)  # bytes per ns = GB/s; all-reduce: S is the per-rank buffer
        assert (r.collective, r.ranks, r.count, r.message_bytes) == ("AllReduce", 6, 1, size)
        assert r.size_source == "NCCL NVTX payload" and r.total_ns == end - start
        assert r.algbw_gbps == pytest.approx(algbw) and r.busbw_gbps == pytest.approx(algbw * 2 * 5 / 6)
        assert gpus_per_host[r.rank] < 6 and r.link_gbps is None and "6 ranks > " in r.link
    (c,) = a.worst_skew
    last = max(t[0] for t in truth)
    assert c.message_bytes == MIB2 and c.size_source == "NCCL NVTX payload"
    assert c.busbw_gbps == pytest.approx(MIB2 / (max(t[1] for t in truth) - last) * 2 * 5 / 6)
    fact = next(f for f in run.facts() if f.id == "nsys.nccl_busbw:AllReduce")
    assert fact.value == pytest.approx(sum(MIB2 / (e - s) * 2 * 5 / 6 for s, e, _ in truth) / 6)
    assert "NCCL NVTX payload" in fact.detail and "2,097,152 B" in fact.detail
    # a size the user gives never replaces one the export recorded
    given = analyze_run([tmp_path], message_bytes=1)
    assert given.nccl is not None and {r.message_bytes for r in given.nccl.sizes} == {MIB2}


def test_payloads_stored_as_hex_text_read_the_same(real_fixtures: Any, tmp_path: Path) -> None:
    files = ring(real_fixtures, tmp_path, size=4096, hex_text=True)
    assert decoded_sizes(files[0]) == [4096]
    run = analyze_run([tmp_path])
    assert run.nccl is not None and {r.message_bytes for r in run.nccl.sizes} == {4096}


def test_sendrecv_group_sizes_from_payloads(real_fixtures: Any, tmp_path: Path) -> None:
    path = tmp_path / "gen.sqlite"
    shutil.copyfile(real_fixtures / NSYSAI, path)
    write_payloads(path, {"ncclSend": lambda k: 1024 * (k + 1), "ncclRecv": lambda k: 1536 * (k % 3 + 1)})
    # independently: the sends and receives on the launching thread after its previous ncclGroupEnd, per kernel
    rows = H.raw(path, "SELECT k.deviceId, k.start, k.end, r.globalTid, r.start FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                       "JOIN StringIds s ON s.id = k.shortName JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
                       "ON r.correlationId = k.correlationId AND (r.globalTid >> 24) = (k.globalPid >> 24) "
                       "WHERE s.value GLOB 'nccl*' ORDER BY k.start")
    calls = H.raw(path, "SELECT n.globalTid, n.start, n.end, s.value, CAST(n.binaryData AS BLOB) FROM NVTX_EVENTS n "
                        "JOIN StringIds s ON s.id = n.textId WHERE n.domainId = 1 AND n.eventType = 59")
    expected: dict[tuple[int, int, int], int] = {}
    for dev, ks, ke, tid, launch in rows:
        ends = [e for t, _s, e, name, _b in calls if t == tid and name == "ncclGroupEnd" and e < launch]
        after = max(ends, default=-1)
        mine = [(name, struct.unpack_from("<Q", b, 32 + 8)[0]) for t, s, _e, name, b in calls
                if t == tid and after < s <= launch and name in ("ncclSend", "ncclRecv")]
        expected[(dev, ks, ke)] = max(sum(v for n, v in mine if n == "ncclSend"),
                                      sum(v for n, v in mine if n == "ncclRecv"))
    run = analyze_run([path])
    a = run.nccl
    assert a is not None and [(p.rank, p.device) for p in a.participants] == [(0, 0), (1, 1)]
    by_rank: dict[int, dict[int | None, int]] = defaultdict(lambda: defaultdict(int))
    for (dev, _ks, _ke), size in expected.items():
        by_rank[dev][size] += 1
    # the window was cut from a longer capture: a kernel whose launching call lies before the cut has no size
    for dev, n in H.raw(path, "SELECT k.deviceId, COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s "
                              "ON s.id = k.shortName WHERE s.value GLOB 'nccl*' GROUP BY 1"):
        if n > sum(by_rank[dev].values()):
            by_rank[dev][None] = n - sum(by_rank[dev].values())
    got: dict[int, dict[int | None, int]] = defaultdict(dict)
    for r in a.sizes:
        if r.message_bytes is None:
            assert r.size_source == REASONS["no_call"] and r.busbw_gbps is None
            got[r.rank][None] = r.count
            continue
        assert r.collective == "SendRecv" and r.size_source == "NCCL NVTX payload" and r.ranks == 2
        got[r.rank][r.message_bytes] = r.count
        durs = [ke - ks for (dev, ks, ke), size in expected.items() if dev == r.rank and size == r.message_bytes]
        assert r.total_ns == sum(durs)
        assert r.busbw_gbps == pytest.approx(r.message_bytes * len(durs) / sum(durs))  # point to point: factor 1
        assert r.link_gbps is None and "names no GPU" in r.link
    assert got == {k: dict(v) for k, v in by_rank.items()}
    # across ranks the k-th SendRecv of each rank is one collective: its size the larger of the two, said
    seq = {rank: sorted(((ks, ke), size) for (dev, ks, ke), size in expected.items() if dev == rank) for rank in (0, 1)}
    checked = 0
    for c in a.worst_skew:
        starts = {r: s for r, s in zip((0, 1), _starts(path, c.seq), strict=True)}
        pair = [next((size for (ks, _ke), size in seq[r] if ks == starts[r]), None) for r in (0, 1)]
        if None in pair:
            assert c.message_bytes is None and c.size_source == REASONS["no_call"]
            continue
        checked += 1
        assert c.message_bytes == max(p for p in pair if p is not None)
        assert ("ranks differ" in c.size_source) == (pair[0] != pair[1])
    assert checked > 0


def _starts(path: Path, seq: int) -> list[int]:
    """The start of the seq-th NCCL kernel of device 0 and of device 1, raw."""
    return [H.raw(path, "SELECT k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName "
                        "WHERE s.value GLOB 'nccl*' AND k.deviceId = ? ORDER BY k.start LIMIT 1 OFFSET ?",
                  (dev, seq - 1))[0][0] for dev in (0, 1)]


@pytest.mark.parametrize(("damage", "reason"), [
    ("DELETE FROM NVTX_PAYLOAD_SCHEMA_ENTRIES", "no_schema"),
    ("DELETE FROM NVTX_EVENTS WHERE domainId = 1", "no_nvtx"),
    ("UPDATE NVTX_EVENTS SET binaryData = x'00112233' WHERE binaryData IS NOT NULL", "undecodable"),
])
def test_each_missing_piece_is_named(real_fixtures: Any, tmp_path: Path, damage: str, reason: str) -> None:
    files = ring(real_fixtures, tmp_path)
    for f in files:
        conn = sqlite3.connect(f)
        conn.execute(damage)
        conn.commit()
        conn.close()
    run = analyze_run([tmp_path])
    assert run.nccl is not None
    assert {r.size_source for r in run.nccl.sizes} == {REASONS[reason]}
    assert all(r.busbw_gbps is None for r in run.nccl.sizes)


def test_decoding_refuses_what_it_cannot_read(real_fixtures: Any, tmp_path: Path) -> None:
    (f, *_) = ring(real_fixtures, tmp_path, size=123)
    with NsysExport(f) as db:
        schemas = size_schemas(db)
    ((dom, sid),) = schemas
    good = blob(dom, sid, schemas[(dom, sid)].offset, 16, 123)
    assert decode_size(good, dom, schemas) == 123 and decode_size(good.hex(), dom, schemas) == 123
    assert decode_size(good, dom + 1, schemas) is None  # the header names another domain than the event's
    assert decode_size(good[:36], dom, schemas) is None  # cut before the size ends
    assert decode_size(blob(dom, sid + 99, 0, 16, 5), dom, schemas) is None and decode_size(b"", dom, schemas) is None


def test_one_bus_factor_for_both_analyses() -> None:
    assert nccl_ops.bus_factor is kineto_bus_factor
