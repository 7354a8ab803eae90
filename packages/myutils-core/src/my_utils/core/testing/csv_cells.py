"""Cells of a CSV text as each kind of reader makes them: for tests that no cell starts a formula.

Readers disagree on where a row ends. Python's ``csv`` honours quotes; a file opened with universal
newlines turns ``\\r`` into ``\\n`` first; line-by-line scripts and some tools split at every ``\\r``
or ``\\n`` (or at everything ``str.splitlines`` knows) without honouring quotes, then parse each line
as CSV. :func:`formula_cells` lists every cell of any of them that a spreadsheet would run.
"""

from __future__ import annotations

import csv
import io
import re

from my_utils.core.csv_safe import FORMULA_START

__all__ = ["formula_cells", "is_formula", "reader_cells"]

_NUMBER = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$")
_ROW_ENDS = re.compile(r"\r\n|\r|\n")


def is_formula(cell: str) -> bool:
    """Whether a spreadsheet would run ``cell``: it starts with a formula character and is no plain number."""
    return cell.startswith(FORMULA_START) and not _NUMBER.match(cell)


def reader_cells(text: str) -> list[tuple[str, str]]:
    """(reader, cell) for every cell of ``text`` as each kind of reader splits its rows."""
    out = [("csv", c) for row in csv.reader(io.StringIO(text, newline="")) for c in row]
    universal = io.StringIO(text, newline=None).read()
    out += [("universal newlines", c) for row in csv.reader(io.StringIO(universal, newline="")) for c in row]
    for how, lines in (("split at \\r and \\n", _ROW_ENDS.split(text)), ("splitlines", text.splitlines())):
        for line in lines:
            out += [(how, c) for row in csv.reader([line]) for c in row]
    return out


def formula_cells(text: str) -> list[tuple[str, str]]:
    """(reader, cell) for every cell of ``text`` that some reader makes and a spreadsheet would run."""
    return [(how, cell) for how, cell in reader_cells(text) if is_formula(cell)]
