"""torch.compile's generated kernels (``kineto.compiled_kernels``) against HTA's ``test_triton_trace`` values and the
raw events of its ``triton_example`` trace."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from my_utils.profiling.kineto import analyze_traces


def test_htas_triton_operator(real_fixtures: Any) -> None:
    """HTA: one CPU operator with a kernel backend, ``triton_poi_fused_add_cos_sin_0``, backend ``triton``, hash
    ``cqaokwf2…``; the kernel it launched (through cuLaunchKernel) and its time are read from the trace."""
    path = Path(real_fixtures / "kineto" / "hta/triton_example.json.gz")
    rows = analyze_traces(path, executor="serial", analyses=["compiled_kernels"]).to_rows()["kineto_compiled_kernels"]
    assert len(rows) == 1
    row = rows[0]
    assert row["operator"] == "triton_poi_fused_add_cos_sin_0"
    assert row["kernel_backend"] == "triton"
    assert row["kernel_hash"] == "cqaokwf2bph4egogzevc22vluasiyuui4i54zpemp6knbsggfbuu"
    with gzip.open(path, "rt") as fh:
        events = json.load(fh)["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert row["calls"] == 1 and row["gpu_activities"] == len(kernels) == 1
    assert row["gpu_us"] == kernels[0]["dur"] and row["kernels"] == kernels[0]["name"]
    assert "kernel_file" not in row  # the path holds the user's name


def test_no_table_without_generated_kernels(real_fixtures: Any) -> None:
    path = Path(real_fixtures / "kineto" / "hta/critical_path__simple_add.json.gz")
    rows = analyze_traces(path, executor="serial", analyses=["compiled_kernels"]).to_rows()
    assert "kineto_compiled_kernels" not in rows or rows["kineto_compiled_kernels"] == []


def test_a_generated_kernel_on_a_compiled_run(tmp_path: Path) -> None:
    """Two calls of one Inductor kernel, each launching one kernel: calls, activities and time add up."""
    lane = {"pid": 1, "tid": 1}
    events: list[dict[str, Any]] = []
    for i, t in enumerate((0.0, 1000.0)):
        events += [{"ph": "X", "cat": "cpu_op", "name": "triton_red_fused_sum_0", "ts": t, "dur": 50, **lane,
                    "args": {"kernel_backend": "triton", "kernel_hash": "abc123", "kernel_file": "/home/someone/x.py"}},
                   {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernel", "ts": t + 10, "dur": 20, **lane,
                    "args": {"correlation": 10 + i}},
                   {"ph": "X", "cat": "kernel", "name": "triton_red_fused_sum_0", "ts": t + 40, "dur": 7 + i,
                    "pid": 0, "tid": 7, "args": {"stream": 7, "correlation": 10 + i}}]
    path = tmp_path / "compiled.json"
    path.write_text(json.dumps({"traceEvents": events}))
    rows = analyze_traces(path, executor="serial", analyses=["compiled_kernels"]).to_rows()["kineto_compiled_kernels"]
    assert [(r["calls"], r["gpu_activities"], r["gpu_us"], r["kernel_hash"]) for r in rows] == [(2, 2, 15.0, "abc123")]
