"""A tiny progress bar on stderr for long CLI work (no third-party dependency).

Shown only when all three hold: the caller enables it (not ``--quiet``, not ``--json``),
the stream is a terminal, and the work has already taken longer than ``delay`` seconds
(so quick commands print nothing and their output stays byte-identical in scripts).
When hidden, ``advance``/``note`` cost one attribute update and no thread is started:
a caller can advance it per item in a loop without measuring first.

Drawing happens on a daemon thread, so a single long item (one large trace) still
shows the bar and the elapsed time; the line is erased when the block ends, leaving
the terminal as it was.

A command's *fallback* bar (``fallback=True``: :mod:`my_utils.core.cli.command_progress`
starts one for every command) shows only the command and its elapsed time, and steps aside
while any other bar is drawing, so a command without a bar of its own still says it is
working, and one with its own shows only that.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterator
from typing import IO

__all__ = ["Progress", "progress"]

_REFRESH_S = 0.1
_BAR_WIDTH = 24
# visible bars of a command's own (not fallback) now running: a fallback bar draws only while none is
_OWN_BARS = [0]
_OWN_LOCK = threading.Lock()


class Progress:
    """Counts finished units of work; draws itself only when its stream is a live terminal."""

    def __init__(self, total: int | None, label: str, *, stream: IO[str] | None = None,
                 visible: bool = False, delay: float = 1.0, fallback: bool = False) -> None:
        self.fallback = fallback
        self._counted = False  # counted among the command's own bars (_OWN_BARS) while it runs
        self.total = total
        self.label = label
        self.done = 0
        self.text = ""
        self._stream = stream
        self._visible = visible
        self._delay = delay
        self._start = time.monotonic()
        self._drawn = False
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @property
    def visible(self) -> bool:
        """True when this bar may draw (enabled and on a terminal), whether or not it has yet."""
        return self._visible

    def advance(self, n: int = 1) -> None:
        """Record ``n`` more finished units."""
        self.done += n

    def note(self, text: str) -> None:
        """Show ``text`` (e.g. the file being read) after the counts; replaces the previous note."""
        self.text = text

    def render(self, width: int = 80) -> str:
        """The bar as one line of at most ``width`` characters (no control characters)."""
        elapsed = time.monotonic() - self._start
        if self.fallback:
            return "".join(ch if ch.isprintable() else "?" for ch in f"{self.label}: working {elapsed:.0f}s")[
                : max(10, width - 1)]
        if self.total:
            frac = min(1.0, self.done / self.total)
            filled = int(frac * _BAR_WIDTH)
            head = (f"{self.label} [{'#' * filled}{'.' * (_BAR_WIDTH - filled)}] "
                    f"{self.done}/{self.total} {elapsed:.0f}s")
        else:
            head = f"{self.label} {self.done} done {elapsed:.0f}s"
        line = f"{head} {self.text}" if self.text else head
        # names can carry newlines or escapes; never let them move the cursor
        line = "".join(ch if ch.isprintable() else "?" for ch in line)
        return line[: max(10, width - 1)]

    # -- drawing (only when visible) ------------------------------------------------

    def _start_drawing(self) -> None:
        if self._visible and not self.fallback:
            with _OWN_LOCK:
                _OWN_BARS[0] += 1
            self._counted = True
        if self._visible:
            self._thread = threading.Thread(target=self._loop, name="my_utils-progress", daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        if self._stop.wait(self._delay):
            return
        while not self._stop.is_set():
            self._draw()
            self._stop.wait(_REFRESH_S)

    def _draw(self) -> None:
        stream = self._stream
        if stream is None:
            return
        try:
            # a fresh pty (and some CI consoles) report 0 columns: assume the classic 80
            width = os.get_terminal_size(stream.fileno()).columns or 80
        except (OSError, ValueError, AttributeError):
            width = 80
        with self._lock:
            if self._stop.is_set() or (self.fallback and _OWN_BARS[0] > 0):
                return
            try:
                stream.write("\r\x1b[K" + self.render(width))
                stream.flush()
                self._drawn = True
            except (OSError, ValueError):
                # a closed or broken stderr must not end the work it reports on
                self._visible = False
                self._stop.set()

    def _finish(self) -> None:
        if self._counted:
            with _OWN_LOCK:
                _OWN_BARS[0] -= 1
            self._counted = False
        if self._thread is None:
            return
        with self._lock:
            self._stop.set()
            if self._drawn and self._stream is not None:
                with contextlib.suppress(OSError, ValueError):
                    self._stream.write("\r\x1b[K")
                    self._stream.flush()
        self._thread.join(timeout=1.0)


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


@contextlib.contextmanager
def progress(total: int | None, label: str, *, enabled: bool = True,
             stream: IO[str] | None = None, delay: float = 1.0, fallback: bool = False) -> Iterator[Progress]:
    """Yield a :class:`Progress` for a block of work; it draws on ``stream`` (stderr) after ``delay`` s.

    ``total`` is the number of units (``None`` when unknown: the bar then counts up).
    Pass ``enabled=False`` for ``--quiet`` or ``--json``. Nothing is drawn when the
    stream is not a terminal, and the line is erased when the block ends. ``fallback``: a
    command's elapsed time only, drawn while no other bar is (module docstring).
    """
    out = sys.stderr if stream is None else stream
    bar = Progress(total, label, stream=out, visible=enabled and _is_terminal(out), delay=delay, fallback=fallback)
    bar._start_drawing()
    try:
        yield bar
    finally:
        bar._finish()
