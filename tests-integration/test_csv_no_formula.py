"""No cell of any CSV the project writes starts a formula, after any reader's row split (issue 35, item 2).

Every CSV writer of the project (the profile CSV's two writers, ``nsys summary --csv-dir`` and ``nsys sql
run --format csv`` through ``nsys.render``, the module summary of myutils-hooks) is given hostile names:
``\\r``, ``\\n`` and the other line breaks, ``=``, ``+``, ``-``, ``@``, separators, quotes, apostrophes,
lone surrogates. Each file is then read the ways readers split rows: Python's ``csv`` (quotes honoured),
text opened with universal newlines, and line by line without honouring quotes (on ``\\r``/``\\n`` and on
everything ``str.splitlines`` breaks at), each line parsed as CSV. No cell may start with a formula
character unless it is a plain number; and every text reads back exactly through the project's reader.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from my_utils.core.csv_safe import csv_table, csv_text_cell, csv_text_value
from my_utils.core.testing.csv_cells import formula_cells, is_formula

HOSTILE = st.lists(st.sampled_from(
    ["=", "+", "-", "@", "\t", "\r", "\n", "\r\n", "\v", "\f", "\x1c", "\x85", "\u2028", "\u2029", ",", ";", '"',
     "'", " ", "a", "1", "(", ")", "\ud800", "\udce9", "\uff1d", "HYPERLINK(", "cmd|"]), max_size=12).map("".join)


def assert_inert(text: str, what: str) -> None:
    bad = formula_cells(text)
    assert not bad, f"{what}: formula cells {bad[:3]} in {text!r}"


# -- the writers ----------------------------------------------------------------------


@settings(max_examples=400, deadline=None, derandomize=True)
@given(names=st.lists(HOSTILE, min_size=1, max_size=4))
def test_the_shared_writer_writes_no_formula_and_reads_back(names: list[str]) -> None:
    from my_utils.core.safe_io import utf8_text

    text = csv_table(["name", *names], [[n, 1, -2.5, None, float("nan")] for n in names])
    assert_inert(text, "csv_table")
    rows = list(csv.reader(io.StringIO(text, newline="")))
    assert [csv_text_value(c) for c in rows[0][1:]] == [utf8_text(n) for n in names]
    assert [csv_text_value(r[0]) for r in rows[1:]] == [utf8_text(n) for n in names]
    assert rows[1][1:] == ["1", "-2.5", "", ""]  # numbers as written; None and NaN empty


@settings(max_examples=500, deadline=None, derandomize=True)
@given(text=HOSTILE)
def test_the_guard_reads_back_exactly(text: str) -> None:
    assert csv_text_value(csv_text_cell(text)) == text


@settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=HOSTILE, machine=HOSTILE)
def test_profile_csv_lines_write_no_formula(name: str, machine: str, tmp_path: Path) -> None:
    from my_utils.core.profile_csv import HEADER_LINE, format_profile_line, iter_profile_rows
    from my_utils.core.safe_io import utf8_text
    from my_utils.core.timer_rows import format_step_rows

    direct = format_profile_line(1_700_000_000_000_000_000, machine, 3, name, "END", 1.5, f"tag={name}")
    timer = format_step_rows([[name, 0, 0, 2_000_000]], None, 4, 1_700_000_000_000_000_000, machine, "", {})
    text = HEADER_LINE + direct + timer
    assert_inert(text, "profile CSV")
    path = tmp_path / "profile_rank_0.csv"
    path.write_text(text, encoding="utf-8", newline="")
    rows = list(iter_profile_rows(path))
    assert [(r.machine_id, r.event_name) for r in rows] == [(utf8_text(machine), utf8_text(name))] * 3


@settings(max_examples=100, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.lists(HOSTILE, min_size=1, max_size=3, unique=True))
def test_the_module_summary_writes_no_formula(names: list[str], tmp_path: Path) -> None:
    pytest.importorskip("pandas")
    from my_utils.hooks.summary import module_stats, summary_frame, write_summary_csv

    target = tmp_path / "summary.csv"
    assert write_summary_csv(summary_frame(module_stats({n: [1.0, -2.0] for n in names})), target) == target
    assert_inert(target.read_bytes().decode("utf-8"), "module summary")


@settings(max_examples=200, deadline=None, derandomize=True)
@given(names=st.lists(HOSTILE, min_size=1, max_size=4))
def test_nsys_tables_write_no_formula(names: list[str]) -> None:
    from my_utils.profiling.nsys.render import csv_text

    assert_inert(csv_text(["kernel", "total_ns"], [[n, -5] for n in names]), "nsys csv")


@pytest.mark.parametrize("cell,bad", [("=1+1", True), ("-2.5", False), ("'=1", False), ("+cmd|x", True),
                                      ("1e5", False), ("@SUM(A1)", True), ("\uff1dx", True)])
def test_the_formula_check_itself(cell: str, bad: bool) -> None:
    assert is_formula(cell) is bad


def test_a_bare_carriage_return_cannot_start_a_row() -> None:
    """The issue's reproducer: a kernel named ``k\\r=HYPERLINK(...)``, read by every splitter."""
    from my_utils.profiling.nsys.render import csv_text

    assert_inert(csv_text(["name", "n"], [['k\r=HYPERLINK("http://x","y")', 1], ["a\u2028@SUM(1)", 2]]), "nsys csv")
