"""NTP arithmetic: the stated uncertainty bounds the error for any delays (Hypothesis), drift rates."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from my_utils.core.errors import UsageError
from my_utils.distributed.clock_estimate import ClockEstimate, ClockSample, estimate_drift, estimate_offset

delays = st.integers(min_value=0, max_value=5_000_000)  # ns one way: 0..5 ms, independently each way
trips = st.lists(st.tuples(delays, delays, st.integers(0, 100_000)), min_size=1, max_size=40)


def _samples(offset_ns: int, legs: list[tuple[int, int, int]], start: int = 1_700_000_000 * 10**9) -> list[ClockSample]:
    """Round trips against a server whose clock reads client + offset_ns (constant)."""
    out = []
    t = start
    for there, back, turnaround in legs:
        t1 = t
        t2 = t1 + there + offset_ns
        t3 = t2 + turnaround
        t4 = t3 - offset_ns + back
        out.append(ClockSample(t1, t2, t3, t4))
        t = t4 + 1000
    return out


@given(offset=st.integers(-10**12, 10**12), legs=trips, keep=st.integers(1, 12))
def test_truth_lies_within_the_uncertainty(offset: int, legs: list[tuple[int, int, int]], keep: int) -> None:
    samples = _samples(offset, legs)
    est = estimate_offset(samples, keep=keep)
    assert abs(est.offset_s * 1e9 - offset) <= est.uncertainty_s * 1e9 + 1  # float rounding
    best = min(s.rtt_ns for s in samples)
    assert est.best_rtt_s * 1e9 == pytest.approx(best)
    assert est.uncertainty_s * 1e9 <= best / 2 + 1  # never worse than half the best RTT
    assert est.kept == min(keep, len(samples))


def test_one_sample_is_the_ntp_formula() -> None:
    # the seed's formula: RTT = (T4-T1)-(T3-T2), offset = (T2 - RTT/2) - T1
    s = ClockSample(t1=1000, t2=5600, t3=5700, t4=1400)
    rtt = (s.t4 - s.t1) - (s.t3 - s.t2)
    assert s.rtt_ns == rtt == 300
    assert s.offset_ns == (s.t2 - rtt / 2) - s.t1 == 4450
    est = estimate_offset([s])
    assert est.offset_s == pytest.approx(4450e-9) and est.uncertainty_s == pytest.approx(150e-9)


def test_intersection_tightens_and_the_median_of_all_would_not() -> None:
    # two symmetric quick trips and many slow asymmetric ones (a busy machine): the min-RTT sample wins
    legs = [(50_000, 3_000_000, 0)] * 20 + [(40_000, 40_000, 0), (10_000, 70_000, 0)]
    samples = _samples(2_500_000, legs)
    single = estimate_offset(samples)
    both = estimate_offset(samples, keep=2)
    assert abs(single.offset_s - 2.5e-3) <= single.uncertainty_s
    assert both.uncertainty_s < single.uncertainty_s and abs(both.offset_s - 2.5e-3) <= both.uncertainty_s
    naive = sorted(s.offset_ns for s in samples)[len(samples) // 2] / 1e9
    assert abs(naive - 2.5e-3) > 1e-3  # what a plain median would have said


def test_inconsistent_samples_fall_back_to_the_best_one() -> None:
    a = _samples(0, [(10, 10, 0)])[0]
    b = _samples(10_000_000, [(20, 20, 0)], start=a.t4 + 10)[0]  # the server clock stepped by 10 ms
    est = estimate_offset([a, b], keep=2)
    assert est.kept == 1 and est.offset_s == pytest.approx(0.0) and est.uncertainty_s == pytest.approx(10e-9)


def test_warmup_and_errors() -> None:
    samples = _samples(0, [(10, 10, 0)] * 3)
    assert estimate_offset(samples, warmup=2).samples == 3
    with pytest.raises(UsageError, match="keep at least 1"):
        estimate_offset(samples, keep=0)
    with pytest.raises(UsageError, match="none of 3 samples is usable"):
        estimate_offset(samples, warmup=3)


def test_drift_rate_and_its_bound() -> None:
    first = ClockEstimate(0.001, 1e-5, 2e-5, 60, 1, 100.0)
    second = ClockEstimate(0.0012, 2e-5, 4e-5, 60, 1, 102.0)
    drift = estimate_drift(first, second)
    assert drift.rate == pytest.approx(1e-4) and drift.ppm == pytest.approx(100)
    assert drift.uncertainty == pytest.approx(1.5e-5) and drift.interval_s == 2.0
    with pytest.raises(UsageError, match="not later than the first"):
        estimate_drift(second, first)


def test_reference_estimate_is_exactly_zero() -> None:
    ref = ClockEstimate.reference(5.0, peer=1)
    assert (ref.offset_s, ref.uncertainty_s, ref.measured_at_s, ref.peer) == (0.0, 0.0, 5.0, 1)
