"""Kineto analyses on the real traces, each checked against a slow, obviously-correct computation here.

The expected values come from plain loops over ``json.load`` of the same file: a sweep over
interval end points for the temporal breakdown and overlap, a per-stream walk for idle
time, dictionaries on correlation ids for launches and annotations. Kernel kinds follow
Holistic Trace Analysis' name rules, re-stated below in words (string tests, not its regexes).
"""

from __future__ import annotations

import gzip
import itertools
import json
import math
import shutil
import statistics
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from my_utils.core.errors import InputError
from my_utils.profiling.kineto import KinetoAnalysis, analyze_traces
from my_utils.profiling.kineto.run import analyze_file

FAST = [
    "hta/trace_filter__sampled_rank-0.json.gz",
    "hta/trace_filter__sampled_rank-1.json.gz",
    "hta/nccl_parser_config__nccl_data.json.gz",
    "hta/critical_path__alexnet_trace.json.gz",
    "hta/critical_path__event_sync_multi_stream.json.gz",
    "hta/mtia_inference_rank_0.json.gz",
    "hta/legacy_caps_cats__inference_rank_1.json.gz",
    "hta/cpu_only__rank-34.pt.trace.json.gz",
    "hta/triton_example.json.gz",
    "hta/call_stack__backward_thread.json",
    "kineto_repo/before_fix_trace.json",
]
BIG = [
    "hta/df_index_resolver.json.gz",
    "hta/negative_queue_length__rank0.json.gz",
    "hta/trace_diff__control.json.gz",
    "hta/trace_diff__test.json.gz",
    "kineto_repo/resnet50_nw0_worker0.1623143089861.pt.trace.json.gz",
]
ALL = [*FAST, *(pytest.param(n, marks=pytest.mark.slow) for n in BIG)]

GPU_CATS = {"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset", "mtia_ccp_events"}
RUNTIME_CATS = {"cuda_runtime", "Runtime", "cuda_driver", "mtia_runtime"}
LAUNCHES = {"cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx", "cudaMemcpyAsync",
            "cudaMemsetAsync", "runFunction - job_prep_and_submit_for_execution"}


def kind(name: str) -> str:
    """HTA's rules (September 2025) in words: names starting nccl/hip/hccl or holding ncclKernel are
    communication; Memcpy/hipMemcpy/Memset/hipMemset/dma prefixes are memory; computation unless the
    first line holds Memcpy, Memset, dma or Sync, the name starts with a runtime/executor prefix or
    Stream Wait Event, or is a cuda…LaunchKernel call (then other)."""
    first = name.split("\n", 1)[0]
    if name.startswith(("nccl", "hip", "hccl")) or "ncclKernel" in first:
        return "communication"
    if name.startswith(("Memcpy", "hipMemcpy", "Memset", "hipMemset", "dma")):
        return "memory"
    if (any(w in first for w in ("Memcpy", "Memset", "dma", "Sync"))
            or name.startswith(("Stream Wait Event", "runFunction", "job_exe", "packet", "pe_exe",
                                "cpum_exe_subgraph", "collective_subgraph_execution"))
            or (first.startswith("cuda") and "LaunchKernel" in first[4:])):
        return "other"
    return "computation"


def load(path: Path) -> list[dict[str, Any]]:
    with (gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")) as fh:
        doc = json.load(fh)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


class Reference:
    """The slow computations over the decoded events of one file."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        xs = [e for e in events if e.get("ph") == "X"]
        # epoch-µs times (1.6e15) have a float64 step of 0.25 µs: work relative to the first
        # start, as Kineto's own sub-µs durations would otherwise be rounded away in ts + dur
        base = min((e["ts"] for e in xs), default=0)
        for e in xs:
            e["ts"] -= base
        self.gpu = [e for e in xs if e.get("cat") in GPU_CATS]
        # cuda_sync on a real stream is GPU time (HTA's temporal breakdown); on stream -1 it is the host waiting
        self.sync_stream = [e for e in xs if e.get("cat") == "cuda_sync"
                            and (e.get("args") or {}).get("stream") not in (None, -1, 4294967295)]
        self.sync_host = [e for e in xs if e.get("cat") == "cuda_sync" and e not in self.sync_stream]
        self.busy = self.gpu + self.sync_stream
        self.runtime: dict[int, dict[str, Any]] = {}
        for e in xs:
            corr = (e.get("args") or {}).get("correlation")
            if e.get("cat") in RUNTIME_CATS and isinstance(corr, int):
                self.runtime.setdefault(corr, e)
        self.annotations = [e for e in xs if e.get("cat") == "user_annotation"
                            and not str(e.get("name", "")).startswith("ProfilerStep#")]
        self.launch_calls = [e for e in xs if e.get("cat") in RUNTIME_CATS and e.get("name") in LAUNCHES]
        self.steps = sorted({(e["ts"], e["dur"]) for e in xs if e.get("cat") in ("cpu_op", "user_annotation", "Operator")
                             and str(e.get("name", "")).startswith("ProfilerStep#")})

    def launcher(self, g: dict[str, Any]) -> dict[str, Any] | None:
        corr = (g.get("args") or {}).get("correlation")
        return self.runtime.get(corr) if isinstance(corr, int) else None

    def coverage(self) -> Counter[frozenset[str]]:
        """Time during which exactly each set of kernel kinds is running (a sweep over end points)."""
        points = []
        for g in self.busy:
            k = kind(g["name"])
            points.append((g["ts"], 1, k))
            points.append((g["ts"] + g.get("dur", 0), -1, k))
        points.sort(key=lambda p: p[0])
        active: Counter[str] = Counter()
        out: Counter[frozenset[str]] = Counter()
        for (t, step, k), nxt in itertools.pairwise(points):
            active[k] += step
            out[frozenset(x for x, n in active.items() if n > 0)] += nxt[0] - t
        return out


@pytest.fixture(scope="module")
def analysed(real_fixtures: Any) -> Any:
    cache: dict[str, tuple[Reference, Any]] = {}

    def get(name: str) -> tuple[Reference, Any]:
        if name not in cache:
            path = real_fixtures / "kineto" / name
            cache[name] = (Reference(load(path)), analyze_file(path))
        return cache[name]

    return get


def approx(x: float) -> Any:
    return pytest.approx(x, rel=1e-9, abs=1e-6)


@pytest.mark.parametrize("name", ALL)
def test_temporal_breakdown_and_overlap_match_a_sweep(analysed: Any, name: str) -> None:
    ref, got = analysed(name)
    if not ref.busy:
        assert got.temporal is None
        assert got.overlap is None  # no all-zero overlap row for a rank without GPU activity
        return
    cover = ref.coverage()
    span = max(g["ts"] + g.get("dur", 0) for g in ref.busy) - min(g["ts"] for g in ref.busy)
    busy = sum(v for k, v in cover.items() if k)
    compute = sum(v for k, v in cover.items() if "computation" in k)
    t = got.temporal
    assert (t.span_us, t.idle_us, t.compute_us, t.non_compute_us) == (
        approx(span), approx(span - busy), approx(compute), approx(busy - compute))
    assert t.idle_pct + t.compute_pct + t.non_compute_pct == pytest.approx(100.0)
    comm = sum(v for k, v in cover.items() if "communication" in k)
    both = sum(v for k, v in cover.items() if {"communication", "computation"} <= k)
    o = got.overlap
    assert (o.communication_us, o.computation_us, o.overlap_us) == (approx(comm), approx(compute), approx(both))
    if comm:
        assert o.overlap_pct == approx(100 * both / comm)


@pytest.mark.parametrize("name", ALL)
def test_kernel_breakdown_matches_sums_per_kind_and_name(analysed: Any, name: str) -> None:
    ref, got = analysed(name)
    per_kind: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    per_name: dict[str, list[float]] = defaultdict(list)
    for g in ref.busy:
        per_kind[kind(g["name"])][0] += 1
        per_kind[kind(g["name"])][1] += g.get("dur", 0)
        per_name[g["name"]].append(g.get("dur", 0))
    assert {r.kind: [r.count, r.total_us] for r in got.kernel_kinds} == {k: [v[0], approx(v[1])] for k, v in per_kind.items()}
    assert sum(r.share_pct for r in got.kernel_kinds) == (pytest.approx(100.0) if ref.busy else 0)
    assert len(got.kernel_stats) == len(per_name)
    for s in got.kernel_stats:
        durs = per_name[s.name]
        assert (s.kind, s.count, s.total_us, s.min_us, s.max_us) == (kind(s.name), len(durs), approx(sum(durs)),
                                                                     min(durs), max(durs))
        assert s.std_us == pytest.approx(statistics.pstdev(durs), rel=1e-6, abs=1e-6)
    totals = [s.total_us for s in got.kernel_stats]
    assert totals == sorted(totals, reverse=True)


@pytest.mark.parametrize("name", ALL)
def test_idle_breakdown_matches_a_walk_per_stream(analysed: Any, name: str) -> None:
    ref, got = analysed(name)
    lanes: dict[tuple[Any, Any], list[dict[str, Any]]] = defaultdict(list)
    for g in ref.gpu:
        lanes[(g.get("pid"), (g.get("args") or {}).get("stream", g.get("tid")))].append(g)
    expected: dict[tuple[Any, Any, str], list[float]] = {}
    for (pid, stream), evs in lanes.items():
        if len(ref.gpu) < 2:
            break
        for cat in ("host_wait", "kernel_wait", "other"):
            expected[(pid, stream, cat)] = [0.0, 0]
        evs.sort(key=lambda g: g["ts"])
        reach = evs[0]["ts"] + evs[0].get("dur", 0)
        for g in evs[1:]:
            gap = max(g["ts"] - reach, 0)
            if gap > 0:
                rt = ref.launcher(g)
                cat = ("host_wait" if rt is not None and rt["ts"] > reach
                       else "kernel_wait" if gap < 30 else "other")
                expected[(pid, stream, cat)][0] += gap
                expected[(pid, stream, cat)][1] += 1
            reach = max(reach, g["ts"] + g.get("dur", 0))
    assert {(r.device, r.stream, r.category): [approx(r.idle_us), r.gaps] for r in got.idle} == expected
    for lane in lanes:
        shares = [r.share_pct for r in got.idle if (r.device, r.stream) == lane]
        assert all(math.isnan(s) for s in shares) or sum(shares) == pytest.approx(100.0)


@pytest.mark.parametrize("name", ALL)
def test_device_idle_is_the_span_minus_the_union_and_never_exceeds_it(analysed: Any, name: str) -> None:
    ref, got = analysed(name)
    by_device: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for g in ref.busy:
        by_device[g.get("pid")].append(g)
    expected: dict[tuple[Any, str], list[float]] = {}
    for pid, evs in by_device.items():
        for cat in ("host_wait", "kernel_wait", "other"):
            expected[(pid, cat)] = [0.0, 0]
        evs.sort(key=lambda g: g["ts"])
        reach = evs[0]["ts"] + evs[0].get("dur", 0)
        for g in evs[1:]:
            gap = max(g["ts"] - reach, 0)
            if gap > 0:
                rt = ref.launcher(g)
                cat = ("host_wait" if rt is not None and rt["ts"] > reach
                       else "kernel_wait" if gap < 30 else "other")
                expected[(pid, cat)][0] += gap
                expected[(pid, cat)][1] += 1
            reach = max(reach, g["ts"] + g.get("dur", 0))
    assert {(r.device, r.category): [approx(r.idle_us), r.gaps] for r in got.idle_device} == expected
    if got.temporal is not None and len(by_device) == 1:  # one device: its idle is the temporal idle
        assert sum(r.idle_us for r in got.idle_device) == approx(got.temporal.idle_us)
    for r in got.idle_device:
        assert r.idle_us <= r.span_us


@pytest.mark.parametrize("name", ["hta/critical_path__alexnet_trace.json.gz", "hta/critical_path__event_sync_multi_stream.json.gz",
                                  "kineto_repo/before_fix_trace.json"])
def test_cuda_sync_is_gpu_time_on_a_stream_and_host_wait_off_it(analysed: Any, name: str) -> None:
    ref, got = analysed(name)
    assert ref.sync_stream, "the trace has cuda_sync events on a stream"
    stream = {r.name: (r.count, r.total_us) for r in got.sync if r.where == "stream"}
    host = {r.name: (r.count, r.total_us) for r in got.sync if r.where == "host"}
    expected_stream: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for e in ref.sync_stream:
        expected_stream[e["name"]][0] += 1
        expected_stream[e["name"]][1] += e.get("dur", 0)
    expected_host: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for e in ref.sync_host:
        expected_host[e["name"]][0] += 1
        expected_host[e["name"]][1] += e.get("dur", 0)
    assert stream == {k: (v[0], approx(v[1])) for k, v in expected_stream.items()}
    assert host == {k: (v[0], approx(v[1])) for k, v in expected_host.items()}
    # a stream sync is non-compute GPU time: counted in the "other" kind
    other = next(k for k in got.kernel_kinds if k.kind == "other")
    assert other.count >= len(ref.sync_stream)


@pytest.mark.parametrize("name", ALL)
def test_launch_statistics_match_pairs_joined_on_correlation(analysed: Any, name: str) -> None:
    ref, got = analysed(name)
    pairs = []
    for g in ref.gpu:
        rt = ref.launcher(g)
        if rt is not None and rt.get("name") in LAUNCHES:
            pairs.append((rt.get("dur", 0), g.get("dur", 0), max(g["ts"] - rt["ts"] - rt.get("dur", 0), 0),
                          kind(g.get("name", "")) != "memory"))
    if not pairs:
        assert got.launch is None
        return
    row = got.launch
    cpu, gpu, delay, kernel = zip(*pairs, strict=True)
    assert row.launches == len(pairs)
    assert (row.cpu_mean_us, row.gpu_mean_us, row.delay_mean_us) == (
        approx(statistics.fmean(cpu)), approx(statistics.fmean(gpu)), approx(statistics.fmean(delay)))
    assert (row.delay_median_us, row.delay_max_us) == (approx(statistics.median(delay)), max(delay))
    assert row.runtime_outliers == sum(c > 50 for c in cpu)
    assert row.delay_outliers == sum(d > 100 for d in delay)
    # kernels only: a memory copy or set shorter than its launch is no short kernel
    assert (row.kernels, row.short_kernels) == (sum(kernel), sum(k and c <= 50 and g < c for c, g, _d, k in pairs))
    worst = sorted((d for d in delay if d > 100), reverse=True)[:10]
    assert [o.delay_us for o in got.launch_outliers] == worst


@pytest.mark.parametrize("name", FAST)
def test_gpu_time_per_annotation_matches_ranges_on_the_launching_thread(analysed: Any, name: str) -> None:
    ref, got = analysed(name)
    by_name: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for a in ref.annotations:
        by_name[a["name"]].append(a)
    expected = {}
    for ann, ranges in by_name.items():
        kernels, gpu_us = 0, 0.0
        for g in ref.gpu:
            rt = ref.launcher(g)
            if rt is not None and any(r["pid"] == rt["pid"] and r["tid"] == rt["tid"]
                                      and r["ts"] <= rt["ts"] < r["ts"] + r.get("dur", 0) for r in ranges):
                kernels += 1
                gpu_us += g.get("dur", 0)
        expected[ann] = [len(ranges), kernels, approx(gpu_us)]
    assert {r.name: [r.ranges, r.kernels, r.gpu_us] for r in got.annotations} == expected


def test_annotation_gpu_time_on_a_real_training_trace_names_the_optimizer(analysed: Any, real_fixtures: Any) -> None:
    # before: this checked the first row only, which is "## forward ##"
    path = real_fixtures / "kineto" / "hta/trace_filter__sampled_rank-0.json.gz"
    events = [e for e in load(path) if e.get("ph") == "X"]
    name = "Optimizer.step#Shampoo.step"
    ranges = [e for e in events if e.get("cat") == "user_annotation" and e.get("name") == name]
    runtime = {e["args"]["correlation"]: e for e in events
               if e.get("cat") in RUNTIME_CATS and isinstance((e.get("args") or {}).get("correlation"), int)}
    kernels, gpu_us = 0, 0.0
    for g in events:
        if g.get("cat") not in GPU_CATS:
            continue
        rt = runtime.get((g.get("args") or {}).get("correlation"))
        if rt is not None and any(r["tid"] == rt["tid"] and r["pid"] == rt["pid"]
                                  and r["ts"] <= rt["ts"] < r["ts"] + r["dur"] for r in ranges):
            kernels += 1
            gpu_us += g["dur"]
    assert len(ranges) == 2 and kernels == 62  # counted here, by hand, from the raw events
    _ref, got = analysed("hta/trace_filter__sampled_rank-0.json.gz")
    (row,) = [a for a in got.annotations if a.name == name]
    assert (row.ranges, row.kernels) == (len(ranges), kernels)
    assert row.gpu_us == approx(gpu_us)
    assert row.cpu_us == approx(sum(r["dur"] for r in ranges))


@pytest.mark.parametrize("name", ALL)
def test_capture_health_counts_steps_and_unmatched_launches(analysed: Any, name: str) -> None:
    ref, got = analysed(name)
    checks = {h.check: h for h in got.health}
    assert set(checks) == {"profiler_steps", "gpu_lanes", "dropped_events", "warmup_steps"}
    assert checks["profiler_steps"].value == len(ref.steps)
    assert checks["profiler_steps"].status == ("ok" if ref.steps else "warning")
    launched = {(g.get("args") or {}).get("correlation") for g in ref.gpu}
    no_gpu = sum(1 for rt in ref.launch_calls if (rt.get("args") or {}).get("correlation") not in launched)
    no_launch = sum(1 for g in ref.gpu if isinstance((g.get("args") or {}).get("correlation"), int)
                    and ref.launcher(g) is None)
    assert f"{no_gpu} of {len(ref.launch_calls)} launches" in checks["dropped_events"].detail
    assert f"{no_launch} of {len(ref.gpu)} GPU activities" in checks["dropped_events"].detail
    if not ref.gpu and ref.launch_calls:
        assert checks["gpu_lanes"].status == "warning"


def _write(path: Path, events: list[dict[str, Any]], rank: int = 0) -> Path:
    path.write_text(json.dumps({"distributedInfo": {"rank": rank}, "traceEvents": events}))
    return path


def _step(n: int, ts: float, dur: float) -> dict[str, Any]:
    return {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "ts": ts, "dur": dur, "pid": 1, "tid": 1}


def test_health_flags_warmup_steps_missing_gpu_and_dropped_launches(tmp_path: Path) -> None:
    steps = [_step(0, 0, 500), _step(1, 500, 100), _step(2, 600, 110), _step(3, 710, 90)]
    launches = [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 10 + i, "dur": 1, "pid": 1,
                 "tid": 1, "args": {"correlation": i}} for i in range(5)]
    meta = [{"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}},
            {"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7"}}]
    got = analyze_file(_write(tmp_path / "t.json", steps + launches + meta))
    checks = {h.check: h for h in got.health}
    assert checks["warmup_steps"].status == "warning" and checks["warmup_steps"].value == 1
    assert "[0]" in checks["warmup_steps"].detail
    assert checks["gpu_lanes"].status == "warning" and "5 kernel launches" in checks["gpu_lanes"].detail
    assert checks["dropped_events"].status == "warning" and checks["dropped_events"].value == 100.0

    kernel = {"ph": "X", "cat": "kernel", "name": "gemm", "ts": 20, "dur": 5, "pid": 0, "tid": 7,
              "args": {"stream": 7, "correlation": 0}}
    meta.append({"ph": "M", "name": "thread_name", "pid": 0, "tid": 9, "args": {"name": "stream 9"}})
    got = analyze_file(_write(tmp_path / "t.json", steps[1:] + launches[:1] + [kernel] + meta))
    checks = {h.check: h for h in got.health}
    assert checks["warmup_steps"].status == "ok"
    assert checks["gpu_lanes"].status == "info" and checks["gpu_lanes"].value == 1  # stream 9 declared, empty
    assert checks["dropped_events"].status == "ok"


def test_every_rank_present_is_analysed_and_merged(real_fixtures: Any, tmp_path: Path) -> None:
    for rank in (0, 1):
        name = f"trace_filter__sampled_rank-{rank}.json.gz"
        shutil.copy(real_fixtures / "kineto" / "hta" / name, tmp_path / name)
    both = analyze_traces(tmp_path, executor="process")
    assert isinstance(both, KinetoAnalysis)
    assert both.ranks == (0, 1)
    assert [t.rank for t in both.temporal] == [0, 1, None] and [o.rank for o in both.overlap] == [0, 1, None]
    singles = [analyze_traces(tmp_path / f"trace_filter__sampled_rank-{r}.json.gz", executor="serial")
               for r in (0, 1)]
    assert [t.rank for s in singles for t in s.temporal] == [0, 1]  # one rank: no all-ranks row
    every = both.temporal[-1]
    assert every.span_us == approx(sum(s.temporal[0].span_us for s in singles))
    assert every.idle_pct == approx(100 * sum(s.temporal[0].idle_us for s in singles) / every.span_us)
    ov = both.overlap[-1]
    assert ov.overlap_pct == approx(100 * sum(s.overlap[0].overlap_us for s in singles)
                                    / sum(s.overlap[0].communication_us for s in singles))
    # idle is never summed over streams: per-stream rows, and per-device rows whose idle fits in the span
    assert all(i.rank is not None and i.stream is not None for i in both.idle)
    for s in singles:
        device_idle = sum(i.idle_us for i in s.idle_device)
        assert device_idle == approx(s.temporal[0].idle_us) and device_idle <= s.temporal[0].span_us
    for kind_name in {k.kind for k in both.kernel_kinds}:
        merged = [k for k in both.kernel_kinds if k.rank is None and k.kind == kind_name]
        per_rank = [k for s in singles for k in s.kernel_kinds if k.kind == kind_name]
        assert merged[0].count == sum(k.count for k in per_rank)
        assert merged[0].total_us == approx(sum(k.total_us for k in per_rank))
    merged_ann = {a.name: a for a in both.annotations if a.rank is None}
    for name, a in merged_ann.items():
        assert a.gpu_us == approx(sum(x.gpu_us for s in singles for x in s.annotations if x.name == name))
    # the top-kernel table keeps 10 per (rank, kind) and folds the rest into "others" with the same total
    for s in singles:
        kinds = {(k.kind, k.total_us) for k in s.kernel_kinds}
        for kind_name, total in kinds:
            rows = [k for k in s.top_kernels if k.kind == kind_name and k.rank == s.ranks[0]]
            assert len([r for r in rows if r.name != "others"]) <= 10
            assert sum(r.total_us for r in rows) == approx(total)
    only_one = analyze_traces(tmp_path, ranks=[1], executor="serial")
    assert only_one.ranks == (1,)
    tables = only_one.to_rows()
    core = {"kineto_temporal", "kineto_kernel_kinds", "kineto_top_kernels", "kineto_idle", "kineto_overlap",
            "kineto_launch", "kineto_launch_outliers", "kineto_annotations", "kineto_health",
            "kineto_inputs", "kineto_idle_device", "kineto_sync", "kineto_profiler_overhead",
            "kineto_context"}
    from my_utils.profiling.kineto.registry import ANALYSES

    registered = {f"kineto_{t}" for a in ANALYSES for t in a.tables}
    assert core <= set(tables) and set(tables) - core <= registered  # the rest: tables of registered analyses
    json.dumps(tables, allow_nan=False)  # strict JSON: NaN became None
    assert all("sumsq_us2" not in row for row in tables["kineto_top_kernels"])
    with pytest.raises(InputError, match=r"rank\(s\) \[5\]"):
        analyze_traces(tmp_path, ranks=[5], executor="serial")


def test_bad_input_names_the_file_and_the_place(tmp_path: Path) -> None:
    bad = tmp_path / "cut.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 1, "dur": 2, "name": "k"}, {"ph": ')
    with pytest.raises(InputError, match=r"cut\.json:character \d+: .*truncated"):
        analyze_file(bad)
    wrong = tmp_path / "wrong.json"
    wrong.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": "soon", "dur": 2, "name": "k"}]}')
    with pytest.raises(InputError, match=r"wrong\.json:traceEvents\[0\]: 'ts' on a 'kernel' event as a finite number "
                                         r"\(µs\); found 'soon'"):
        analyze_file(wrong)
    with pytest.raises(InputError, match="no such file or folder"):
        analyze_traces(tmp_path / "absent")


@pytest.mark.slow
@pytest.mark.hta
@pytest.mark.parametrize("name", ["hta/trace_filter__sampled_rank-0.json.gz", "hta/nccl_parser_config__nccl_data.json.gz"])
def test_figures_agree_with_holistic_trace_analysis(real_fixtures: Any, tmp_path: Path, name: str) -> None:
    """Where our definitions are HTA's, HTA itself (a bench anchor, when installed) gives the same figures."""
    import logging
    import warnings

    path = real_fixtures / "kineto" / name
    (tmp_path / path.name).symlink_to(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # HTA's own deprecation noise is not ours to fail on
        logging.disable(logging.WARNING)
        try:
            from hta.trace_analysis import TraceAnalysis

            hta = TraceAnalysis(trace_dir=str(tmp_path), include_last_profiler_step=True)
            rank = next(iter(hta.t.traces))
            temporal = hta.get_temporal_breakdown(visualize=False).iloc[0]
            overlap = hta.get_comm_comp_overlap(visualize=False).iloc[0]
            idle = hta.get_idle_time_breakdown(ranks=[rank], visualize=False)[0]
            launch = hta.get_cuda_kernel_launch_stats(ranks=[rank], visualize=False)[rank]
        finally:
            logging.disable(logging.NOTSET)
    ours = analyze_file(path)

    # HTA truncates times to whole µs while these traces carry ns fractions: each activity's start
    # and end may move by under 1 µs, so a sum over n activities may differ by up to 2n µs
    n = sum(k.count for k in ours.kernel_kinds)

    def near(x: float, per_item: float = 2.0 * n) -> Any:
        return pytest.approx(x, abs=per_item + 1.0)

    t = ours.temporal
    assert (t.idle_us, t.compute_us, t.non_compute_us, t.span_us) == (
        near(temporal["idle_time(us)"]), near(temporal["compute_time(us)"]),
        near(temporal["non_compute_time(us)"]), near(temporal["kernel_time(us)"]))
    assert (t.idle_pct, t.compute_pct) == (pytest.approx(temporal["idle_time_pctg"], abs=1.0),
                                           pytest.approx(temporal["compute_time_pctg"], abs=1.0))
    assert ours.overlap.overlap_pct == pytest.approx(float(overlap["comp_comm_overlap_pctg"]), abs=1.0)
    for cat in ("host_wait", "kernel_wait", "other"):
        theirs = float(idle.loc[idle["idle_category"] == cat, "idle_time"].sum())
        assert sum(r.idle_us for r in ours.idle if r.category == cat) == near(theirs)
    assert ours.launch.launches == len(launch)
    assert ours.launch.delay_mean_us == near(float(launch["launch_delay"].mean()), 2.0)
    # "shorter than its launch" flips for a few pairs once both durations are cut to whole µs. HTA's launch rows
    # hold memcpy and memset launches too; ours counts kernels only (issue 33: copies are no kernels), so HTA's
    # rows are narrowed to the kernels' correlation ids, read from the trace itself
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        kernels = {e.get("args", {}).get("correlation") for e in json.load(fh)["traceEvents"]
                   if e.get("cat") == "kernel"}
    launched = launch[launch["correlation"].isin(kernels)]
    theirs_short = int(((launched["cpu_duration"] <= 50) & (launched["gpu_duration"] < launched["cpu_duration"])).sum())
    assert abs(ours.launch.short_kernels - theirs_short) <= 0.05 * len(launched)
