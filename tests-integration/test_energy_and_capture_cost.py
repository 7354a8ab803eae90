"""From a real run to the report: the monitor's step energy (myutils-memory), a capture window (myutils-tracing)
and the analysis (myutils-profiling), with the figures recomputed here from the files."""

from __future__ import annotations

import gzip
import json
import statistics
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")


def test_energy_per_step_and_per_window_from_the_samples_file(tmp_path: Path) -> None:
    from my_utils.core.timer import MyTimer
    from my_utils.memory.samples_file import Sample, SamplesWriter
    from my_utils.memory.samples_provider import MonitorSamplesMetricsProvider
    from my_utils.profiling import MetricsAnalyzer
    from my_utils.tracing.capture import CaptureController, TorchProfilerBackend
    from my_utils.tracing.capture.spec import CaptureSpec

    # a monitor that samples a 200 W GPU every 10 ms (the energy counter as NVML's, in J), following the timer
    samples = tmp_path / "mon_rank0_samples.jsonl"
    writer = SamplesWriter(samples, {"prefix": "mon", "rank": 0, "energy_method": "nvml_total_energy"})
    start = time.time()
    timer = MyTimer(tag="t")
    timer.add_listener(lambda step, regions: writer.step(time.time(), step))
    backend = TorchProfilerBackend(output_dir=tmp_path / "traces")
    controller = CaptureController(backend, rank=0)
    controller.arm(CaptureSpec("w", 6, 0, 9, 0))
    model = torch.nn.Linear(16, 16)
    for step in range(14):
        timer.set_step(step)
        with timer.region("iter"), controller.region("iter", {"iter": step, "mb": 0}):
            end = time.time() + 0.03
            while time.time() < end:
                model(torch.randn(8, 16))
                now = time.time()
                writer.sample(Sample(now, now - start, {"energy_j": 200.0 * (now - start)}))
        timer.step()
        controller.on_step(step)
    now = time.time()
    writer.sample(Sample(now + 0.01, now + 0.01 - start, {"energy_j": 200.0 * (now + 0.01 - start)}))
    writer.close()
    controller.close()
    events = MonitorSamplesMetricsProvider.from_input(samples).collect()
    report = MetricsAnalyzer(events, traces=backend.traces).analyze()
    facts = {f.id: f for f in report.facts}
    # recomputed here: a step's energy is 200 W times the time between its end and the previous step's end
    ends = {o["step"]: o["ts"] for o in map(json.loads, samples.read_text().splitlines()[1:]) if "step" in o}
    joules = {s: 200.0 * (ends[s] - ends[s - 1]) for s in range(1, 14)}
    per_step = facts["energy.per_step"]
    assert per_step.value == pytest.approx(statistics.fmean(joules.values()), rel=1e-3)
    assert "200.0 W mean" in per_step.detail and "NVML's total-energy counter" in per_step.detail
    window = json.loads(gzip.decompress(backend.traces[0].read_bytes()))["otherData"]["myutils_capture"]
    held = [s for s in joules if window["first_step"] <= s <= window["last_step"]]
    assert facts["energy.capture_window"].value == pytest.approx(statistics.fmean(joules[s] for s in held), rel=1e-3)
    assert "capture.overhead" in facts  # measured or not, a report with a capture says what profiling cost
