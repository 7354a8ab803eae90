"""TorchProfilerMetricsProvider on every real Kineto trace, checked against counts made here."""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from my_utils.core.errors import InputError, UnsupportedInputError
from my_utils.profiling.kineto.read.provider import TorchProfilerMetricsProvider, parse_trace_file
from my_utils.profiling.kineto.read.stream import TraceStream

KINETO = [
    "hta/call_stack__backward_thread.json",
    "hta/cpu_only__rank-34.pt.trace.json.gz",
    "hta/critical_path__alexnet_trace.json.gz",
    "hta/critical_path__event_sync_multi_stream.json.gz",
    "hta/cupti_profiler__counters_trace.json.gz",
    "hta/df_index_resolver.json.gz",
    "hta/critical_path__cuda_event_sync.json.gz",
    "hta/critical_path__simple_add.json.gz",
    "hta/distributed_info_not_found.json.gz",
    "hta/legacy_caps_cats__inference_rank_1.json.gz",
    "hta/mtia_inference_rank_0.json.gz",
    "hta/nccl_parser_config__nccl_data.json.gz",
    "hta/negative_queue_length__rank0.json.gz",
    "hta/rank_non_gpu.json.gz",
    "hta/trace_diff__control.json.gz",
    "hta/trace_diff__test.json.gz",
    "hta/trace_filter__sampled_rank-0.json.gz",
    "hta/trace_filter__sampled_rank-1.json.gz",
    "hta/triton_example.json.gz",
    "kineto_repo/after_fix_trace.json",
    "kineto_repo/before_fix_trace.json",
    "kineto_repo/resnet50_nw0_worker0.1623143089861.pt.trace.json.gz",
]
_BIG = {"hta/df_index_resolver.json.gz", "hta/negative_queue_length__rank0.json.gz",
        "hta/trace_diff__control.json.gz", "hta/trace_diff__test.json.gz",
        "kineto_repo/resnet50_nw0_worker0.1623143089861.pt.trace.json.gz"}


def _load(path: Path) -> Any:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        return json.load(fh)


def _params() -> list[Any]:
    return [pytest.param(name, marks=pytest.mark.slow) if name in _BIG else name for name in KINETO]


def test_every_kineto_fixture_is_listed(real_fixtures: Path) -> None:
    on_disk = {name.removeprefix("kineto/") for name in real_fixtures.names("kineto/")}
    assert on_disk == set(KINETO) | {"hta/memory_analysis__memory_timeline.raw.gz"}


@pytest.mark.parametrize("name", _params())
def test_trace_matches_independent_counts(real_fixtures: Path, name: str) -> None:
    path = real_fixtures / "kineto" / name
    doc = _load(path)
    raw = doc["traceEvents"]
    events = parse_trace_file(path)

    # every category counted, capitalised 2021 ones included
    counted = {e.attrs["category"]: e.value for e in events if e.name == "trace.events"}
    expected = Counter(ev.get("cat") if isinstance(ev.get("cat"), str) else "(none)" for ev in raw)
    assert counted == dict(expected)

    kernels = [ev for ev in raw if ev.get("cat") in ("kernel", "Kernel") and ev.get("ph") == "X"]
    assert sum(e.value for e in events if e.name == "gpu.kernel_count") == len(kernels)
    kernel_ms = sum(e.value for e in events if e.name.startswith("kernel:"))
    assert kernel_ms == pytest.approx(sum(ev.get("dur", 0) for ev in kernels) / 1e3, rel=1e-9, abs=1e-9)

    steps = sorted(int(m.group(1)) for ev in raw
                   if (m := re.fullmatch(r"ProfilerStep#(\d+)", str(ev.get("name", ""))))
                   and ev.get("cat") in ("cpu_op", "user_annotation", "Operator"))
    step_events = sorted(e.step for e in events if e.name == "step_time")
    assert step_events == sorted(set(steps))

    info = doc.get("distributedInfo") or {}
    if "rank" in info:
        assert {e.rank for e in events} == {info["rank"]}
        assert events[0].attrs["rank_source"] == "distributedInfo"
    else:
        m = re.search(r"(?:rank|worker)[-_]?(\d+)", path.name)
        assert {e.rank for e in events} == {int(m.group(1)) if m else None}

    for e in events:
        assert e.source == "torch_profiler"
        assert e.attrs["file"] == path.name


def test_kernels_follow_their_launch_into_steps(real_fixtures: Path) -> None:
    path = real_fixtures / "kineto/hta/trace_filter__sampled_rank-0.json.gz"
    raw = _load(path)["traceEvents"]
    steps = {int(ev["name"].split("#")[1]): (ev["ts"], ev["ts"] + ev["dur"]) for ev in raw
             if str(ev.get("name", "")).startswith("ProfilerStep#")}
    launch = {ev["args"]["correlation"]: ev["ts"] for ev in raw
              if ev.get("cat") == "cuda_runtime" and "correlation" in ev.get("args", {})}
    expected: Counter[int | None] = Counter()
    for ev in raw:
        if ev.get("cat") == "kernel":
            t = launch.get(ev["args"].get("correlation"), ev["ts"])
            expected[next((n for n, (a, b) in steps.items() if a <= t < b), None)] += 1
    got = {e.step: e.value for e in parse_trace_file(path) if e.name == "gpu.kernel_count"}
    assert got == dict(expected)
    assert len(got) >= 2  # both profiled steps hold kernels


def test_epoch_from_base_time(real_fixtures: Path) -> None:
    path = real_fixtures / "kineto/hta/cpu_only__rank-34.pt.trace.json.gz"
    doc = _load(path)
    step = next(ev for ev in doc["traceEvents"] if str(ev.get("name", "")).startswith("ProfilerStep#"))
    event = next(e for e in parse_trace_file(path) if e.name == "step_time")
    assert event.ts == pytest.approx(doc["baseTimeNanoseconds"] / 1e9 + step["ts"] / 1e6)
    assert event.value == pytest.approx(step["dur"] / 1e3)


def test_memory_timeline_is_refused(real_fixtures: Path) -> None:
    path = real_fixtures / "kineto/hta/memory_analysis__memory_timeline.raw.gz"
    with pytest.raises(UnsupportedInputError, match="not a trace"):
        TorchProfilerMetricsProvider.from_input(path).collect()


def test_mtia_trace_has_device_ops_and_no_cuda_kernels(real_fixtures: Path) -> None:
    path = real_fixtures / "kineto/hta/mtia_inference_rank_0.json.gz"
    raw = _load(path)["traceEvents"]
    events = parse_trace_file(path)
    n_ccp = sum(1 for ev in raw if ev.get("cat") == "mtia_ccp_events" and ev.get("ph") == "X")
    assert sum(e.attrs["count"] for e in events if e.name == "device.op_time") == n_ccp
    assert sum(e.attrs["count"] for e in events if e.name.startswith("device_op:")) == n_ccp
    assert not [e for e in events if e.name == "gpu.kernel_count"]


def _link(tmp: Path, target: Path, name: str) -> Path:
    link = tmp / name
    link.symlink_to(target)
    return link


def test_rank_pair_folder_in_processes(real_fixtures: Path, tmp_path: Path) -> None:
    for r in (0, 1):
        _link(tmp_path, real_fixtures / f"kineto/hta/trace_filter__sampled_rank-{r}.json.gz", f"rank{r}.json.gz")
    provider = TorchProfilerMetricsProvider.from_input(tmp_path, executor="process")
    events = provider.collect()
    assert {e.rank for e in events} == {0, 1}
    assert provider.collect() == []  # each file is read once
    serial = TorchProfilerMetricsProvider.from_input(tmp_path, executor="serial").collect()
    assert sorted(e.to_dict()["name"] for e in serial) == sorted(e.name for e in events)


def test_several_files_without_rank_are_not_merged(real_fixtures: Path, tmp_path: Path) -> None:
    _link(tmp_path, real_fixtures / "kineto/kineto_repo/before_fix_trace.json", "a.json")
    _link(tmp_path, real_fixtures / "kineto/kineto_repo/after_fix_trace.json", "b.json")
    with pytest.raises(InputError, match="resolve to no rank"):
        TorchProfilerMetricsProvider.from_input(tmp_path, executor="serial").collect()


def test_same_rank_twice_is_refused(real_fixtures: Path, tmp_path: Path) -> None:
    _link(tmp_path, real_fixtures / "kineto/hta/critical_path__alexnet_trace.json.gz", "x.json.gz")
    _link(tmp_path, real_fixtures / "kineto/hta/critical_path__event_sync_multi_stream.json.gz", "y.json.gz")
    with pytest.raises(InputError, match="resolve to rank 0"):
        TorchProfilerMetricsProvider.from_input(tmp_path, executor="serial").collect()


def test_new_files_in_a_folder_are_picked_up(real_fixtures: Path, tmp_path: Path) -> None:
    _link(tmp_path, real_fixtures / "kineto/hta/trace_filter__sampled_rank-0.json.gz", "rank0.json.gz")
    provider = TorchProfilerMetricsProvider.from_input(tmp_path)
    first = provider.collect()
    _link(tmp_path, real_fixtures / "kineto/hta/trace_filter__sampled_rank-1.json.gz", "rank1.json.gz")
    second = provider.collect()
    assert {e.rank for e in first} == {0} and {e.rank for e in second} == {1}


@pytest.mark.slow
def test_dask_local_cluster(real_fixtures: Path, tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    for r in (0, 1):
        _link(tmp_path, real_fixtures / f"kineto/hta/trace_filter__sampled_rank-{r}.json.gz", f"rank_{r}.json.gz")
    with distributed.LocalCluster(host="127.0.0.1", n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0", local_directory=str(tmp_path)) as cluster:  # never 8787
        events = TorchProfilerMetricsProvider.from_input(tmp_path, executor=cluster.scheduler_address).collect()
    local = TorchProfilerMetricsProvider.from_input(tmp_path, executor="serial").collect()
    assert sorted((e.rank, e.name, e.step, e.value) for e in events) == sorted(
        (e.rank, e.name, e.step, e.value) for e in local)


def test_stream_reports_truncation_with_place(real_fixtures: Path, tmp_path: Path) -> None:
    data = (real_fixtures / "kineto/kineto_repo/after_fix_trace.json").read_bytes()
    cut = tmp_path / "cut.json"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match=r"cut\.json:character \d+: traceEvents\[\d+\]"):
        list(TraceStream(cut).events())


def test_non_numeric_timestamp_names_the_event(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2},
        {"ph": "X", "cat": "kernel", "name": "k", "ts": "soon", "dur": 2},
    ]}))
    with pytest.raises(InputError, match=r"traceEvents\[1\].*'kernel'"):
        parse_trace_file(bad)
