"""Robust statistics the rules share: Theil–Sen slope with its confidence bound, MAD, quantiles.

Pure Python on purpose: the series are per step (hundreds to a few thousand points), and
the rules must run where numpy is absent.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

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
    slopes = sorted((ys[j] - ys[i]) / (xs[j] - xs[i]) for i in range(n) for j in range(i + 1, n) if xs[j] != xs[i])
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
