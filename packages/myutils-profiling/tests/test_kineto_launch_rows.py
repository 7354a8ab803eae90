"""Per-launch rows (``kineto.launch_rows``): HTA's ``get_cuda_kernel_launch_stats`` columns recomputed from the raw
events (its join on correlation ids of the launch and copy calls), plus the kernel, stream, call and operator."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from my_utils.profiling.kineto import analyze_traces
from my_utils.profiling.kineto.launch_rows import launch_rows
from my_utils.profiling.kineto.run import read_rank

HTA_CALLS = {"cudaLaunchKernel", "cudaLaunchKernelExC", "cudaMemcpyAsync", "cudaMemsetAsync",
             "runFunction - job_prep_and_submit_for_execution"}


def _expected(path: Path) -> dict[int, tuple[float, float, float]]:
    """HTA's rows: correlation -> (cpu_duration, gpu_duration, launch_delay clipped at 0)."""
    with gzip.open(path, "rt") as fh:
        events = [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]
    calls = {e["args"]["correlation"]: e for e in events if e.get("name") in HTA_CALLS
             and isinstance(e.get("args"), dict) and "correlation" in e["args"]}
    out = {}
    for e in events:
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset", "mtia_ccp_events") and args.get("correlation") in calls:
            c = calls[args["correlation"]]
            out[args["correlation"]] = (c["dur"], e["dur"], max(e["ts"] - c["ts"] - c["dur"], 0))
    return out


@pytest.mark.parametrize("name", ["trace_filter__sampled_rank-0.json.gz", "mtia_inference_rank_0.json.gz"])
def test_every_launch_as_hta_joins_it(real_fixtures: Any, name: str) -> None:
    path = Path(real_fixtures / "kineto" / "hta" / name)
    rows = launch_rows(read_rank(path).data)
    want = _expected(path)
    got = {r.correlation: (r.cpu_us, r.gpu_us, r.launch_delay_us) for r in rows}
    assert set(got) == set(want) and len(got) > 50
    for corr, (cpu, gpu, delay) in want.items():
        assert got[corr] == pytest.approx((cpu, gpu, delay), abs=1e-3)
    assert all(r.kernel and r.launch_call in HTA_CALLS | {"cuLaunchKernel"} for r in rows)


def test_the_report_keeps_the_longest_delays(real_fixtures: Any) -> None:
    """The registered table holds the ``limit`` longest delays (longest first); ``limit=None`` every launch."""
    path = Path(real_fixtures / "kineto" / "hta/trace_filter__sampled_rank-0.json.gz")
    every = analyze_traces(path, executor="serial", analyses=["launches"],
                           options={"launches": {"limit": None}}).to_rows()["kineto_kernel_launches"]
    top = analyze_traces(path, executor="serial", analyses=["launches"],
                         options={"launches": {"limit": 5}}).to_rows()["kineto_kernel_launches"]
    delays = sorted((r["launch_delay_us"] for r in every), reverse=True)
    assert [r["launch_delay_us"] for r in top] == pytest.approx(delays[:5])
    assert len(every) == len(_expected(path))
    # the operator around the call is a CPU operator or annotation of the trace
    assert any(r["operator"] for r in every)


def test_the_operator_and_stream_of_a_launch(tmp_path: Path) -> None:
    lane = {"pid": 1, "tid": 1}
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 100, **lane},
              {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 10, "dur": 8, **lane,
               "args": {"correlation": 5}},
              {"ph": "X", "cat": "kernel", "name": "gemm", "ts": 50, "dur": 30, "pid": 0, "tid": 13,
               "args": {"stream": 13, "correlation": 5, "device": 0}}]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    (row,) = launch_rows(read_rank(path).data)
    assert (row.kernel, row.operator, row.stream, row.launch_call) == ("gemm", "aten::mm", "13", "cudaLaunchKernel")
    assert (row.cpu_us, row.gpu_us, row.launch_delay_us) == (8, 30, 32)
