"""What a memory snapshot says without a browser: peak, top allocation stacks, region deltas, trend.

The trace is replayed once per device: an ``alloc`` adds its size, a ``free_completed``
takes it away (as memory_viz does: memory is in use until the free completes). Memory
live before the trace began (blocks still allocated at the end that the trace never saw
allocated) is the baseline. Times are seconds since the first trace entry, the unit that
``myutils memory cut --from/--to`` takes.

Each change of memory in use is owned by the stack that allocated the block (a
``free_completed`` is matched to its ``alloc`` by device and address; a free whose alloc
the trace never saw releases memory live before the trace). So stacks are ranked by what
they still hold at the end, not by what they once allocated: a buffer allocated and freed
every step is not a leak, whatever its size (``snapshot_stacks``). A stack is named by the
user's frames and the operation that allocated, not by the allocator's own frames that open
every C++-recorded stack (``stack_frames``).

Memory live before the trace is counted in requested bytes (``requested_size``), the unit of
the trace's own sizes, as memory_viz counts it. The same pass collects the allocator's
segment entries and failed requests for ``allocator_state``.
"""

from __future__ import annotations

from array import array
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

from my_utils.memory.allocator_state import (
    SEGMENT_ACTIONS,
    AllocatorState,
    allocator_state,
    requested_bytes,
    reserved_steps,
)
from my_utils.memory.range_max import RangeMax
from my_utils.memory.snapshot import REGIONS_KEY
from my_utils.memory.snapshot_io import has_times, trace_origin_us
from my_utils.memory.snapshot_stacks import (
    StackTotal,
    Timeline,
    attribute_stacks,
    stack_timeline,
    theil_sen_slope,
)
from my_utils.memory.stack_frames import FrameView, StackNamer

__all__ = ["FrameView", "MemorySummary", "RegionDelta", "StackTotal", "Timeline", "summarize_snapshot",
           "theil_sen_slope"]

TREND_POINTS = 20


@dataclass(frozen=True)
class RegionDelta:
    """Memory in use at the start and end of a region (or a time window), and its peak."""

    name: str
    start_s: float
    stop_s: float
    start_bytes: int
    stop_bytes: int
    peak_bytes: int

    @property
    def delta_bytes(self) -> int:
        """In use at the end minus in use at the start."""
        return self.stop_bytes - self.start_bytes


@dataclass(frozen=True)
class MemorySummary:
    """The summary of one snapshot (all devices together).

    ``top_stacks`` are ranked by bytes still live at the end, then live at the peak, then
    allocated; ``peak_stacks`` by bytes live at the peak; ``growing_stacks`` are those whose
    live bytes grow by more than 5 % of the peak over the trace, fastest first;
    ``baseline_end_bytes`` is the memory live before the trace that is still live at its end;
    ``stacks_seen`` counts the distinct stacks (as ``frames_view`` names them); ``allocator``
    is the allocator's state (``allocator_state``); ``timeline`` (when asked for) samples
    memory over the trace, with ``chart_stacks`` the stacks it follows, in its order.
    """

    entries: int
    duration_s: float
    baseline_bytes: int
    peak_bytes: int
    peak_at_s: float
    end_bytes: int
    reserved_bytes: int
    top_stacks: tuple[StackTotal, ...]
    regions: tuple[RegionDelta, ...]
    regions_are_windows: bool
    slope_bytes_per_s: float
    actions: dict[str, int] = field(default_factory=dict)
    time_unit: str = "s"
    growing_stacks: tuple[StackTotal, ...] = ()
    baseline_end_bytes: int = 0
    allocator: AllocatorState | None = None
    frames_view: str = FrameView.USER.value
    stacks_seen: int = 0
    timeline: Timeline | None = None
    peak_stacks: tuple[StackTotal, ...] = ()
    chart_stacks: tuple[StackTotal, ...] = ()

    @property
    def trend(self) -> str:
        """``growing`` / ``shrinking`` when the fitted trend adds / removes more than 5 % of the peak over the trace,
        else ``flat``."""
        change = self.slope_bytes_per_s * self.duration_s
        threshold = 0.05 * max(self.peak_bytes, 1)
        return "growing" if change > threshold else "shrinking" if change < -threshold else "flat"

    @property
    def growing(self) -> bool:
        """True when the fitted trend adds more than 5 % of the peak over the trace."""
        return self.trend == "growing"


def _live_at_end(snapshot: dict[str, Any]) -> tuple[int, int]:
    """(requested bytes of the blocks allocated at the end, reserved bytes)."""
    allocated = reserved = 0
    for seg in snapshot.get("segments", []):
        reserved += int(seg.get("total_size", 0) or 0)
        for block in seg.get("blocks", []):
            if block.get("state") == "active_allocated":
                allocated += requested_bytes(block)
    return allocated, reserved


def summarize_snapshot(snapshot: dict[str, Any], *, top: int = 10, stack_depth: int = 4, windows: int = 10,
                       frames: FrameView | str = FrameView.USER, timeline_points: int = 0) -> MemorySummary:
    """Replay the trace of ``snapshot`` (checked by ``load_snapshot``) and summarise it.

    ``frames`` chooses what names a stack (``stack_frames.FrameView``); ``stack_depth`` how many
    of those frames; ``timeline_points`` > 0 also samples memory in use, reserved and the top
    stacks' live bytes at that many times (the page draws them).
    """
    # Hot loop over millions of entries: times, byte changes and the owning stack's number go
    # into flat arrays (8 bytes each, not a tuple per entry); a stack's identity is computed once
    # per frames list (torch shares them) and only the stacks shown are formatted.
    namer = StackNamer(frames, stack_depth)
    stamps, deltas, owners = array("d"), array("q"), array("q")
    examples: list[Any] = [None]  # per stack: the frames of its first allocation, for the full stack
    allocated: list[int] = [0]  # per stack; number 0 is "live before the trace"
    counts: list[int] = [0]
    live_owner: dict[tuple[int, int], int] = {}
    actions: dict[str, int] = defaultdict(int)
    segment_events: list[tuple[int, float, int]] = []
    ooms: list[tuple[int, float, dict[str, Any]]] = []
    largest_request = 0
    timed = has_times(snapshot)
    traces = snapshot.get("device_traces", [])
    for device, trace in enumerate(traces):
        for i, e in enumerate(trace):
            action = e["action"]
            actions[action] += 1
            if action == "alloc":
                size = e.get("size", 0)
                entry_frames = e.get("frames")
                k = namer.number(entry_frames)
                if k == len(allocated):  # numbers come in order: a new stack
                    allocated.append(0)
                    counts.append(0)
                    examples.append(entry_frames)
                allocated[k] += size
                counts[k] += 1
                if size > largest_request:
                    largest_request = size
                live_owner[(device, e.get("addr", -1))] = k
                stamps.append(e["time_us"] if timed else i * 1e6)
                deltas.append(size)
                owners.append(k)
            elif action == "free_completed":
                stamps.append(e["time_us"] if timed else i * 1e6)
                deltas.append(-e.get("size", 0))
                owners.append(live_owner.pop((device, e.get("addr", -1)), 0))
            elif action in SEGMENT_ACTIONS:
                segment_events.append((device, e["time_us"] if timed else i * 1e6,
                                       SEGMENT_ACTIONS[action] * e.get("size", 0)))
            elif action == "oom":
                ooms.append((device, e["time_us"] if timed else i * 1e6, e))
    if sum(1 for t in traces if t) > 1:  # devices are merged on one time axis
        order = sorted(range(len(stamps)), key=stamps.__getitem__)
        stamps = array("d", (stamps[i] for i in order))
        deltas = array("q", (deltas[i] for i in order))
        owners = array("q", (owners[i] for i in order))
    end_allocated, reserved = _live_at_end(snapshot)
    running = array("q", accumulate(deltas))  # bytes in use after each change, relative to the start
    baseline = max(0, end_allocated - (running[-1] if running else 0))
    t0 = trace_origin_us(snapshot)
    times = array("d", ((t - t0) / 1e6 for t in stamps))
    levels = array("q", (baseline + r for r in running))
    del stamps, running
    peak, peak_at, peak_index = baseline, 0.0, -1
    if levels:
        top_level = max(levels)
        if top_level > baseline:
            peak_index = levels.index(top_level)
            peak, peak_at = top_level, times[peak_index]
    duration = max(times[-1], 0.0) if times else 0.0
    regions, are_windows = _regions(snapshot, t0, times, levels, baseline, duration, windows)
    xs, ys = _trend_points(times, levels, baseline, duration)
    keys = namer.identities
    stacks = attribute_stacks(keys, allocated, counts, times, deltas, owners, baseline=baseline,
                              peak_index=peak_index, trend_xs=xs, peak_bytes=peak, top=top, examples=examples)
    state = allocator_state(snapshot, [(d, (t - t0) / 1e6, b) for d, t, b in segment_events],
                            [(d, (t - t0) / 1e6, e) for d, t, e in ooms], largest_request,
                            lambda t: _level_at(times, levels, baseline, t))
    timeline = None
    if timeline_points > 0:
        timeline = stack_timeline(times, deltas, owners, stacks.chart_numbers, baseline=baseline, duration=duration,
                                  points=timeline_points,
                                  reserved=reserved_steps(state.reserved_before_bytes, segment_events, t0))
    return MemorySummary(
        entries=sum(actions.values()), duration_s=duration, baseline_bytes=baseline, peak_bytes=peak,
        peak_at_s=peak_at, end_bytes=levels[-1] if levels else baseline, reserved_bytes=reserved,
        top_stacks=stacks.top, regions=tuple(regions), regions_are_windows=are_windows,
        slope_bytes_per_s=theil_sen_slope(xs, ys), actions=dict(actions), time_unit="s" if timed else "entry",
        growing_stacks=stacks.growing, baseline_end_bytes=stacks.baseline_end_bytes, allocator=state,
        frames_view=FrameView(frames).value, stacks_seen=len(keys), timeline=timeline, peak_stacks=stacks.at_peak,
        chart_stacks=stacks.chart if timeline is not None else (),
    )


def _level_at(times: Sequence[float], levels: Sequence[int], baseline: int, t: float) -> int:
    """Bytes in use just after every change at or before ``t``."""
    import bisect

    i = bisect.bisect_right(times, t)
    return levels[i - 1] if i else baseline


def _peak_between(times: Sequence[float], levels: RangeMax, baseline: int, a: float, b: float) -> int:
    import bisect

    lo, hi = bisect.bisect_right(times, a), bisect.bisect_right(times, b)
    start = _level_at(times, levels.values, baseline, a)
    return max(start, levels.max(lo, hi)) if hi > lo else start


def _regions(snapshot: dict[str, Any], t0: float, times: Sequence[float], levels: Sequence[int], baseline: int,
             duration: float, windows: int) -> tuple[list[RegionDelta], bool]:
    marked = snapshot.get(REGIONS_KEY)
    spans: list[tuple[str, float, float]] = []
    if isinstance(marked, list) and marked:
        for r in marked:
            if isinstance(r, dict) and isinstance(r.get("start_us"), (int, float)) \
                    and isinstance(r.get("stop_us"), (int, float)):
                spans.append((str(r.get("name", "?")), (r["start_us"] - t0) / 1e6, (r["stop_us"] - t0) / 1e6))
    are_windows = not spans
    if are_windows and times:
        n = max(1, windows)
        step = duration / n
        spans = [(f"window {i + 1}/{n}", i * step, duration if i == n - 1 else (i + 1) * step) for i in range(n)]
    out = []
    peaks = RangeMax(levels)  # one setup: regions may overlap, and there may be as many as entries
    for name, a, b in spans:
        start = _level_at(times, levels, baseline, a) if not are_windows or a > 0 else baseline
        out.append(RegionDelta(name, a, b, start, _level_at(times, levels, baseline, b),
                               _peak_between(times, peaks, baseline, a, b)))
    return out, are_windows


def _trend_points(times: Sequence[float], levels: Sequence[int], baseline: int, duration: float) -> tuple[list[float], list[float]]:
    if not times or duration <= 0:
        return [], []
    xs = [duration * (i + 1) / TREND_POINTS for i in range(TREND_POINTS)]
    return xs, [float(_level_at(times, levels, baseline, x)) for x in xs]
