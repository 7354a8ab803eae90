"""csv_to_trace: timer CSVs become valid, balanced Chrome/Perfetto traces with one pid per rank."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from my_utils.core.errors import InputError
from my_utils.core.logger import GlobalLogger
from my_utils.core.profile_csv import HEADER_LINE, format_profile_line, read_profile_csv
from my_utils.core.testing.trace_check import assert_valid_trace, check_trace
from my_utils.core.timer import MyTimer
from my_utils.core.trace import csv_to_trace

BASE_NS = 1_764_000_000_000_000_000


@pytest.fixture(autouse=True)
def fresh_logger() -> Iterator[None]:
    GlobalLogger._reset_for_tests()
    yield
    GlobalLogger._reset_for_tests()


def timer_csv(log_dir: Path, steps: int = 3) -> Path:
    GlobalLogger().setup(log_dir, rank=0, world_size=1)
    timer = MyTimer(tag="train")
    for step in range(steps):
        timer.set_step(step)
        timer.start("iter")
        timer.start("forward")
        timer.stop("forward")
        timer.start("backward")
        timer.stop("backward")
        timer.stop("iter")
        timer.step()
    return log_dir / "profile_rank_0.csv"


def events(doc: dict[str, Any], ph: str) -> list[dict[str, Any]]:
    return [e for e in doc["traceEvents"] if e["ph"] == ph]


def test_timer_csv_becomes_a_valid_trace(tmp_path: Path) -> None:
    csv_path = timer_csv(tmp_path)
    out = csv_to_trace(csv_path, tmp_path / "trace.json")
    assert_valid_trace(out)
    doc = json.loads(out.read_text())
    rows = read_profile_csv(csv_path)
    begins, ends = events(doc, "B"), events(doc, "E")
    assert len(begins) == len(ends) == 9
    assert {e["pid"] for e in begins} == {0}  # machine "<host>_rank0" -> pid 0
    (pname,) = [e for e in events(doc, "M") if e["name"] == "process_name"]
    assert pname["args"]["name"] == rows[0].machine_id
    threads = {e["tid"]: e["args"]["name"] for e in events(doc, "M") if e["name"] == "thread_name"}
    assert threads == {0: "step_0", 1: "step_1", 2: "step_2"}
    # timestamps are the rows' unix times in µs
    starts = {(r.step, r.event_name): r for r in rows if r.event_type == "START"}
    for b in begins:
        row = starts[(b["tid"], b["name"])]
        assert b["ts"] == round(row.timestamp_unix * 1e6)
        assert b["args"]["node_id"] == int(row.metadata_dict()["node_id"])
        assert b["args"]["step"] == row.step and b["cat"] == "MyTimer"
    fwd = next(b for b in begins if b["name"] == "forward")
    assert fwd["args"]["parent_id"] == 0 and fwd["args"]["depth"] == 1
    assert doc["otherData"]["schema_version"] == 1 and doc["otherData"]["sources"] == [str(csv_path)]


def test_several_ranks_get_one_pid_each_and_gzip_output(tmp_path: Path) -> None:
    paths = []
    for rank in range(3):
        lines = [format_profile_line(BASE_NS + rank * 10_000 + i * 1000, f"node{rank // 2}_rank{rank}", 4, "iter",
                                     kind, 0.001 * i, "node_id=0;parent_id=-1") for i, kind in enumerate(("START", "END"))]
        path = tmp_path / f"profile_rank_{rank}.csv"
        path.write_text(HEADER_LINE + "".join(lines))
        paths.append(path)
    out = csv_to_trace(paths, tmp_path / "all.json.gz")
    doc = json.loads(gzip.decompress(out.read_bytes()))
    assert check_trace(doc) == []
    names = {e["pid"]: e["args"]["name"] for e in events(doc, "M") if e["name"] == "process_name"}
    assert names == {0: "node0_rank0", 1: "node0_rank1", 2: "node1_rank2"}
    assert sorted(e["pid"] for e in events(doc, "B")) == [0, 1, 2]


def test_hand_written_rows_unmatched_and_overlapping(tmp_path: Path) -> None:
    rows = [  # a and b overlap without nesting; c never ends; d ends without start; m is a mark
        (0, "a", "START"), (1, "b", "START"), (2, "a", "END"), (3, "b", "END"),
        (4, "c", "START"), (5, "d", "END"), (6, "m", "MARK"),
    ]
    path = tmp_path / "p.csv"
    path.write_text(HEADER_LINE + "".join(
        format_profile_line(BASE_NS + t * 1_000_000, "m_rank0", 1, name, kind, 0.0, "") for t, name, kind in rows))
    doc = json.loads(csv_to_trace(path, tmp_path / "t.json").read_text())
    assert check_trace(doc) == []
    lanes = {(e["name"], e["tid"]) for e in events(doc, "B")}
    assert len({tid for _, tid in lanes}) == 2  # b moved to an extra lane of step 1
    thread_names = sorted(e["args"]["name"] for e in events(doc, "M") if e["name"] == "thread_name")
    assert thread_names == ["step_1", "step_1 (overlapping 1)"]
    instants = {e["name"]: e["args"] for e in events(doc, "i")}
    assert instants["c"]["unmatched"] == "START without an END"
    assert instants["d"]["unmatched"] == "END without a START"
    assert instants["m"]["event_type"] == "MARK" and "unmatched" not in instants["m"]


def test_equal_timestamps_still_nest(tmp_path: Path) -> None:
    rows = [("outer", "START", 0), ("inner", "START", 0), ("inner", "END", 0), ("outer", "END", 0)]
    path = tmp_path / "p.csv"
    path.write_text(HEADER_LINE + "".join(format_profile_line(BASE_NS, "r_rank0", 0, name, kind, 0.0,
                                                              f"node_id={int(name == 'inner')}")
                                          for name, kind, _ in rows))
    doc = json.loads(csv_to_trace(path, tmp_path / "t.json").read_text())
    assert check_trace(doc) == []
    assert [(e["name"], e["ph"]) for e in doc["traceEvents"] if e["ph"] in "BE"] == [
        ("outer", "B"), ("inner", "B"), ("inner", "E"), ("outer", "E")]


def test_malformed_csv_writes_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(HEADER_LINE + "1.0,t,m,notastep,n,START,0,\n")
    with pytest.raises(InputError, match=r"bad.csv:line 2: expected an integer in column 'step'"):
        csv_to_trace(bad, tmp_path / "out.json")
    assert not (tmp_path / "out.json").exists()
    assert list(tmp_path.iterdir()) == [bad]


def test_torn_csv_still_converts(tmp_path: Path) -> None:
    path = timer_csv(tmp_path, steps=2)
    data = path.read_bytes()
    path.write_bytes(data[:-10])  # the last END row is torn
    doc = json.loads(csv_to_trace(path, tmp_path / "t.json").read_text())
    assert check_trace(doc) == []
    assert len(events(doc, "B")) == 5 and len(events(doc, "i")) == 1  # step 1's "iter" lost its END
