"""Every number of an export's summary, recomputed here from the raw tables (own SQL, own interval unions)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import nsys_real as H  # nsys_real.py beside this file, registered by conftest.py
import pytest

from my_utils.profiling.nsys.analyze import summarize
from my_utils.profiling.nsys.iterations import OUTLIER_Z

EXPORTS, export_path, raw, tables, covered = H.EXPORTS, H.export_path, H.raw, H.tables, H.covered


GPU_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")


def gpu_rows(path: Path) -> list[tuple[int, int, int, int, str]]:
    """(device, stream, start, end, name-or-op) of every kernel, copy and set, read raw."""
    have = tables(path)
    out = []
    for t in GPU_TABLES:
        if t in have:
            name = "s.value" if t.endswith("KERNEL") else f"'{t}'"
            join = "LEFT JOIN StringIds s ON s.id = x.demangledName" if t.endswith("KERNEL") else ""
            out += raw(path, f"SELECT x.deviceId, x.streamId, x.start, x.end, {name} FROM {t} x {join} "
                             "WHERE x.end >= x.start")
    return out


@pytest.fixture(scope="module")
def summaries(real_fixtures: Any) -> dict[str, Any]:
    return {key: summarize(export_path(real_fixtures, key)) for key in EXPORTS}


@pytest.mark.parametrize("key", EXPORTS)
def test_busy_and_idle_per_device_and_stream(real_fixtures: Any, summaries: dict[str, Any], key: str) -> None:
    rows = gpu_rows(export_path(real_fixtures, key))
    by_dev: dict[int, list[tuple[int, int]]] = defaultdict(list)
    by_stream: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for dev, stream, s, e, _ in rows:
        by_dev[dev].append((s, e))
        by_stream[(dev, stream)].append((s, e))
    got = {r["device"]: r for r in summaries[key].table("nsys_busy_device").records()}
    assert set(got) == set(by_dev)
    for dev, iv in by_dev.items():
        busy, pieces = covered(iv)
        span = max(e for _, e in iv) - min(s for s, _ in iv)
        r = got[dev]
        assert (r["busy_ns"], r["span_ns"], r["idle_ns"], r["ops"], r["gaps"]) == (busy, span, span - busy, len(iv),
                                                                                     pieces - 1)
        assert r["busy_pct"] == pytest.approx(100 * busy / span) if span else r["busy_pct"] is None
        assert r["idle_ns"] <= r["span_ns"]  # never summed over streams
    streams = {(r["device"], r["stream"]): r for r in summaries[key].table("nsys_busy_stream").records()}
    assert set(streams) == set(by_stream)
    for k, iv in by_stream.items():
        busy, _ = covered(iv)
        span = max(e for _, e in iv) - min(s for s, _ in iv)
        assert (streams[k]["busy_ns"], streams[k]["idle_ns"]) == (busy, span - busy)


@pytest.mark.parametrize("key", EXPORTS)
def test_compute_communication_overlap(real_fixtures: Any, summaries: dict[str, Any], key: str) -> None:
    comm: dict[int, list[tuple[int, int]]] = defaultdict(list)
    comp: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for dev, _, s, e, name in gpu_rows(export_path(real_fixtures, key)):
        if name == "CUPTI_ACTIVITY_KIND_MEMCPY" or name == "CUPTI_ACTIVITY_KIND_MEMSET":
            continue
        (comm if name.startswith("nccl") else comp)[dev].append((s, e))
    for r in summaries[key].table("nsys_overlap").records():
        dev = r["device"]
        c, k = covered(comm[dev])[0], covered(comp[dev])[0]
        both = c + k - covered(comm[dev] + comp[dev])[0]
        assert (r["communication_ns"], r["computation_ns"], r["overlap_ns"]) == (c, k, both)
        assert r["exposed_communication_ns"] == c - both
        assert r["overlap_pct"] == (pytest.approx(100 * both / c) if c else None)


def test_the_ring_allreduce_is_communication_and_the_nsysai_sendrecv_never_overlaps(summaries: dict[str, Any]) -> None:
    for key in [k for k in EXPORTS if k.startswith("ring:")]:
        (row,) = summaries[key].table("nsys_overlap").records()
        assert row["communication_ns"] > 0 and row["computation_ns"] == 0 and row["overlap_pct"] == 0
        assert "communication" not in summaries[key].not_measured
    # one stream per GPU in this job: NCCL kernels serialise with compute, nothing is hidden
    for row in summaries["nsys/nsysai__mfu_2gpu_before.sqlite"].table("nsys_overlap").records():
        assert row["communication_ns"] > 0 and row["overlap_ns"] == 0


@pytest.mark.parametrize("key", EXPORTS)
def test_top_kernels_by_kind(real_fixtures: Any, summaries: dict[str, Any], key: str) -> None:
    path = export_path(real_fixtures, key)
    want = {name: (n, tot, mx) for name, n, tot, mx in raw(
        path, "SELECT s.value, COUNT(*), SUM(k.end - k.start), MAX(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k "
              "JOIN StringIds s ON s.id = k.demangledName GROUP BY k.demangledName")}
    top = summaries[key].table("nsys_top_kernels").records()
    for kind in ("computation", "communication"):
        mine = sorted(((n, tot) for n, (_, tot, _) in want.items() if (kind == "communication") == n.startswith("nccl")),
                      key=lambda x: -x[1])[:10]
        got = [r for r in top if r["kind"] == kind]
        assert [r["total_ns"] for r in got] == [t for _, t in mine]
        for r in got:
            assert (r["count"], r["total_ns"], r["max_ns"]) == want[r["name"]]
    total = sum(t for _, t, _ in want.values())
    for r in top:
        assert r["share_pct"] == pytest.approx(100 * r["total_ns"] / total)


@pytest.mark.parametrize("key", EXPORTS)
def test_copy_volume_and_bandwidth_per_direction(real_fixtures: Any, summaries: dict[str, Any], key: str) -> None:
    path = export_path(real_fixtures, key)
    have = tables(path)
    direction = {1: "HtoD", 2: "DtoH", 8: "DtoD", 10: "PtoP"}
    want = {}
    if "CUPTI_ACTIVITY_KIND_MEMCPY" in have:
        for kind, n, b, ns in raw(path, "SELECT copyKind, COUNT(*), SUM(bytes), SUM(end - start) "
                                        "FROM CUPTI_ACTIVITY_KIND_MEMCPY GROUP BY copyKind"):
            want[("memcpy", direction[kind])] = (n, b, ns)
    if "CUPTI_ACTIVITY_KIND_MEMSET" in have:
        for n, b, ns in raw(path, "SELECT COUNT(*), SUM(bytes), SUM(end - start) FROM CUPTI_ACTIVITY_KIND_MEMSET"):
            if n:
                want[("memset", "device")] = (n, b, ns)
    got = {(r["op"], r["direction"]): r for r in summaries[key].table("nsys_copies").records()}
    assert set(got) == set(want)
    for k, (n, b, ns) in want.items():
        r = got[k]
        assert (r["count"], r["bytes"], r["total_ns"]) == (n, b, ns)
        assert r["bandwidth_gbps"] == (pytest.approx(b / ns) if ns else None)  # bytes/ns is GB/s


def test_the_saxpy_copies_run_near_pcie_speed(summaries: dict[str, Any]) -> None:
    got = {r["direction"]: r for r in summaries["nsys/pipit__saxpy-mpi-cuda_perlmutter0.sqlite"]
           .table("nsys_copies").records()}
    assert got["HtoD"]["bytes"] == 10 * 262_144_000 and 10 < got["HtoD"]["bandwidth_gbps"] < 32  # PCIe 4 x16


@pytest.mark.parametrize("key", EXPORTS)
def test_cuda_api_time_and_slowest_calls(real_fixtures: Any, summaries: dict[str, Any], key: str) -> None:
    path = export_path(real_fixtures, key)
    want = {name: (n, tot) for name, n, tot in raw(
        path, "SELECT s.value, COUNT(*), SUM(r.end - r.start) FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
              "JOIN StringIds s ON s.id = r.nameId WHERE r.eventClass <> 67 GROUP BY s.value")}  # 67: backtrace copies
    api = summaries[key].table("nsys_cuda_api").records()
    assert [r["total_ns"] for r in api] == sorted((t for _, t in want.values()), reverse=True)[:10]
    for r in api:
        assert (r["count"], r["total_ns"]) == want[r["name"]]
    slow = raw(path, "SELECT end - start FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass <> 67 "
                     "ORDER BY end - start DESC LIMIT 10")
    assert [r["dur_ns"] for r in summaries[key].table("nsys_cuda_api_slowest").records()] == [d for (d,) in slow]


@pytest.mark.parametrize("key", ["nsys/extrap__ex-gpu.s10.sqlite", "nsys/pipit__perlmutter-cloverleaf-cuda.sqlite"])
def test_os_runtime_waits_where_traced(real_fixtures: Any, summaries: dict[str, Any], key: str) -> None:
    want = raw(export_path(real_fixtures, key),
               "SELECT s.value, COUNT(*), SUM(o.end - o.start) FROM OSRT_API o JOIN StringIds s ON s.id = o.nameId "
               "GROUP BY s.value ORDER BY 3 DESC LIMIT 10")
    got = summaries[key].table("nsys_osrt").records()
    assert [(r["name"], r["count"], r["total_ns"]) for r in got] == want
    fact = next(f for f in summaries[key].facts() if f.id.startswith("nsys.osrt_top"))
    assert fact.value == want[0][0]


def test_not_traced_is_not_measured_never_zero(summaries: dict[str, Any]) -> None:
    s = summaries["nsys/fuser__report1_2024.6.sqlite"]
    assert "osrt" in s.not_measured and "communication" in s.not_measured
    facts = {f.id: f for f in s.facts()}
    osrt = facts["nsys.osrt_top"]
    assert osrt.value is None and "--trace osrt" in (osrt.not_measured or "")
    overlap = facts["nsys.comm_overlap:device0"].to_dict()
    assert overlap["value"] is None and overlap["not_measured"] == "no communication kernels on this device"
    assert "gpu_model" in summaries["nsys/nsysai__mfu_2gpu_before.sqlite"].not_measured


def test_facts_carry_unit_denominator_and_evidence(summaries: dict[str, Any]) -> None:
    s = summaries["nsys/nsysai__mfu_2gpu_before.sqlite"]
    facts = {f.id: f.to_dict() for f in s.facts()}
    busy = facts["nsys.gpu_busy:device0"]
    (row,) = s.table("nsys_busy_device").where(device=0)
    assert busy["unit"] == "%" and busy["value"] == pytest.approx(100 * row["busy_ns"] / row["span_ns"])
    assert busy["denominator_value"] == pytest.approx(row["span_ns"] / 1e6) and busy["denominator_unit"] == "ms"
    assert busy["aggregate"] == "device-level union of streams" and busy["source"] == "nsys"
    assert busy["evidence"] == [{"table": "nsys_busy_device", "key": {"rank": None, "device": 0},
                                 "values": {"busy_ns": row["busy_ns"], "idle_ns": row["idle_ns"],
                                            "span_ns": row["span_ns"]}}]
    json.dumps(s.to_dict(), allow_nan=False)  # the whole summary is strict JSON
    # the JSON object of model.report.Fact, so Fact.from_dict() takes every fact over unchanged
    keys = {"id", "label", "value", "unit", "source", "denominator", "denominator_value", "denominator_unit", "ranks",
            "aggregate", "steps", "evidence", "detail"}
    assert all(set(f) - {"not_measured"} == keys for f in facts.values())
    assert all(isinstance(f["ranks"], list) for f in facts.values())


def _iterations_by_hand(path: Path, pattern: str) -> dict[tuple[int, int], dict[str, int]]:
    """Per (pid, iteration): the CPU range and the union of the GPU work launched inside it, in plain Python."""
    ranges = raw(path, "SELECT (n.globalTid >> 24) << 24, n.start, n.end FROM NVTX_EVENTS n "
                       "LEFT JOIN StringIds s ON s.id = n.textId WHERE n.eventType IN (59, 60) "
                       "AND COALESCE(n.text, s.value) GLOB ? ORDER BY n.start, n.end", (pattern,))
    per_pid: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for pid, s, e in ranges:
        per_pid[pid].append((s, e))
    calls = raw(path, "SELECT (globalTid >> 24) << 24, correlationId, start FROM CUPTI_ACTIVITY_KIND_RUNTIME "
                      "WHERE eventClass <> 67")
    owner: dict[tuple[int, int], int] = {}
    for pid, corr, t in calls:
        started = [i for i, (s, e) in enumerate(per_pid.get(pid, []), 1) if s <= t]
        if started and t < per_pid[pid][started[-1] - 1][1]:
            owner[(pid, corr)] = started[-1]
    work: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for t in GPU_TABLES:
        if t in tables(path):
            for pid, corr, s, e in raw(path, f"SELECT globalPid, correlationId, start, end FROM {t} WHERE end >= start"):
                if (pid, corr) in owner:
                    work[(pid, owner[(pid, corr)])].append((s, e))
    out = {}
    for pid, its in per_pid.items():
        for i, (s, e) in enumerate(its, 1):
            iv = work.get((pid, i), [])
            busy = covered(iv)[0]
            window = (max(x for _, x in iv) - min(x for x, _ in iv)) if iv else None
            out[(pid, i)] = {"cpu_ns": e - s, "busy_ns": busy if iv else None, "window": window,
                             "ops": len(iv) or None}
    return out


@pytest.mark.parametrize(("key", "pattern"), [("nsys/pipit__saxpy-mpi-cuda_perlmutter0.sqlite", "saxpy"),
                                              ("nsys/nsysai__mfu_2gpu_before.sqlite", "FSDP::pre_forward*"),
                                              ("nsys/extrap__concurrent_s1_profile1.sqlite", "main->process->phase?")])
def test_iterations_from_a_named_range(real_fixtures: Any, key: str, pattern: str) -> None:
    path = export_path(real_fixtures, key)
    s = summarize(path, iteration_range=pattern)
    assert s.iterations is not None and s.iterations.chosen == "given"
    want = _iterations_by_hand(path, pattern)
    rows = s.iterations.table.records()
    got = {(r["pid"], r["iteration"]): r for r in rows}
    assert len(rows) == len(got) == len(want)  # one device per process in these exports
    for k, w in want.items():
        assert got[k]["cpu_ns"] == w["cpu_ns"]
        assert got[k]["busy_ns"] == w["busy_ns"]
        assert got[k]["gpu_window_ns"] == w["window"]
        assert got[k]["ops"] == w["ops"]  # a call repeated as a CUDA backtrace row launches its work once
        if w["window"] is not None:
            assert got[k]["idle_ns"] == w["window"] - w["busy_ns"]
    for st in s.iterations.stats:
        times = sorted(w["cpu_ns"] for (pid, _), w in want.items() if pid == st.pid)
        assert st.count == len(times) and st.max_ns == times[-1] and st.min_ns == times[0]
        for o in st.outliers:
            assert o.robust_z > OUTLIER_Z and o.cpu_ns > st.median_ns


def test_a_slow_first_saxpy_is_a_first_position_outlier(real_fixtures: Any) -> None:
    s = summarize(export_path(real_fixtures, "nsys/pipit__saxpy-mpi-cuda_perlmutter0.sqlite"), iteration_range="saxpy")
    assert s.iterations is not None
    (st,) = s.iterations.stats
    assert st.count == 5 and any(o.iteration == 1 and o.position == "first" for o in st.outliers)


def test_iterations_not_found_is_said(real_fixtures: Any, summaries: dict[str, Any]) -> None:
    assert summaries["nsys/extrap__ex-gpu.s10.sqlite"].iterations is None
    assert "--iteration-range" in summaries["nsys/extrap__ex-gpu.s10.sqlite"].not_measured["iterations"]
    s = summarize(export_path(real_fixtures, "nsys/fuser__report1_2024.6.sqlite"), iteration_range="no such range")
    assert s.iterations is None and "'no such range'" in s.not_measured["iterations"]
