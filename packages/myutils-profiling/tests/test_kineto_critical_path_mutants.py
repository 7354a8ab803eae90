"""The critical path on generated traces built for the plausible bugs its HTA cases leave alive (issue 36).

``.ci/mutants/kineto.toml`` found two behaviours no trace of ``test_kineto_critical_path.py`` pins:
a negative edge on the path (a kernel starting before the previous one on its stream ends, as
clocks of a busy stream record it) adds nothing to the path's breakdown, and an operator starting
exactly at a step's end is CPU work of that step (a window holds what starts in ``[start, end]``,
as the graph's own window test does). Each trace is written here and its figures worked out by hand.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from my_utils.profiling.kineto.critical_path import critical_path, critical_path_tables
from my_utils.profiling.kineto.run import read_rank


def _overlapping_kernels(path: Path, overlap_us: float) -> Any:
    """aten::mm (0–10 µs) launches gemm (1–3 µs) onto stream 7 at 5 µs for 100 µs; aten::add (20–30 µs) launches
    add_kernel (21–23 µs) starting ``overlap_us`` before gemm ends: only a kernel-to-kernel edge links them."""
    ops = [{"ph": "X", "cat": "cpu_op", "name": name, "ts": ts, "dur": 10, "pid": 1, "tid": 1}
           for name, ts in (("aten::mm", 0), ("aten::add", 20))]
    launches = [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": ts, "dur": 2, "pid": 1,
                 "tid": 1, "args": {"correlation": corr}} for corr, ts in ((1, 1), (2, 21))]
    kernels = [{"ph": "X", "cat": "kernel", "name": name, "ts": ts, "dur": 100, "pid": 0, "tid": 7,
                "args": {"stream": 7, "correlation": corr, "device": 0}}
               for name, corr, ts in (("gemm", 1, 5), ("add_kernel", 2, 105 - overlap_us))]
    path.write_text(json.dumps({"traceEvents": ops + launches + kernels}))
    return read_rank(path).data


@pytest.mark.parametrize("overlap", [1, 3])
def test_a_negative_edge_on_the_path_adds_nothing_to_its_breakdown(tmp_path: Path, overlap: int) -> None:
    """The kernel-to-kernel edge weighs −1 or −3 µs, which HTA counts as 0 in the path's length (1 µs CPU, 4 µs
    launch delay, 200 µs of kernels: 205 µs); the breakdown gives that kind 0 µs too, never a negative time."""
    d = _overlapping_kernels(tmp_path / "t.json", overlap)
    cp = critical_path(d, "", None)
    kk = [e for e in cp.edges if e.critical and e.bound_by == "gpu_kernel_kernel_overhead"]
    assert [e.weight for e in kk] == [-overlap] and cp.length_us == 205
    assert cp.breakdown()["gpu_kernel_kernel_overhead"] == 0.0
    tables = critical_path_tables(d, "", None)
    (kk_row,) = [r for r in tables["critical_path_breakdown"] if r.bound_by == "gpu_kernel_kernel_overhead"]
    assert kk_row.us == 0.0
    (row,) = tables["critical_path"]
    assert row.gpu_compute_bound_pct == pytest.approx(100 * 200 / 205)


def test_an_operator_starting_at_a_steps_end_is_that_steps_cpu_work(tmp_path: Path) -> None:
    """Step #1 (100 µs) holds only an operator starting at its last microsecond; step #2 (200 µs) holds an operator
    from its start. Both hold CPU work, so the lower median of the two is step #1, and nothing is left out."""
    events = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "ts": ts, "dur": dur, "pid": 1,
               "tid": 1} for n, ts, dur in ((1, 0, 100), (2, 200, 200))]
    events += [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 100, "dur": 5, "pid": 1, "tid": 2},
               {"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": 200, "dur": 50, "pid": 1, "tid": 1}]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    cp = critical_path(read_rank(path).data)
    assert cp.window.label == "ProfilerStep#1 (median of 2 steps)"
