"""stragglers on Dask: ``executor="dask"`` (the scheduler in ``$DASK_SCHEDULER_ADDRESS``, else a local
cluster for the call) or a scheduler address (``tcp://host:8786``): the ranks are spooled by tasks.

Why an adapter of its own: myutils-profiling has the general runner (``providers.parallel``), but
this distribution depends on myutils-core alone and never on a sibling (ARCHITECTURE section 3),
and moving that runner into core is more than stragglers needs. What stragglers needs is one
kind of task, so this module is that task and a client around it; ``distributed`` is imported
only here, when a Dask executor is asked for (the ``[dask]`` extra).

* A task spools a batch of ranks (:func:`~my_utils.distributed.stragglers.spool.spool_bytes`)
  and sends back their bytes and clock records; this process writes them into its own scratch
  folder. So the workers must see the rank files at the same paths, and nothing else of ours.
* At most ``2 x workers`` batches are in flight, each of at most :data:`BATCH_MAX` ranks (a
  Dask task costs a few ms whatever it does; a 200-step rank parses in ~10 ms): this process
  holds that many batches' bytes whatever the rank count.
* On a cluster joined by address, an error says which worker raised it; a rank file a worker
  cannot open is an ``InputError`` naming the file, the worker and its host.
* A local cluster: one single-threaded worker process per core (``max_workers``), 127.0.0.1
  only, free ports, its space inside the call's scratch folder; Dask's per-task profiler, GIL
  monitor and malloc trimming off (each cost the parser CPU, see myutils-profiling's
  ``dask_run``), and ``gc.freeze()`` in each worker once Dask is imported (:func:`dask_setup`).
* Stopping: the workers end with this process and leave Ctrl-C to it; a Ctrl-C or SIGTERM
  while the cluster starts acts once it has started, so that it is closed. Left: a Ctrl-C in
  a worker's first second (before :func:`dask_setup` runs) still prints its traceback.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import logging
import os
import signal
import socket
from collections import deque
from collections.abc import Iterator, Sequence
from importlib.util import find_spec
from itertools import islice
from pathlib import Path
from typing import Any

from my_utils.core.errors import InputError, MyUtilsError, UsageError
from my_utils.core.lifecycle import die_with_parent, join_or_kill, signals_deferred
from my_utils.core.scratch import owner_token
from my_utils.distributed.clock_record import ClockSyncRecord
from my_utils.distributed.stragglers.spool import chunk_steps, spool_bytes

__all__ = ["BATCH_MAX", "DASK_ENV", "dask_setup", "is_dask", "require_dask", "spool_on_dask"]

DASK_ENV = "DASK_SCHEDULER_ADDRESS"
SCHEMES = ("tcp://", "tls://", "ucx://", "inproc://", "ws://", "wss://")
INSTALL = "pip install 'myutils-distributed[dask]'"
BATCH_MAX = 16  # ranks per task at most
BATCHES_PER_WORKER = 4  # each worker gets at least this many batches (a slow rank holds up a quarter of its share)
WINDOW_PER_WORKER = 2  # batches in flight per worker
_QUIET_WORKERS = {"distributed.worker.profile.enabled": False,
                  "distributed.admin.system-monitor.gil.enabled": False,
                  "distributed.admin.tick.interval": "1s",
                  "distributed.admin.system-monitor.interval": "5s",
                  "distributed.worker.memory.monitor-interval": "1s",
                  # None unsets it: Dask's 65536 also pins glibc's mmap threshold (a page fault storm)
                  "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}

_NANNY_PROCESS = "Dask Worker process (from Nanny)"  # what distributed's nannies name their worker processes

Spooled = tuple[dict[int, Path], dict[int, list[ClockSyncRecord]]]


def is_dask(executor: object) -> bool:
    """Whether ``executor`` asks for Dask: ``"dask"`` or a scheduler address."""
    return isinstance(executor, str) and (executor == "dask" or executor.startswith(SCHEMES))


def require_dask(executor: str) -> None:
    """A ``UsageError`` naming the extra to install when ``distributed`` is not importable (before any work)."""
    try:
        found = find_spec("distributed") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise UsageError(f"stragglers --executor {executor}: needs dask.distributed, which is not installed; "
                         f"install it with `{INSTALL}`, or use --executor process")


def spool_on_dask(files: dict[int, Path], scratch: Path, executor: str, max_workers: int | None) -> Spooled:
    """Spool every rank of ``files`` on the Dask cluster ``executor`` names: (rank -> spool file, rank -> clocks)."""
    require_dask(executor)
    calls = [(rank, str(path.absolute())) for rank, path in files.items()]  # a worker's cwd is its own
    outs = {rank: scratch / f"rank_{rank}.spool" for rank in files}
    clocks: dict[int, list[ClockSyncRecord]] = {}
    with _client(executor, max_workers, len(calls), scratch / "dask") as (client, workers, named):
        size = max(1, min(BATCH_MAX, len(calls) // (max(workers, 1) * BATCHES_PER_WORKER)))
        batches = iter([calls[i:i + size] for i in range(0, len(calls), size)])
        steps = chunk_steps(len(calls))
        pending: deque[Any] = deque(client.submit(_spool_batch, part, steps, named, pure=False)
                                    for part in islice(batches, WINDOW_PER_WORKER * max(workers, 1)))
        try:
            while pending:
                future = pending.popleft()
                try:
                    done = future.result()
                finally:
                    future.release()  # the worker drops its copy now
                for part in islice(batches, 1):  # one out, one in: the workers stay busy while we write
                    pending.append(client.submit(_spool_batch, part, steps, named, pure=False))
                for rank, data, rank_clocks in done:
                    outs[rank].write_bytes(data)
                    clocks[rank] = rank_clocks
        except BaseException:
            client.cancel(list(pending))  # an error or Ctrl-C: the other batches are not wanted
            raise
    return outs, {rank: clocks[rank] for rank in files}


def _spool_batch(calls: Sequence[tuple[int, str]], steps: int,
                 named: bool) -> list[tuple[int, bytes, list[ClockSyncRecord]]]:
    """Task: each rank's spool bytes (chunks of ``steps`` steps) and clock records; ``named``: an error says which
    worker raised it."""
    out = []
    for rank, path in calls:
        try:
            data, clocks = spool_bytes(path, steps)
        except Exception as exc:
            if named:
                raise _on_worker(exc, path) from None
            raise
        out.append((rank, data, clocks))
    return out


def _on_worker(exc: Exception, path: str) -> Exception:
    """``exc`` saying which worker (address, host) raised it; a rank file it cannot open is said as such."""
    try:
        from distributed import get_worker

        worker = f"Dask worker {get_worker().address} (host {socket.gethostname()})"
    except Exception:  # not on a worker: the error as it is
        return exc
    # the caller saw the file: when this worker cannot read it at all, that is the error (the reader's says less)
    try:
        os.stat(path)
        why = None if os.access(path, os.R_OK) else os.strerror(errno.EACCES)
    except OSError as unseen:
        why = unseen.strerror or str(unseen)
    if why:
        return InputError(path, None, f"a rank file {worker} can read ({why}); every worker must see the rank "
                                      "files at the same paths")
    if isinstance(exc, MyUtilsError) and exc.args and isinstance(exc.args[0], str):
        exc.args = (f"{exc.args[0]} (on {worker})", *exc.args[1:])
    return exc


@contextlib.contextmanager
def _client(executor: str, max_workers: int | None, ranks: int,
            local_dir: Path) -> Iterator[tuple[Any, int, bool]]:
    """(client, worker threads, whether errors name their worker) for the cluster ``executor`` names.

    A local cluster keeps its workers' space in ``local_dir`` (inside the call's scratch folder).
    """
    from distributed import Client

    address = executor
    if executor == "dask":
        address = os.environ.get(DASK_ENV, "").strip()
        if not address:
            with _local_cluster(max_workers or max(1, min(ranks, os.cpu_count() or 1)), local_dir) as local:
                yield local
            return
        where = f"${DASK_ENV}={address!r}"
    else:
        where = f"--executor {executor!r}"
    if not address.startswith(SCHEMES):
        raise UsageError(f"stragglers: {where} is not understood; use 'dask' (a local cluster, or the scheduler "
                         f"in ${DASK_ENV}) or a Dask scheduler address such as 'tcp://127.0.0.1:8786'")
    with Client(address, set_as_default=False) as client:
        yield client, _threads(client), True


def _threads(client: Any) -> int:
    """Threads of the cluster's workers now (0 when none has joined yet, or the scheduler does not say)."""
    try:
        return sum(int(w.get("nthreads", 1)) for w in client.scheduler_info()["workers"].values())
    except Exception:  # an older scheduler or a dropped connection: the batches are sized without it
        return 0


@contextlib.contextmanager
def _local_cluster(workers: int, scratch: Path) -> Iterator[tuple[Any, int, bool]]:
    """A cluster on this machine for one call: ``workers`` single-threaded worker processes, then gone.

    Its space is ``scratch``, inside the call's scratch folder, which names this process: after
    a SIGKILL the next run removes both.
    """
    import dask

    from distributed import Client, LocalCluster

    # after the import, which sets Dask's configured level (INFO): silence_logs below quiets the handlers only
    # while the cluster lives, and the INFO lines of its shutdown ("Batched Comm Closed" and a traceback)
    # came after; a command says one line per error
    log = logging.getLogger("distributed")
    if log.getEffectiveLevel() < logging.ERROR:
        log.setLevel(logging.ERROR)
    scratch.mkdir(exist_ok=True)
    try:
        with contextlib.ExitStack() as started:  # closes what started, whatever happens next
            # Ctrl-C or SIGTERM while the cluster starts acts once it has (and so is closed)
            with signals_deferred():
                started.enter_context(dask.config.set({**_QUIET_WORKERS, "temporary-directory": str(scratch)}))
                cluster = started.enter_context(LocalCluster(
                    n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                    dashboard_address=":0", silence_logs=logging.ERROR, local_directory=str(scratch),
                    preload=[__name__]))
                client = started.enter_context(Client(cluster, set_as_default=False))
            yield client, workers, False
    finally:
        _join_worker_processes()


def _join_worker_processes(timeout: float = 5.0) -> None:
    """Wait for the local cluster's worker processes to be gone (kill what is left after ``timeout``).

    Closing the cluster on SIGTERM or Ctrl-C can return while a worker process still stops; it
    then purged folders in the scratch folder as this process removed it (a folder was left,
    and Dask logged its failed removals on stderr).
    """
    import multiprocessing

    join_or_kill([proc for proc in multiprocessing.active_children() if proc.name == _NANNY_PROCESS], timeout)


def dask_setup(worker: Any) -> None:
    """Dask preload hook, run in each local worker once it started.

    The worker ends with this call's process (its parent: a killed run left workers behind for
    seconds), and Ctrl-C in a terminal is the caller's to handle (the workers printed
    ``KeyboardInterrupt`` tracebacks). Freezes what Dask's imports left (~65,000 objects that
    every full collection would walk again while the tasks parse), and drops the worker's
    "Compute Failed" report of a task's error: the caller gets that error as itself (one line),
    the report is ten lines on its stderr.
    """
    parent = os.getppid()
    die_with_parent(owner_token(parent), parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    gc.freeze()
    logging.getLogger("distributed.worker").addFilter(_no_task_failures)


def _no_task_failures(record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith("Compute Failed")
