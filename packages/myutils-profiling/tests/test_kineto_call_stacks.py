"""Call stacks, frequent kernel sequences and ATen launch delays against Holistic Trace Analysis.

Values named by an HTA test come from it; the others are what HTA (f4d0062: HTA 0.5.0's call
graph does not run on pandas 3 / numpy 2, and these functions are unchanged between the two)
computed on the same trace with ``include_last_profiler_step=True``.
"""

from __future__ import annotations

from typing import Any

import pytest

from my_utils.profiling.kineto.aten_launch import aten_launch_rows, aten_launch_tables
from my_utils.profiling.kineto.call_stacks import build_stacks, call_stack_tables, stack_of
from my_utils.profiling.kineto.rank_data import RankData
from my_utils.profiling.kineto.run import read_rank
from my_utils.profiling.kineto.sequences import kernel_sequences, sequence_tables


@pytest.fixture(scope="module")
def rank0(real_fixtures: Any) -> RankData:
    return read_rank(real_fixtures / "kineto" / "hta/trace_filter__sampled_rank-0.json.gz").data


def test_kernel_stack_crosses_into_the_backward_thread(real_fixtures: Any) -> None:
    """HTA test_call_graph_using_kernel_node: the cutlass kernel's stack is ProfilerStep#552 › ## backward ## ›
    autograd::engine::evaluate_function: AddmmBackward0 › AddmmBackward0 › aten::mm › cudaLaunchKernel › kernel,
    depths 0..6, heights 6..0, one kernel under each; the backward thread's ops hang under ## backward ##."""
    d = read_rank(real_fixtures / "kineto" / "hta/call_stack__backward_thread.json").data
    kernel = int(d.gpu_index[0])
    stack = stack_of(d, kernel)
    assert [r["name"] for r in stack] == [
        "ProfilerStep#552", "## backward ##", "autograd::engine::evaluate_function: AddmmBackward0", "AddmmBackward0",
        "aten::mm", "cudaLaunchKernel", "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>"]
    assert [r["depth"] for r in stack] == [0, 1, 2, 3, 4, 5, 6]
    assert [r["height"] for r in stack] == [6, 5, 4, 3, 2, 1, 0]
    assert [r["num_kernels"] for r in stack] == [1] * 7
    # the stack of an operator: its ancestors, itself and what runs under it
    mm = next(r["index"] for r in stack if r["name"] == "aten::mm")
    assert [r["name"] for r in stack_of(d, mm)] == [r["name"] for r in stack]
    with pytest.raises(KeyError, match=r"traceEvents\[999\]"):
        stack_of(d, 999)


def test_op_stacks_table_adds_up_to_the_launched_time(rank0: RankData) -> None:
    """kineto_op_stacks: the stacks that launched the most GPU time, iterations folded together (no step numbers)."""
    t = call_stack_tables(rank0)
    rows = t["op_stacks"]
    assert rows and all("ProfilerStep#" not in r.stack for r in rows)
    assert rows == sorted(rows, key=lambda r: -r.gpu_us)
    launched = float(rank0.gpu_dur[rank0.gpu_rt >= 0].sum())
    every = call_stack_tables(rank0, top=10_000)["op_stacks"]
    assert sum(r.gpu_us for r in every) == pytest.approx(launched)
    # a step's kernels are the kernels of its subtree
    s = build_stacks(rank0)
    steps = [i for i in range(s.cpu_rows) if s.kind[i] == "profiler_step"]
    assert sum(int(s.num_kernels[i]) for i in steps) <= int((rank0.gpu_rt >= 0).sum())


def test_gpu_user_annotations_are_summed_per_name(real_fixtures: Any) -> None:
    """HTA get_gpu_user_annotation_breakdown(use_gpu_annotation=True): per name the sum and mean of the spans'
    durations (its test checks them against a groupby of the gpu_user_annotation events; so do we)."""
    import gzip
    import json

    path = real_fixtures / "kineto" / "hta/nccl_parser_config__nccl_data.json.gz"
    with gzip.open(path, "rt") as fh:
        events = [e for e in json.load(fh)["traceEvents"] if e.get("cat") == "gpu_user_annotation"]
    expected: dict[str, list[float]] = {}
    for e in events:
        expected.setdefault(e["name"], []).append(e["dur"])
    rows = {r.name: r for r in call_stack_tables(read_rank(path).data)["gpu_annotations"]}
    assert set(rows) == set(expected)
    for name, durs in expected.items():
        assert rows[name].count == len(durs)
        assert rows[name].sum_us == pytest.approx(sum(durs))
        assert rows[name].mean_us == pytest.approx(sum(durs) / len(durs))


@pytest.mark.parametrize(("operator", "expected"), [
    # (count, GPU kernel µs, CPU op µs, pattern length with the operator) per row, HTA's order
    ("Optimizer", [(2, 619, 26920, 9), (1, 45275, 190900, 32), (1, 66423, 198919, 32)]),
    ("## forward ##", [(1, 92167, 132826, 184), (1, 96582, 146447, 181)]),
    ("DistributedDataParallel.forward", [(1, 92167, 132750, 184), (1, 96582, 146388, 181)]),
    ("aten::copy_", []),
])
def test_frequent_kernel_sequences_equal_htas(rank0: RankData, operator: str, expected: list[Any]) -> None:
    """HTA get_frequent_cuda_kernel_sequences(operator_name, min_pattern_len=2) on trace_filter rank 0: the same
    patterns, counts, GPU and CPU durations, in the same order (and none for aten::copy_)."""
    rows = kernel_sequences(rank0, operator, min_pattern_len=2)
    assert [(r.count, r.kernel_us, r.cpu_us, r.length + 1) for r in rows] == expected


def test_no_sequence_found_on_a_big_trace(real_fixtures: Any) -> None:
    """HTA test_no_frequent_cuda_kernel_sequences_found: operator 'aten::clone' on df_index_resolver finds none."""
    d = read_rank(real_fixtures / "kineto" / "hta/df_index_resolver.json.gz").data
    assert kernel_sequences(d, "aten::clone") == []


def test_default_sequences_rank_fusion_candidates_by_gpu_time(rank0: RankData) -> None:
    """Without an operator: the outermost ATen operators that launched 3 or more activities, most GPU time first."""
    rows = sequence_tables(rank0)["kernel_sequences"]
    assert 0 < len(rows) <= 10
    assert rows[0].operator == "aten::repeat_interleave" and (rows[0].count, rows[0].length) == (4, 4)
    assert all(r.operator.startswith("aten::") and r.length >= 3 for r in rows)
    assert [r.kernel_us for r in rows] == sorted((r.kernel_us for r in rows), reverse=True)


def test_aten_launch_delays_equal_htas_where_the_operator_is_the_same(rank0: RankData) -> None:
    """HTA get_aten_op_kernels_and_delay on trace_filter rank 0 (HTA's thread-blind search): 973 launches in 188
    (operator, kernel sequence) rows, the first aten::copy_ ×16 at 6.562 / 4,889.625 µs. Ours (same_thread=False):
    the same 973 launches; 164 of HTA's rows equal to the µs; the others are launches HTA gives to an operator
    starting at the same µs as the one called inside it (aten::matmul instead of aten::mm, 16 launches; one
    aten::linalg_norm row), where we take the inner one: 176 rows."""
    rows = aten_launch_rows(rank0, same_thread=False)
    assert sum(r.count for r in rows) == 973 and len(rows) == 176
    first = rows[0]
    assert (first.operator, first.count, first.op_to_launch_us, first.launch_to_kernel_us) == (
        "aten::copy_", 16, 6.562, 4889.625)
    assert first.kernels.startswith("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda")
    assert not any(r.operator == "aten::matmul" for r in rows)
    # the report's table (same thread) keeps the 30 most frequent
    table = aten_launch_tables(rank0)["aten_launch"]
    assert len(table) == 30 and sum(r.count for r in aten_launch_rows(rank0)) <= 973
