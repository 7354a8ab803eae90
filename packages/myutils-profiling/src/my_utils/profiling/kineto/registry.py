"""The Kineto analyses beyond the core set, each described like a rule plugin: a name, a ``"module:function"``
factory imported only when it runs, a one-line summary, the HTA function and test it reproduces, its tables.

``analyze_file`` runs every analysis of :data:`ANALYSES` (or the ones named) on the rank's
data, each alone: one that raises is reported by name in the result's warnings and the
others still report (as the analyzer does for rules). Per-rank functions take a
:class:`~my_utils.profiling.kineto.rank_data.RankData` and keyword options and
return ``{table: rows}``; an analysis with an ``across`` function also sees every rank's rows
once all ranks are read (stragglers, collectives across ranks). Table ``t`` lands in the
report as ``kineto_<t>``, except a table whose name starts with ``_``: it only carries what an
``across`` function needs. Listing the analyses imports nothing heavy.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

_K = "my_utils.profiling.kineto"


@dataclass(frozen=True)
class KinetoAnalysisSpec:
    """One analysis: what it is, where its code is, what it reproduces and which tables it writes."""

    name: str
    factory: str
    summary: str
    reference: str
    tables: tuple[str, ...]
    across: str | None = None

    def load(self) -> Callable[..., dict[str, list[Any]]]:
        """The per-rank function (imported now)."""
        return _resolve(self.factory)

    def load_across(self) -> Callable[..., dict[str, list[Any]]] | None:
        """The across-ranks function, None when the analysis has none."""
        return _resolve(self.across) if self.across else None


def _resolve(factory: str) -> Any:
    module, _sep, attr = factory.partition(":")
    return getattr(importlib.import_module(module), attr)


#: Every built-in analysis, in the order they run and their tables appear.
ANALYSES: tuple[KinetoAnalysisSpec, ...] = (
    KinetoAnalysisSpec(
        "critical_path", f"{_K}.critical_path:critical_path_tables",
        "critical path of one iteration: the CPU/GPU chain that set its length, and what it is bound by",
        "HTA CriticalPathAnalysis / CPGraph (tests/test_critical_path_analysis.py)",
        ("critical_path", "critical_path_breakdown", "critical_path_top")),
    KinetoAnalysisSpec(
        "queue_length", f"{_K}.queue_length:queue_length_tables",
        "CUDA launch-queue length per stream over time, its summary, and time blocked on a full queue",
        "HTA TraceCounters.get_queue_length_* (tests/test_trace_analysis.py::test_get_queue_length_stats)",
        ("queue_length", "queue_full", "queue_length_series")),
    KinetoAnalysisSpec(
        "memory", f"{_K}.memory_bw:memory_tables",
        "memory copies and sets by subtype (Memcpy DtoH / HtoD / DtoD / Memset), and their bandwidth",
        "HTA get_memory_kernel_type, TraceCounters.get_memory_bw_* (tests/test_trace_analysis.py::"
        "test_generate_trace_with_counters)",
        ("memory_kinds", "memory_bw")),
    KinetoAnalysisSpec(
        "kernel_sequences", f"{_K}.sequences:sequence_tables",
        "frequent kernel sequences (fusion candidates): the runs of kernels one operator launches, by GPU time",
        "HTA get_frequent_cuda_kernel_sequences (tests/test_trace_analysis.py::test_frequent_cuda_kernel_sequences)",
        ("kernel_sequences",)),
    KinetoAnalysisSpec(
        "aten_launch", f"{_K}.aten_launch:aten_launch_tables",
        "ATen operator → kernel launch delay: operator start to launch, launch to kernel start",
        "HTA get_aten_op_kernels_and_delay (tests/test_trace_analysis.py::"
        "test_get_mtia_aten_op_kernels_and_delay_inference_single_rank)",
        ("aten_launch",)),
    KinetoAnalysisSpec(
        "launches", f"{_K}.launch_rows:launch_tables",
        "one row per kernel launch: the kernel, its stream, the launch call, the operator around it, the delays",
        "HTA get_cuda_kernel_launch_stats (tests/test_trace_analysis.py::"
        "test_get_cuda_kernel_launch_stats_inference_single_rank)",
        ("kernel_launches",)),
    KinetoAnalysisSpec(
        "call_stacks", f"{_K}.call_stacks:call_stack_tables",
        "call stacks: the operator stacks that launched the most GPU time, GPU user-annotation spans",
        "HTA CallGraph (tests/test_trace_call_graph.py), get_gpu_user_annotation_breakdown",
        ("op_stacks", "gpu_annotations")),
    KinetoAnalysisSpec(
        "collectives", f"{_K}.collectives:collective_tables",
        "collectives from NCCL kernel arguments: algorithm and bus bandwidth (NCCL-tests), against the link",
        "HTA's NCCL argument parsing (tests/test_trace_parse.py::test_nccl_parser_config); NCCL-tests PERFORMANCE.md",
        ("collectives", "collectives_ranks"), across=f"{_K}.collectives:across_ranks"),
    KinetoAnalysisSpec(
        "arrivals", f"{_K}.arrivals:arrival_tables",
        "collective arrivals across ranks: each rank's wait for later ranks against its working time, by host first",
        "beyond HTA (its straggler view is per kernel); diagnosis/CASES.md principle 4",
        ("collective_wait", "collective_wait_regions", "host_arrivals"), across=f"{_K}.arrivals:across_ranks"),
    KinetoAnalysisSpec(
        "stragglers", f"{_K}.stragglers:no_rows",
        "straggler kernels across ranks: each heavy kernel's time on the fastest, median and slowest rank",
        "HTA get_gpu_kernel_breakdown (per-kernel time per rank with min/max error bars)",
        ("kernel_stragglers",), across=f"{_K}.stragglers:across_ranks"),
    KinetoAnalysisSpec(
        "kernel_ranks", f"{_K}.kernel_ranks:no_rows",
        "per-kernel rows across ranks: each heavy kernel's count and time statistics on every rank",
        "HTA get_gpu_kernel_breakdown (kernel_metrics_df: per kernel and rank, tests/test_trace_analysis.py::"
        "test_get_gpu_kernel_breakdown)",
        ("kernel_ranks",), across=f"{_K}.kernel_ranks:across_ranks"),
    KinetoAnalysisSpec(
        "cuda_graphs", f"{_K}.cuda_graphs:cuda_graph_tables",
        "CUDA graph replays: the launches, the kernels they ran and the operator that launched them",
        "beyond HTA (no graph view there); the kernels' graph id (Kineto MetadataFieldCatalog)",
        ("cuda_graphs", "cuda_graph_kernels")),
    KinetoAnalysisSpec(
        "compiled_kernels", f"{_K}.compiled_kernels:compiled_kernel_tables",
        "torch.compile's generated kernels: kernel_backend, kernel_hash and the GPU time each launched",
        "HTA ParserConfig.ARGS_TRITON_KERNELS (tests/test_trace_parse.py::test_triton_trace)",
        ("compiled_kernels",)),
    KinetoAnalysisSpec(
        "pipeline", f"{_K}.pipeline:pipeline_tables",
        "pipeline-parallel bubbles: each stage's idle between microbatches against its schedule's expected share",
        "beyond HTA (no pipeline view there); the bubble (p-1)/(v*m+p-1) of Narayanan et al. 2021",
        ("pipeline_bubble",), across=f"{_K}.pipeline:across_ranks"),
    KinetoAnalysisSpec(
        "cupti", f"{_K}.cupti:cupti_tables",
        "CUPTI counters per kernel (cuda_profiler_range events) with the operators that launched it",
        "HTA get_cupti_counter_data_with_operators (tests/test_cupti_profiler.py)",
        ("cupti_counters", "cupti_ops")),
    KinetoAnalysisSpec(
        "mfu", f"{_K}.mfu:mfu_tables",
        "MFU: FLOPs from the operators' recorded shapes over the time and the GPU's dense peak (or why not)",
        "beyond HTA (no MFU there); peaks from the sourced hardware table (kineto.peaks)",
        ("mfu", "mfu_ops")),
    KinetoAnalysisSpec(
        "setup", f"{_K}.setup:setup_tables",
        "one-off work (compilation, autotuning, allocations, first calls, step 0) and the GPU idle inside it",
        "beyond HTA (no setup analysis there); diagnosis/CASES.md principle 1",
        ("setup", "setup_kinds")),
    KinetoAnalysisSpec(
        "ops", "my_utils.profiling.kineto.ops.tables:ops_tables",
        "operations against the roofline: GPU time by category, operator and argument shapes, FLOPs and bytes per "
        "call, percent of the roof; memory per operator",
        "beyond HTA (no operation model there); TraceLens's perf model answers the same question (ops.flops, "
        "ops.norms, ops.traffic cite each formula)",
        ("op_categories", "op_operators", "op_shapes", "op_coverage", "op_memory", "memory_peaks")),
    KinetoAnalysisSpec(
        "steps", f"{_K}.step_scope:step_scope_tables",
        "the ProfilerSteps in each trace and those analysed, and what HTA's default (no last step) would keep",
        "HTA Trace._filter_irrelevant_gpu_kernels (include_last_profiler_step=False, tests/test_trace_analysis.py::"
        "test_include_last_profiler_step)",
        ("steps",)),
    KinetoAnalysisSpec(
        "idle_explained", f"{_K}.idle_explained:idle_explained_tables",
        "idle explained: the CPU operator running during each host-wait gap of the compute stream",
        "beyond HTA (its idle breakdown gives the cause, not the host operator)",
        ("idle_host_ops",)),
)


def names() -> list[str]:
    """The analyses' names."""
    return [a.name for a in ANALYSES]


def select(chosen: Iterable[str] | None) -> tuple[KinetoAnalysisSpec, ...]:
    """The specs named in ``chosen`` (all when None); an unknown name is an error naming the known ones."""
    if chosen is None:
        return ANALYSES
    wanted = list(chosen)
    unknown = [n for n in wanted if n not in names()]
    if unknown:
        from my_utils.core.errors import UsageError

        raise UsageError(f"unknown Kineto analysis {', '.join(map(repr, unknown))}; known: {', '.join(names())}")
    return tuple(a for a in ANALYSES if a.name in wanted)
