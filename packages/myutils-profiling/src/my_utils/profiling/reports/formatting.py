"""How numbers read in a report: milliseconds with thousands separators, percentages, counts.

One place decides it for the HTML, the Markdown and the charts' hover text, so a number
reads the same wherever it appears. Times are shown in ms (a Kineto column in µs is shown
in ms under a header that says so, as is an Nsight column in ns), never in e-notation; counts get separators; identifiers
(rank, step, stream, correlation id) never do. Conversions here are of units only: the
report shows what the analysis computed, it does not compute new figures.
"""

from __future__ import annotations

import json
import math
from typing import Any

#: Text for a value the run did not give (None, NaN).
MISSING = "–"
#: Columns that hold identifiers: shown as they are, without separators.
ID_COLUMNS = frozenset({"rank", "step", "first", "last", "device", "stream", "correlation", "pid", "tid", "id",
                        "node_id", "parent_id", "world_size", "schema", "schema_version", "run_id"})
#: Suffix of a column in microseconds → shown in ms.
_US_SUFFIX = "_us"
#: Suffix of a column in nanoseconds (the Nsight tables) → shown in ms.
_NS_SUFFIX = "_ns"
_PCT_SUFFIX = "_pct"
#: Column names whose 0..1 values are shares (shown as %).
SHARE_COLUMNS = frozenset({"share"})
#: Characters of one free-form value (lists, objects) in a cell.
MAX_VALUE_CHARS = 400


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    v = float(value)
    return v if math.isfinite(v) else None


def fmt_number(value: float) -> str:
    """A float with separators and as many decimals as its size needs (``1,737.7``, ``42.26``, ``0.004``)."""
    a = abs(value)
    if a == 0:
        return "0"
    if a >= 100:
        decimals = 0 if a >= 10_000 else 1
    elif a >= 1:
        decimals = 2
    else:  # three significant digits in fixed notation, never e-notation
        decimals = min(12, 2 - math.floor(math.log10(a)))
    text = f"{value:,.{decimals}f}"
    if decimals:
        text = text.rstrip("0").rstrip(".")
    return text.replace("-", "−")


def fmt_ms(value: Any, unit: str = "ms") -> str:
    """A time in ms with its unit: ``1,737.7 ms``; µs and s converted; ``–`` when missing."""
    v = _finite(value)
    if v is None:
        return MISSING
    scale = {"us": 1e-3, "µs": 1e-3, "ns": 1e-6, "s": 1e3, "ms": 1.0}.get(unit)
    if scale is None:
        return f"{fmt_number(v)} {unit}"
    return f"{fmt_number(v * scale)} ms"


def fmt_pct(value: Any, fraction: bool = False) -> str:
    """A percentage: ``42.3%`` (``fraction``: the value is 0..1)."""
    v = _finite(value)
    if v is None:
        return MISSING
    v = v * 100 if fraction else v
    if v == 0:
        return "0%"
    return f"{v:,.1f}%" if abs(v) >= 0.1 else f"{fmt_number(v)}%"


def fmt_count(value: Any) -> str:
    """An integer count with separators: ``22,290``."""
    v = _finite(value)
    if v is None:
        return MISSING
    return f"{round(v):,}" if float(v).is_integer() else fmt_number(v)


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``1 rank``, ``3 ranks``, ``2 launches`` (``plural`` when adding an ``s`` is wrong): never ``3 rank(s)``."""
    return f"{n:,} {noun if n == 1 else (plural or noun + 's')}"


def fmt_value(value: Any, column: str = "") -> str:
    """A table cell: numbers by ``column`` (ids plain, ``*_us`` in ms, ``*_pct``/shares in %), others as text."""
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        v = _finite(value)
        if v is None:
            return MISSING if value != value else str(value)
        if column in ID_COLUMNS:
            return str(int(v)) if float(v).is_integer() else str(v)
        if column.endswith(_US_SUFFIX):
            return fmt_number(v / 1e3)
        if column.endswith(_NS_SUFFIX):
            return fmt_number(v / 1e6)
        if column.endswith(_PCT_SUFFIX):
            return fmt_pct(v)
        if column in SHARE_COLUMNS or column.startswith("share_of"):
            return fmt_pct(v, fraction=True)
        if isinstance(value, int):
            return f"{value:,}"
        return fmt_number(v)
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= MAX_VALUE_CHARS else text[:MAX_VALUE_CHARS - 1] + "…"


def column_title(column: str) -> str:
    """A column header in words with its unit: ``delay_median_us`` → ``delay median (ms)``."""
    unit = ""
    name = column
    if name.endswith(_US_SUFFIX):
        name, unit = name[:-len(_US_SUFFIX)], " (ms)"
    elif name.endswith(_NS_SUFFIX):
        name, unit = name[:-len(_NS_SUFFIX)], " (ms)"
    elif name.endswith(_PCT_SUFFIX):
        name, unit = name[:-len(_PCT_SUFFIX)], " (%)"
    return name.replace("_", " ") + unit


#: How each source of a measurement is named to a reader.
SOURCE_LABELS: dict[str, str] = {"mytimer": "MyTimer", "torch_profiler": "torch.profiler",
                                 "kineto": "torch.profiler (Kineto)", "nsys": "Nsight Systems",
                                 "nsys_sqlite": "Nsight Systems", "ncu": "Nsight Compute", "ncu_csv": "Nsight Compute",
                                 "cprofile": "cProfile", "nvml": "NVML"}


def source_label(source: Any) -> str:
    """A source's name as a reader knows it (``torch_profiler`` → ``torch.profiler``); unknown ones as they are."""
    text = str(source or "")
    return SOURCE_LABELS.get(text.lower(), text)
