"""Nsight Compute ``--csv`` exports (details page, long or raw/wide) → metric events.

Accepts what real files contain: program output before the header (found by the line
starting ``"ID","Process ID"``), the NVTX columns of ``--nvtx``, ``Kernel Time``, the
2025 rule columns, thousands separators (``8,192``), ``n/a`` and text values, ragged
rows, and the ``--page raw`` layout whose second row holds units. ncu console output
(no ``--csv``) is refused with the reason.

Each metric value becomes one event named ``ncu:<metric>`` (durations converted to ms),
with the kernel, launch id, stream, section and NVTX ranges in ``attrs``; rule rows
become ``ncu.rule:<rule>`` events carrying the estimated speedup. The ``ncu_csv`` provider
and the Nsight Compute analyses (:mod:`.launches`) both read through :func:`read_ncu_csv`.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Any

from my_utils.core.errors import InputError, UnsupportedInputError
from my_utils.core.events import MetricEvent
from my_utils.core.paths import StrPath, as_path
from my_utils.profiling.formats._values import parse_number, time_to_ms
from my_utils.profiling.formats.ncu_header import is_header
from my_utils.profiling.formats.ranks import rank_in_name

_ID_COLUMNS = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Kernel Time", "Context",
               "Stream", "Block Size", "Grid Size", "Device", "CC", "Section Name")
_ATTR_OF = {"ID": "launch_id", "Process ID": "pid", "Process Name": "process", "Host Name": "host",
            "Kernel Name": "kernel", "Kernel Time": "kernel_time", "Context": "context", "Stream": "stream",
            "Block Size": "block", "Grid Size": "grid", "Device": "device", "CC": "cc",
            "Section Name": "section"}
_RULE_COLUMNS = ("Rule Name", "Rule Type", "Rule Description", "Estimated Speedup Type", "Estimated Speedup")


def _text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(path, None, f"a readable file ({exc.strerror or exc})") from None
    # ncu writes UTF-8; a stray byte in program output before the header must not fail the read
    return data.decode("utf-8", errors="replace")


def read_ncu_csv(path: StrPath, rank: int | None = None) -> list[MetricEvent]:
    """Parse one ncu CSV export into metric events (rank: given, else from the file name)."""
    path = as_path(path)
    text = _text(path)
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if is_header(line)), None)
    if start is None:
        if "==PROF==" in text:
            raise UnsupportedInputError(
                path, None,
                "an ncu CSV export (a line starting \"ID\",\"Process ID\"); this is ncu console "
                "output: re-run ncu with --csv (or `ncu --import x.ncu-rep --csv --page details`)",
            )
        raise UnsupportedInputError(path, None, 'an ncu CSV export: no header line starting "ID","Process ID"')
    rows = csv.reader(io.StringIO("\n".join(lines[start:])))
    try:
        header = [h.strip() for h in next(rows)]
    except csv.Error as exc:
        raise InputError(path, f"line {start + 1}", f"a CSV header ({exc})") from None
    col = {name: i for i, name in enumerate(header)}
    if "Kernel Name" not in col:
        raise InputError(path, f"line {start + 1}", f"a 'Kernel Name' column in the ncu header; found {header}")
    rank = rank if rank is not None else rank_in_name(path)
    long_form = "Metric Name" in col and "Metric Value" in col
    try:
        if long_form:
            return _long(path, rows, header, col, start, rank)
        return _raw(path, rows, header, col, start, rank)
    except csv.Error as exc:
        raise InputError(path, f"line {rows.line_num + start}", f"well-formed CSV ({exc})") from None


def _cells(row: list[str], width: int) -> list[str]:
    # ragged rows: short ones are padded; extra trailing cells carry nothing we read
    return row + [""] * (width - len(row)) if len(row) < width else row


def _attrs(cells: list[str], col: dict[str, int]) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    for name, key in _ATTR_OF.items():
        i = col.get(name)
        if i is not None and cells[i].strip():
            attrs[key] = cells[i].strip()
    nvtx = [cells[i].strip().strip('"').strip() for name, i in col.items()
            if ("Push/Pop_Range" in name or "Start/Stop_Range" in name) and cells[i].strip()]
    if nvtx:
        attrs["nvtx"] = [n for n in nvtx if n]
    return attrs


def _event(name: str, raw: str, unit: str, rank: int | None, attrs: dict[str, Any]) -> MetricEvent:
    value = parse_number(raw)
    kind = "gauge"
    if value is None:
        value, kind = math.nan, "info"
        attrs["text"] = raw.strip()
    else:
        converted = time_to_ms(value, unit)
        if converted is not None:
            attrs["raw_value"], attrs["raw_unit"] = value, unit
            value, unit = converted
    return MetricEvent(name=name, value=value, kind=kind, unit=unit, source="ncu_csv", rank=rank, attrs=attrs)


def _long(path: Path, rows: Any, header: list[str], col: dict[str, int], start: int,
          rank: int | None) -> list[MetricEvent]:
    out: list[MetricEvent] = []
    width = len(header)
    mname, munit, mval = col["Metric Name"], col.get("Metric Unit"), col["Metric Value"]
    rule = col.get("Rule Name")
    for row in rows:
        if not row or not any(c.strip() for c in row):
            continue
        cells = _cells(row, width)
        attrs = _attrs(cells, col)
        attrs["file"] = path.name
        metric = cells[mname].strip()
        if metric:
            unit = cells[munit].strip() if munit is not None else ""
            out.append(_event(f"ncu:{metric}", cells[mval], unit, rank, attrs))
        elif rule is not None and cells[rule].strip():
            for name in _RULE_COLUMNS[1:4]:
                i = col.get(name)
                if i is not None and cells[i].strip():
                    attrs[name.lower().replace(" ", "_")] = cells[i].strip()
            i = col.get("Estimated Speedup")
            out.append(_event(f"ncu.rule:{cells[rule].strip()}", cells[i] if i is not None else "", "%",
                              rank, attrs))
        elif len(row) < 3:
            raise InputError(path, f"line {start + rows.line_num}",
                             f"a row of the {width}-column ncu table; found {len(row)} cell(s)")
    return out


def _raw(path: Path, rows: Any, header: list[str], col: dict[str, int], start: int,
         rank: int | None) -> list[MetricEvent]:
    """``--page raw``: one column per metric, a units row first, then one row per launch."""
    width = len(header)
    metric_cols = [i for i, name in enumerate(header) if name and name not in _ID_COLUMNS]
    if not metric_cols:
        raise InputError(path, f"line {start + 1}",
                         "either Metric Name/Metric Value columns (details page) or metric columns (raw page)")
    units: list[str] | None = None
    out: list[MetricEvent] = []
    for row in rows:
        if not row or not any(c.strip() for c in row):
            continue
        cells = _cells(row, width)
        if units is None and not cells[col["ID"]].strip():
            units = [c.strip() for c in cells]
            continue
        attrs = _attrs(cells, col)
        attrs["file"] = path.name
        for i in metric_cols:
            if cells[i].strip():
                out.append(_event(f"ncu:{header[i]}", cells[i], units[i] if units else "", rank, dict(attrs)))
    return out
