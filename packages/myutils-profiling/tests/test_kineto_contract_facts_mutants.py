"""Arrivals and the Kineto contract facts on rows built for the cases the real traces lack (issue 36).

``.ci/mutants/kineto.toml`` left three behaviours unpinned: a late host is the straggler only when
its lag stands out from the spread of arrivals inside a host (3×); the run is one-shot only when
every rank is; a rank is the straggler only when it is last in *more* than half the collectives.
The rows are written as ``kineto.arrivals`` and ``kineto.setup`` write them; each expected value is
worked out by hand.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from my_utils.profiling.kineto import arrivals
from my_utils.profiling.kineto.contract_facts import host_facts, setup_facts


def _rank(rank: int, host: str, starts: list[float]) -> Any:
    """One rank's result as the across-ranks step sees it: its arrivals at collectives ``c0``, ``c1``..."""
    rows = [{"key": f"pg|allreduce|{i}", "ts": t, "dur": 5000.0, "step": None, "region": None}
            for i, t in enumerate(starts)]
    return SimpleNamespace(rank=rank, tables={"_arrivals": rows}, context={"host": host})


def _hosts(starts: dict[int, tuple[str, list[float]]]) -> dict[str, Any]:
    out = arrivals.across_ranks([_rank(r, h, s) for r, (h, s) in starts.items()])
    return {row.host: row for row in out.get("host_arrivals", [])}


def test_a_late_host_is_the_straggler_only_beyond_three_times_the_spread_inside_a_host() -> None:
    """Host b's ranks arrive 1,000 µs after host a's, 10 µs apart inside each host: b is the straggler. With ranks
    800 µs apart inside each host, a 1,000 µs lag is under 3 × 800 µs: no host stands out."""
    tight = _hosts({0: ("a", [0.0]), 1: ("a", [10.0]), 2: ("b", [1000.0]), 3: ("b", [1010.0])})
    assert tight["b"].straggler and not tight["a"].straggler and tight["b"].mean_lag_us == 1000.0
    loose = _hosts({0: ("a", [0.0]), 1: ("a", [800.0]), 2: ("b", [1000.0]), 3: ("b", [1800.0])})
    assert loose["b"].mean_lag_us == 1000.0 and loose["b"].mean_spread_us == 800.0
    assert not any(row.straggler for row in loose.values())


def _setup(rank: int, one_shot: int) -> dict[str, Any]:
    return {"rank": rank, "capture_us": 1000.0, "setup_us": 100.0, "gpu_span_us": 500.0, "gpu_idle_us": 50.0,
            "setup_idle_us": 10.0, "one_shot": one_shot, "one_shot_reason": "r", "detail": "d"}


def test_the_run_is_one_shot_only_when_every_rank_is() -> None:
    facts = {f.id: f for f in setup_facts({"kineto_setup": [_setup(0, 1), _setup(1, 0)]})}
    assert facts["setup.one_shot:rank0"].number == 1 and facts["setup.one_shot"].number == 0
    both = {f.id: f for f in setup_facts({"kineto_setup": [_setup(0, 1), _setup(1, 1)]})}
    assert both["setup.one_shot"].number == 1


def _wait(rank: int, last: int, lateness_us: float) -> dict[str, Any]:
    return {"rank": rank, "host": "h", "step": None, "collectives": 10, "comm_us": 1000.0, "wait_us": 0.0,
            "working_us": 1000.0, "waited_for": None, "last_count": last, "mean_lateness_us": lateness_us}


def test_a_rank_last_in_half_the_collectives_is_no_straggler() -> None:
    """Rank 1 arrives 500 µs late on average (its host mate 10 µs): last in 5 of 10 collectives is no pattern,
    in 6 of 10 it is."""
    half = {f.id for f in host_facts({"kineto_collective_wait": [_wait(0, 5, 10.0), _wait(1, 5, 500.0)]})}
    assert "stragglers.rank" not in half
    most = {f.id: f for f in host_facts({"kineto_collective_wait": [_wait(0, 4, 10.0), _wait(1, 6, 500.0)]})}
    assert most["stragglers.rank"].ranks == (1,) and most["stragglers.rank"].number == 0.5
