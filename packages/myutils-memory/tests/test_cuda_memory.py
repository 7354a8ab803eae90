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


@pytest.mark.cuda
def test_a_gpu_snapshot_with_cpp_stacks_is_named_by_this_file(tmp_path: Path) -> None:
    """stacks="all" on a GPU: every listed stack is named by this test's frames or an ATen operator, never the
    allocator; the totals equal memory_viz's stats on the same dict."""
    from torch.cuda import _memory_viz

    model = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 512)).cuda()
    torch.cuda.memory._record_memory_history(max_entries=100_000, stacks="all")
    try:
        for _ in range(3):
            model(torch.randn(256, 512, device="cuda")).sum().backward()
        data = torch.cuda.memory._snapshot()
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
    s = summarize_snapshot(data, top=50)
    assert s.allocator is not None and s.allocator.recorded
    for st in s.top_stacks:
        first = st.operation or st.frames[0]
        assert "unwind" not in first and "CachingAllocator" not in first, first
    assert any(f.startswith("test_a_gpu_snapshot_with_cpp_stacks_is_named_by_this_file (tests/test_cuda_memory.py:")
               for st in s.top_stacks for f in st.frames)
    assert any(st.operation.startswith("aten::") and not st.frames for st in s.top_stacks)  # the backward pass
    text = _memory_viz.segsum(data)
    assert f"total_reserved: {_memory_viz._format_size(s.allocator.reserved_bytes)}" in text
    assert f"total_allocated: {_memory_viz._format_size(s.allocator.allocated_bytes)}" in text
