"""Thresholds of the rules that a slip would move without any other test noticing.

Each test here killed a planted bug the rest of the suite let through (``.ci/mutants.toml``:
``rule-memory-critical``, ``rule-imbalance-sign-test``).
"""

from __future__ import annotations

import pytest

from my_utils.core.events import MetricEvent
from my_utils.core.testing.contract import check_analysis_rule
from my_utils.profiling.analysis.rules.imbalance import sign_test_p


def _leak(growth: float, steps: int = 40) -> list[MetricEvent]:
    """Memory rising steadily by ``growth`` of its start over ``steps`` steps (a tiny alternating wiggle)."""
    base = 1e9
    return [MetricEvent("memory.allocated", base * (1 + growth * s / (steps - 1)) + (1e3 if s % 2 else -1e3),
                        "gauge", "bytes", "memory", 0, s) for s in range(steps)]


@pytest.mark.parametrize(("growth", "severity"), [(0.2, "warning"), (0.45, "warning"), (0.55, "critical"),
                                                  (1.0, "critical")])
def test_a_leak_is_critical_from_critical_growth_on_and_a_warning_below(growth: float, severity: str) -> None:
    (finding,) = check_analysis_rule("memory_growth", _leak(growth), min_growth=0.05, critical_growth=0.5)
    assert finding["evidence"]["growth"] == pytest.approx(growth, rel=0.01)
    assert finding["severity"] == severity


def test_below_min_growth_is_no_finding() -> None:
    assert check_analysis_rule("memory_growth", _leak(0.03), min_growth=0.05) == []


@pytest.mark.parametrize("n", [1, 2, 5, 12])
def test_the_sign_test_is_the_binomial_upper_tail(n: int) -> None:
    # P(X >= k) for X ~ Binomial(n, 1/2), by counting all 2**n outcomes of n fair coins
    late_counts = [bin(outcome).count("1") for outcome in range(2 ** n)]
    for k in range(n + 1):
        assert sign_test_p(k, n) == pytest.approx(sum(c >= k for c in late_counts) / 2 ** n)
    assert sign_test_p(0, n) == 1.0 and sign_test_p(n, n) == pytest.approx(0.5 ** n)
