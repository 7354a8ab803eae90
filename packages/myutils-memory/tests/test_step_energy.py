"""Energy per step: step ends in the samples file, energy between them (hand data and a real tracker)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from my_utils.core.errors import InputError
from my_utils.memory.samples_file import Sample, SamplesWriter, StepMark, read_samples, read_samples_file
from my_utils.memory.samples_provider import MonitorSamplesMetricsProvider
from my_utils.memory.step_energy import energy_at, step_energies


def test_energy_between_step_ends_is_interpolated() -> None:
    samples = [Sample(float(t), float(t), {"energy_j": 100.0 * t}) for t in range(11)]  # 100 W
    marks = [StepMark(1.5, 0), StepMark(3.0, 1), StepMark(4.25, 2), StepMark(12.0, 3)]
    got = step_energies(samples, marks)
    assert [(s.step, s.joules, s.watts) for s in got] == [(1, pytest.approx(150.0), pytest.approx(100.0)),
                                                           (2, pytest.approx(125.0), pytest.approx(100.0))]
    assert energy_at([0.0, 1.0], [0.0, 10.0], 2.0) is None  # past the last sample: not measured yet


def test_restarted_steps_have_no_start() -> None:
    samples = [Sample(float(t), float(t), {"energy_j": 10.0 * t}) for t in range(6)]
    got = step_energies(samples, [StepMark(1.0, 8), StepMark(2.0, 0), StepMark(3.0, 1)])
    assert [(s.step, s.joules) for s in got] == [(1, pytest.approx(10.0))]


def test_the_file_holds_step_ends_and_old_readers_ignore_them(tmp_path: Path) -> None:
    path = tmp_path / "x_samples.jsonl"
    w = SamplesWriter(path, {"prefix": "x", "rank": 0, "energy_method": "integrated_power"})
    w.sample(Sample(1.0, 0.0, {"energy_j": 0.0}))
    w.step(1.5, 4)
    w.close()
    read = read_samples_file(path)
    assert read.steps == [StepMark(1.5, 4)] and len(read.samples) == 1
    _header, samples, notes, done = read_samples(path)
    assert len(samples) == 1 and notes == [] and done == 3
    with open(path, "a") as fh:
        fh.write('{"ts": 2.0, "step": "five"}\n')
    with pytest.raises(InputError, match=r"line 4: expected \{\"ts\": number, \"step\": integer\}"):
        read_samples_file(path)


def test_a_real_tracker_following_a_timer(tmp_path: Path, use_fake_nvml: Callable[[str], Path]) -> None:
    """NVML (a fake driver) reports 250 W and no energy counter: energy is integrated power, so each step's
    energy is 250 W times its duration, and its mean power 250 W."""
    from my_utils.core.timer import MyTimer
    from my_utils.memory.gpu_tracker import GPU_Performance_Tracker

    use_fake_nvml("no_energy")
    tracker = GPU_Performance_Tracker("run", interval=0.01, output_dir=tmp_path)
    timer = MyTimer(tag="t")
    tracker.follow(timer)
    tracker.start_monitoring()
    for step in range(12):
        timer.set_step(step)
        with timer.region("iter"):
            time.sleep(0.03)
        timer.step()
    time.sleep(0.05)  # samples after the last step end
    tracker.stop_monitoring()
    assert tracker.energy_method == "integrated_power"
    ends = {o["step"]: o["ts"] for o in map(json.loads, tracker.samples_path.read_text().splitlines()) if "step" in o}
    assert sorted(ends) == list(range(12))
    events = MonitorSamplesMetricsProvider.from_input(tracker.samples_path).collect()
    energy = {e.step: e.value for e in events if e.name == "monitor/step_energy_j"}
    power = {e.step: e.value for e in events if e.name == "monitor/step_power_w"}
    assert len(energy) >= 9 and set(energy) <= set(range(1, 12))
    for step, joules in energy.items():
        assert joules == pytest.approx(250.0 * (ends[step] - ends[step - 1]), rel=1e-3)
        assert power[step] == pytest.approx(250.0, rel=1e-3)
    method = [e for e in events if e.name == "monitor/energy_method"]
    assert [(e.value, e.attrs["energy_method"]) for e in method] == [(2.0, "integrated_power")]
    again = MonitorSamplesMetricsProvider.from_input(tracker.samples_path)
    assert sum(e.name == "monitor/step_energy_j" for e in again.collect() + again.collect()) == len(energy)
