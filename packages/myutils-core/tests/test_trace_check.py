"""The structural trace checker: clean traces pass, each kind of breakage is named."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from my_utils.core.testing.trace_check import assert_valid_trace, check_trace


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
