"""NcclInspectorProvider on hand-built Inspector logs (no public real one exists), totals recomputed with json."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from my_utils.core.errors import InputError, MyUtilsError, UnsupportedInputError
from my_utils.profiling.providers.nccl_inspector import (
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
