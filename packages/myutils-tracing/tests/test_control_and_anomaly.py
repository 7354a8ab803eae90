"""Beyond the seed, shown on the CPU with real torch.profiler traces: re-arming a running job
from a control file, and capturing the steps after an anomalously slow one (real MyTimer)."""

from __future__ import annotations

import gzip
import json
import logging
import time
from pathlib import Path
from typing import Any

import pytest

from my_utils.core.errors import UsageError
from my_utils.tracing.capture import (
    CaptureController,
    ProfileManager,
    RecordingBackend,
    StepTimeAnomalyDetector,
    TorchProfilerBackend,
    arm_on_anomaly,
)

torch = pytest.importorskip("torch")


def trace_annotations(path: Path) -> set[str]:
    doc = json.loads(gzip.decompress(path.read_bytes()))
    return {e["name"] for e in doc["traceEvents"] if e.get("cat") == "user_annotation"}


def train_step(model: Any, step: int) -> None:
    with torch.profiler.record_function(f"train_step_{step}"):
        model(torch.randn(4, 16)).sum().backward()


def test_control_file_rearms_a_running_job(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    control = tmp_path / "capture_control.yaml"
    backend = TorchProfilerBackend(output_dir=tmp_path / "traces")
    controller = CaptureController(backend, rank=0)
    watcher = controller.watch_control_file(control, every_n_steps=5)
    model = torch.nn.Linear(16, 8)
    with caplog.at_level(logging.INFO, logger="my_utils.tracing.capture"):
        for step in range(40):
            train_step(model, step)
            if step == 12:  # someone asks for a capture while the job runs
                control.write_text('windows:\n  - {name: look, start_iter: "+2", stop_iter: "+3"}\n')
            if step == 24:
                control.write_text("windows:\n  - {name: again, start_iter: 27, stop_iter: 27}\n")
            if step == 31:
                control.write_text("windows:\n  - {name: bad, start_iter: 35, stop_mb_selector: middle}\n")
            controller.on_step(step)
    traces = sorted(p.name for p in backend.traces)
    # read at step 15 (checks every 5 steps): "+2".."+3" -> steps 17-18
    assert traces == ["trace_rank0_steps17-18_look.pt.trace.json.gz", "trace_rank0_steps27-27_again.pt.trace.json.gz"]
    look = trace_annotations(backend.traces[0])
    assert {"train_step_17", "train_step_18"} <= look and not look & {"train_step_16", "train_step_19"}
    assert "train_step_27" in trace_annotations(backend.traces[1])
    # iterations 0..40 are seen (on_step(39) begins step 40): one stat() per 5 of them, one read per version
    assert watcher.checks == 9 and watcher.loads == 3
    assert "capture control file ignored" in caplog.text and "stop_mb_selector: got 'middle'" in caplog.text


def test_control_file_from_the_profile_config(tmp_path: Path) -> None:
    control = tmp_path / "ctl.json"
    control.write_text(json.dumps({"windows": [{"name": "j", "start_iter": 3}]}))
    pm = ProfileManager({"features": {"capture": {"backend": "recording", "control_file": str(control),
                                                  "control_check_every": 1}}})
    controller = pm.create_controller()
    for step in range(6):
        controller.on_step(step)
    assert isinstance(controller.backend, RecordingBackend)
    assert controller.backend.calls == ["start", "stop"]
    assert controller.backend.windows[0].info.origin == "control_file"


def test_anomalous_step_arms_a_capture_of_the_next_steps(tmp_path: Path) -> None:
    timer_mod = pytest.importorskip("my_utils.core.timer")
    timer = timer_mod.MyTimer(tag="train")
    backend = TorchProfilerBackend(output_dir=tmp_path)
    controller = CaptureController(backend, rank=0)
    # the floor keeps scheduler jitter on a loaded machine from opening extra windows
    trigger = arm_on_anomaly(timer, controller, next_steps=2, window=30, min_samples=8, min_excess_ms=100)
    model = torch.nn.Linear(16, 8)
    for step in range(26):
        timer.set_step(step)
        timer.start("iter")
        train_step(model, step)
        time.sleep(0.002)
        if step == 15:
            time.sleep(0.25)  # the anomaly
        timer.stop("iter")
        timer.step()
    steps = [a.step for a in trigger.anomalies]
    assert 15 in steps, trigger.anomalies
    anomaly = trigger.anomalies[steps.index(15)]
    assert anomaly.step_ms >= 250 and anomaly.step_ms > anomaly.threshold_ms
    path = next(p for p in backend.traces if p.name.endswith("_anomaly_step15.pt.trace.json.gz"))
    assert path.name == "trace_rank0_steps16-17_anomaly_step15.pt.trace.json.gz"
    seen = trace_annotations(path)
    assert {"train_step_16", "train_step_17"} <= seen and not seen & {"train_step_15", "train_step_18"}
    assert steps == [15]
    trigger.close()
    timer.set_step(99)
    timer.start("iter")
    time.sleep(0.3)
    timer.stop("iter")
    timer.step()  # detached: no longer feeds the controller
    assert [a.step for a in trigger.anomalies] == [15]
    assert controller.state.value == "idle"


def test_detector_uses_mean_plus_three_sigma_of_the_trailing_window() -> None:
    det = StepTimeAnomalyDetector(window=5, sigma=3.0, min_samples=3)
    assert det.observe(0, 1000.0) is None  # too few samples to judge
    for step, ms in enumerate([10.0, 12.0, 11.0, 9.0, 13.0], start=1):
        assert det.observe(step, ms) is None
    stats = det.threshold()  # window of 5 keeps the last five (1000 dropped)
    assert stats is not None
    mean, std, threshold = stats
    assert mean == pytest.approx(11.0) and std == pytest.approx(1.5811, abs=1e-4)
    assert threshold == pytest.approx(11.0 + 3 * 1.5811, abs=1e-3)
    hit = det.observe(9, threshold + 0.01)
    assert hit is not None and hit.step == 9
    assert det.threshold() == stats  # the spike did not enter the baseline
    assert det.observe(10, threshold - 0.01) is None


def test_arm_on_anomaly_rejects_misuse() -> None:
    controller = CaptureController(RecordingBackend())
    with pytest.raises(UsageError, match="no add_listener"):
        arm_on_anomaly(object(), controller)
    with pytest.raises(UsageError, match="next_steps=0"):
        arm_on_anomaly(object(), controller, next_steps=0)
    with pytest.raises(UsageError, match="min_samples"):
        StepTimeAnomalyDetector(window=3, min_samples=5)


def test_min_excess_floor_ignores_jitter_on_steady_steps() -> None:
    plain = StepTimeAnomalyDetector(window=10, sigma=3.0, min_samples=5)
    floored = StepTimeAnomalyDetector(window=10, sigma=3.0, min_samples=5, min_excess_ms=5.0)
    for step, ms in enumerate([10.0, 10.1, 9.9, 10.0, 10.1]):
        assert plain.observe(step, ms) is None and floored.observe(step, ms) is None
    jitter = plain.observe(5, 11.0)  # 3 sigma of this steady series is well under 1 ms
    assert jitter is not None and jitter.threshold_ms < 11.0
    assert floored.observe(5, 11.0) is None  # within 5 ms of the mean: not an anomaly
    spike = floored.observe(6, 16.0)
    learned = [10.0, 10.1, 9.9, 10.0, 10.1, 11.0]  # 11.0 was learned: it was not an anomaly
    assert spike is not None and spike.threshold_ms == pytest.approx(sum(learned) / 6 + 5.0)
    with pytest.raises(UsageError, match="min_excess_ms=-1"):
        StepTimeAnomalyDetector(min_excess_ms=-1)
