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
    # forward and attention still hold 1 MiB each at the end; mlp's 2 MiB was freed, so it comes last
    assert [st.frames for st in s.top_stacks] == [("forward (train.py:10)",), ("attention (model.py:7)",),
                                                  ("mlp (model.py:3)",)]
    assert [(st.live_end_bytes, st.live_at_peak_bytes, st.total_bytes) for st in s.top_stacks] == \
        [(MiB, MiB, MiB), (MiB, MiB, MiB), (0, 2 * MiB, 2 * MiB)]
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
    every = summarize_snapshot(profile_snapshot, top=10**6, frames="all").top_stacks  # grouped as below
    assert sum(x.total_bytes for x in every) == allocated
    # live bytes per stack at the end, replayed independently: a free belongs to the alloc at its address
    owner: dict[int, tuple[Any, ...]] = {}
    held: dict[tuple[Any, ...], int] = {}
    for e in entries:
        key = tuple((f["name"], f["filename"], f["line"]) for f in e["frames"][:4])
        if e["action"] == "alloc":
            owner[e["addr"]] = key
            held[key] = held.get(key, 0) + e["size"]
        elif e["action"] == "free_completed" and e["addr"] in owner:
            k = owner.pop(e["addr"])
            held[k] -= e["size"]
    assert [x.live_end_bytes for x in every] == sorted(held.values(), reverse=True)
    assert any(v > 0 for v in held.values())  # the profile ends with live activations/gradients
    assert any("forward" in f or "linear" in f.lower() for x in s.top_stacks for f in x.frames)
    text = render_summary(s, "prof.pickle")
    assert f"peak in use: {format_bytes(peak)}" in text and "allocation stacks by bytes still live at the end" in text
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


LEAK = {"filename": "train.py", "line": 42, "name": "keep_history"}
SCRATCH = {"filename": "model.py", "line": 7, "name": "attention_scratch"}


def _leak_and_scratch(steps: int = 30) -> dict[str, Any]:
    """Each 1 s step: a 2 MiB scratch buffer allocated and freed half a step later, and 1 MiB kept for good."""
    trace: list[dict[str, Any]] = []
    for step in range(steps):
        t = step * 1_000_000
        trace += [
            {"action": "alloc", "addr": 1 << 40, "size": 2 * MiB, "time_us": t, "frames": [SCRATCH]},
            {"action": "alloc", "addr": step * MiB, "size": MiB, "time_us": t + 100_000, "frames": [LEAK]},
            {"action": "free_completed", "addr": 1 << 40, "size": 2 * MiB, "time_us": t + 500_000,
             "frames": [SCRATCH]},
        ]
    blocks = [{"address": step * MiB, "size": MiB, "state": "active_allocated", "frames": [LEAK]}
              for step in range(steps)]
    return {"segments": [{"address": 0, "total_size": 64 * MiB, "blocks": blocks}], "device_traces": [trace]}


def test_stacks_are_ranked_by_what_they_still_hold() -> None:
    """The 2 MiB/step scratch buffer allocates twice the bytes of the 1 MiB/step leak; the leak holds the memory."""
    s = summarize_snapshot(_leak_and_scratch())
    leak, scratch = s.top_stacks
    assert leak.frames == ("keep_history (train.py:42)",) and scratch.frames == ("attention_scratch (model.py:7)",)
    assert (leak.live_end_bytes, leak.total_bytes, leak.count) == (30 * MiB, 30 * MiB, 30)
    assert (scratch.live_end_bytes, scratch.total_bytes, scratch.count) == (0, 60 * MiB, 30)
    # the peak: step 29 with its scratch buffer live, 29 MiB of leak before it plus this step's
    assert s.peak_bytes == 32 * MiB and (leak.live_at_peak_bytes, scratch.live_at_peak_bytes) == (30 * MiB, 2 * MiB)
    assert [st.frames for st in s.growing_stacks] == [leak.frames]
    assert abs(leak.growth_bytes_per_s - MiB) < 0.1 * MiB and abs(scratch.growth_bytes_per_s) < 0.01 * MiB
    text = render_summary(s, "leak.pickle")
    table = text.split("allocation stacks by bytes still live at the end")[1].splitlines()
    assert "keep_history" in table[2] and "attention_scratch" in table[3]  # after the title and the header
    assert table[2].split()[:2] == ["30.00", "MiB"]
    grow = text.split("growing stacks (live bytes per s, Theil-Sen):\n")[1].split("\n\n")[0].splitlines()
    assert grow[0].strip().startswith("+1.0") and grow[0].endswith("keep_history (train.py:42)") and len(grow) == 1


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.booleans(), st.integers(1, 10_000)), min_size=1, max_size=60),
       st.integers(0, 5))
def test_live_bytes_per_stack_add_up(ops: list[tuple[int, bool, int]], before: int) -> None:
    """Random allocs and frees from four stacks, some frees of blocks live before the trace: the stacks' live bytes
    (plus what remains of the baseline) add up to the total in use at the end and at the peak."""
    trace: list[dict[str, Any]] = []
    live: list[tuple[int, int]] = [(-(i + 1), 100) for i in range(before)]  # allocated before the trace
    for i, (stack, alloc, size) in enumerate(ops):
        if alloc or not live:
            trace.append({"action": "alloc", "addr": i, "size": size, "time_us": i,
                          "frames": [{"name": f"s{stack}", "filename": "x.py", "line": stack}]})
            live.append((i, size))
        else:
            addr, old = live.pop(0)
            trace.append({"action": "free_completed", "addr": addr, "size": old, "time_us": i, "frames": []})
    blocks = [{"address": addr if addr >= 0 else 10**9 - addr, "size": size, "state": "active_allocated"}
              for addr, size in live]  # what is still live at the end is in the segments
    s = summarize_snapshot({"segments": [{"address": 0, "total_size": 1, "blocks": blocks}],
                            "device_traces": [trace]}, top=10)
    assert s.baseline_bytes == 100 * before
    assert sum(x.live_end_bytes for x in s.top_stacks) + s.baseline_end_bytes == s.end_bytes
    assert s.baseline_end_bytes == 100 * sum(1 for addr, _ in live if addr < 0)
    if s.peak_bytes > s.baseline_bytes:
        assert sum(x.live_at_peak_bytes for x in s.top_stacks) <= s.peak_bytes
    ends = [x.live_end_bytes for x in s.top_stacks]
    assert ends == sorted(ends, reverse=True)
