"""Robust statistics the rules share: Theil–Sen slope with its confidence bound, MAD, quantiles.

Pure Python on purpose: the series are per step (hundreds to a few thousand points), and
the rules must run where numpy is absent.

:class:`Summary` holds what several rules read of one series (mean, spread, sorted values,
median, MAD): ``_series.step_summary`` computes it once per series and analysis and hands the
same object to every rule (anomalies and variability sorted the same values three times each).
"""

from __future__ import annotations

import bisect
import functools
import math
import operator
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat

#: MAD × this estimates σ for normal data (1 / Φ⁻¹(3/4)).
MAD_TO_SIGMA = 1.482602218505602
#: Theil–Sen uses every pair of points: above this many points the series is thinned
#: evenly first (the slope's confidence interval then reflects the thinned count).
MAX_TREND_POINTS = 400


@dataclass(frozen=True)
class Trend:
    """A Theil–Sen fit: ``slope`` per step with the two-sided ``confidence`` interval ``[low, high]``."""

    slope: float
    low: float
    high: float
    intercept: float
    confidence: float
    points: int


def _z(confidence: float) -> float:
    return statistics.NormalDist().inv_cdf(0.5 + confidence / 2.0)


def theil_sen(xs: Sequence[float], ys: Sequence[float], confidence: float = 0.95) -> Trend | None:
    """Median of pairwise slopes, with Sen's (1968) rank-based confidence interval.

    The interval takes the pairwise slopes of ranks ``(N - C)/2`` and ``(N + C)/2`` (``N``
    pairs, ``C = z·sqrt(n(n-1)(2n+5)/18)``, the Kendall-statistic spread): no normality
    assumption, and one outlying point cannot move it. None with fewer than 3 points or
    when all x are equal.
    """
    n = len(xs)
    if n != len(ys):
        raise ValueError(f"theil_sen: {n} x values but {len(ys)} y values")
    if n > MAX_TREND_POINTS:
        picks = [round(i * (n - 1) / (MAX_TREND_POINTS - 1)) for i in range(MAX_TREND_POINTS)]
        xs = [xs[i] for i in picks]
        ys = [ys[i] for i in picks]
        n = MAX_TREND_POINTS
    if n < 3:
        return None
    if len(set(xs)) == n:  # no two x equal (the usual steps): every pair, each row of them at C speed
        pairs: list[float] = []
        for i in range(n):
            xi, yi = xs[i], ys[i]
            pairs += map(operator.truediv, map(operator.sub, ys[i + 1:], repeat(yi)),
                         map(operator.sub, xs[i + 1:], repeat(xi)))
        slopes = sorted(pairs)  # the same slopes in the same order as the loop below, so the same sorted list
    else:
        slopes = sorted((ys[j] - ys[i]) / (xs[j] - xs[i]) for i in range(n) for j in range(i + 1, n)
                        if xs[j] != xs[i])
    if not slopes:
        return None
    m = len(slopes)
    slope = statistics.median(slopes)
    c = _z(confidence) * math.sqrt(n * (n - 1) * (2 * n + 5) / 18.0)
    lo_i = max(0, min(m - 1, math.floor((m - c) / 2.0)))
    hi_i = max(0, min(m - 1, math.ceil((m + c) / 2.0)))
    intercept = statistics.median(y - slope * x for x, y in zip(xs, ys, strict=True))
    return Trend(slope, slopes[lo_i], slopes[hi_i], intercept, confidence, n)


def median_sorted(sorted_values: Sequence[float]) -> float:
    """``statistics.median`` of already sorted values (the same float), without sorting again."""
    n = len(sorted_values)
    if n == 0:
        raise statistics.StatisticsError("no median for empty data")
    if n % 2 == 1:
        return sorted_values[n // 2]
    i = n // 2
    return (sorted_values[i - 1] + sorted_values[i]) / 2


def mad(values: Sequence[float], med: float | None = None) -> float:
    """Median absolute deviation from the median (0 for fewer than 2 values); ``med``: the median, when known."""
    if len(values) < 2:
        return 0.0
    if med is None:
        med = statistics.median(values)
    return statistics.median([abs(v - med) for v in values])  # a list: median sorts it; a generator costs more


def robust_cv(values: Sequence[float], med: float | None = None) -> float:
    """σ estimated from the MAD over the median: a spread one outlier cannot inflate (0 when the median is 0).

    ``med``: the median of ``values``, when the caller has it (saves a sort).
    """
    if med is None:
        med = statistics.median(values) if values else 0.0
    return MAD_TO_SIGMA * mad(values, med) / abs(med) if med else 0.0


def pstdev(values: Sequence[float], mean: float | None = None) -> float:
    """Population standard deviation in plain floats (inf on overflow, NaN with non-finite input).

    ``statistics.pstdev`` works in exact fractions and fails on sums that overflow a float
    (CPython raises AttributeError there); measurements from outside must never crash a report.
    """
    if len(values) < 2:
        return 0.0
    m = statistics.fmean(values) if mean is None else mean
    try:
        return math.sqrt(math.fsum([(v - m) ** 2 for v in values]) / len(values))  # a list: ~2x a generator
    except (OverflowError, ValueError):
        return math.inf


def std_cv(values: Sequence[float]) -> tuple[float, float]:
    """``(pstdev(values), cv(values))`` with one pass for the mean and one for the spread."""
    if len(values) < 2:
        return 0.0, 0.0
    mean = statistics.fmean(values)
    std = pstdev(values, mean)
    return std, (std / abs(mean) if mean else 0.0)


def cv(values: Sequence[float]) -> float:
    """Population standard deviation over the mean (0 for fewer than 2 values or a zero mean)."""
    if len(values) < 2:
        return 0.0
    mean = statistics.fmean(values)
    return pstdev(values, mean) / abs(mean) if mean else 0.0


@dataclass(frozen=True)
class Summary:
    """The statistics of one series' values that the rules share (see :func:`summarize`); change nothing in it.

    ``mean`` and ``std`` are computed on first use (not every rule needs them), from the values
    in their order, exactly as ``statistics.fmean`` and :func:`pstdev` compute them; ``fmean``
    raises on ``inf`` with ``-inf``, and still does so where a rule asks for it, not before.
    """

    #: the values are ``source[skip:]`` (kept for ``mean``/``std`` without a copy held meanwhile)
    source: Sequence[float]
    #: the values, sorted
    ordered: list[float]
    #: ``statistics.median`` (NaN for no value)
    median: float
    #: median absolute deviation from the median, :func:`mad` (0 for fewer than 2 values); × MAD_TO_SIGMA ≈ σ
    mad: float
    skip: int = 0

    @property
    def values(self) -> Sequence[float]:
        """The values, in their order (a new slice when ``skip``)."""
        return self.source[self.skip:] if self.skip else self.source

    @property
    def n(self) -> int:
        """How many values."""
        return len(self.ordered)

    @functools.cached_property
    def mean(self) -> float:
        """``statistics.fmean`` of the values."""
        return statistics.fmean(self.values)

    @functools.cached_property
    def std(self) -> float:
        """Population standard deviation, :func:`pstdev` (0 for fewer than 2 values)."""
        return pstdev(self.values, self.mean) if len(self.ordered) >= 2 else 0.0

    @property
    def cv(self) -> float:
        """:func:`cv` of the values: population std over the mean (0 for fewer than 2 values or a zero mean)."""
        if self.n < 2:
            return 0.0
        return self.std / abs(self.mean) if self.mean else 0.0

    @property
    def robust_cv(self) -> float:
        """:func:`robust_cv` of the values: MAD-estimated σ over the median (0 when the median is 0)."""
        return MAD_TO_SIGMA * self.mad / abs(self.median) if self.median else 0.0

    def quantile(self, q: float) -> float:
        """:func:`quantile` of the sorted values."""
        return quantile(self.ordered, q)


def _kth_deviation(ordered: Sequence[float], med: float, split: int, k: int) -> float:
    """The ``k``-th smallest (from 0) of ``abs(v - med)`` over the sorted values, without computing them all.

    The deviations are two sorted runs — ``med - ordered[split - 1 - j]`` left of ``split`` and
    ``ordered[split + j] - med`` from it (the same floats as ``abs(v - med)``: IEEE subtraction
    is symmetric) — and the k-th smallest of two sorted runs is found by bisecting how many
    come from the left one: O(log n) subtractions instead of n.
    """
    na, nb = split, len(ordered) - split

    def left(j: int) -> float:
        return med - ordered[split - 1 - j]

    def right(j: int) -> float:
        return ordered[split + j] - med

    lo, hi = max(0, k + 1 - nb), min(k + 1, na)
    while lo < hi:  # the fewest taken from the left run such that its next one is not below the right's last
        a = (lo + hi) // 2
        if left(a) < right(k - a):
            lo = a + 1
        else:
            hi = a
    a, b = lo, k + 1 - lo
    if a == 0:
        return right(b - 1)
    if b == 0:
        return left(a - 1)
    return max(left(a - 1), right(b - 1))


def mad_sorted(ordered: Sequence[float], med: float) -> float:
    """:func:`mad` of already sorted, finite values with median ``med``: the same float, in O(log n)."""
    n = len(ordered)
    if n < 2:
        return 0.0
    split = bisect.bisect_left(ordered, med)
    i = n // 2
    if n % 2 == 1:
        return _kth_deviation(ordered, med, split, i)
    return (_kth_deviation(ordered, med, split, i - 1) + _kth_deviation(ordered, med, split, i)) / 2


def summarize(values: Sequence[float], skip: int = 0) -> Summary:
    """:class:`Summary` of ``values``: the same floats as ``median``, :func:`mad`, ``fmean`` and :func:`pstdev`.

    One sort: the median and the MAD come from the sorted values (:func:`mad_sorted`) when
    everything is finite; with an infinity among them the deviations keep the values' order, as
    :func:`mad` takes them (``inf - inf`` is NaN, and NaN makes a median depend on the order).
    Mean and standard deviation are taken over the values in their order, as before.
    ``skip``: summarise ``values[skip:]`` (the summary keeps ``values``, not the slice).
    """
    return summarize_sorted(values, sorted(values[skip:] if skip else values), skip)


def summarize_sorted(values: Sequence[float], ordered: list[float], skip: int = 0) -> Summary:
    """:func:`summarize` of ``values`` (after ``skip``) when ``ordered`` is already ``sorted(values[skip:])``.

    ``ordered`` must be exactly that list (the same floats in the same places, ``-0.0`` and
    ``0.0`` included): the summary keeps it.
    """
    source = values
    if skip:
        values = values[skip:]
    n = len(ordered)
    if n == 0:
        return Summary(source, ordered, math.nan, 0.0, skip)
    med = median_sorted(ordered)
    if n < 2:
        spread = 0.0
    elif math.isfinite(ordered[0]) and math.isfinite(ordered[-1]):
        spread = mad_sorted(ordered, med)
    else:
        spread = mad(values, med)
    return Summary(source, ordered, med, spread, skip)


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile of already sorted values (NaN when empty)."""
    if not sorted_values:
        return math.nan
    pos = (len(sorted_values) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def benjamini_hochberg(p_values: Sequence[float], tests: int, rate: float) -> list[bool]:
    """Which of ``p_values`` the Benjamini–Hochberg step-up procedure rejects at false-discovery ``rate``.

    ``tests`` is the number of hypotheses tested in all (at least ``len(p_values)``): the
    p-values not given are larger than every one given (a rule passes only the candidates,
    the values beyond its threshold), so they never change which of these are kept. With
    the k-th smallest of ``m`` p-values at or below ``k · rate / m``, the k smallest are kept.
    """
    m = max(tests, len(p_values))
    if not p_values or m == 0:
        return [False] * len(p_values)
    order = sorted(range(len(p_values)), key=p_values.__getitem__)
    cut = 0
    for k, i in enumerate(order, start=1):
        if p_values[i] <= k * rate / m:
            cut = k
    keep = [False] * len(p_values)
    for i in order[:cut]:
        keep[i] = True
    return keep


def _beta_cf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz), for x < (a+1)/(a+b+2)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((a + m2 - 1.0) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1.0))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-14:
            break
    return h


def incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b) (0 ≤ x ≤ 1)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_cf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_cf(b, a, 1.0 - x) / b


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| ≥ |t|) for Student's t with ``df`` degrees of freedom (0 for an infinite t)."""
    if not math.isfinite(t):
        return 0.0 if t == t else 1.0
    if df <= 0:
        return 1.0
    return incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
