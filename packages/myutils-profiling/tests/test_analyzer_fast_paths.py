"""The analyzer's fast paths (issue 22, goal 5) give exactly what the paths they stand for give.

* ``EventAggregate.fold_file`` reads, checks and folds a file in one loop: the aggregate must be
  the one ``fold_rows(iter_event_rows(path))`` makes (cells float for float, the same interned
  names, counts, times, files), and a bad line must raise the same error after the same events.
* ``per_step_shares`` pairs a series with its step time by position when both have the same
  steps; ``theil_sen`` makes its pairwise slopes at C speed when no two x are equal: both are
  compared with the plain loops they replace, on values with ties, zeros, infinities.
* A series' summary for one warm-up is made from another warm-up's sorted values (moving the
  few values between them in or out), and the ``operations`` table merges those sorted runs:
  both must give exactly the sorted values, ``-0.0`` and ``0.0`` in their places.
* End to end: the report of a file (``fold_file``) is the report of the same events given as
  events (``fold_rows``), on generated runs with the odd lines the reader takes.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from my_utils.core.errors import InputError
from my_utils.core.events import iter_event_rows, read_events
from my_utils.profiling.analysis import MetricsAnalyzer
from my_utils.profiling.analysis.aggregate import EventAggregate
from my_utils.profiling.analysis.rules import _stats
from my_utils.profiling.analysis.rules._evidence import per_step_shares
from my_utils.profiling.analysis.rules._series import (
    Series,
    SeriesKey,
    SeriesSource,
    build_series,
    series_total,
)
from my_utils.profiling.analysis.tables import build_tables

_text = st.sampled_from(["a", "step_time", "kernel:x", ""])
# integers beyond 64 bits: orjson reads them as floats, the reader's checks re-read them exactly
_scalar = (st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from([2**70, -(2**64) - 1])
           | st.floats(allow_nan=False, width=32) | _text)
_attrs = st.dictionaries(st.sampled_from(["count", "depth", "file", "other"]),
                         _scalar | st.lists(_scalar, max_size=2), max_size=3)
_row = st.fixed_dictionaries({
    "schema_version": st.just(1), "run_id": st.sampled_from(["r1", "r2", ""]),
    "source": st.sampled_from(["mytimer", "torch_profiler", "nsys", ""]),
    "rank": st.none() | st.integers(0, 2), "step": st.none() | st.integers(0, 4),
    "name": st.sampled_from(["step_time", "layer", "memory.allocated", "kernel:gemm"]),
    "kind": st.sampled_from(["duration", "gauge", "ratio", "counter", ""]),
    "value": st.floats(-1e3, 1e3) | st.sampled_from([0.0, -0.0]) | st.integers(-5, 5) | st.none(),
    "unit": st.sampled_from(["ms", "bytes"]), "ts": st.none() | st.floats(0, 2e9) | st.integers(0, 10),
    "attrs": _attrs,
}, optional={"future": _scalar})
# a line as the writer writes it, or one the reader takes only through its checks
_line = st.one_of(
    _row.map(json.dumps),
    _row.map(lambda r: json.dumps(r).replace('"value": ', '"value":  ')),  # spacing: still the inline path
    st.just(""), st.just("   "),  # blank lines: skipped
    _row.map(lambda r: json.dumps({**r, "value": 1e999}).replace("Infinity", "1e999")),  # overflows: refused
    _row.map(lambda r: json.dumps({k: v for k, v in r.items() if k != "unit"})),  # a missing field: refused
)


def _state(agg: EventAggregate) -> dict[str, Any]:
    """Everything an aggregate holds, floats by their bits (``-0.0`` is not ``0.0`` here, NaN equals NaN)."""
    def exact(x: Any) -> Any:
        if isinstance(x, float):
            return ("f", x.hex())
        if isinstance(x, list):
            return [exact(v) for v in x]
        return x
    return {"cells": [(k, exact(c)) for k, c in agg.cells.items()], "meta": agg.meta, "events": agg.events,
            "by_source": dict(agg.by_source), "run_ids": agg.run_ids, "trace_files": agg.trace_files,
            "nsight_files": agg.nsight_files, "first_ts": exact(agg.first_ts), "last_ts": exact(agg.last_ts),
            "extra": agg.extra_occurrences,
            "interned": all(k[0] is sys.intern(k[0]) and k[3] is sys.intern(k[3]) for k in agg.cells)}


def _fold(path: Path, how: str) -> tuple[dict[str, Any], str | None]:
    agg = EventAggregate()
    error = None
    try:
        if how == "file":
            agg.fold_file(path)
        else:
            agg.fold_rows(iter_event_rows(path))
    except InputError as exc:
        error = f"{type(exc).__name__}: {exc}"
    return _state(agg), error


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(lines=st.lists(_line, min_size=0, max_size=12), torn=st.booleans())
def test_fold_file_is_fold_rows_of_the_reader(tmp_path_factory: pytest.TempPathFactory, lines: list[str],
                                               torn: bool) -> None:
    path = tmp_path_factory.mktemp("fold") / "metrics_events.jsonl"
    text = "".join(line + "\n" for line in lines)
    if torn:  # a killed writer's last line: the end of the file, not an error
        text += '{"schema_version": 1, "name": "x", "val'
    path.write_text(text, encoding="utf-8")
    assert _fold(path, "file") == _fold(path, "rows")


def test_fold_file_counts_progress_and_repeated_cells(tmp_path: Path) -> None:
    path = tmp_path / "metrics_events.jsonl"
    rows = [{"schema_version": 1, "run_id": "r", "source": "torch_profiler", "rank": 0, "step": i % 3,
             "name": f"kernel:{i % 2}", "kind": "duration", "value": float(i), "unit": "ms", "ts": float(i),
             "attrs": {"count": 3, "file": "t.json"} if i % 2 else {"depth": 0}} for i in range(70_000)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    seen: list[int] = []
    agg = EventAggregate()
    agg.fold_file(path, seen.append)
    assert seen == [65536, 70_000 - 65536]
    assert _state(agg) == _fold(path, "rows")[0]
    assert agg.extra_occurrences and agg.trace_files == {"t.json"}


def _shares_by_dict(s: Series, step: Series) -> list[float]:
    """``per_step_shares`` as it was: the step time looked up by step."""
    by_step = dict(zip(step.steps, step.values, strict=True))
    return [v / by_step[st] for st, v in zip(s.steps, s.values, strict=True)
            if by_step.get(st, 0.0) > 0 and math.isfinite(v)]


_value = st.floats(-10, 10) | st.sampled_from([0.0, -0.0, math.inf, -math.inf, math.nan])


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(data=st.data(), steps=st.lists(st.integers(0, 30), max_size=12))
def test_per_step_shares_by_position_is_by_step(data: st.DataObject, steps: list[int]) -> None:
    own = data.draw(st.sampled_from(["same", "sorted", "other"]))
    step_steps = sorted(set(steps)) if own == "sorted" else steps
    s_steps = list(step_steps) if own != "other" else data.draw(st.lists(st.integers(0, 30), max_size=12))
    step = Series("step_time", 0, "duration", "ms", "mytimer", steps=step_steps,
                  values=data.draw(st.lists(_value, min_size=len(step_steps), max_size=len(step_steps))))
    s = Series("layer", 0, "duration", "ms", "mytimer", steps=s_steps,
               values=data.draw(st.lists(_value, min_size=len(s_steps), max_size=len(s_steps))))
    try:
        expected: list[float] | str = _shares_by_dict(s, step)
    except ValueError as exc:
        expected = type(exc).__name__
    try:
        got: list[float] | str = per_step_shares(s, step)
    except ValueError as exc:
        got = type(exc).__name__
    assert [x.hex() if isinstance(x, float) else x for x in got] == \
        [x.hex() if isinstance(x, float) else x for x in expected]


def _theil_sen_pairs(xs: list[float], ys: list[float], confidence: float) -> _stats.Trend | None:
    """``theil_sen`` with the slopes made as before (a generator over every pair)."""
    n = len(xs)
    if n > _stats.MAX_TREND_POINTS:
        picks = [round(i * (n - 1) / (_stats.MAX_TREND_POINTS - 1)) for i in range(_stats.MAX_TREND_POINTS)]
        xs, ys, n = [xs[i] for i in picks], [ys[i] for i in picks], _stats.MAX_TREND_POINTS
    if n < 3:
        return None
    slopes = sorted((ys[j] - ys[i]) / (xs[j] - xs[i]) for i in range(n) for j in range(i + 1, n) if xs[j] != xs[i])
    if not slopes:
        return None
    m = len(slopes)
    slope = statistics.median(slopes)
    c = _stats._z(confidence) * math.sqrt(n * (n - 1) * (2 * n + 5) / 18.0)
    lo_i = max(0, min(m - 1, math.floor((m - c) / 2.0)))
    hi_i = max(0, min(m - 1, math.ceil((m + c) / 2.0)))
    intercept = statistics.median(y - slope * x for x, y in zip(xs, ys, strict=True))
    return _stats.Trend(slope, slopes[lo_i], slopes[hi_i], intercept, confidence, n)


def _bits(trend: _stats.Trend | None) -> Any:
    return None if trend is None else tuple(v.hex() if isinstance(v, float) else v for v in (
        trend.slope, trend.low, trend.high, trend.intercept, trend.confidence, trend.points))


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(data=st.data(), n=st.integers(0, 14))
def test_theil_sen_slopes_at_c_speed_are_the_pairs(data: st.DataObject, n: int) -> None:
    xs = data.draw(st.lists(st.sampled_from([0.0, -0.0, 1.0, 2.0, 3.5, 7.0, 1e300, -1e300]) | st.floats(-50, 50),
                            min_size=n, max_size=n))
    ys = data.draw(st.lists(st.floats(-1e6, 1e6) | st.sampled_from([math.inf, 0.0, -0.0]), min_size=n, max_size=n))
    assert _bits(_stats.theil_sen(xs, ys)) == _bits(_theil_sen_pairs(xs, ys, 0.95))


def test_theil_sen_thinned_series_is_unchanged() -> None:
    xs = [float(i) for i in range(1000)]
    ys = [1e9 + 16 * i + (i * 7919 % 13) / 13 for i in range(1000)]
    assert _bits(_stats.theil_sen(xs, ys, 0.9)) == _bits(_theil_sen_pairs(xs, ys, 0.9))


def _report(source: Any, path: Path) -> str:
    data = json.loads(MetricsAnalyzer(source).analyze().to_json())
    data.pop("overhead", None)  # MyTimer's cost, calibrated on the host at each run
    data["inputs"].pop("events_file", None)  # given as events, the report names no file
    return json.dumps(data, sort_keys=True)


@settings(max_examples=25, deadline=None, derandomize=True, database=None)
@given(lines=st.lists(_row.map(json.dumps), min_size=1, max_size=40), steps=st.integers(8, 40))
def test_report_of_the_file_is_the_report_of_its_events(tmp_path_factory: pytest.TempPathFactory, lines: list[str],
                                                         steps: int) -> None:
    path = tmp_path_factory.mktemp("report") / "metrics_events.jsonl"
    # a run long enough for every rule (steps on 2 ranks, a leak, a slow rank), then the generated odd lines
    run = [{"schema_version": 1, "run_id": "r", "source": "mytimer", "rank": rank, "step": step, "name": name,
            "kind": "gauge" if name == "memory.allocated" else "duration", "unit": "bytes" if name == "memory.allocated"
            else "ms", "ts": 1.7e9 + step, "attrs": {} if name == "step_time" else {"depth": 0},
            "value": (1e9 + 4096.0 * step) if name == "memory.allocated" else
            (10.0 + rank + (7.0 if step == 5 else 0.0) + (step * 37 % 11) / 10) * (1.0 if name == "step_time" else 0.4)}
           for rank in (0, 1) for step in range(steps) for name in ("step_time", "layer", "memory.allocated")]
    path.write_text("".join(json.dumps(r) + "\n" for r in run) + "".join(line + "\n" for line in lines),
                    encoding="utf-8")
    assert _report(path, path) == _report(read_events(path), path)


class _Events(SeriesSource):
    """A ``SeriesSource`` of fixed series (no events): its summaries are what is tested."""

    def __init__(self, series: dict[SeriesKey, Series]) -> None:
        self._series = series

    def series_version(self) -> int:
        return 0

    def build_series_now(self) -> dict[SeriesKey, Series]:
        return self._series

    def __len__(self) -> int:
        return 0

    def __getitem__(self, index: Any) -> Any:
        raise IndexError(index)


def _summary_bits(summary: _stats.Summary) -> Any:
    return ([v.hex() for v in summary.ordered], summary.median.hex(), summary.mad.hex(), summary.skip,
            summary.source is not None)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(values=st.lists(st.sampled_from([0.0, -0.0, 0.0, -0.0, 1.0, -1.0, math.inf, -math.inf]) | st.floats(-9, 9),
                       max_size=14),
       warmups=st.lists(st.sampled_from([0, 1, 3, 5, 8, 12]), min_size=1, max_size=5))
def test_a_summary_from_a_nearby_warmup_is_the_sorted_one(values: list[float], warmups: list[int]) -> None:
    s = Series("x", 0, "duration", "ms", "mytimer", steps=list(range(len(values))), values=values)
    events = _Events({("x", 0, "mytimer"): s})
    for k in warmups:  # each asked in turn: the later ones made from the earlier ones' sorted values
        got = events.summary(s, k)
        assert _summary_bits(got) == _summary_bits(_stats.summarize(values, k))
        assert got.ordered is not _stats.summarize(values, k).ordered


def test_tables_from_the_shared_sorted_values_are_the_tables(tmp_path: Path) -> None:
    path = tmp_path / "metrics_events.jsonl"
    rows = [{"schema_version": 1, "run_id": "r", "source": "mytimer", "rank": rank, "step": step, "name": name,
             "kind": "duration", "unit": "ms", "ts": None, "attrs": {},
             "value": [0.0, -0.0, 1.5, 1.5, 3.0, math.inf][(step * 7 + rank * 3 + len(name)) % 6] if name == "x"
             else float((step * 13 + rank) % 5)}
            for rank in (0, 1, 2) for step in range(40) for name in ("step_time", "x", "y")]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    agg = EventAggregate()
    agg.fold_file(path)
    events = agg.aggregated()
    series = build_series(events)
    for s in list(series.values())[::2]:  # some series summarised already (after warm-up), some not
        events.summary(s, 1)
    assert json.dumps(build_tables(series, agg, "mytimer", events)) == json.dumps(build_tables(series, agg, "mytimer"))


def test_shared_totals_are_each_series_sum(tmp_path: Path) -> None:
    path = tmp_path / "metrics_events.jsonl"
    rows = [{"schema_version": 1, "run_id": "r", "source": "mytimer", "rank": rank, "step": step, "name": name,
             "kind": "duration", "unit": "ms", "ts": None, "attrs": {}, "value": 0.1 * step + rank + len(name)}
            for rank in (0, 1) for step in range(30) for name in ("step_time", "x")]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    agg = EventAggregate()
    agg.fold_file(path)
    events = agg.aggregated()
    for s in build_series(events).values():  # a rule's copies: the memo's sum, the same float
        assert series_total(events, s).hex() == float(sum(s.values)).hex() == series_total(events, s).hex()
        s.values[3] += 1e-3  # a rule that changes its copy: summed afresh
        assert series_total(events, s).hex() == float(sum(s.values)).hex()
    plain = list(events)  # a third party's events: summed each time
    for s in build_series(plain).values():
        assert series_total(plain, s) == s.total
