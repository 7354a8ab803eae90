"""NVTX iteration statistics at their edges (issue 36, ``.ci/mutants/nsys.toml``).

An iteration is an outlier only *beyond* 3.5 robust z-scores (0.6745 × distance from the median
over the median absolute deviation), and the p90 interpolates between the two iterations around
it. The per-iteration rows are written here with times chosen so the z-score is 3.5 exactly in
floating point (0.6745 × 7,000 / 1,349).
"""

from __future__ import annotations

import pytest

from my_utils.profiling.nsys.iterations import OUTLIER_Z, iteration_stats
from my_utils.profiling.nsys.model import Table

COLUMNS = ("pid", "iteration", "cpu_ns", "start", "end", "busy_ns", "gpu_window_ns", "overlap_ns", "communication_ns")


def table(times: list[int]) -> Table:
    rows, t = [], 0
    for i, ns in enumerate(times):
        rows.append((1, i, ns, t, t + ns, 0, 0, 0, 0))
        t += ns
    return Table("nsys_iterations", COLUMNS, tuple(rows))


def test_an_iteration_at_exactly_the_outlier_threshold_is_not_one() -> None:
    """Median 100,000 ns, median absolute deviation 1,349 ns: 107,000 ns is 3.5 robust z-scores out, not beyond."""
    assert OUTLIER_Z == 3.5 and 0.6745 * 7_000 / 1_349 == 3.5
    base = [98_651, 98_651, 98_651, 100_000, 101_349, 101_349]
    (at,) = iteration_stats(table([*base, 107_000]))
    assert at.median_ns == 100_000 and at.outliers == ()
    (beyond,) = iteration_stats(table([*base, 107_001]))
    assert [(o.iteration, o.cpu_ns, o.position) for o in beyond.outliers] == [(6, 107_001, "last")]


def test_the_p90_interpolates() -> None:
    """Five iterations of 10..50 µs: the 90th percentile lies 60 % of the way from 40 to 50 µs."""
    (s,) = iteration_stats(table([10_000, 20_000, 30_000, 40_000, 50_000]))
    assert s.p90_ns == pytest.approx(46_000)
