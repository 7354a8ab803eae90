"""The worker side of :mod:`~my_utils.profiling.formats.parallel`: calls run in batches, results packed.

A task is a *batch* of calls (several rank files): a Dask task costs ~5 ms of scheduling
and the workers' event loops whatever it does (a pool task ~0.1 ms), which is a tenth of a
small rank's parse. A batch returns one outcome per call, in call order, so results and
errors stay per call: ``("ok", packed result)`` or ``("err", exception, traceback text)``.
Without ``keep_going`` the batch raises its first error as it is (the caller stops there
anyway); with it, the error travels as a value and the batch goes on with the next call.

Results travel packed (:func:`packed`): a list of ``MetricEvent`` dataclasses pickles at ~22 µs
an event (frozen slotted dataclasses are rebuilt attribute by attribute), so event lists
travel as plain tuples (12 ms instead of 52 ms for a 2,358-event rank).
"""

from __future__ import annotations

import contextlib
import errno
import os
import pickle
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["UNSEEN_ATTR", "WORKER_ATTR", "Failed", "outcomes", "packed", "run_batch", "unpacked", "unseen"]

_EVENT_FIELDS = ("name", "value", "kind", "unit", "source", "rank", "step", "ts", "run_id", "attrs",
                 "schema_version", "extra")
#: attribute of an exception raised on a cluster's worker: which worker (address, host) it was
WORKER_ATTR = "myutils_dask_worker"
#: attribute of an ``InputError`` about a file that worker cannot read at all: why (``No such file or directory``)
UNSEEN_ATTR = "myutils_unseen"


@dataclass(frozen=True)
class Failed:
    """A call that raised, in its place among the results (``stream_many(..., keep_going=True)``)."""

    error: BaseException


class RemoteTraceback(Exception):
    """The traceback of an error raised in a worker, as text (the ``__cause__`` of that error here)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def packed(func: Callable[..., Any], *args: Any) -> Any:
    """Run ``func`` in a worker; a list of MetricEvents comes back as tuples (cheap to pickle)."""
    from my_utils.core.events import MetricEvent

    result = func(*args)
    if isinstance(result, list) and result and all(type(e) is MetricEvent for e in result):
        return ("__events__", [tuple(getattr(e, f) for f in _EVENT_FIELDS) for e in result])
    return ("__plain__", result)


def unpacked(value: Any) -> Any:
    """What :func:`packed` packed."""
    from my_utils.core.events import MetricEvent

    tag, result = value
    if tag == "__events__":
        return [MetricEvent(*row) for row in result]
    return result


def unseen(path: str) -> str | None:
    """Why this process cannot read ``path`` at all (``No such file or directory``), or None when it can."""
    try:
        os.stat(path)
    except OSError as exc:
        return exc.strerror or str(exc)
    return None if os.access(path, os.R_OK) else os.strerror(errno.EACCES)


def _name_worker(exc: BaseException) -> None:
    """Mark ``exc`` with the Dask worker (address, host) it was raised on, when it was raised on one.

    An ``InputError`` about a file this worker cannot read at all (a reader's "cannot open ...")
    is also marked with why: the caller saw that file, so the cause is the worker's view of it.
    """
    with contextlib.suppress(Exception):  # whatever happens here, the task's own error is what counts
        import socket

        from distributed import get_worker

        from my_utils.core.errors import InputError

        setattr(exc, WORKER_ATTR, f"Dask worker {get_worker().address} (host {socket.gethostname()})")
        where = getattr(exc, "where", None)
        why = unseen(where) if isinstance(exc, InputError) and isinstance(where, str) and where else None
        if why:
            setattr(exc, UNSEEN_ATTR, why)


def _portable(exc: BaseException) -> BaseException:
    """``exc`` itself when it pickles, else a RuntimeError saying what it was (a batch must come back whole)."""
    try:
        pickle.dumps(exc)
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")
    return exc


def run_batch(func: Callable[..., Any], calls: Sequence[tuple[Any, ...]], keep_going: bool = False,
              named: bool = False) -> list[tuple[Any, ...]]:
    """Task: ``func(*args)`` for each call, one outcome each; ``named``: errors say which Dask worker raised them."""
    out: list[tuple[Any, ...]] = []
    for args in calls:
        try:
            out.append(("ok", packed(func, *args)))
        except Exception as exc:
            if named:
                _name_worker(exc)
            if not keep_going:
                raise
            out.append(("err", _portable(exc), "".join(traceback.format_exception(exc))))
    return out


def outcomes(batch: list[tuple[Any, ...]]) -> list[Any]:
    """The results of a batch here: each call's value, or :class:`Failed` with its error (traceback attached)."""
    results: list[Any] = []
    for outcome in batch:
        if outcome[0] == "ok":
            results.append(unpacked(outcome[1]))
        else:
            error = outcome[1]
            error.__cause__ = RemoteTraceback(outcome[2])
            results.append(Failed(error))
    return results
