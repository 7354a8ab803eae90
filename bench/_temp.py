"""Temporary folders that are gone when a bench ends, also on Ctrl-C or ``kill`` (SIGTERM).

``tempfile.TemporaryDirectory`` removes its folder when the ``with`` block unwinds; Ctrl-C
unwinds it (KeyboardInterrupt), SIGTERM does not by default. :func:`bench_tempdir` turns
SIGTERM into ``SystemExit`` while a folder is open so the same unwinding removes it.
"""

from __future__ import annotations

import signal
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType


def _exit_on_sigterm(signum: int, frame: FrameType | None) -> None:
    sys.exit(128 + signum)


@contextmanager
def bench_tempdir(prefix: str) -> Iterator[Path]:
    """A fresh temporary folder, removed with everything in it when the block ends in any way."""
    previous = signal.getsignal(signal.SIGTERM)
    replaced = previous in (signal.SIG_DFL, None)
    if replaced:
        signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
            yield Path(tmp)
    finally:
        if replaced:
            signal.signal(signal.SIGTERM, previous)
