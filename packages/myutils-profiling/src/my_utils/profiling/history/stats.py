"""The few distributions the gate needs, without SciPy: Student's t tail and a robust spread.

``t_sf`` is the upper tail of Student's t through the regularised incomplete beta function
of the rules' statistics (``analysis.rules._stats.incomplete_beta``); ``robust_spread`` is the median
absolute deviation scaled to a normal standard deviation (1.4826), falling back to the sample
standard deviation when more than half the values are equal.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from my_utils.profiling.analysis.rules._stats import incomplete_beta

#: the incomplete beta function, under the name the gate's tests use (one implementation: the rules' statistics)
betainc = incomplete_beta

MAD_TO_SIGMA = 1.4826


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with ``df`` degrees of freedom."""
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    tail = 0.5 * incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
    return tail if t > 0 else 1.0 - tail


def robust_spread(values: Sequence[float]) -> float:
    """1.4826 × the median absolute deviation; the sample standard deviation when that is 0 (0 for < 2 values)."""
    if len(values) < 2:
        return 0.0
    centre = statistics.median(values)
    mad = statistics.median(abs(v - centre) for v in values) * MAD_TO_SIGMA
    return mad if mad > 0 else statistics.stdev(values)
