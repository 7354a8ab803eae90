"""Backends: the plugin registry, cudaProfilerApi through its seam, torch.profiler traces on the CPU."""

from __future__ import annotations

import gzip
import itertools
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from my_utils.core.errors import ConfigError
from my_utils.core.plugin_types import PluginKind
from my_utils.core.plugins import get_registry
from my_utils.tracing.capture import (
    CaptureBackend,
    CaptureController,
    CaptureSpec,
    CudaProfilerBackend,
    HookEvent,
    ProfileManager,
    RecordingBackend,
    TorchProfilerBackend,
)
from my_utils.tracing.capture.backends.cuda_seam import (
    Availability,
    CudartSeam,
    TorchCudaSeam,
    default_cuda_seam,
)
from my_utils.tracing.capture.backends.torch_profiler import held_steps, safe_file_part
from my_utils.tracing.capture.config import Edge, StopPolicy
from my_utils.tracing.capture.spec import (
    STEP_PROFILE_NAME,
    EventRecord,
    StopReason,
    WindowClosing,
    WindowInfo,
)


def test_builtin_backends_are_plugins_selected_by_name(tmp_path: Path) -> None:
    names = set(get_registry().descriptions(PluginKind.CAPTURE_BACKEND))
    assert {"cudaProfilerApi", "torch_profiler", "recording"} <= names
    for name, cls in [("cudaProfilerApi", CudaProfilerBackend), ("recording", RecordingBackend)]:
        assert isinstance(ProfileManager({"features": {"capture": {"backend": name}}}).create_backend(), cls)
    pm = ProfileManager({"features": {"capture": {"backend": "torch_profiler",
                                                  "backend_options": {"output_dir": str(tmp_path)}}}})
    backend = pm.create_backend()
    assert isinstance(backend, TorchProfilerBackend) and backend.output_dir == tmp_path


def test_unknown_backend_name_lists_the_installed_ones() -> None:
    pm = ProfileManager({"features": {"capture": {"backend": "nsight_magic"}}}.copy())
    with pytest.raises(ConfigError) as info:
        pm.create_backend()
    message = str(info.value)
    assert message.startswith("<dict>:key features.capture.backend: got 'nsight_magic'; installed capture backends:")
    assert "cudaProfilerApi" in message and "torch_profiler" in message and "recording" in message


def test_bad_backend_options_name_the_key() -> None:
    pm = ProfileManager({"features": {"capture": {"backend": "recording", "backend_options": {"colour": 1}}}})
    with pytest.raises(ConfigError, match=r"key features.capture.backend_options: got \['colour'\]; backend 'recording'"):
        pm.create_backend()


def test_the_seed_custom_backend_subclass_works() -> None:
    calls = []

    class MyCustomBackend(CaptureBackend):
        def start(self) -> None:
            calls.append("start")

        def stop(self) -> None:
            calls.append("stop")

    controller = CaptureController(backend=MyCustomBackend(), logger=logging.getLogger("x"))
    controller.arm(CaptureSpec("w", 1, 0, 1, 0))
    with controller.region("f", {"iter": 1, "mb": 0}):
        pass
    assert calls == ["start", "stop"]
    with pytest.raises(TypeError):
        CaptureBackend()  # type: ignore[abstract]


# -- cudaProfilerApi -----------------------------------------------------------------------


class RecordingSeam:
    def __init__(self, ok: bool = True) -> None:
        self.ok = ok
        self.calls: list[str] = []

    def available(self) -> Availability:
        return Availability(self.ok, "" if self.ok else "fake: no device")

    def synchronize(self) -> None:
        self.calls.append("sync")

    def profiler_start(self) -> None:
        self.calls.append("cudaProfilerStart")

    def profiler_stop(self) -> None:
        self.calls.append("cudaProfilerStop")


@pytest.mark.parametrize(("synchronize", "expected"), [
    (True, ["sync", "cudaProfilerStart", "sync", "cudaProfilerStop"]),
    (False, ["cudaProfilerStart", "cudaProfilerStop"]),
])
def test_cuda_backend_drives_the_seam(synchronize: bool, expected: list[str]) -> None:
    seam = RecordingSeam()
    backend = CudaProfilerBackend(synchronize=synchronize, seam=seam)
    backend.start()
    backend.stop()
    backend.stop()  # a second stop is ignored: never an unbalanced cudaProfilerStop
    assert seam.calls == expected


def test_cuda_backend_without_a_device_reports_once_and_degrades(caplog: pytest.LogCaptureFixture) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the degraded path is not taken")
    # the real seams, for real: both say why they cannot work
    status = TorchCudaSeam().available()
    assert not status.ok and "sees no CUDA device" in status.reason
    assert not CudartSeam(library="libcudart-does-not-exist.so").available().ok
    backend = CudaProfilerBackend(synchronize=True)
    with caplog.at_level(logging.WARNING, logger="my_utils.tracing.capture"):
        for _ in range(3):
            backend.start()
            backend.stop()
    assert not backend.available and "no CUDA device" in backend.reason
    assert sum("CudaProfilerBackend does nothing" in r.getMessage() for r in caplog.records) == 1


@pytest.mark.cuda
def test_cuda_backend_calls_the_real_profiler_api() -> None:
    seam = default_cuda_seam()
    assert seam.available().ok, seam.available().reason
    backend = CudaProfilerBackend(synchronize=True)
    assert backend.available
    backend.start()
    assert backend.running
    backend.stop()
    assert not backend.running
    cudart = CudartSeam()
    if cudart.available().ok:  # the ctypes path, checked against the runtime's return codes
        cudart.synchronize()
        cudart.profiler_start()
        cudart.profiler_stop()


# -- torch_profiler ------------------------------------------------------------------------


def _work(torch: Any, steps: int = 2) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    for _ in range(steps):
        with torch.profiler.record_function("my_window_step"):
            model(torch.randn(8, 16)).sum().backward()


def test_torch_profiler_writes_one_gzipped_kineto_trace_per_window(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from my_utils.core.testing.trace_check import check_trace

    backend = TorchProfilerBackend(output_dir=tmp_path / "traces")
    controller = CaptureController(backend, rank=3)
    for name, start, stop in [("fwd/../window", 2, 3), ("late window", 6, 6)]:
        controller.arm(CaptureSpec(name, start, 0, stop, 0, start_names=frozenset({"step"})))
    for it in range(8):
        with controller.region("step", {"iter": it, "mb": 0}):
            _work(torch, 1)
    names = sorted(p.name for p in (tmp_path / "traces").iterdir())
    assert names == ["trace_rank3_steps2-3_fwd_.._window.pt.trace.json.gz",
                     "trace_rank3_steps6-6_late_window.pt.trace.json.gz"]
    assert backend.traces == [tmp_path / "traces" / n for n in names]
    for path in backend.traces:
        doc = json.loads(gzip.decompress(path.read_bytes()))
        cpu_ops = [e for e in doc["traceEvents"] if e.get("cat") == "cpu_op"]
        assert any(e["name"] == "aten::addmm" for e in cpu_ops)
        assert sum(e.get("name") == "my_window_step" for e in doc["traceEvents"]) >= 1
        assert "baseTimeNanoseconds" in doc
        assert check_trace(path) == []
        assert doc["otherData"]["myutils_capture"]["rank"] == 3


def _labelled_steps(path: Path) -> list[int]:
    doc = json.loads(gzip.decompress(path.read_bytes()))
    return sorted({int(e["name"].split("#")[1]) for e in doc["traceEvents"]
                   if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("ph") == "X"})


@pytest.mark.parametrize(("spec", "close_after", "expected"), [
    # a step window stopped as step 8 begins: it holds steps 6 and 7 (once named ...steps6-8...)
    (CaptureSpec("as_8_begins", 6, 0, 8, 0, start_names=frozenset({STEP_PROFILE_NAME}),
                 stop_names=frozenset({STEP_PROFILE_NAME}), stop_policy=StopPolicy.ON_STOP_PROFILE_NAME,
                 stop_edge=Edge.ENTER), None, ("steps6-7", [6, 7])),
    # started and stopped by the region "step" of iterations 2 and 3
    (CaptureSpec("region", 2, 0, 3, 0, start_names=frozenset({"step"})), None, ("steps2-3", [2, 3])),
    # the step window of the README (control file "+1".."+2"): from step 6 to the end of step 7
    (CaptureSpec("now", 6, 0, 7, 0), None, ("steps6-7", [6, 7])),
    # closed during step 4 before its stop event: began at 3, ended by 9
    (CaptureSpec("cut", 3, 0, 9, 0, start_names=frozenset({"step"})), 4, ("steps3-upto9", [3, 4])),
])
def test_torch_trace_names_the_steps_it_holds(tmp_path: Path, spec: CaptureSpec, close_after: int | None,
                                              expected: tuple[str, list[int]]) -> None:
    """The loop labels each step ``ProfilerStep#<iteration>``; the file name must list exactly those."""
    torch = pytest.importorskip("torch")
    backend = TorchProfilerBackend(output_dir=tmp_path)
    controller = CaptureController(backend, rank=0)
    controller.arm(spec)
    model = torch.nn.Linear(8, 8)
    for it in range(10):
        with controller.region("step", {"iter": it, "mb": 0}), torch.profiler.record_function(f"ProfilerStep#{it}"):
            model(torch.randn(4, 8)).sum().backward()
        if it == close_after:
            controller.close()
        controller.on_step(it)
    (path,) = backend.traces
    part, steps = expected
    assert path.name == f"trace_rank0_{part}_{spec.name}.pt.trace.json.gz"
    assert _labelled_steps(path) == steps
    capture = json.loads(gzip.decompress(path.read_bytes()))["otherData"]["myutils_capture"]
    assert (capture["first_step"], capture["last_step"]) == (steps[0], None if "upto" in part else steps[-1])


def _info(start: int = 6, stop: int = 8) -> WindowInfo:
    return WindowInfo("w", 0, start, stop, None, "config", EventRecord(Edge.ENTER, "step", start, 0, None, 0))


@pytest.mark.parametrize(("closing", "expected"), [
    (WindowClosing(StopReason.CONDITION, EventRecord(Edge.EXIT, "step", 8, 0, None, 0)), (6, 8)),
    (WindowClosing(StopReason.CONDITION, EventRecord(Edge.ENTER, STEP_PROFILE_NAME, 8, 0, None, 0)), (6, 7)),
    (WindowClosing(StopReason.CONDITION, EventRecord(Edge.ENTER, "forward", 8, 0, None, 0)), (6, 8)),
    (WindowClosing(StopReason.CONDITION, EventRecord(Edge.ENTER, STEP_PROFILE_NAME, 6, 0, None, 0)), (6, 6)),
    (WindowClosing(StopReason.OVERRUN, None), (6, 8)),
    (WindowClosing(StopReason.CLOSED, None), (6, None)),
    (None, (6, None)),
])
def test_held_steps(closing: WindowClosing | None, expected: tuple[int, int | None]) -> None:
    assert held_steps(_info(), closing) == expected


def test_torch_profiler_export_failure_is_logged_not_raised(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    torch = pytest.importorskip("torch")
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("x")
    backend = TorchProfilerBackend(output_dir=blocker / "sub")
    controller = CaptureController(backend)
    controller.arm(CaptureSpec("w", 0, 0, 0, 0))
    with caplog.at_level(logging.ERROR, logger="my_utils.tracing.capture"), \
            controller.region("s", {"iter": 0, "mb": 0}):
        _work(torch, 1)
    assert backend.traces == [] and "could not write" in caplog.text


@pytest.mark.parametrize(("text", "expected"), [
    ("forward_window", "forward_window"), ("../../etc/passwd", "etc_passwd"), ("a b\\c:d", "a_b_c_d"),
    ("", "window"), ("..", "window")])
def test_window_names_become_safe_file_names(text: str, expected: str) -> None:
    assert safe_file_part(text) == expected


def test_recording_backend_fails_loudly_when_misused() -> None:
    backend = RecordingBackend()
    backend.start()
    with pytest.raises(AssertionError, match="already capturing"):
        backend.start()
    backend.stop()
    with pytest.raises(AssertionError, match="without a start"):
        backend.stop()
    assert (backend.starts, backend.stops) == (1, 1)


def test_hook_event_defaults() -> None:
    event = HookEvent("f")
    assert (event.iteration, event.microbatch, event.role, event.rank) == (None, 0, None, None)


def test_torch_profiler_refuses_a_second_concurrent_session(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    torch = pytest.importorskip("torch")
    first = CaptureController(TorchProfilerBackend(output_dir=tmp_path / "a"))
    second = CaptureController(TorchProfilerBackend(output_dir=tmp_path / "b"))
    first.arm(CaptureSpec("outer", 0, 0, 1, 0))
    second.arm(CaptureSpec("inner", 0, 0, 0, 0))
    with caplog.at_level(logging.WARNING, logger="my_utils.tracing.capture"):
        with first.region("s", {"iter": 0, "mb": 0}), second.region("s", {"iter": 0, "mb": 0}):
            _work(torch, 1)
        with first.region("s", {"iter": 1, "mb": 0}):
            _work(torch, 1)
    assert "already running" in caplog.text
    assert not (tmp_path / "b").exists()  # the refused window wrote nothing
    assert [p.parent.name for p in first.backend.traces] == ["a"]  # type: ignore[attr-defined]
    assert first.state.value == second.state.value == "idle"
    assert not torch._C._autograd._profiler_enabled()


def test_open_window_of_a_dropped_controller_stops_at_exit(tmp_path: Path) -> None:
    """A window still capturing when its controller is dropped is stopped at interpreter exit.

    torch crashes at exit (SIGSEGV) when a profiler is left running, so exit code 0 and a
    written trace both prove the window was stopped.
    """
    import subprocess
    import sys

    pytest.importorskip("torch")
    code = f"""
import torch
from my_utils.tracing.capture import CaptureController, CaptureSpec, TorchProfilerBackend

def run():
    controller = CaptureController(TorchProfilerBackend(output_dir={str(tmp_path)!r}), rank=0)
    controller.arm(CaptureSpec("left_open", 0, 0, 5, 0))
    controller.on_enter(__import__("my_utils.tracing.capture", fromlist=["HookEvent"]).HookEvent(
        "step", meta={{"iter": 0, "mb": 0}}))
    torch.nn.Linear(4, 4)(torch.randn(2, 4)).sum().backward()
    assert controller.state.value == "capturing"

run()  # the controller goes out of scope with its window open
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    # cut short at exit during step 0: it began at step 0 and ended by step 5
    traces = list(tmp_path.glob("trace_rank0_steps0-upto5_left_open.pt.trace.json.gz"))
    assert len(traces) == 1
    assert "aten::linear" in gzip.decompress(traces[0].read_bytes()).decode()


def _step_spans(path: Path) -> list[tuple[str, float, float]]:
    """(name, start, end) of the ``ProfilerStep#N`` X events of a written trace, in start order."""
    doc = json.loads(gzip.decompress(path.read_bytes()))
    return sorted(((e["name"], e["ts"], e["ts"] + e["dur"]) for e in doc["traceEvents"]
                   if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")), key=lambda x: x[1])


@pytest.mark.parametrize(("warmup", "marked"), [(None, [4, 5, 6]), (0, [3, 4, 5, 6]), (2, [5, 6])])
def test_the_documented_window_marks_each_step_for_the_analyses(tmp_path: Path, warmup: int | None,
                                                                marked: list[int]) -> None:
    """A window from the documented API (ProfileManager, torch_profiler backend, controller.region) gives
    the user no profiler to call ``prof.step()`` on: the backend marks ``ProfilerStep#N`` itself, one per
    step held after the warm-up (1 step by default: the profiler's start-up lands in it), in order and
    without overlap (before, the traces held none and every analysis of them warned "no ProfilerStep
    markers: call prof.step()")."""
    torch = pytest.importorskip("torch")
    options = {"output_dir": str(tmp_path)} | ({} if warmup is None else {"warmup_steps": warmup})
    pm = ProfileManager({"features": {"capture": {"enabled": True, "backend": "torch_profiler",
                                                  "backend_options": options}},
                         "capture": {"windows": [{"name": "steps", "start_iter": 3, "stop_iter": 6}]}})
    controller = pm.create_controller(rank=0)
    model = torch.nn.Linear(8, 8)
    for it in range(9):
        for spec in pm.build_specs_to_arm_at_iter(it, num_microbatches=1):
            controller.arm(spec)
        with controller.region("train_step", {"iter": it}), torch.profiler.record_function("my_work"):
            model(torch.randn(4, 8)).sum().backward()
    controller.close()
    (path,) = controller.backend.traces
    spans = _step_spans(path)
    assert [name for name, _s, _e in spans] == [f"ProfilerStep#{n}" for n in marked]
    assert all(prev[2] <= nxt[1] for prev, nxt in itertools.pairwise(spans))
    doc = json.loads(gzip.decompress(path.read_bytes()))
    work = [e for e in doc["traceEvents"] if e.get("name") == "my_work" and e.get("ph") == "X"]
    assert len(work) == 4  # every step was profiled, the warm-up too
    inside = [w for w in work if any(s <= w["ts"] and w["ts"] + w["dur"] <= e for _n, s, e in spans)]
    assert len(inside) == len(marked)  # each marked step's work lies inside its marker
    assert not any(str(e.get("name", "")).startswith(("my_utils.capture", "my_utils")) for e in doc["traceEvents"]
                   if e.get("ph") == "X")
    capture = doc["otherData"]["myutils_capture"]
    assert capture["step_markers"] == "backend" and capture["warmup_steps"] == 4 - len(marked)
    assert path.name == "trace_rank0_steps3-6_steps.pt.trace.json.gz"  # the steps it holds, warm-up included


def test_a_one_step_window_has_no_warm_up(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    backend = TorchProfilerBackend(output_dir=tmp_path)
    controller = CaptureController(backend, rank=0)
    controller.arm(CaptureSpec("one", 2, 0, 2, 0, start_names=frozenset({"step"})))
    for it in range(4):
        with controller.region("step", {"iter": it}):
            pass
    (path,) = backend.traces
    assert [name for name, _s, _e in _step_spans(path)] == ["ProfilerStep#2"]


def test_a_loop_that_marks_its_own_steps_keeps_one_set_of_markers(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    backend = TorchProfilerBackend(output_dir=tmp_path)
    controller = CaptureController(backend, rank=0)
    controller.arm(CaptureSpec("own", 2, 0, 4, 0, start_names=frozenset({"step"})))
    model = torch.nn.Linear(8, 8)
    for it in range(6):
        with controller.region("step", {"iter": it}), torch.profiler.record_function(f"ProfilerStep#{it}"):
            model(torch.randn(4, 8)).sum().backward()
    (path,) = backend.traces
    assert [name for name, _s, _e in _step_spans(path)] == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    assert json.loads(gzip.decompress(path.read_bytes()))["otherData"]["myutils_capture"]["step_markers"] == "user"


def test_step_markers_follow_the_iterations_the_controller_sees(tmp_path: Path) -> None:
    """A skipped iteration number is the next marker; an older or repeated one changes nothing."""
    pytest.importorskip("torch")
    backend = TorchProfilerBackend(output_dir=tmp_path, warmup_steps=0)
    controller = CaptureController(backend, rank=0)
    controller.arm(CaptureSpec("w", 1, 0, 20, 0, start_names=frozenset({"step"})))
    for it in (0, 1, 1, 5, 4, 9):
        with controller.region("step", {"iter": it}):
            pass
    controller.close()
    (path,) = backend.traces
    assert [name for name, _s, _e in _step_spans(path)] == ["ProfilerStep#1", "ProfilerStep#5", "ProfilerStep#9"]
