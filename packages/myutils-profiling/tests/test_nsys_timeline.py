"""``nsys timeline``: the ring's six exports as one Chrome/Perfetto trace, checked event by event against the raw rows."""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from my_utils.core.testing.trace_check import check_trace
from my_utils.profiling.cli import app
from my_utils.profiling.nsys.timeline import GPU_TID, write_timeline


def _ring(real_fixtures: Any, tmp_path: Path) -> list[Path]:
    out = []
    for i, name in enumerate(sorted(real_fixtures.names("nsys/dsl_ring_6ranks/"))):
        dst = tmp_path / f"report_{i}.sqlite"
        shutil.copyfile(real_fixtures / name, dst)
        out.append(dst)
    return out


def _raw(path: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def test_ring_timeline(real_fixtures: Any, tmp_path: Path) -> None:
    files = _ring(real_fixtures, tmp_path)
    out = tmp_path / "ring.json.gz"
    res = CliRunner().invoke(app, ["nsys", "timeline", str(tmp_path / "report_%q{RANK}.sqlite"), "--output", str(out)])
    assert res.exit_code == 0, res.output
    with gzip.open(out, "rt") as fh:
        doc = json.load(fh)
    assert check_trace(doc) == []
    other = doc["otherData"]
    origin_ns = other["time_origin_unix_s"] * 10**9
    events = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    names = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"}
    assert names == {f"rank {r} (report_{r}.sqlite)" for r in range(6)}
    for rank, path in enumerate(files):
        mine = [e for e in events if e["pid"] == rank]
        gpu = _raw(path, "SELECT COUNT(*) FROM (SELECT start FROM CUPTI_ACTIVITY_KIND_KERNEL UNION ALL SELECT start "
                         "FROM CUPTI_ACTIVITY_KIND_MEMCPY UNION ALL SELECT start FROM CUPTI_ACTIVITY_KIND_MEMSET)")[0][0]
        nvtx = _raw(path, "SELECT COUNT(*) FROM NVTX_EVENTS WHERE eventType IN (59, 60) AND end >= start")[0][0]
        assert len(mine) == gpu + nvtx
        (start, end, dev, stream), = _raw(path, "SELECT start, end, deviceId, streamId FROM CUPTI_ACTIVITY_KIND_KERNEL")
        (k,) = [e for e in mine if e["cat"] == "nccl"]
        assert k["tid"] == GPU_TID + dev * 1000 + stream
        assert abs(k["ts"] - (start - origin_ns) / 1e3) < 1e-3 and abs(k["dur"] - (end - start) / 1e3) < 1e-3
    assert other["events"] == len(events) and other["truncated"] == {}


def test_max_events_bounds_the_file_and_says_so(real_fixtures: Any, tmp_path: Path) -> None:
    _ring(real_fixtures, tmp_path)
    out = tmp_path / "small.json"
    other = write_timeline([tmp_path], out, max_events=60)
    doc = json.loads(out.read_text())
    assert check_trace(doc) == []
    assert sum(1 for e in doc["traceEvents"] if e["ph"] == "X") == other["events"] <= 60
    assert other["truncated"] and all(v > 0 for v in other["truncated"].values())


def test_unanchored_2021_export_keeps_its_own_clock(real_fixtures: Any, tmp_path: Path) -> None:
    path = real_fixtures / "nsys/extrap__ex-gpu.s10.sqlite"
    other = write_timeline([path], tmp_path / "t.json")
    doc = json.loads((tmp_path / "t.json").read_text())
    assert check_trace(doc) == [] and other["time_origin_unix_s"] is None
    (first,), = _raw(path, "SELECT MIN(start) FROM CUPTI_ACTIVITY_KIND_KERNEL")
    assert min(e["ts"] for e in doc["traceEvents"] if e.get("cat") == "kernel") == first / 1e3


def test_kernels_overlapping_on_one_stream_get_a_sub_lane(real_fixtures: Any, tmp_path: Path) -> None:
    # H100 kernels of one stream overlap (programmatic dependent launch): drawn on one lane they would not nest,
    # and Perfetto drops such slices (before: check_trace reported "'X' overlaps event ... without nesting")
    path = real_fixtures / "nsys/nsysai__mfu_2gpu_before.sqlite"
    other = write_timeline([path], tmp_path / "t.json")
    doc = json.loads((tmp_path / "t.json").read_text())
    assert check_trace(doc) == []
    gpu = _raw(path, "SELECT (SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL) + (SELECT COUNT(*) FROM "
                     "CUPTI_ACTIVITY_KIND_MEMCPY) + (SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_MEMSET)")[0][0]
    nvtx = _raw(path, "SELECT COUNT(*) FROM NVTX_EVENTS WHERE eventType IN (59, 60) AND end >= start")[0][0]
    assert other["events"] == gpu + nvtx
    assert any("(overlapping 1)" in e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name")
