"""Collectives (NCCL arguments, NCCL-tests bandwidths), straggler kernels across ranks, and CUPTI counters.

HTA values: ``tests/test_trace_parse.py::test_nccl_parser_config`` (21 NCCL kernels; the longest an
allreduce of 2,049,000 elements in ``default_pg``, ranks [0, 1]) and ``tests/test_cupti_profiler.py``
(77 counter rows; the 6th kernel by start is fft2d_r2c_32x32 with 86,114,304 fadd instructions, under
aten::conv2d, launched by aten::cudnn_convolution).
"""

from __future__ import annotations

import gzip
import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from my_utils.profiling.hardware.peaks import nvlink_bandwidth, peak_flops
from my_utils.profiling.kineto import analyze_traces
from my_utils.profiling.kineto.collectives import bus_factor, collective_rows, collectives_of
from my_utils.profiling.kineto.cupti import SASS_FLOPS, cupti_rows
from my_utils.profiling.kineto.run import read_rank

NCCL = "hta/nccl_parser_config__nccl_data.json.gz"


def test_nccl_arguments_are_read(real_fixtures: Any) -> None:
    """HTA test_nccl_parser_config: 21 NCCL kernels with arguments; the longest: allreduce, 2,049,000 elements in
    and out (Float: 8,196,000 bytes), process group '0' = default_pg of ranks [0, 1]."""
    d = read_rank(real_fixtures / "kineto" / NCCL).data
    kernels = collectives_of(d)
    assert len(kernels) == 21
    longest = max(kernels, key=lambda c: c.dur_us)
    assert (longest.collective, longest.message_bytes, longest.process_group, longest.group_size, longest.dtype) == (
        "allreduce", 2049000 * 4, "default_pg", 2, "Float")
    row = max(d.gpu_args.values(), key=lambda a: a.get("In msg nelems", 0) if a.get("Collective name") else 0)
    assert row["Process Group Ranks"] == "[0, 1]" and row["Process Group Name"] == "0"


#: NCCL-tests (src/<test>.cu GetCollByteCount and GetBw, doc/PERFORMANCE.md), per collective torch names:
#: (in elements, out elements) torch records for a per-rank chunk of 1,000 elements on 4 ranks, the S in
#: elements NCCL-tests divides by the time (``count`` there is the per-rank chunk: allgather count·n,
#: reducescatter count·n, alltoall count·n where count is the chunk per peer), and the bus factor.
NCCL_TESTS = [
    ("allreduce", (1000, 1000), 1000, 2 * 3 / 4),
    ("allreduce_coalesced", (1000, 1000), 1000, 2 * 3 / 4),
    ("reduce_scatter", (4000, 1000), 4000, 3 / 4),
    ("_reduce_scatter_base", (4000, 1000), 4000, 3 / 4),
    ("reduce_scatter_tensor_coalesced", (1000, 1000), 4000, 3 / 4),  # only the chunk recorded: scaled by n
    ("allgather", (1000, 4000), 4000, 3 / 4),
    ("_allgather_base", (1000, 4000), 4000, 3 / 4),
    ("allgather_into_tensor_coalesced", (1000, 1000), 4000, 3 / 4),
    ("all_to_all", (4000, 4000), 4000, 3 / 4),
    ("all_to_allv", (4000, 4000), 4000, 3 / 4),
    ("gather", (1000, 4000), 4000, 3 / 4),
    ("scatter", (4000, 1000), 4000, 3 / 4),
    ("broadcast", (1000, 1000), 1000, 1.0),
    ("reduce", (1000, 1000), 1000, 1.0),
    ("send", (1000, 0), 1000, 1.0),
    ("recv", (0, 1000), 1000, 1.0),
]


@pytest.mark.parametrize(("collective", "counts", "whole", "factor"), NCCL_TESTS)
def test_every_collectives_size_and_bus_factor_are_nccl_tests(tmp_path: Path, collective: str,
                                                              counts: tuple[int, int], whole: int,
                                                              factor: float) -> None:
    """One 1 ms kernel of each collective on 4 ranks (float32): S = ``whole`` × 4 bytes, algbw = S / 1 ms, busbw =
    algbw × NCCL-tests' factor. A reducescatter read at its chunk size would show a bus bandwidth 4× too low."""
    args = {"Collective name": collective, "In msg nelems": counts[0], "Out msg nelems": counts[1], "Group size": 4,
            "dtype": "Float", "Process Group Name": "0", "stream": 20, "correlation": 1, "device": 0}
    kernel = {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_Generic", "ts": 0, "dur": 1000, "pid": 0,
              "tid": 20, "args": args}
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": [kernel]}))
    (row,) = collective_rows(read_rank(path).data)
    assert bus_factor(collective, 4) == pytest.approx(factor)
    assert row.message_bytes == whole * 4
    assert row.algbw_gbps == pytest.approx(whole * 4 / 1e-3 / 1e9)
    assert row.busbw_gbps == pytest.approx(whole * 4 / 1e-3 / 1e9 * factor)


def test_a_barrier_has_no_bus_bandwidth() -> None:
    assert bus_factor("barrier", 8) is None and bus_factor("allreduce", 2) == 1.0


def test_bandwidths_and_the_link_check(real_fixtures: Any) -> None:
    """algbw = bytes / time; allreduce over 2 ranks: busbw = algbw × 1. The trace's A100-PG509-200 is in no
    datasheet: link not measured, nothing flagged. Named an A100 SXM4 80GB (NVLink 600 GB/s, 300 per direction),
    every allreduce of ≥ 1 MiB runs under a quarter of it and is flagged; the small broadcasts are not."""
    d = read_rank(real_fixtures / "kineto" / NCCL).data
    rows = collective_rows(d)
    assert sum(r.count for r in rows) == 21
    for r in rows:
        assert r.algbw_gbps == pytest.approx(r.message_bytes * r.count / (r.total_us * 1e-6) / 1e9)
        assert r.busbw_gbps == pytest.approx(r.algbw_gbps)  # n = 2
        assert math.isnan(r.link_gbps) and not r.flagged and r.link.startswith("not measured")
    a100 = replace(d, context=dict(d.context, gpu="NVIDIA A100-SXM4-80GB", gpu_count=8))
    flagged = {(r.collective, r.message_bytes): r for r in collective_rows(a100)}
    assert all(r.link_gbps == 300.0 for r in flagged.values())
    assert {k for k, r in flagged.items() if r.flagged} == {k for k in flagged if k[0] == "allreduce"}
    assert nvlink_bandwidth("NVIDIA A100-SXM4-80GB").value == 300e9  # type: ignore[union-attr]
    wide = replace(d, context=dict(d.context, gpu="NVIDIA A100-SXM4-80GB", gpu_count=1))
    assert all(r.link.startswith("not measured: 2 ranks > 1 GPUs") for r in collective_rows(wide))


def _second_rank(src: Path, dst: Path, rank: int, extra_us: float) -> None:
    with gzip.open(src, "rt") as fh:
        doc = json.load(fh)
    doc["distributedInfo"]["rank"] = rank
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel" and "Collective name" in (e.get("args") or {}):
            e["dur"] += extra_us
    with gzip.open(dst, "wt") as fh:
        json.dump(doc, fh)


def test_across_ranks_the_last_rank_waits_for_no_one(real_fixtures: Any, tmp_path: Path) -> None:
    """Two ranks, rank 1's NCCL kernels 100 µs longer: each collective's transfer time is rank 0's kernel, the wait
    100 µs, and rank 0 arrived last; busbw uses the transfer time."""
    src = real_fixtures / "kineto" / NCCL
    _second_rank(src, tmp_path / "rank0.json.gz", 0, 0.0)
    _second_rank(src, tmp_path / "rank1.json.gz", 1, 100.0)
    rows = analyze_traces(tmp_path, executor="serial", analyses=["collectives"]).to_rows()
    across = rows["kineto_collectives_ranks"]
    assert sum(r["collectives"] for r in across) == 21 and all(r["ranks"] == 2 for r in across)
    for r in across:
        assert r["wait_us"] == pytest.approx(100.0) and r["last_rank"] == 0
        assert r["busbw_gbps"] == pytest.approx(r["message_bytes"] / (r["transfer_us"] * 1e-6) / 1e9)
    assert not any(k.startswith("kineto__") for k in rows)  # the kernels crossing ranks stay out of the report


def test_straggler_kernels_across_ranks(real_fixtures: Any, tmp_path: Path) -> None:
    """Per heavy kernel: min / median / max over ranks with the ranks; the slower rank 1 is the straggler."""
    src = real_fixtures / "kineto" / NCCL
    _second_rank(src, tmp_path / "rank0.json.gz", 0, 0.0)
    _second_rank(src, tmp_path / "rank1.json.gz", 1, 5000.0)
    rows = analyze_traces(tmp_path, executor="serial", analyses=["stragglers"]).to_rows()["kineto_kernel_stragglers"]
    assert 0 < len(rows) <= 15 and all(r["ranks"] == 2 for r in rows)
    nccl = next(r for r in rows if r["name"].startswith("ncclKernel_AllReduce"))
    assert (nccl["max_rank"], nccl["min_rank"], nccl["straggler"]) == (1, 0, True)
    assert nccl["max_us"] - nccl["min_us"] == pytest.approx(5000.0 * 15)  # 15 allreduce kernels
    assert nccl["median_us"] == pytest.approx((nccl["max_us"] + nccl["min_us"]) / 2)
    single = analyze_traces(src, executor="serial", analyses=["stragglers"]).to_rows()
    assert "kineto_kernel_stragglers" not in single  # one rank: nothing to compare


def test_cupti_counters_with_their_operators(real_fixtures: Any) -> None:
    """HTA test_get_cupti_counter_data_with_operators: 77 rows carrying the SASS FLOP counters; the 6th kernel by
    start is fft2d_r2c_32x32 with 86,114,304 fadd, top operator aten::conv2d, bottom aten::cudnn_convolution."""
    d = read_rank(real_fixtures / "kineto" / "hta/cupti_profiler__counters_trace.json.gz").data
    rows = cupti_rows(d)
    assert len(rows) == 77
    assert set(SASS_FLOPS) <= set().union(*(r.keys() for r in rows))
    sixth = sorted(rows, key=lambda r: r["ts_us"])[5]
    assert "fft2d_r2c_32x32" in sixth["name"]
    assert sixth["smsp__sass_thread_inst_executed_op_fadd_pred_on.sum"] == 86114304
    assert (sixth["top_op"], sixth["bottom_op"]) == ("aten::conv2d", "aten::cudnn_convolution")
    assert sixth["flops"] == sum(sixth.get(k, 0) * w for k, w in SASS_FLOPS.items())
    # a trace without profiler ranges has no CUPTI table (HTA: an empty list)
    plain = read_rank(real_fixtures / "kineto" / "hta/critical_path__simple_add.json.gz").data
    assert cupti_rows(plain) == []


def test_peaks_are_dense_and_sourced() -> None:
    """The seam the analyses read: A100 bf16 dense 312 TFLOP/s (624 with sparsity), V100 fp16 125; unknown: None."""
    bf16 = peak_flops("NVIDIA A100-SXM4-80GB", "bf16")
    assert bf16 is not None and bf16.value == 312e12 and bf16.source_url.startswith("https://")
    assert peak_flops("Tesla V100-SXM2-32GB", "fp16").value == 125e12  # type: ignore[union-attr]
    assert peak_flops("NVIDIA A100-PG509-200", "bf16") is None and peak_flops("A100-SXM4-80GB", "fp4") is None
