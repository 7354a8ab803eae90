"""The allocator's state and the findings it supports, on snapshots made by the allocator model with known values.

Each scenario is small enough to follow by hand; the expected bytes are written from the
allocator's rules (20 MiB segments below 10 MiB, 2 MiB small segments, best fit, split when more
than 1 MiB is left), not read from the code under test. Each finding is tested on an input built
to be that case and on one built to look like it but not be.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from torch.cuda import _memory_viz

from my_utils.memory.allocator_advice import EXPANDABLE, Kind, allocator_findings
from my_utils.memory.snapshot_summary import MemorySummary, summarize_snapshot
from my_utils.memory.summary_render import render_summary
from my_utils.memory.testing import CachingAllocatorModel, OutOfMemory

MiB, GiB = 1 << 20, 1 << 30
F: list[dict[str, Any]] = [{"name": "step", "filename": "/home/me/train.py", "line": 3}]


def _kinds(s: MemorySummary) -> dict[Kind, Any]:
    return {f.kind: f for f in allocator_findings(s.allocator, peak_bytes=s.peak_bytes, entries=s.entries,
                                                  timed=s.time_unit == "s")}


def holes() -> dict[str, Any]:
    """14 MiB allocated, freed and returned; then three 6 MiB blocks in a 20 MiB segment, the middle one freed; a
    7 MiB request that fits no hole (a second 20 MiB segment); 100 bytes in a 2 MiB small segment."""
    a = CachingAllocatorModel()
    a.free(a.malloc(14 * MiB, F))
    a.release_cache()
    _, q, _ = (a.malloc(6 * MiB, F) for _ in range(3))
    a.free(q)
    a.malloc(7 * MiB, F)
    a.malloc(100, F)
    return a.snapshot()


def test_known_fragmentation_and_churn_figures(memviz_stats: Callable[..., dict[str, str]]) -> None:
    snap = holes()
    s = summarize_snapshot(snap)
    a = s.allocator
    assert a is not None and a.recorded
    assert (len(a.segments), a.reserved_bytes) == (3, 42 * MiB)
    assert a.allocated_bytes == 19 * MiB + 100 and a.internal_free_bytes == 512 - 100
    assert a.external_free_bytes == (6 + 2 + 13) * MiB + (2 * MiB - 512)
    assert a.free_bytes == 42 * MiB - (19 * MiB + 100)
    assert (a.largest_free_bytes, a.largest_request_bytes) == (13 * MiB, 14 * MiB)
    assert (a.segment_allocs, a.segment_alloc_bytes, a.segment_frees, a.segment_free_bytes) == \
        (4, (14 + 20 + 20 + 2) * MiB, 1, 14 * MiB)
    assert (a.round_trips, a.reserved_before_bytes, a.max_reserved_bytes) == (3, 0, 42 * MiB)
    free = sorted((g.total_bytes, g.free_bytes, g.largest_free_bytes) for g in a.segments)
    assert free == [(2 * MiB, 2 * MiB - 100, 2 * MiB - 512), (20 * MiB, 8 * MiB, 6 * MiB), (20 * MiB, 13 * MiB, 13 * MiB)]
    fmt = _memory_viz._format_size
    assert memviz_stats(snap) == {"segments": "3", "total_reserved": fmt(42 * MiB),
                                  "total_allocated": fmt(19 * MiB + 100),
                                  "total_free": f"{fmt(a.free_bytes)} ({100 * 412 / a.free_bytes:.1f}% internal)"}
    found = _kinds(s)
    assert set(found) == {Kind.CHURN, Kind.FREE_TOO_SMALL}
    assert found[Kind.CHURN].severity == "info"  # 3 round trips: fewer than 10
    assert "the largest is 13.00 MiB" in found[Kind.FREE_TOO_SMALL].evidence
    assert "14.00 MiB, would need a new segment" in found[Kind.FREE_TOO_SMALL].evidence


def test_free_too_small_look_alike_has_too_little_free_space() -> None:
    """Largest request above the largest free block, but less free in all than the request: no finding."""
    a = CachingAllocatorModel()
    a.malloc(6 * MiB, F)
    a.malloc(13 * MiB, F)  # takes the 14 MiB left in the first segment whole (1 MiB is no rest to split off)
    a.malloc(13 * MiB + 512, F)  # needs its own 14 MiB segment: nothing is free
    s = summarize_snapshot(a.snapshot())
    assert s.allocator is not None and s.allocator.external_free_bytes < s.allocator.largest_request_bytes
    assert Kind.FREE_TOO_SMALL not in _kinds(s)


def test_fragmentation_when_reserved_exceeds_any_peak() -> None:
    """1 GiB freed, then 600 MiB (split out of that block) and 500 MiB (fits no hole): 1.49 GiB reserved for a
    1100 MiB peak."""
    a = CachingAllocatorModel()
    a.free(a.malloc(GiB, F))
    a.malloc(600 * MiB, F)
    a.malloc(500 * MiB, F)
    s = summarize_snapshot(a.snapshot())
    assert s.peak_bytes == 1100 * MiB and s.allocator is not None and s.allocator.max_reserved_bytes == 1524 * MiB
    f = _kinds(s)[Kind.FRAGMENTATION]
    assert f.severity == "warning" and "424.00 MiB (27.8 % of reserved) was never in use at once" in f.evidence
    assert EXPANDABLE in f.advice


def test_free_cache_at_the_end_is_not_fragmentation() -> None:
    """1 GiB allocated and freed: all of it free at the end, but the peak needed all of it."""
    a = CachingAllocatorModel()
    a.free(a.malloc(GiB, F))
    s = summarize_snapshot(a.snapshot())
    assert s.allocator is not None and s.allocator.free_bytes == GiB and s.allocator.max_reserved_bytes == s.peak_bytes
    assert _kinds(s) == {}
    assert "findings: none" in render_summary(s, "x.pickle")


def _loop(empty_cache: bool, steps: int = 12) -> dict[str, Any]:
    a = CachingAllocatorModel()
    kept = []
    for _ in range(steps):
        a.tick(1000)
        if empty_cache:
            a.free(a.malloc(50 * MiB, F))
            a.release_cache()
        else:
            kept.append(a.malloc(50 * MiB, F))  # the cache grows: warm-up, nothing returned
    return a.snapshot()


def test_churn_from_empty_cache_in_the_loop() -> None:
    s = summarize_snapshot(_loop(empty_cache=True))
    a = s.allocator
    assert a is not None and (a.segment_allocs, a.segment_frees, a.round_trips) == (12, 12, 11)
    f = _kinds(s)[Kind.CHURN]
    assert f.severity == "warning" and "12 cudaFree (600.00 MiB) and 12 cudaMalloc (600.00 MiB)" in f.evidence
    assert "24 of 60 entries" in f.evidence and "empty_cache" in f.advice


def test_growth_without_frees_is_not_churn() -> None:
    s = summarize_snapshot(_loop(empty_cache=False))
    a = s.allocator
    assert a is not None and (a.segment_allocs, a.segment_frees, a.round_trips) == (12, 0, 0)
    assert Kind.CHURN not in _kinds(s)
    assert "no segment allocated after a free, so no churn" in render_summary(s, "x.pickle")


def test_churn_advice_when_expandable_segments_are_on() -> None:
    snap = _loop(empty_cache=True)
    snap["allocator_settings"] = {"expandable_segments": True}
    f = _kinds(summarize_snapshot(snap))[Kind.CHURN]
    assert "expandable segments are on already" in f.advice and EXPANDABLE not in f.advice


def _oom(free_middles: bool) -> dict[str, Any]:
    """A 40 MiB device: two 20 MiB segments of three 6 MiB blocks; then 8 MiB, which no block holds."""
    a = CachingAllocatorModel(device_bytes=40 * MiB)
    blocks = [a.malloc(6 * MiB, F) for _ in range(6)]
    if free_middles:
        a.free(blocks[1])
        a.free(blocks[4])
    with pytest.raises(OutOfMemory):
        a.malloc(8 * MiB, F)
    return a.snapshot()


@pytest.mark.parametrize(("free_middles", "kind", "in_use", "cached"), [
    (True, Kind.OOM_CACHED, 24 * MiB, 16 * MiB),
    (False, Kind.OOM_NEEDED, 36 * MiB, 4 * MiB),
])
def test_a_failed_request_and_whether_the_cache_could_have_served_it(free_middles: bool, kind: Kind, in_use: int,
                                                                     cached: int) -> None:
    s = summarize_snapshot(_oom(free_middles))
    a = s.allocator
    assert a is not None and len(a.ooms) == 1
    oom = a.ooms[0]
    assert (oom.requested_bytes, oom.device_free_bytes, oom.reserved_bytes, oom.in_use_bytes) == \
        (8 * MiB, 0, 40 * MiB, in_use)
    found = _kinds(s)
    assert set(found) & {Kind.OOM_CACHED, Kind.OOM_NEEDED} == {kind}
    assert f"{cached // MiB}.00 MiB was cached but not allocated" in found[kind].evidence
    assert (EXPANDABLE in found[kind].advice) is (kind is Kind.OOM_CACHED)


def test_a_profile_made_snapshot_has_no_allocator(profile_snapshot: dict[str, Any]) -> None:
    s = summarize_snapshot(profile_snapshot)
    assert s.allocator is not None and not s.allocator.recorded
    assert set(_kinds(s)) == {Kind.NOT_RECORDED, Kind.NO_TIMES}
    text = render_summary(s, "prof.pickle")
    assert "reserved: not recorded (segments made from a CPU profile)" in text
    assert "allocator: not recorded" in text and "reserved at the end" not in text


def _random_run(seed: int) -> dict[str, Any]:
    import random

    rng = random.Random(seed)
    a = CachingAllocatorModel()
    live: list[int] = []
    for i in range(400):
        a.tick(rng.randint(1, 500))
        if live and rng.random() < 0.45:
            a.free(live.pop(rng.randrange(len(live))))
        else:
            live.append(a.malloc(rng.choice([100, 4096, 700_000, 3 * MiB, 9 * MiB, 25 * MiB + 7]), F))
        if i % 50 == 49:
            a.release_cache()
    return a.snapshot()


@pytest.mark.parametrize("name", ["hand", "profile", "llm", "holes", "loop", "oom", "random0", "random1"])
def test_totals_equal_memory_viz_stats_and_replay(name: str, request: pytest.FixtureRequest,
                                                  memviz_stats: Callable[..., dict[str, str]],
                                                  memviz_replay: Callable[..., tuple[int, int]]) -> None:
    """Every snapshot of these tests: reserved, allocated, free and segments as memory_viz prints them; the start
    and the peak as memory_viz's page replays them."""
    made = {"hand": lambda: request.getfixturevalue("hand_snapshot"),
            "profile": lambda: request.getfixturevalue("profile_snapshot"),
            "llm": lambda: request.getfixturevalue("llm_snapshot"), "holes": holes,
            "loop": lambda: _loop(empty_cache=True), "oom": lambda: _oom(True),
            "random0": lambda: _random_run(0), "random1": lambda: _random_run(1)}
    snap = made[name]()
    s = summarize_snapshot(snap)
    a = s.allocator
    assert a is not None
    fmt = _memory_viz._format_size
    stats = memviz_stats(snap)
    assert (stats["segments"], stats["total_reserved"], stats["total_allocated"]) == \
        (str(len(a.segments)), fmt(a.reserved_bytes), fmt(a.allocated_bytes))
    internal = f" ({100 * a.internal_free_bytes / a.free_bytes:.1f}% internal)" if a.free_bytes else ""
    assert stats["total_free"] == fmt(a.free_bytes) + internal
    before, peak = memviz_replay(snap, device=len(snap["device_traces"]) - 1 if name == "profile" else 0)
    assert s.baseline_bytes == before and s.peak_bytes == max(peak, before)
