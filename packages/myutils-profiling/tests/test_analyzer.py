"""MetricsAnalyzer end to end: real traces ingested into events, streaming, rule plugins, overhead, workloads."""

from __future__ import annotations

import gzip
import json
import random
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from my_utils.core.events import MetricEvent, read_events, write_events
from my_utils.profiling.analysis import AnalysisReport, MetricsAnalyzer
from my_utils.profiling.analysis.workloads import WORKLOADS, get_workload
from my_utils.profiling.model.scores import PENALTY, compute_scores

CONTROL = "kineto/hta/trace_diff__control.json.gz"  # rank 3 of 8, ProfilerStep#1009..1014


def _ingest(trace: Path, out: Path) -> Path:
    from my_utils.profiling import TorchProfilerMetricsProvider

    events = TorchProfilerMetricsProvider.from_input(trace).collect(None)
    path = out / "metrics_events.jsonl"
    write_events(path, events)
    return path


def _raw(trace: Path) -> list[dict[str, Any]]:
    with gzip.open(trace, "rt") as fh:
        events: list[dict[str, Any]] = json.load(fh)["traceEvents"]
    return events


@pytest.fixture(scope="module")
def control_report(real_fixtures: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, AnalysisReport]:
    trace = real_fixtures / CONTROL
    events = _ingest(trace, tmp_path_factory.mktemp("control"))
    return trace, MetricsAnalyzer(events, "pretrain").analyze()


def test_real_trace_steps_and_rank_come_from_the_trace(control_report: tuple[Path, AnalysisReport]) -> None:
    trace, report = control_report
    raw = _raw(trace)
    steps = {int(e["name"].split("#")[1]): e["dur"] / 1e3 for e in raw if str(e.get("name", "")).startswith("ProfilerStep#")}
    rows = {r["step"]: r["step_time"] for r in report.tables["steps"]}
    assert rows == pytest.approx(steps)
    assert report.summary["ranks"] == [3]  # distributedInfo.rank, never a rank-0 assumption
    assert {r["rank"] for r in report.tables["steps"]} == {3}
    assert report.summary["steps"] == {"count": 6, "first": 1009, "last": 1014}


def test_real_trace_bottlenecks_match_hand_computed_device_shares(control_report: tuple[Path, AnalysisReport]) -> None:
    trace, report = control_report
    raw = _raw(trace)
    spans = [(e["ts"], e["ts"] + e["dur"]) for e in raw if str(e.get("name", "")).startswith("ProfilerStep#")]
    launch_ts = {e["args"]["correlation"]: e["ts"] for e in raw
                 if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}
    device: dict[str, float] = {}
    prefix = {"kernel": "kernel:", "gpu_memcpy": "memcpy:", "gpu_memset": "memset:"}
    for e in raw:  # a device event counts when the runtime call that launched it lies in a step
        if e.get("cat") in prefix and e.get("ph") == "X":
            t = launch_ts.get(e.get("args", {}).get("correlation"))
            if t is not None and any(a <= t < b for a, b in spans):
                key = prefix[e["cat"]] + e["name"]
                device[key] = device.get(key, 0.0) + e["dur"]
    total = sum(device.values())
    expected = {k: v / total for k, v in device.items() if v / total > 0.10}
    from my_utils.core.testing.contract import check_analysis_rule

    rule_findings = check_analysis_rule("bottleneck", read_events(report.inputs["events_file"]))
    found = {f["evidence"]["names"][0]: f["evidence"]["share"] for f in rule_findings
             if f["evidence"]["of"] == "summed GPU activity time"}
    assert found == pytest.approx(expected, abs=1e-3)
    assert any(k.startswith("kernel:nccl") for k in found)  # communication dominates this rank's GPU
    # in the report, a communication kernel's bottleneck is folded into the communication finding (one per fact)
    shown = {f.id for f in report.findings} | {m for f in report.findings for m in f.evidence.get("merged", [])}
    assert {f"bottleneck:{k}" for k in found} <= shown


def test_real_trace_report_is_complete_and_round_trips(control_report: tuple[Path, AnalysisReport]) -> None:
    _, report = control_report
    assert report.workload == "pretrain" and set(report.scores) >= {"overall", "performance", "stability"}
    assert report.summary["rule_errors"] == [] and len(report.summary["rules"]) >= 5
    for f in report.findings:
        assert f.evidence.get("names") and f.evidence.get("ranks"), f.id  # every finding names its proof
        assert f.advice and all(a.because for a in f.advice), f.id  # and the rows its advice rests on
    # a Kineto-only run: no MyTimer overhead section, the profiler's own cost stated or "not measured"
    assert "pair_cost_us" not in report.overhead
    assert [i["instrument"] for i in report.overhead["instruments"]] == ["torch.profiler"]
    again = AnalysisReport.from_json(report.to_json())
    assert again.to_dict() == json.loads(report.to_json())
    from my_utils.profiling.analysis.ranking import rank_key

    assert [rank_key(f) for f in report.findings] == sorted(rank_key(f) for f in report.findings)


def test_events_are_streamed_into_cells(tmp_path: Path) -> None:
    """20,000 raw events fold into 400 cells; the analyzer never holds the events."""
    path = tmp_path / "metrics_events.jsonl"
    with path.open("w") as fh:
        for step in range(20):
            for rank in range(2):
                for i in range(500):  # 50 calls per step of 10 names
                    fh.write(json.dumps({"name": f"op{i % 10}", "value": 1.0 + i % 10, "kind": "duration",
                                         "unit": "ms", "source": "mytimer", "rank": rank, "step": step}) + "\n")
    analyzer = MetricsAnalyzer(path)
    tracemalloc.start()
    agg = analyzer.aggregate()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert agg.events == 20_000 and len(agg.cells) == 20 * 2 * 10
    assert peak < 2 * 2**20  # the events as objects would take over 10 MB
    assert agg.cell(("op3", 7, 1, "mytimer")) == (50, 200.0, 4.0, 4.0)


def test_a_failing_rule_is_reported_and_the_others_still_run(tmp_path: Path) -> None:
    events = [MetricEvent("step_time", 10.0 + s, "duration", "ms", "x", 0, s) for s in range(10)]
    events += [MetricEvent("forward", 8.0, "duration", "ms", "x", 0, s) for s in range(10)]
    report = MetricsAnalyzer(events, rules=["bottleneck", "no_such_rule"],
                             rule_options={"bottleneck": {"share": 2.0}}).analyze()
    errors = {e["rule"]: e["error"] for e in report.summary["rule_errors"]}
    assert set(errors) == {"bottleneck", "no_such_rule"} and "share" in errors["bottleneck"]
    report = MetricsAnalyzer(events, rules=["bottleneck", "no_such_rule"]).analyze()
    assert [f.id for f in report.findings] == ["bottleneck:forward"]
    assert report.summary["rules"] == ["bottleneck"]


def test_workload_profiles_change_thresholds_not_code() -> None:
    rng = random.Random(7)
    events = []
    for s in range(40):
        fwd = 50 * rng.uniform(0.75, 1.25)  # robust CV about 0.18: surely between inference (0.10) and finetune (0.25)
        events += [MetricEvent("forward", fwd, "duration", "ms", "mytimer", 0, s, attrs={"depth": 0}),
                   MetricEvent("step_time", fwd + 50, "duration", "ms", "mytimer", 0, s)]
    ids = {w: {f.id for f in MetricsAnalyzer(events, w).analyze().findings} for w in WORKLOADS}
    unstable = "variability:mytimer:forward:rank0"
    assert unstable in ids["inference"] and unstable not in ids["finetune"]
    assert get_workload("inference").options_for("variability")["cv"] < get_workload("finetune").options_for(
        "variability")["cv"]
    with pytest.raises(Exception, match="pretrain"):
        get_workload("training")


def test_overhead_counts_mytimer_regions_per_step() -> None:
    events = []
    for s in range(5):
        for name in ("data", "forward", "backward"):
            events.append(MetricEvent(name, 10.0, "duration", "ms", "mytimer", 0, s, attrs={"depth": 0}))
        events.append(MetricEvent("attention", 4.0, "duration", "ms", "mytimer", 0, s, attrs={"depth": 1}))
        events.append(MetricEvent("attention", 4.0, "duration", "ms", "mytimer", 0, s, attrs={"depth": 1}))
        events.append(MetricEvent("step_time", 30.0, "duration", "ms", "mytimer", 0, s))
    overhead = MetricsAnalyzer(events).analyze().overhead
    assert overhead["regions_per_step"] == 5.0
    assert overhead["per_step_ms"] == pytest.approx(5 * overhead["pair_cost_us"] / 1e3, rel=1e-3)
    assert overhead["share_of_step_time"] == pytest.approx(overhead["per_step_ms"] / 30.0, rel=1e-3)


def test_scores_follow_the_documented_formula() -> None:
    from my_utils.profiling.model.report import Finding

    fs = [Finding("a", "bottleneck", "critical", "t", ""), Finding("b", "variability", "warning", "t", ""),
          Finding("c", "memory", "info", "t", ""), Finding("d", "third_party", "warning", "t", "")]
    scores = compute_scores(fs, ["performance", "stability", "memory"])
    assert scores["performance"] == 100 - PENALTY["critical"] - PENALTY["warning"]  # two categories
    assert scores["stability"] == 90 and scores["memory"] == 98
    assert scores["overall"] == round((65 + 90 + 98) / 3, 1)
    assert "capture" not in scores  # no data for it: not a perfect score either
    # one category: its worst finding, then 2 points per further finding, at most 5 of them
    many = [Finding(f"b{i}", "bottleneck", "warning", "t", "") for i in range(9)] + fs[:1]
    assert compute_scores(many, ["performance"])["performance"] == 100 - PENALTY["critical"] - 2 * 5


def test_empty_events_give_an_empty_report(tmp_path: Path) -> None:
    path = tmp_path / "metrics_events.jsonl"
    path.write_text("")
    report = MetricsAnalyzer(path).analyze()
    assert report.findings == [] and report.summary["events"] == 0
    assert report.scores == {}  # nothing measured: no score at all, never a reassuring 100
    assert all(d["score"] is None and d["not_measured"] for d in report.dimensions.values())


def test_kineto_tables_join_the_report_from_traces_found_beside_the_events(real_fixtures: Any,
                                                                          tmp_path: Path) -> None:
    import shutil

    trace = real_fixtures / "kineto/hta/critical_path__alexnet_trace.json.gz"
    shutil.copy(trace, tmp_path / trace.name)
    events = _ingest(tmp_path / trace.name, tmp_path)
    report = MetricsAnalyzer(events).analyze()  # no traces given: found by the file name in the events
    assert report.summary["kineto"] == "Kineto analyses of 1 trace file(s)"
    assert {"kineto_temporal", "kineto_health", "kineto_top_kernels"} <= set(report.tables)
    bad = {r["check"] for r in report.tables["kineto_health"] if r["status"] != "ok"}
    capture = {f.evidence["names"][0] for f in report.findings if f.category == "capture"}
    assert capture == bad and "profiler_steps" in capture  # this trace has no ProfilerStep markers
    assert "capture" in report.scores and report.scores["capture"] < 100
    alone = MetricsAnalyzer(events, traces=[]).analyze()  # told there are none: no Kineto part
    assert not any(k.startswith("kineto_") for k in alone.tables) and "capture" not in alone.scores


_EVENTS = st.builds(
    MetricEvent,
    name=st.sampled_from(["step_time", "forward", "kernel:gemm", "memory.allocated", "cpu_op:aten::mm", "x"]),
    value=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**6, 10**6)),
    kind=st.sampled_from(["duration", "counter", "gauge", "ratio", "info"]),
    unit=st.sampled_from(["ms", "bytes", ""]),
    source=st.sampled_from(["mytimer", "torch_profiler", ""]),
    rank=st.one_of(st.none(), st.integers(0, 3)),
    step=st.one_of(st.none(), st.integers(0, 30)),
    attrs=st.one_of(st.just({}), st.fixed_dictionaries({"depth": st.integers(0, 2)})),
)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.lists(_EVENTS, max_size=80))
@example([MetricEvent("step_time", 0.0, "duration", "ms", "mytimer", None, 1),  # statistics.pstdev overflowed here
          MetricEvent("step_time", 2.68e154, "duration", "ms", "mytimer", None, 0)])
def test_any_events_give_a_valid_report_and_no_rule_error(events: list[MetricEvent]) -> None:
    report = MetricsAnalyzer(events, traces=[]).analyze()
    assert report.summary["rule_errors"] == []
    text = report.to_json()  # strict JSON: NaN and infinities become null
    assert AnalysisReport.from_json(text).findings == report.findings
    assert all(0.0 <= v <= 100.0 for v in report.scores.values())


def _long_run(path: Path, steps: int, spike_step: int, leak_step: int) -> list[float]:
    """One rank: step time 10 ms with one 500 ms spike, memory flat then jumping by 1 GB; returns the step times."""
    rng = random.Random(3)
    times = [10.0 + rng.random() for _ in range(steps)]
    times[spike_step] = 500.0
    events: list[MetricEvent] = []
    for step, value in enumerate(times):
        events.append(MetricEvent("step_time", value, "duration", "ms", "mytimer", 0, step))
        events.append(MetricEvent("forward", value * 0.6, "duration", "ms", "mytimer", 0, step, attrs={"depth": 0}))
        memory = 2e9 + (1e9 if step >= leak_step else 0.0) + rng.random()
        events.append(MetricEvent("memory.allocated", memory, "gauge", "bytes", "mytimer", 0, step))
    write_events(path, events)
    return times


def test_long_runs_keep_bounded_step_and_memory_tables_where_spikes_survive(tmp_path: Path) -> None:
    from my_utils.profiling.analysis.analyzer import MAX_SERIES_ROWS

    steps = 3 * MAX_SERIES_ROWS + 7
    path = tmp_path / "metrics_events.jsonl"
    times = _long_run(path, steps, spike_step=1234, leak_step=2000)
    report = MetricsAnalyzer(path).analyze()
    rows = report.tables["steps"]
    assert len(rows) <= MAX_SERIES_ROWS and len(report.tables["memory"]) <= MAX_SERIES_ROWS
    kept = {r["step"]: r["step_time"] for r in rows}
    assert kept[1234] == 500.0 and all(times[s] == v for s, v in kept.items())  # real points, the spike among them
    assert [r["step"] for r in rows] == sorted(kept)  # in step order, each once
    assert kept[min(kept)] == times[min(kept)] and max(kept) >= steps - steps // (MAX_SERIES_ROWS // 2)
    assert all(r["regions"] == pytest.approx(times[r["step"]] * 0.6) for r in rows)
    memory = {r["step"]: r["value"] for r in report.tables["memory"]}
    assert max(memory.values()) > 3e9 > 2.5e9 > min(memory.values())  # both levels shown
    limits = report.summary["table_limits"]
    assert limits["steps"] == {"series": 1, "series_downsampled": 1, "points": steps, "rows": len(rows),
                               "max_rows_per_series": MAX_SERIES_ROWS, "method": limits["steps"]["method"]}
    # the rules and the other tables still saw every step
    assert report.tables["ranks"][0]["steps"] == steps
    assert report.summary["step_time"]["mytimer:rank0"]["max"] == 500.0
    assert any("1234" in json.dumps(f.evidence) + f.detail for f in report.findings if f.category == "anomaly")
    # exactly what was planted: the spike (explained by forward, not a second finding) and forward's 60 %;
    # the one-time memory jump is a new level, not a growing leak
    assert {f.id for f in report.findings} == {"anomaly:mytimer:step_time:rank0", "bottleneck:forward"}
    assert json.loads(report.to_json())["summary"]["table_limits"]["memory"]["series_downsampled"] == 1


def test_short_runs_keep_every_row(tmp_path: Path) -> None:
    path = tmp_path / "metrics_events.jsonl"
    _long_run(path, 50, spike_step=7, leak_step=25)
    report = MetricsAnalyzer(path).analyze()
    assert [r["step"] for r in report.tables["steps"]] == list(range(50))
    assert report.summary["table_limits"]["steps"]["series_downsampled"] == 0


def test_rules_get_a_sequence_that_rebuilds_the_same_events(tmp_path: Path) -> None:
    path = tmp_path / "metrics_events.jsonl"
    _long_run(path, 20, spike_step=3, leak_step=10)
    agg = MetricsAnalyzer(path).aggregate()
    events = agg.aggregated()
    as_list = list(events)
    assert len(events) == len(as_list) == 60 and list(events) == as_list  # every pass gives the same events
    assert events[0] == as_list[0] and events[-1] == as_list[-1] and events[2:5] == as_list[2:5]
    with pytest.raises(IndexError, match="out of range"):
        events[60]
    from_objects = MetricsAnalyzer(read_events(path))  # MetricEvents fold into the same cells as rows
    assert list(from_objects.aggregate().aggregated()) == as_list
