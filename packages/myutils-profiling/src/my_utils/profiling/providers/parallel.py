"""Run one parsing function over many files: in-process, local processes, or a Dask cluster.

Runs with hundreds of ranks have hundreds of trace files; each parse is independent and
returns a small list of aggregated events, so the work spreads over processes (default)
or over a Dask cluster the user names (``executor="tcp://host:8786"`` or a
``distributed.Client``; install the ``[dask]`` extra). Errors keep their type and message.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

from my_utils.core.errors import UsageError

T = TypeVar("T")

Executor = Any  # None | "serial" | "process" | "dask://..."/"tcp://..." address | distributed.Client


def run_many(func: Callable[..., T], calls: Sequence[tuple[Any, ...]], executor: Executor = None,
             max_workers: int | None = None) -> list[T]:
    """``[func(*args) for args in calls]``, spread according to ``executor``.

    ``None`` picks in-process for one call and local processes otherwise; ``"serial"``
    forces in-process; ``"process"`` forces processes; a scheduler address (``tcp://``,
    ``tls://``, ``ucx://``) or a ``distributed.Client`` runs the calls on that cluster.
    """
    if executor == "serial" or (executor is None and len(calls) <= 1):
        return [func(*args) for args in calls]
    if executor in (None, "process"):
        workers = max_workers or min(len(calls), os.cpu_count() or 1)
        if workers <= 1:
            return [func(*args) for args in calls]
        # spawn: forking a process that holds threads (dask, torch) can deadlock the child
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            futures = [pool.submit(func, *args) for args in calls]
            return [f.result() for f in futures]
    return _run_dask(func, calls, executor)


def _run_dask(func: Callable[..., T], calls: Sequence[tuple[Any, ...]], executor: Any) -> list[T]:
    try:
        from distributed import Client
    except ImportError:
        raise UsageError(
            f"executor {executor!r} needs dask.distributed; install it with "
            "`pip install 'myutils-profiling[dask]'`, or use executor='process'"
        ) from None
    if isinstance(executor, str):
        if "://" not in executor:
            raise UsageError(
                f"executor {executor!r} is not understood; use None, 'serial', 'process', "
                "a Dask scheduler address such as 'tcp://127.0.0.1:8786', or a distributed.Client"
            )
        with Client(executor, set_as_default=False) as client:
            return _gather(client, func, calls)
    if isinstance(executor, Client):
        return _gather(executor, func, calls)
    raise UsageError(f"executor of type {type(executor).__name__} is not supported; pass an address or a Client")


def _gather(client: Any, func: Callable[..., T], calls: Sequence[tuple[Any, ...]]) -> list[T]:
    futures = [client.submit(func, *args, pure=False) for args in calls]
    return list(client.gather(futures))
