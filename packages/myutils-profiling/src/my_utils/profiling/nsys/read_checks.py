"""What an nsys export must hold before SQL reads it: tables (not views), storage classes, a bound on each query.

An export is untrusted input, and SQL on it can be made to run without end or to hand the
analyses values they cannot use. :class:`~.schema.NsysExport` applies what is here:

- a view named like an nsys table (:data:`NSYS_TABLE_NAME`) is refused where a table is
  expected: a recursive view, or an endless join, never finishes;
- every statement runs under a budget of SQLite steps (:func:`step_budget`), scaled by the
  file's size far above what a real query takes, and is stopped past it in one line that
  names the export and the query;
- :data:`COLUMN_KINDS` says the storage class (and for lane ids the range) of every column the
  canonical views read; a BLOB or TEXT where a number is read, a REAL device id, is refused
  once per table, before anything uses it (:meth:`~.schema.NsysExport.check_columns`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from my_utils.core.errors import UsageError

#: Names nsys gives its tables: a view of such a name is refused (an export writes tables only).
NSYS_TABLE_NAME = re.compile(r"^(?:StringIds|ThreadNames|PROCESSES|COMPOSITE_EVENTS|EXPORT_META_DATA|"
                             r"(?:CUPTI|NVTX|OSRT|TARGET_INFO|META_DATA|ENUM|SCHED|CUDA|NCCL|MPI|DX12|VULKAN|OPENGL|"
                             r"OPENMP|UCX|NVVIDEO|GPU|MEMORY|DIAGNOSTIC|PROFILER)_\w*|\w+_API)$")
#: The steps of SQLite's virtual machine per statement, per byte of the export (:func:`step_budget`); every
#: real query of the shared exports took under 1 a byte.
STEPS_PER_BYTE = 200
#: The smallest budget, whatever the file's size.
MIN_STEPS = 200_000_000
#: Environment variable: the budget of steps per statement, overriding the scaled one.
STEPS_ENV = "MYUTILS_NSYS_QUERY_STEPS"
#: Steps of SQLite's virtual machine between two calls of the progress handler.
PROGRESS_STEP = 10_000


def step_budget(size: int) -> int:
    """The SQLite steps one statement may take on an export of ``size`` bytes (``$MYUTILS_NSYS_QUERY_STEPS``
    when set)."""
    raw = os.environ.get(STEPS_ENV, "").strip()
    if raw:
        try:
            return max(PROGRESS_STEP, int(float(raw)))
        except ValueError:
            raise UsageError(f"${STEPS_ENV}={raw!r}: expected a number of SQLite steps, e.g. 1e10") from None
    return max(MIN_STEPS, STEPS_PER_BYTE * size)


@dataclass(frozen=True)
class ColumnKind:
    """What a column read from an export must hold: SQLite storage classes (``typeof``), and for integers a range."""

    label: str  # how an error names it: "an integer", "a text"
    classes: tuple[str, ...]
    low: int | None = None
    high: int | None = None

    def expected(self, col: str, table: str, found: Any) -> str:
        """What an error says was expected: ``an integer 'end' in T``, with the range when ``found`` is out of it."""
        span = (f" from {self.low:,} to {self.high:,}"
                if isinstance(found, int) and self.low is not None and self.high is not None else "")
        return f"{self.label} {col!r}{span} in {table}"

    def condition(self, col: str) -> str:
        """An SQL condition true where ``col`` holds such a value."""
        ok = f"typeof({col}) IN ({', '.join(repr(c) for c in self.classes)})"
        if self.low is None or self.high is None:
            return ok
        nullable = " OR " + col + " IS NULL" if "null" in self.classes else ""
        return f"({ok} AND ({col} BETWEEN {self.low} AND {self.high}{nullable}))"

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` (as sqlite3 returned it) is such a value."""
        if value is None:
            return "null" in self.classes
        kind = {int: "integer", float: "real", str: "text", bytes: "blob"}.get(type(value), "blob")
        if kind not in self.classes:
            return False
        return not (kind == "integer" and self.low is not None and self.high is not None
                    and not self.low <= value <= self.high)


#: Ids and references, matched by equality only (nullable: a row without one shows it as absent).
INTEGER = ColumnKind("an integer", ("integer", "null"))
#: Times in ns: far from the 64-bit edge, so that a duration (a difference) and a shift never overflow.
TIME = ColumnKind("an integer", ("integer", "null"), -(2**62), 2**62)
#: Sizes and counts that queries add up: bytes of one copy, grid and block sizes, registers.
AMOUNT = ColumnKind("an integer", ("integer", "null"), 0, 2**48)
#: A device or stream number: the timeline's lanes are made of it.
SMALL_ID = ColumnKind("an integer", ("integer",), 0, 2**31 - 1)
#: Names and other text.
TEXT = ColumnKind("a text", ("text", "null"))

#: The columns the canonical views read, by table, and what each must hold.
COLUMN_KINDS: dict[str, dict[str, ColumnKind]] = {
    "CUPTI_ACTIVITY_KIND_KERNEL": {
        "start": TIME, "end": TIME, "deviceId": SMALL_ID, "streamId": SMALL_ID, "contextId": INTEGER,
        "globalPid": INTEGER, "correlationId": INTEGER, "demangledName": INTEGER, "shortName": INTEGER,
        "mangledName": INTEGER, "gridX": AMOUNT, "gridY": AMOUNT, "gridZ": AMOUNT, "blockX": AMOUNT,
        "blockY": AMOUNT, "blockZ": AMOUNT, "registersPerThread": AMOUNT},
    "CUPTI_ACTIVITY_KIND_MEMCPY": {
        "start": TIME, "end": TIME, "deviceId": SMALL_ID, "streamId": SMALL_ID, "globalPid": INTEGER,
        "correlationId": INTEGER, "bytes": AMOUNT, "copyKind": INTEGER},
    "CUPTI_ACTIVITY_KIND_MEMSET": {
        "start": TIME, "end": TIME, "deviceId": SMALL_ID, "streamId": SMALL_ID, "globalPid": INTEGER,
        "correlationId": INTEGER, "bytes": AMOUNT},
    "CUPTI_ACTIVITY_KIND_RUNTIME": {
        "start": TIME, "end": TIME, "nameId": INTEGER, "globalTid": INTEGER, "correlationId": INTEGER,
        "eventClass": INTEGER},
    "OSRT_API": {"start": TIME, "end": TIME, "nameId": INTEGER, "globalTid": INTEGER, "correlationId": INTEGER},
    "NVTX_EVENTS": {"start": TIME, "end": TIME, "eventType": INTEGER, "globalTid": INTEGER, "domainId": INTEGER,
                    "textId": INTEGER, "text": TEXT},
    # synchronisation rows name no lane: a stream of 2**32 - 1 (CUPTI's "none") is real
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": {
        "start": TIME, "end": TIME, "deviceId": INTEGER, "streamId": INTEGER, "globalPid": INTEGER,
        "syncType": INTEGER},
    "StringIds": {"id": INTEGER, "value": TEXT},
}


def shown(value: Any) -> str:
    """A value read from an export as an error shows it: its storage class and a short form of it."""
    if value is None:
        return "NULL"
    if isinstance(value, bytes):
        return f"a BLOB (X'{value[:8].hex().upper()}'{'...' if len(value) > 8 else ''})"
    if isinstance(value, str):
        return f"a TEXT ({value[:20]!r}{'...' if len(value) > 20 else ''})"
    if isinstance(value, float):
        return f"a REAL ({value!r})"
    return f"{value:,}"


