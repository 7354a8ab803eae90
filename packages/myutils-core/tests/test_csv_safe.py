"""The one CSV writer (``my_utils.core.csv_safe``): guards read back exactly, no reader sees a formula.

The writers that use it (profile CSVs, nsys tables, the module summary) are checked together in
``tests-integration/test_csv_no_formula.py``.
"""

from __future__ import annotations

import csv
import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from my_utils.core.csv_safe import csv_field, csv_line, csv_table, csv_text_cell, csv_text_value
from my_utils.core.testing.csv_cells import formula_cells

PIECES = st.lists(st.sampled_from(["=", "+", "-", "@", "\t", "\r", "\n", "\r\n", "\u2028", "\x85", ",", ";", '"',
                                   "'", "a", " ", "\uff20"]), max_size=10).map("".join)


@settings(max_examples=1000, deadline=None, derandomize=True)
@given(text=PIECES)
def test_every_text_reads_back_exactly(text: str) -> None:
    assert csv_text_value(csv_text_cell(text)) == text


@settings(max_examples=500, deadline=None, derandomize=True)
@given(row=st.lists(PIECES, min_size=1, max_size=4))
def test_no_reader_splits_a_row_into_a_formula(row: list[str]) -> None:
    text = csv_table(["h"], [[*row, 1], ["=x", 1]])
    assert formula_cells(text) == []
    back = list(csv.reader(io.StringIO(text, newline="")))
    assert [csv_text_value(c) for c in back[1]] == [*row, "1"]


@pytest.mark.parametrize("text,cell", [
    ("=1+1", "'=1+1"), ("'=1", "''=1"), ("plain", "plain"), ("a-b", "a-b"), ("-", "'-"),
    # a multi-line text: guarded where a quote-blind row split starts a cell, and at its end after a break
    ("k\r=HYPERLINK()", "k\r'=HYPERLINK()"), ("a\n", "a\n'"), ('a\nb,"c', "a\nb,'\"c"), ("a\nb,-1", "a\nb,'-1"),
    # one line: only the start (names like f(-1,-2) stay readable)
    ("f(-1,-2)", "f(-1,-2)"),
])
def test_the_guard_where_it_goes(text: str, cell: str) -> None:
    assert csv_text_cell(text) == cell


def test_fields_with_any_line_break_are_quoted() -> None:
    for brk in "\r\n\v\f\x1c\x1d\x1e\x85\u2028\u2029":
        assert csv_field(f"a{brk}b") == f'"a{brk}b"'
    assert csv_field('say "hi", now') == '"say ""hi"", now"'
    assert csv_field("plain") == "plain"


def test_values_are_written_by_kind() -> None:
    import math

    assert csv_line(["=x", 3, -2.5, None, math.nan, math.inf, True, "\ud800"]) == "'=x,3,-2.5,,,,True,\\ud800\n"
