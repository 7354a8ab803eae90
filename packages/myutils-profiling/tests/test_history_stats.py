"""Student's t tail and the robust spread, against a numerical integral and hand arithmetic."""

from __future__ import annotations

import math

import pytest

from my_utils.profiling.history.stats import betainc, robust_spread, t_sf


def _t_tail_by_integration(t: float, df: int, steps: int = 200_000) -> float:
    """P(T > t): Simpson's rule over the t density from t to a far bound (independent of the beta function)."""
    c = math.gamma((df + 1) / 2) / (math.sqrt(df * math.pi) * math.gamma(df / 2))
    hi = 2000.0
    h = (hi - t) / steps
    f = [c * (1 + (t + i * h) ** 2 / df) ** (-(df + 1) / 2) for i in range(steps + 1)]
    return h / 3 * (f[0] + f[-1] + 4 * sum(f[1:-1:2]) + 2 * sum(f[2:-1:2]))


@pytest.mark.parametrize(("t", "df"), [(0.5, 4), (2.0, 10), (3.5, 29), (6.0, 7), (1.2, 3)])
def test_t_tail_matches_the_integral(t: float, df: int) -> None:
    assert t_sf(t, df) == pytest.approx(_t_tail_by_integration(t, df), rel=1e-5, abs=1e-9)
    assert t_sf(-t, df) == pytest.approx(1 - t_sf(t, df), rel=1e-12)


def test_one_degree_of_freedom_is_cauchy() -> None:
    assert t_sf(1.2, 1) == pytest.approx(0.5 - math.atan(1.2) / math.pi, rel=1e-12)


def test_beta_symmetry_and_edges() -> None:
    assert betainc(2.5, 0.5, 0.3) == pytest.approx(1 - betainc(0.5, 2.5, 0.7), rel=1e-12)
    assert betainc(1.0, 1.0, 0.25) == pytest.approx(0.25)  # the uniform distribution
    assert (betainc(3, 4, 0.0), betainc(3, 4, 1.0)) == (0.0, 1.0)


def test_robust_spread() -> None:
    values = [10, 11, 12, 13, 100]  # median 12, deviations 2 1 0 1 88 -> MAD 1
    assert robust_spread(values) == pytest.approx(1.4826)
    assert robust_spread([5, 5, 5, 6]) == pytest.approx(0.5)  # MAD 0: the standard deviation
    assert robust_spread([1.0]) == 0.0
