"""TableCsvMetricsProvider: any CSV table, read through a column mapping.

By default the ``name`` column (else the first column) names each row, ``step``,
``rank``, ``ts`` and ``unit`` columns are used when present, and every other column
whose cell is a number becomes one event ``<name>/<column>`` (a ``value`` column, or a
single value column, keeps the plain row name). Pass a mapping to read other layouts, e.g. a ModuleProfiler summary:
``TableCsvMetricsProvider(path, name_column="module_name", value_columns=["mean_ms"], unit="ms")``.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from my_utils.core.errors import ConfigError, InputError, UnsupportedInputError
from my_utils.core.events import MetricEvent
from my_utils.profiling.formats._files import FileProviderBase, checked, rank_from_name, read_head
from my_utils.profiling.formats._values import parse_number


def _int_cell(path: Path, line: int, column: str, cell: str) -> int | None:
    if not cell.strip():
        return None
    value = parse_number(cell)
    if value is None or not float(value).is_integer():
        raise InputError(path, f"line {line}", f"an integer in column {column!r}; found {cell!r}")
    return int(value)


class TableCsvMetricsProvider(FileProviderBase):
    """Metrics from generic CSV tables (a file, or a folder of ``.csv`` files)."""

    name = "table_csv"
    patterns = ("*.csv",)
    what = "CSV table"

    def __init__(self, path: str | Path, *, name_column: str | None = None,
                 value_columns: Sequence[str] | str | None = None, step_column: str = "step",
                 rank_column: str = "rank", ts_column: str = "ts", unit_column: str = "unit",
                 unit: str = "", kind: str = "gauge", name_prefix: str = "", delimiter: str = ",",
                 rank: int | None = None, **options: Any) -> None:
        # a single string in value_columns is one column name (never split into characters)
        opts = checked(type(self), {
            "name_column": name_column, "value_columns": value_columns, "step_column": step_column,
            "rank_column": rank_column, "ts_column": ts_column, "unit_column": unit_column, "unit": unit,
            "kind": kind, "name_prefix": name_prefix, "delimiter": delimiter, **options,
        })
        try:
            csv.reader([], delimiter=opts["delimiter"])
        except (TypeError, csv.Error):
            raise ConfigError(f"{type(self).__name__}()", "delimiter",
                              f"metrics provider 'table_csv' option 'delimiter' must be one character "
                              f"(not a quote or a line break), got {delimiter!r}") from None
        self.name_column: str | None = opts["name_column"]
        self.value_columns: list[str] | None = opts["value_columns"]
        self.columns = {"step": opts["step_column"], "rank": opts["rank_column"], "ts": opts["ts_column"],
                        "unit": opts["unit_column"]}
        self.unit, self.kind, self.prefix, self.delimiter = opts["unit"], opts["kind"], opts["name_prefix"], \
            opts["delimiter"]
        super().__init__(path, rank=rank)

    def sniff(self, file: Path) -> None:
        """Binary data is not a CSV table."""
        if b"\x00" in read_head(file, 4096):
            raise UnsupportedInputError(file, None, "a CSV table (text); found binary data")

    def _read_files(self, files: list[Path]) -> list[MetricEvent]:
        out: list[MetricEvent] = []
        for f in files:
            out.extend(self._read(f))
        return out

    def _read(self, path: Path) -> list[MetricEvent]:
        try:
            fh = open(path, encoding="utf-8-sig", newline="")  # noqa: SIM115 - closed by the with below
        except OSError as exc:
            raise InputError(path, None, f"a readable file ({exc.strerror or exc})") from None
        with fh:
            reader = csv.reader(fh, delimiter=self.delimiter)
            try:
                header = [h.strip() for h in next(reader, [])]
                if not header or not any(header):
                    raise InputError(path, "line 1", "a header row naming the columns")
                return self._rows(path, reader, header)
            except csv.Error as exc:
                raise InputError(path, f"line {reader.line_num}", f"well-formed CSV ({exc})") from None
            except UnicodeDecodeError:
                raise InputError(path, f"line {reader.line_num + 1}", "UTF-8 text") from None

    def _rows(self, path: Path, reader: Any, header: list[str]) -> list[MetricEvent]:
        col = {h: i for i, h in enumerate(header)}
        name_col = self.name_column or ("name" if "name" in col else header[0])
        if name_col not in col:
            raise InputError(path, "line 1", f"a name column {name_col!r}; the header has {header}")
        special = {c for c in self.columns.values() if c in col} | {name_col}
        if self.value_columns is not None:
            missing = [c for c in self.value_columns if c not in col]
            if missing:
                raise InputError(path, "line 1", f"value column(s) {missing}; the header has {header}")
            values = self.value_columns
        else:
            values = [h for h in header if h and h not in special]
        if not values:
            others = sorted({",", ";", "\t", "|"} - {self.delimiter})
            hint = next((f"; the header holds {d!r}: is the delimiter {d!r}, not {self.delimiter!r}?"
                         for d in others if any(d in h for h in header)), "")
            raise InputError(path, "line 1", f"a value column besides the name column {name_col!r}; "
                             f"the header has {header}{hint}")
        file_rank = self.rank if self.rank is not None else rank_from_name(path)
        out: list[MetricEvent] = []
        rows = 0
        for row in reader:
            if not row or not any(c.strip() for c in row):
                continue
            line = reader.line_num
            rows += 1
            if len(row) > len(header):
                raise InputError(path, f"line {line}", f"at most {len(header)} cells (the header's); found {len(row)}")
            cells = row + [""] * (len(header) - len(row))
            base = cells[col[name_col]].strip()
            if not base:
                raise InputError(path, f"line {line}", f"a name in column {name_col!r}")
            step = _int_cell(path, line, self.columns["step"], cells[col[self.columns["step"]]]) \
                if self.columns["step"] in col else None
            rank = _int_cell(path, line, self.columns["rank"], cells[col[self.columns["rank"]]]) \
                if self.columns["rank"] in col else None
            ts = parse_number(cells[col[self.columns["ts"]]]) if self.columns["ts"] in col else None
            unit = cells[col[self.columns["unit"]]].strip() if self.columns["unit"] in col else self.unit
            texts = {h: cells[i].strip() for h, i in col.items() if h not in special and h not in values}
            numbers: list[tuple[str, float]] = []
            for vc in values:
                number = parse_number(cells[col[vc]])
                if number is not None:
                    numbers.append((vc, number))
                elif self.value_columns is not None and cells[col[vc]].strip():
                    raise InputError(path, f"line {line}", f"a number in column {vc!r}; found {cells[col[vc]]!r}")
                else:  # auto-detected column holding text in this row: context, not a metric
                    texts[vc] = cells[col[vc]].strip()
            context = {k: v for k, v in texts.items() if v}
            for vc, number in numbers:
                name = base if vc == "value" or len(values) == 1 else f"{base}/{vc}"
                out.append(MetricEvent(
                    name=f"{self.prefix}{name}", value=number, kind=self.kind, unit=unit, source="table_csv",
                    rank=rank if rank is not None else file_rank, step=step,
                    ts=ts if ts is not None and math.isfinite(ts) else None,
                    attrs={"file": path.name, "line": line, "column": vc, **context},
                ))
        if rows and not out:
            raise InputError(path, None, f"a number in at least one cell of the value column(s) {values}; "
                             f"none of the {rows} row(s) has one")
        return out
