"""Reading numbers and units written by profilers (thousands separators, n/a, time units)."""

from __future__ import annotations

import math
import re

_THOUSANDS = re.compile(r"^[-+]?\d{1,3}(,\d{3})+(\.\d+)?$")
_TIME_TO_MS = {
    "nsecond": 1e-6, "ns": 1e-6, "usecond": 1e-3, "us": 1e-3, "µs": 1e-3,
    "msecond": 1.0, "ms": 1.0, "second": 1e3, "s": 1e3, "sec": 1e3,
}


def parse_number(text: str) -> float | None:
    """A float from a profiler cell (``8,192``, ``2.45``, ``1e3``), None when not a number.

    A comma is read as a thousands separator only in the ``1,234,567.8`` shape, so a
    cell like ``1,5`` is not silently turned into 15.
    """
    s = text.strip().strip('"').strip()
    if not s or s.lower() in ("n/a", "na", "nan", "-", "--"):
        return None
    if "," in s:
        if not _THOUSANDS.match(s):
            return None
        s = s.replace(",", "")
    try:
        value = float(s)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def time_to_ms(value: float, unit: str) -> tuple[float, str] | None:
    """Convert a duration in a profiler unit to milliseconds; None when not a time unit."""
    factor = _TIME_TO_MS.get(unit.strip())
    return None if factor is None else (value * factor, "ms")
