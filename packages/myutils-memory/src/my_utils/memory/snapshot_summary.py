"""What a memory snapshot says without a browser: peak, top allocation stacks, region deltas, trend.

The trace is replayed once per device: an ``alloc`` adds its size, a ``free_completed``
takes it away (as memory_viz does: memory is in use until the free completes). Memory
live before the trace began (blocks still allocated at the end that the trace never saw
allocated) is the baseline. Times are seconds since the first trace entry, the unit that
``myutils memory cut --from/--to`` takes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from my_utils.memory.snapshot import REGIONS_KEY
from my_utils.memory.snapshot_io import entry_time_us, has_times, trace_origin_us

__all__ = ["MemorySummary", "RegionDelta", "StackTotal", "summarize_snapshot", "theil_sen_slope"]

TREND_POINTS = 20


@dataclass(frozen=True)
class StackTotal:
    """Bytes allocated by one call stack (its innermost frames) over the whole trace."""

    frames: tuple[str, ...]
    total_bytes: int
    count: int


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
    """The summary of one snapshot (all devices together)."""

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

    @property
    def growing(self) -> bool:
        """True when the fitted trend adds more than 5 % of the peak over the trace."""
        return self.slope_bytes_per_s * self.duration_s > 0.05 * max(self.peak_bytes, 1)


def theil_sen_slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """The median of pairwise slopes: robust to a few spikes (0.0 for fewer than two points)."""
    slopes = [(ys[j] - ys[i]) / (xs[j] - xs[i])
              for i in range(len(xs)) for j in range(i + 1, len(xs)) if xs[j] != xs[i]]
    if not slopes:
        return 0.0
    slopes.sort()
    mid = len(slopes) // 2
    return slopes[mid] if len(slopes) % 2 else (slopes[mid - 1] + slopes[mid]) / 2


def _frame_label(frame: Any) -> str:
    if isinstance(frame, dict):
        if frame.get("filename") in (None, "none", "") and not frame.get("line"):
            return str(frame.get("name", "?"))  # profile-made frames carry the place in the name
        return f"{frame.get('name', '?')} ({frame.get('filename', '?')}:{frame.get('line', '?')})"
    return str(frame)


def _live_at_end(snapshot: dict[str, Any]) -> tuple[int, int]:
    allocated = reserved = 0
    for seg in snapshot.get("segments", []):
        reserved += int(seg.get("total_size", 0) or 0)
        for block in seg.get("blocks", []):
            if block.get("state") == "active_allocated":
                allocated += int(block.get("size", 0) or 0)
    return allocated, reserved


def summarize_snapshot(snapshot: dict[str, Any], *, top: int = 10, stack_depth: int = 4,
                       windows: int = 10) -> MemorySummary:
    """Replay the trace of ``snapshot`` (checked by ``load_snapshot``) and summarise it."""
    entries: list[tuple[float, int]] = []  # (time_us, signed bytes) of every change in use
    stacks: dict[tuple[str, ...], list[int]] = defaultdict(lambda: [0, 0])
    labels: dict[int, str] = {}  # frames are dicts repeated per entry: label each object once
    actions: dict[str, int] = defaultdict(int)
    timed = has_times(snapshot)
    for trace in snapshot.get("device_traces", []):
        for i, e in enumerate(trace):
            action = e["action"]
            actions[action] += 1
            size = e.get("size", 0)
            if action == "alloc":
                entries.append((entry_time_us(e, i, timed), size))
                frames = e.get("frames") or ()
                key = []
                for f in frames[:stack_depth]:
                    label = labels.get(id(f))
                    if label is None:
                        label = labels[id(f)] = _frame_label(f)
                    key.append(label)
                acc = stacks[tuple(key)]
                acc[0] += size
                acc[1] += 1
            elif action == "free_completed":
                entries.append((entry_time_us(e, i, timed), -size))
    labels.clear()
    entries.sort(key=lambda t: t[0])  # devices are merged on one time axis
    end_allocated, reserved = _live_at_end(snapshot)
    net = sum(d for _, d in entries)
    baseline = max(0, end_allocated - net)
    t0 = trace_origin_us(snapshot)
    times = [(t - t0) / 1e6 for t, _ in entries]
    levels: list[int] = []
    live = baseline
    peak, peak_at = baseline, 0.0
    for (_, d), t in zip(entries, times, strict=True):
        live += d
        levels.append(live)
        if live > peak:
            peak, peak_at = live, t
    duration = max(times[-1], 0.0) if times else 0.0
    regions, are_windows = _regions(snapshot, t0, times, levels, baseline, duration, windows)
    xs, ys = _trend_points(times, levels, duration)
    top_stacks = sorted((StackTotal(k, v[0], v[1]) for k, v in stacks.items()), key=lambda s: -s.total_bytes)
    return MemorySummary(
        entries=sum(actions.values()), duration_s=duration, baseline_bytes=baseline, peak_bytes=peak,
        peak_at_s=peak_at, end_bytes=live, reserved_bytes=reserved, top_stacks=tuple(top_stacks[:top]),
        regions=tuple(regions), regions_are_windows=are_windows, slope_bytes_per_s=theil_sen_slope(xs, ys),
        actions=dict(actions), time_unit="s" if timed else "entry",
    )


def _level_at(times: list[float], levels: list[int], baseline: int, t: float) -> int:
    """Bytes in use just after every change at or before ``t``."""
    import bisect

    i = bisect.bisect_right(times, t)
    return levels[i - 1] if i else baseline


def _peak_between(times: list[float], levels: list[int], baseline: int, a: float, b: float) -> int:
    import bisect

    lo, hi = bisect.bisect_right(times, a), bisect.bisect_right(times, b)
    start = _level_at(times, levels, baseline, a)
    return max([start, *levels[lo:hi]])


def _regions(snapshot: dict[str, Any], t0: float, times: list[float], levels: list[int], baseline: int,
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
    for name, a, b in spans:
        start = _level_at(times, levels, baseline, a) if not are_windows or a > 0 else baseline
        out.append(RegionDelta(name, a, b, start, _level_at(times, levels, baseline, b),
                               _peak_between(times, levels, baseline, a, b)))
    return out, are_windows


def _trend_points(times: list[float], levels: list[int], duration: float) -> tuple[list[float], list[float]]:
    if not times or duration <= 0:
        return [], []
    xs = [duration * (i + 1) / TREND_POINTS for i in range(TREND_POINTS)]
    return xs, [float(_level_at(times, levels, 0, x)) for x in xs]
