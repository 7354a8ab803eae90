"""The one CSV writer of the project: no text cell starts a formula, whichever way a reader splits rows.

Every CSV the project writes (profile CSVs, ``nsys summary --csv-dir``, ``nsys sql run --format csv``,
the module summary) holds names read from traces and exports, which anyone can craft. Two rules:

- **Quoting.** A field holding a separator, a quote or any line break (``\\r`` and ``\\n``, and the
  others ``str.splitlines`` knows: ``\\v``, ``\\f``, ``\\x1c``-``\\x1e``, ``\\x85``, ``\\u2028``,
  ``\\u2029``) is quoted, quotes doubled. Excel, LibreOffice and Python's ``csv`` keep such a field
  whole.
- **Formula guard.** A text that a spreadsheet would run (it starts with ``=``, ``+``, ``-``, ``@``,
  a tab, a line break, or their full-width forms) gets a leading apostrophe. A reader that splits
  rows at line breaks without honouring quotes (a line-by-line script, a tool that ends a row at
  ``\r``) starts a row inside a multi-line text, and from there reads the text's separators (``,``
  ``;`` tab) as cell ends and a quote at a cell start as an opening quote. So in a text holding a
  line break, every place such a reader can start a cell (the start, and after each line break,
  separator and quote) gets an apostrophe when a formula character, a quote, or the end of the text
  follows: each cell it makes then starts with plain text or an apostrophe, a quote never flips its
  reading of the cells after it, and the text's closing quote is never read as an opening one.

The guard is reversible (:func:`csv_text_value`): an apostrophe already in front of a formula character
gets one more, so every text reads back exactly. A lone surrogate (a truncated name) is written as
``\\xNN``/``\\udNNN`` text (:func:`~my_utils.core.safe_io.utf8_text`), never as invalid UTF-8.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Iterable, Sequence
from typing import IO, Any

__all__ = ["FORMULA_START", "LINE_BREAKS", "csv_field", "csv_line", "csv_table", "csv_text_cell", "csv_text_value",
           "write_csv"]

#: Characters ``str.splitlines`` ends a line at; ``\r`` and ``\n`` end a CSV row in every reader.
LINE_BREAKS = "\r\n\v\f\x1c\x1d\x1e\x85\u2028\u2029"
#: First characters a spreadsheet (Excel, LibreOffice, Google Sheets) evaluates as a formula.
FORMULA_START = ("=", "+", "-", "@", "\t", *LINE_BREAKS, "\uff1d", "\uff0b", "\uff0d", "\uff20")
_BREAKS = frozenset(LINE_BREAKS)
_NEEDS_QUOTES = frozenset(',"' + LINE_BREAKS)
_FORMULA = "[" + re.escape("".join(FORMULA_START)) + "]"
# where a quote-blind row split can start a cell inside a multi-line text: after these
_CELL_START = "[" + re.escape(LINE_BREAKS + ',;\t"') + "]"
_GUARD_START = re.compile(rf"\A(?='*{_FORMULA})")
_UNGUARD_START = re.compile(rf"\A'(?='*{_FORMULA})")
_AT_CELL = rf"(?:\A|(?<={_CELL_START}))"
_GUARD_ANY = re.compile(rf"{_AT_CELL}(?='*(?:{_FORMULA}|\"|\Z))")
_UNGUARD_ANY = re.compile(rf"{_AT_CELL}'(?='*(?:{_FORMULA}|\"|\Z))")
_STARTS_OR_QUOTE = frozenset((*FORMULA_START, "'"))


def csv_text_cell(text: str) -> str:
    """``text`` safe in a CSV text cell: an apostrophe wherever a cell could start with a formula.

    Before a formula character at the start; in a text holding a line break, also before a
    formula character, a quote or the end after every line break, separator and quote (see the
    module doc). Reversible with :func:`csv_text_value`.
    """
    if _BREAKS.isdisjoint(text):
        return _GUARD_START.sub("'", text) if text[:1] in _STARTS_OR_QUOTE else text
    return _GUARD_ANY.sub("'", text)


def csv_text_value(cell: str) -> str:
    """The text :func:`csv_text_cell` wrote (drops each apostrophe it added)."""
    if _BREAKS.isdisjoint(cell):
        return _UNGUARD_START.sub("", cell) if cell[:1] == "'" else cell
    return _UNGUARD_ANY.sub("", cell)


def csv_field(value: str) -> str:
    """``value`` as one CSV field: quoted (quotes doubled) when it holds ``,``, ``"`` or any line break."""
    if _NEEDS_QUOTES.isdisjoint(value):
        return value
    return '"' + value.replace('"', '""') + '"'


def _cell(value: Any) -> str:
    from my_utils.core.safe_io import utf8_text

    if value is None:
        return ""
    if isinstance(value, str):
        return csv_field(csv_text_cell(utf8_text(value)))
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, numbers.Integral):  # numpy's integers too (a DataFrame's rows)
        return str(int(value))
    if isinstance(value, numbers.Real):
        f = float(value)
        return repr(f) if math.isfinite(f) else ""  # nan/inf: no number a spreadsheet reads
    # anything else (a Decimal, bytes from a database) is shown as its text, guarded like a name
    return csv_field(csv_text_cell(utf8_text(str(value))))


def csv_line(values: Iterable[Any]) -> str:
    """One CSV row, ``\\n``-terminated: text guarded and quoted, numbers as written, None and NaN empty."""
    return ",".join(_cell(v) for v in values) + "\n"


def csv_table(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A whole CSV with a header row (the column names are guarded like any text)."""
    return csv_line(columns) + "".join(csv_line(r) for r in rows)


def write_csv(fh: IO[str], columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Write a header and ``rows`` to the open text file ``fh``, a row at a time."""
    fh.write(csv_line(columns))
    for r in rows:
        fh.write(csv_line(r))
