"""MFU from recorded shapes, and idle explained by the host operator running — beyond HTA, checked by hand.

The FLOPs are recounted here from the raw events (a plain loop over ``json.load`` of the trace):
2·M·K·N per ``aten::mm`` / ``aten::addmm`` call and 2·B·M·K·N per ``aten::bmm``, inside the
profiled steps. The idle split is checked against the host-wait idle of ``kineto_idle`` (they
must add up to it) and against one gap found by hand.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import replace
from typing import Any

import pytest

from my_utils.profiling.kineto.idle import idle_breakdown
from my_utils.profiling.kineto.idle_explained import MAIN, idle_host_op_rows
from my_utils.profiling.kineto.mfu import mfu_tables, op_flops
from my_utils.profiling.kineto.run import read_rank

TRACE = "hta/trace_filter__sampled_rank-0.json.gz"


def _flops_by_hand(path: Any) -> float:
    with gzip.open(path, "rt") as fh:
        events = json.load(fh)["traceEvents"]
    steps = [(e["ts"], e["ts"] + e["dur"]) for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
    total = 0.0
    for e in events:
        if e.get("cat") != "cpu_op" or not any(a <= e["ts"] < b for a, b in steps):
            continue
        dims = (e.get("args") or {}).get("Input Dims")
        if e["name"] == "aten::mm":
            (m, k), (_k, n) = dims[0], dims[1]
            total += 2.0 * m * k * n
        elif e["name"] == "aten::addmm":
            (m, k), (_k, n) = dims[1], dims[2]
            total += 2.0 * m * k * n
        elif e["name"] == "aten::bmm":
            (b, m, k), (_b, _k, n) = dims[0], dims[1]
            total += 2.0 * b * m * k * n
    return total


def test_mfu_counts_the_shapes_flops(real_fixtures: Any) -> None:
    """FLOPs equal the hand count; this trace names no GPU, so MFU is not measured and says why. Named an A100
    SXM4 80GB: the TF32-kernel products count at 156 TFLOP/s, the others at fp32's 19.5, and MFU is their sum."""
    path = real_fixtures / "kineto" / TRACE
    d = read_rank(path).data
    (row,) = mfu_tables(d)["mfu"]
    assert row.flops == pytest.approx(_flops_by_hand(path), rel=1e-12)
    assert row.mfu_pct is None and row.not_measured == "the trace names no GPU (no deviceProperties)"
    a100 = replace(d, context=dict(d.context, gpu="NVIDIA A100-SXM4-80GB"))
    t = mfu_tables(a100)
    (row,) = t["mfu"]
    by_dtype: dict[str, float] = {}
    for op in t["mfu_ops"]:
        by_dtype[op.dtype] = by_dtype.get(op.dtype, 0.0) + op.flops
    assert set(by_dtype) == {"tf32", "fp32"}
    expected = 100.0 * (by_dtype["tf32"] / 156e12 + by_dtype["fp32"] / 19.5e12) / (row.window_us * 1e-6)
    assert row.mfu_pct == pytest.approx(expected) and row.window == "2 profiled step(s)"
    assert 0 < row.coverage_pct < 100 and "156 TFLOP/s" in row.peak
    assert all(op.tflops_in_kernels is not None and op.tflops_in_kernels > 0 for op in t["mfu_ops"])


def test_mfu_not_measured_without_shapes(real_fixtures: Any) -> None:
    """simple_add was recorded without record_shapes: MFU is "not measured", never a number."""
    d = read_rank(real_fixtures / "kineto" / "hta/critical_path__simple_add.json.gz").data
    (row,) = mfu_tables(replace(d, context=dict(d.context, gpu="NVIDIA A100-SXM4-80GB")))["mfu"]
    assert row.mfu_pct is None and "record_shapes was off" in row.not_measured


@pytest.mark.parametrize(("name", "args", "expected"), [
    ("aten::mm", {"Input Dims": [[2, 3], [3, 4]], "Input type": ["float", "float"]}, (48.0, "fp32")),
    ("aten::addmm", {"Input Dims": [[4], [2, 3], [3, 4], [], []], "Input type": ["c10::BFloat16"] * 3},
     (48.0, "bf16")),
    ("aten::bmm", {"Input Dims": [[5, 2, 3], [5, 3, 4]], "Input type": ["c10::Half"] * 2}, (240.0, "fp16")),
    ("aten::convolution", {"Input Dims": [[1, 3, 8, 8], [4, 3, 3, 3], [4], [], [], [], [], [], []],
                           "Input type": ["float"] * 3,
                           "Concrete Inputs": ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1"]},
     (2.0 * 1 * 4 * 3 * 9 * 64, "fp32")),
    ("aten::convolution", {"Input Dims": [[1, 3, 8, 8], [4, 3, 3, 3]], "Input type": ["float"] * 2}, None),
    ("aten::_scaled_dot_product_flash_attention", {"Input Dims": [[2, 4, 16, 8], [2, 4, 16, 8], [2, 4, 16, 8]],
                                                   "Input type": ["c10::BFloat16"] * 3,
                                                   "Concrete Inputs": ["", "", "", "0.", "True"]},
     (4.0 * 2 * 4 * 8 * (16 * 17 / 2), "bf16")),  # causal: the 16·17/2 query–key pairs a causal mask keeps
    ("aten::mm", {"Input Dims": [[2, 3], [3, 4]], "Input type": ["c10::ComplexFloat"] * 2}, None),
])
def test_flops_of_one_call(name: str, args: dict[str, Any], expected: Any) -> None:
    """2MKN per product; a convolution needs its stride/padding/dilation (Concrete Inputs) or is not counted."""
    assert op_flops(name, args) == expected


def test_idle_explained_adds_up_to_the_host_wait_idle(real_fixtures: Any) -> None:
    """Every host-wait gap of the compute stream is given to one operator: the split adds up to kineto_idle's
    host-wait time of that stream; on simple_add the GPU waited 97.7 % of it under the '[param|cuda]' range."""
    for name, stream in (("hta/critical_path__simple_add.json.gz", 7), (TRACE, 7)):
        d = read_rank(real_fixtures / "kineto" / name).data
        rows = idle_host_op_rows(d, top=10**6)
        host_wait = next(i.idle_us for i in idle_breakdown(d, d.lanes)
                         if i.stream == stream and i.category == "host_wait")
        assert {r.stream for r in rows} == {stream}
        assert sum(r.idle_us for r in rows) == pytest.approx(host_wait)
        assert sum(r.pct_of_host_wait for r in rows) == pytest.approx(100.0)
    d = read_rank(real_fixtures / "kineto" / "hta/critical_path__simple_add.json.gz").data
    top = idle_host_op_rows(d)[0]
    assert (top.operator, top.gaps) == ("[param|cuda]", 1) and top.pct_of_host_wait == pytest.approx(97.67, abs=0.01)
    assert any(r.where == MAIN for r in idle_host_op_rows(read_rank(real_fixtures / "kineto" / TRACE).data))


def test_cpu_only_rank_has_no_idle_to_explain_and_no_mfu(real_fixtures: Any) -> None:
    d = read_rank(real_fixtures / "kineto" / "hta/rank_non_gpu.json.gz").data
    assert idle_host_op_rows(d) == [] and mfu_tables(d) == {}
