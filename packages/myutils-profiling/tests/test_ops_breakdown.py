"""The breakdowns (``kineto.ops.breakdown``) on real traces, every figure recomputed from the raw trace.

``trace_diff__test`` (V100, DLRM-like, part of its work replayed from CUDA graphs): the GEMM share
by kernel name, the replayed GPU time by correlation with ``cudaGraphLaunch``, the mix in the
verdict; its ``mm`` 1024×1024 · 1024×1705 rows equal the hand-checked FLOPs, bytes, kernel time and
roofline. The raw figures are read with gzip + json here, never through the code under test.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import defaultdict
from functools import lru_cache
from typing import Any

import pytest

from my_utils.profiling.analysis.verdict import verdict
from my_utils.profiling.kineto.ops.tables import ops_tables
from my_utils.profiling.kineto.run import read_rank
from my_utils.profiling.model.report import Fact

TEST = "kineto/hta/trace_diff__test.json.gz"
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


@lru_cache(maxsize=2)
def _raw(path: str) -> list[dict[str, Any]]:
    with gzip.open(path, "rt") as fh:
        return json.load(fh)["traceEvents"]


@lru_cache(maxsize=2)
def _tables(path: str) -> dict[str, list[dict[str, Any]]]:
    return {k: [r.to_row() for r in rows] for k, rows in ops_tables(read_rank(path).data).items()}


def test_categories_of_the_v100_trace_against_the_raw_kernels(real_fixtures: Any) -> None:
    path = str(real_fixtures / TEST)
    gpu = [e for e in _raw(path) if e.get("cat") in GPU_CATS]
    total = sum(e["dur"] for e in gpu)
    # GEMMs by kernel name: cuBLAS sgemm/gemv, split-K reductions and cuBLASLt epilogues; fbgemm_gpu's
    # permutation kernels carry the library's name and move indices, they multiply no matrices
    gemm = sum(e["dur"] for e in gpu if re.search(r"gemm|gemv|splitKreduce|epilogue", e["name"], re.I)
               and "fbgemm" not in e["name"])
    copies = sum(e["dur"] for e in gpu if e["cat"] in ("gpu_memcpy", "gpu_memset"))
    rt = {e["args"]["correlation"]: e["name"] for e in _raw(path) if e.get("cat") == "cuda_runtime"}
    replayed = sum(e["dur"] for e in gpu if rt.get(e.get("args", {}).get("correlation")) == "cudaGraphLaunch")
    cats = {r["category"]: r for r in _tables(path)["op_categories"]}
    assert sum(r["gpu_us"] for r in cats.values()) == total
    assert cats["gemm"]["pct"] == pytest.approx(100 * gemm / total, abs=1e-9)
    assert round(cats["gemm"]["pct"], 1) == 21.9  # the 22.6% counted 6.1 ms of fbgemm_gpu permutations
    mix = cats["elementwise"]["pct"] + cats["copy"]["pct"]
    assert 28 <= mix <= 32 and mix > cats["gemm"]["pct"]
    assert cats["copy"]["gpu_us"] >= copies  # every memcpy/memset is a copy, and copy kernels add to them
    assert sum(r["graph_us"] for r in cats.values()) == replayed > 0
    (cover,) = _tables(path)["op_coverage"]
    assert cover["graph_us"] == replayed and "captured before the profiler started" in cover["note"]
    for r in cats.values():  # each row names an event of its category
        assert _raw(path)[r["example_index"]]["name"] == r["example"]


def test_the_v100_mm_rows_equal_hand_checked_values(real_fixtures: Any) -> None:
    """``aten::mm`` of a 1024×1024 by a 1024×1705 fp32 matrix: 12 calls, their kernels' time from the raw trace."""
    path = str(real_fixtures / TEST)
    ev = _raw(path)
    calls = [e for e in ev if e.get("cat") == "cpu_op" and e["name"] == "aten::mm"
             and e["args"].get("Input Dims") == [[1024, 1024], [1024, 1705]]]
    kernels_of: dict[int, float] = defaultdict(float)
    for e in ev:
        if e.get("cat") in GPU_CATS:
            kernels_of[e["args"].get("correlation")] += e["dur"]
    us = 0.0
    for c in calls:  # the launches inside each call on its thread, and the kernels they launched
        us += sum(kernels_of.get(r["args"]["correlation"], 0.0) for r in ev if r.get("cat") == "cuda_runtime"
                  and r["tid"] == c["tid"] and c["ts"] <= r["ts"] <= c["ts"] + c["dur"])
    m, k, n = 1024, 1024, 1705
    flops, nbytes = 2 * m * k * n, (m * k + k * n + m * n) * 4
    (row,) = [r for r in _tables(path)["op_shapes"] if r["operator"] == "aten::mm"
              and r["input_dims"] == "[[1024, 1024], [1024, 1705]]"]
    assert row["calls"] == len(calls) == 12
    assert row["gpu_us"] == us > 0
    assert row["flops_low"] == row["flops_high"] == flops == 3_575_644_160
    assert row["bytes_low"] == nbytes == 18_161_664
    assert row["tflops"] == pytest.approx(flops * 12 / (us * 1e-6) / 1e12)
    # V100 SXM2 fp32 (no tensor-core kernel under it): 15.7 TFLOP/s, 900 GB/s; compute-bound (227 FLOP/byte)
    assert row["bound"] == "compute" and "15.7 TFLOP/s" in row["roof"]
    assert row["roofline_pct_low"] == pytest.approx(100 * (flops / 15.7e12) * 12 / (us * 1e-6))
    assert 0 < row["roofline_pct_low"] <= 100


def test_gemm_rows_of_an_a100_trace_stay_under_the_roof(real_fixtures: Any) -> None:
    """A model that overstates FLOPs or understates the peak shows as a kernel faster than the hardware."""
    rows = _tables(str(real_fixtures / "kineto/hta/negative_queue_length__rank0.json.gz"))["op_shapes"]
    gemm = [r for r in rows if r["category"] == "gemm" and r["roofline_pct_high"] is not None]
    assert gemm
    assert all(0 < r["roofline_pct_high"] <= 100 for r in gemm), [(r["input_dims"], r["roofline_pct_high"]) for r
                                                                  in gemm if r["roofline_pct_high"] > 100]


def _compute_bound_facts(mix: float, gemm: float) -> dict[str, Fact]:
    span = 100.0
    facts = [Fact("gpu.busy", "GPU busy", 96.0, "%", "kineto", "GPU span", span, "ms"),
             Fact("gpu.idle", "GPU idle", 4.0, "%", "kineto", "GPU span", span, "ms"),
             Fact("gpu.compute", "computation", 80.0, "%", "kineto", "GPU span", span, "ms"),
             Fact("gpu.mix", "mix", mix, "%", "kineto", "GPU kernel, copy and set time", 90.0, "ms",
                  detail=f"{mix:.0f}% elementwise and copies, {gemm:.0f}% GEMM"),
             Fact("gpu.gemm_share", "GEMM", gemm, "%", "kineto", "GPU kernel, copy and set time", 90.0, "ms")]
    return {f.id: f for f in facts}


def test_a_compute_bound_verdict_names_the_mix_and_says_when_elementwise_work_outweighs_the_gemms() -> None:
    elementwise_heavy = verdict(_compute_bound_facts(31.6, 21.9))
    assert elementwise_heavy.bound == "compute"
    assert "GPU time: 32% elementwise and copies, 22% GEMM" in elementwise_heavy.lines[0]
    assert "outweigh the GEMMs: 32% against 22%" in elementwise_heavy.lines[0]
    # built to look like it, but the GEMMs dominate: the mix is named, no "outweigh"
    gemm_heavy = verdict(_compute_bound_facts(12.0, 70.0))
    assert gemm_heavy.bound == "compute" and "GPU time: 12% elementwise and copies, 70% GEMM" in gemm_heavy.lines[0]
    assert "outweigh" not in gemm_heavy.lines[0]
    assert "gpu.mix" in elementwise_heavy.facts and "gpu.gemm_share" not in gemm_heavy.facts


def test_the_v100_verdict_names_the_mix(real_fixtures: Any, tmp_path: Any) -> None:
    from typer.testing import CliRunner

    from my_utils.profiling.cli import app

    res = CliRunner().invoke(app, ["analyze", "--trace", str(real_fixtures / TEST), "--output-dir", str(tmp_path),
                                   "--formats", "json"])
    assert res.exit_code == 0, res.output
    report = json.loads((tmp_path / "analysis_report.json").read_text())
    first = report["headline"]["verdict"]["lines"][0]
    assert first.startswith("Compute-bound")
    assert "GPU time: 32% elementwise and copies, 26% communication, 22% GEMM" in first
    assert "elementwise kernels and copies outweigh the GEMMs: 32% against 22%" in first
    assert report["tables"]["kineto_op_shapes"] and report["tables"]["kineto_op_categories"]
