"""The statistics behind ``ModuleProfiler.summary()``: checked against numpy on generated durations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from my_utils.hooks.summary import SUMMARY_COLUMNS, module_stats, summary_frame

durations = st.dictionaries(
    st.text(min_size=1, max_size=8),
    st.lists(st.floats(min_value=0.0, max_value=1e4, allow_nan=False, allow_infinity=False), max_size=30),
    max_size=8,
)


@settings(deadline=None)
@given(durations)
def test_stats_match_numpy(data: dict[str, list[float]]) -> None:
    rows = module_stats(data)
    ran = {name: values for name, values in data.items() if values}
    assert sorted(r.module_name for r in rows) == sorted(ran)  # modules that never ran are left out
    grand = math.fsum(math.fsum(v) for v in ran.values())
    for row in rows:
        values = np.asarray(ran[row.module_name])
        assert row.run_count == len(values)
        assert row.total_ms == pytest.approx(values.sum(), rel=1e-9, abs=1e-9)
        assert row.mean_ms == pytest.approx(values.mean(), rel=1e-9, abs=1e-9)
        assert row.median_ms == pytest.approx(np.median(values), rel=1e-9, abs=1e-9)
        assert row.std_ms == pytest.approx(values.std(), rel=1e-6, abs=1e-6)  # population std, never NaN
        expected_share = 100 * row.total_ms / grand if grand > 0 else 0.0
        assert row.percentage == pytest.approx(expected_share, rel=1e-9, abs=1e-9)
    totals = [r.total_ms for r in rows]
    assert totals == sorted(totals, reverse=True)  # slowest first
    if rows and grand > 0:
        assert math.fsum(r.percentage for r in rows) == pytest.approx(100.0)


@settings(deadline=None)  # the first example pays pandas' import; a busy shared machine is slow
@given(durations)
def test_frame_has_the_seed_columns_and_dtypes(data: dict[str, list[float]]) -> None:
    frame = summary_frame(module_stats(data))
    assert tuple(frame.columns) == SUMMARY_COLUMNS
    assert str(frame["run_count"].dtype) == "int64"
    assert all(str(frame[c].dtype) == "float64" for c in SUMMARY_COLUMNS if c not in ("module_name", "run_count"))
    assert len(frame) == sum(1 for v in data.values() if v)


def test_ties_are_ordered_by_mean_then_name() -> None:
    rows = module_stats({"b": [2.0, 2.0], "a": [4.0], "c": [1.0, 1.0, 1.0, 1.0]})
    assert [r.module_name for r in rows] == ["a", "b", "c"]
