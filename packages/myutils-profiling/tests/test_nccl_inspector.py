"""NcclInspectorProvider on hand-built Inspector logs (no public real one exists), totals recomputed with json."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from my_utils.core.errors import InputError, MyUtilsError, UnsupportedInputError
from my_utils.profiling.formats.nccl_inspector import (
    NcclInspectorProvider,
    read_nccl_inspector,
    size_bucket,
)

LOGS = Path(__file__).resolve().parent / "data" / "nccl_inspector"


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_every_operation_with_its_time_size_and_bandwidth() -> None:
    events = NcclInspectorProvider.from_input(LOGS).collect()
    for path in sorted(LOGS.glob("*.log")):
        records = _records(path)
        mine = [e for e in events if e.attrs["file"] == path.name]
        # totals per operation recomputed from the JSON itself
        want_ms: dict[str, float] = defaultdict(float)
        want_bytes: dict[str, float] = defaultdict(float)
        for r in records:
            perf = r.get("coll_perf") or r["p2p_perf"]
            op = perf.get("coll") or perf["p2p"]
            us = perf.get("coll_exec_time_us", perf.get("p2p_exec_time_us"))
            want_ms[op] += us / 1e3
            want_bytes[op] += perf.get("coll_msg_size_bytes", perf.get("p2p_msg_size_bytes"))
        got_ms: dict[str, float] = defaultdict(float)
        got_bytes: dict[str, float] = defaultdict(float)
        for e in mine:
            if e.name.startswith("nccl:"):
                assert e.kind == "duration" and e.unit == "ms"
                got_ms[e.name.removeprefix("nccl:")] += e.value
            elif e.name.startswith("nccl.bytes:"):
                got_bytes[e.name.removeprefix("nccl.bytes:")] += e.value
        assert got_ms == pytest.approx(dict(want_ms)) and got_bytes == dict(want_bytes)
        busbw = [e for e in mine if e.name.startswith("nccl.busbw:")]
        assert len(busbw) == len(records)
        assert [e.value for e in busbw] == [(r.get("coll_perf") or r["p2p_perf"]).get(
            "coll_busbw_gbs", (r.get("p2p_perf") or {}).get("p2p_busbw_gbs")) for r in records]


def test_rank_is_the_rank_in_the_largest_communicator() -> None:
    events = NcclInspectorProvider.from_input(LOGS).collect()
    ranks = {e.attrs["pid"]: e.rank for e in events}
    assert ranks == {48211: 0, 48212: 2}  # world ranks; in the 2-rank TP group they are 0 and 1
    tp = {e.attrs["comm_rank"] for e in events if e.attrs["pid"] == 48212 and e.attrs["n_ranks"] == 2}
    assert tp == {1}


def test_size_buckets_verbose_ts_p2p_and_older_records() -> None:
    events = read_nccl_inspector(LOGS / "dgx-a07-pid48211.log")
    names = {e.name for e in events}
    assert {"nccl.busbw:AllReduce@16MiB", "nccl.busbw:AllReduce@256MiB", "nccl.busbw:AllReduce@1MiB",
            "nccl.busbw:AllGather@64MiB", "nccl.busbw:ReduceScatter@64MiB", "nccl.busbw:Send@8MiB"} <= names
    (verbose,) = {e.ts for e in events if e.ts is not None}
    record = next(r for r in _records(LOGS / "dgx-a07-pid48211.log") if "event_trace_ts" in r["coll_perf"])
    assert verbose == record["coll_perf"]["event_trace_ts"]["coll_start_ts"] / 1e6
    send = next(e for e in events if e.name == "nccl:Send")
    assert send.attrs["peer"] == 2 and send.attrs["sn"] == 1
    old = [e for e in events if e.name == "nccl:AllReduce" and "comm_name" not in e.attrs]
    assert len(old) == 1 and "timing_source" not in old[0].attrs
    assert [size_bucket(n) for n in (0, 1, 1000, 1024, 1025, 16 << 20, (1 << 30) + 1)] == [
        "0B", "1B", "1KiB", "1KiB", "2KiB", "16MiB", "2GiB"]


def test_pretty_printed_objects_read_the_same(tmp_path: Path) -> None:
    src = LOGS / "dgx-a07-pid48212.log"
    pretty = tmp_path / "pretty.log"
    pretty.write_text("\n".join(json.dumps(r, indent=2) for r in _records(src)) + "\n")

    def comparable(path: Path) -> list[tuple[str, float, int | None]]:
        return [(e.name, e.value, e.rank) for e in read_nccl_inspector(path)]

    assert comparable(pretty) == comparable(src)


def test_nan_bandwidth_is_not_measured(tmp_path: Path) -> None:
    record = _records(LOGS / "dgx-a07-pid48211.log")[0]
    record["coll_perf"]["coll_busbw_gbs"] = "nan"  # how the plugin's json.cc writes a NaN double
    path = tmp_path / "h-pid1.log"
    path.write_text(json.dumps(record) + "\n")
    (bus,) = [e for e in read_nccl_inspector(path) if e.name.startswith("nccl.busbw:")]
    assert math.isnan(bus.value) and bus.attrs["status"] == "not measured (nan)"


@pytest.mark.parametrize(("lines", "kind", "match"), [
    (['{"header":{"rank":0,"n_ranks":2},"coll_perf":{"coll":"AllReduce"', "oops"], InputError,
     r"x\.log:line 1: a JSON object"),
    (['{"header":{"rank":0,"n_ranks":2},"coll_perf":{"coll":"AllReduce","coll_msg_size_bytes":8}}'], InputError,
     r"x\.log:line 1: coll_perf field 'coll_exec_time_us' \(a number\); found None"),
    (['{"a": 1} trailing'], InputError, r"x\.log:line 1: one JSON object per line \(Extra data\)"),
    (['{"traceEvents": []}'], InputError, r"x\.log:line 1: an NCCL Inspector log .*; this object has the keys "
                                          r"traceEvents"),
    (["[" * 100000 + "]" * 100000], InputError, r"x\.log:line 1: an NCCL Inspector log .*; found '\[\[\["),
    (["{" + '"a":' * 1 + "[" * 100000], InputError, r"x\.log:line 1: a JSON object nested a few levels deep"),
    (["", ""], UnsupportedInputError, r"x\.log: an NCCL Inspector log .*; the file holds no record"),
    (['{"header":{"rank":0,"n_ranks":2},', '"coll_perf":{"coll":"AllReduce",'], InputError,
     r"x\.log:line 1: a complete JSON object; the file ends inside it"),
])
def test_bad_input(tmp_path: Path, lines: list[str], kind: type, match: str) -> None:
    path = tmp_path / "x.log"
    path.write_text("\n".join(lines))
    with pytest.raises(kind, match=match):
        NcclInspectorProvider.from_input(path).collect()


def test_cli_exit_2_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "h-pid9.log"
    good = _records(LOGS / "dgx-a07-pid48211.log")[0]
    del good["coll_perf"]["coll_exec_time_us"]
    bad.write_text(json.dumps(good) + "\n")
    result = subprocess.run([sys.executable, "-m", "my_utils.core", "plugins", "run", "nccl_inspector", "--input",
                             str(bad), "--output-dir", str(tmp_path / "o")], capture_output=True, text=True, timeout=180)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    assert f"{bad}:line 1: coll_perf field 'coll_exec_time_us'" in line
    assert not (tmp_path / "o" / "metrics_events.jsonl").exists()


_LINES = st.sampled_from([
    (LOGS / "dgx-a07-pid48211.log").read_text().splitlines()[0], "{", "}", '{"header":{}}', "", "null",
    '{"header":{"rank":0,"n_ranks":1},"p2p_perf":{"p2p":"Send","p2p_exec_time_us":1,"p2p_msg_size_bytes":2}}',
])


@settings(derandomize=True, database=None, max_examples=60, deadline=None)
@given(st.lists(st.one_of(_LINES, st.text(max_size=30)), max_size=8))
def test_any_text_gives_events_or_one_input_error(tmp_path_factory: pytest.TempPathFactory, lines: list[str]) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "i.log"
    path.write_text("\n".join(lines), encoding="utf-8", errors="surrogatepass")
    try:
        events = read_nccl_inspector(path)
    except MyUtilsError as exc:
        assert "\n" not in str(exc) and str(path) in str(exc)
    else:
        assert events and all(e.source == "nccl_inspector" for e in events)


def test_provider_contract(tmp_path: Path) -> None:
    from my_utils.core.testing import check_metrics_provider

    bad = tmp_path / "bad.log"
    bad.write_text('{"header": {"rank": 0}, "coll_perf": ')
    unsupported = tmp_path / "empty.log"
    unsupported.write_text("\n")
    report = check_metrics_provider("nccl_inspector", LOGS, bad_input=bad, unsupported_input=unsupported)
    assert len(report.events) == 76


# -- boundaries and units (issue 36): each value at its threshold, each unit with a value whose scale error shows

def _op(*, rank: int = 0, n_ranks: int = 2, comm: str = "0x1", exec_us: Any = 1500, size: Any = 3 << 20,
        pid: Any = 7, host: Any = "h", start_ts: Any = None, dump_us: Any = None, kind: str = "coll",
        busbw: Any = 12.5, algbw: Any = 25.0) -> dict[str, Any]:
    """One Inspector record as the plugin writes it (the fields its README documents)."""
    perf: dict[str, Any] = {kind: "AllReduce" if kind == "coll" else "Send", f"{kind}_sn": 1,
                            f"{kind}_msg_size_bytes": size, f"{kind}_exec_time_us": exec_us,
                            f"{kind}_algobw_gbs": algbw, f"{kind}_busbw_gbs": busbw}
    if start_ts is not None:
        perf["event_trace_ts"] = {f"{kind}_start_ts": start_ts}
    meta: dict[str, Any] = {"hostname": host, "pid": pid}
    if dump_us is not None:
        meta["dump_timestamp_us"] = dump_us
    return {"header": {"id": comm, "rank": rank, "n_ranks": n_ranks}, "metadata": meta, f"{kind}_perf": perf}


def _read(tmp_path: Path, *records: dict[str, Any], name: str = "h-pid7.log") -> list[Any]:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return read_nccl_inspector(path)


def test_units_exec_time_us_is_ms_size_is_bytes_bandwidth_is_gbs_times_are_seconds(tmp_path: Path) -> None:
    events = _read(tmp_path, _op(exec_us=1500, size=3 << 20, busbw=12.5, algbw=25.0, start_ts=1764672000123456,
                                 dump_us=1764672000654321))
    by = {e.name: e for e in events}
    duration = by["nccl:AllReduce"]
    assert (duration.value, duration.unit, duration.kind) == (1.5, "ms", "duration")  # 1500 µs, not 1500 ms or 1.5 s
    assert (by["nccl.bytes:AllReduce"].value, by["nccl.bytes:AllReduce"].unit) == (3 * 2**20, "B")
    assert (by["nccl.busbw:AllReduce@4MiB"].value, by["nccl.busbw:AllReduce@4MiB"].unit) == (12.5, "GB/s")
    assert (by["nccl.algbw:AllReduce@4MiB"].value, by["nccl.algbw:AllReduce@4MiB"].kind) == (25.0, "ratio")
    assert duration.ts == pytest.approx(1764672000.123456, abs=1e-6)  # µs since the epoch -> s
    assert duration.attrs["dump_ts"] == pytest.approx(1764672000.654321, abs=1e-6)


def test_a_p2p_record_reads_its_own_fields(tmp_path: Path) -> None:
    events = _read(tmp_path, _op(kind="p2p", exec_us=250, size=1000, busbw=4.0, algbw=4.0))
    by = {e.name: e for e in events}
    assert by["nccl:Send"].value == 0.25 and by["nccl.bytes:Send"].value == 1000
    assert by["nccl.busbw:Send@1KiB"].value == 4.0


@pytest.mark.parametrize(("exec_us", "size", "ok"), [(0, 0, True), (0.0, 1, True), (-1, 0, False), (0, -1, False),
                                                     (-0.001, 0, False)])
def test_zero_time_and_size_are_read_below_zero_refused(tmp_path: Path, exec_us: Any, size: int, ok: bool) -> None:
    path = tmp_path / "h-pid7.log"
    path.write_text(json.dumps(_op(exec_us=exec_us, size=size)) + "\n")
    if ok:
        by = {e.name: e for e in read_nccl_inspector(path)}
        assert by["nccl:AllReduce"].value == 0.0 and by["nccl.bytes:AllReduce"].value == size
    else:
        with pytest.raises(InputError, match=r"h-pid7\.log:line 1: a time and a message size of at least 0"):
            read_nccl_inspector(path)


@pytest.mark.parametrize(("start", "ts"), [(0, None), (1, 1e-6), (-5, None), (True, None)])
def test_a_start_time_of_zero_is_no_time(tmp_path: Path, start: Any, ts: float | None) -> None:
    (event, *_rest) = _read(tmp_path, _op(start_ts=start))
    assert event.ts == ts


def test_communicators_of_equal_size_keep_the_first_ones_rank(tmp_path: Path) -> None:
    events = _read(tmp_path, _op(rank=1, n_ranks=4, comm="0xa"), _op(rank=3, n_ranks=4, comm="0xb"),
                   _op(rank=0, n_ranks=2, comm="0xc"))
    assert {e.rank for e in events} == {1}
    bigger = _read(tmp_path, _op(rank=1, n_ranks=4, comm="0xa"), _op(rank=6, n_ranks=5, comm="0xb"))
    assert {e.rank for e in bigger} == {6}


@pytest.mark.parametrize(("pid", "host", "rank"), [(0, "", 0), (-1, "", 9), (None, "", 9), (-1, "h", 0)])
def test_pid_zero_is_a_process_and_no_process_takes_the_file_name_rank(tmp_path: Path, pid: Any, host: str,
                                                                       rank: int) -> None:
    # the only communicator says rank 0; the file name says rank 9
    events = _read(tmp_path, _op(rank=0, n_ranks=2, pid=pid, host=host), name="trace_rank_9.log")
    assert {e.rank for e in events} == {rank}
    assert ("pid" in events[0].attrs) is (pid == 0)


@pytest.mark.parametrize(("size", "bucket"), [(2, "2B"), (3, "4B"), (1023, "1KiB"), ((1 << 20) - 1, "1MiB"),
                                              (1 << 20, "1MiB"), ((1 << 20) + 1, "2MiB"), (1 << 40, "1TiB"),
                                              ((1 << 40) + 1, "2TiB"), (1 << 50, "1024TiB"), (-3, "0B")])
def test_size_bucket_at_each_power_and_unit_boundary(size: int, bucket: str) -> None:
    assert size_bucket(size) == bucket


@pytest.mark.parametrize(("lines", "ok"), [(200, True), (201, False)])
def test_an_object_spread_over_200_lines_is_read_201_is_refused(tmp_path: Path, lines: int, ok: bool) -> None:
    record = json.dumps(_op(), indent=1).splitlines()  # 27 lines: padded with blank lines inside the object
    padded = [record[0], *([""] * (lines - len(record))), *record[1:]]
    assert len(padded) == lines
    path = tmp_path / "h-pid7.log"
    path.write_text("\n".join(padded) + "\n")
    if ok:
        assert {e.name for e in read_nccl_inspector(path)} >= {"nccl:AllReduce"}
    else:
        with pytest.raises(InputError, match=r"h-pid7\.log:line 1: a JSON object closed within 200 lines"):
            read_nccl_inspector(path)
