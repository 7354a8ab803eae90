"""Worker processes that die with their parent, and a SIGTERM that cleans up like Ctrl-C.

A pool worker blocked on its queue, or busy with a 50 MB trace, does not notice that the
process that started it was killed: it kept running for minutes, holding the caller's
stdout/stderr (a shell pipe or ``subprocess`` waiting for EOF waited with it) and the
resource tracker. :func:`die_with_parent` makes a worker end with its owner: on Linux the
kernel sends it SIGKILL when its parent dies (``prctl(PR_SET_PDEATHSIG)``); everywhere a
watchdog thread checks once a second that the owner process (pid and start time) still
runs, which also covers a Dask worker whose parent is multiprocessing's fork server.

SIGTERM's default action ends Python without running ``finally`` blocks: temporary outputs
and scratch folders stayed. :func:`sigterm_exits` turns it into ``SystemExit(143)`` for the
duration of a block, so the same clean-up as for Ctrl-C (``KeyboardInterrupt``) runs.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from my_utils.profiling.providers.scratch import owner_alive

__all__ = ["die_with_parent", "sigterm_exits"]

_PR_SET_PDEATHSIG = 1
WATCH_INTERVAL_S = 1.0


def die_with_parent(owner: str, parent: int | None = None) -> None:
    """End this process (SIGKILL) when its parent dies and ``os._exit`` when the ``owner`` process is gone.

    ``owner`` is :func:`~my_utils.profiling.providers.scratch.owner_token` of the process that
    asked for the work; ``parent``, when given, is the pid this process must have as its parent
    (if it already has another, the parent died before the kernel could be told: exit now).
    """
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if (parent is not None and os.getppid() != parent) or not owner_alive(owner):
        os._exit(1)
    threading.Thread(target=_watch, args=(owner,), name="myutils-owner-watchdog", daemon=True).start()


def _watch(owner: str) -> None:
    while True:
        time.sleep(WATCH_INTERVAL_S)
        if not owner_alive(owner):
            os._exit(1)  # nobody is left to read the results: no clean-up to wait for


def _raise_exit(signum: int, _frame: Any) -> None:
    # a second SIGTERM during the clean-up ends the process at once (the default action)
    signal.signal(signum, signal.SIG_DFL)
    raise SystemExit(128 + signum)


@contextlib.contextmanager
def sigterm_exits() -> Iterator[None]:
    """Inside the block, SIGTERM raises ``SystemExit(143)`` in the main thread (``finally`` blocks run).

    Does nothing outside the main thread or when SIGTERM already has a handler (the
    application's own wins); the previous handler is restored when the block ends.
    """
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return
    signal.signal(signal.SIGTERM, _raise_exit)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
