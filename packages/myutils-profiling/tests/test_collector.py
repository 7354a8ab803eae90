"""MetricsCollector: stamping, one append per collect, failures that must not stop training."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from my_utils.core.errors import InputError, UsageError
from my_utils.profiling import AnalysisReport, MetricEvent, MetricsCollector, read_events


class _Counter:
    name = "counter"

    def __init__(self) -> None:
        self.n = 0

    def collect(self, step: int | None = None) -> Sequence[MetricEvent]:
        self.n += 1
        return [MetricEvent(name="calls", value=self.n, kind="counter"),
                MetricEvent(name="fixed", value=1.0, step=99, rank=7, source="other")]


class _Broken:
    name = "broken"

    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    def collect(self, step: int | None = None) -> Sequence[MetricEvent]:
        raise self.exc


def test_collect_stamps_and_appends(tmp_path: Path) -> None:
    collector = MetricsCollector(tmp_path / "out", run_id="r1", rank=2)
    collector.register_provider(_Counter())
    for step in (0, 100):
        collector.collect(step=step)
    events = read_events(collector.events_path)
    assert [(e.name, e.value, e.step, e.rank, e.source, e.run_id) for e in events] == [
        ("calls", 1.0, 0, 2, "counter", "r1"), ("fixed", 1.0, 99, 7, "other", "r1"),
        ("calls", 2.0, 100, 2, "counter", "r1"), ("fixed", 1.0, 99, 7, "other", "r1")]
    collector.close()


def test_torn_last_line_is_tolerated(tmp_path: Path) -> None:
    collector = MetricsCollector(tmp_path, run_id="r")
    collector.register_provider(_Counter())
    collector.collect(1)
    collector.close()
    with open(collector.events_path, "a", encoding="utf-8") as fh:
        fh.write('{"name": "half", "val')
    assert [e.name for e in read_events(collector.events_path)] == ["calls", "fixed"]


def test_environment_failure_is_logged_once_and_skipped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    collector = MetricsCollector(tmp_path)
    collector.register_provider(_Broken(RuntimeError("NVML gone")))
    collector.register_provider(_Counter())
    with caplog.at_level(logging.WARNING, logger="my_utils.profiling.collector"):
        collector.collect(1)
        collector.collect(2)
    assert [r.getMessage() for r in caplog.records].count(
        "metrics provider broken failed and was skipped: RuntimeError: NVML gone") == 1
    assert len(read_events(collector.events_path)) == 4


def test_bad_input_raises_and_writes_nothing(tmp_path: Path) -> None:
    collector = MetricsCollector(tmp_path)
    collector.register_provider(_Counter())
    collector.register_provider(_Broken(InputError("x.csv", "line 3", "a number")))
    with pytest.raises(InputError, match=r"x\.csv:line 3"):
        collector.collect(1)
    assert not collector.events_path.exists()


def test_register_misuse(tmp_path: Path) -> None:
    collector = MetricsCollector(tmp_path)
    with pytest.raises(UsageError, match="has no collect"):
        collector.register_provider(object())
    p = collector.register_provider(_Counter())
    with pytest.raises(UsageError, match="already registered"):
        collector.register_provider(p)
    with pytest.raises(UsageError, match="expected one of 'html', 'markdown' or 'json'"):
        collector.export_report(fmt="pdf")


def test_seed_usage_with_real_timer(tmp_path: Path) -> None:
    from my_utils.core.timer import MyTimer
    from my_utils.profiling import MyTimerMetricsProvider

    your_timer = MyTimer(use_cuda=False, tag="seed")
    collector = MetricsCollector(output_dir=str(tmp_path / "profiling_results"))
    collector.register_provider(MyTimerMetricsProvider(your_timer))
    for step in range(250):
        your_timer.set_step(step)
        your_timer.start("train_step")
        your_timer.stop("train_step")
        your_timer.step()
        if step % 100 == 0:
            collector.collect(step=step)
    collector.collect(step=250)
    events = read_events(tmp_path / "profiling_results" / "metrics_events.jsonl")
    assert sorted(e.step for e in events if e.name == "train_step") == list(range(250))
    # the seed's quick start, as written: analyze() then export_report(fmt=..., report=...)
    report = collector.analyze()
    assert report.summary["steps"]["count"] == 250 and report.findings is not None
    assert report.overhead["regions_per_step"] == 1.0 and "training host" in report.overhead["calibrated_on"]
    assert report.hardware["cpu_count"] and report.workload == "pretrain" and "host" not in report.hardware
    assert report.inputs["analyzed_with"]["myutils_profiling"]
    path = collector.export_report(fmt="json", report=report)
    assert path == tmp_path / "profiling_results" / "analysis_report.json"
    assert AnalysisReport.load(path).to_dict() == json.loads(report.to_json())


def test_analyze_finds_a_slow_region_and_a_leak_in_a_live_run(tmp_path: Path) -> None:
    from my_utils.core.timer import MyTimer
    from my_utils.profiling import MyTimerMetricsProvider

    class _Memory:  # a live provider of a growing memory level
        name = "memory"

        def collect(self, step: int | None = None) -> list[MetricEvent]:
            return [MetricEvent("memory.allocated", 1e8 + 1e6 * (step or 0), "gauge", "bytes", step=step)]

    timer = MyTimer(use_cuda=False)
    collector = MetricsCollector(tmp_path, rank=0)
    collector.register_provider(MyTimerMetricsProvider(timer))
    collector.register_provider(_Memory())
    for step in range(20):
        timer.set_step(step)
        timer.start("data")
        timer.stop("data")
        timer.start("slow_op")
        time.sleep(0.004)
        timer.stop("slow_op")
        timer.step()
        collector.collect(step)
    report = collector.analyze(workload="inference")
    ids = {f.id for f in report.findings}
    assert "bottleneck:slow_op" in ids and "memory_growth:memory:memory.allocated:rank0" in ids
    leak = next(f for f in report.findings if f.category == "memory")
    assert leak.evidence["step_range"] == [0, 19] and leak.evidence["slope_per_step"] == pytest.approx(1e6)
    assert set(report.scores) == {"overall", "performance", "stability", "memory"}
    assert collector.last_report is report


def test_read_all_fails_on_any_provider_failure_naming_it(tmp_path: Path) -> None:
    from my_utils.core.errors import ProviderError

    collector = MetricsCollector(tmp_path)
    collector.register_provider(_Counter())
    collector.register_provider(_Broken(RuntimeError("NVML gone")))
    with pytest.raises(ProviderError, match="metrics provider 'broken' failed: RuntimeError: NVML gone"):
        collector.read_all()
    assert collector.failures == [] and not collector.events_path.exists()


def test_ignore_provider_errors_skips_says_once_and_records(tmp_path: Path,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    collector = MetricsCollector(tmp_path, ignore_provider_errors=True)
    collector.register_provider(_Broken(InputError("x.csv", "line 3", "a number")))
    collector.register_provider(_Broken(RuntimeError("boom")))
    collector.register_provider(_Counter())
    with caplog.at_level(logging.WARNING, logger="my_utils.profiling.collector"):
        events = collector.read_all()
        collector.collect(1)  # the skipped providers are gone: no second warning
    assert [e.name for e in events] == ["calls", "fixed"]
    assert [(f.provider, f.place) for f in collector.failures] == [("broken", "provider #0"),
                                                                   ("broken", "provider #0")]
    assert "x.csv:line 3: a number" in collector.failures[0].reason
    assert "RuntimeError: boom" in collector.failures[1].reason
    assert [r.getMessage().split(":")[0] for r in caplog.records] == ["skipped provider #0 (broken)"] * 2
    assert len(collector.providers) == 1


def test_bad_input_in_a_live_loop_still_raises(tmp_path: Path) -> None:
    # a corrupt file is bad input in the training loop too; only environment trouble degrades
    collector = MetricsCollector(tmp_path)
    collector.register_provider(_Broken(InputError("trace.json", "character 9", "a JSON value")))
    with pytest.raises(InputError, match=r"trace\.json"):
        collector.collect(3)
