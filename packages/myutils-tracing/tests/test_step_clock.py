"""StepClock and the step record a capture window's trace carries (what profiling cost per step)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from my_utils.tracing.capture import CaptureController
from my_utils.tracing.capture.backends.recording import RecordingBackend
from my_utils.tracing.capture.spec import CaptureSpec
from my_utils.tracing.capture.step_clock import StepClock, StepTime


class FakeClock:
    """A clock a test moves by hand (seconds)."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_states_follow_the_window() -> None:
    clock = FakeClock()
    sc = StepClock(clock)
    for step, (capturing, change, ms) in enumerate([(False, False, 10), (False, True, 30), (True, False, 12),
                                                    (True, True, 40), (False, False, 11)]):
        sc.step_started(step, capturing)
        if change:
            sc.capture_changed()
        clock.now += ms / 1e3
    sc.step_started(5, False)
    assert sc.take() == (StepTime(0, pytest.approx(10), "outside"), StepTime(1, pytest.approx(30), "partial"),
                         StepTime(2, pytest.approx(12), "inside"), StepTime(3, pytest.approx(40), "partial"),
                         StepTime(4, pytest.approx(11), "outside"))
    assert sc.take() == ()  # handed over once


def test_a_step_counted_backwards_starts_afresh() -> None:
    clock = FakeClock()
    sc = StepClock(clock)
    sc.step_started(7, False)
    clock.now += 1.0
    sc.step_started(0, False)  # a new run: step 7's time is unknown, not 1 s
    clock.now += 0.5
    sc.step_started(1, False)
    assert [(s.step, round(s.ms)) for s in sc.take()] == [(0, 500)]


def test_the_controller_hands_each_window_its_steps() -> None:
    clock = FakeClock()
    backend = RecordingBackend()
    controller = CaptureController(backend, rank=0)
    controller.steps = StepClock(clock)
    controller.arm(CaptureSpec("w", 3, 0, 5, 0))
    for it in range(8):
        with controller.region("step", {"iter": it, "mb": 0}):
            clock.now += 0.010 if it < 3 or it > 5 else 0.013
        controller.on_step(it)
    (_info, closing), = controller.completed
    # step 3: the window started in it; step 5: it stopped in it (its end, the stop, ends the record)
    assert [(s.step, s.state) for s in closing.steps] == [(0, "outside"), (1, "outside"), (2, "outside"),
                                                         (3, "partial"), (4, "inside")]
    assert [round(s.ms, 6) for s in closing.steps] == [10.0, 10.0, 10.0, 13.0, 13.0]


def test_the_torch_trace_carries_the_record(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from my_utils.tracing.capture import TorchProfilerBackend

    clock = FakeClock()
    backend = TorchProfilerBackend(output_dir=tmp_path)
    controller = CaptureController(backend, rank=0)
    controller.steps = StepClock(clock)
    controller.arm(CaptureSpec("w", 2, 0, 4, 0))
    model = torch.nn.Linear(4, 4)
    for it in range(6):
        with controller.region("step", {"iter": it, "mb": 0}):
            model(torch.randn(2, 4))
            clock.now += 0.02
        controller.on_step(it)
    (path,) = backend.traces
    capture = json.loads(gzip.decompress(path.read_bytes()))["otherData"]["myutils_capture"]
    assert capture["steps"] == [{"step": 0, "ms": 20.0, "state": "outside"}, {"step": 1, "ms": 20.0, "state": "outside"},
                                {"step": 2, "ms": 20.0, "state": "partial"}, {"step": 3, "ms": 20.0, "state": "inside"}]
