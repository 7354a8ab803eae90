"""Tables as CSV files and as one Excel workbook with a sheet per table, for users who live in spreadsheets.

``write_tables(tables, out_dir)`` writes ``<table>.csv`` per table and, when ``xlsx`` is asked,
``<workbook>.xlsx`` with one sheet per table (openpyxl, the ``[excel]`` extra of
myutils-profiling, imported only here: without it the CSV files are still written and the
error says how to install it). Every file is rendered before the first is written, and each is
written to a temporary renamed into place: a failure leaves each file whole, old or new. Text
read from a trace (operator and kernel names) is written so that no spreadsheet runs it as a
formula (``core.safe_io.csv_text_cell``, in the CSV files and the workbook alike).
Sheet names are sanitised (Excel allows 31 characters and none of ``[]:*?/\\``); file names
come from table names, never from the data.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from my_utils.core.errors import UsageError

_SHEET_BAD = re.compile(r"[\[\]:*?/\\]")
_FILE_BAD = re.compile(r"[^A-Za-z0-9_.-]")


def _records(table: Any) -> tuple[list[str], list[Mapping[str, Any]]]:
    """(columns, rows) of a list of dicts or a DataFrame."""
    if hasattr(table, "to_dict") and hasattr(table, "columns"):
        return [str(c) for c in table.columns], table.to_dict("records")
    rows: list[Mapping[str, Any]] = [dict(r) for r in table]
    cols: dict[str, None] = {}
    for r in rows:
        cols.update(dict.fromkeys(r))
    return list(cols), rows


def _cell(value: Any) -> Any:
    """A value as a spreadsheet cell: numbers stay numbers (NaN empty), text never runs as a formula."""
    from my_utils.core.safe_io import csv_text_cell

    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return None
    if isinstance(value, (bool, int, float)):
        return value
    return csv_text_cell(str(value))


def csv_text(table: Any) -> str:
    """One table as CSV text (header first)."""
    cols, rows = _records(table)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([_cell(c) for c in cols])
    for r in rows:
        w.writerow(["" if (v := _cell(r.get(c))) is None else v for c in cols])
    return buf.getvalue()


def sheet_name(name: str, taken: set[str]) -> str:
    """An Excel sheet name for table ``name``: at most 31 characters, no forbidden ones, unique in ``taken``."""
    base = _SHEET_BAD.sub("_", name)[:31] or "table"
    out, i = base, 2
    while out.lower() in taken:
        suffix = f"_{i}"
        out, i = base[:31 - len(suffix)] + suffix, i + 1
    taken.add(out.lower())
    return out


def workbook_bytes(tables: Mapping[str, Any]) -> bytes:
    """Every table as one ``.xlsx`` workbook, a sheet per table (needs openpyxl: the ``[excel]`` extra)."""
    try:
        from openpyxl import Workbook
    except ImportError:
        raise UsageError("writing an Excel workbook needs openpyxl: pip install 'myutils-profiling[excel]' "
                         "(the CSV files need nothing more)") from None
    wb = Workbook()
    wb.remove(wb.active)
    taken: set[str] = set()
    for name, table in tables.items():
        ws = wb.create_sheet(sheet_name(name, taken))
        cols, rows = _records(table)
        ws.append([_cell(c) for c in cols])
        for r in rows:
            ws.append([_cell(r.get(c)) for c in cols])
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()


def write_tables(tables: Mapping[str, Any], out_dir: str | Path, *, xlsx: bool = True,
                 workbook: str = "tables") -> list[Path]:
    """Write ``<table>.csv`` per table and (``xlsx``) ``<workbook>.xlsx``; returns the paths, all or none written."""
    from my_utils.core.atomic import atomic_write

    out = Path(out_dir)
    files: list[tuple[Path, bytes]] = [(out / f"{_FILE_BAD.sub('_', name)}.csv", csv_text(t).encode("utf-8"))
                                       for name, t in tables.items()]
    if xlsx:
        files.append((out / f"{_FILE_BAD.sub('_', workbook)}.xlsx", workbook_bytes(tables)))
    written: list[Path] = []
    for path, data in files:  # everything was rendered above: a failure here is the disk's, one file at a time
        with atomic_write(path, "wb") as fh:
            fh.write(data)
        written.append(path)
    return written

