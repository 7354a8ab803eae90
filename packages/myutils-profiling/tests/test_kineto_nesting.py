"""``kineto.read.nesting`` through ``read_trace``: the dominant parent of each host range, in the same pass."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from my_utils.profiling.kineto.read.nesting import NestingPass, Parent
from my_utils.profiling.kineto.read.provider import parse_trace_file, read_trace


def _x(name: str, ts: float, dur: float, tid: int = 1, cat: str = "cpu_op") -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur}


def test_nesting_by_time_per_thread(tmp_path: Path) -> None:
    events = [
        _x("ProfilerStep#1", 0, 1000),  # a step is never a parent
        _x("outer", 10, 100, cat="user_annotation"),
        _x("a", 20, 50), _x("b", 30, 10),  # b inside a inside outer
        _x("a", 200, 40),  # a at top level: 40 of its 90 µs
        _x("b", 205, 10),
        _x("b", 20, 30, tid=2),  # another thread: top level there
        _x("a", 300, 30), _x("a", 305, 10),  # a recursive call is not its own parent
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    read = read_trace(path, passes=(NestingPass,))
    (parents,) = read.results
    assert parents["cpu_op:a"] == Parent("annotation:outer", 50 / 130)
    assert parents["cpu_op:b"] == Parent("cpu_op:a", 20 / 50)
    assert "annotation:outer" not in parents
    assert read.events == parse_trace_file(path)  # the extra pass changes nothing the provider reports


def test_real_trace_local_scalar_dense_runs_inside_item(real_fixtures: Any) -> None:
    path = real_fixtures / "kineto/hta/trace_diff__test.json.gz"
    (parents,) = read_trace(path, passes=(NestingPass,)).results
    # independently: every aten::_local_scalar_dense lies inside an aten::item of its thread
    with gzip.open(path, "rt") as fh:
        raw = [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    items: dict[tuple[Any, Any], list[tuple[float, float]]] = defaultdict(list)
    for e in raw:
        if e["name"] == "aten::item":
            items[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
    inner = [e for e in raw if e["name"] == "aten::_local_scalar_dense"]
    assert inner and all(any(a <= e["ts"] and e["ts"] + e["dur"] <= b for a, b in items[(e["pid"], e["tid"])])
                         for e in inner)
    assert parents["cpu_op:aten::_local_scalar_dense"] == Parent("cpu_op:aten::item", 1.0)
