"""torch.compile's Triton kernels: attributed to their compiled region, costed with Inductor's FLOPs, counted in MFU.

The host side is recorded for real by torch 2.13 on the CPU: a ``Torch-Compiled Region`` range
around the record Inductor opens for each Triton launch (``_RecordFunctionFast`` with the keyword
arguments ``CachingAutotuner.get_profiler_kwargs`` passes: ``kernel_flop``, ``kernel_num_gb``...).
No GPU is here, so the device side is added at its seam: the driver's launch call inside that
record and the kernel it launched, with a ``deviceProperties`` entry naming an H100.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from my_utils.profiling.kineto.mfu import mfu_tables  # noqa: E402
from my_utils.profiling.kineto.ops.tables import ops_tables  # noqa: E402
from my_utils.profiling.kineto.run import read_rank  # noqa: E402

KERNEL = "triton_tem_fused_mm_0"
FLOP, GB, KERNEL_US = 2 * 512 * 256 * 128, 0.000524288, 40.0


def _compiled_trace(tmp_path: Path) -> Path:
    from torch.profiler import ProfilerActivity, profile, record_function

    x, w = torch.randn(512, 256), torch.randn(256, 128)
    inductor_kwargs = {"kernel_file": "/tmp/compiled.py", "kernel_hash": "0123", "kernel_backend": "triton",
                       "stream": 0, "num_warps": 4, "num_stages": 3, "kernel_kwargs": "BLOCK_M=64",
                       "kernel_name": KERNEL, "kernel_flop": FLOP, "kernel_num_gb": GB}
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof, \
            record_function("Torch-Compiled Region: 0/0"), \
            torch._C._profiler._RecordFunctionFast(KERNEL, (x, w), inductor_kwargs):
        torch.empty(1)  # the launch happens in here
    raw = tmp_path / "cpu.json"
    prof.export_chrome_trace(str(raw))
    trace = json.loads(raw.read_text())
    (launch_in,) = [e for e in trace["traceEvents"] if e.get("name") == KERNEL and e.get("cat") == "cpu_op"]
    ts, pid, tid = launch_in["ts"] + launch_in["dur"] / 2, launch_in["pid"], launch_in["tid"]
    trace["traceEvents"] += [
        {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernel", "pid": pid, "tid": tid, "ts": ts, "dur": 0.5,
         "args": {"correlation": 900001, "External id": 1}},
        {"ph": "X", "cat": "kernel", "name": KERNEL, "pid": 0, "tid": 7, "ts": ts + 5, "dur": KERNEL_US,
         "args": {"correlation": 900001, "stream": 7, "device": 0}},
        {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
    ]
    trace["deviceProperties"] = [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]
    path = tmp_path / "compiled.json"
    path.write_text(json.dumps(trace))
    return path


def test_a_triton_kernel_is_attributed_to_its_region_and_costed_with_inductors_figures(tmp_path: Path) -> None:
    d = read_rank(_compiled_trace(tmp_path)).data
    tables = ops_tables(d)
    (op,) = [r.to_row() for r in tables["op_operators"] if r.operator == KERNEL]
    assert op["compiled_region"] == "Torch-Compiled Region: 0/0" and op["gpu_us"] == KERNEL_US
    assert op["category"] == "gemm"  # triton_tem_: a templated matrix product
    (shape,) = [r.to_row() for r in tables["op_shapes"] if r.operator == KERNEL]
    assert shape["flops_low"] == shape["flops_high"] == FLOP
    assert shape["bytes_low"] == pytest.approx(GB * 1e9)
    assert shape["tflops"] == pytest.approx(FLOP / (KERNEL_US * 1e-6) / 1e12)
    assert "Inductor's kernel_flop" in shape["formula"]
    (cover,) = [r.to_row() for r in tables["op_coverage"]]
    assert cover["triton_us"] == cover["triton_flops_us"] == cover["compiled_us"] == KERNEL_US
    assert "Triton kernels under Torch-Compiled Region: 0/0" in cover["note"]


def test_mfu_counts_inductors_flops(tmp_path: Path) -> None:
    # before: "no operator shapes in the trace" (only aten products were counted), MFU not measured
    d = read_rank(_compiled_trace(tmp_path)).data
    (row,) = mfu_tables(d)["mfu"]
    assert row.not_measured == "" and row.flops == FLOP
    window = KERNEL_US  # no ProfilerStep: the GPU span, one kernel
    assert row.mfu_pct == pytest.approx(100 * FLOP / 67e12 / (window * 1e-6))  # H100 SXM fp32: 67 TFLOP/s


@pytest.mark.parametrize(("name", "dims", "concrete"), [
    # before: is_causal was read at position 5 (dropout_p): a causal mask was never seen
    ("aten::_scaled_dot_product_efficient_attention", [[2, 4, 16, 8]] * 3 + [[], [], [], [], []],
     ["", "", "", "", "False", "0.", "True", ""]),
    # before: [B, L, H, E] read as [B, H, L, E], keys taken from the key's head count
    ("aten::_flash_attention_forward", [[2, 16, 4, 8]] * 3 + [[]] * 8,
     ["", "", "", "", "", "16", "16", "0.", "True", "False", "", "", "", "", ""]),
])
def test_mfu_reads_each_attention_variants_layout_and_causal_flag(name: str, dims: list[Any],
                                                                  concrete: list[str]) -> None:
    from my_utils.profiling.kineto.mfu import op_flops

    args = {"Input Dims": dims, "Input type": ["c10::BFloat16"] * 3 + [""] * (len(dims) - 3),
            "Concrete Inputs": concrete}
    b, h, length, e = 2, 4, 16, 8
    assert op_flops(name, args) == (4.0 * b * h * e * (length * (length + 1) // 2), "bf16")
