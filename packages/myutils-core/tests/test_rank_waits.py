"""``rank_waits``: a rank's head start counts as waiting only when it left with the last rank to come in."""

from __future__ import annotations

import pytest

from my_utils.core.rank_waits import ends_in_collective, step_waits

T = 1_000.0  # unix s of the first start


def test_a_rank_that_left_with_the_late_one_waited_its_head_start() -> None:
    # rank 0 entered 30 ms before rank 1; both left at T + 40 ms (a collective)
    w = step_waits({0: (40.0, T), 1: (10.0, T + 0.030)})
    assert w.strict == pytest.approx({0: 30.0}) and w.loose == pytest.approx({0: 30.0})
    assert w.spread_ratio == pytest.approx(0.0, abs=1e-9)


def test_a_rank_on_its_own_waited_for_nobody() -> None:
    # sequential sections: rank 0 came in 30 ms early and left 30 ms early
    w = step_waits({0: (10.0, T), 1: (10.0, T + 0.030)})
    assert w.strict == {} and w.loose == {} and w.spread_ratio == pytest.approx(1.0)


def test_descheduled_after_the_collective_still_waited() -> None:
    # rank 0 left 10 ms after rank 1 (descheduled after the all-reduce), or 10 ms before it (rank 1 was)
    w = step_waits({0: (50.0, T), 1: (10.0, T + 0.030)})
    assert w.strict == pytest.approx({0: 30.0}) and w.loose == pytest.approx({0: 30.0})
    w = step_waits({0: (30.0, T), 1: (10.0, T + 0.030)})
    assert w.strict == pytest.approx({0: 30.0})
    # 20 ms after: more than half its head start late, no clear case; in a collective section still a wait
    w = step_waits({0: (60.0, T), 1: (10.0, T + 0.030)})
    assert w.strict == {} and w.loose == pytest.approx({0: 30.0})


@pytest.mark.parametrize(("end_ms", "strict"), [(50.0 - 14.99, True), (50.0 - 15.01, False), (50.0 + 14.99, True),
                                                 (50.0 + 15.01, False)])
def test_strict_is_within_half_the_head_start(end_ms: float, strict: bool) -> None:
    # rank 1 came in 30 ms after rank 0 and spent 20 ms in the section
    w = step_waits({0: (end_ms, T), 1: (20.0, T + 0.030)})
    assert (0 in w.strict) is strict
    assert (0 in w.loose) is (end_ms >= 50.0 - 15.0)


def test_a_stall_that_ends_near_a_late_short_section_is_no_wait() -> None:
    """Rank 1 stalls 80 ms in a 0.2 ms data section; rank 0 came in 55 ms later (a delay of its own) and left
    at +55.2 ms: 25 ms apart, within half the head start, but far beyond rank 0's 0.2 ms: no clear wait."""
    w = step_waits({1: (80.2, T), 0: (0.2, T + 0.055)})
    assert w.strict == {}


def test_a_small_head_start_tells_nothing() -> None:
    # 0.4 ms ahead in a 10 ms section (under 5 %): no wait, no spread ratio
    w = step_waits({0: (10.4, T), 1: (10.0, T + 0.0004)})
    assert w.strict == {} and w.loose == {} and w.spread_ratio is None
    # a head start under a quarter of the section is no clear case either
    w = step_waits({0: (12.0, T), 1: (10.0, T + 0.002)})
    assert w.strict == {} and w.loose == pytest.approx({0: 2.0})


def test_one_rank_has_no_wait() -> None:
    assert step_waits({3: (5.0, T)}) == step_waits({})


def test_a_section_ends_in_a_collective_by_the_median_of_its_steps() -> None:
    assert ends_in_collective([0.05, 0.1, 0.9, None])
    assert not ends_in_collective([0.05, 0.1, None])  # two steps that can tell are not enough
    assert not ends_in_collective([0.05, 0.9, 1.0])
    assert ends_in_collective([0.25, 0.25, 1.0]) and not ends_in_collective([0.26, 0.26, 0.1])
