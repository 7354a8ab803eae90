"""Numbers read alike everywhere (ms with separators, never e-notation); one colour per category."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from my_utils.profiling.reports.formatting import (
    column_title,
    fmt_count,
    fmt_ms,
    fmt_number,
    fmt_pct,
    fmt_value,
    source_label,
)
from my_utils.profiling.reports.palette import CATEGORY_COLOURS, canonical, colour, score_colour


@pytest.mark.parametrize("value, text", [
    (1737.72, "1,737.7"), (216092.0, "216,092"), (345.77, "345.8"), (42.26, "42.26"), (0.5, "0.5"),
    (0.0043, "0.0043"), (0.000335, "0.000335"), (0.0, "0"), (-5.5, "−5.5"),
])
def test_fmt_number(value: float, text: str) -> None:
    assert fmt_number(value) == text


def test_units_and_columns() -> None:
    assert fmt_ms(732352.0, "us") == "732.4 ms" and fmt_ms(1.5, "s") == "1,500 ms" and fmt_ms(None) == "–"
    assert fmt_pct(42.26) == "42.3%" and fmt_pct(0.3571, fraction=True) == "35.7%" and fmt_pct(0.0) == "0%"
    assert fmt_count(22290) == "22,290"
    # µs columns in ms, % columns in %, ids as they are (no separators), shares of a whole in %
    assert fmt_value(732352.0, "idle_us") == "732.4" and column_title("idle_us") == "idle (ms)"
    assert fmt_value(42.26, "idle_pct") == "42.3%" and column_title("delay_p95_us") == "delay p95 (ms)"
    assert fmt_value(7173944, "correlation") == "7173944" and fmt_value(1009, "step") == "1009"
    assert fmt_value(0.3571, "share") == "35.7%" and fmt_value(2.1e-5, "share_of_step_time") == "0.0021%"
    assert source_label("torch_profiler") == "torch.profiler" and source_label("mytimer") == "MyTimer"


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e15, max_value=1e15))
def test_no_number_is_ever_written_in_e_notation(value: float) -> None:
    for text in (fmt_number(value), fmt_ms(value, "us"), fmt_pct(value), fmt_value(value, "total"),
                 fmt_value(value, "total_us")):
        assert not re.search(r"\d[eE][+-]?\d", text), text


def test_one_colour_per_category_and_synonyms_agree() -> None:
    assert len(set(CATEGORY_COLOURS[k] for k in ("computation", "communication", "memory", "non-compute",
                                                 "idle"))) == 5
    assert colour("compute") == colour("computation") == colour("COMPUTATION")
    assert colour("non_compute") == colour("non-compute") and canonical("host_wait") == "host wait"
    assert colour("torch_profiler") == colour("torch.profiler")
    assert colour("something new") == "#7F7F7F"
    assert score_colour(None) == CATEGORY_COLOURS["not measured"] and score_colour(90) == CATEGORY_COLOURS["good"]
