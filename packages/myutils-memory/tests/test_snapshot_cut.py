"""cut_snapshot: the trace of a time range and the allocator state rewound to its end, readable by memory_viz."""

from __future__ import annotations

import base64
import json
import pickle
import random
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from my_utils.core.errors import UsageError
from my_utils.memory.snapshot import REGIONS_KEY
from my_utils.memory.snapshot_cut import cut_snapshot
from my_utils.memory.snapshot_io import validate_snapshot
from my_utils.memory.snapshot_summary import summarize_snapshot

MiB = 1 << 20


def _active(snapshot: dict[str, Any]) -> list[tuple[int, int]]:
    return [(b["address"], b["size"]) for seg in snapshot["segments"] for b in seg["blocks"]
            if b["state"] == "active_allocated"]


def test_state_rewound_to_the_end_of_the_range(hand_snapshot: dict[str, Any]) -> None:
    base = hand_snapshot["segments"][0]["address"]
    cut = cut_snapshot(hand_snapshot, 1.5, 3.5)  # holds the 2 MiB and the second 1 MiB alloc
    validate_snapshot(cut, "<cut>")
    assert [e["action"] for e in cut["device_traces"][0]] == ["alloc", "alloc"]
    # at 3.5 s: the 1 MiB (t=1), the 2 MiB (t=2, freed only at 4) and the 1 MiB (t=3) are live
    assert _active(cut) == [(base, MiB), (base + MiB, 2 * MiB), (base + 3 * MiB, MiB)]
    seg = cut["segments"][0]
    assert seg["allocated_size"] == 4 * MiB and sum(b["size"] for b in seg["blocks"]) == seg["total_size"]
    s = summarize_snapshot(cut)
    assert (s.baseline_bytes, s.peak_bytes, s.end_bytes) == (MiB, 4 * MiB, 4 * MiB)


def test_segment_mapped_after_the_range_disappears(hand_snapshot: dict[str, Any]) -> None:
    hand_snapshot["device_traces"][0][0]["time_us"] = 5_000_000  # segment mapped at the very end
    hand_snapshot["device_traces"][0].append(hand_snapshot["device_traces"][0].pop(0))
    cut = cut_snapshot(hand_snapshot, 0, 0.5)
    assert cut["segments"] == []


def test_regions_outside_the_range_are_dropped(hand_snapshot: dict[str, Any]) -> None:
    hand_snapshot[REGIONS_KEY] = [{"name": "early", "start_us": 0, "stop_us": 500_000},
                                  {"name": "late", "start_us": 3_000_000, "stop_us": 4_000_000}]
    cut = cut_snapshot(hand_snapshot, 2.5, 4)
    assert [r["name"] for r in cut[REGIONS_KEY]] == ["late"]


@pytest.mark.parametrize(("a", "b"), [(2, 1), (1, 1), (-1, 2)])
def test_bad_range_is_a_usage_error(hand_snapshot: dict[str, Any], a: float, b: float) -> None:
    with pytest.raises(UsageError, match="0 <= from < to"):
        cut_snapshot(hand_snapshot, a, b)


def test_memory_viz_reads_the_cut_of_a_real_profile(profile_snapshot: dict[str, Any]) -> None:
    """A CPU profile snapshot (no times: entry numbers) cut in half; memory_viz renders and replays it."""
    from torch.cuda import _memory_viz as mv

    n = len(profile_snapshot["device_traces"][0])
    cut = cut_snapshot(profile_snapshot, 0, n // 2)
    assert len(cut["device_traces"][0]) == n // 2 + 1  # entries 0 .. n//2 inclusive
    html = mv.trace_plot(cut)
    files = json.loads(re.search(r"const local_files = (\[.*?\])\n", html).group(1))  # type: ignore[union-attr]
    assert pickle.loads(base64.b64decode(files[0]["base64"])) == cut
    assert "segments:" in mv.segsum(cut)
    full, half = summarize_snapshot(profile_snapshot), summarize_snapshot(cut)
    assert half.entries == n // 2 + 1 and half.peak_bytes <= full.peak_bytes


def _random_history(rng: random.Random, n: int) -> dict[str, Any]:
    """A snapshot whose trace starts from an empty allocator: segments mapped and unmapped, blocks allocated and
    freed (free_requested, then free_completed), several entries per time stamp. The final segments are the forward
    replay of the whole trace, as the allocator would report them."""
    segments: dict[int, int] = {}  # base -> size
    live: dict[int, int] = {}  # addr -> size
    trace: list[dict[str, Any]] = []
    next_base = 1 << 32
    for i in range(n):
        t = (i // 2) * 1_000  # two entries share each time stamp
        roll = rng.random()
        free_slots = [(b, s) for b in segments for s in range(8) if b + s * MiB not in live]
        if not segments or roll < 0.08:
            trace.append({"action": "segment_alloc", "addr": next_base, "size": 8 * MiB, "time_us": t, "frames": []})
            segments[next_base] = 8 * MiB
            next_base += 16 * MiB
        elif roll < 0.12 and any(not any(b <= a < b + s for a in live) for b, s in segments.items()):
            base = next(b for b, s in segments.items() if not any(b <= a < b + s for a in live))
            trace.append({"action": "segment_free", "addr": base, "size": segments.pop(base), "time_us": t,
                          "frames": []})
        elif (roll < 0.6 or not live) and free_slots:
            base, slot = rng.choice(free_slots)
            size = rng.randint(1, MiB)
            trace.append({"action": "alloc", "addr": base + slot * MiB, "size": size, "time_us": t,
                          "frames": [{"name": f"f{slot}", "filename": "m.py", "line": slot}]})
            live[base + slot * MiB] = size
        elif live:
            addr = rng.choice(sorted(live))
            size = live.pop(addr)
            trace.append({"action": "free_requested", "addr": addr, "size": size, "time_us": t, "frames": []})
            trace.append({"action": "free_completed", "addr": addr, "size": size, "time_us": t, "frames": []})
    state = [{"device": 0, "address": b, "total_size": s, "blocks": [
        {"address": a, "size": live[a], "state": "active_allocated", "frames": []}
        for a in sorted(live) if b <= a < b + s]} for b, s in sorted(segments.items())]
    return {"segments": state, "device_traces": [trace]}


def _replay(entries: list[dict[str, Any]], segments: dict[int, int], live: dict[int, int]) -> None:
    """Apply trace entries forward to a state (segments base -> size, live blocks addr -> size)."""
    for e in entries:
        if e["action"] == "segment_alloc":
            segments[e["addr"]] = e["size"]
        elif e["action"] == "segment_free":
            del segments[e["addr"]]
        elif e["action"] == "alloc":
            live[e["addr"]] = e["size"]
        elif e["action"] == "free_completed":
            del live[e["addr"]]


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(st.integers(0, 2**32), st.integers(20, 160), st.floats(0, 1), st.floats(0, 1))
def test_replaying_the_cut_from_its_start_state_gives_its_segments(seed: int, n: int, a: float, b: float) -> None:
    """The state at --from (replayed forward from the empty allocator, independently of the cut), plus the cut's
    own trace, is exactly the allocator state the cut carries; its trace is every entry with from <= t <= to."""
    snap = _random_history(random.Random(seed), n)
    trace = snap["device_traces"][0]
    end_s = trace[-1]["time_us"] / 1e6
    start_s, stop_s = sorted((round(a * end_s, 3), round(b * end_s, 3)))
    if stop_s <= start_s:
        stop_s = start_s + 0.001  # a range of one time stamp
    cut = cut_snapshot(snap, start_s, stop_s)
    lo, hi = start_s * 1e6, stop_s * 1e6
    assert cut["device_traces"][0] == [e for e in trace if lo <= e["time_us"] <= hi]
    segments: dict[int, int] = {}
    live: dict[int, int] = {}
    _replay([e for e in trace if e["time_us"] < lo], segments, live)  # the state at --from
    _replay(cut["device_traces"][0], segments, live)
    assert {(s["address"], s["total_size"]) for s in cut["segments"]} == set(segments.items())
    assert {(blk["address"], blk["size"]) for s in cut["segments"] for blk in s["blocks"]
            if blk["state"] == "active_allocated"} == set(live.items())
    for s in cut["segments"]:  # blocks tile each segment
        assert sum(blk["size"] for blk in s["blocks"]) == s["total_size"]
    validate_snapshot(cut, "<cut>")
