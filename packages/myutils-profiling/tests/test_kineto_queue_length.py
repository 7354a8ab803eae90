"""CUDA queue length, copy subtypes and bandwidth, and the counter tracks written back, against HTA's values.

HTA's own figures: ``tests/test_trace_analysis.py::test_generate_trace_with_counters`` on its
``negative_queue_length_values_check`` trace (at least 12,000 counter events named Queue Length /
Memcpy DtoH / HtoD / DtoD / Memset, none negative, 4 bandwidth rows, 6 queue rows; a CPU-only
rank: no series, no summary). Where its test states no number, the figure is what HTA 0.5.0's
``get_queue_length_summary`` / ``get_time_spent_blocked_on_full_queue`` / ``get_memory_bw_summary``
give on the same file with ``include_last_profiler_step=True`` (it otherwise drops the last step).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from my_utils.profiling.kineto import analyze_traces
from my_utils.profiling.kineto.memory_bw import memory_subtype, memory_tables
from my_utils.profiling.kineto.overlay import counter_events, write_overlay
from my_utils.profiling.kineto.queue_length import queue_length_tables, queue_series, trace_duration
from my_utils.profiling.kineto.rank_data import RankData
from my_utils.profiling.kineto.run import read_rank

NEGATIVE_QUEUE = "hta/negative_queue_length__rank0.json.gz"


@pytest.fixture(scope="module")
def negq(real_fixtures: Any) -> RankData:
    return read_rank(real_fixtures / "kineto" / NEGATIVE_QUEUE).data


def _by_stream(rows: list[Any]) -> dict[Any, Any]:
    return {r.stream: r for r in rows}


def test_queue_length_summary_per_stream(negq: RankData) -> None:
    """HTA 0.5.0 on negative_queue_length: 6 streams (its test: 'queue_len_summary_df' has 6 rows); per stream the
    count, quartiles and max of every point, and the mean and std (HTA orders launches and starts at the same
    microsecond by an unstable sort: streams 7 and 27 differ by 0.002 % and 0.16 %)."""
    summary = _by_stream(queue_length_tables(negq)["queue_length"])
    assert sorted(summary) == [7, 25, 27, 84, 285, 363]
    hta = {7: (12100, 663.2662809917356, 0, 489, 763, 847, 946), 25: (70, 1.3571428571428572, 0, 0, 1, 2, 4),
           27: (740, 3.4864864864864864, 0, 1, 2, 5, 17), 84: (70, 1.4714285714285715, 0, 1, 1, 2, 3),
           285: (40, 2.8, 0, 2, 3, 3, 4), 363: (40, 2.8, 0, 2, 3, 3, 4)}
    for stream, (count, mean, lo, q25, q50, q75, hi) in hta.items():
        r = summary[stream]
        assert (r.count, r.min, r.p25, r.p50, r.p75, r.max) == (count, lo, q25, q50, q75, hi)
        assert r.mean == pytest.approx(mean, rel=2e-3)
    assert summary[363].std == pytest.approx(0.9391758525703704, rel=1e-12)
    assert all(v.min() >= 0 for v in queue_series(negq).value)  # the test's point: never negative


def test_time_blocked_on_a_full_queue(negq: RankData) -> None:
    """HTA 0.5.0 get_time_spent_blocked_on_full_queue keeps one row, the last stream it saw: at 64 stream 7 held
    1,219,683 µs (0.98964 of the 1,232,447 µs trace), at 8 stream 27 721,331 µs, at 2 stream 363 1,079,903 µs.
    We give every stream its row; these are among them, equal."""
    assert trace_duration(negq) == 1232447
    for limit, stream, us in ((64, 7, 1219683), (8, 27, 721331), (2, 363, 1079903), (1, 363, 1081355)):
        row = _by_stream(queue_length_tables(negq, max_queue_length=limit)["queue_full"])[stream]
        assert row.duration_us == us
        assert row.relative_duration == pytest.approx(us / 1232447)


def test_nccl_trace_with_sub_microsecond_times(real_fixtures: Any) -> None:
    """HTA 0.5.0 on nccl_parser_config (float timestamps, which HTA rounds to whole µs and we do not): streams 7
    and 40 with 7,506 and 42 points, max 10 and 1; stream 40's mean 0.5 and std 0.50606 equal; the time at a
    queue of 2 on stream 7 is 20,656 µs for HTA, 20,650.7 here (−0.03 %: the sub-µs parts HTA drops)."""
    d = read_rank(real_fixtures / "kineto" / "hta/nccl_parser_config__nccl_data.json.gz").data
    t = queue_length_tables(d, max_queue_length=2)
    summary = _by_stream(t["queue_length"])
    assert (summary[7].count, summary[7].max, summary[40].count, summary[40].max) == (7506, 10, 42, 1)
    assert (summary[40].mean, summary[40].std) == (0.5, pytest.approx(0.5060608273474739))
    assert summary[7].mean == pytest.approx(0.8176125766053823, rel=5e-3)
    blocked = _by_stream(t["queue_full"])[7].duration_us
    assert blocked == pytest.approx(20656, rel=1e-3) and blocked != 20656


def test_memory_subtypes_and_bandwidth(negq: RankData) -> None:
    """HTA test_generate_trace_with_counters: 4 bandwidth rows (DtoD, DtoH, HtoD, Memset). HTA 0.5.0's summary of
    DtoH and HtoD (30 and 80 points, means 0.12535 and 4.83200 GB/s) equal ours; DtoD and Memset have 1,280 / 277
    points here against HTA's 1,140 / 250 because HTA drops the copies after the last ProfilerStep ends, we keep
    every copy of the trace."""
    t = memory_tables(negq)
    bw = {r.subtype: r for r in t["memory_bw"]}
    assert sorted(bw) == ["Memcpy DtoD", "Memcpy DtoH", "Memcpy HtoD", "Memset"]
    assert (bw["Memcpy DtoH"].count, bw["Memcpy HtoD"].count) == (30, 80)
    assert bw["Memcpy DtoH"].mean == pytest.approx(0.1253535557027471, rel=1e-9)
    assert bw["Memcpy HtoD"].mean == pytest.approx(4.83200212192825, rel=1e-9)
    assert bw["Memcpy HtoD"].max == pytest.approx(21.16550144648023, rel=1e-9)
    assert (bw["Memcpy DtoD"].count, bw["Memset"].count) == (1280, 277)
    kinds = {r.subtype: r for r in t["memory_kinds"]}
    assert sum(r.count for r in kinds.values()) == 1280 + 30 + 80 + 277
    assert kinds["Memcpy HtoD"].bytes > 0 and kinds["Memcpy HtoD"].gb_per_s == pytest.approx(
        kinds["Memcpy HtoD"].bytes / kinds["Memcpy HtoD"].total_us / 1e3)


@pytest.mark.parametrize(("name", "subtype"), [
    ("Memcpy DtoH (Device -> Pageable)", "Memcpy DtoH"), ("Memcpy HtoD (Pinned -> Device)", "Memcpy HtoD"),
    ("Memset (Device)", "Memset"), ("Memcpy PtoP (Device -> Device)", "Memcpy PtoP"), ("dma_copy", "Memcpy Unknown"),
])
def test_memory_subtype_names(name: str, subtype: str) -> None:
    """HTA's get_memory_kernel_type: Memset, the first 11 characters of a copy, or Memcpy Unknown."""
    assert memory_subtype(name) == subtype


def test_counter_tracks_written_back(negq: RankData, real_fixtures: Any, tmp_path: Path) -> None:
    """HTA test_generate_trace_with_counters: the trace written back has at least 12,000 counter events, named
    exactly Queue Length, Memcpy DtoH, Memcpy HtoD, Memcpy DtoD and Memset, none negative."""
    out = write_overlay(real_fixtures / "kineto" / NEGATIVE_QUEUE, tmp_path / "with_counters.json.gz",
                        with_critical_path=False)
    with gzip.open(out.path, "rt") as fh:
        doc = json.load(fh)
    counters = [e for e in doc["traceEvents"] if e["ph"] == "C"]
    assert len(counters) >= 12000 and len(counters) == out.counter_events == len(counter_events(negq))
    assert {e["name"] for e in counters} == {"Queue Length", "Memcpy DtoH", "Memcpy HtoD", "Memcpy DtoD", "Memset"}
    assert min(v for e in counters for v in e["args"].values()) >= 0
    assert doc["distributedInfo"]["rank"] == 0  # the trace's own keys are kept


def test_cpu_only_rank_is_empty_not_wrong(real_fixtures: Any) -> None:
    """HTA test_generate_trace_with_counters: a rank without GPU activity has no queue series, no queue summary and
    no bandwidth summary (None); here: no rows at all, never zeros."""
    path = real_fixtures / "kineto" / "hta/rank_non_gpu.json.gz"
    d = read_rank(path).data
    assert queue_series(d).lanes == [] and memory_tables(d) == {}
    assert queue_length_tables(d) == {"queue_length": [], "queue_full": [], "queue_length_series": []}
    rows = analyze_traces(path, executor="serial").to_rows()
    assert not rows.get("kineto_queue_length") and not rows.get("kineto_memory_bw")


def test_series_table_is_bounded_and_keeps_the_extremes(negq: RankData) -> None:
    """The report's series keeps at most 400 points per stream, and the stream's maximum among them."""
    t = queue_length_tables(negq)
    points = [p for p in t["queue_length_series"] if p.stream == 7]
    assert 2 <= len(points) <= 400
    assert max(p.queue_length for p in points) == 946


def test_top_kernels_name_the_copy_subtype(real_fixtures: Any) -> None:
    """The kernel table's memory rows carry their subtype (HTA's get_memory_kernel_type); others carry none."""
    from my_utils.profiling.kineto import analyze_traces

    rows = analyze_traces(real_fixtures / "kineto" / NEGATIVE_QUEUE, executor="serial",
                          analyses=[]).to_rows()["kineto_top_kernels"]
    memory = [r for r in rows if r["kind"] == "memory" and r["name"] != "others"]
    assert memory and all(r["subtype"] == memory_subtype(r["name"]) for r in memory)
    assert {r["subtype"] for r in memory} <= {"Memcpy DtoH", "Memcpy HtoD", "Memcpy DtoD", "Memset"}
    assert all(r["subtype"] == "" for r in rows if r["kind"] != "memory" or r["name"] == "others")


def test_series_times_count_from_the_traces_first_event(real_fixtures: Any) -> None:
    """Rank 0 of the rank pair starts 157,275 µs before its first event in file order (a ProfilerStep annotation
    written later): the chart's axis, "ms since the trace's first event", starts at the first launch that queued an
    activity, never below 0. Recomputed from the raw events: the earliest event of any kind the analyses read, and
    the earliest launch call whose activity was recorded."""
    path = real_fixtures / "kineto" / "hta/trace_filter__sampled_rank-0.json.gz"
    with gzip.open(path, "rt") as fh:
        events = [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X" and e.get("cat") != "Trace"]
    first = min(e["ts"] for e in events)
    launched = {e["args"]["correlation"] for e in events
                if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and "correlation" in e.get("args", {})}
    first_launch = min(e["ts"] for e in events if e.get("cat") == "cuda_runtime"
                       and e["name"] in ("cudaLaunchKernel", "cudaMemcpyAsync", "cudaMemsetAsync")
                       and e["args"].get("correlation") in launched)
    assert events[0]["ts"] - first == 157275
    points = queue_length_tables(read_rank(path).data)["queue_length_series"]
    assert min(p.ts_us for p in points) == pytest.approx(first_launch - first)
