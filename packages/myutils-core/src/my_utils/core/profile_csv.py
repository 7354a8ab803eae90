"""The profile CSV (``profile_rank_<rank>.csv``): its columns, the one reader, and formatting helpers.

Every consumer of profile CSVs (``csv_to_trace``, the profiling providers) reads them through
``iter_profile_rows``: it validates the header, skips a torn last record (a killed writer) and
reports anything else malformed as ``file:line N: what was expected`` (``InputError``).

The writer side (``GlobalLogger``: packed step records rendered by ``step_log``, or
``ProfileCsvWriter`` on the direct path) builds its lines with the helpers here, so that what is
written is exactly what the reader accepts: real CSV (fields with a comma, quote or newline are
quoted) and every record ends with ``\\n``. Text cells are safe to open in a spreadsheet: one
that would run as a formula (``=``, ``+``, ``-``, ``@``, a tab... first) is written with a leading
apostrophe (``csv_safe.csv_text_cell``; also after each line break of a multi-line name), which ``iter_profile_rows`` takes off, so every tool that
reads through it sees the original name; names that are not UTF-8 are written as ``\\xNN``.
"""

from __future__ import annotations

import csv
import logging
import math
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO
from urllib.parse import quote, unquote

from my_utils.core.csv_safe import csv_field, csv_text_cell, csv_text_value
from my_utils.core.errors import InputError
from my_utils.core.safe_io import open_regular, utf8_text

__all__ = [
    "HEADER_LINE",
    "PROFILE_CSV_COLUMNS",
    "ProfileRow",
    "csv_field",
    "format_metadata",
    "format_ms_ns",
    "format_profile_line",
    "format_unix_ns",
    "iter_profile_rows",
    "parse_metadata",
    "read_profile_csv",
    "readable_second",
    "readable_time_ns",
]

_log = logging.getLogger(__name__)

PROFILE_CSV_COLUMNS: tuple[str, ...] = (
    "timestamp_unix",
    "readable_time",
    "machine_id",
    "step",
    "event_name",
    "event_type",
    "duration_ms",
    "metadata",
)
HEADER_LINE = ",".join(PROFILE_CSV_COLUMNS) + "\n"

# Characters that would break the "k=v;k=v" syntax are percent-encoded (and '%' itself).
_META_SAFE_KEY = " !#$&'()*+,-./:<>?@[]^_`{|}~"
_META_SAFE_VALUE = _META_SAFE_KEY + "="


@dataclass(frozen=True, slots=True)
class ProfileRow:
    """One record of a profile CSV; ``line`` is the 1-based line where the record starts."""

    timestamp_unix: float
    readable_time: str
    machine_id: str
    step: int
    event_name: str
    event_type: str
    duration_ms: float
    metadata: str
    line: int

    def metadata_dict(self) -> dict[str, str]:
        """The ``key=value;key=value`` metadata as a dict (see ``parse_metadata``)."""
        return parse_metadata(self.metadata)


# -- formatting (writer side) ------------------------------------------------------------




def format_metadata(items: Mapping[str, object]) -> str:
    """``{"node_id": 3, "parent_id": 1}`` -> ``"node_id=3;parent_id=1"``.

    ``%``, ``;`` (and ``=`` in keys) are percent-encoded so that ``parse_metadata`` gives the
    same strings back; ordinary names stay readable.
    """
    parts = []
    for key, value in items.items():
        k = str(key)
        v = str(value)
        if "%" in k or ";" in k or "=" in k:
            k = quote(k, safe=_META_SAFE_KEY)
        if "%" in v or ";" in v:
            v = quote(v, safe=_META_SAFE_VALUE)
        parts.append(f"{k}={v}")
    return ";".join(parts)


def parse_metadata(text: str) -> dict[str, str]:
    """Parse ``key=value;key=value`` (split at the first ``=``); an item without ``=`` maps to ``""``."""
    out: dict[str, str] = {}
    if not text:
        return out
    for item in text.split(";"):
        if not item:
            continue
        key, _, value = item.partition("=")
        if "%" in key:
            key = unquote(key)
        if "%" in value:
            value = unquote(value)
        out[key.strip()] = value
    return out


def format_unix_ns(unix_ns: int) -> str:
    """Unix time in integer nanoseconds -> seconds with 6 decimals, without float formatting."""
    if unix_ns < 0:
        return f"{unix_ns / 1e9:.6f}"
    sec, usec = divmod(unix_ns // 1000, 1_000_000)
    return f"{sec}.{usec:06d}"


def format_ms_ns(duration_ns: int) -> str:
    """A duration in integer nanoseconds -> milliseconds with 6 decimals (ns resolution)."""
    if duration_ns < 0:
        return "-" + format_ms_ns(-duration_ns)
    ms, ns = divmod(duration_ns, 1_000_000)
    return f"{ms}.{ns:06d}"


_readable_cache: tuple[int, str] = (-1, "")


def readable_second(unix_sec: int) -> str:
    """``YYYY-mm-dd HH:MM:SS`` in local time; strftime runs once per second, not per row."""
    global _readable_cache
    cached_sec, text = _readable_cache  # one tuple: threads never see a mismatched pair
    if cached_sec != unix_sec:
        text = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(unix_sec))
        _readable_cache = (unix_sec, text)
    return text


def readable_time_ns(unix_ns: int) -> str:
    """``YYYY-mm-dd HH:MM:SS.mmm`` in local time."""
    sec, rem = divmod(unix_ns, 1_000_000_000)
    return f"{readable_second(sec)}.{rem // 1_000_000:03d}"


def _text_cell(text: str) -> str:
    """A free-text cell: valid UTF-8, never a spreadsheet formula (``iter_profile_rows`` undoes it), quoted as needed."""
    return csv_field(csv_text_cell(utf8_text(text)))


def format_profile_line(
    unix_ns: int,
    machine_id: str,
    step: int,
    event_name: str,
    event_type: str,
    duration_ms: float | str,
    metadata: str,
) -> str:
    """One complete CSV record (ending with ``\\n``) in the column order of PROFILE_CSV_COLUMNS."""
    dur = duration_ms if isinstance(duration_ms, str) else repr(float(duration_ms))
    return ",".join(
        (
            format_unix_ns(unix_ns),
            readable_time_ns(unix_ns),
            _text_cell(machine_id),
            str(int(step)),
            _text_cell(event_name),
            _text_cell(event_type),
            dur,
            _text_cell(metadata),
        )
    ) + "\n"


# -- reading -----------------------------------------------------------------------------


class _Lines:
    """Decoded lines of a binary file for csv.reader, tracking line numbers and torn tails."""

    def __init__(self, fh: IO[bytes], where: Path) -> None:
        self._fh = fh
        self._where = where
        self._pushed: bytes | None = None
        self.not_utf8: list[int] = []  # lines read with their invalid bytes as \xNN escapes
        self.lineno = 0
        self.torn = False  # the file ends inside an undecodable, unterminated line
        self.last_terminated = True  # the last line read ends with a newline
        self.first_text: str | None = None  # the first line holding more than whitespace

    def __iter__(self) -> _Lines:
        return self

    def at_eof(self) -> bool:
        if self._pushed is None:
            self._pushed = self._fh.readline()
        return self._pushed == b""

    def __next__(self) -> str:
        if self._pushed is not None:
            raw, self._pushed = self._pushed, None
        else:
            raw = self._fh.readline()
        if not raw:
            raise StopIteration
        self.lineno += 1
        self.last_terminated = raw.endswith(b"\n")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            if not raw.endswith(b"\n") and self.at_eof():
                self.torn = True  # a multi-byte character cut by a killed writer
                raise StopIteration from None
            # an older writer wrote names with non-UTF-8 bytes as they were: read the line with
            # those bytes as \xNN (what writers write now) instead of refusing the whole file
            text = raw.decode("utf-8", "backslashreplace")
            self.not_utf8.append(self.lineno)
        if self.lineno == 1 and text.startswith("\ufeff"):
            text = text[1:]
        if self.first_text is None and text.strip():
            self.first_text = text
        return text


def _float(fields: list[str], index: int, where: Path, line: int, *, empty_ok: bool) -> float:
    text = fields[index].strip()
    if not text and empty_ok:
        return 0.0
    try:
        value = float(text)
    except ValueError:
        raise InputError(
            where, f"line {line}", f"expected a number in column {PROFILE_CSV_COLUMNS[index]!r}, got {text!r}"
        ) from None
    if index == 0 and not math.isfinite(value):
        raise InputError(where, f"line {line}", f"expected a finite unix time in 'timestamp_unix', got {text!r}")
    return value


def _row(fields: list[str], where: Path, line: int) -> ProfileRow:
    if len(fields) != len(PROFILE_CSV_COLUMNS):
        raise InputError(
            where,
            f"line {line}",
            f"expected {len(PROFILE_CSV_COLUMNS)} comma-separated fields ({','.join(PROFILE_CSV_COLUMNS)}), "
            f"got {len(fields)}",
        )
    step_text = fields[3].strip()
    try:
        step = int(step_text)
    except ValueError:
        raise InputError(where, f"line {line}", f"expected an integer in column 'step', got {step_text!r}") from None
    # text cells were written with csv_text_cell (no spreadsheet formulas): read back exactly
    return ProfileRow(
        timestamp_unix=_float(fields, 0, where, line, empty_ok=False),
        readable_time=fields[1],
        machine_id=csv_text_value(fields[2]),
        step=step,
        event_name=csv_text_value(fields[4]),
        event_type=csv_text_value(fields[5]).strip(),
        duration_ms=_float(fields, 6, where, line, empty_ok=True),
        metadata=csv_text_value(fields[7]),
        line=line,
    )


def iter_profile_rows(path: str | Path) -> Iterator[ProfileRow]:
    """Stream the rows of a profile CSV.

    The first record must be the header (PROFILE_CSV_COLUMNS; spaces around names allowed).
    The final record is a torn write, and skipped, when the file does not end with a newline
    or ends inside a quoted field. Bytes that are not UTF-8 (an older writer's names) are read
    as ``\\xNN`` escapes, said once through logging. Anything else malformed raises ``InputError``
    naming the file, the line and what was expected. An empty file has no rows; a path that is
    not a regular file (a FIFO, a folder) is refused without blocking.
    """
    where = Path(path)
    # MyTimer persists steps in a packed log beside the CSV and renders them into it a moment
    # later; bring the CSV up to date first, so that a run whose writer (and helper) was killed
    # reads complete, and an in-process read needs no flush(). No log: nothing happens.
    from my_utils.core.step_log import sync_profile_csv

    sync_profile_csv(where)
    try:
        # only a regular file: a FIFO named like a profile CSV would block the reader forever
        fh = open_regular(where, "rb")
    except OSError as exc:
        raise InputError(where, None, f"cannot open the profile CSV ({exc.strerror or exc})") from None
    try:
        lines = _Lines(fh, where)
        reader = csv.reader(lines, strict=True)
        header_seen = False
        held: tuple[int, list[str]] | None = None  # one record of look-ahead: the last may be torn
        end_of_previous = 0
        while True:
            try:
                fields = next(reader)
            except StopIteration:
                break
            except csv.Error as exc:
                if lines.at_eof() and ("unexpected end of data" in str(exc) or not lines.last_terminated):
                    # the file ends inside a quoted field or an unterminated line: this record is torn
                    _log.debug("%s: skipping a torn last record at line %d", where, end_of_previous + 1)
                    lines.torn = True
                    break
                raise InputError(where, f"line {lines.lineno}", f"expected a well-formed CSV record ({exc})") from None
            start = end_of_previous + 1
            end_of_previous = lines.lineno
            if not fields or fields == [""]:
                continue
            if held is not None:
                row = _check(held, where, header_seen)
                if header_seen:
                    yield row
                header_seen = True
            held = (start, fields)
        if held is None:
            # nothing but a torn record: fine for a writer killed while writing the header,
            # not for another kind of file (one line of JSON is not "a profile CSV with 0 rows")
            if lines.first_text is not None and not _header_prefix(lines.first_text):
                shown = lines.first_text.strip()[:80]
                raise InputError(where, "line 1", f"expected the profile CSV header {HEADER_LINE.strip()!r}, "
                                 f"got {shown!r}")
            return
        # ``lines.torn``: a later, undecodable or unclosed record was the torn one, not ``held``
        if not lines.torn and not lines.last_terminated:
            if not header_seen and not HEADER_LINE.startswith(",".join(held[1])):
                raise InputError(where, "line 1", f"expected the profile CSV header {HEADER_LINE.strip()!r}")
            _log.debug("%s: skipping a torn last record at line %d", where, held[0])
            return
        row = _check(held, where, header_seen)
        if header_seen:
            yield row
        if lines.not_utf8:
            shown = ", ".join(map(str, lines.not_utf8[:5])) + (", ..." if len(lines.not_utf8) > 5 else "")
            _log.warning("%s: %d line(s) are not valid UTF-8 (lines %s); their bytes were read as \\xNN escapes",
                         where, len(lines.not_utf8), shown)
    finally:
        fh.close()


def _header_prefix(text: str) -> bool:
    """Whether ``text`` (a first line) is the start of the header, as a killed writer leaves it."""
    names = ",".join(part.strip() for part in text.strip().split(","))
    return HEADER_LINE.strip().startswith(names)


def _check(held: tuple[int, list[str]], where: Path, header_seen: bool) -> ProfileRow:
    """Validate the header (returned as a dummy row) or a data row."""
    line, fields = held
    if not header_seen:
        names = tuple(f.strip() for f in fields)
        if names != PROFILE_CSV_COLUMNS:
            shown = ",".join(fields)[:200]
            raise InputError(
                where, f"line {line}", f"expected the profile CSV header {HEADER_LINE.strip()!r}, got {shown!r}"
            )
        return ProfileRow(0.0, "", "", 0, "", "", 0.0, "", line)
    return _row(fields, where, line)


def read_profile_csv(path: str | Path) -> list[ProfileRow]:
    """All rows of a profile CSV (see ``iter_profile_rows``)."""
    return list(iter_profile_rows(path))
