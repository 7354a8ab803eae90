"""``step_patterns.recurring``: steps that come back every p steps through the whole run, with a similar size."""

from __future__ import annotations

from my_utils.core.step_patterns import recurring


def test_a_stall_among_stray_steps_is_found() -> None:
    steps = [0, 2, 8, 14, 20, 26, 30, 32]
    sizes = [30.0, 142, 91, 148, 81, 119, 28, 125]  # a loaded host's stall of 80 ms, and two stray delays
    assert recurring(steps, sizes, 0, 35) == (6, [2, 8, 14, 20, 26, 32])


def test_the_first_occurrence_may_come_a_whole_period_late() -> None:
    assert recurring([8, 15, 22, 29], [80.0] * 4, 1, 35) == (7, [8, 15, 22, 29])
    assert recurring([9, 16, 23, 30], [80.0] * 4, 1, 35) is None  # step 2 would be missing


def test_sizes_must_be_similar_and_three_at_least() -> None:
    # a stall step made longer by another delay is still the stall; one a third of the others' size is not
    assert recurring([2, 14, 26], [80.0, 80.0, 400.0], 1, 35) == (12, [2, 14, 26])
    assert recurring([2, 14, 26], [27.0, 80.0, 80.0], 1, 35) == (12, [2, 14, 26])
    assert recurring([2, 14, 26], [26.0, 80.0, 80.0], 1, 35) is None
    assert recurring([2, 14], [80.0, 80.0], 1, 25) is None
