"""capture.overhead: what torch.profiler cost per step, from a real capture's trace (torch on the CPU)."""

from __future__ import annotations

import gzip
import json
import statistics
from pathlib import Path
from typing import Any

import pytest

from my_utils.core.events import MetricEvent
from my_utils.profiling import MetricsAnalyzer

torch = pytest.importorskip("torch")


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def capture(tmp_path: Path, durations: list[float], start: int, stop: int) -> Path:
    """A real TorchProfilerBackend window over steps start..stop; step ``i`` lasts ``durations[i]`` ms (a
    hand-moved clock, so the expected figures are known exactly)."""
    from my_utils.tracing.capture import CaptureController, TorchProfilerBackend
    from my_utils.tracing.capture.spec import CaptureSpec
    from my_utils.tracing.capture.step_clock import StepClock

    clock = FakeClock()
    backend = TorchProfilerBackend(output_dir=tmp_path / "traces")
    controller = CaptureController(backend, rank=0)
    controller.steps = StepClock(clock)
    controller.arm(CaptureSpec("w", start, 0, stop, 0))
    model = torch.nn.Linear(4, 4)
    for it, ms in enumerate(durations):
        with controller.region("step", {"iter": it, "mb": 0}):
            model(torch.randn(2, 4)).sum().backward()
            clock.now += ms / 1e3
        controller.on_step(it)
    controller.close()
    (path,) = backend.traces
    return path


def fact(report: Any) -> Any:
    return next(f for f in report.facts if f.id == "capture.overhead")


def test_a_measurable_cost_with_its_interval(tmp_path: Path) -> None:
    # warm-up 50 ms; outside ~10 ms; inside (steps 21-28) ~13 ms; steps 20 and 29 hold the start/stop
    outside = [10.0, 10.4, 9.8, 10.1, 9.9, 10.3, 10.0, 9.7, 10.2, 10.0] * 2
    inside = [13.1, 12.8, 13.0, 13.3, 12.9, 13.2, 13.0, 12.7]
    durations = [50.0, *outside[:19], 40.0, *inside, 40.0]
    trace = capture(tmp_path, durations, 20, 29)
    f = fact(MetricsAnalyzer([], traces=[trace]).analyze())
    med_out, med_in = statistics.median(outside[:19]), statistics.median(inside)  # warm-up step 0 left out
    assert f.value == pytest.approx(100 * (med_in - med_out) / med_out, rel=1e-6)
    assert f.denominator_value == pytest.approx(med_out) and f.steps == 19 + 8
    est = f.evidence[0].values
    assert est["within_noise"] is False and 0 < est["interval_low_ms"] <= med_in - med_out <= est["interval_high_ms"]
    assert "above the noise" in f.detail and f.source == "the capture windows' step record"


def test_no_difference_is_said_to_be_within_noise(tmp_path: Path) -> None:
    same = [10.0, 12.0, 9.0, 11.0, 10.5, 9.5, 11.5, 10.2, 9.8, 12.5, 8.5, 10.0]
    trace = capture(tmp_path, [30.0, *same, 30.0, *same[:6], 30.0], 13, 20)
    f = fact(MetricsAnalyzer([], traces=[trace]).analyze())
    assert f.evidence[0].values["within_noise"] is True and "within noise" in f.detail


def test_too_few_steps_is_not_measured(tmp_path: Path) -> None:
    trace = capture(tmp_path, [10.0, 10.0, 10.0, 11.0, 11.0], 1, 3)
    f = fact(MetricsAnalyzer([], traces=[trace]).analyze())
    assert not f.measured and "at least 2 and 3 needed" in f.value.reason


def test_mytimer_steps_are_split_by_the_windows_when_the_trace_has_no_record(tmp_path: Path) -> None:
    trace = capture(tmp_path, [10.0] * 12, 4, 9)
    doc = json.loads(gzip.decompress(trace.read_bytes()))
    del doc["otherData"]["myutils_capture"]["steps"]  # a trace written before the record existed
    old = tmp_path / "old_rank0.pt.trace.json.gz"
    old.write_bytes(gzip.compress(json.dumps(doc).encode()))
    times = {s: (20.0 if 5 <= s <= 8 else 10.0 + 0.1 * (s % 3)) for s in range(1, 30)}
    events = [MetricEvent(name="step_time", value=v, kind="duration", unit="ms", source="mytimer", rank=0, step=s)
              for s, v in times.items()]
    f = fact(MetricsAnalyzer(events, traces=[old]).analyze())
    window = doc["otherData"]["myutils_capture"]
    first, last = window["first_step"], window["last_step"]
    ins = [v for s, v in times.items() if first < s < last]
    outs = [v for s, v in times.items() if s >= 2 and not first <= s <= last]  # step 1 is the run's warm-up
    assert f.value == pytest.approx(100 * (statistics.median(ins) - statistics.median(outs)) / statistics.median(outs))
    assert "mytimer step times split by the capture windows" in f.source


def test_a_trace_without_a_my_utils_capture_has_no_such_fact(real_fixtures: Any) -> None:
    report = MetricsAnalyzer([], traces=[real_fixtures / "kineto/hta/cpu_only__rank-34.pt.trace.json.gz"]).analyze()
    assert not any(f.id == "capture.overhead" for f in report.facts)


def test_the_run_section_shows_it(tmp_path: Path) -> None:
    from my_utils.profiling.reports.render import render_text

    trace = capture(tmp_path, [50.0] + [10.0, 10.5, 9.5] * 5 + [30.0] + [14.0, 13.5, 14.5] * 2 + [30.0], 16, 23)
    report = MetricsAnalyzer([], traces=[trace]).analyze()
    run = render_text(report, "markdown").split("## Run", 1)[1].split("## Findings", 1)[0]
    assert "**profiling cost per step (inside capture windows vs outside)**: 40.0%" in run
    assert "above the noise" in run
