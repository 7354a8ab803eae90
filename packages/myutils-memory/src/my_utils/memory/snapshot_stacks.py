"""Which call stacks hold the memory: live bytes per stack at the end and at the peak, and whose live bytes grow.

``summarize_snapshot`` replays the trace into flat arrays: for every change of memory in use,
its time, its size (+ alloc, - free) and the number of the stack that allocated the block
(0: memory live before the trace). One pass over those arrays gives each stack's live bytes
at the peak and at ``TREND_POINTS`` times; the growth of a stack is the Theil-Sen slope of
that series, the same estimator as the whole snapshot's trend, so a stack's growth and the
total's can be compared. ``stack_timeline`` samples the shown stacks' live bytes for a chart
in one more pass, only when a page asks for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from my_utils.memory.stack_frames import Frame, StackIdentity, frame_label

__all__ = ["StackRanking", "StackTotal", "Timeline", "attribute_stacks", "full_stack", "stack_timeline",
           "theil_sen_slope"]

# stacks whose growth is estimated: the shown ones and those whose live bytes change most
# (the slope costs TREND_POINTS² / 2 operations per stack)
_GROWTH_CANDIDATES = 50


@dataclass(frozen=True)
class StackTotal:
    """One call stack: bytes allocated over the trace, live at the end and at the peak.

    ``frames`` are the frames that name it (``stack_frames``), as ``name (file:line)``;
    ``operation`` what allocated (a PyTorch function, an ATen operator) or ``""``;
    ``full_stack`` every frame of its first allocation as recorded (name, filename, line).
    """

    frames: tuple[str, ...]
    total_bytes: int
    count: int
    live_end_bytes: int = 0
    live_at_peak_bytes: int = 0
    growth_bytes_per_s: float = 0.0
    operation: str = ""
    full_stack: tuple[Frame, ...] = ()


@dataclass(frozen=True)
class StackRanking:
    """What ``attribute_stacks`` returns; ``chart_numbers`` are the numbers of the stacks in ``at_peak`` then ``top``
    (each once): those a chart draws."""

    top: tuple[StackTotal, ...]
    growing: tuple[StackTotal, ...]
    baseline_end_bytes: int
    at_peak: tuple[StackTotal, ...] = ()
    chart_numbers: tuple[int, ...] = ()
    chart: tuple[StackTotal, ...] = ()


@dataclass(frozen=True)
class Timeline:
    """Memory over the trace at ``times``: in use, reserved, and each shown stack's live bytes (same order)."""

    times: tuple[float, ...]
    in_use: tuple[int, ...]
    reserved: tuple[int, ...]
    before_trace: tuple[int, ...]
    stacks: tuple[tuple[int, ...], ...]


def theil_sen_slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """The median of pairwise slopes: robust to a few spikes (0.0 for fewer than two points)."""
    slopes = [(ys[j] - ys[i]) / (xs[j] - xs[i])
              for i in range(len(xs)) for j in range(i + 1, len(xs)) if xs[j] != xs[i]]
    if not slopes:
        return 0.0
    slopes.sort()
    mid = len(slopes) // 2
    return slopes[mid] if len(slopes) % 2 else (slopes[mid - 1] + slopes[mid]) / 2


def full_stack(frames: Any) -> tuple[Frame, ...]:
    """Every frame of a snapshot entry's ``frames`` as (name, filename, line)."""
    return tuple((f.get("name"), f.get("filename"), f.get("line")) for f in frames or ())


def attribute_stacks(keys: Sequence[StackIdentity], allocated: Sequence[int], counts: Sequence[int],
                     times: Sequence[float], deltas: Sequence[int], owners: Sequence[int], *, baseline: int,
                     peak_index: int, trend_xs: Sequence[float], peak_bytes: int, top: int,
                     examples: Sequence[Any] = ()) -> StackRanking:
    """Rank the stacks ``keys`` (stack ``k`` is ``keys[k - 1]``; 0 is memory live before the trace): by bytes live
    at the end (``top``), by bytes live at the peak (``at_peak``, those holding any), and by growth.

    ``times``/``deltas``/``owners`` are the changes in time order; ``peak_index`` is the change
    at the peak (-1: the peak is the baseline); ``trend_xs`` the times the trend samples;
    ``examples[k]`` the frames list of stack ``k``'s first allocation.
    """
    n = len(allocated)
    live = [0] * n
    live[0] = baseline
    at_peak = list(live) if peak_index < 0 else None
    samples: list[list[int]] = []
    xi, nx = 0, len(trend_xs)
    for j, (t, d, k) in enumerate(zip(times, deltas, owners, strict=True)):
        while xi < nx and trend_xs[xi] < t:  # a sample at x holds every change at or before x
            samples.append(list(live))
            xi += 1
        live[k] += d
        if j == peak_index:
            at_peak = list(live)
    while xi < nx:
        samples.append(list(live))
        xi += 1
    peak_live = at_peak if at_peak is not None else live
    ranked = sorted(range(1, n), key=lambda k: (-live[k], -peak_live[k], -allocated[k]))
    changing = sorted(range(1, n), key=lambda k: -(live[k] - (samples[0][k] if samples else 0)))
    candidates = set(ranked[:top]) | set(changing[:_GROWTH_CANDIDATES])
    growth = {k: theil_sen_slope(trend_xs, [s[k] for s in samples]) for k in candidates} if samples else {}
    duration = trend_xs[-1] if trend_xs else 0.0

    def total(k: int) -> StackTotal:
        ident = keys[k - 1]
        return StackTotal(tuple(frame_label(f) for f in ident.frames), allocated[k], counts[k], live[k],
                          peak_live[k], growth.get(k, 0.0), ident.operation,
                          full_stack(examples[k]) if k < len(examples) else ())

    threshold = 0.05 * max(peak_bytes, 1)
    growing = sorted((k for k, g in growth.items() if g * duration > threshold), key=lambda k: -growth[k])
    shown = ranked[:top]
    by_peak = [k for k in sorted(range(1, n), key=lambda k: (-peak_live[k], -live[k], -allocated[k]))[:top]
               if peak_live[k] > 0]
    chart = list(dict.fromkeys(by_peak + [k for k in shown if live[k] > 0]))
    return StackRanking(tuple(total(k) for k in shown), tuple(total(k) for k in growing[:top]), live[0],
                        tuple(total(k) for k in by_peak), tuple(chart), tuple(total(k) for k in chart))


def stack_timeline(times: Sequence[float], deltas: Sequence[int], owners: Sequence[int], shown: Sequence[int], *,
                   baseline: int, duration: float, points: int,
                   reserved: Sequence[tuple[float, int]]) -> Timeline:
    """Memory in use, reserved (steps of (time, bytes)) and the ``shown`` stacks' live bytes at about ``points``
    times: the trace is cut into that many equal intervals and each gives the state at the moment its total in
    use was highest, so the peak (and every interval's high) is drawn exactly, not sampled past."""
    n = max(1, points)
    edges = [duration * (i + 1) / n for i in range(n)] if duration > 0 else [0.0]
    slot = {k: i for i, k in enumerate(shown)}
    live = [0] * len(shown)
    total = before = baseline
    xs: list[float] = [0.0]  # the state before the first change
    in_use: list[int] = [baseline]
    early: list[int] = [baseline]
    series: list[list[int]] = [[0] for _ in shown]
    j, m = 0, len(times)
    for edge in edges:
        best, at, best_before, best_live = total, (times[j - 1] if j else 0.0), before, list(live)
        moved = False
        while j < m and (times[j] <= edge or edge == edges[-1]):
            d, k = deltas[j], owners[j]
            total += d
            if k == 0:
                before += d
            else:
                i = slot.get(k)
                if i is not None:
                    live[i] += d
            if not moved or total > best:
                best, at, best_before, best_live = total, times[j], before, list(live)
                moved = True
            j += 1
        if not moved:  # nothing changed in this interval: its end, at the level carried over
            at = edge
        xs.append(at)
        in_use.append(best)
        early.append(best_before)
        for i, v in enumerate(best_live):
            series[i].append(v)
    held: list[int] = []
    r, steps = 0, list(reserved)
    level = steps[0][1] if steps else 0
    for x in xs:
        while r < len(steps) and steps[r][0] <= x:
            level = steps[r][1]
            r += 1
        held.append(level)
    return Timeline(tuple(xs), tuple(in_use), tuple(held), tuple(early), tuple(tuple(v) for v in series))
