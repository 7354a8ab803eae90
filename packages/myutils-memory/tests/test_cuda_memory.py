"""The torch.cuda.memory seam: on this CPU build it answers "unavailable" instead of raising; real dumps on a GPU."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import torch

from my_utils.memory.cuda_memory import CudaMemory, RecordingCudaMemory, TorchCudaMemory, default_cuda_memory
from my_utils.memory.snapshot import MemorySnapshotter
from my_utils.memory.snapshot_io import load_snapshot
from my_utils.memory.snapshot_summary import summarize_snapshot


def test_both_implement_the_protocol() -> None:
    assert isinstance(TorchCudaMemory(), CudaMemory) and isinstance(RecordingCudaMemory(), CudaMemory)
    assert isinstance(default_cuda_memory(), TorchCudaMemory)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU build's behaviour")
def test_cpu_build_answers_with_a_reason_while_torch_itself_raises() -> None:
    seam = TorchCudaMemory()
    assert seam.unavailable_reason() == ("torch.cuda.is_available() is False (no CUDA device or a CPU-only torch "
                                         "build)")
    with pytest.raises(AttributeError):  # why the seam asks first: the raw call fails on this build
        torch.cuda.memory._record_memory_history(enabled="all")
    with pytest.raises(RuntimeError, match="ask unavailable_reason"):
        seam.snapshot()


@pytest.mark.cuda
def test_real_history_and_snapshot_files(tmp_path: Path) -> None:
    """Nested regions on a GPU: real dumps, loadable by our reader, torch.load and pickle, history off at the end."""
    snap = MemorySnapshotter(tmp_path, enabled=True, rank=0)
    snap.start("outer")
    a = torch.empty(8 << 20, dtype=torch.uint8, device="cuda")
    snap.start("inner")
    b = torch.empty(16 << 20, dtype=torch.uint8, device="cuda")
    inner = snap.stop("inner")
    del b
    outer = snap.stop("outer")
    assert inner is not None and outer is not None
    data = load_snapshot(outer)
    assert torch.load(outer)["device_traces"] == data["device_traces"]  # the seed's call, weights_only=True
    assert pickle.loads(outer.with_suffix(".pickle").read_bytes())["device_traces"] == data["device_traces"]
    summary = summarize_snapshot(data)
    assert summary.peak_bytes >= 24 << 20 and [r.name for r in summary.regions] == ["inner", "outer"]
    # the last stop turned history off and freed it
    assert all(len(t) == 0 for t in torch.cuda.memory._snapshot()["device_traces"])
    del a
