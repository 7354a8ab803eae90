"""Append-only writer of a profile CSV: one ``write(2)`` per batch, safe across threads and kills.

``GlobalLogger`` writes through the step log (``step_log_writer``); this writer creates the CSV
with its header (cutting a torn tail an older writer left) and is the whole path in the
``direct`` mode (``MYUTILS_PROFILE_CSV=direct``), where rows are formatted in ``step()``.

Each batch of complete lines goes to the kernel in one ``os.write`` on an ``O_APPEND``
descriptor, under a lock, so rows from several threads never interleave and a SIGKILL loses
at most the batch in flight (whatever part of it reached the file is a torn tail the reader
skips). Opening an existing file that ends in a torn record (a previous run was killed) cuts
that record off first, so new rows never glue onto it.

Environment failures (disk full, file removed, permission lost) never raise into the caller:
the first one is reported through ``logging`` and later batches are retried silently.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable
from pathlib import Path

from my_utils.core.profile_csv import HEADER_LINE
from my_utils.core.safe_io import utf8_text

__all__ = ["ProfileCsvWriter"]

_log = logging.getLogger(__name__)


class ProfileCsvWriter:
    """Appends pre-formatted profile CSV lines to ``path`` (created with its header if new)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._failed = False  # an OSError was reported; report the next only after a success
        self.dropped_batches = 0

    # -- opening -----------------------------------------------------------------------

    def _open(self) -> int:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size == 0:
                _write_all(fd, HEADER_LINE.encode())
            else:
                self._repair_tail(fd, size)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _repair_tail(self, fd: int, size: int) -> None:
        """Cut a torn last record (no final newline) left by a killed writer."""
        with open(self.path, "rb") as fh:
            fh.seek(max(0, size - 65536))
            tail = fh.read()
        if tail.endswith(b"\n"):
            return
        cut = tail.rfind(b"\n")
        keep = size - len(tail) + cut + 1 if cut >= 0 else 0
        if keep == 0 and size > 65536:
            # no newline in the last 64 KiB: not a torn row of ours; keep the data, end the line
            _write_all(fd, b"\n")
            return
        _log.warning("%s: removing a torn last record (%d bytes) left by an interrupted writer", self.path, size - keep)
        os.ftruncate(fd, keep)
        if keep == 0:
            _write_all(fd, HEADER_LINE.encode())

    def open(self) -> bool:
        """Create the file (with its header) now instead of at the first write; False on OSError."""
        return self.write_text("", force_open=True)

    # -- writing -----------------------------------------------------------------------

    def write_text(self, text: str, *, force_open: bool = False) -> bool:
        """Append ``text`` (complete lines) in one write; return False if it could not be written."""
        if not text and not force_open:
            return True
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate (a name from os.fsdecode): \xNN, never invalid UTF-8
            data = utf8_text(text).encode("utf-8")
        with self._lock:
            try:
                if self._fd is None:
                    self._fd = self._open()
                if data:
                    _write_all(self._fd, data)
            except OSError as exc:
                self.dropped_batches += 1
                if not self._failed:
                    self._failed = True
                    _log.error(
                        "cannot write profile rows to %s (%s); rows are dropped until writing works again",
                        self.path,
                        exc.strerror or exc,
                    )
                self._close_fd()
                return False
            if self._failed:
                self._failed = False
                _log.warning("writing profile rows to %s works again", self.path)
            return True

    def write_lines(self, lines: Iterable[str]) -> bool:
        """Append complete lines (each ending with a newline) as one write."""
        return self.write_text("".join(lines))

    def close(self) -> None:
        """Close the descriptor (a later write reopens the file)."""
        with self._lock:
            self._close_fd()

    def _close_fd(self) -> None:
        # callers hold self._lock
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.close(fd)
            except OSError:
                pass


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
