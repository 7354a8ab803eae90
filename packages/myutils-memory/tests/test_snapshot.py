"""MemorySnapshotter: nested regions through a recording allocator seam, the seed's names, never raising."""

from __future__ import annotations

import logging
import os
import pickle
import re
from pathlib import Path

import pytest
import torch

from my_utils.core.errors import UsageError
from my_utils.memory.cuda_memory import RecordingCudaMemory, TorchCudaMemory
from my_utils.memory.snapshot import (
    ENV_SWITCH,
    REGIONS_KEY,
    MemorySnapshotter,
    save_snapshot,
    snapshot_file_name,
)
from my_utils.memory.snapshot_io import load_snapshot

NAME = re.compile(r"^(?P<name>.+)__(?P<stamp>\d{8}_\d{6})__rank(?P<rank>\d+)\.pt$")


def _snapshotter(tmp_path: Path) -> tuple[MemorySnapshotter, RecordingCudaMemory]:
    cuda = RecordingCudaMemory()
    return MemorySnapshotter(tmp_path, enabled=True, rank=3, cuda=cuda), cuda


def test_nested_regions_history_on_first_start_off_at_last_stop(tmp_path: Path) -> None:
    snap, cuda = _snapshotter(tmp_path)
    snap.start("training_loop", max_entries=500)
    snap.start("epoch")
    snap.start("forward")
    assert [c for c in cuda.calls if c[0] == "start_history"] == [("start_history", 500)]
    forward = snap.stop("forward")
    snap.start("backward")
    backward = snap.stop("backward")
    epoch = snap.stop("epoch")
    assert cuda.recording  # still on: the outer region is open
    loop = snap.stop("training_loop")
    assert not cuda.recording
    assert [c[0] for c in cuda.calls].count("stop_history") == 1
    paths = [forward, backward, epoch, loop]
    assert all(isinstance(p, Path) and p.parent == tmp_path for p in paths)
    matches = [NAME.match(p.name) for p in paths if p is not None]
    names = [m for m in matches if m is not None]
    assert [m.group("name") for m in names] == ["forward", "backward", "epoch", "training_loop"]
    assert {m.group("rank") for m in names} == {"3"}
    assert snap.saved == paths


def test_pt_loads_with_torch_load_and_pickle_sibling_is_protocol_4(tmp_path: Path, hand_snapshot: dict) -> None:
    snap, cuda = _snapshotter(tmp_path)
    cuda.state = hand_snapshot
    snap.start("outer")
    snap.start("inner")
    snap.stop("inner")
    path = snap.stop("outer")
    assert path is not None and path.suffix == ".pt" and path.read_bytes()[:2] == b"PK"
    data = torch.load(path)  # the seed's call: weights_only=True by default
    raw = path.with_suffix(".pickle").read_bytes()
    assert raw[:2] == b"\x80\x04"  # protocol 5 renders empty in memory_viz
    assert pickle.loads(raw) == data
    assert load_snapshot(path) == load_snapshot(path.with_suffix(".pickle")) == data
    assert data["device_traces"] == hand_snapshot["device_traces"]
    assert [r["name"] for r in data[REGIONS_KEY]] == ["inner", "outer"]
    inner, outer = data[REGIONS_KEY]
    assert outer["start_us"] <= inner["start_us"] <= inner["stop_us"] <= outer["stop_us"]
    assert (inner["depth"], outer["depth"]) == (1, 0)


def test_mismatched_stop_names_the_open_region(tmp_path: Path) -> None:
    snap, _ = _snapshotter(tmp_path)
    snap.start("outer")
    snap.start("inner")
    with pytest.raises(UsageError, match=r"stop\('outer'\) called while 'inner' is the innermost .*stop 'inner' first"):
        snap.stop("outer")
    snap.stop("inner")
    snap.stop("outer")
    with pytest.raises(UsageError, match="no open region"):
        snap.stop("outer")


@pytest.mark.parametrize("value", ["", "0", "yes"])
def test_env_switch_off_does_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(ENV_SWITCH, value)
    cuda = RecordingCudaMemory()
    snap = MemorySnapshotter(tmp_path, cuda=cuda)
    snap.start("a")
    assert snap.stop("a") is None
    assert snap.stop("never started") is None  # off: nothing tracked, nothing to misuse
    assert cuda.calls == [] and list(tmp_path.iterdir()) == []


def test_env_switch_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_SWITCH, "1")
    snap = MemorySnapshotter(tmp_path, cuda=RecordingCudaMemory(), rank=0)
    snap.start("a")
    path = snap.stop("a")
    assert path is not None and path.name.endswith("__rank0.pt")


def test_without_cuda_one_warning_then_no_op(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The real seam on this CPU-only build answers with a reason; regions are still checked."""
    snap = MemorySnapshotter(tmp_path, enabled=True, cuda=TorchCudaMemory())
    with caplog.at_level(logging.WARNING, logger="my_utils.memory"):
        for _ in range(3):
            snap.start("outer")
            snap.start("inner")
            assert snap.stop("inner") is None
            assert snap.stop("outer") is None
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "torch.cuda.is_available() is False" in warnings[0]
    assert list(tmp_path.iterdir()) == []
    snap.start("x")
    with pytest.raises(UsageError):
        snap.stop("y")


@pytest.mark.parametrize("fail_on", ["start_history", "snapshot", "stop_history"])
def test_allocator_error_reported_once_never_raised(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                    fail_on: str) -> None:
    snap, cuda = _snapshotter(tmp_path)
    cuda.fail_on = fail_on
    with caplog.at_level(logging.WARNING, logger="my_utils.memory"):
        for _ in range(2):
            snap.start("a")
            snap.stop("a")
    assert len(caplog.records) == 1 and "fake CUDA failure" in caplog.records[0].getMessage()


def test_unwritable_folder_is_reported_not_raised(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    snap = MemorySnapshotter(blocker / "sub", enabled=True, cuda=RecordingCudaMemory())
    with caplog.at_level(logging.WARNING, logger="my_utils.memory"):
        snap.start("a")
        assert snap.stop("a") is None
    assert "saving the snapshot of region 'a' failed" in caplog.text


def test_file_names_are_safe() -> None:
    name = snapshot_file_name("../epoch 1/x", 2, when=0)
    assert "/" not in name and name.endswith("__rank2.pt") and NAME.match(name)


def test_set_logger_takes_a_logger_and_refuses_others(tmp_path: Path) -> None:
    snap, _ = _snapshotter(tmp_path)
    snap.set_logger(logging.getLogger("x"))
    with pytest.raises(UsageError, match=r"expected a logging\.Logger"):
        snap.set_logger(42)


def test_seed_example_adapted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hand_snapshot: dict) -> None:
    """The seed's README example, on the legacy import path, with the seam swapped for the recorder."""
    monkeypatch.setenv(ENV_SWITCH, "1")
    monkeypatch.chdir(tmp_path)
    from my_utils.memory_snapshot import global_snapshotter

    cuda = RecordingCudaMemory(state=hand_snapshot)
    monkeypatch.setattr(global_snapshotter, "_cuda", cuda)
    global_snapshotter.set_logger(logging.getLogger("train"))
    global_snapshotter.start("training_loop")
    for _ in range(2):
        global_snapshotter.start("epoch")
        global_snapshotter.start("forward")
        global_snapshotter.stop("forward")
        global_snapshotter.start("backward")
        global_snapshotter.stop("backward")
        global_snapshotter.stop("epoch")
    global_snapshotter.stop("training_loop")
    pts = sorted(tmp_path.glob("*.pt"))
    names = sorted(NAME.match(p.name).group("name") for p in pts)  # type: ignore[union-attr]
    assert set(names) == {"forward", "backward", "epoch", "training_loop"}
    assert sorted(tmp_path.iterdir()) == sorted([*pts, *(p.with_suffix(".pickle") for p in pts)])
    forward = next(p for p in pts if p.name.startswith("forward__"))
    assert torch.load(forward)["segments"] == hand_snapshot["segments"]  # the seed's analysis step
    assert [c[0] for c in cuda.calls].count("snapshot") == 7


def test_both_files_or_neither(tmp_path: Path, hand_snapshot: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure writing either file leaves no .pt, no .pickle and no temporary file behind."""
    import my_utils.memory.snapshot as mod

    def no_pickle(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as m:
        m.setattr(mod.pickle, "dump", no_pickle)
        with pytest.raises(OSError, match="No space"):
            save_snapshot(tmp_path / "a.pt", hand_snapshot)
    assert list(tmp_path.iterdir()) == []

    real_replace = os.replace

    def pt_rename_fails(src: str, dst: str) -> None:
        if str(dst).endswith(".pt"):
            raise OSError(5, "Input/output error")
        real_replace(src, dst)

    with monkeypatch.context() as m:
        m.setattr(os, "replace", pt_rename_fails)
        with pytest.raises(OSError, match="Input/output"):
            save_snapshot(tmp_path / "b.pt", hand_snapshot)
    assert list(tmp_path.iterdir()) == []
    assert save_snapshot(tmp_path / "c.pt", hand_snapshot) == tmp_path / "c.pt"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.pickle", "c.pt"]


def test_other_names_get_the_pickle_alone(tmp_path: Path, hand_snapshot: dict) -> None:
    path = save_snapshot(tmp_path / "small.pickle", hand_snapshot)
    assert [p.name for p in tmp_path.iterdir()] == ["small.pickle"] and path.read_bytes()[:2] == b"\x80\x04"
    assert load_snapshot(path)["segments"] == hand_snapshot["segments"]
