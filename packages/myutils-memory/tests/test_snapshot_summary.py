"""summarize_snapshot: known answers on a hand-made snapshot, a real CPU-profile snapshot, and random traces."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from my_utils.memory.snapshot import REGIONS_KEY
from my_utils.memory.snapshot_summary import summarize_snapshot, theil_sen_slope
from my_utils.memory.summary_render import format_bytes, render_summary

MiB = 1 << 20


def test_hand_made_known_answers(hand_snapshot: dict[str, Any]) -> None:
    s = summarize_snapshot(hand_snapshot, windows=4)
    assert (s.peak_bytes, s.peak_at_s) == (4 * MiB, 3.0)
    assert (s.baseline_bytes, s.end_bytes, s.reserved_bytes) == (0, 2 * MiB, 4 * MiB)
    assert s.duration_s == 4.0
    assert s.top_stacks[0].frames == ("mlp (model.py:3)",) and s.top_stacks[0].total_bytes == 2 * MiB
    assert sorted(st.total_bytes for st in s.top_stacks) == [MiB, MiB, 2 * MiB]
    assert s.regions_are_windows and [r.name for r in s.regions] == [f"window {i}/4" for i in range(1, 5)]
    # windows of 1 s: 0-1 ends with 1 MiB, 1-2 with 3, 2-3 with 4, 3-4 with 2
    assert [r.stop_bytes for r in s.regions] == [MiB, 3 * MiB, 4 * MiB, 2 * MiB]
    assert sum(r.delta_bytes for r in s.regions) == s.end_bytes - s.baseline_bytes
    assert s.actions["alloc"] == 3 and s.entries == 6


def test_regions_recorded_by_the_snapshotter(hand_snapshot: dict[str, Any]) -> None:
    hand_snapshot[REGIONS_KEY] = [
        {"name": "forward", "start_us": 500_000, "stop_us": 3_500_000, "depth": 1},
        {"name": "step", "start_us": 0, "stop_us": 4_500_000, "depth": 0},
    ]
    s = summarize_snapshot(hand_snapshot)
    fwd, step = s.regions
    assert not s.regions_are_windows
    assert (fwd.name, fwd.start_bytes, fwd.stop_bytes, fwd.delta_bytes, fwd.peak_bytes) == \
        ("forward", 0, 4 * MiB, 4 * MiB, 4 * MiB)
    assert (step.delta_bytes, step.peak_bytes) == (2 * MiB, 4 * MiB)


def test_baseline_counts_memory_live_before_the_trace(hand_snapshot: dict[str, Any]) -> None:
    del hand_snapshot["device_traces"][0][1]  # the 1 MiB block is live at the end, its alloc unseen
    s = summarize_snapshot(hand_snapshot)
    assert s.baseline_bytes == MiB and s.peak_bytes == 4 * MiB and s.end_bytes == 2 * MiB


def test_real_cpu_profile_snapshot(profile_snapshot: dict[str, Any]) -> None:
    """Peak and totals against an independent replay of the same entries."""
    entries = [e for t in profile_snapshot["device_traces"] for e in t]  # one device, no times: in order
    live = peak = 0
    allocated = 0
    for e in entries:
        if e["action"] == "alloc":
            live += e["size"]
            allocated += e["size"]
        elif e["action"] == "free_completed":
            live -= e["size"]
        peak = max(peak, live)
    end = sum(b["size"] for seg in profile_snapshot["segments"] for b in seg["blocks"]
              if b["state"] == "active_allocated")
    baseline = end - live  # blocks the trace never saw allocated (weights made before profiling)
    s = summarize_snapshot(profile_snapshot)
    assert len(entries) > 50 and baseline >= 0
    assert (s.baseline_bytes, s.peak_bytes, s.end_bytes) == (baseline, baseline + peak, end)
    peak += baseline
    assert sum(x.total_bytes for x in summarize_snapshot(profile_snapshot, top=10**6).top_stacks) == allocated
    assert any("forward" in f or "linear" in f.lower() for x in s.top_stacks for f in x.frames)
    text = render_summary(s, "prof.pickle")
    assert f"peak in use: {format_bytes(peak)}" in text and "top allocation stacks" in text
    assert s.time_unit == "entry" and "records no times" in text


def test_growth_trend() -> None:
    trace = [{"action": "alloc", "addr": i, "size": MiB, "time_us": i * 1_000_000, "frames": []} for i in range(30)]
    s = summarize_snapshot({"segments": [], "device_traces": [trace]})
    assert s.growing and abs(s.slope_bytes_per_s - MiB) < 0.1 * MiB  # a staircase sampled at 20 points
    flat = [e for i in range(30) for e in (
        {"action": "alloc", "addr": i, "size": MiB, "time_us": i * 1_000_000, "frames": []},
        {"action": "free_completed", "addr": i, "size": MiB, "time_us": i * 1_000_000 + 500_000, "frames": []})]
    assert not summarize_snapshot({"segments": [], "device_traces": [flat]}).growing


def test_theil_sen_ignores_a_spike() -> None:
    xs = list(range(10))
    ys = [2.0 * x for x in xs]
    ys[5] = 1000.0
    assert theil_sen_slope(xs, ys) == 2.0
    assert theil_sen_slope([1.0], [1.0]) == 0.0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(1, 10_000)), min_size=1, max_size=60))
def test_peak_matches_brute_force(ops: list[tuple[bool, int]]) -> None:
    """Random alloc/free sequences: the peak is the maximum of the running sum."""
    trace: list[dict[str, Any]] = []
    live: list[tuple[int, int]] = []
    running = peak = 0
    for i, (alloc, size) in enumerate(ops):
        if alloc or not live:
            trace.append({"action": "alloc", "addr": i, "size": size, "time_us": i, "frames": []})
            live.append((i, size))
            running += size
        else:
            addr, old = live.pop(0)
            trace.append({"action": "free_completed", "addr": addr, "size": old, "time_us": i, "frames": []})
            running -= old
        peak = max(peak, running)
    s = summarize_snapshot({"segments": [], "device_traces": [trace]})
    assert s.peak_bytes == peak and s.end_bytes == running


def _freed_steadily(before_trace: bool) -> dict[str, Any]:
    """30 blocks of 1 MiB, freed one per second; allocated before the trace (live at its start) or at t=0."""
    frees = [{"action": "free_completed", "addr": i * MiB, "size": MiB, "time_us": (i + 1) * 1_000_000, "frames": []}
             for i in range(30)]
    allocs = [] if before_trace else [{"action": "alloc", "addr": i * MiB, "size": MiB, "time_us": 0, "frames": []}
                                      for i in range(30)]
    segment = {"device": 0, "address": 0, "total_size": 32 * MiB, "blocks": [{"size": 32 * MiB, "state": "inactive"}]}
    return {"segments": [segment], "device_traces": [allocs + frees]}


@pytest.mark.parametrize("before_trace", [True, False], ids=["allocated-before-the-trace", "allocated-at-start"])
def test_memory_freed_steadily_is_shrinking_never_growing(before_trace: bool) -> None:
    s = summarize_snapshot(_freed_steadily(before_trace))
    assert s.trend == "shrinking" and not s.growing
    assert abs(s.slope_bytes_per_s + MiB) < 0.1 * MiB
    text = render_summary(s, "freed.pickle")
    assert "trend: shrinking, -1.0" in text and "growing" not in text


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(st.lists(st.integers(1, 10 * MiB), min_size=3, max_size=40))
def test_a_trace_that_only_frees_is_never_growing(sizes: list[int]) -> None:
    """Whatever the sizes, memory that only goes down is never reported as growing."""
    frees = [{"action": "free_completed", "addr": i, "size": size, "time_us": (i + 1) * 1_000_000, "frames": []}
             for i, size in enumerate(sizes)]
    blocks = [{"size": sum(sizes), "state": "inactive"}]
    s = summarize_snapshot({"segments": [{"address": 0, "total_size": sum(sizes), "blocks": blocks}],
                            "device_traces": [frees]})
    assert s.trend in ("shrinking", "flat") and not s.growing
    assert s.baseline_bytes == sum(sizes) and s.end_bytes == 0
