"""The caching-allocator model that makes snapshots on the CPU: its rules, and snapshots memory_viz accepts."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from my_utils.memory.testing import CachingAllocatorModel, LlmShape, OutOfMemory, llm_training_snapshot

MiB = 1 << 20
F: list[dict[str, Any]] = [{"name": "step", "filename": "/home/me/train.py", "line": 3}]


def _blocks(snap: dict[str, Any]) -> list[tuple[int, int, str]]:
    return [(b["address"], b["size"], b["state"]) for seg in snap["segments"] for b in seg["blocks"]]


def test_small_and_large_pools_rounding_and_splitting() -> None:
    a = CachingAllocatorModel()
    small = a.malloc(100, F)  # rounded to 512 in a 2 MiB small segment
    mid = a.malloc(6 * MiB, F)  # a 20 MiB large segment, split: 14 MiB left (more than 1 MiB)
    tail = a.malloc(13 * MiB + 1, F)  # best fit: the 14 MiB left in that segment (its 1 MiB - 512 rest stays)
    big = a.malloc(15 * MiB + 1, F)  # >= 10 MiB, nothing free that large: its own segment, 2 MiB multiples
    snap = a.snapshot()
    sizes = sorted((seg["segment_type"], seg["total_size"]) for seg in snap["segments"])
    assert sizes == [("large", 16 * MiB), ("large", 20 * MiB), ("small", 2 * MiB)]
    assert [(e["action"], e["size"]) for e in snap["device_traces"][0]] == [
        ("segment_alloc", 2 * MiB), ("alloc", 100), ("segment_alloc", 20 * MiB), ("alloc", 6 * MiB),
        ("alloc", 13 * MiB + 1), ("segment_alloc", 16 * MiB), ("alloc", 15 * MiB + 1)]
    by_addr = {addr: (size, state) for addr, size, state in _blocks(snap)}
    assert by_addr[small] == (512, "active_allocated") and by_addr[mid] == (6 * MiB, "active_allocated")
    assert tail == mid + 6 * MiB and by_addr[tail] == (14 * MiB, "active_allocated")  # not split: 1 MiB is no rest
    assert by_addr[big] == (16 * MiB, "active_allocated")
    requested = {b["address"]: b["requested_size"] for seg in snap["segments"] for b in seg["blocks"]}
    assert requested[small] == 100 and requested[big] == 15 * MiB + 1  # the rounding is free space, internal


def test_best_fit_reuse_and_merging() -> None:
    a = CachingAllocatorModel()
    x, y, z = (a.malloc(6 * MiB, F) for _ in range(3))
    a.free(y)
    assert a.malloc(5 * MiB, F) == y  # the 6 MiB hole (best fit), not the 2 MiB tail; 1 MiB rest stays with it
    a.free(y)
    a.free(x)
    a.free(z)  # all merged back into one free block
    assert _blocks(a.snapshot()) == [(x, 20 * MiB, "inactive")]
    assert a.release_cache() == 20 * MiB and a.snapshot()["segments"] == []
    trace = a.snapshot()["device_traces"][0]
    assert [e["action"] for e in trace[-7:]] == ["free_requested", "free_completed"] * 3 + ["segment_free"]


def test_out_of_memory_frees_the_cache_then_records_an_oom() -> None:
    a = CachingAllocatorModel(device_bytes=40 * MiB)
    keep = a.malloc(12 * MiB, F)
    spare = a.malloc(12 * MiB, F)
    a.free(spare)
    a.malloc(26 * MiB, F)  # 12 + 12 + 26 > 40: the free 12 MiB segment is returned, then there is room
    actions = [e["action"] for e in a.snapshot()["device_traces"][0]]
    assert actions[-3:] == ["segment_free", "segment_alloc", "alloc"]
    with pytest.raises(OutOfMemory):
        a.malloc(8 * MiB, F)
    oom = a.snapshot()["device_traces"][0][-1]
    assert (oom["action"], oom["size"], oom["device_free"]) == ("oom", 8 * MiB, 40 * MiB - 38 * MiB)
    assert keep in a.live


def test_random_runs_keep_memory_viz_accounting(memviz_stats: Callable[..., dict[str, str]],
                                                memviz_replay: Callable[..., tuple[int, int]]) -> None:
    """memory_viz's segsum checks that blocks tile every segment; its replay must end where the segments are."""
    rng = random.Random(3)
    a = CachingAllocatorModel()
    live: list[int] = []
    for i in range(600):
        if live and rng.random() < 0.45:
            a.free(live.pop(rng.randrange(len(live))))
        else:
            live.append(a.malloc(rng.choice([100, 4096, 700_000, 3 * MiB, 9 * MiB, 25 * MiB + 7]), F))
        if i % 97 == 96:
            a.release_cache()
    snap = a.snapshot()
    memviz_stats(snap)  # raises on a segment whose blocks do not add up
    before, _ = memviz_replay(snap)
    assert before == 0
    for seg in snap["segments"]:
        assert sum(b["size"] for b in seg["blocks"]) == seg["total_size"]
        cursor = seg["address"]
        for b in seg["blocks"]:
            assert b["address"] == cursor
            cursor += b["size"]


def test_llm_run_is_deterministic_and_the_size_the_tests_assume() -> None:
    one, two = llm_training_snapshot(LlmShape(steps=3)), llm_training_snapshot(LlmShape(steps=3))
    assert one == two
    full = llm_training_snapshot()
    assert 10_000 <= len(full["device_traces"][0]) <= 11_500
