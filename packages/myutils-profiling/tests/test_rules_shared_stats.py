"""The statistics the rules share: one ``Summary`` per (series, warm-up) and analysis, the same floats as before.

``_stats.summarize`` replaces ``fmean``/``pstdev``/``median``/``mad`` computed separately by each
rule; ``_series.step_summary`` hands every rule the same object for the analyzer's events.
"""

from __future__ import annotations

import gc
import heapq
import math
import random
import statistics
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from my_utils.core.events import MetricEvent, write_events
from my_utils.profiling.analysis import MetricsAnalyzer
from my_utils.profiling.analysis.rules import _series, _stats
from my_utils.profiling.analysis.rules._series import Series, build_series, step_summary
from my_utils.profiling.analysis.rules._stats import (
    cv,
    mad,
    mad_sorted,
    pstdev,
    quantile,
    robust_cv,
    summarize,
)
from my_utils.profiling.analysis.rules.variability import _extreme_steps

_VALUE = st.one_of(st.floats(-1e6, 1e6), st.sampled_from([0.0, -0.0, 5.0, 5.0, 1e-300, 1e300, -1e300, math.inf,
                                                          -math.inf]))


def _same(a: Any, b: Any) -> bool:
    return repr(a) == repr(b)


def _or_error(f: Any) -> Any:
    try:
        return f()
    except ValueError as exc:
        return f"ValueError: {exc}"


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(values=st.lists(_VALUE, max_size=30), skip=st.integers(0, 3))
def test_a_summary_is_the_separate_statistics(values: list[float], skip: int) -> None:
    s = summarize(values, skip)
    kept = values[skip:]
    assert s.ordered == sorted(kept) and s.n == len(kept) and list(s.values) == kept
    if not kept:
        assert math.isnan(s.median) and s.mad == 0.0
        return
    assert _same(s.median, statistics.median(kept))
    assert _same(s.mad, mad(kept))
    assert _same(_or_error(lambda: s.mean), _or_error(lambda: statistics.fmean(kept)))
    assert _same(_or_error(lambda: s.std), _or_error(lambda: pstdev(kept)))
    assert _same(_or_error(lambda: s.cv), _or_error(lambda: cv(kept)))
    assert _same(s.robust_cv, robust_cv(kept))
    for q in (0.0, 0.1, 0.5, 0.9, 1.0):
        assert _same(s.quantile(q), quantile(sorted(kept), q))


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.lists(st.one_of(st.floats(-1e300, 1e300), st.sampled_from([0.0, 1.0, 1.0, 2.5])), min_size=2, max_size=60))
def test_mad_of_sorted_values_picks_the_same_deviations(values: list[float]) -> None:
    ordered = sorted(values)
    assert _same(mad_sorted(ordered, statistics.median(values)), mad(values))


def test_mad_of_sorted_values_on_long_series_with_ties() -> None:
    rnd = random.Random(7)
    for n in (2, 3, 4, 101, 1000, 2501):
        values = [rnd.choice([1.0, 2.0, 2.0, 3.5, rnd.gauss(2, 1)]) for _ in range(n)]
        assert _same(mad_sorted(sorted(values), statistics.median(values)), mad(values))


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(values=st.lists(st.sampled_from([1.0, 2.0, 2.0, 3.0, 7.5, -1.0]), min_size=0, max_size=40))
def test_extreme_steps_are_heapqs(values: list[float]) -> None:
    steps = list(range(100, 100 + len(values)))
    slowest, fastest = _extreme_steps(values, steps, sorted(values), 5)
    pairs = list(zip(values, steps, strict=True))
    assert slowest == [s for _, s in heapq.nlargest(5, pairs)]
    assert fastest == [s for _, s in heapq.nsmallest(5, pairs)]


def _events(steps: int = 12) -> list[MetricEvent]:
    rnd = random.Random(1)
    out = []
    for rank in (0, 1):
        for step in range(steps):
            out.append(MetricEvent("step_time", 10 + rnd.random() + (8 if step == 7 else 0), "duration", "ms",
                                   "mytimer", rank, step))
            out.append(MetricEvent("forward", 6 + rnd.random() * (4 if rank else 1), "duration", "ms", "mytimer",
                                   rank, step, attrs={"depth": 0}))
    return out


def test_the_analyzers_events_hand_out_one_summary_per_series_and_warmup() -> None:
    agg = MetricsAnalyzer(_events()).aggregate()
    events = agg.aggregated()
    mine = build_series(events)[("step_time", 0, "mytimer")]
    first = step_summary(events, mine, 1)
    assert step_summary(events, build_series(events)[("step_time", 0, "mytimer")], 1) is first  # another copy
    assert step_summary(events, mine, 0) is not first and step_summary(events, mine, 0).n == first.n + 1
    assert _same(first.median, statistics.median(mine.values[1:]))
    mine.values[3] = 1e9  # a caller's copy changed in place: its own values are summarised
    changed = step_summary(events, mine, 1)
    assert changed is not first and changed.ordered[-1] == 1e9
    agg.add(MetricEvent("step_time", 5.0, "duration", "ms", "mytimer", 0, 99))  # a fold: everything anew
    after = step_summary(events, build_series(events)[("step_time", 0, "mytimer")], 1)
    assert after is not first and after.n == first.n + 1
    plain = _events()  # a plain list (a third party's events): computed each time, the same numbers
    s = build_series(plain)[("step_time", 0, "mytimer")]
    assert step_summary(plain, s, 1) is not step_summary(plain, s, 1)
    assert step_summary(plain, s, 1).ordered == sorted(s.values[1:])


def test_an_analysis_summarises_each_series_once_for_every_rule(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "metrics_events.jsonl"
    write_events(path, _events(40))
    made: list[int] = []
    sorted_again: list[int] = []  # summaries made from a nearby warm-up's sorted values, without a sort
    asked: list[tuple[Any, ...]] = []
    real_summarize, real_step_summary = _stats.summarize, _series.step_summary
    real_summarize_sorted = _stats.summarize_sorted

    def counting(values: Any, skip: int = 0) -> Any:
        made.append(skip)
        return real_summarize(values, skip)

    def counting_sorted(values: Any, ordered: Any, skip: int = 0) -> Any:
        assert ordered == sorted(values[skip:])
        made.append(skip)
        sorted_again.append(skip)
        return real_summarize_sorted(values, ordered, skip)

    def asking(events: Any, series: Series, warmup: int) -> Any:
        asked.append((series.name, series.rank, series.source, warmup))
        return real_step_summary(events, series, warmup)

    monkeypatch.setattr(_series, "summarize", counting)
    monkeypatch.setattr(_series, "summarize_sorted", counting_sorted)
    for module in ("anomalies", "variability", "imbalance"):
        monkeypatch.setattr(f"my_utils.profiling.analysis.rules.{module}.step_summary", asking)
    report = MetricsAnalyzer(path).analyze()
    assert {f.category for f in report.findings} >= {"anomaly"}
    assert {w for *_key, w in asked} == {0, 1}  # the warm-up cut (1 step) and whole series
    assert len(asked) > len(set(asked))  # the rules asked for the same summaries more than once...
    assert len(made) == len(set(asked))  # ...and each (series, warm-up) was computed once
    assert sorted_again  # the whole series from the warm-up cut one (or back): no second sort


def test_the_analysis_pauses_the_cyclic_gc_and_restores_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from my_utils.profiling.analysis.rules.anomalies import AnomalyRule

    seen: list[bool] = []
    real = AnomalyRule.evaluate

    def watching(self: AnomalyRule, events: Any) -> Any:
        seen.append(gc.isenabled())
        return real(self, events)

    monkeypatch.setattr(AnomalyRule, "evaluate", watching)
    assert gc.isenabled()
    MetricsAnalyzer(_events()).analyze()
    assert seen == [False] and gc.isenabled()
    gc.disable()
    try:
        MetricsAnalyzer(_events()).analyze()
        assert not gc.isenabled()  # left as the caller had it
    finally:
        gc.enable()
