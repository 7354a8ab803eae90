"""Setup in Kineto traces on the generated cases the real traces lack (issue 36, ``.ci/mutants/kineto.toml``).

A first call is setup only when at least two later calls show what the call normally costs, and
never when it blocks (its first wait is the GPU's work); the setup share in the ``kineto_setup``
table is of the capture, not of the GPU span. Each trace is written here, its figures worked out by
hand from the events.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from my_utils.profiling.kineto import analyze_traces

LANE = {"pid": 1, "tid": 1}


def _runtime(name: str, ts: float, dur: float) -> dict[str, Any]:
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "ts": ts, "dur": dur, **LANE}


def _rows(tmp_path: Path, events: list[dict[str, Any]]) -> dict[str, Any]:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return analyze_traces(path, executor="serial", analyses=["setup"]).to_rows()


def _first_calls(rows: dict[str, Any]) -> int:
    return sum(r["events"] for r in rows.get("kineto_setup_kinds") or [] if r["kind"] == "first calls")


def test_a_first_call_needs_two_later_calls_to_compare_with(tmp_path: Path) -> None:
    """cudaFuncGetAttributes: a 5 ms first call, then 10 µs calls. With one later call it is not judged; with two,
    it is 500× their median and is setup."""
    two = [_runtime("cudaFuncGetAttributes", 0, 5000), _runtime("cudaFuncGetAttributes", 6000, 10)]
    assert _first_calls(_rows(tmp_path, two)) == 0
    three = [*two, _runtime("cudaFuncGetAttributes", 7000, 10)]
    assert _first_calls(_rows(tmp_path, three)) == 1


def test_a_first_blocking_call_is_no_setup(tmp_path: Path) -> None:
    """cudaStreamSynchronize waits 5 ms the first time (for the GPU's work), then 10 µs: not setup."""
    calls = [_runtime("cudaStreamSynchronize", t, d) for t, d in ((0, 5000), (6000, 10), (7000, 10), (8000, 10))]
    assert _first_calls(_rows(tmp_path, calls)) == 0


def test_the_setup_share_is_of_the_capture(tmp_path: Path) -> None:
    """A 2 ms cudaMalloc in a 10 ms capture whose GPU work spans 1 ms: setup is 20 % of the capture."""
    events = [_runtime("cudaMalloc", 0, 2000), _runtime("cudaLaunchKernel", 3000, 5) | {"args": {"correlation": 1}},
              {"ph": "X", "cat": "kernel", "name": "gemm", "ts": 4000, "dur": 1000, "pid": 0, "tid": 7,
               "args": {"stream": 7, "correlation": 1, "device": 0}},
              {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 9000, "dur": 1000, **LANE}]
    (row,) = _rows(tmp_path, events)["kineto_setup"]
    assert (row["capture_us"], row["setup_us"], row["gpu_span_us"]) == (10_000, 2000, 1000)
    assert row["setup_pct"] == pytest.approx(20.0)
