"""Every Kineto analysis table as a pandas DataFrame, from one call on a trace or a folder of ranks.

``kineto_frames("traces/")`` reads each rank's trace once (``analyze_traces``) and returns
``{table: DataFrame}``, keyed without the ``kineto_`` prefix of the report (``"critical_path"``,
``"queue_length"``, ``"top_kernels"``...). The series keep every point here (the report keeps
400 per stream); ``trace_filter``, ``analyses``, ``options`` and ``executor`` are
``analyze_traces``'s. :func:`columns` says what each column of a table holds; the table names
and their columns:

``temporal`` rank, span_us, idle_us, compute_us, non_compute_us, idle_pct, compute_pct, non_compute_pct ·
``kernel_kinds`` rank, kind, count, total_us, busy_us, share_pct · ``top_kernels`` rank, kind, name, count,
total_us, mean_us, min_us, max_us, std_us, subtype · ``idle`` rank, device, stream, category, idle_us, gaps, share_pct ·
``idle_device`` rank, device, category, idle_us, gaps, share_pct, span_us, span_pct · ``overlap`` ·
``launch`` · ``launch_outliers`` · ``annotations`` · ``sync`` · ``health`` · ``context`` · ``inputs`` ·
``critical_path`` rank, window, window_us, graph_nodes, graph_edges, path_nodes, path_edges, path_events,
length_us, <kind>_pct, coverage_pct, not_measured · ``critical_path_breakdown`` rank, bound_by, us, pct, edges · ``critical_path_top``
rank, name, side, bound_by, us, pct, edges · ``queue_length`` rank, device, stream, count, mean, std, min, p25,
p50, p75, max, time_mean · ``queue_full`` rank, device, stream, max_queue_length, duration_us,
relative_duration · ``queue_length_series`` rank, device, stream, ts_us, queue_length · ``memory_kinds`` rank,
subtype, count, total_us, bytes, gb_per_s · ``memory_bw`` rank, subtype, count, mean … max ·
``kernel_sequences`` rank, operator, kernels, length, count, kernel_us, cpu_us, kernel_us_per_call ·
``aten_launch`` rank, operator, kernels, count, op_to_launch_us, launch_to_kernel_us · ``op_stacks`` rank,
stack, depth, launches, kernels, gpu_us, top_kernel · ``gpu_annotations`` rank, name, count, sum_us, mean_us,
min_us, max_us, std_us · ``collectives`` rank, process_group, collective, dtype, group_size, message_bytes,
count, total_us, mean_us, algbw_gbps, busbw_gbps, link_gbps, link_pct, flagged, link ·
``collectives_ranks`` process_group, collective, dtype, group_size, message_bytes, ranks, collectives,
transfer_us, wait_us, busbw_gbps, last_rank · ``kernel_stragglers`` kind, name, ranks, min_us, min_rank,
median_us, max_us, max_rank, spread, mean_call_min_us, mean_call_max_us, straggler · ``cupti_counters`` rank,
index, name, top_op, bottom_op, op_stack, ts_us, dur_us, flops, <every counter> · ``cupti_ops`` · ``mfu``
rank, gpu, window, window_us, flops, achieved_tflops, mfu_pct, coverage_pct, counted_ops, uncounted, peak,
not_measured · ``mfu_ops`` rank, operator, dtype, calls, flops, kernel_us, tflops_in_kernels, pct_of_peak ·
``idle_host_ops`` rank, device, stream, operator, where, gaps, idle_us, pct_of_host_wait · ``setup`` rank,
capture_us, setup_us, setup_pct, gpu_span_us, gpu_idle_us, setup_idle_us, steps, one_shot, one_shot_reason, detail ·
``setup_kinds`` rank, kind, events, us, longest, longest_us · ``collective_wait`` rank, host, step, collectives,
comm_us, wait_us, working_us, waited_for, waited_for_us, last_count, mean_lateness_us · ``collective_wait_regions``
rank, host, region, collectives, comm_us, wait_us, working_us, waited_for · ``host_arrivals`` host,
ranks, collectives, mean_lag_us, mean_spread_us, straggler · ``kernel_launches`` (every launch here) rank,
correlation, kernel, kind, device, stream, launch_call, operator, cpu_us, gpu_us, launch_delay_us, ts_us ·
``kernel_ranks`` kind, name, rank, count, total_us, mean_us, min_us, max_us, std_us, share_pct, vs_median ·
``cuda_graphs`` rank, name, graph_id, launches, kernels, kernel_us, kernel_share_pct, launched_under, captures,
instantiations · ``cuda_graph_kernels`` · ``compiled_kernels`` rank, operator, kernel_backend, kernel_hash,
calls, gpu_activities, gpu_us, kernels · ``pipeline_bubble`` rank, step, framework, schedule, stages,
microbatches, chunks, window_us, busy_us, bubble_us, bubble_pct, expected_pct, excess_us, step_us,
excess_step_pct, flagged, note · ``op_categories``, ``op_operators``, ``op_shapes``,
``op_coverage``, ``op_memory``, ``memory_peaks``: the operation model (``kineto.ops``, its modules say each column).

Times are µs (``_us``), bandwidths GB/s (10⁹ B/s), shares % (``_pct``); ``ts_us`` counts from the
trace's first event. Each module of ``my_utils.profiling.kineto`` documents its tables' meaning.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from my_utils.profiling.kineto.filters import TraceFilter


def kineto_frames(paths: str | Path | Iterable[str | Path], *, trace_filter: TraceFilter | None = None,
                  analyses: Sequence[str] | None = None, options: Mapping[str, Mapping[str, Any]] | None = None,
                  executor: Any = "process", ranks: Sequence[int] | None = None) -> dict[str, pd.DataFrame]:
    """``{table: DataFrame}`` of every Kineto analysis of the traces under ``paths`` (module docstring)."""
    import pandas as pd

    from my_utils.profiling.kineto.run import analyze_traces

    opts = {name: dict(o) for name, o in (options or {}).items()}
    opts.setdefault("queue_length", {}).setdefault("series_points", None)
    opts.setdefault("launches", {}).setdefault("limit", None)  # every launch (the report keeps the longest delays)
    result = analyze_traces(paths, ranks=ranks, executor=executor, trace_filter=trace_filter, analyses=analyses,
                            options=opts)
    out = {}
    for name, rows in result.to_rows().items():
        table = name.removeprefix("kineto_")
        # an empty table keeps its documented columns (a notebook filters or joins on them)
        out[table] = pd.DataFrame(rows) if rows else pd.DataFrame(columns=list(columns(table)) or None)
    return out


def columns(table: str) -> dict[str, str]:
    """What each column of ``table`` holds, read from the row type's documentation (``{}`` for dict tables)."""
    from my_utils.profiling.kineto import (
        arrivals,
        aten_launch,
        call_stacks,
        collectives,
        compiled_kernels,
        critical_path,
        cuda_graphs,
        idle,
        idle_explained,
        kernel_ranks,
        kernels,
        launch_rows,
        memory_bw,
        mfu,
        pipeline,
        queue_length,
        sequences,
        setup,
        stragglers,
        temporal,
    )

    rows: dict[str, Any] = {
        "temporal": temporal.TemporalRow, "kernel_kinds": kernels.KernelKindRow, "top_kernels": kernels.KernelStat,
        "idle": idle.IdleRow, "idle_device": idle.DeviceIdleRow, "critical_path": critical_path.CriticalPathRow,
        "critical_path_breakdown": critical_path.PathBreakdownRow, "critical_path_top": critical_path.PathEventRow,
        "queue_length": queue_length.QueueLengthRow, "queue_full": queue_length.QueueFullRow,
        "queue_length_series": queue_length.QueuePointRow, "memory_kinds": memory_bw.MemoryKindRow,
        "memory_bw": memory_bw.MemoryBandwidthRow, "kernel_sequences": sequences.KernelSequenceRow,
        "aten_launch": aten_launch.AtenLaunchRow, "op_stacks": call_stacks.OpStackRow,
        "gpu_annotations": call_stacks.GpuAnnotationRow, "collectives": collectives.CollectiveRow,
        "collectives_ranks": collectives.CollectiveRanksRow, "kernel_stragglers": stragglers.StragglerRow,
        "mfu": mfu.MfuRow, "mfu_ops": mfu.MfuOpRow, "idle_host_ops": idle_explained.IdleHostOpRow,
        "setup": setup.SetupRow, "setup_kinds": setup.SetupKindRow, "collective_wait": arrivals.CollectiveWaitRow,
        "collective_wait_regions": arrivals.RegionWaitRow,
        "host_arrivals": arrivals.HostArrivalRow, "kernel_launches": launch_rows.KernelLaunchRow,
        "kernel_ranks": kernel_ranks.KernelRankRow, "cuda_graphs": cuda_graphs.CudaGraphRow,
        "cuda_graph_kernels": cuda_graphs.CudaGraphKernelRow, "compiled_kernels": compiled_kernels.CompiledKernelRow,
        "pipeline_bubble": pipeline.PipelineBubbleRow,
    }
    from my_utils.profiling.kineto.ops import breakdown, op_memory

    rows.update({"op_categories": breakdown.CategoryRow, "op_operators": breakdown.OperatorRow,
                 "op_shapes": breakdown.ShapeRow, "op_coverage": breakdown.CoverageRow,
                 "op_memory": op_memory.OpMemoryRow, "memory_peaks": op_memory.MemoryPeakRow})
    cls = rows.get(table)
    if cls is None:
        return {}
    doc = (cls.__doc__ or "").strip().splitlines()[0]
    return {f.name: f"{doc} ({f.type})" for f in dataclasses.fields(cls) if f.name not in cls._private}
