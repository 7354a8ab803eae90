"""The structural trace checker: clean traces pass, each kind of breakage is named, and its CLI."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from my_utils.core.testing.trace_check import assert_valid_trace, check_trace, main


def meta(pid: int = 1) -> list[dict[str, Any]]:
    return [{"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": f"rank{pid}"}},
            {"name": "thread_name", "ph": "M", "pid": pid, "tid": 7, "args": {"name": "step_7"}}]


def clean() -> dict[str, Any]:
    return {"traceEvents": [
        *meta(),
        {"name": "iter", "ph": "B", "ts": 0, "pid": 1, "tid": 7},
        {"name": "fwd", "ph": "B", "ts": 1, "pid": 1, "tid": 7},
        {"name": "fwd", "ph": "E", "ts": 2, "pid": 1, "tid": 7},
        {"name": "iter", "ph": "E", "ts": 3.5, "pid": 1, "tid": 7},
        {"name": "k", "ph": "X", "ts": 0, "dur": 3, "pid": 1, "tid": 8},
        {"name": "k2", "ph": "X", "ts": 1, "dur": 2.0005, "pid": 1, "tid": 8},
        {"name": "mark", "ph": "i", "s": "g", "ts": 2, "pid": "", "tid": ""},
        {"name": "flow", "ph": "s", "id": 4, "cat": "c", "ts": 0, "pid": 1, "tid": 8},
        {"name": "flow", "ph": "f", "id": 4, "cat": "c", "ts": 1, "pid": 1, "tid": 7},
    ]}


def test_clean_trace_has_no_problems(tmp_path: Path) -> None:
    doc = clean()
    assert check_trace(doc) == []
    assert check_trace(doc["traceEvents"]) == []  # the bare array form is legal
    plain = tmp_path / "t.json"
    plain.write_text(json.dumps(doc))
    packed = tmp_path / "t.json.gz"
    packed.write_bytes(gzip.compress(json.dumps(doc).encode()))
    assert_valid_trace(plain)
    assert_valid_trace(str(packed))


def broken(index: int, **changes: Any) -> dict[str, Any]:
    doc = clean()
    event = doc["traceEvents"][index]
    for key, value in changes.items():
        if value is None:
            event.pop(key, None)
        else:
            event[key] = value
    return doc


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (broken(2, ph=None), "no 'ph'"),
        (broken(2, ts="0"), "numeric 'ts'"),
        (broken(3, name="other"), "B/E not nested"),
        (broken(4, ts=0.5), "before its 'B'"),
        (broken(4, ph="i"), "'B' never closed"),
        (broken(6, dur=None), "'X' needs a numeric 'dur' >= 0"),
        (broken(6, dur=-1), "'X' needs a numeric 'dur' >= 0"),
        (broken(7, dur=5), "overlaps event"),
        (broken(0, name="process_nickname"), "unknown metadata name"),
        (broken(1, args={}), "needs a string args.name"),
        (broken(0, pid=2), "pid 1 has events but no 'process_name'"),
        (broken(9, ph="t"), "expected one 's' and one 'f'"),
        (broken(9, id=None), "flow event without an 'id'"),
        (broken(0, pid=""), "pid '' (empty): Perfetto's JSON parser rejects it"),
        ({"traceEvents": {}}, "'traceEvents' to be a list"),
        (42, "expected a JSON object"),
    ],
)
def test_each_breakage_is_reported(doc: Any, expected: str) -> None:
    problems = check_trace(doc)
    assert any(expected in p for p in problems), problems
    with pytest.raises(AssertionError, match="invalid trace"):
        assert_valid_trace(doc)


def test_unmatched_end_is_caught() -> None:
    doc = clean()
    doc["traceEvents"].append({"name": "x", "ph": "E", "ts": 9, "pid": 1, "tid": 3})
    assert any("'E' without an open 'B'" in p for p in check_trace(doc))


def test_problem_list_is_capped() -> None:
    doc = {"traceEvents": [{"name": "x", "ph": "E", "ts": i, "pid": 1, "tid": 1} for i in range(80)] + meta()}
    problems = check_trace(doc, max_problems=10)
    assert len(problems) == 11 and problems[-1] == "... and 70 more problems"


def test_real_torch_traces(real_fixtures: Path) -> None:
    """Real Kineto traces load; torch leaves its "Spans" pid unnamed, which only the strict rule flags."""
    trace = real_fixtures / "kineto" / "hta" / "cpu_only__rank-34.pt.trace.json.gz"
    assert check_trace(trace, require_process_names=False) == []
    assert check_trace(trace) == ["pid 'Spans' has events but no 'process_name' metadata event"]
    # a GPU trace whose "Stream Sync" X events partially overlap: what Perfetto drops
    alexnet = real_fixtures / "kineto" / "hta" / "critical_path__alexnet_trace.json.gz"
    assert any("overlaps event" in p for p in check_trace(alexnet, require_process_names=False))


def test_trace_written_by_torch_profiler_on_cpu(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, record_function

    with profile(activities=[ProfilerActivity.CPU]) as prof, record_function("my_block"):
        torch.ones(8, 8) @ torch.ones(8, 8)
    out = tmp_path / "torch_trace.json"
    prof.export_chrome_trace(str(out))
    problems = check_trace(out, require_process_names=False)
    # torch's own user_annotation X events may start inside a python_function and outlive it
    assert all("overlaps event" in p for p in problems), problems


def two_rank_step_lanes(first_tid: int) -> dict[str, Any]:
    """Two ranks with one lane per step, step lanes numbered from ``first_tid`` (the seed's ids: 0)."""
    evs: list[dict[str, Any]] = []
    for pid in (0, 1):
        evs.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": f"rank {pid}"}})
        for step in range(2):
            tid = first_tid + step
            evs.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": f"step_{step}"}})
            evs.append({"name": "iter", "ph": "B", "ts": step * 10, "pid": pid, "tid": tid})
            evs.append({"name": "iter", "ph": "E", "ts": step * 10 + 5, "pid": pid, "tid": tid})
    return {"traceEvents": evs}


def test_lanes_a_viewer_merges_are_caught() -> None:
    """tid 0 is the main thread (tid = pid) in Perfetto: rank 1's step_0 lands in its step_1 lane."""
    problems = check_trace(two_rank_step_lanes(0))
    assert problems == ["pid 1: tids 0 'step_0', 1 'step_1' are one thread in viewers (tid 0 means the main "
                        "thread, whose tid is the pid 1), so their slices merge into one lane; give each lane its "
                        "own tid, neither 0 nor the pid"]
    assert check_trace(two_rank_step_lanes(100)) == []  # distinct tids, none 0, none a pid


def test_a_lane_named_twice_is_caught() -> None:
    doc = clean()
    doc["traceEvents"].append({"name": "thread_name", "ph": "M", "pid": 1, "tid": 7, "args": {"name": "other"}})
    assert check_trace(doc) == ["pid 1 tid 7: thread_name given 2 times ('step_7', 'other'); viewers show one name "
                                "for all its slices"]


def test_x_events_must_nest_with_b_e_slices_on_their_lane() -> None:
    doc = clean()
    doc["traceEvents"].append({"name": "step", "ph": "X", "ts": 0, "dur": 3.5, "pid": 1, "tid": 7})
    assert check_trace(doc) == []  # encloses iter (0 .. 3.5) exactly
    doc["traceEvents"][-1]["dur"] = 1.5  # ends inside fwd (1 .. 2)
    problems = check_trace(doc)
    assert len(problems) == 1 and "overlaps event" in problems[0], problems


def test_a_zero_length_b_e_pair_on_a_lane_with_x_events_is_caught() -> None:
    """Perfetto leaves such a pair unended (data loss); as an X of dur 0 it is kept."""
    doc = clean()
    doc["traceEvents"] += [{"name": "step", "ph": "X", "ts": 0, "dur": 3.5, "pid": 1, "tid": 7},
                           {"name": "empty", "ph": "B", "ts": 2.5, "pid": 1, "tid": 7},
                           {"name": "empty", "ph": "E", "ts": 2.5, "pid": 1, "tid": 7}]
    problems = check_trace(doc)
    assert len(problems) == 1 and "event 12 (B 'empty' pid=1 tid=7): a B/E pair at one timestamp on a lane with 'X'" \
        in problems[0], problems
    doc["traceEvents"][-2:] = [{"name": "empty", "ph": "X", "ts": 2.5, "dur": 0, "pid": 1, "tid": 7}]
    assert check_trace(doc) == []
    # on a lane without X events, Perfetto keeps B/E in file order: no problem
    assert check_trace(clean()["traceEvents"] + [{"name": "e", "ph": "B", "ts": 9, "pid": 1, "tid": 7},
                                                 {"name": "e", "ph": "E", "ts": 9, "pid": 1, "tid": 7}]) == []


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "my_utils.core.testing.trace_check", *args],
                          capture_output=True, text=True, timeout=60, check=False)


def test_cli_exit_codes_and_one_line_per_problem(tmp_path: Path) -> None:
    good = tmp_path / "good.json.gz"
    good.write_bytes(gzip.compress(json.dumps(clean()).encode()))
    merged = tmp_path / "merged.json"
    merged.write_text(json.dumps(two_rank_step_lanes(0)))
    proc = run_cli(str(good))
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "ok: 1 trace file(s), 11 events, no problems\n", "")
    proc = run_cli(str(good), str(merged))
    assert proc.returncode == 1 and proc.stderr == ""
    assert proc.stdout.splitlines() == [f"{merged}: pid 1: tids 0 'step_0', 1 'step_1' are one thread in viewers "
                                        "(tid 0 means the main thread, whose tid is the pid 1), so their slices "
                                        "merge into one lane; give each lane its own tid, neither 0 nor the pid"]


@pytest.mark.parametrize(("content", "expected"), [
    (None, "cannot read a JSON trace (FileNotFoundError: No such file or directory)"),
    (b'{"traceEvents": [', "cannot read a JSON trace (JSONDecodeError: "),
    (gzip.compress(b'{"traceEvents": []}', mtime=0)[:-12], "cannot read a JSON trace (EOFError: "),
    (b"\xff\xfe{}", "cannot read a JSON trace (UnicodeDecodeError: "),
    (b'{"events": []}', "not a trace: expected a JSON object with a 'traceEvents' list, or a JSON array"),
])
def test_cli_unreadable_input_is_one_line_and_exit_2(tmp_path: Path, content: bytes | None, expected: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / ("t.json.gz" if content and content[:2] == b"\x1f\x8b" else "t.json")
    if content is not None:
        path.write_bytes(content)
    assert main([str(path)]) == 2
    out, err = capsys.readouterr()
    assert out.startswith(f"{path}: {expected}") and out.count("\n") == 1 and err == ""


def test_cli_can_allow_unnamed_processes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = broken(0, pid=2)  # pid 1 is not named
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    assert main([str(path)]) == 1
    assert capsys.readouterr().out == f"{path}: pid 1 has events but no 'process_name' metadata event\n"
    assert main(["--allow-unnamed-processes", str(path)]) == 0
    assert capsys.readouterr().out.startswith("ok: 1 trace file(s)")
