"""Change points of a noisy series: where a metric moved to a new level and stayed there.

The method is binary segmentation with a rank statistic (Mann-Whitney/Pettitt), then a refinement
and a pruning pass:

1. In a segment of ``m`` runs, rank the values (ties averaged) and compute, for every split ``t``
   leaving at least ``min_size`` runs each side, the standardised rank-sum of the left part
   ``Z_t = (S_t - t(m+1)/2) / sqrt(t(m-t)(m+1)/12 · tie correction)``. The largest ``|Z_t|`` is the
   candidate. It is a change when its Bonferroni-adjusted p-value over the ``K`` splits tried,
   ``2K(1 - Φ(|Z|))``, is below ``alpha``; then both halves are searched again.
2. Each change is moved to the least-squares split between its neighbours (:func:`locate`: a first
   split made while other changes were still in its segment can sit a few runs off, and ranks place
   a large move poorly), then re-tested there; a change whose
   p-value is no longer below ``alpha``, or whose level moved less than ``min_change_pct`` (median
   after against median before), is dropped and its neighbours are refined again.

Why ranks: under "no change" every ordering of the runs is equally likely whatever the noise's
shape, so the false-alarm rate set by ``alpha`` holds for skewed noise and for outliers (a run
slowed by a noisy neighbour moves one rank, not the mean). Why binary segmentation rather than
E-Divisive means (O(n²) per permutation test) or PELT (a penalty to tune per noise level): each
level is a few vectorised passes over the series (O(n log n)), fast enough to run on every trend
and every gate over a series of 100,000 runs. ``bench/bench_history.py`` measures recall,
false alarms and speed against ``ruptures``' PELT.

Runs must be exchangeable within a level: the series handed in is one workload on one hardware at
one world size (``history.context.SeriesKey``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

#: Bonferroni-adjusted p-value a change must be under.
DEFAULT_ALPHA = 1e-3
#: Fewest runs on each side of a change (a shorter burst is noise or an incident, not a new level).
MIN_SIZE = 5
#: Smallest move of the median, in % of the level before, reported as a change.
MIN_CHANGE_PCT = 2.0
_NORMAL = NormalDist()


@dataclass(frozen=True)
class ChangePoint:
    """A change of level: ``index`` is the first run after it (in the series handed in).

    ``before``/``after`` are the medians of the runs between the neighbouring changes on each side
    (``runs_before``/``runs_after`` of them); ``change_pct`` is the move in % of ``before``;
    ``z`` the standardised rank statistic and ``p_value`` its Bonferroni-adjusted p-value.
    """

    index: int
    before: float
    after: float
    change_pct: float
    z: float
    p_value: float
    runs_before: int
    runs_after: int


def _ranks(seg: np.ndarray) -> tuple[np.ndarray, float]:
    """Average ranks (1-based) of ``seg`` and the tie correction of the rank-sum variance."""
    m = len(seg)
    order = np.argsort(seg, kind="stable")
    ordered = seg[order]
    same = ordered[1:] == ordered[:-1]
    if not same.any():
        ranks = np.empty(m, dtype=np.float64)
        ranks[order] = np.arange(1, m + 1, dtype=np.float64)
        return ranks, 1.0
    left = np.searchsorted(ordered, seg, "left")
    right = np.searchsorted(ordered, seg, "right")
    starts = np.flatnonzero(np.concatenate(([True], ~same, [True])))
    counts = np.diff(starts).astype(np.float64)
    return (left + right + 1) / 2.0, 1.0 - float(np.sum(counts ** 3 - counts)) / (m ** 3 - m)


def best_split(seg: np.ndarray, min_size: int = MIN_SIZE) -> tuple[int, float, int] | None:
    """The split of ``seg`` with the largest ``|Z|``: (runs left of it, Z, splits tried); None when too short or flat."""
    m = len(seg)
    if m < 2 * min_size:
        return None
    ranks, tie = _ranks(seg)
    if tie <= 0.0:
        return None
    t = np.arange(min_size, m - min_size + 1, dtype=np.float64)
    sums = np.cumsum(ranks)[min_size - 1:m - min_size]
    z = (sums - t * (m + 1) / 2.0) / np.sqrt(t * (m - t) * (m + 1) / 12.0 * tie)
    i = int(np.argmax(np.abs(z)))
    return int(t[i]), float(z[i]), len(t)


def locate(seg: np.ndarray, min_size: int = MIN_SIZE) -> int | None:
    """Where in ``seg`` its level moves: each run on the side whose median it is nearer (least absolute deviations).

    The rank statistic decides *whether* there is a change; it places a large move poorly (once every
    run after it outranks every run before, a few high runs before it no longer lower the rank sum).
    With the two sides' medians fixed from the rank split, the split minimising the absolute deviations
    is the argmin of a cumulative sum: it weighs how far each run is from each level, and a slow run
    counts by its distance, not its square. Two rounds (medians, then split, then medians again).
    """
    first = best_split(seg, min_size)
    if first is None:
        return None
    k = first[0]
    m = len(seg)
    for _ in range(2):
        low, high = float(np.median(seg[:k])), float(np.median(seg[k:]))
        gain = np.cumsum(np.abs(seg - low) - np.abs(seg - high))[min_size - 1:m - min_size]
        # splits whose sums tie in exact arithmetic differ by rounding, and the rounding moves with the unit
        # and the origin: the earliest within a tolerance scaled like the deviations themselves wins
        tol = 1e-9 * float(np.abs(seg - low).sum() + np.abs(seg - high).sum())
        k = min_size + int(np.flatnonzero(gain <= gain.min() + tol)[0])
    return k


def adjusted_p(z: float, tried: int) -> float:
    """Bonferroni-adjusted two-sided p-value of ``z`` over ``tried`` splits."""
    return min(1.0, 2.0 * tried * _NORMAL.cdf(-abs(z)))


def change_points(values: Sequence[float] | np.ndarray, alpha: float = DEFAULT_ALPHA, min_size: int = MIN_SIZE,
                  min_change_pct: float = MIN_CHANGE_PCT) -> list[ChangePoint]:
    """The changes of level in ``values`` (oldest first), first run after each change (module docstring)."""
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or not np.all(np.isfinite(x)):
        raise ValueError("change_points: expected a 1-D sequence of finite numbers")
    n = len(x)
    found: list[int] = []
    stack = [(0, n)]
    while stack:
        a, b = stack.pop()
        split = best_split(x[a:b], min_size)
        if split is None or adjusted_p(split[1], split[2]) >= alpha:
            continue
        found.append(a + split[0])
        stack += [(a, a + split[0]), (a + split[0], b)]
    cps = _refine(x, sorted(found), min_size)
    failing = [_fails(x, cps, i, alpha, min_size, min_change_pct) for i in range(len(cps))]
    while any(f is not None for f in failing):
        # drop the least supported failing change, then refine and re-test its neighbours only
        i = max((k for k, f in enumerate(failing) if f is not None), key=lambda k: failing[k] or 0.0)
        del cps[i], failing[i]
        for j in (i - 1, i):
            if 0 <= j < len(cps):
                lo, hi = _window(cps, j, n)
                at = locate(x[lo:hi], min_size)
                if at is not None:
                    cps[j] = lo + at
        for j in range(max(0, i - 2), min(len(cps), i + 2)):
            failing[j] = _fails(x, cps, j, alpha, min_size, min_change_pct)
    return [_describe(x, cps, i, min_size) for i in range(len(cps))]


def _window(cps: Sequence[int], i: int, n: int) -> tuple[int, int]:
    return (cps[i - 1] if i > 0 else 0), (cps[i + 1] if i + 1 < len(cps) else n)


def _refine(x: np.ndarray, cps: list[int], min_size: int) -> list[int]:
    """Each change moved to the best split between its neighbours (left to right, each move seen by the next)."""
    out = list(cps)
    for i in range(len(out)):
        lo, hi = _window(out, i, len(x))
        at = locate(x[lo:hi], min_size)
        if at is not None:
            out[i] = lo + at
    return out


def _fails(x: np.ndarray, cps: list[int], i: int, alpha: float, min_size: int,
           min_change_pct: float) -> float | None:
    """The p-value of change ``i`` between its neighbours when it fails a test (else None)."""
    k = cps[i]
    lo, hi = _window(cps, i, len(x))
    split = best_split(x[lo:hi], min_size)
    p = 1.0 if split is None else adjusted_p(split[1], split[2])
    if p >= alpha:
        return p
    pct = _pct(float(np.median(x[lo:k])), float(np.median(x[k:hi])))
    return p if abs(pct) < min_change_pct else None


def _pct(before: float, after: float) -> float:
    if before == 0.0:
        return 0.0 if after == 0.0 else math.copysign(math.inf, after)
    return (after - before) / abs(before) * 100.0


def _describe(x: np.ndarray, cps: Sequence[int], i: int, min_size: int) -> ChangePoint:
    k = cps[i]
    lo, hi = _window(cps, i, len(x))
    before, after = float(np.median(x[lo:k])), float(np.median(x[k:hi]))
    seg = x[lo:hi]
    ranks, tie = _ranks(seg)
    m, t = len(seg), k - lo
    z = float((np.sum(ranks[:t]) - t * (m + 1) / 2.0) / math.sqrt(t * (m - t) * (m + 1) / 12.0 * tie))
    tried = max(1, m - 2 * min_size + 1)
    return ChangePoint(k, before, after, _pct(before, after), z, adjusted_p(z, tried), t, hi - k)
