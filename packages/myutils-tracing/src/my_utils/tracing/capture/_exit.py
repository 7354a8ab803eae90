"""Closing capture windows still open at interpreter exit (one atexit hook for all controllers)."""

from __future__ import annotations

import atexit
import threading
from typing import Protocol


class _Closable(Protocol):
    def _close_at_exit(self) -> None: ...


# Strong references on purpose: a controller dropped by its owner while a window is open must
# still stop that window at exit (a profiler left running crashes torch's own exit handlers).
_open: set[_Closable] = set()
_lock = threading.Lock()
_registered = False


def _close_all() -> None:
    for controller in list(_open):
        controller._close_at_exit()


def track(controller: _Closable) -> None:
    """Remember a controller with an open window until ``untrack``."""
    global _registered
    with _lock:
        _open.add(controller)
        if not _registered:
            atexit.register(_close_all)
            _registered = True


def untrack(controller: _Closable) -> None:
    """Forget a controller whose window closed."""
    with _lock:
        _open.discard(controller)
