"""csv_to_trace: timer CSVs become traces whose lanes viewers show as written, in both layouts."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from my_utils.core.errors import InputError, UsageError
from my_utils.core.logger import GlobalLogger
from my_utils.core.profile_csv import HEADER_LINE, ProfileRow, format_profile_line, read_profile_csv
from my_utils.core.testing.trace_check import assert_valid_trace, check_trace, viewer_lane
from my_utils.core.timer import MyTimer
from my_utils.core.trace import ClockOffset, csv_to_trace, find_profile_csvs, profile_rows_to_trace

BASE_NS = 1_764_000_000_000_000_000
LAYOUTS = ["rank", "step"]


@pytest.fixture(autouse=True)
def fresh_logger() -> Iterator[None]:
    GlobalLogger._reset_for_tests()
    yield
    GlobalLogger._reset_for_tests()


def timer_csv(log_dir: Path, steps: int = 3, rank: int = 0, world_size: int = 1) -> Path:
    GlobalLogger._reset_for_tests()
    manager = GlobalLogger()
    manager.setup(log_dir, rank=rank, world_size=world_size)
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
    manager.flush()  # every step rendered into the CSV before it is read
    GlobalLogger._reset_for_tests()
    return log_dir / f"profile_rank_{rank}.csv"


def events(doc: dict[str, Any], ph: str) -> list[dict[str, Any]]:
    return [e for e in doc["traceEvents"] if e["ph"] == ph]


def regions(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The opening event of every region: a B, or an X of zero µs (the rank layout); not step slices."""
    return [e for e in doc["traceEvents"] if e["ph"] == "B" or (e["ph"] == "X" and e.get("cat") != "step")]


def thread_names(doc: dict[str, Any]) -> dict[tuple[int, int], str]:
    return {(e["pid"], e["tid"]): e["args"]["name"] for e in events(doc, "M") if e["name"] == "thread_name"}


def process_names(doc: dict[str, Any]) -> dict[int, str]:
    return {e["pid"]: e["args"]["name"] for e in events(doc, "M") if e["name"] == "process_name"}


def slices(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Every slice as viewers build them: pid, thread name, name, start, end (B/E paired in file order)."""
    names = thread_names(doc)
    out: list[dict[str, Any]] = []
    stacks: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for e in doc["traceEvents"]:
        lane = viewer_lane(e.get("pid"), e.get("tid"))
        if e["ph"] == "X":
            out.append({"pid": e["pid"], "thread": names[lane], "name": e["name"], "ts": e["ts"],
                        "end": e["ts"] + e["dur"], "args": e["args"]})
        elif e["ph"] == "B":
            stacks[lane].append(e)
        elif e["ph"] == "E":
            b = stacks[lane].pop()
            out.append({"pid": b["pid"], "thread": names[lane], "name": b["name"], "ts": b["ts"], "end": e["ts"],
                        "args": b["args"]})
    return out


@pytest.mark.parametrize("layout", LAYOUTS)
def test_timer_csv_becomes_a_valid_trace(tmp_path: Path, layout: str) -> None:
    csv_path = timer_csv(tmp_path)
    out = csv_to_trace(csv_path, tmp_path / "trace.json", layout=layout)
    assert_valid_trace(out)
    doc = json.loads(out.read_text())
    rows = read_profile_csv(csv_path)
    begins = regions(doc)
    assert len(begins) == 9 and len(events(doc, "E")) == sum(e["ph"] == "B" for e in begins)
    host = rows[0].machine_id.removesuffix("_rank0")
    assert process_names(doc) == {1: f"rank 0 ({host})"}  # pid = rank + 1
    names = sorted(thread_names(doc).values())
    assert names == (["train"] if layout == "rank" else ["step_0", "step_1", "step_2"])
    starts = {(r.step, r.event_name): r for r in rows if r.event_type == "START"}
    for b in begins:
        row = starts[(b["args"]["step"], b["name"])]
        assert b["ts"] == round(row.timestamp_unix * 1e6)  # the rows' unix times in µs
        assert b["args"]["node_id"] == int(row.metadata_dict()["node_id"]) and b["cat"] == "MyTimer"
    fwd = next(b for b in begins if b["name"] == "forward")
    assert fwd["args"]["parent_id"] == 0 and fwd["args"]["depth"] == 1
    other = doc["otherData"]
    assert other["schema_version"] == 2 and other["sources"] == [str(csv_path)] and other["layout"] == layout
    steps = [s for s in slices(doc) if s["name"].startswith("step ")]
    if layout == "step":
        assert steps == []
        return
    # each step is a parent slice holding exactly its own regions
    assert [s["name"] for s in steps] == ["step 0", "step 1", "step 2"]
    for step in steps:
        members = [s for s in slices(doc) if s["args"].get("step") == step["args"]["step"] and s is not step
                   and not s["name"].startswith("step ")]
        assert len(members) == 3 == step["args"]["regions"]
        assert step["ts"] == min(m["ts"] for m in members) and step["end"] == max(m["end"] for m in members)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_two_ranks_keep_every_lane(tmp_path: Path, layout: str) -> None:
    """The defect seen in Perfetto: tid 0 is the main thread, so rank 1's step_0 merged into step_1."""
    for rank in (0, 1):
        timer_csv(tmp_path, steps=3, rank=rank, world_size=2)
    doc = json.loads(csv_to_trace(tmp_path, tmp_path / "t.json", layout=layout).read_text())
    assert check_trace(doc) == []
    pids = set(process_names(doc))
    tids = [tid for _, tid in thread_names(doc)]
    assert len(tids) == len(set(tids)) and not set(tids) & (pids | {0})  # unique, never 0, never a pid
    assert sorted(process_names(doc).values())[0].startswith("rank 0 (") and len(pids) == 2
    regions = [s for s in slices(doc) if not s["name"].startswith("step ")]
    for pid, rank in ((1, 0), (2, 1)):
        assert process_names(doc)[pid].startswith(f"rank {rank} (")
        for step in range(3):
            mine = [s for s in regions if s["pid"] == pid and s["args"]["step"] == step]
            assert sorted(s["name"] for s in mine) == ["backward", "forward", "iter"]
            assert {s["thread"] for s in mine} == {f"step_{step}" if layout == "step" else "train"}
    sort_index = {(e["pid"], e["tid"]): e["args"]["sort_index"] for e in events(doc, "M")
                  if e["name"] == "thread_sort_index"}
    assert set(sort_index) == set(thread_names(doc))
    if layout == "step":  # lanes ordered by step within each rank
        order = sorted(thread_names(doc), key=lambda k: (k[0], sort_index[k]))
        assert [thread_names(doc)[k] for k in order] == ["step_0", "step_1", "step_2"] * 2


def test_rank_layout_has_one_lane_per_rank_whatever_the_steps(tmp_path: Path) -> None:
    csv_path = timer_csv(tmp_path, steps=1000)
    rank_doc = json.loads(csv_to_trace(csv_path, tmp_path / "r.json").read_text())  # the default layout
    step_doc = json.loads(csv_to_trace(csv_path, tmp_path / "s.json", layout="step").read_text())
    assert rank_doc["otherData"]["layout"] == "rank"
    assert len(thread_names(rank_doc)) == 1 and len(thread_names(step_doc)) == 1000
    assert sum(e.get("cat") == "step" for e in events(rank_doc, "X")) == 1000
    assert check_trace(rank_doc) == [] and check_trace(step_doc) == []


def test_a_wall_clock_read_late_never_makes_adjacent_steps_overlap(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # The interleaving that made the test above flaky under load, forced: the thread is preempted
    # between reading the wall clock and perf_counter_ns, so some wall readings come 10-20 ms late.
    import itertools
    import time

    from my_utils.core import clock

    real_time_ns = time.time_ns
    calls = itertools.count()

    def late_wall_clock() -> int:
        return real_time_ns() - (next(calls) % 3) * 10_000_000

    monkeypatch.setattr(time, "time_ns", late_wall_clock)
    clock.reanchor()
    try:
        csv_path = timer_csv(tmp_path, steps=60)
    finally:
        monkeypatch.undo()
        clock.reanchor()
    rows = read_profile_csv(csv_path)
    starts: dict[int, float] = {}
    ends: dict[int, float] = {}
    for row in rows:
        starts[row.step] = min(starts.get(row.step, row.timestamp_unix), row.timestamp_unix)
        ends[row.step] = max(ends.get(row.step, row.timestamp_unix), row.timestamp_unix)
    assert sorted(starts) == list(range(60))
    overlapping = [step for step in range(59) if ends[step] > starts[step + 1]]
    assert overlapping == []  # step N ends no later than step N+1 starts
    doc = json.loads(csv_to_trace(csv_path, tmp_path / "r.json").read_text())
    assert len(thread_names(doc)) == 1


def test_folder_list_and_gzip_inputs(tmp_path: Path) -> None:
    for rank in (0, 2, 10):
        lines = [format_profile_line(BASE_NS + rank * 10_000 + i * 1000, f"node{rank // 2}_rank{rank}", 4, "iter",
                                     kind, 0.001 * i, "node_id=0;parent_id=-1") for i, kind in enumerate(("START", "END"))]
        (tmp_path / f"profile_rank_{rank}.csv").write_text(HEADER_LINE + "".join(lines))
    (tmp_path / "notes.csv").write_text("not a profile\n")  # a folder holds only profile_rank_<R>.csv files
    assert [p.name for p in find_profile_csvs(tmp_path)] == [
        "profile_rank_0.csv", "profile_rank_2.csv", "profile_rank_10.csv"]
    out = csv_to_trace(tmp_path, tmp_path / "out" / "all.json.gz")
    doc = json.loads(gzip.decompress(out.read_bytes()))
    assert check_trace(doc) == []
    assert process_names(doc) == {1: "rank 0 (node0)", 3: "rank 2 (node1)", 11: "rank 10 (node5)"}
    assert [r["rank"] for r in doc["otherData"]["ranks"]] == [0, 2, 10]
    same = csv_to_trace([tmp_path / "profile_rank_10.csv", tmp_path / "profile_rank_0.csv"], tmp_path / "l.json")
    assert set(process_names(json.loads(same.read_text())).values()) == {"rank 0 (node0)", "rank 10 (node5)"}
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match=r"empty: expected profile_rank_<rank>.csv files in this folder"):
        csv_to_trace(empty, tmp_path / "x.json")
    assert not (tmp_path / "x.json").exists()


def test_machines_without_a_rank_keep_their_name(tmp_path: Path) -> None:
    rows = [format_profile_line(BASE_NS + i, machine, 0, "r", kind, 0.0, "")
            for machine in ("alpha", "beta") for i, kind in enumerate(("START", "END"))]
    path = tmp_path / "p.csv"
    path.write_text(HEADER_LINE + "".join(rows))
    doc = json.loads(csv_to_trace(path, tmp_path / "t.json").read_text())
    assert process_names(doc) == {1: "alpha", 2: "beta"} and check_trace(doc) == []


def test_clock_offsets_are_recorded_per_rank(tmp_path: Path) -> None:
    for rank in (0, 1):
        timer_csv(tmp_path, steps=1, rank=rank, world_size=2)
    rows = [r for p in find_profile_csvs(tmp_path) for r in read_profile_csv(p)]
    doc = profile_rows_to_trace(rows, clock_offsets={1: ClockOffset(0.0125, 4e-5)})
    offsets = {r["rank"]: r["clock_offset"] for r in doc["otherData"]["ranks"]}
    assert offsets == {0: {"offset_s": None, "uncertainty_s": None}, 1: {"offset_s": 0.0125, "uncertainty_s": 4e-5}}
    by_machine = profile_rows_to_trace(rows, clock_offsets={rows[0].machine_id: -0.5})
    assert by_machine["otherData"]["ranks"][0]["clock_offset"] == {"offset_s": -0.5, "uncertainty_s": None}
    with pytest.raises(UsageError, match=r"key 7 is neither a rank nor a machine_id"):
        csv_to_trace(tmp_path, tmp_path / "t.json", clock_offsets={7: 0.1})
    with pytest.raises(UsageError, match=r"expected seconds as finite numbers"):
        csv_to_trace(tmp_path, tmp_path / "t.json", clock_offsets={0: float("nan")})
    with pytest.raises(UsageError, match=r"layout='lanes'.*expected 'rank' or 'step'"):
        csv_to_trace(tmp_path, tmp_path / "t.json", layout="lanes")
    assert not (tmp_path / "t.json").exists()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_hand_written_rows_unmatched_and_overlapping(tmp_path: Path, layout: str) -> None:
    rows = [  # a and b overlap without nesting; c never ends; d ends without start; m is a mark
        (0, "a", "START"), (1, "b", "START"), (2, "a", "END"), (3, "b", "END"),
        (4, "c", "START"), (5, "d", "END"), (6, "m", "MARK"),
    ]
    path = tmp_path / "p.csv"
    path.write_text(HEADER_LINE + "".join(
        format_profile_line(BASE_NS + t * 1_000_000, "m_rank0", 1, name, kind, 0.0, "") for t, name, kind in rows))
    doc = json.loads(csv_to_trace(path, tmp_path / "t.json", layout=layout).read_text())
    assert check_trace(doc) == []
    base = "main" if layout == "rank" else "step_1"
    assert sorted(thread_names(doc).values()) == [base, f"{base} (overlapping 1)"]
    lane_of = {s["name"]: s["thread"] for s in slices(doc)}
    assert lane_of["a"] == base and lane_of["b"] == f"{base} (overlapping 1)"  # b moved to an extra lane
    instants = {e["name"]: e["args"] for e in events(doc, "i")}
    assert instants["c"]["unmatched"] == "START without an END"
    assert instants["d"]["unmatched"] == "END without a START"
    assert instants["m"]["event_type"] == "MARK" and "unmatched" not in instants["m"]


def test_overlapping_steps_keep_their_regions_under_their_own_step(tmp_path: Path) -> None:
    # step 2 begins before step 1 ends (two writers sharing a tag): it moves to an extra lane, whole
    rows = [(0, 1, "x", "START"), (1, 2, "y", "START"), (2, 1, "x", "END"), (3, 2, "y", "END")]
    path = tmp_path / "p.csv"
    path.write_text(HEADER_LINE + "".join(format_profile_line(BASE_NS + t * 1000, "h_rank0", step, name, kind, 0.0,
                                                              "node_id=0;tag=t") for t, step, name, kind in rows))
    doc = json.loads(csv_to_trace(path, tmp_path / "t.json").read_text())
    assert check_trace(doc) == []
    lane_of = {s["name"]: s["thread"] for s in slices(doc)}
    assert lane_of == {"step 1": "t", "x": "t", "step 2": "t (overlapping 1)", "y": "t (overlapping 1)"}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_equal_timestamps_still_nest(tmp_path: Path, layout: str) -> None:
    rows = [("outer", "START"), ("inner", "START"), ("inner", "END"), ("outer", "END")]
    path = tmp_path / "p.csv"
    path.write_text(HEADER_LINE + "".join(format_profile_line(BASE_NS, "r_rank0", 0, name, kind, 0.0,
                                                              f"node_id={int(name == 'inner')}")
                                          for name, kind in rows))
    doc = json.loads(csv_to_trace(path, tmp_path / "t.json", layout=layout).read_text())
    assert check_trace(doc) == []
    expected = [("outer", "B"), ("inner", "B"), ("inner", "E"), ("outer", "E")]
    if layout == "rank":  # zero-µs regions are X events there: Perfetto misplaces B/E at one ts inside an X
        expected = [("step 0", "X"), ("outer", "X"), ("inner", "X")]
    assert [(e["name"], e["ph"]) for e in doc["traceEvents"] if e["ph"] in "BEX"] == expected


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
    assert len(regions(doc)) == 5 and len(events(doc, "i")) == 1  # step 1's "iter" lost its END


# A step: a tree of regions, written as MyTimer writes it (START, children, END), with durations in µs.
_TREE = st.recursive(st.tuples(st.integers(0, 3), st.just([])),
                     lambda kids: st.tuples(st.integers(0, 3), st.lists(kids, max_size=3)), max_leaves=8)


def _tree_rows(tree: Any, t: list[int], counter: list[int], parent: int, lines: list[tuple[int, str, str, str]]) -> None:
    gap, children = tree
    node = counter[0]
    counter[0] += 1
    meta = f"node_id={node};parent_id={parent}"
    lines.append((t[0], f"r{node}", "START", meta))
    for child in children:
        t[0] += gap
        _tree_rows(child, t, counter, node, lines)
    t[0] += gap
    lines.append((t[0], f"r{node}", "END", meta))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(_TREE, min_size=1, max_size=3), min_size=1, max_size=4), st.integers(1, 3))
def test_any_timer_forest_stays_nested_in_both_layouts(steps: list[list[Any]], ranks: int) -> None:
    """Random region trees (zero-length regions and equal µs included) on several ranks stay valid."""
    rows: list[ProfileRow] = []
    for rank in range(ranks):
        t = [rank * 7]
        for step, trees in enumerate(steps):
            lines: list[tuple[int, str, str, str]] = []
            counter = [0]
            for tree in trees:
                _tree_rows(tree, t, counter, -1, lines)
            rows.extend(ProfileRow(ts / 1e6 + 1.7e9, "", f"h_rank{rank}", step, name, kind, 0.0, meta, len(rows) + 2)
                        for ts, name, kind, meta in lines)
    for layout in LAYOUTS:
        doc = profile_rows_to_trace(rows, layout=layout)
        assert check_trace(doc) == [], layout
        found = slices(doc)
        assert len(regions(doc)) == len(rows) // 2
        if layout == "rank":  # every region sits inside the parent slice of its own step, on its lane
            parents = {(s["pid"], s["args"]["step"]): s for s in found if s["name"].startswith("step ")}
            for s in found:
                parent = parents[(s["pid"], s["args"]["step"])]
                assert parent["thread"] == s["thread"] and parent["ts"] <= s["ts"] <= s["end"] <= parent["end"]
