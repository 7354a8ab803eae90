"""The step log: packed per-step records beside a profile CSV, rendered into that CSV off the training thread.

Why it exists: formatting a step's START/END rows as CSV text costs ~70 % of the persisted
timer pair (measured in ``bench/bench_timer.py``), and it has to happen somewhere. The training
thread only packs the step (a slice, an ``array`` and a join, all in C) and appends the record with one
``os.write`` to ``profile_rank_<r>.steplog``: once ``step()`` returns, the step is in the kernel
and survives a kill -9. The CSV text is rendered from the log by a helper process
(``step_log_render``), by ``flush()``/``close()``, by the next process that opens the same log,
or by a reader that calls :func:`sync_profile_csv`; every renderer goes through :class:`StepLogRenderer`.

File layout (little-endian): a 64-byte header (magic, version, then the *render state*: the
log offset rendered so far and the CSV size right after that render), then records. A record
is ``RECORD_HEAD`` (a magic, total size, kind and flags, step, base_ns) followed by its body:

* ``KIND_TIMER``: ``TIMER_HEAD`` (events, name bytes), the timer head (tag and machine id
  with their byte counts), the event names (``pack_names``), one int64 per event (a start's
  ``perf_counter_ns``, or ``~perf_counter_ns`` for a stop), then with ``FLAG_CUDA`` one float64
  of CUDA milliseconds per region (NaN = none). Depths and parents follow from the nesting.
* ``KIND_TEXT``: complete, formatted CSV lines (``GlobalLogger.log_profile_event``), so that
  explicit rows keep their place between timer rows.

Exactly-once rendering: a render holds ``flock`` on the CSV, appends the rows in one write,
then stores (log offset, CSV size) in the header. A renderer killed between the two leaves CSV
bytes beyond the stored size; the next render cuts them off and renders those records again.
"""

from __future__ import annotations

import logging
import math
import os
import struct
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from my_utils.core.errors import InputError
from my_utils.core.profile_csv import HEADER_LINE
from my_utils.core.safe_io import check_regular, utf8_text
from my_utils.core.timer_rows import format_step_rows

try:
    import fcntl
except ImportError:  # no flock (Windows): GlobalLogger writes the CSV directly (mode "direct")
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "HEADER_SIZE",
    "KIND_TEXT",
    "KIND_TIMER",
    "StepLogRenderer",
    "encode_text",
    "encode_timer_step",
    "pack_names",
    "regions_of",
    "steplog_path",
    "sync_profile_csv",
    "timer_head",
]

_log = logging.getLogger(__name__)

MAGIC = b"MYUTSLOG"
VERSION = 1
HEADER_SIZE = 64
_STATE = struct.Struct("<QQ")  # rendered log offset, CSV size after that render
_STATE_AT = 16
RECORD_HEAD = struct.Struct("<4sIIqq")  # magic, total size, kind | flags, step, base_ns
RECORD_MAGIC = b"\x93SLR"  # lets a renderer find the next record after a torn one
TIMER_HEAD = struct.Struct("<II")  # events, name bytes (then the timer head: tag and machine id)
KIND_TIMER = 1
KIND_TEXT = 2
FLAG_CUDA = 0x200
_MAX_RECORD = 64 << 20  # a larger size field is corruption, not a step
_MAX_BATCH = 8 << 20  # bytes of log rendered per CSV write

_LP = struct.Struct("<I")


def steplog_path(csv_path: str | os.PathLike[str]) -> Path:
    """``profile_rank_0.csv`` -> ``profile_rank_0.steplog`` (no ``.csv`` in the name: CSV globs skip it)."""
    path = Path(csv_path)
    return path.with_name(path.stem + ".steplog")


def new_header(csv_size: int) -> bytes:
    """The 64-byte header of an empty log whose CSV is ``csv_size`` bytes long."""
    head = MAGIC + struct.pack("<II", VERSION, 0) + _STATE.pack(HEADER_SIZE, csv_size)
    return head.ljust(HEADER_SIZE, b"\0")


# -- encoding (training thread) ----------------------------------------------------------


def pack_names(keys: list[Any]) -> bytes:
    """The names of a step's events (``""`` for stops), packed once and reused while steps look alike.

    First byte 0: the names joined by NUL; 1: each name length-prefixed (a name holds a NUL).
    """
    try:
        joined = "\0".join(keys)
    except TypeError:  # a non-str name: written as its str(), like the CSV would show it
        keys = [str(x) for x in keys]
        joined = "\0".join(keys)
    if joined.count("\0") == len(keys) - 1 or not keys:
        return b"\0" + joined.encode("utf-8", "surrogatepass")
    parts = [x.encode("utf-8", "surrogatepass") for x in keys]
    return b"\1" + b"".join(_LP.pack(len(p)) + p for p in parts)


def encode_timer_step(
    ev: list[Any], names: bytes, cuda_ms: list[float | None] | None, step: int, base_ns: int, head: bytes
) -> bytes:
    """One ``KIND_TIMER`` record of the events ``ev`` (see ``MyTimer``), ``names = pack_names(ev[0::2])``.

    ``head`` is ``timer_head(tag, machine_id)``. This is the per-step cost of the persisted path
    on the training thread, so it is a slice, an ``array`` and one join, all in C.
    """
    body = array("q", ev[1::2]).tobytes()
    flags = KIND_TIMER
    if cuda_ms is not None:
        flags |= FLAG_CUDA
        body += array("d", [math.nan if v is None else v for v in cuda_ms]).tobytes()
    size = RECORD_HEAD.size + TIMER_HEAD.size + len(head) + len(names) + len(body)
    return b"".join((RECORD_HEAD.pack(RECORD_MAGIC, size, flags, step, base_ns), TIMER_HEAD.pack(len(ev) >> 1,
                                                                                                 len(names)),
                     head, names, body))


def regions_of(ev: list[Any]) -> list[list[Any]]:
    """Regions ``[name, depth, start_ns, end_ns, position in ev]`` of a step's events, in start order."""
    regions: list[list[Any]] = []
    open_regions: list[list[Any]] = []
    for i in range(0, len(ev), 2):
        t = ev[i + 1]
        if t >= 0:
            region = [ev[i], len(open_regions), t, 0, i]
            open_regions.append(region)
            regions.append(region)
        elif open_regions:
            open_regions.pop()[3] = ~t
        else:
            raise ValueError(f"event {i // 2} stops a region but none is open")
    if open_regions:
        raise ValueError(f"{len(open_regions)} region(s) are still open at the end of the step")
    return regions


def timer_head(tag: str, machine_id: str) -> bytes:
    """The tag and machine id bytes of a timer's records, with their lengths in the first 4 bytes."""
    t = tag.encode("utf-8", "surrogatepass")[:0xFFFF]
    m = machine_id.encode("utf-8", "surrogatepass")[:0xFFFF]
    return struct.pack("<HH", len(t), len(m)) + t + m


def encode_text(text: str) -> bytes:
    """One ``KIND_TEXT`` record holding complete CSV lines."""
    data = text.encode("utf-8", "surrogatepass")
    return RECORD_HEAD.pack(RECORD_MAGIC, RECORD_HEAD.size + len(data), KIND_TEXT, 0, 0) + data


# -- decoding (renderers) ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Bad:
    offset: int
    what: str


def _decode_timer(data: bytes, at: int, end: int, flags: int) -> tuple[list[list[Any]], list[float | None] | None,
                                                                     str, str]:
    n, blob_len = TIMER_HEAD.unpack_from(data, at)
    at += TIMER_HEAD.size
    tag_len, mid_len = struct.unpack_from("<HH", data, at)
    at += 4
    tag = data[at:at + tag_len].decode("utf-8", "surrogatepass")
    at += tag_len
    mid = data[at:at + mid_len].decode("utf-8", "surrogatepass")
    at += mid_len
    blob = data[at:at + blob_len]
    at += blob_len
    if not blob or blob[0] not in (0, 1):
        raise ValueError("expected a names block")
    if blob[0] == 1:
        names: list[str] = []
        pos = 1
        while pos < len(blob):
            (k,) = _LP.unpack_from(blob, pos)
            names.append(blob[pos + 4:pos + 4 + k].decode("utf-8", "surrogatepass"))
            pos += 4 + k
    else:
        names = blob[1:].decode("utf-8", "surrogatepass").split("\0") if n else []
    times = array("q")
    times.frombytes(data[at:at + 8 * n])
    at += 8 * n
    cuda: list[float | None] | None = None
    if flags & FLAG_CUDA:
        values = array("d")
        values.frombytes(data[at:at + 4 * (n - n % 2)])
        at += 4 * (n - n % 2)
        cuda = [None if math.isnan(v) else v for v in values]
    if len(names) != n or len(times) != n or at != end:
        raise ValueError(f"expected {n} events, found {len(names)} names and {len(times)} times")
    ev: list[Any] = [x for pair in zip(names, times, strict=True) for x in pair]
    regions = regions_of(ev)
    if cuda is not None and len(cuda) != len(regions):
        raise ValueError(f"expected {len(regions)} CUDA times, found {len(cuda)}")
    return regions, cuda, tag, mid


def render_records(data: bytes, caches: dict[str, dict[tuple[Any, ...], tuple[str, str, str, str]]]
                   ) -> tuple[str, int, _Bad | None]:
    """CSV text of the complete records in ``data``, the bytes they used, and the first bad record.

    An incomplete last record (a write in flight) is left for later. A malformed record (one
    cut short by a failed write, with later records behind it) is skipped up to the next
    record magic, so one bad write loses one step, not the rest of the run.
    """
    out: list[str] = []
    first_bad: _Bad | None = None
    at = 0
    total = len(data)
    while at + RECORD_HEAD.size <= total:
        magic, size, flags, step, base_ns = RECORD_HEAD.unpack_from(data, at)
        kind = flags & 0xFF
        if magic != RECORD_MAGIC or size < RECORD_HEAD.size or size > _MAX_RECORD or kind not in (KIND_TIMER,
                                                                                                  KIND_TEXT):
            following = data.find(RECORD_MAGIC, at + 1)
            if following < 0:
                break  # skipped (and reported) once a record follows; until then the log keeps them
            first_bad = first_bad or _Bad(at, f"expected a step record, found {following - at} unreadable bytes; "
                                              "they are skipped")
            at = following
            continue
        if at + size > total:
            break
        body = at + RECORD_HEAD.size
        try:
            if kind == KIND_TEXT:
                out.append(data[body:at + size].decode("utf-8", "surrogatepass"))
            else:
                regions, cuda, tag, mid = _decode_timer(data, body, at + size, flags)
                cache = caches.setdefault(tag, {})
                if len(cache) > 8192:
                    cache.clear()
                out.append(format_step_rows(regions, cuda, step, base_ns, mid, tag, cache))
        except (ValueError, struct.error, UnicodeDecodeError) as exc:
            first_bad = first_bad or _Bad(at, f"expected a well-formed step record ({exc}); it is skipped")
            following = data.find(RECORD_MAGIC, at + 1, at + size)  # a torn record holds the next one's start
            at = following if following >= 0 else at + size
            continue
        at += size
    return "".join(out), at, first_bad


# -- rendering ---------------------------------------------------------------------------


class StepLogRenderer:
    """Renders the pending records of a step log into its CSV, exactly once, under ``flock``.

    Any number of renderers (the helper process, the training process at flush/close, a reader)
    may work on the same pair of files; the lock and the state in the log header keep every
    record in the CSV once and in log order. OS errors propagate to the caller.
    """

    def __init__(self, log_path: str | os.PathLike[str], csv_path: str | os.PathLike[str]) -> None:
        self.log_path = Path(log_path)
        self.csv_path = Path(csv_path)
        self._log_fd = os.open(self.log_path, os.O_RDWR)
        self._csv_fd: int | None = None
        self._caches: dict[str, dict[tuple[Any, ...], tuple[str, str, str, str]]] = {}
        self._bad_reported: int | None = None
        self.rendered_records_bytes = 0

    def _csv(self) -> int:
        """The CSV descriptor, reopened (and created with its header) if the path changed."""
        fd = self._csv_fd
        try:
            same = fd is not None and os.stat(self.csv_path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if not same:
            if fd is not None:
                os.close(fd)
                self._csv_fd = None
            self.csv_path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.csv_path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            self._csv_fd = fd
        assert fd is not None
        return fd

    def pending(self) -> bool:
        """Whether the log holds bytes past the rendered offset (no lock; a hint for polling)."""
        state = os.pread(self._log_fd, _STATE.size, _STATE_AT)
        if len(state) < _STATE.size:
            return False  # being restarted by a new writer this very moment
        (done, _) = _STATE.unpack(state)
        return os.fstat(self._log_fd).st_size > done

    def render(self) -> int:
        """Render every complete pending record; return the number of log bytes rendered."""
        rendered = 0
        while True:
            step_bytes = self._render_batch()
            rendered += step_bytes
            if step_bytes < _MAX_BATCH // 2:
                return rendered

    def _render_batch(self) -> int:
        csv_fd = self._csv()
        fcntl.flock(csv_fd, fcntl.LOCK_EX)
        try:
            head = os.pread(self._log_fd, HEADER_SIZE, 0)
            if len(head) < HEADER_SIZE or head[:8] != MAGIC:
                return 0  # reset or created by an opener right now; nothing of ours to render
            done, csv_size = _STATE.unpack_from(head, _STATE_AT)
            actual = os.fstat(csv_fd).st_size
            if actual > csv_size:
                if csv_size == 0 and actual >= len(HEADER_LINE):
                    csv_size = actual  # an older writer's file: keep it whole
                else:
                    # rows of a renderer killed before it stored its state: they are rendered again
                    _log.debug("%s: cutting %d bytes written by an interrupted render", self.csv_path,
                               actual - csv_size)
                    os.ftruncate(csv_fd, csv_size)
            elif actual < csv_size:
                csv_size = actual  # the CSV was truncated or replaced: append to what is there
            if csv_size == 0:
                _write_all(csv_fd, HEADER_LINE.encode())
                csv_size = len(HEADER_LINE)
                os.pwrite(self._log_fd, _STATE.pack(done, csv_size), _STATE_AT)
            size = os.fstat(self._log_fd).st_size
            if size <= done:
                return 0
            data = os.pread(self._log_fd, min(size - done, _MAX_BATCH), done)
            text, used, bad = render_records(data, self._caches)
            if used == 0 and bad is None and len(data) == _MAX_BATCH:
                data = os.pread(self._log_fd, size - done, done)  # one record larger than a batch
                text, used, bad = render_records(data, self._caches)
            if bad is not None and self._bad_reported != done + bad.offset:
                self._bad_reported = done + bad.offset
                _log.error("%s:byte %d: %s", self.log_path, done + bad.offset, bad.what)
            if used:
                try:
                    encoded = text.encode("utf-8")
                except UnicodeEncodeError:  # text records of an older writer: never invalid UTF-8 in the CSV
                    encoded = utf8_text(text).encode("utf-8")
                _write_all(csv_fd, encoded)
                os.pwrite(self._log_fd, _STATE.pack(done + used, csv_size + len(encoded)), _STATE_AT)
            return used
        finally:
            fcntl.flock(csv_fd, fcntl.LOCK_UN)

    def close(self) -> None:
        """Close both descriptors."""
        for fd in (self._log_fd, self._csv_fd):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._csv_fd = None
        self._log_fd = -1


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def sync_profile_csv(csv_path: str | os.PathLike[str]) -> bool:
    """Render the step log beside ``csv_path`` into it, if there is one; True if anything was rendered.

    For readers: a profile CSV whose writer was killed (or is still running) may have steps in
    its ``.steplog`` that are not in the CSV yet. Never raises for an OS problem (a read-only
    copy of a log folder is read as it is).
    """
    log_path = steplog_path(csv_path)
    if fcntl is None or not log_path.exists():
        return False
    try:  # a FIFO or device under either name would block the render: the reader refuses it instead
        check_regular(log_path)
        check_regular(Path(csv_path))
    except InputError as exc:
        _log.debug("not rendering %s: %s", log_path, exc)
        return False
    try:
        renderer = StepLogRenderer(log_path, csv_path)
    except OSError as exc:
        _log.debug("cannot open %s to bring %s up to date (%s)", log_path, csv_path, exc)
        return False
    try:
        return renderer.render() > 0
    except OSError as exc:
        _log.warning("cannot render the pending steps of %s into %s (%s); the CSV may lack the last steps",
                     log_path, csv_path, exc.strerror or exc)
        return False
    finally:
        renderer.close()


def iter_record_kinds(data: bytes) -> Iterator[tuple[int, int]]:
    """(kind, size) of each complete record in ``data`` (for tests and diagnostics)."""
    at = 0
    while at + RECORD_HEAD.size <= len(data):
        _, size, flags, _, _ = RECORD_HEAD.unpack_from(data, at)
        if size < RECORD_HEAD.size or at + size > len(data):
            return
        yield flags & 0xFF, size
        at += size
