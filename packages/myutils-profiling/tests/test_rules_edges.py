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


def test_benjamini_hochberg_steps_up_past_a_miss() -> None:
    from my_utils.profiling.analysis.rules._stats import benjamini_hochberg

    # m = 3, rate 5 %: the k-th smallest must be <= k * 0.05 / 3 = 0.0167, 0.0333, 0.05. The smallest
    # (0.02) misses its bound, but the third (0.04) meets its own: step-up keeps all three.
    assert benjamini_hochberg([0.04, 0.02, 0.025], 3, 0.05) == [True, True, True]
    # the same p-values among 10 tests: bounds 0.005, 0.01, 0.015: none kept
    assert benjamini_hochberg([0.04, 0.02, 0.025], 10, 0.05) == [False, False, False]
    assert benjamini_hochberg([0.001, 0.9], 2, 0.05) == [True, False]


def _jitter(rcv: float, steps: int = 200, name: str = "forward") -> list[MetricEvent]:
    """A region whose per-step robust CV is ``rcv`` exactly (values M-D, M, M+D repeated: MAD = D), and a steady step."""
    median, spread = 100.0, rcv * 100.0 / 1.4826
    out = []
    for s in range(steps):
        v = median + spread * (-1, 0, 1)[s % 3]
        out.append(MetricEvent(name, v, "duration", "ms", "mytimer", 0, s, attrs={"depth": 1}))
        out.append(MetricEvent("step_time", v + 100.0, "duration", "ms", "mytimer", 0, s, attrs={"depth": 0}))
    return out


@pytest.mark.parametrize(("rcv", "severity"), [(0.10, None), (0.30, "warning"), (0.45, "critical"),
                                               (0.80, "critical")])
def test_jitter_is_flagged_above_cv_and_its_severity_follows_the_time_above_the_median(
        rcv: float, severity: str | None) -> None:
    """Values M-D, M, M+D: the time above the median is D/3 per step, over a 200 ms median step; critical
    from 5 % (rcv 0.45: D = 30.35 ms, 5.06 %), a warning from 1 % (rcv 0.30: 3.4 %)."""
    findings = [f for f in check_analysis_rule("variability", _jitter(rcv), cv=0.15, critical_cv=0.5)
                if f["evidence"]["names"] == ["forward"]]
    assert [f["severity"] for f in findings] == ([severity] if severity else [])
    if findings:
        spread = rcv * 100.0 / 1.4826
        assert findings[0]["impact"]["share_of_step"] == pytest.approx(spread / 3 / 200.0, rel=0.02)


def test_a_spread_within_the_host_jitter_is_information() -> None:
    """A 20 ms region varying 30 % (robust SD 6 ms) is what a loaded host does: info, below the 10 ms floor;
    the same region with a floor of 5 ms is a warning."""
    events = [MetricEvent(e.name, e.value / 5.0, e.kind, e.unit, e.source, e.rank, e.step, attrs=e.attrs)
              for e in _jitter(0.30)]
    (f,) = [f for f in check_analysis_rule("variability", events) if f["evidence"]["names"] == ["forward"]]
    assert f["severity"] == "info" and f["evidence"]["host_jitter_ms"] == 10.0 and "the host's" in f["detail"]
    (f,) = [f for f in check_analysis_rule("variability", events, jitter_ms=5.0) if f["evidence"]["names"] == ["forward"]]
    assert f["severity"] == "warning"
