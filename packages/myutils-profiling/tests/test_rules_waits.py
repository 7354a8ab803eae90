"""Working, not waiting, and the host's jitter in the time-series rules (``rules/_waits.py`` and its users).

Runs are generated as MyTimer would report them: per step and rank ``data``, ``forward``,
``backward`` and ``optimizer`` with their starts (``ts``), ``backward`` ending in an all-reduce
that every rank leaves when the last has done its own backward work. Expected values come from
the planted times.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable
from pathlib import Path

import pytest

from my_utils.core.events import MetricEvent, write_events
from my_utils.core.testing import check_analysis_rule
from my_utils.profiling.analysis.analyzer import MetricsAnalyzer
from my_utils.profiling.analysis.rules._series import build_series
from my_utils.profiling.analysis.rules._waits import HostJitter, recurring, region_waits

T0 = 1_764_000_000.0
SECTIONS = (("data", 2.0), ("forward", 10.0), ("backward", 16.0), ("optimizer", 2.0))
Extra = Callable[[int, int, str], float]


def sync_events(ranks: int, steps: int, extra: Extra = lambda r, s, n: 0.0, seed: int = 0,
                jitter: float = 0.02) -> list[MetricEvent]:
    """The regions and step times of a synchronous run (module docstring); ``extra`` ms planted per (rank, step, name)."""
    rng = random.Random(seed)
    out: list[MetricEvent] = []
    t = T0
    for step in range(steps):
        clock = dict.fromkeys(range(ranks), t)
        begin = dict(clock)
        for name, base in SECTIONS:
            starts = dict(clock)
            for r in range(ranks):
                clock[r] = starts[r] + (base * (1 + rng.uniform(-jitter, jitter)) + extra(r, step, name)) / 1e3
            if name == "backward":
                out_at = max(clock.values()) + 1e-4
                clock = dict.fromkeys(range(ranks), out_at)
            for r in range(ranks):
                out.append(MetricEvent(name, (clock[r] - starts[r]) * 1e3, "duration", "ms", "mytimer", r, step,
                                       ts=starts[r], attrs={"depth": 0}))
        for r in range(ranks):
            out.append(MetricEvent("step_time", (clock[r] - begin[r]) * 1e3, "duration", "ms", "mytimer", r, step,
                                   ts=begin[r], attrs={"from": "sum of depth-0 regions"}))
        t = max(clock.values()) + 2e-4
    return out


def _value(events: list[MetricEvent], name: str, rank: int, step: int) -> float:
    return next(e.value for e in events if (e.name, e.rank, e.step) == (name, rank, step))


def test_the_rank_slow_in_forward_is_named_not_the_rank_that_waits_in_backward() -> None:
    """Before: "backward 93% on rank 0" ranked first, and no finding named rank 1's forward."""
    events = sync_events(2, 30, extra=lambda r, s, n: 30.0 if (r, n) == (1, "forward") else 0.0)
    (f,) = check_analysis_rule("rank_imbalance", events)
    assert f["id"] == "rank_imbalance:mytimer:forward:rank1"
    ev = f["evidence"]
    # independently: per step, rank 1's forward less rank 0's; the planted 30 ms plus the jitter
    expected = statistics.median(_value(events, "forward", 1, s) - _value(events, "forward", 0, s) for s in range(30))
    assert ev["excess_ms"] == pytest.approx(expected, rel=1e-6) and ev["excess_ms"] == pytest.approx(30.0, abs=1.0)
    assert ev["late_steps"] == 30 and f["severity"] == "critical"
    (waited,) = ev["waiting"]
    assert waited["rank"] == 0 and waited["in"] == "backward"
    waits = [(_value(events, "forward", 1, s) + _value(events, "data", 1, s))
             - (_value(events, "forward", 0, s) + _value(events, "data", 0, s)) for s in range(30)]
    assert waited["ms"] == pytest.approx(statistics.fmean(waits), rel=1e-3)
    assert f["impact"]["ms_per_step"] == pytest.approx(expected, rel=1e-6)


def test_waits_are_read_from_the_analyzers_events_as_from_a_list(tmp_path: Path) -> None:
    """The analyzer keeps each MyTimer cell's first start: the same finding from a file as from the list."""
    events = sync_events(2, 30, extra=lambda r, s, n: 30.0 if (r, n) == (1, "forward") else 0.0)
    path = tmp_path / "metrics_events.jsonl"
    write_events(path, events)
    report = MetricsAnalyzer(path, traces=[]).analyze()
    found = [f for f in report.findings if f.category == "imbalance"]
    assert [f.id for f in found] == ["rank_imbalance:mytimer:forward:rank1"]
    assert found[0].evidence["waiting"][0]["in"] == "backward"
    assert not [f for f in report.findings if f.severity != "info" and f.category != "imbalance"]
    assert report.findings[0].id == "rank_imbalance:mytimer:forward:rank1"  # ranked first: the saving is largest


def test_without_starts_the_waiting_rank_cannot_be_told() -> None:
    """The same run with no starts: no wait can be taken out, and rank 0's backward looks slow (why the
    starts matter)."""
    events = sync_events(2, 30, extra=lambda r, s, n: 30.0 if (r, n) == (1, "forward") else 0.0)
    bare = [MetricEvent(e.name, e.value, e.kind, e.unit, e.source, e.rank, e.step, attrs=e.attrs) for e in events]
    assert region_waits(bare, build_series(bare)).ms == {}
    ids = {f["id"] for f in check_analysis_rule("rank_imbalance", bare)}
    assert ids == {"rank_imbalance:mytimer:forward:rank1", "rank_imbalance:mytimer:backward:rank0"}


def test_a_spike_is_one_finding_of_the_rank_that_worked_and_information() -> None:
    events = sync_events(2, 36, extra=lambda r, s, n: 200.0 if (r, s, n) == (1, 20, "forward") else 0.0)
    found = check_analysis_rule("anomalies", events)
    spikes = [f for f in found if 20 in f["evidence"]["steps"]]
    (f,) = spikes
    ev = f["evidence"]
    assert ev["names"] == ["step_time"] and ev["ranks"] == [1] and ev["explained_by"]["name"] == "forward"
    assert "step 20 on rank 1" in f["title"] and "in forward" in f["title"]
    assert f["severity"] == "info"  # one step cannot tell the program from the host
    (waited,) = ev["waiting_ranks"]
    assert (waited["rank"], waited["in"], waited["steps"]) == (0, "backward", [20])
    assert waited["ms"] == pytest.approx(200.0, abs=2.0)
    assert not check_analysis_rule("rank_imbalance", events)  # one step is no straggler


def test_a_recurring_stall_names_its_period_and_is_graded_by_its_cost() -> None:
    stalled = list(range(2, 36, 6))
    events = sync_events(2, 36, extra=lambda r, s, n: 80.0 if (r, n) == (1, "data") and s in stalled else 0.0)
    found = [f for f in check_analysis_rule("anomalies", events) if f["severity"] != "info"]
    (f,) = found
    ev = f["evidence"]
    assert ev["period"] == 6 and ev["recurring_steps"] == stalled
    assert ev["ranks"] == [1] and "every 6 steps (2, 8, 14, 20, 26, 32)" in f["title"]
    assert f"rank {1}" in f["title"] and ("data" in f["title"])
    # the saving: 80 ms on 6 of the 35 steps tested, over a ~30 ms median step: critical (>= 5 %)
    step = statistics.median(_value(events, "step_time", 1, s) for s in range(1, 36))
    assert f["impact"]["share_of_step"] == pytest.approx(6 * 80.0 / 35 / step, rel=0.05)
    assert f["severity"] == "critical"


def test_a_clean_run_on_a_jittery_host_gets_no_warning() -> None:
    """Isolated 10-60 ms delays on random regions, ranks and steps (a loaded host's time slices)."""
    rng = random.Random(5)
    hits = {(rng.randrange(2), rng.randrange(1, 36), rng.choice([n for n, _ in SECTIONS])): rng.uniform(10, 60)
            for _ in range(14)}
    events = sync_events(2, 36, extra=lambda r, s, n: hits.get((r, s, n), 0.0), seed=3)
    for rule in ("anomalies", "variability", "rank_imbalance", "bottleneck"):
        assert [f["title"] for f in check_analysis_rule(rule, events) if f["severity"] != "info"] == [], rule


def test_the_host_jitter_is_the_tail_of_the_other_names_excess() -> None:
    pool = {"a": [float(x) for x in range(100)], "b": [0.0] * 100, "c": [1000.0] * 3}
    jitter = HostJitter(pool, floor=5.0, tail=0.99)
    # for "c", the 200 values of a and b: the 198th smallest (ceil(0.99 * 200)) is 97; c's own do not count
    others = sorted(pool["a"] + pool["b"])
    assert jitter.level("c") == others[197] == 97.0
    # for "a", b's 100 zeros and c's three 1000s: the 102nd smallest of 103 is 1000
    assert jitter.level("a") == 1000.0
    assert HostJitter(pool, floor=500.0).level("c") == 500.0  # never below the floor
    assert HostJitter({"a": [1.0] * 50}, floor=5.0).level("b") == 5.0  # too few values: the floor


@pytest.mark.parametrize(("steps", "first", "last", "expected"), [
    ([2, 8, 14, 20, 26, 32], 1, 35, (6, [2, 8, 14, 20, 26, 32])),
    ([2, 8, 14, 20, 26, 32, 17], 1, 35, (6, [2, 8, 14, 20, 26, 32])),  # a stray step does not hide the stall
    ([20, 26, 32], 1, 35, None),  # occurrences at 2, 8, 14 would be missing: no stall through the run
    ([2, 8, 20, 26, 32], 1, 35, (12, [8, 20, 32])),  # 14 missing: the longest complete pattern left
    ([10, 16, 22], 1, 35, None),  # 4 and 28, 34 would be missing
    ([5, 17, 29], 1, 35, (12, [5, 17, 29])),
    ([5, 17], 1, 35, None),  # two are no pattern
])
def test_recurring_steps(steps: list[int], first: int, last: int, expected: tuple[int, list[int]] | None) -> None:
    assert recurring(steps, [80.0] * len(steps), first, last) == expected


def test_recurring_steps_have_a_similar_size() -> None:
    # the small one at 14 breaks the 6-step pattern; the complete one without it is every 12 steps
    assert recurring([2, 8, 14, 20, 26, 32], [80, 80, 10, 80, 80, 80], 1, 35) == (12, [8, 20, 32])
    # half of them small: the median is small, so every one of them is "similar" to it
    assert recurring([2, 8, 14, 20, 26, 32], [80, 10, 80, 10, 80, 10], 1, 35) == (6, [2, 8, 14, 20, 26, 32])
    assert recurring([2, 8, 14, 20, 26, 32], [80, 10, 80, 80, 10, 80], 1, 35) is None
    assert recurring([2, 8, 14, 20, 26, 32], [80, 70, 90, 80, 60, 80], 1, 35) == (6, [2, 8, 14, 20, 26, 32])
