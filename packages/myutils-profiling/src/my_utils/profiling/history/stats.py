"""The few distributions the gate needs, without SciPy: Student's t tail and a robust spread.

``t_sf`` is the upper tail of Student's t through the regularised incomplete beta function
(a continued fraction evaluated by the modified Lentz method); ``robust_spread`` is the median
absolute deviation scaled to a normal standard deviation (1.4826), falling back to the sample
standard deviation when more than half the values are equal.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

_TINY = 1e-300
_EPS = 3e-16
MAD_TO_SIGMA = 1.4826


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (valid for x < (a+1)/(a+b+2))."""
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        for num in (m * (b - m) * x / ((a + m2 - 1.0) * (a + m2)),
                    -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1.0))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + num / c
            c = c if abs(c) > _TINY else _TINY
            h *= d * c
        if abs(d * c - 1.0) < _EPS:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b) for a, b > 0 and 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(b, a, 1.0 - x) / b


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with ``df`` degrees of freedom."""
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return tail if t > 0 else 1.0 - tail


def robust_spread(values: Sequence[float]) -> float:
    """1.4826 × the median absolute deviation; the sample standard deviation when that is 0 (0 for < 2 values)."""
    if len(values) < 2:
        return 0.0
    centre = statistics.median(values)
    mad = statistics.median(abs(v - centre) for v in values) * MAD_TO_SIGMA
    return mad if mad > 0 else statistics.stdev(values)
