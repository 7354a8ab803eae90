"""summarize on snapshots recorded with C++ stacks: the CNN recorded on a GPU (shared) and a generated Llama run.

Every expected figure is computed here from the raw dict (or by torch's own ``_memory_viz``), never
from the code under test: totals against ``_memory_viz.segsum`` (what ``python -m
torch.cuda._memory_viz stats`` prints), peak and start against memory_viz's replay rules, each stack's
live bytes at the peak against a replay that groups allocations by a rule written here.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from torch.cuda import _memory_viz

from my_utils.memory.allocator_advice import Kind, allocator_findings
from my_utils.memory.snapshot_summary import MemorySummary, summarize_snapshot
from my_utils.memory.summary_render import render_summary

MiB = 1 << 20
ALLOCATOR_WORDS = ("torch::unwind", "CapturedTraceback", "gather_with_cpp", "CUDACachingAllocator",
                   "at::detail::empty", "wrap_kernel_functor", "c10::Dispatcher")
TORCH = "site-packages/torch/"


def _python(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f for f in frames if f["filename"].endswith(".py")]


def _key(frames: list[dict[str, Any]]) -> tuple[Any, ...] | None:
    """This test's own grouping of a stack with Python frames: the innermost Python frame when it is PyTorch's,
    and the first four Python frames outside PyTorch."""
    py = _python(frames)
    if not py:
        return None
    op = (py[0]["name"], py[0]["line"]) if TORCH in py[0]["filename"] else None
    return op, tuple((f["name"], f["filename"], f["line"]) for f in py if TORCH not in f["filename"])[:4]


def _bytes_at_peak(snapshot: dict[str, Any]) -> dict[Any, int]:
    """Bytes live at the first moment the trace's total peaks, by this test's ``_key`` (None: no Python frame)."""
    out: dict[Any, int] = {}
    live: dict[int, tuple[int, list[dict[str, Any]]]] = {}
    total = best = 0
    snap: dict[int, tuple[int, list[dict[str, Any]]]] = {}
    for e in snapshot["device_traces"][0]:
        if e["action"] == "alloc":
            live[e["addr"]] = (e["size"], e["frames"])
            total += e["size"]
        elif e["action"] == "free_completed":
            total -= live.pop(e["addr"], (e["size"], None))[0]
        else:
            continue
        if total > best:
            best, snap = total, dict(live)
    for size, frames in snap.values():
        out[_key(frames)] = out.get(_key(frames), 0) + size
    return out


def _check_user_stacks(summary: MemorySummary, snapshot: dict[str, Any]) -> None:
    """At least 10 stacks; none named by the allocator; each listed Python stack's bytes at the peak as replayed."""
    assert summary.stacks_seen >= 10 and len(summary.top_stacks) == 10
    by_key = _bytes_at_peak(snapshot)
    for st in summary.top_stacks + summary.peak_stacks + summary.growing_stacks:
        first = st.operation or st.frames[0]
        assert not any(word in first for word in ALLOCATOR_WORDS), first
        assert all(TORCH not in f and "torch/" not in f.split(" (")[1] for f in st.frames), st.frames
        example = [{"name": n, "filename": f, "line": line} for n, f, line in st.full_stack]
        key = _key(example)
        if key is not None:
            assert st.live_at_peak_bytes == by_key.get(key, 0), (st, key)
    cxx_only_at_peak = by_key.get(None, 0)
    every = summarize_snapshot(snapshot, top=10**6)
    assert sum(st.live_at_peak_bytes for st in every.top_stacks if not st.frames) == cxx_only_at_peak


def _check_totals(summary: MemorySummary, snapshot: dict[str, Any], stats: dict[str, str]) -> None:
    """memory_viz's totals, as it prints them, and the same bytes recomputed here from the segments."""
    a = summary.allocator
    assert a is not None and a.recorded
    fmt = _memory_viz._format_size
    assert stats["segments"] == str(len(a.segments))
    assert stats["total_reserved"] == fmt(a.reserved_bytes)
    assert stats["total_allocated"] == fmt(a.allocated_bytes)
    internal = 100 * a.internal_free_bytes / a.free_bytes
    assert stats["total_free"] == f"{fmt(a.free_bytes)} ({internal:.1f}% internal)"
    blocks = [b for seg in snapshot["segments"] for b in seg["blocks"]]
    reserved = sum(seg["total_size"] for seg in snapshot["segments"])
    allocated = sum(b["requested_size"] for b in blocks if b["state"] == "active_allocated")
    assert (a.reserved_bytes, a.allocated_bytes, a.free_bytes) == (reserved, allocated, reserved - allocated)
    assert a.largest_free_bytes == max(b["size"] for b in blocks if b["state"] == "inactive")


def _check_replay(summary: MemorySummary, snapshot: dict[str, Any],
                  replay: Callable[..., tuple[int, int]]) -> tuple[int, int]:
    before, peak = replay(snapshot)
    assert (summary.baseline_bytes, summary.peak_bytes) == (before, peak)
    return before, peak


def _segment_calls(snapshot: dict[str, Any]) -> tuple[int, int, int]:
    """(cudaMalloc, cudaFree, cudaMalloc after a cudaFree) counted from the trace's segment entries."""
    actions = [e["action"] for e in snapshot["device_traces"][0]]
    first_free = actions.index("segment_free") if "segment_free" in actions else len(actions)
    return (actions.count("segment_alloc"), actions.count("segment_free"),
            actions[first_free:].count("segment_alloc"))


# -- the CNN recorded on a GPU by someone else ------------------------------------------------------------


def test_shared_snapshot_names_the_users_code(eor_snapshot: tuple[Path, dict[str, Any]]) -> None:
    path, snap = eor_snapshot
    s = summarize_snapshot(snap)
    _check_user_stacks(s, snap)
    every = summarize_snapshot(snap, top=10**6).top_stacks
    operations = {st.operation.split(" (")[0] + " (" + st.operation.split(" (")[1].split(":")[0]
                  for st in every if "(" in st.operation and ".py:" in st.operation}
    assert {"batch_norm (torch/nn/functional.py", "_max_pool2d (torch/nn/functional.py",
            "forward (torch/nn/modules/linear.py"} <= operations
    assert any(f.startswith("forward (regressors/latent_cnn.py:") for st in every for f in st.frames)
    # allocations with no Python frame at all go to an ATen operator, never to the allocator
    no_python = [e for e in snap["device_traces"][0] if e["action"] == "alloc" and not _python(e["frames"])]
    cxx = [st for st in every if not st.frames]
    assert sum(st.count for st in cxx) == len(no_python) == 1331
    assert all(st.operation.startswith("aten::") for st in cxx)
    text = render_summary(s, str(path))
    table = text.split("allocation stacks by bytes still live at the end (10 of ")[1].splitlines()[2:12]
    assert len(table) == 10 and not any(w in line for line in table for w in ALLOCATOR_WORDS)


def test_shared_snapshot_totals_equal_memory_viz_stats(eor_snapshot: tuple[Path, dict[str, Any]],
                                                       memviz_stats: Callable[..., dict[str, str]]) -> None:
    _, snap = eor_snapshot
    s = summarize_snapshot(snap)
    stats = memviz_stats(snap)
    assert stats == {"segments": "10", "total_reserved": "128.0MiB", "total_allocated": "46.5MiB",
                     "total_free": "81.5MiB (0.0% internal)"}
    _check_totals(s, snap, stats)


def test_memory_viz_command_line_prints_the_same_totals(eor_snapshot: tuple[Path, dict[str, Any]]) -> None:
    """The very command a user runs: ``python -m torch.cuda._memory_viz stats FILE``."""
    path, snap = eor_snapshot
    proc = subprocess.run([sys.executable, "-m", "torch.cuda._memory_viz", "stats", str(path)], capture_output=True,
                          text=True, timeout=300, check=True)
    a = summarize_snapshot(snap).allocator
    assert a is not None
    fmt = _memory_viz._format_size
    assert f"total_reserved: {fmt(a.reserved_bytes)}" in proc.stdout
    assert f"total_allocated: {fmt(a.allocated_bytes)}" in proc.stdout
    assert f"segments: {len(a.segments)}" in proc.stdout


def test_shared_snapshot_peak_and_start_equal_memory_viz_replay(eor_snapshot: tuple[Path, dict[str, Any]],
                                                                memviz_replay: Callable[..., tuple[int, int]]) -> None:
    _, snap = eor_snapshot
    s = summarize_snapshot(snap)
    before, peak = _check_replay(s, snap, memviz_replay)
    # memory_viz counts memory from before the trace in requested bytes, as the trace counts its own
    assert (f"{before / MiB:.2f}", f"{peak / MiB:.2f}") == ("8.37", "103.24")
    assert peak - before == max_running(snap)


def max_running(snapshot: dict[str, Any]) -> int:
    total = best = 0
    for e in snapshot["device_traces"][0]:
        total += e["size"] if e["action"] == "alloc" else -e["size"] if e["action"] == "free_completed" else 0
        best = max(best, total)
    return best


def test_shared_snapshot_fragmentation_and_churn(eor_snapshot: tuple[Path, dict[str, Any]]) -> None:
    _, snap = eor_snapshot
    s = summarize_snapshot(snap)
    a = s.allocator
    assert a is not None
    assert (a.segment_allocs, a.segment_frees, a.round_trips) == _segment_calls(snap) == (7, 0, 0)
    grown = sum(e["size"] for e in snap["device_traces"][0] if e["action"] == "segment_alloc")
    assert a.reserved_before_bytes == a.reserved_bytes - grown and a.max_reserved_bytes == a.reserved_bytes
    assert a.free_bytes == 128 * MiB - a.allocated_bytes and f"{a.free_bytes / MiB:.1f}" == "81.5"
    per_segment = {seg["address"]: seg["total_size"] - sum(b["requested_size"] for b in seg["blocks"]
                                                           if b["state"] == "active_allocated")
                   for seg in snap["segments"]}
    assert {g.address: g.free_bytes for g in a.segments} == per_segment
    kinds = {f.kind for f in allocator_findings(a, peak_bytes=s.peak_bytes, entries=s.entries, timed=True)}
    assert kinds == set()  # the cache grew (warm-up), nothing returned; reserved within 25 % of the peak


# -- the held-out snapshot: a Llama run made by my_utils.memory.testing -------------------------------------


def test_llm_snapshot_names_the_model_code(llm_snapshot: dict[str, Any]) -> None:
    s = summarize_snapshot(llm_snapshot)
    _check_user_stacks(s, llm_snapshot)
    every = summarize_snapshot(llm_snapshot, top=10**6).top_stacks
    assert any(st.operation == "forward (torch/nn/modules/linear.py:125)" and
               st.frames[0].startswith("forward (transformers/models/llama/modeling_llama.py:") for st in every)
    assert any(st.operation.startswith("aten::mm in MmBackward0") for st in every)


def test_llm_snapshot_totals_peak_and_churn(llm_snapshot: dict[str, Any],
                                            memviz_stats: Callable[..., dict[str, str]],
                                            memviz_replay: Callable[..., tuple[int, int]]) -> None:
    s = summarize_snapshot(llm_snapshot)
    _check_totals(s, llm_snapshot, memviz_stats(llm_snapshot))
    _check_replay(s, llm_snapshot, memviz_replay)
    a = s.allocator
    assert a is not None
    allocs, frees, trips = _segment_calls(llm_snapshot)
    assert (a.segment_allocs, a.segment_frees, a.round_trips) == (allocs, frees, trips)
    assert allocs + frees > 500 and trips > 100
    findings = allocator_findings(a, peak_bytes=s.peak_bytes, entries=s.entries, timed=True)
    churn = [f for f in findings if f.kind is Kind.CHURN]
    assert len(churn) == 1 and churn[0].severity == "warning"
    assert f"{frees} cudaFree" in churn[0].evidence and f"{allocs} cudaMalloc" in churn[0].evidence
    assert f"{allocs + frees} of {len(llm_snapshot['device_traces'][0])} entries" in churn[0].evidence
    assert "empty_cache" in churn[0].advice and "expandable_segments:True" in churn[0].advice


@pytest.mark.parametrize("view", ["python", "all"])
def test_other_views_keep_pytorchs_frames(eor_snapshot: tuple[Path, dict[str, Any]], view: str) -> None:
    """--frames python names stacks by every Python frame; --frames all by the frames as recorded (the allocator)."""
    _, snap = eor_snapshot
    s = summarize_snapshot(snap, frames=view, top=50)
    firsts = {st.frames[0] for st in s.top_stacks if st.frames}
    if view == "python":
        assert any(f.startswith("batch_norm (torch/nn/functional.py:") for f in firsts)
    else:
        assert firsts == {"torch::unwind::unwind()"} and s.stacks_seen == 1
