"""Worker processes that die with their parent, and a SIGTERM that cleans up like Ctrl-C.

A pool worker blocked on its queue, or busy with a 50 MB trace, does not notice that the
process that started it was killed: it kept running for minutes, holding the caller's
stdout/stderr (a shell pipe or ``subprocess`` waiting for EOF waited with it) and the
resource tracker. :func:`die_with_parent` makes a worker end with its owner: on Linux the
kernel sends it SIGKILL when its parent dies (``prctl(PR_SET_PDEATHSIG)``); everywhere a
watchdog thread checks once a second that the owner process (pid and start time) still
runs, which also covers a Dask worker whose parent is multiprocessing's fork server.

SIGTERM's default action ends Python without running ``finally`` blocks: temporary outputs
and scratch folders stayed. :func:`sigterm_exits` turns it into :class:`Terminated` (a
``SystemExit(143)``) for the duration of a block, so the same clean-up as for Ctrl-C
(``KeyboardInterrupt``) runs.

:func:`spawn_pool` is a process pool whose workers do both (and leave Ctrl-C in a terminal to
the caller); :func:`stop_pool` ends its workers at once when their results are no longer
wanted. ``trace``, ``analyze``, ``diff`` and ``stragglers`` run their process pools with them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from my_utils.core.errors import Terminated
from my_utils.core.scratch import owner_alive, owner_token

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

__all__ = ["Terminated", "die_with_parent", "join_or_kill", "signals_deferred", "sigterm_exits", "spawn_pool",
           "stop_pool", "worker_init"]

_PR_SET_PDEATHSIG = 1
WATCH_INTERVAL_S = 1.0


def die_with_parent(owner: str, parent: int | None = None) -> None:
    """End this process (SIGKILL) when its parent dies and ``os._exit`` when the ``owner`` process is gone.

    ``owner`` is :func:`~my_utils.core.scratch.owner_token` of the process that
    asked for the work; ``parent``, when given, is the pid this process must have as its parent
    (if it already has another, the parent died before the kernel could be told: exit now).
    """
    if sys.platform.startswith("linux"):
        import ctypes  # here: ~3.5 ms that a command importing this module for sigterm_exits does not need

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
    raise Terminated(128 + signum)


@contextlib.contextmanager
def sigterm_exits() -> Iterator[None]:
    """Inside the block, SIGTERM raises :class:`Terminated` (exit 143) in the main thread (``finally`` blocks run).

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


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold Ctrl-C (SIGINT) and SIGTERM inside the block; the first one held acts as the block ends.

    For work that cannot be stopped half-way, such as starting a local Dask cluster: stopped
    while its worker processes were still starting, nothing closed them, and they went on
    creating folders in the scratch folder as it was being removed. Does nothing outside the
    main thread.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []

    def hold(signum: int, _frame: Any) -> None:
        held.append(signum)

    previous: dict[int, Any] = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        signal.signal(sig, hold)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if held:
            handler = previous[held[0]]
            if callable(handler):  # KeyboardInterrupt, Terminated, or the application's own
                handler(held[0], None)
            elif handler == signal.SIG_DFL:  # the default action, now
                os.kill(os.getpid(), held[0])


def remove_scratch(folder: str | os.PathLike[str]) -> None:
    """Remove a scratch folder whole; Ctrl-C or SIGTERM during the removal acts once it is done.

    Interrupted half-way, the removal left the rest of the folder in ``$TMPDIR`` for the next run to
    sweep; a command stopped while it cleans up should leave nothing.
    """
    import shutil

    with signals_deferred():
        shutil.rmtree(folder, ignore_errors=True)


def worker_init(owner: str, parent: int) -> None:
    """Initializer of a pool worker: die with the parent; Ctrl-C in a terminal is the parent's to handle."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(owner, parent)


def spawn_pool(workers: int) -> ProcessPoolExecutor:
    """A process pool of ``workers`` spawned processes that end with this one (:func:`worker_init`).

    Spawned, not forked: a forked copy of a process holding threads (Dask, torch, a logger) can deadlock.
    The workers never re-run the caller's main script (:mod:`~my_utils.core.mainless`), so a script
    without an ``if __name__ == "__main__":`` guard works too.
    """
    from concurrent.futures import ProcessPoolExecutor

    from my_utils.core.mainless import mainless_context

    return ProcessPoolExecutor(max_workers=workers, mp_context=mainless_context(),
                               initializer=worker_init, initargs=(owner_token(), os.getpid()))


def join_or_kill(processes: Iterable[Any], timeout: float) -> None:
    """Wait up to ``timeout`` seconds in all for ``processes`` (``multiprocessing`` ones) to end; kill the rest."""
    deadline = time.monotonic() + timeout
    for proc in processes:
        with contextlib.suppress(OSError, ValueError, AttributeError, AssertionError):
            proc.join(timeout=max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=2)


def stop_pool(pool: ProcessPoolExecutor) -> None:
    """End the workers of ``pool`` now and shut it down (their results are no longer wanted).

    A worker ended while it was sending a result leaves half a message in the result pipe, and
    the pool's manager thread then waits in ``recv`` for the rest for ever (``shutdown`` and the
    interpreter's exit join that thread: Ctrl-C hung ``diff`` for good, about 1 run in 25).
    This process holds the pipe's last write end once the workers are gone: closing it turns
    the wait into EOF, which the manager thread handles as a broken pool and ends.
    """
    processes = list((getattr(pool, "_processes", None) or {}).values())
    for proc in processes:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            proc.terminate()
    join_or_kill(processes, 3.0)
    writer = getattr(getattr(pool, "_result_queue", None), "_writer", None)
    with contextlib.suppress(OSError, AttributeError):
        if writer is not None:
            writer.close()
    pool.shutdown(wait=True, cancel_futures=True)
