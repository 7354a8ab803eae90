"""Trace filters against Holistic Trace Analysis' ``tests/test_trace_filter.py`` values, on the traces it uses.

HTA counts rows of its trace DataFrame: the complete events (``ph`` X) of every category it
keeps (CPU operators, annotations, runtime calls, GPU activities, syncs). Ours are the rows of
the same tables in :class:`RankData` (the ``ProfilerStep`` events counted once).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from my_utils.core.errors import UsageError
from my_utils.profiling.kineto import analyze_traces
from my_utils.profiling.kineto.filters import TraceFilter, iteration_of
from my_utils.profiling.kineto.rank_data import RankData
from my_utils.profiling.kineto.read.provider import parse_trace_file
from my_utils.profiling.kineto.run import read_rank


def rows(d: RankData) -> int:
    return len(d.gpu_ts) + len(d.rt_ts) + len(d.op_ts) + len(d.ann_ts) + len(d.hsync_ts) + len(d.step_events)


@pytest.fixture(scope="module")
def rank0(real_fixtures: Any) -> RankData:
    return read_rank(real_fixtures / "kineto" / "hta/trace_filter__sampled_rank-0.json.gz").data


def test_every_event_of_htas_dataframe_is_a_row(rank0: RankData) -> None:
    """HTA parses 4,810 events of this trace (2,329 cpu_op, 1,204 runtime, 1,154 kernels, 73 annotations,
    40 copies, 10 sets; HTA 0.5.0's ``Trace.parse_traces``)."""
    assert rows(rank0) == 4810
    assert len(rank0.op_ts) == 2329 and len(rank0.rt_ts) == 1204 and len(rank0.gpu_ts) == 1154 + 40 + 10


def test_time_range_filter(rank0: RankData) -> None:
    """HTA testTimeRangeFilter: TimeRangeFilter((1682725898237042, 1682725898240570)) keeps 93 rows."""
    assert rows(TraceFilter(time_range=(1682725898237042, 1682725898240570)).apply(rank0)) == 93


def test_iteration_filters(rank0: RankData) -> None:
    """HTA testIterationFilter (iteration 551 only) and FirstIterationFilter: HTA 0.5.0 keeps 2,403 rows of
    this trace for both (551 is its first iteration); the second position is iteration 552."""
    first = TraceFilter(first_iteration=True).apply(rank0)
    assert rows(first) == rows(TraceFilter(iterations=(551,)).apply(rank0)) == 2403
    assert rows(TraceFilter(iteration_index=(0,)).apply(rank0)) == 2403
    assert set(iteration_of(first)["rt"].tolist()) == {551}
    second = TraceFilter(iteration_index=(1,)).apply(rank0)
    assert set(iteration_of(second)["gpu"].tolist()) == {552}
    assert rows(TraceFilter(iteration_index=(5,)).apply(rank0)) == 0  # HTA: "select no iterations"


def test_device_filters(rank0: RankData) -> None:
    """HTA testGPUKernelFilter / testCPUOperatorFilter: 1,204 GPU rows and 3,606 CPU rows (HTA 0.5.0)."""
    gpu, cpu = TraceFilter(device="gpu").apply(rank0), TraceFilter(device="cpu").apply(rank0)
    assert rows(gpu) == 1204 and len(gpu.rt_ts) == len(gpu.op_ts) == 0
    assert rows(cpu) == 3606 and len(cpu.gpu_ts) == 0


def test_name_filter(rank0: RankData) -> None:
    """HTA testNameFilter: NameFilter("^nccl") keeps only names matching it (20 rows here, HTA 0.5.0)."""
    kept = TraceFilter(name="^nccl").apply(rank0)
    assert rows(kept) == 20
    assert all(kept.names[n].startswith("nccl") for n in kept.gpu_name.tolist() + kept.op_name.tolist())


def test_under_operator_filter(rank0: RankData) -> None:
    """HTA testUnderOperatorFilter: in the first iteration, under the first 'forward' with its GPU kernels: 146."""
    kept = TraceFilter(first_iteration=True, under="forward", under_position=0).apply(rank0)
    assert rows(kept) == 146
    assert len(kept.gpu_ts) and (kept.gpu_rt >= 0).all()  # every kept kernel's launch is kept with it
    without = TraceFilter(first_iteration=True, under="forward", include_gpu_kernels=False).apply(rank0)
    assert len(without.gpu_ts) == 0 and rows(without) == 146 - len(kept.gpu_ts)
    assert rows(TraceFilter(under="no such operator").apply(rank0)) == 0


def test_event_syncs_on_no_stream_are_gpu_events(real_fixtures: Any) -> None:
    """HTA TestTraceFiltersSyncEvents.testGPUKernelFilter: the GPU filter keeps the 3 event/context syncs written
    on stream -1; the CPU filter keeps none of them."""
    d = read_rank(real_fixtures / "kineto" / "hta/critical_path__cuda_event_sync.json.gz").data
    assert len(TraceFilter(device="gpu").apply(d).hsync_ts) == 3
    assert len(TraceFilter(device="cpu").apply(d).hsync_ts) == 0


def test_every_analysis_accepts_a_filtered_trace(real_fixtures: Any) -> None:
    """analyze_traces(trace_filter=...) runs the core and registered analyses on the part kept, and says which."""
    path = real_fixtures / "kineto" / "hta/trace_filter__sampled_rank-0.json.gz"
    whole = analyze_traces(path, executor="serial")
    first = analyze_traces(path, executor="serial", trace_filter=TraceFilter(first_iteration=True))
    assert first.trace_filter == "first iteration"
    assert first.launch[0].launches < whole.launch[0].launches
    assert first.temporal[0].span_us < whole.temporal[0].span_us
    tables = first.to_rows()
    assert tables["kineto_critical_path"][0]["window"].startswith("ProfilerStep#551")
    assert [w for w in first.warnings if "ranks analysed" not in w] == []  # one rank of 128: said, nothing else


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"time_range": (5, 1)}, "start is after the end"),
    ({"device": "tpu"}, "expected one of gpu, cpu"),
    ({"name": "("}, "not a regular expression"),
    ({"first_iteration": True, "iterations": (3,)}, "give one of"),
])
def test_bad_filters_say_what_is_wrong(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        TraceFilter(**kwargs)


def test_describe_and_inactive() -> None:
    assert not TraceFilter().active and TraceFilter().describe() == "no filter"
    assert TraceFilter(device="gpu", name="^nccl").describe() == "GPU events only; names matching '^nccl'"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from my_utils.profiling.cli import main; main()", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=300)


def test_analyze_filter_option(real_fixtures: Any, tmp_path: Path) -> None:
    """``myutils-profile analyze --filter``: the Kineto tables cover the part kept, and the report says which;
    a filter that cannot be read is one line, exit 2, nothing written."""
    trace = real_fixtures / "kineto" / "hta/trace_filter__sampled_rank-0.json.gz"
    events = tmp_path / "metrics_events.jsonl"
    with open(events, "w", encoding="utf-8") as fh:
        for e in parse_trace_file(trace):
            fh.write(json.dumps(e.to_dict()) + "\n")
    out = tmp_path / "out"
    ok = _cli("analyze", "--events", str(events), "--trace", str(trace), "--output-dir", str(out), "-q",
              "--formats", "json", "--filter", "iterations=552; under=## forward ##", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    report = json.loads((out / "analysis_report.json").read_text(encoding="utf-8"))
    assert report["summary"]["kineto"].endswith("(iterations 552; under '## forward ##' #0 with its GPU activities)")
    whole = analyze_traces(trace, executor="serial", analyses=[]).to_rows()["kineto_launch"][0]["launches"]
    assert 0 < report["tables"]["kineto_launch"][0]["launches"] < whole
    bad = _cli("analyze", "--events", str(events), "--trace", str(trace), "--output-dir", str(tmp_path / "bad"),
               "--filter", "iterations=five", cwd=tmp_path)
    assert bad.returncode == 2 and "--filter 'iterations=five': cannot read" in bad.stderr
    assert "Traceback" not in bad.stderr and not (tmp_path / "bad").exists()


@pytest.mark.parametrize(("text", "expected"), [
    ("first_iteration", TraceFilter(first_iteration=True)),
    ("iterations=551,552; device=gpu", TraceFilter(iterations=(551, 552), device="gpu")),
    ("time=10:20.5 ;name=^nccl", TraceFilter(time_range=(10.0, 20.5), name="^nccl")),
    ("under=## forward ###1; no_gpu_kernels", TraceFilter(under="## forward ##", under_position=1,
                                                           include_gpu_kernels=False)),
    ("under=a#b", TraceFilter(under="a#b")),
])
def test_filter_text(text: str, expected: TraceFilter) -> None:
    assert TraceFilter.parse(text) == expected
