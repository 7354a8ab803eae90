"""clock: one perf_counter_ns -> unix offset per process, measured from the tightest paired read."""

from __future__ import annotations

import itertools
import time

import pytest

from my_utils.core import clock


def test_now_is_unix_time_and_never_runs_backwards() -> None:
    assert abs(clock.unix_now_ns() - time.time_ns()) < 1_000_000_000
    stamps = [clock.unix_now_ns() for _ in range(20_000)]
    assert all(b >= a for a, b in itertools.pairwise(stamps))


def test_the_offset_is_measured_once_and_again_only_on_request(monkeypatch: pytest.MonkeyPatch) -> None:
    first = clock.unix_offset_ns()
    real = time.time_ns
    monkeypatch.setattr(time, "time_ns", lambda: real() + 3_600 * 10**9)  # the wall clock is set an hour on
    try:
        assert clock.unix_offset_ns() == first  # not followed by itself: timestamps stay ordered
        assert clock.reanchor() - first == pytest.approx(3_600 * 10**9, abs=10**9)
    finally:
        monkeypatch.undo()
        clock.reanchor()
    assert abs(clock.unix_offset_ns() - first) < 10**9


def test_the_tightest_read_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    # perf reads: pair 1 is 50 ms apart (preempted), pair 2 is 1 µs apart: pair 2's midpoint counts
    perf = iter([0, 50_000_000, 100_000_000, 100_001_000] + [10**12, 10**12 + 10**9] * 3)
    wall = iter([5_000, 7_000_000_000] + [0] * 3)
    monkeypatch.setattr(clock, "perf_counter_ns", lambda: next(perf))
    monkeypatch.setattr(time, "time_ns", lambda: next(wall))
    try:
        assert clock.reanchor() == 7_000_000_000 - 100_000_500
    finally:
        monkeypatch.undo()
        clock.reanchor()
