"""ForwardProfilerHook on real torch CPU models: the window holds exactly the asked forwards, then the hook goes."""

from __future__ import annotations

import gzip
import json
import logging
from pathlib import Path
from typing import Any

import pytest
import torch

from my_utils.core.errors import UsageError
from my_utils.hooks import ForwardProfilerHook
from my_utils.tracing.capture import CudaProfilerBackend, RecordingBackend, StopReason
from my_utils.tracing.capture.backends import Availability
from my_utils.tracing.nvtx_utils import NoOpLabeler, create_labeler


class Probe(torch.nn.Module):
    """A real layer that notes, per forward, whether ``capturing()`` said a window was open."""

    def __init__(self, capturing: Any) -> None:
        super().__init__()
        self.capturing = capturing
        self.linear = torch.nn.Linear(4, 4)
        self.seen: list[bool] = []

    def forward(self, x: Any) -> Any:
        self.seen.append(self.capturing())
        return self.linear(x)


def captured(model: Probe) -> list[int]:
    """Indices of the forwards that ran inside the window."""
    return [i for i, inside in enumerate(model.seen) if inside]


@pytest.mark.parametrize(("start", "stop"), [(0, 0), (2, 4), (5, 10), (3, 3)])
def test_window_holds_exactly_start_to_stop(start: int, stop: int, count_hooks: Any) -> None:
    backend = RecordingBackend()
    model = Probe(lambda: backend.capturing)
    hook = ForwardProfilerHook(start, stop, backend=backend, rank=0).attach(model)
    assert count_hooks(model) == 2
    for _ in range(stop + 4):
        model(torch.ones(1, 4))
    assert captured(model) == list(range(start, stop + 1))
    assert backend.calls == ["start", "stop"]
    (info, closing), = hook.windows
    assert (info.started_by.iteration, closing.stopped_by.iteration if closing.stopped_by else None) == (start, stop)
    assert closing.reason is StopReason.CONDITION
    # removed itself after stop_iter
    assert count_hooks(model) == 0 and not hook.attached and hook.iteration == stop + 1


def test_backend_by_name_through_the_registry() -> None:
    hook = ForwardProfilerHook(1, 2, backend="recording", rank=0)
    assert hook.controller is not None and type(hook.controller.backend) is RecordingBackend


@pytest.mark.parametrize("rank_only", [None, [5]])
def test_unknown_backend_names_the_installed_ones(rank_only: Any) -> None:
    """Also on a rank that profiles nothing: the misspelling shows on every rank."""
    with pytest.raises(UsageError, match=r"backend='nope'.*installed.*cudaProfilerApi.*torch_profiler"):
        ForwardProfilerHook(1, 2, rank_only=rank_only, backend="nope", rank=0)


def test_backend_options_are_checked() -> None:
    with pytest.raises(UsageError, match=r"backend_options=\{'colour': 1\}.*rejected"):
        ForwardProfilerHook(1, 2, backend="cudaProfilerApi", backend_options={"colour": 1}, rank=0)
    with pytest.raises(UsageError, match="backend_options apply to a backend given by name"):
        ForwardProfilerHook(1, 2, backend=RecordingBackend(), backend_options={"x": 1}, rank=0)


def test_torch_profiler_backend_traces_only_the_window(tmp_path: Path) -> None:
    """A real Kineto trace: the window's three forwards, and only them, hold an aten::linear."""
    model = torch.nn.Sequential(torch.nn.Linear(8, 8))
    hook = ForwardProfilerHook(2, 4, backend="torch_profiler", backend_options={"output_dir": tmp_path},
                               rank=0).attach(model)
    for _ in range(8):
        model(torch.ones(2, 8))
    trace, = tmp_path.glob("*.json.gz")
    assert trace.name == "trace_rank0_steps2-4_forward.pt.trace.json.gz"
    doc = json.loads(gzip.decompress(trace.read_bytes()))
    linears = [e for e in doc["traceEvents"] if e.get("name") == "aten::linear"]
    assert len(linears) == 3
    assert doc["otherData"]["myutils_capture"]["origin"] == "ForwardProfilerHook"
    assert not hook.attached


class FakeCudaSeam:
    """The cudaProfilerApi seam of myutils-tracing, recording its calls (as on a GPU machine)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def available(self) -> Availability:
        return Availability(True)

    def synchronize(self) -> None:
        self.calls.append("sync")

    def profiler_start(self) -> None:
        self.calls.append("cudaProfilerStart")

    def profiler_stop(self) -> None:
        self.calls.append("cudaProfilerStop")


def test_cuda_profiler_api_path_through_its_seam() -> None:
    seam = FakeCudaSeam()
    model = Probe(lambda: seam.calls[-1:] == ["cudaProfilerStart"])
    ForwardProfilerHook(3, 5, backend=CudaProfilerBackend(synchronize=True, seam=seam), rank=0).attach(model)
    for _ in range(9):
        model(torch.ones(1, 4))
    assert seam.calls == ["sync", "cudaProfilerStart", "sync", "cudaProfilerStop"]
    assert captured(model) == [3, 4, 5]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-build degradation")
def test_default_backend_degrades_on_a_cpu_build(caplog: pytest.LogCaptureFixture) -> None:
    model = torch.nn.Linear(2, 2)
    with caplog.at_level(logging.WARNING):
        hook = ForwardProfilerHook(1, 2, rank=0).attach(model)
        for _ in range(4):
            model(torch.ones(1, 2))
    assert hook.controller is not None and isinstance(hook.controller.backend, CudaProfilerBackend)
    assert "CudaProfilerBackend does nothing: torch" in caplog.text and "CPU build" in caplog.text
    assert caplog.text.count("CudaProfilerBackend does nothing") == 1
    assert len(hook.windows) == 1 and not hook.attached


@pytest.mark.parametrize(("rank", "rank_only", "selected"), [
    (0, [0, 1], True), (1, [0, 1], True), (2, [0, 1], False), (3, 3, True), (0, None, True), (1, (0,), False)])
def test_rank_only(rank: int, rank_only: Any, selected: bool, monkeypatch: pytest.MonkeyPatch,
                   count_hooks: Any) -> None:
    monkeypatch.setenv("RANK", str(rank))  # the rank comes from torchrun's environment
    backend = RecordingBackend()
    model = Probe(lambda: backend.capturing)
    hook = ForwardProfilerHook(1, 2, rank_only=rank_only, backend=backend).attach(model)
    assert hook.rank == rank and hook.selected is selected
    assert count_hooks(model) == (2 if selected else 0)  # other ranks pay nothing per forward
    for _ in range(4):
        model(torch.ones(1, 4))
    assert captured(model) == ([1, 2] if selected else [])
    assert backend.calls == (["start", "stop"] if selected else [])


class RecordingLabeler:
    """A labeler that notes its range starts and stops (and when, relative to the forwards)."""

    def __init__(self, model: Probe) -> None:
        self.model = model
        self.calls: list[tuple[str, str, int]] = []

    def start(self, label: str) -> str:
        self.calls.append(("start", label, len(self.model.seen)))
        return label

    def stop(self, token: str) -> None:
        self.calls.append(("stop", token, len(self.model.seen)))


def test_nvtx_range_wraps_the_window() -> None:
    backend = RecordingBackend()
    model = Probe(lambda: backend.capturing)
    labeler = RecordingLabeler(model)
    ForwardProfilerHook(2, 3, nvtx_range="model_forward", labeler=labeler, backend=backend, rank=0).attach(model)
    for _ in range(6):
        model(torch.ones(1, 4))
    # opened before forward 2 ran, closed after forward 3 ran
    assert labeler.calls == [("start", "model_forward", 2), ("stop", "model_forward", 4)]


def test_no_nvtx_range_uses_no_labeler() -> None:
    backend = RecordingBackend()
    model = Probe(lambda: backend.capturing)
    labeler = RecordingLabeler(model)
    ForwardProfilerHook(0, 1, labeler=labeler, backend=backend, rank=0).attach(model)
    for _ in range(3):
        model(torch.ones(1, 4))
    assert labeler.calls == [] and backend.calls == ["start", "stop"]


@pytest.mark.parametrize("env", [None, "0", "1"])
def test_enable_nvtx_is_the_default_switch(env: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    if env is None:
        monkeypatch.delenv("ENABLE_NVTX", raising=False)
    else:
        monkeypatch.setenv("ENABLE_NVTX", env)
    hook = ForwardProfilerHook(0, 1, nvtx_range="w", backend=RecordingBackend(), rank=0)
    if env == "1":
        assert type(hook.labeler) is type(create_labeler(enabled=True))
    else:
        assert isinstance(hook.labeler, NoOpLabeler)
    explicit = create_labeler(enabled=True)
    assert ForwardProfilerHook(0, 1, nvtx_range="w", labeler=explicit, backend=RecordingBackend(),
                               rank=0).labeler is explicit  # an explicit labeler wins


def test_exception_inside_the_window_closes_it(boom_cls: Any, count_hooks: Any,
                                               caplog: pytest.LogCaptureFixture) -> None:
    backend = RecordingBackend()
    boom = boom_cls()
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), boom)
    hook = ForwardProfilerHook(1, 5, backend=backend, rank=0).attach(model)
    for _ in range(3):
        model(torch.ones(1, 2))
    assert backend.capturing
    boom.armed = True
    with caplog.at_level(logging.WARNING, "my_utils.hooks"), pytest.raises(ValueError) as info:
        model(torch.ones(1, 2))
    assert info.value is boom.error  # propagates unchanged
    assert backend.calls == ["start", "stop"] and not backend.capturing
    (_, closing), = hook.windows
    assert closing.reason is StopReason.EXCEPTION
    assert count_hooks(model) == 0 and not hook.attached
    assert "forward 3 raised ValueError inside the capture window" in caplog.text


def test_exception_before_the_window_is_counted_and_the_window_still_opens(boom_cls: Any) -> None:
    backend = RecordingBackend()
    boom = boom_cls()
    model = torch.nn.Sequential(boom)
    hook = ForwardProfilerHook(2, 3, backend=backend, rank=0).attach(model)
    boom.armed = True
    with pytest.raises(ValueError):
        model(torch.ones(1))
    boom.armed = False
    assert backend.calls == [] and hook.iteration == 1
    for _ in range(4):
        model(torch.ones(1))
    assert backend.calls == ["start", "stop"] and hook.windows[0][1].reason is StopReason.CONDITION


def test_a_forward_run_inside_an_except_block_is_not_mistaken_for_a_raise() -> None:
    backend = RecordingBackend()
    model = torch.nn.Sequential(torch.nn.ReLU())
    hook = ForwardProfilerHook(0, 2, backend=backend, rank=0).attach(model)
    model(torch.ones(1))
    try:
        raise MemoryError("a skipped batch")
    except MemoryError:
        model(torch.ones(1))  # the retry path of a training loop
    assert backend.capturing
    model(torch.ones(1))
    assert backend.calls == ["start", "stop"] and hook.windows[0][1].reason is StopReason.CONDITION


def test_detach_closes_an_open_window(count_hooks: Any) -> None:
    backend = RecordingBackend()
    model = torch.nn.Sequential(torch.nn.ReLU())
    hook = ForwardProfilerHook(0, 9, backend=backend, rank=0).attach(model)
    model(torch.ones(1))
    hook.detach()
    assert backend.calls == ["start", "stop"] and hook.windows[0][1].reason is StopReason.CLOSED
    assert count_hooks(model) == 0
    hook.detach()  # again: harmless


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"start_iter": -1, "stop_iter": 2}, r"start_iter=-1\): expected a forward index >= 0"),
    ({"start_iter": True, "stop_iter": 2}, r"start_iter=True\)"),
    ({"start_iter": 5, "stop_iter": 2}, r"stop_iter is before start_iter; pass stop_iter >= start_iter"),
    ({"start_iter": 1, "stop_iter": "3"}, r"stop_iter='3'\)"),
    ({"start_iter": 1, "stop_iter": 2, "rank_only": []}, r"rank_only=\[\]\): expected None .*rank_only=\[0, 1\]"),
    ({"start_iter": 1, "stop_iter": 2, "rank_only": ["0"]}, r"rank_only=\['0'\]"),
    ({"start_iter": 1, "stop_iter": 2, "rank": -1}, r"rank=-1\): expected a rank >= 0, or None to read RANK"),
    ({"start_iter": 1, "stop_iter": 2, "nvtx_range": ""}, r"nvtx_range=''\): expected a non-empty range name or None"),
])
def test_misuse_is_refused_at_once(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        ForwardProfilerHook(backend=RecordingBackend(), **{"rank": 0, **kwargs})


def test_attach_misuse() -> None:
    hook = ForwardProfilerHook(0, 0, backend=RecordingBackend(), rank=0)
    with pytest.raises(UsageError, match=r"attach\(str\): expected a torch.nn.Module"):
        hook.attach("model")
    model = torch.nn.ReLU()
    hook.attach(model)
    with pytest.raises(UsageError, match="already attached to ReLU; call detach"):
        hook.attach(torch.nn.ReLU())
    model(torch.ones(1))
    with pytest.raises(UsageError, match=r"window is over.*create a new ForwardProfilerHook"):
        hook.attach(model)


def test_legacy_name_is_the_same_class() -> None:
    from my_utils import ForwardProfilerHook as Legacy

    assert Legacy is ForwardProfilerHook


@pytest.mark.cuda
def test_cuda_profiler_api_on_a_gpu() -> None:
    model = torch.nn.Linear(4, 4).cuda()
    hook = ForwardProfilerHook(1, 2, rank=0).attach(model)
    assert hook.controller is not None
    backend = hook.controller.backend
    assert isinstance(backend, CudaProfilerBackend) and backend.available, getattr(backend, "reason", "")
    running = []
    for _ in range(4):
        model(torch.ones(1, 4, device="cuda"))
        running.append(backend.running)
    assert running == [False, True, False, False]
    assert hook.windows[0][1].reason is StopReason.CONDITION


class Recursive(torch.nn.Module):
    """A module whose forward calls itself once (re-entrant hooks)."""

    def __init__(self, backend: RecordingBackend) -> None:
        super().__init__()
        self.backend = backend
        self.seen: list[tuple[int, bool]] = []

    def forward(self, x: Any, depth: int = 1) -> Any:
        out = self(x, depth=depth - 1) if depth > 0 else x
        self.seen.append((depth, self.backend.capturing))
        return out


def test_a_re_entrant_forward_counts_once_and_closes_at_the_outer_exit() -> None:
    backend = RecordingBackend()
    model = Recursive(backend)
    hook = ForwardProfilerHook(1, 2, backend=backend, rank=0).attach(model)
    for _ in range(4):
        model(torch.ones(1))
    assert hook.iteration == 3  # detached after forward 2; forward 3 was not counted
    # (depth, capturing) per call: inner call first; the window spans forwards 1 and 2 completely
    assert model.seen == [(0, False), (1, False), (0, True), (1, True), (0, True), (1, True), (0, False), (1, False)]
    assert backend.calls == ["start", "stop"]
