"""Split complete (``X``) events into lanes where every lane nests properly.

Viewers drop an ``X`` event that partly overlaps another on the same thread (Perfetto:
``slice_drop_overlapping_complete_event``); real torch CPU traces have such events (a
``user_annotation`` that starts inside ``_record_function_enter_new`` and outlives it). Such
an event moves to the first extra lane where it nests, so nothing is dropped and every lane
loads cleanly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

SLACK_US = 0.001  # timestamps are µs with ns decimals: 1 ns of rounding is not an overlap


def pack(events: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Lanes of ``X`` events (``ts``/``dur`` in µs), the first holding as many as nest there."""
    lanes: list[list[dict[str, Any]]] = []
    stacks: list[list[float]] = []  # per lane: end times of the open slices, innermost last
    for ev in sorted(events, key=lambda e: (e["ts"], -e["dur"])):
        start, end = ev["ts"], ev["ts"] + ev["dur"]
        for lane, stack in zip(lanes, stacks, strict=True):
            while stack and stack[-1] <= start + SLACK_US:
                stack.pop()
            if not stack or end <= stack[-1] + SLACK_US:
                stack.append(end)
                lane.append(ev)
                break
        else:
            lanes.append([ev])
            stacks.append([end])
    return lanes
