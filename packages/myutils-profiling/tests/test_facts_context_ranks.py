"""The ranks a report says it analysed read as ranks, never as a count (``rank 0``, not ``0``)."""

from __future__ import annotations

from typing import Any

import pytest

from my_utils.profiling.analysis.facts import context_facts, rank_list


@pytest.mark.parametrize(("ranks", "shown"), [
    ([0], "rank 0"),
    ([3], "rank 3"),
    ([1, 0], "ranks 0-1 (2 ranks)"),
    ([0, 1, 2, 3, 4, 5, 6, 7, 9], "ranks 0-7, 9 (9 ranks)"),
    ([2, 2, 5], "ranks 2, 5 (2 ranks)"),
    (["host-a"], "rank host-a"),
])
def test_rank_list_names_ranks(ranks: list[Any], shown: str) -> None:
    assert rank_list(ranks) == shown


def test_context_fact_of_one_rank_is_not_a_bare_number() -> None:
    # the demo's report once said "ranks analysed: 0" for rank 0: read as "nothing analysed"
    by_id = {f.id: f for f in context_facts({"ranks": [0], "source": "kineto"}, [])}
    assert by_id["context.ranks"].value == "rank 0"
    by_id = {f.id: f for f in context_facts({}, [4, 5, 6])}
    assert by_id["context.ranks"].value == "ranks 4-6 (3 ranks)" and by_id["context.ranks"].source == "the events' ranks"
    assert not {f.id: f for f in context_facts({}, [])}["context.ranks"].measured
