"""Bounded-memory robust statistics for the lockstep merge: medians from log-scale histograms, a sign test.

The merge holds one step per rank, so a median over steps cannot keep the values. A value
goes into a bin of relative width :data:`RESOLUTION` on a log scale (a sparse counter:
the bins a section's times fall in, not its steps), and the median is read back from the
bins to within half a bin. Times that are zero (a section that took nothing) and sums that
overflowed have bins of their own.
"""

from __future__ import annotations

import math
from collections import Counter

__all__ = ["RESOLUTION", "LogHistogram", "sign_test_p"]

#: Relative width of a bin: a median read back is within half of it (0.05 %) of the true one.
RESOLUTION = 1e-3
_LOG = math.log1p(RESOLUTION)
_LARGEST = 1.7976931348623157e308


class LogHistogram:
    """Counts of positive values in log-spaced bins (and of zeros): add, then read quantiles."""

    __slots__ = ("bins", "count", "infinite", "zeros")

    def __init__(self) -> None:
        self.bins: Counter[int] = Counter()
        self.zeros = 0
        self.infinite = 0
        self.count = 0

    def add(self, value: float) -> None:
        """Count ``value`` (a negative one counts as zero; an overflowed sum as infinite)."""
        self.count += 1
        if value <= 0:
            self.zeros += 1
        elif value == math.inf:
            self.infinite += 1
        else:
            self.bins[round(math.log(value) / _LOG)] += 1

    def quantile(self, q: float) -> float:
        """The ``q`` quantile (0..1) of the values added (the lower one of two middle values), NaN when empty."""
        if not self.count:
            return math.nan
        rank = max(0, min(self.count - 1, math.ceil(q * self.count) - 1))
        if rank < self.zeros:
            return 0.0
        seen = self.zeros
        for b in sorted(self.bins):
            seen += self.bins[b]
            if seen > rank:
                return _center(b)
        return math.inf

    def median(self) -> float:
        """The median (the lower middle value of an even count; see :meth:`quantile`)."""
        return self.quantile(0.5)


def _center(b: int) -> float:
    """The value at the middle (log scale) of bin ``b``; the largest float for a bin beyond it."""
    try:
        return min(math.exp(b * _LOG), _LARGEST)
    except OverflowError:
        return _LARGEST


def sign_test_p(above: int, n: int, chance: float = 0.5) -> float:
    """One-sided P(X >= ``above``) for X ~ Binomial(``n``, ``chance``), summed in log space (no overflow at any ``n``).

    ``chance`` 1/2: late or early as a coin falls; 1/k: the last of k ranks by chance.
    """
    if n <= 0 or above <= 0:
        return 1.0
    if above > n:
        return 0.0
    hit, miss = math.log(chance), math.log1p(-chance)
    terms = [math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * hit + (n - k) * miss
             for k in range(above, n + 1)]
    top = max(terms)
    return min(1.0, math.exp(top) * sum(math.exp(t - top) for t in terms))
