"""Tell a file's kind by its content, not its name (``analyze PATH...``, ``open_run``).

Each check reuses the detection of the reader that owns the format (``providers/*``,
``ncu.csv_read``, ``nsys.schema``), so a file is called a kind exactly when that reader
would take it. The order goes from the most to the least specific: magic bytes (SQLite,
``NVR``, pickle, gzip, marshal), then JSON (events, NCCL Inspector records, traces), then CSV
headers, then the text logs, whose markers can sit after pages of a program's own output.
Only the head of a file is read (:data:`HEAD_BYTES`, more for text logs), never the whole.

Two kinds are told by their name, because their content is a binary format this package
cannot read at all: an Nsight Systems report (``.nsys-rep``, ``.qdrep``); everything else is
content only, so a trace named ``.txt`` is still a trace and a log named ``.json`` a log.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

from my_utils.core.errors import InputError
from my_utils.core.safe_io import open_regular
from my_utils.profiling.formats.kinds import FileKind

__all__ = ["HEAD_BYTES", "Sniffed", "sniff"]

#: Bytes read to tell binary and JSON formats apart.
HEAD_BYTES = 1 << 16
#: Bytes read for the text logs (job logs start with the launcher's and the program's own output).
TEXT_HEAD_BYTES = 1 << 20
SQLITE_MAGIC = b"SQLite format 3\x00"
NCU_REP_MAGIC = b"NVR\x00"
NSYS_REP_SUFFIXES = (".nsys-rep", ".qdrep")
#: Tables of which an nsys export has at least one, whatever its exporter's era.
NSYS_TABLES = frozenset({"StringIds", "TARGET_INFO_SESSION_START_TIME", "CUPTI_ACTIVITY_KIND_KERNEL", "NVTX_EVENTS",
                         "META_DATA_EXPORT", "EXPORT_META_DATA", "TARGET_INFO_GPU", "CUPTI_ACTIVITY_KIND_RUNTIME"})

_DIST_RANK = re.compile(rb'"distributedInfo"\s*:\s*\{[^{}]*?"rank"\s*:\s*(\d+)')
_MERGED = re.compile(rb'"name"\s*:\s*"process_name"[^{}]*"args"\s*:\s*\{\s*"name"\s*:\s*"rank \d+')
_MACHINE_RANK = re.compile(r"_rank(\d+)$")
_RUN_LOG = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} \[(?:\S+ )?rank (\d+)/\d+\] ")
_NSYS_CONSOLE = ("cuda_gpu_kern_sum", "cuda_api_sum", "CUDA Kernel Statistics", "CUDA API Statistics",
                 "Generating '", "nsys profile")


@dataclass(frozen=True)
class Sniffed:
    """A file, its kind, the rank its content or name gives (None: none, or several inside) and where it came from.

    ``detail`` says what else the head showed (a host, a world size, why a JSON file is no trace).
    """

    path: Path
    kind: FileKind
    rank: int | None = None
    rank_source: str = ""
    detail: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.path, Path):  # a str or another os.PathLike: the readers want a Path
            object.__setattr__(self, "path", Path(os.fspath(self.path)))


def sniff(path: str | os.PathLike[str]) -> Sniffed:
    """The kind of ``path`` (module docstring); ``InputError`` only when it cannot be read at all."""
    path = Path(os.fspath(path))
    if path.name.lower().endswith(NSYS_REP_SUFFIXES):
        return Sniffed(path, FileKind.NSYS_REP, *_name_rank(path))
    head = _head(path, HEAD_BYTES)
    if not head:
        return Sniffed(path, FileKind.UNKNOWN, detail="empty file")
    if head.startswith(SQLITE_MAGIC):
        return _sqlite(path)
    if head.startswith(NCU_REP_MAGIC):
        return Sniffed(path, FileKind.NCU_REP, *_name_rank(path))
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        if b"segments" in head or b"device_traces" in head:
            return Sniffed(path, FileKind.MEMORY_SNAPSHOT, *_name_rank(path))
        return Sniffed(path, FileKind.UNKNOWN, detail="a Python pickle that is no memory snapshot")
    if head[:2] == b"\x1f\x8b":
        head = _gunzip_head(path)
        if not head:
            return Sniffed(path, FileKind.UNKNOWN, detail="an empty gzip file")
    elif head[:1] in (b"{", b"\xfb") and head[1:2] in (b"(", b")", b"\xa8", b"\xa9"):
        return Sniffed(path, FileKind.CPROFILE, *_name_rank(path))  # a marshalled dict keyed by tuples
    if b"\x00" in head:
        return Sniffed(path, FileKind.UNKNOWN, detail="binary data")
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff")
    stripped = text.lstrip()
    if stripped[:1] in ("{", "["):
        return _json(path, head, stripped)
    first = stripped.split("\n", 1)[0].strip()
    csv = _csv(path, first, text)
    if csv is not None:
        return csv
    if len(head) == HEAD_BYTES:  # a log's markers may come after pages of program output
        text = _head(path, TEXT_HEAD_BYTES).decode("utf-8", errors="replace")
    return _text_log(path, text)


def _head(path: Path, size: int) -> bytes:
    try:
        with open_regular(path, "rb") as fh:
            return fh.read(size)
    except OSError as exc:
        raise InputError(path, None, f"a readable file ({exc.strerror or exc})") from None


def _gunzip_head(path: Path) -> bytes:
    try:
        with open_regular(path, "rb") as raw, gzip.open(raw, "rb") as fh:
            return fh.read(HEAD_BYTES)
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(path, "gzip stream", f"a readable gzip file ({exc})") from None


def _name_rank(path: Path) -> tuple[int | None, str]:
    from my_utils.profiling.formats._files import rank_from_name

    rank = rank_from_name(path)
    return (rank, "file name") if rank is not None else (None, "")


def _sqlite(path: Path) -> Sniffed:
    import sqlite3

    try:
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
        finally:
            con.close()
    except sqlite3.DatabaseError as exc:
        raise InputError(path, None, f"a readable SQLite database ({exc})") from None
    if tables & NSYS_TABLES:
        return Sniffed(path, FileKind.NSYS_SQLITE)
    shown = ", ".join(sorted(tables)[:5]) or "none"
    return Sniffed(path, FileKind.SQLITE_OTHER, detail=f"tables: {shown}")


def _json(path: Path, head: bytes, text: str) -> Sniffed:
    from my_utils.profiling.formats.nccl_inspector import looks_like_inspector

    first_line = text.split("\n", 1)[0]
    record = _json_object(first_line)
    if record is not None and looks_like_inspector(first_line):
        return Sniffed(path, FileKind.NCCL_INSPECTOR, *_name_rank(path))
    if record is not None and {"name", "value"} <= record.keys() and ("source" in record or "schema_version" in record):
        return Sniffed(path, FileKind.EVENTS_JSONL)
    if record is None and b'"findings"' in head and b'"scores"' in head and b'"schema_version"' in head:
        return Sniffed(path, FileKind.ANALYSIS_REPORT)
    if b'"traceEvents"' in head or b'"schemaVersion"' in head:
        if _MERGED.search(head[:8192]) and b'"schemaVersion"' not in head and b'"deviceProperties"' not in head:
            return Sniffed(path, FileKind.MERGED_TRACE)
        m = _DIST_RANK.search(head)
        if m is not None:
            return Sniffed(path, FileKind.KINETO_TRACE, int(m.group(1)), "distributedInfo")
        return Sniffed(path, FileKind.KINETO_TRACE, *_name_rank(path))
    if looks_like_inspector(text):
        return Sniffed(path, FileKind.NCCL_INSPECTOR, *_name_rank(path))
    return Sniffed(path, FileKind.UNKNOWN, detail="JSON that is neither a trace nor a metric-events file")


def _json_object(line: str) -> dict[str, object] | None:
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than the decoder goes: not this kind
        return None
    return value if isinstance(value, dict) else None


def _csv(path: Path, first: str, text: str) -> Sniffed | None:
    from my_utils.core.profile_csv import PROFILE_CSV_COLUMNS

    columns = [c.strip().strip('"') for c in first.split(",")]
    if tuple(columns[:len(PROFILE_CSV_COLUMNS)]) == PROFILE_CSV_COLUMNS:
        rank, source = _name_rank(path)
        if rank is None:
            rank, source = _machine_rank(text)
        return Sniffed(path, FileKind.PROFILE_CSV, rank, source)
    if {"module_name", "total_ms", "run_count"} <= set(columns):
        return Sniffed(path, FileKind.MODULE_SUMMARY, *_name_rank(path))
    return None


def _machine_rank(text: str) -> tuple[int | None, str]:
    """The rank MyTimer wrote into ``machine_id`` (``<host>_rank<r>``) on the first data row."""
    import csv
    import io

    rows = csv.reader(io.StringIO(text))
    next(rows, None)
    for row in rows:
        if len(row) > 2:
            m = _MACHINE_RANK.search(row[2])
            return (int(m.group(1)), "machine_id column") if m else (None, "")
    return None, ""


def _text_log(path: Path, text: str) -> Sniffed:
    from my_utils.profiling.formats.dcgm import looks_like_dmon
    from my_utils.profiling.formats.nccl_log import looks_like_nccl_log
    from my_utils.profiling.formats.ncu_header import is_header
    from my_utils.profiling.formats.perf_stat import looks_like_perf_stat

    lines = text.splitlines()
    if any(is_header(line) for line in lines):
        return Sniffed(path, FileKind.NCU_CSV, *_name_rank(path))
    if looks_like_dmon(text):
        return Sniffed(path, FileKind.DCGM_DMON, *_name_rank(path))
    if looks_like_nccl_log(text):
        return Sniffed(path, FileKind.NCCL_LOG, None, "per line (the ranks of each communicator)")
    if looks_like_perf_stat(text):
        return Sniffed(path, FileKind.PERF_STAT, *_name_rank(path))
    if text.lstrip()[:14].lower().startswith(("<!doctype html", "<html")):
        return Sniffed(path, FileKind.WEB_PAGE)
    m = _RUN_LOG.match(text)
    if m is not None:
        return Sniffed(path, FileKind.RUN_LOG, int(m.group(1)), "log prefix")
    if any(line.startswith("==PROF==") for line in lines[:200]):
        return Sniffed(path, FileKind.NCU_CONSOLE)
    if any(marker in text for marker in _NSYS_CONSOLE):
        return Sniffed(path, FileKind.NSYS_CONSOLE)
    return Sniffed(path, FileKind.UNKNOWN, detail="text in no format analyze knows")
