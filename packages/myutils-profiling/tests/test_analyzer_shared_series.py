"""The analyzer builds the step series once per analysis and shares them with the rules.

The report must be the same, field for field, as when every rule builds its own series from
the events (the behaviour before the sharing); a rule that changes its series in place must
not change what the next rule reads; third-party rules (plain lists of events) are unaffected.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from my_utils.core.events import MetricEvent, write_events
from my_utils.profiling.analysis import MetricsAnalyzer
from my_utils.profiling.analysis.aggregate import AggregatedEvents
from my_utils.profiling.analysis.rules import _series
from my_utils.profiling.analysis.rules._series import SeriesSource, _build_series, build_series

CONTROL = "kineto/hta/trace_diff__control.json.gz"  # a real torch.profiler trace: rank 3, 6 steps, ~9k kernels


def _unshared(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every ``build_series`` call reads the events again, through the generic fold, and every rule computes its
    own statistics with the separate functions of ``_stats`` and its own totals (the behaviour before the sharing)."""
    monkeypatch.setattr(SeriesSource, "series", lambda self: _build_series(iter(self)))
    monkeypatch.setattr(SeriesSource, "summary", lambda self, series, warmup: _separately(series, warmup))
    monkeypatch.setattr(SeriesSource, "total", lambda self, series: series.total)  # each rule sums its series


class _Separate:
    """A ``Summary`` lookalike whose every figure is computed by the separate functions, on each access."""

    def __init__(self, values: list[float]) -> None:
        self.values = values

    @property
    def ordered(self) -> list[float]:
        return sorted(self.values)

    @property
    def median(self) -> float:
        import statistics

        return statistics.median(self.values) if self.values else math.nan

    @property
    def mad(self) -> float:
        from my_utils.profiling.analysis.rules._stats import mad

        return mad(self.values)

    @property
    def mean(self) -> float:
        import statistics

        return statistics.fmean(self.values)

    @property
    def std(self) -> float:
        from my_utils.profiling.analysis.rules._stats import pstdev

        return pstdev(self.values)

    @property
    def cv(self) -> float:
        from my_utils.profiling.analysis.rules._stats import cv

        return cv(self.values)

    @property
    def robust_cv(self) -> float:
        from my_utils.profiling.analysis.rules._stats import robust_cv

        return robust_cv(self.values)

    def quantile(self, q: float) -> float:
        from my_utils.profiling.analysis.rules._stats import quantile

        return quantile(sorted(self.values), q)


def _separately(series: _series.Series, warmup: int) -> Any:
    return _Separate(_series.after_warmup(series, warmup)[1])


def _report_json(path: Path | list[MetricEvent], **kwargs: Any) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(MetricsAnalyzer(path, **kwargs).analyze().to_json())
    out["inputs"].pop("analyzed_with", None)  # versions only; the report carries no wall-clock stamp
    return out


@pytest.fixture(scope="module")
def demo_events(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The events of a real run: the README's demo trains a small torch model (MyTimer + torch.profiler)."""
    pytest.importorskip("torch", reason="the demo trains a model with torch")
    out = tmp_path_factory.mktemp("demo")
    proc = subprocess.run([sys.executable, "-m", "my_utils.profiling.examples.unified_metrics_demo", "--steps", "30",
                           "--collect-every", "10", "--output-dir", str(out)], capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    return out / "metrics_events.jsonl"


def test_a_real_runs_report_is_identical_with_and_without_sharing(demo_events: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    builds: list[int] = []
    real_build = AggregatedEvents.build_series_now

    def counting(self: AggregatedEvents) -> dict[Any, Any]:
        builds.append(1)
        return real_build(self)

    monkeypatch.setattr(AggregatedEvents, "build_series_now", counting)
    shared = _report_json(demo_events)
    assert len(builds) == 1  # once for the analyzer and its 6 rules, not 7 times
    assert shared["summary"]["rules"] and shared["summary"]["rule_errors"] == []
    assert {s for s in shared["summary"]["sources"]} == {"mytimer", "torch_profiler"}
    _unshared(monkeypatch)
    unshared = _report_json(demo_events)
    assert len(builds) == 1  # the unshared report never used the memo
    assert shared == unshared


def test_a_real_trace_report_is_identical_with_and_without_sharing(real_fixtures: Any, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from my_utils.profiling import TorchProfilerMetricsProvider

    events = TorchProfilerMetricsProvider.from_input(real_fixtures / CONTROL).collect(None)
    path = tmp_path / "metrics_events.jsonl"
    write_events(path, events)
    shared = _report_json(path, traces=[])
    assert len(shared["findings"]) > 0  # the rules had something to say: the comparison is not of empty lists
    _unshared(monkeypatch)
    assert _report_json(path, traces=[]) == shared


_EVENT = st.builds(
    MetricEvent,
    name=st.sampled_from(["step_time", "forward", "kernel:gemm", "memory.allocated", "x"]),
    value=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**6, 10**6)),
    kind=st.sampled_from(["duration", "counter", "gauge", "ratio", "info"]),
    unit=st.sampled_from(["ms", "bytes", ""]),
    source=st.sampled_from(["mytimer", "torch_profiler"]),
    rank=st.one_of(st.none(), st.integers(0, 2)),
    step=st.one_of(st.none(), st.integers(0, 12)),  # steps out of order and repeated: the cells must sort them
    attrs=st.one_of(st.just({}), st.fixed_dictionaries({"depth": st.integers(0, 2)})),
)


def _plain(series: dict[Any, _series.Series]) -> list[tuple[Any, ...]]:
    """Series as comparable tuples (NaN-safe: NaN values never reach a series, but compare by repr anyway)."""
    return [(k, s.name, s.rank, s.kind, s.unit, s.source, s.depth, s.steps, [repr(v) for v in s.values], s.events)
            for k, s in series.items()]


@settings(max_examples=80, deadline=None, derandomize=True)
@given(st.lists(_EVENT, max_size=60))
def test_series_built_from_the_cells_equal_series_built_from_the_events(events: list[MetricEvent]) -> None:
    agg = MetricsAnalyzer(events).aggregate()
    aggregated = agg.aggregated()
    assert _plain(aggregated.build_series_now()) == _plain(_build_series(list(aggregated)))
    assert _plain(build_series(aggregated)) == _plain(_build_series(iter(aggregated)))


def test_each_caller_gets_its_own_copy_and_a_fold_invalidates_the_memo() -> None:
    events = [MetricEvent("step_time", float(10 + s), "duration", "ms", "mytimer", 0, s) for s in range(5)]
    agg = MetricsAnalyzer(events).aggregate()
    seq = agg.aggregated()
    first = build_series(seq)
    s = first[("step_time", 0, "mytimer")]
    s.values.sort(reverse=True)  # a rule sorting in place...
    s.steps.append(99)  # ...or appending
    s.events = -1
    again = build_series(seq)[("step_time", 0, "mytimer")]
    assert again.steps == [0, 1, 2, 3, 4] and again.values == [10.0, 11.0, 12.0, 13.0, 14.0] and again.events == 5
    agg.add(MetricEvent("step_time", 1.0, "duration", "ms", "mytimer", 0, 2))  # the events changed: rebuilt
    after = build_series(seq)[("step_time", 0, "mytimer")]
    assert after.values == [10.0, 11.0, 13.0, 13.0, 14.0] and after.events == 6


def test_a_plain_list_is_read_on_every_call() -> None:
    events = [MetricEvent("step_time", 1.0, "duration", "ms", "mytimer", 0, 0)]
    assert build_series(events)[("step_time", 0, "mytimer")].values == [1.0]
    events.append(MetricEvent("step_time", 2.0, "duration", "ms", "mytimer", 0, 0))  # a list has no memo
    assert build_series(events)[("step_time", 0, "mytimer")].values == [3.0]


def test_cells_out_of_step_order_give_sorted_series() -> None:
    events = [MetricEvent("m", float(v), "gauge", "bytes", "mytimer", 1, s) for s, v in ((5, 1), (2, 7), (9, 3), (2, 9))]
    s = build_series(MetricsAnalyzer(events).aggregate().aggregated())[("m", 1, "mytimer")]
    assert s.steps == [2, 5, 9] and s.values == [9.0, 1.0, 3.0] and s.events == 4
    assert not any(math.isnan(v) for v in s.values)


def _anomaly_rows_by_full_scan(rule: Any, steps: list[int], values: list[float]) -> list[dict[str, Any]]:
    """The outlier rows as the rule found them before the sorted cut: every step scored and tested."""
    import statistics

    from my_utils.profiling.analysis.rules._stats import MAD_TO_SIGMA, mad, pstdev

    mean = statistics.fmean(values)
    std = pstdev(values, mean)
    med = statistics.median(values)
    scale = MAD_TO_SIGMA * mad(values)
    rows = []
    for step, v in zip(steps, values, strict=True):
        z = (v - mean) / std if std > 0 else 0.0
        rz = (v - med) / scale if scale > 0 else 0.0
        by = [m for m, hit in (("sigma", abs(z) > rule.sigma), ("mad", abs(rz) > rule.mad_z)) if hit]
        if rule.method == "both" and len(by) < 2:
            by = []
        elif rule.method in ("sigma", "mad"):
            by = [m for m in by if m == rule.method]
        if by and abs(v - med) > rule.min_excess * abs(med):
            rows.append({"step": step, "value": v, "z": round(z, 3), "robust_z": round(rz, 3), "by": by})
    return rows


@settings(max_examples=150, deadline=None, derandomize=True)
@given(values=st.lists(st.one_of(st.floats(-1e3, 1e3), st.sampled_from([0.0, 5.0, 5.0, 1e300, -1e300, math.inf])),
                       min_size=3, max_size=40),
       method=st.sampled_from(["sigma", "mad", "either", "both"]), sigma=st.sampled_from([0.5, 1.0, 3.0]))
def test_anomaly_scores_only_the_ends_yet_flags_what_a_full_scan_flags(values: list[float], method: str,
                                                                       sigma: float) -> None:
    from my_utils.profiling.analysis.rules.anomalies import AnomalyRule

    rule = AnomalyRule(sigma=sigma, mad_z=sigma + 0.5, method=method, min_excess=0.0)
    steps = list(range(len(values)))
    series = _series.Series("step_time", 0, "duration", "ms", "mytimer", None, steps, values, len(values))
    finding = rule._check(series, steps, values)
    expected = _anomaly_rows_by_full_scan(rule, steps, values)
    got = finding["evidence"]["outliers"] if finding else []
    assert json.dumps(got) == json.dumps(expected[:50])


_TIMER_EVENT = st.builds(
    MetricEvent,
    name=st.sampled_from(["step_time", "forward", "backward", "data", "cuda:forward"]),
    value=st.floats(0, 100), kind=st.sampled_from(["duration", "duration", "gauge"]), unit=st.just("ms"),
    source=st.sampled_from(["mytimer", "mytimer", "torch_profiler"]), rank=st.one_of(st.none(), st.integers(0, 2)),
    step=st.integers(0, 15), attrs=st.one_of(st.just({}), st.fixed_dictionaries({"depth": st.integers(0, 1)})),
)


@settings(max_examples=80, deadline=None, derandomize=True)
@given(st.lists(_TIMER_EVENT, max_size=80))
def test_region_counts_and_step_regions_are_the_step_by_step_sums(events: list[MetricEvent]) -> None:
    from my_utils.profiling.analysis.analyzer import _mytimer_region_counts
    from my_utils.profiling.analysis.tables import build_tables as _tables

    agg = MetricsAnalyzer(events).aggregate()
    series = build_series(agg.aggregated())
    counts: dict[tuple[int, int | None], float] = {}  # every step of every region, one by one
    depth0: dict[tuple[int, int | None, str], float] = {}
    for (name, rank, source), s in series.items():
        if source == "mytimer" and s.kind == "duration" and name != "step_time" and not name.startswith("cuda:"):
            for step in s.steps:
                counts[(step, rank)] = counts.get((step, rank), 0.0) + s.events / len(s.steps)
        if s.depth == 0 and s.kind == "duration" and name != "step_time":
            for step, value in zip(s.steps, s.values, strict=True):
                depth0[(step, rank, source)] = depth0.get((step, rank, source), 0.0) + value
    assert _mytimer_region_counts(series) == counts
    rows = _tables(series, agg)["steps"]
    assert [r["regions"] for r in rows] == [depth0.get((r["step"], r["rank"], r["source"])) for r in rows]
