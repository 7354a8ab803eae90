"""Downsampling of chart series: a bounded number of points that keeps every spike.

A report must stay small whatever the run's length (1M events → an HTML report under
10 MB), yet the step that took 10× longer is the one a reader looks for. Averaging or
striding would hide it; min/max buckets keep, for each bucket of consecutive points, its
lowest and its highest value in their original order, so every extreme survives and the
line's envelope is the original's.
"""

from __future__ import annotations

from collections.abc import Sequence


def minmax_downsample(xs: Sequence[float], ys: Sequence[float], max_points: int) -> tuple[list[float], list[float]]:
    """``(xs, ys)`` cut to at most ``max_points`` points, keeping each bucket's min and max.

    Points are taken as given (sorted by ``x`` for a timeline). With ``max_points`` below 2
    or at least ``len(xs)`` nothing is dropped but the copies are returned. The global
    minimum and maximum of ``ys`` are always kept.
    """
    n = len(xs)
    if len(ys) != n:
        raise ValueError(f"minmax_downsample(): {n} x values but {len(ys)} y values; pass series of equal length")
    if n <= max_points or max_points < 2:
        return list(xs), list(ys)
    buckets = max_points // 2
    out_x: list[float] = []
    out_y: list[float] = []
    for b in range(buckets):
        lo = b * n // buckets
        hi = (b + 1) * n // buckets
        if hi <= lo:
            continue
        i_min = min(range(lo, hi), key=ys.__getitem__)
        i_max = max(range(lo, hi), key=ys.__getitem__)
        for i in sorted({i_min, i_max}):  # original order: the line is drawn left to right
            out_x.append(xs[i])
            out_y.append(ys[i])
    return out_x, out_y


def split_budget(total: int, series: int, floor: int = 100) -> int:
    """Points per series when ``series`` traces share ``total`` points (never below ``floor``)."""
    return max(floor, total // max(1, series))
