"""Critical path against Holistic Trace Analysis' own expected values, on the traces its tests use.

Event numbers are positions in ``traceEvents`` (HTA's event index). Where a value comes from
HTA's test file it names the test (``tests/test_critical_path_analysis.py`` at v0.5.0 and at
f4d0062, which expect the same values); where it does not state one (the graph's size, the
path's length), the value is what HTA 0.5.0 computed on the same file with the same
arguments (its graph was compared with ours edge for edge: same edges, weights and path); the
end-to-end, rank-pair and df_index_resolver figures are HTA f4d0062's, run on the same files.
"""

from __future__ import annotations

import gzip
import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from my_utils.profiling.kineto import analyze_traces
from my_utils.profiling.kineto.critical_path import CriticalPath, critical_path, critical_path_tables
from my_utils.profiling.kineto.overlay import write_overlay
from my_utils.profiling.kineto.run import read_rank

ALEXNET_FORWARD = "[param|pytorch.model.alex_net|0|0|0|measure|forward]"


def _cp(real_fixtures: Any, name: str, annotation: str | None, instance: Any) -> CriticalPath:
    """The path as HTA's unit tests compute it: they set CRITICAL_PATH_ADD_ZERO_WEIGHT_LAUNCH_EDGE=1."""
    return critical_path(read_rank(real_fixtures / "kineto" / f"hta/{name}").data, annotation, instance,
                         zero_weight_launch_edges=True)


@pytest.fixture(scope="module")
def simple_add(real_fixtures: Any) -> CriticalPath:
    return _cp(real_fixtures, "critical_path__simple_add.json.gz", ALEXNET_FORWARD, 1)


def _edge(cp: CriticalPath, src: int, src_start: bool, dst: int, dst_start: bool) -> Any:
    hits = [e for e in cp.edges if (e.src, e.src_start, e.dst, e.dst_start) == (src, src_start, dst, dst_start)]
    assert len(hits) == 1, (src, src_start, dst, dst_start)
    return hits[0]


def test_simple_add_operator_edges_and_attribution(simple_add: CriticalPath) -> None:
    """HTA test_critical_path_basic_add: aten::relu_ (286) ⊃ aten::clamp_min_ (287) ⊃ cudaLaunchKernel (1005),
    edges e1..e5 weigh 15, 14, 17, 15, 32 µs and belong to relu_, clamp_min_, the launch, clamp_min_, relu_."""
    relu, clamp, launch = 286, 287, 1005
    expected = [((relu, True, clamp, True), 15, relu), ((clamp, True, launch, True), 14, clamp),
                ((launch, True, launch, False), 17, launch), ((launch, False, clamp, False), 15, clamp),
                ((clamp, False, relu, False), 32, relu)]
    for key, weight, owner in expected:
        e = _edge(simple_add, *key)
        assert (e.type, e.weight, e.attributed) == ("operator", weight, owner)
    # every operator and kernel-kernel edge is attributed to an event, no other edge is
    for e in simple_add.edges:
        assert (e.attributed is not None) == (e.type in ("operator", "kernel_kernel_delay")), e


def test_simple_add_launch_kernel_gap_and_sync_edges(simple_add: CriticalPath, real_fixtures: Any) -> None:
    """HTA test_critical_path_basic_add: the fft kernel (1051) waits 27 µs after its launch call's start; the
    ampere kernel (1067) starts 7 µs after it and keeps a zero-weight launch edge; cudaDeviceSynchronize (1281)
    ends after the epilogue kernel (1275) through a zero-weight sync edge."""
    d = read_rank(real_fixtures / "kineto" / "hta/critical_path__simple_add.json.gz").data
    runtime_of = {int(d.gpu_index[g]): int(d.rt_index[r]) for g, r in enumerate(d.gpu_rt.tolist()) if r >= 0}
    launch = _edge(simple_add, runtime_of[1051], True, 1051, True)
    assert (launch.type, launch.weight) == ("kernel_launch_delay", 27)
    gap = _edge(simple_add, 1051, False, 1067, True)
    assert (gap.type, gap.weight, gap.attributed) == ("kernel_kernel_delay", 7, 1051)
    zero = _edge(simple_add, runtime_of[1067], True, 1067, True)
    assert (zero.type, zero.weight) == ("kernel_launch_delay", 0)
    sync = _edge(simple_add, 1275, False, 1281, False)
    assert (sync.type, sync.weight) == ("sync_dependency", 0)


def test_simple_add_path_size_and_length(simple_add: CriticalPath) -> None:
    """HTA test_critical_path_basic_add: 315 nodes on the path; test_critical_path_overlaid_trace: 159 events.
    HTA 0.5.0 on the same window: a graph of 414 nodes and 440 edges, a path of 241,724 µs, 99.78 % CPU-bound."""
    assert len(simple_add.path) == 315
    assert len(simple_add.events) == 159
    assert (simple_add.graph_nodes, simple_add.graph_edges) == (414, 440)
    assert simple_add.length_us == 241724
    split = simple_add.breakdown()
    assert split["cpu_bound"] / sum(split.values()) == pytest.approx(0.9977908689248895, rel=1e-12)
    assert len(simple_add.path_edges) == 314


def _overlaid(path: Path) -> tuple[int, int, int, Counter[str]]:
    with gzip.open(path, "rt") as fh:
        events = json.load(fh)["traceEvents"]
    complete = sum(1 for e in events if e["ph"] == "X" and e.get("cat") not in ("user_annotation", "python_function"))
    marked = sum(e.get("args", {}).get("critical", 0) for e in events if e["ph"] == "X")
    marked_edges = sum(e["args"].get("critical", 0) for e in events if e["ph"] == "f" and "args" in e)
    per_kind = Counter(e["cat"] for e in events if str(e.get("cat", "")).startswith("critical_path"))
    return complete, marked, marked_edges, per_kind


def test_overlaid_trace_marks_the_path(simple_add: CriticalPath, real_fixtures: Any, tmp_path: Path) -> None:
    """HTA test_critical_path_overlaid_trace: 159 events marked; with every edge drawn 314 critical flows and
    2 flow events per graph edge of each kind (zero-weight launch edges left out); the default kinds draw 21;
    showing only critical events leaves the 159."""
    src = real_fixtures / "kineto" / "hta/critical_path__simple_add.json.gz"
    everything = write_overlay(src, tmp_path / "all.json.gz", annotation=ALEXNET_FORWARD, instance=1,
                               all_edges=True, with_counters=False, zero_weight_launch_edges=True)
    _complete, marked, edges, per_kind = _overlaid(everything.path)
    assert (marked, edges) == (159, 314)
    graph_kinds = Counter(e.type for e in simple_add.edges if not (e.type == "kernel_launch_delay" and e.weight == 0))
    assert per_kind == Counter({f"critical_path_{k}": 2 * n for k, n in graph_kinds.items()})
    default = write_overlay(src, tmp_path / "default.json.gz", annotation=ALEXNET_FORWARD, instance=1,
                            with_counters=False, zero_weight_launch_edges=True)
    assert _overlaid(default.path)[1:3] == (159, 21)
    only = write_overlay(src, tmp_path / "only.json.gz", annotation=ALEXNET_FORWARD, instance=1,
                         only_critical=True, with_counters=False, zero_weight_launch_edges=True)
    complete, marked, _edges, _kinds = _overlaid(only.path)
    assert complete == marked == 159


def test_end_to_end_whole_trace_against_htas_expected_output(real_fixtures: Any, tmp_path: Path) -> None:
    """HTA EndToEndTestCase.test_critical_path_end_to_end (f4d0062; its input is this same file): its expected
    overlaid trace (tests/data/critical_path/end_to_end/simple_add/output, read with gzip+json) has 1008 events
    carrying 'critical': 624 trace events and 192 flow pairs. HTA f4d0062, run on the file with its defaults
    (no zero-weight launch edges), finds 1,212 path nodes and 41,435,012 µs. Before the kernel-to-kernel limit
    the path took a 11,865 µs gap on stream 7 (the host was in a 12 ms cudaMalloc) as kernel overhead and
    marked 976 events."""
    src = real_fixtures / "kineto" / "hta/critical_path__simple_add.json.gz"
    r = write_overlay(src, tmp_path / "e2e.json.gz", annotation="", instance=0, with_counters=False)
    with gzip.open(r.path, "rt") as fh:
        events = json.load(fh)["traceEvents"]
    carrying = [e for e in events if "critical" in e.get("args", {})]
    assert r.critical is not None
    assert len(carrying) == 1008
    assert (sum(e["ph"] == "X" for e in carrying), sum(e["ph"] == "s" for e in carrying)) == (624, 192)
    assert (len(r.critical.path), r.critical.length_us) == (1212, 41435012)
    # the stretch where the paths parted: the 12 ms cudaMalloc (953) is on it, the kernels around the gap are not
    assert 953 in r.critical.events and not {947, 957, 961, 965} & r.critical.events


def test_end_to_end_with_zero_weight_launch_edges_as_htas_unit_tests_run(real_fixtures: Any) -> None:
    """HTA f4d0062 with CRITICAL_PATH_ADD_ZERO_WEIGHT_LAUNCH_EDGE=1 on the same file: 1,210 path nodes, 625
    events, 41,435,045 µs; the zero-weight edge from cudaLaunchKernel (963) lets the path run through the
    sgemm (961) and epilogue (965) kernels instead of the second launch call (967)."""
    cp = _cp(real_fixtures, "critical_path__simple_add.json.gz", "", 0)
    assert (len(cp.path), len(cp.events), cp.length_us) == (1210, 625, 41435045)
    assert {961, 965} <= cp.events and 967 not in cp.events


def _two_kernels(path: Path, gap: float) -> Any:
    """One thread launching two kernels on stream 7, the second launched while the first runs and starting
    ``gap`` µs after it ends (so no launch delay: only a kernel-to-kernel edge can link them)."""
    ops = [{"ph": "X", "cat": "cpu_op", "name": name, "ts": ts, "dur": 10, "pid": 1, "tid": 1}
           for name, ts in (("aten::mm", 0), ("aten::add", 20))]
    launches = [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": ts, "dur": 2, "pid": 1,
                 "tid": 1, "args": {"correlation": corr}} for corr, ts in ((1, 1), (2, 21))]
    kernels = [{"ph": "X", "cat": "kernel", "name": name, "ts": ts, "dur": 100, "pid": 0, "tid": 7,
                "args": {"stream": 7, "correlation": corr, "device": 0}}
               for name, corr, ts in (("gemm", 1, 5), ("add_kernel", 2, 105 + gap))]
    path.write_text(json.dumps({"traceEvents": ops + launches + kernels}))
    return read_rank(path).data


@pytest.mark.parametrize(("gap", "linked"), [(1499, True), (1500, False)])
def test_kernel_kernel_delay_stops_at_htas_limit(tmp_path: Path, gap: int, linked: bool) -> None:
    """HTA (ce386f4) counts a gap on a stream as kernel-to-kernel delay only below 1,500 µs: at 1,499 µs the
    second kernel hangs off the first with that weight, at 1,500 µs it has no edge from its stream."""
    d = _two_kernels(tmp_path / "t.json", gap)
    cp = critical_path(d, "", None)
    first, second = (int(d.gpu_index[i]) for i in range(2))
    kk = [e for e in cp.edges if e.type == "kernel_kernel_delay"]
    assert [(e.src, e.dst, e.weight) for e in kk] == ([(first, second, gap)] if linked else [])
    # aten::mm → its launch (1 µs) → gemm (4 µs launch delay, 100 µs) [→ the gap → add_kernel (100 µs)]
    assert cp.length_us == 1 + 4 + 100 + (gap + 100 if linked else 0)


def test_inter_stream_sync_on_alexnet(real_fixtures: Any) -> None:
    """HTA test_critical_path_inter_stream_sync (v0.5.0): 149 nodes on the path and a zero-weight sync edge from
    the fft2d_c2r kernel (1109, stream 20) to the elementwise kernel (1161, stream 7); HTA 0.5.0: 418 nodes,
    456 edges, 35,834 µs."""
    cp = _cp(real_fixtures, "critical_path__alexnet_trace.json.gz", ALEXNET_FORWARD, 1)
    assert len(cp.path) == 149
    sync = _edge(cp, 1109, False, 1161, True)
    assert (sync.type, sync.weight) == ("sync_dependency", 0)
    assert (cp.graph_nodes, cp.graph_edges, cp.length_us) == (418, 456, 35834)
    assert all(e.weight == 0 for e in cp.edges if e.type == "sync_dependency")


def test_event_sync_edges(real_fixtures: Any) -> None:
    """HTA test_critical_path_analysis_event_sync (v0.5.0), first ProfilerStep: the spin kernel (33) ends before
    cudaEventSynchronize (41) and cudaDeviceSynchronize (51) end, through zero-weight sync edges; HTA 0.5.0:
    54 nodes, 57 edges, 40 on the path, 2,401 µs."""
    cp = _cp(real_fixtures, "critical_path__cuda_event_sync.json.gz", "ProfilerStep", 0)
    for call in (41, 51):
        e = _edge(cp, 33, False, call, False)
        assert (e.type, e.weight) == ("sync_dependency", 0)
    assert (cp.graph_nodes, cp.graph_edges, len(cp.path), cp.length_us) == (54, 57, 40, 2401)


def test_stream_wait_event_across_streams(real_fixtures: Any) -> None:
    """HTA test_critical_path_analysis_event_sync_multistream (v0.5.0), whole trace: the record on stream 20
    follows kernel 1 (ampere_sgemm_128x64_nn, event 24), not kernel 2 on stream 28, so the Memset (84) launched
    after cudaStreamWaitEvent waits for event 24; HTA 0.5.0: 78 nodes, 85 edges, 59 on the path, 1,178 µs."""
    cp = _cp(real_fixtures, "critical_path__event_sync_multi_stream.json.gz", "", None)
    e = _edge(cp, 24, False, 84, True)
    assert (e.type, e.weight) == ("sync_dependency", 0)
    assert (cp.graph_nodes, cp.graph_edges, len(cp.path), cp.length_us) == (78, 85, 59, 1178)


def test_tables_in_the_analysis(real_fixtures: Any) -> None:
    """The registered analysis gives one summary row per rank, a breakdown adding up to the path, top events."""
    a = analyze_traces(real_fixtures / "kineto" / "hta/critical_path__simple_add.json.gz", executor="serial",
                       options={"critical_path": {"annotation": ALEXNET_FORWARD, "instance": 1}})
    rows = a.to_rows()
    (summary,) = rows["kineto_critical_path"]
    assert (summary["path_nodes"], summary["path_events"], summary["length_us"]) == (315, 159, 241724)
    assert sum(r["us"] for r in rows["kineto_critical_path_breakdown"]) == pytest.approx(summary["length_us"])
    assert sum(r["pct"] for r in rows["kineto_critical_path_breakdown"]) == pytest.approx(100.0)
    top = rows["kineto_critical_path_top"]
    assert top and top[0]["us"] >= top[-1]["us"] and {r["side"] for r in top} <= {"cpu", "gpu"}


def _steps(path: Path) -> list[tuple[float, str]]:
    with gzip.open(path, "rt") as fh:
        return sorted((e["dur"], e["name"]) for e in json.load(fh)["traceEvents"]
                      if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#"))


def test_default_window_is_the_lower_median_step(real_fixtures: Any) -> None:
    """Without arguments the window is the step of median duration; with an even count, the lower one. On rank 0
    of the rank pair (steps of 607,312 and 622,928 µs in the raw trace) that is #551, whose path HTA f4d0062 finds
    at 3,528 nodes and 301,198 µs when its cross-thread CUDA-runtime-lock edges are left out (301,476 µs with
    them); #552's path is 322,329 µs, so taking the upper median shows."""
    path = real_fixtures / "kineto" / "hta/trace_filter__sampled_rank-0.json.gz"
    steps = _steps(path)
    assert [name for _dur, name in steps] == ["ProfilerStep#551", "ProfilerStep#552"]
    d = read_rank(path).data
    cp = critical_path(d)
    assert cp.window.label == "ProfilerStep#551 (median of 2 steps)"
    assert cp.window.end - cp.window.start == steps[0][0] == 607312
    assert (len(cp.path), len(cp.events), cp.length_us) == (3528, 1765, 301198)
    assert critical_path(d, "ProfilerStep#552", 0).length_us == 322329
    with pytest.raises(LookupError, match=r"no such annotation|occurrence"):
        critical_path(d, "no such annotation", 0)


def test_backward_thread_joins_the_forward_threads_stack(real_fixtures: Any) -> None:
    """HTA f4d0062 (77300a9) merges the one thread running autograd operators into the one running "forward"
    ones; on rank 0's #551 that walks the backward pass: 875 of the 1,765 events on HTA's path are on thread
    23695 (613 operators, 262 runtime calls). Without the merge (HTA with it turned off, and this code before)
    the path is 267,581 µs and holds none of them."""
    path = real_fixtures / "kineto" / "hta/trace_filter__sampled_rank-0.json.gz"
    with gzip.open(path, "rt") as fh:
        tid = [e.get("tid") for e in json.load(fh)["traceEvents"]]
    cp = critical_path(read_rank(path).data)
    assert Counter(tid[i] for i in cp.events) == Counter({4037: 887, 23695: 875, 23: 3})


def test_cpu_only_rank_has_no_gpu_edges(real_fixtures: Any) -> None:
    """A rank without GPU activity still has its CPU chain; nothing on it is GPU time."""
    d = read_rank(real_fixtures / "kineto" / "hta/cpu_only__rank-34.pt.trace.json.gz").data
    cp = critical_path(d, "", None)
    split = cp.breakdown()
    assert split["gpu_compute_bound"] == split["gpu_kernel_launch_overhead"] == 0
    assert all(e.type in ("operator", "dependency") for e in cp.edges)


def _stub_step_trace(path: Path) -> Any:
    """Step #1 runs an operator that launches a kernel; step #2 is a 49 µs stub holding nothing (the profiler
    stopped right after ``prof.step()``)."""
    events = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "ts": ts, "dur": dur, "pid": 1,
               "tid": 1} for n, ts, dur in ((1, 0, 300_000), (2, 300_010, 49))]
    events += [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 100, "dur": 250_000, "pid": 1, "tid": 1},
               {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 200, "dur": 20, "pid": 1,
                "tid": 1, "args": {"correlation": 1}},
               {"ph": "X", "cat": "kernel", "name": "gemm", "ts": 250, "dur": 1000, "pid": 0, "tid": 7,
                "args": {"stream": 7, "correlation": 1, "device": 0}}]
    path.write_text(json.dumps({"traceEvents": events}))
    return read_rank(path).data


def test_default_window_leaves_out_a_step_without_cpu_work(tmp_path: Path) -> None:
    """Of two steps the lower median would be the 49 µs stub, where no path can start: the default window is the
    step holding work, and the label says one was left out; its row covers 250,000 of 300,000 µs (83.3 %)."""
    d = _stub_step_trace(tmp_path / "t.json")
    cp = critical_path(d)
    assert cp.window.label == "ProfilerStep#1 (median of 1 step; 1 without CPU work left out)"
    assert cp.length_us == 250_000
    (row,) = critical_path_tables(d)["critical_path"]
    assert row.coverage_pct == pytest.approx(100 * 250_000 / 300_000) and row.not_measured == ""


def test_a_window_without_cpu_work_says_why_its_path_is_empty(tmp_path: Path) -> None:
    """Asked for the stub step, the table still has its row: an empty path, no coverage, and the reason."""
    d = _stub_step_trace(tmp_path / "t.json")
    (row,) = critical_path_tables(d, "ProfilerStep#2", 0)["critical_path"]
    assert (row.path_nodes, row.length_us) == (0, 0.0) and math.isnan(row.coverage_pct)
    assert "holds no CPU operator or runtime call" in row.not_measured and "0.049 ms" in row.not_measured
    gpu_only = tmp_path / "gpu.json"
    gpu_only.write_text(json.dumps({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "gemm", "ts": 0, "dur": 5,
                                                     "pid": 0, "tid": 7, "args": {"stream": 7}}]}))
    (row,) = critical_path_tables(read_rank(gpu_only).data)["critical_path"]
    assert row.not_measured.startswith("the trace holds no CPU operators or runtime calls")
