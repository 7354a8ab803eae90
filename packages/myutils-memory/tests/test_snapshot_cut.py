"""cut_snapshot: the trace of a time range and the allocator state rewound to its end, readable by memory_viz."""

from __future__ import annotations

import base64
import json
import pickle
import re
from typing import Any

import pytest

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
