"""Which call stacks hold the memory: live bytes per stack at the end and at the peak, and whose live bytes grow.

``summarize_snapshot`` replays the trace into flat arrays: for every change of memory in use,
its time, its size (+ alloc, - free) and the number of the stack that allocated the block
(0: memory live before the trace). One pass over those arrays gives each stack's live bytes
at the peak and at ``TREND_POINTS`` times; the growth of a stack is the Theil-Sen slope of
that series, the same estimator as the whole snapshot's trend, so a stack's growth and the
total's can be compared.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["StackRanking", "StackTotal", "attribute_stacks", "theil_sen_slope"]

# stacks whose growth is estimated: the shown ones and those whose live bytes change most
# (the slope costs TREND_POINTS² / 2 operations per stack)
_GROWTH_CANDIDATES = 50


@dataclass(frozen=True)
class StackTotal:
    """One call stack (its innermost frames): bytes allocated over the trace, live at the end and at the peak."""

    frames: tuple[str, ...]
    total_bytes: int
    count: int
    live_end_bytes: int = 0
    live_at_peak_bytes: int = 0
    growth_bytes_per_s: float = 0.0


@dataclass(frozen=True)
class StackRanking:
    """What ``attribute_stacks`` returns."""

    top: tuple[StackTotal, ...]
    growing: tuple[StackTotal, ...]
    baseline_end_bytes: int


def theil_sen_slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """The median of pairwise slopes: robust to a few spikes (0.0 for fewer than two points)."""
    slopes = [(ys[j] - ys[i]) / (xs[j] - xs[i])
              for i in range(len(xs)) for j in range(i + 1, len(xs)) if xs[j] != xs[i]]
    if not slopes:
        return 0.0
    slopes.sort()
    mid = len(slopes) // 2
    return slopes[mid] if len(slopes) % 2 else (slopes[mid - 1] + slopes[mid]) / 2


def frame_label(frame: Any) -> str:
    """``name (file:line)`` of a (name, filename, line) key; profile-made frames carry the place in the name."""
    if isinstance(frame, tuple) and len(frame) == 3:
        name, filename, line = frame
        if filename in (None, "none", "") and not line:
            return str(name if name is not None else "?")
        return f"{name if name is not None else '?'} ({filename if filename is not None else '?'}:" \
               f"{line if line is not None else '?'})"
    return str(frame)


def attribute_stacks(keys: Sequence[tuple[Any, ...]], allocated: Sequence[int], counts: Sequence[int],
                     times: Sequence[float], deltas: Sequence[int], owners: Sequence[int], *, baseline: int,
                     peak_index: int, trend_xs: Sequence[float], peak_bytes: int, top: int) -> StackRanking:
    """Rank the stacks ``keys`` (stack ``k`` is ``keys[k - 1]``; 0 is memory live before the trace).

    ``times``/``deltas``/``owners`` are the changes in time order; ``peak_index`` is the change
    at the peak (-1: the peak is the baseline); ``trend_xs`` the times the trend samples.
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
        return StackTotal(tuple(frame_label(f) for f in keys[k - 1]), allocated[k], counts[k], live[k],
                          peak_live[k], growth.get(k, 0.0))

    threshold = 0.05 * max(peak_bytes, 1)
    growing = sorted((k for k, g in growth.items() if g * duration > threshold), key=lambda k: -growth[k])
    return StackRanking(tuple(total(k) for k in ranked[:top]), tuple(total(k) for k in growing[:top]), live[0])
