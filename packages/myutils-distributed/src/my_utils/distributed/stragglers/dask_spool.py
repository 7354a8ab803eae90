"""stragglers on Dask: ``executor="dask"`` (the scheduler in ``$DASK_SCHEDULER_ADDRESS``, else a local
cluster for the call) or a scheduler address (``tcp://host:8786``): the ranks are spooled by tasks.

Why an adapter of its own: myutils-profiling has the general runner (``providers.parallel``), but
this distribution depends on myutils-core alone and never on a sibling (ARCHITECTURE section 3).
What stragglers needs is one kind of task, so this module is that task and a client around it;
the local cluster is core's (:mod:`my_utils.core.dask_local`), the one ``ingest`` and ``trace``
start. ``distributed`` is imported only here, when a Dask executor is asked for (the ``[dask]`` extra).

* A task spools a batch of ranks. On a cluster joined by address it sends back their bytes
  (:func:`~my_utils.distributed.stragglers.spool.spool_bytes`) and clock records, and this
  process writes them into its own scratch folder: the workers must see the rank files at the
  same paths, and nothing else of ours. A local cluster's workers write the spool files into
  that folder themselves and send back the clock records only.
* At most ``2 x workers`` batches are in flight, each of at most :data:`BATCH_MAX` ranks whose
  bytes come back (:data:`WRITTEN_BATCH_MAX` when the workers write): a Dask task costs a few ms
  whatever it does and a 200-step rank parses in ~6 ms, and this process holds that many
  batches' bytes whatever the rank count.
* On a cluster joined by address, an error says which worker raised it; a rank file a worker
  cannot open is an ``InputError`` naming the file, the worker and its host.
* A local cluster (:func:`~my_utils.core.dask_local.local_cluster`): one single-threaded worker
  process per core (``max_workers``) forked from a fork server that imports ``distributed`` while
  this process does, 127.0.0.1 only, free ports, its space inside the call's scratch folder; no
  nannies (their malloc trimming costs the parser page faults), Dask's per-task profiler and GIL
  monitor off, ``gc.freeze()`` in each worker. At 1,000 ranks on 2 workers, with nannies the
  command took 1.14-1.3x the pool's time (about 0.8 s more: three imports of ``distributed`` in
  a row before the first task).
* Stopping: the workers end with this process and leave Ctrl-C to it; a Ctrl-C or SIGTERM
  while the scheduler starts acts once it has started, so that it is closed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
from collections import deque
from collections.abc import Iterator, Sequence
from importlib.util import find_spec
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any

from my_utils.core.errors import InputError, MyUtilsError, UsageError
from my_utils.distributed.clock_record import ClockSyncRecord
from my_utils.distributed.stragglers.spool import chunk_steps, spool_bytes, spool_rank

if TYPE_CHECKING:
    from my_utils.core.dask_local import LocalDask

__all__ = ["BATCH_MAX", "DASK_ENV", "is_dask", "require_dask", "spool_on_dask"]

DASK_ENV = "DASK_SCHEDULER_ADDRESS"
SCHEMES = ("tcp://", "tls://", "ucx://", "inproc://", "ws://", "wss://")
INSTALL = "pip install 'myutils-distributed[dask]'"
BATCH_MAX = 16  # ranks per task at most (their spools come back as bytes, held here)
#: ranks per task at most when the workers write the spools themselves (a local cluster): only clock records come
#: back, and each task costs the scheduler and the client in this process a few ms of the cores the workers need
WRITTEN_BATCH_MAX = 64
BATCHES_PER_WORKER = 4  # each worker gets at least this many batches (a slow rank holds up a quarter of its share)
WINDOW_PER_WORKER = 2  # batches in flight per worker

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
    outs = {rank: scratch / f"rank_{rank}.spool" for rank in files}
    clocks: dict[int, list[ClockSyncRecord]] = {}
    with _client(executor, max_workers, len(files), scratch / "dask") as (client, workers, named, local):
        # a local cluster's workers write into our scratch folder themselves and send back the clocks only
        calls = [(rank, str(path.absolute()), str(outs[rank]) if local else None)  # a worker's cwd is its own
                 for rank, path in files.items()]
        cap = WRITTEN_BATCH_MAX if local else BATCH_MAX
        size = max(1, min(cap, len(calls) // (max(workers, 1) * BATCHES_PER_WORKER)))
        batches = iter([calls[i:i + size] for i in range(0, len(calls), size)])
        steps = chunk_steps(len(calls))
        pending: deque[Any] = deque(client.submit(_spool_batch, part, steps, named, pure=False)
                                    for part in islice(batches, WINDOW_PER_WORKER * max(workers, 1)))
        try:
            while pending:
                future = pending.popleft()
                try:
                    # a local cluster's workers have no nanny: once all of them exited, that is said
                    done = local.result(future) if local is not None else future.result()
                finally:
                    future.release()  # the worker drops its copy now
                for part in islice(batches, 1):  # one out, one in: the workers stay busy while we write
                    pending.append(client.submit(_spool_batch, part, steps, named, pure=False))
                for rank, data, rank_clocks in done:
                    if data is not None:
                        outs[rank].write_bytes(data)
                    clocks[rank] = rank_clocks
        except BaseException:
            client.cancel(list(pending))  # an error or Ctrl-C: the other batches are not wanted
            raise
    return outs, {rank: clocks[rank] for rank in files}


def _spool_batch(calls: Sequence[tuple[int, str, str | None]], steps: int,
                 named: bool) -> list[tuple[int, bytes | None, list[ClockSyncRecord]]]:
    """Task: each rank's spool (chunks of ``steps`` steps) and clock records; ``named``: an error says which
    worker raised it.

    A call that names a spool file writes it there (a worker of a local cluster sees the caller's scratch
    folder) and sends back no bytes; any other sends the bytes back for the caller to write.
    """
    out: list[tuple[int, bytes | None, list[ClockSyncRecord]]] = []
    for rank, path, spool in calls:
        try:
            if spool is None:
                data, clocks = spool_bytes(path, steps)
                out.append((rank, data, clocks))
            else:
                out.append((rank, None, spool_rank(path, spool, steps)))
        except Exception as exc:
            if named:
                raise _on_worker(exc, path) from None
            raise
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
            local_dir: Path) -> Iterator[tuple[Any, int, bool, LocalDask | None]]:
    """(client, worker threads, whether errors name their worker, the local cluster if one was started here).

    A local cluster keeps its workers' space in ``local_dir`` (inside the call's scratch folder).
    """
    address = executor
    if executor == "dask":
        address = os.environ.get(DASK_ENV, "").strip()
        if not address:
            from my_utils.core.dask_local import local_cluster

            with local_cluster(max_workers, [__name__], local_dir, tasks=ranks) as local:
                yield local.client, local.workers, False, local
            return
        where = f"${DASK_ENV}={address!r}"
    else:
        where = f"--executor {executor!r}"
    if not address.startswith(SCHEMES):
        raise UsageError(f"stragglers: {where} is not understood; use 'dask' (a local cluster, or the scheduler "
                         f"in ${DASK_ENV}) or a Dask scheduler address such as 'tcp://127.0.0.1:8786'")
    from my_utils.core.dask_local import join_scheduler, quiet_distributed

    quiet_distributed()
    with join_scheduler(address, where) as client:  # bounded: a silent or refused address is said at once
        yield client, _threads(client), True, None


def _threads(client: Any) -> int:
    """Threads of the cluster's workers now (0 when none has joined yet, or the scheduler does not say)."""
    try:
        return sum(int(w.get("nthreads", 1)) for w in client.scheduler_info()["workers"].values())
    except Exception:  # an older scheduler or a dropped connection: the batches are sized without it
        return 0
