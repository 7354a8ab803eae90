"""Every Kineto table as a pandas DataFrame from one call, on a trace or a folder of ranks."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pandas as pd

from my_utils.profiling.kineto import TraceFilter, kineto_frames
from my_utils.profiling.kineto.frames import columns
from my_utils.profiling.kineto.queue_length import queue_series
from my_utils.profiling.kineto.registry import ANALYSES
from my_utils.profiling.kineto.run import read_rank


def test_one_call_on_a_folder_of_ranks(real_fixtures: Any, tmp_path: Path) -> None:
    """Two ranks in a folder: one DataFrame per table, both ranks in the per-rank ones, columns as documented."""
    for r in (0, 1):
        shutil.copy(real_fixtures / "kineto" / f"hta/trace_filter__sampled_rank-{r}.json.gz", tmp_path)
    frames = kineto_frames(tmp_path, executor="serial")
    assert all(isinstance(df, pd.DataFrame) for df in frames.values())
    for name in ("temporal", "critical_path", "queue_length", "kernel_sequences", "aten_launch", "op_stacks",
                 "idle_host_ops", "mfu", "kernel_stragglers", "setup", "collective_wait"):
        assert name in frames and len(frames[name]), name
    assert set(frames["critical_path"]["rank"]) == {0, 1}
    for name, df in frames.items():
        documented = columns(name)
        if documented:
            assert list(df.columns) == list(documented), name
    registered = {t for a in ANALYSES for t in a.tables}
    assert registered - set(frames) <= {"cupti_counters", "cupti_ops", "gpu_annotations", "collectives",
                                        "collectives_ranks", "mfu_ops", "memory_kinds", "memory_bw",
                                        "host_arrivals", "cuda_graphs", "cuda_graph_kernels",
                                        "compiled_kernels", "pipeline_bubble",  # no such data (no host, graph,
                                        # generated kernel or pipeline in the pair)
                                        "op_memory", "memory_peaks"}  # nor any [memory] event


def test_series_keep_every_point(real_fixtures: Any) -> None:
    """The report keeps 400 points per stream; the DataFrame all of them."""
    path = real_fixtures / "kineto" / "hta/negative_queue_length__rank0.json.gz"
    series = kineto_frames(path, executor="serial", analyses=["queue_length"])["queue_length_series"]
    q = queue_series(read_rank(path).data)
    assert len(series) == sum(len(v) for v in q.value) > 400 * len(q.value)


def test_a_filtered_trace(real_fixtures: Any) -> None:
    path = real_fixtures / "kineto" / "hta/trace_filter__sampled_rank-0.json.gz"
    frames = kineto_frames(path, executor="serial", trace_filter=TraceFilter(iterations=(552,)),
                           analyses=["critical_path"])
    assert frames["critical_path"].loc[0, "window"].startswith("ProfilerStep#552")
    assert frames["launch"].loc[0, "launches"] < kineto_frames(path, executor="serial",
                                                              analyses=[])["launch"].loc[0, "launches"]
