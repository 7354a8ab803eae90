"""The Dask side of :func:`~my_utils.profiling.providers.parallel.stream_many`: join a cluster, or start one here.

``executor="dask"`` joins the scheduler named by ``DASK_SCHEDULER_ADDRESS`` or else starts a
local cluster for the call; an address (``tcp://host:8786``) or a ``distributed.Client`` joins
that cluster (:func:`dask_session`). A local cluster listens on 127.0.0.1 only, on free ports,
keeps its scratch space in a temporary folder, and leaves one thing behind: multiprocessing's
fork server, which ends with this process and lets the next call's workers start in ~0.1 s.
On a real cluster the findings below apply to its workers too: set
``distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_`` to ``null`` in their Dask
config, and the settings of ``_QUIET_WORKERS``. An error raised on a cluster's worker names
that worker (:func:`with_worker`).

Where Dask's time went (8 rank files, links to one 54 MB-class real trace, 2 workers on a
shared 2-core machine, a fresh interpreter per sample; bench/bench_diff_trace.py measures
wall time and the CPU seconds of all processes, Dask and pool interleaved):

* Results: a list of ``MetricEvent`` dataclasses pickles at ~22 µs an event (frozen slotted
  dataclasses are rebuilt attribute by attribute), so event lists travel as plain tuples
  (:func:`~my_utils.profiling.providers.batches.packed`; 12 ms instead of 52 ms for a
  2,358-event rank), for the pool and Dask alike.
* The tasks themselves, timed inside the task (thread CPU): 1.0-1.4 s a parse in a worker
  started by a nanny against 0.6-0.8 s in a pool worker. Two causes. Dask's nannies export
  ``MALLOC_TRIM_THRESHOLD_=65536``, which also pins glibc's mmap threshold: every buffer
  over 128 KiB of the streaming parser was mmap'ed and unmapped, 83,000 page faults and
  +0.2 s of kernel time a parse (the 8-rank run's kernel time fell from 3.5 s to 0.5 s once
  the workers inherited our environment instead). And the ~65,000 objects ``distributed``
  imports are walked by every full collection: +0.09 s of gc a parse (0.39 s against 0.12 s
  over 3 parses); ``gc.freeze()`` once the worker runs takes them out, so a parse now costs
  less CPU in a Dask worker than in a pool worker.
  The gc diagnosis callback Dask installs costs nothing measurable (it acts on full
  collections only).
* The workers' event loops: each wake-up takes the GIL from the pure-Python task and, on a
  loaded machine, waits for a core to give it back; with the profiler, the GIL monitor and
  the tick at their defaults a task's wall time was 1.84 s against 1.2-1.4 s quiet
  (``_QUIET_WORKERS``; same CPU, 600-800 against 100-180 involuntary context switches).
* Start-up, the rest: ``import distributed`` costs 0.6-0.8 s of CPU in every process that
  needs it. With nannies, each worker process was spawned and imported it after this
  process had (3 imports in a row on the critical path; 2.7-3.6 s CPU for an idle cluster).
  Now the workers are plain ``Worker`` processes forked by a fork server that imports
  ``distributed`` once, started on a helper thread while this process imports it and starts
  the scheduler: 0.1 s of CPU a worker before its first task instead of 0.8 s, and closing
  takes 0.05 s instead of 0.2-0.75 s. What is left is this process's import and scheduler
  (about 1 s of CPU) and the fork server's import (about 0.8 s): some 1.5 s of CPU more than
  the pool, whose workers import only the parser, and ~0.5 s more before the first task
  starts.
* Results kept on the workers: a future's result stayed in its worker until the end of the
  call, and every later garbage collection there walked it again; each result is now
  released as soon as the client has it (24 ranks: 1.2 s less CPU, 6 % less time).

Measured with ``--samples 5`` (medians of paired ratios, Dask/pool): 2x before (58 s against
29.7 s at load 10-13); 1.14x (load 2.5), 1.16x (load 1) and 1.24x (load 2.9) on 8 ranks with
all but the last change; with it, 1.13x on 8 ranks (load 1.2-1.6; CPU 1.09x) and 1.13x on
24 ranks (``--ranks 24 --samples 3``, load 1.6-2; CPU 1.14x). The 15 % goal is met on a
quiet machine, just; what is left is the start-up, which costs more when other work holds
the cores.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import multiprocessing
import multiprocessing.util
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from importlib.util import find_spec
from typing import Any

from my_utils.core.errors import UsageError
from my_utils.core.lifecycle import die_with_parent
from my_utils.core.scratch import make_scratch, owner_token
from my_utils.profiling.dask_worker import no_task_failures
from my_utils.profiling.providers.batches import UNSEEN_ATTR, WORKER_ATTR, run_batch

DASK_ENV = "DASK_SCHEDULER_ADDRESS"
_SCHEMES = ("tcp://", "tls://", "ucx://", "inproc://", "ws://", "wss://")
#: the periodic work of a process's event loop, slowed down: the scheduler's (in this process) for a local cluster
_QUIET_LOOP = {"distributed.admin.system-monitor.gil.enabled": False,
               "distributed.admin.tick.interval": "1s",
               "distributed.admin.system-monitor.interval": "5s"}
_QUIET_WORKERS = {**_QUIET_LOOP,
                  "distributed.worker.profile.enabled": False,
                  "distributed.worker.memory.monitor-interval": "1s"}
_AF_UNIX_PATH_MAX = 100  # a unix socket's path (the fork server's) is at most 104-108 bytes, whatever the OS


def _dask_client_class() -> Any:
    try:
        from distributed import Client
    except ImportError:
        raise UsageError(
            "executor 'dask' needs dask.distributed; install it with "
            "`pip install 'myutils-profiling[dask]'`, or use executor='process'"
        ) from None
    return Client


@dataclass
class DaskSession:
    """A Dask client for one call of ``stream_many``: where the batches go, and how their results come back."""

    client: Any
    workers: int  # threads that run tasks (0: none joined yet)
    procs: Sequence[Any] = ()  # the local cluster's worker processes (none for a cluster joined by address)
    named: bool = False  # errors name the worker that raised them (a real cluster)

    def submit(self, func: Callable[..., Any], calls: Sequence[tuple[Any, ...]], keep_going: bool) -> Any:
        """One batch of calls as one task (:func:`~my_utils.profiling.providers.batches.run_batch`)."""
        return self.client.submit(run_batch, func, list(calls), keep_going, self.named, pure=False)

    def sees(self, folder: str) -> bool:
        """Whether every worker joined now sees ``folder`` (a local cluster's do; another cluster's are asked).

        A folder made here with a unique name is seen by a worker only through a shared filesystem.
        """
        if self.procs:
            return True
        try:
            seen = self.client.run(os.path.isdir, folder)
        except Exception:  # a worker that does not answer: the results carry the data, which always works
            return False
        return bool(seen) and all(seen.values())

    def fetch(self, future: Any) -> Any:
        """The batch's outcomes; the worker drops its copy at once.

        Results kept on the workers until the end are walked by each of their garbage
        collections (24 ranks: 1.2 s more CPU, 6 % more time).
        """
        if self.procs:
            done = threading.Event()
            future.add_done_callback(lambda _: done.set())
            while not done.wait(timeout=1):
                # our own workers have no nanny to restart them: once all of them have exited,
                # nothing will ever run the tasks, so say so instead of waiting forever
                if not any(p.is_alive() for p in self.procs):
                    codes = sorted({p.exitcode for p in self.procs}, key=str)
                    raise UsageError(f"the local Dask workers exited (exit codes {codes}) before the "
                                     "tasks finished; use executor='process', or a running cluster")
        try:
            return future.result()
        except Exception as exc:
            raise with_worker(exc) from None
        finally:
            future.release()


@contextlib.contextmanager
def dask_session(executor: Any, max_workers: int | None, calls: int,
                 module: str | None) -> Iterator[DaskSession]:
    """The Dask cluster ``executor`` names, joined (or, for ``"dask"`` without ``$DASK_SCHEDULER_ADDRESS``,
    started on this machine) for the duration of the block; ``module``: the tasks' module, for the
    local workers to import early."""
    if isinstance(executor, str):
        address = executor
        if executor == "dask":
            address = os.environ.get(DASK_ENV, "").strip()
            if not address:
                with _local_cluster(max_workers, calls, module) as session:
                    yield session
                return
            where = f"${DASK_ENV}={address!r}"
        else:
            where = f"executor {executor!r}"
        if not address.startswith(_SCHEMES):
            raise UsageError(
                f"{where} is not understood; use None, 'serial', 'process', 'dask' (local cluster, or the "
                f"scheduler in ${DASK_ENV}), a Dask scheduler address such as 'tcp://127.0.0.1:8786', "
                "or a distributed.Client"
            )
        client_class = _dask_client_class()
        _quiet_distributed()
        with client_class(address, set_as_default=False) as client:
            yield DaskSession(client, _threads(client), named=True)
        return
    client_class = _dask_client_class()
    if isinstance(executor, client_class):
        yield DaskSession(executor, _threads(executor), named=True)
        return
    raise UsageError(f"executor of type {type(executor).__name__} is not supported; pass 'dask', an address "
                     "or a Client")


def _quiet_distributed() -> None:
    """Raise the ``distributed`` loggers of this process to ERROR, and leave them there.

    A cluster or client this module makes logs INFO lines with tracebacks ("Batched Comm
    Closed ...") on stderr while it shuts down; ``LocalCluster(silence_logs=...)`` quiets only
    its handlers, and restores them at its exit, before those late lines arrive, and a command
    promises one line per error. Called once ``distributed`` is imported: its import sets the
    level from Dask's config (INFO), over a level set before (a failed local ``trace`` printed
    such a traceback in about 1 run of 10). A ``distributed.Client`` the caller passes is the
    caller's: its logging is not touched.
    """
    import logging

    log = logging.getLogger("distributed")
    if log.getEffectiveLevel() < logging.ERROR:
        log.setLevel(logging.ERROR)


def _threads(client: Any) -> int:
    """Threads of the cluster's workers now (0 when none has joined yet, or the scheduler does not say)."""
    try:
        return sum(int(w.get("nthreads", 1)) for w in client.scheduler_info()["workers"].values())
    except Exception:  # an older scheduler or a dropped connection: the batches are sized without it
        return 0


def require_dask() -> None:
    """Raise the UsageError that says how to install Dask when it is not installed (before any work)."""
    if find_spec("distributed") is None:
        _dask_client_class()


@contextlib.contextmanager
def _local_cluster(max_workers: int | None, calls: int, module: str | None) -> Iterator[DaskSession]:
    """A local cluster for this call: a scheduler here and one single-threaded worker process per core.

    The workers are plain ``distributed.Worker`` processes (no nannies) forked by
    multiprocessing's fork server, which imports ``distributed`` once for all of them; they
    start on a helper thread while this process imports ``distributed`` and starts the scheduler.
    """
    require_dask()
    workers = max_workers or max(1, min(calls, os.cpu_count() or 1))
    # forkserver, not fork: forking this process, which holds threads (dask's loop, torch),
    # can deadlock the child; the server is a fresh single-threaded interpreter. Preloaded
    # there: distributed (0.6-0.8 s of imports each spawned worker would repeat) and our own
    # modules; a module that fails to import would take the server down, so any other is
    # imported by each worker. The preload applies to the first start of the server in this
    # process; the server then stays up, and later calls start their workers in ~0.1 s.
    if "forkserver" in multiprocessing.get_all_start_methods():
        _own_mp_tempdir()
        ctx: Any = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["distributed", __name__]
                                   + ([module] if module and module.startswith("my_utils.") else []))
    else:  # Windows: each worker imports distributed itself
        ctx = multiprocessing.get_context("spawn")
    # local_directory: the workers' scratch space goes with the call, never left in the cwd; named by
    # this process, so that a later call removes it if this one is killed
    scratch = str(make_scratch("myutils-dask-"))
    try:
        config = {**_QUIET_WORKERS, "temporary-directory": scratch}
        pipes: list[Any] = []
        procs: list[Any] = []
        for n in range(workers):
            receive, send = ctx.Pipe(duplex=False)
            procs.append(ctx.Process(target=_local_worker, name=f"myutils-dask-worker-{n}", daemon=True,
                                     args=(receive, module, scratch, config, dict(os.environ), owner_token())))
            pipes.append(send)
        failed: list[BaseException] = []
        starter = threading.Thread(target=_start_all, args=(procs, failed), name="myutils-dask-start", daemon=True)
        starter.start()
        try:
            client_class = _dask_client_class()
            import dask
            from distributed import LocalCluster

            _quiet_distributed()
            # loopback only; ":0": the scheduler's HTTP routes bind a free port (None still
            # binds the fixed 8787); silence_logs: the scheduler's INFO lines stay quiet.
            # _QUIET_LOOP: the scheduler's system monitor (every 0.5 s) and tick (20 ms) took 2.6 %
            # of a core while idle, 0.75 % with these, CPU the workers need (the 1,000-rank trace: ~2.6 s)
            with dask.config.set({**_QUIET_LOOP, "temporary-directory": scratch}), \
                    LocalCluster(n_workers=0, host="127.0.0.1", dashboard_address=":0", silence_logs=40,
                                 local_directory=scratch) as cluster:
                starter.join()
                if failed:
                    raise failed[0]
                for send in pipes:
                    send.send(cluster.scheduler_address)
                try:
                    with client_class(cluster, set_as_default=False) as client:
                        yield DaskSession(client, workers, procs)
                except BaseException:
                    _kill(procs)  # a failure, Ctrl-C or SIGTERM: the other tasks' results are not wanted
                    raise
                finally:
                    _close_workers(cluster, procs)
        except BaseException:
            _kill(procs)
            raise
        finally:
            starter.join()
            for send in pipes:
                send.close()  # a worker still waiting for the address gives up
            for proc in procs:
                if proc.pid is None:
                    continue
                # _close_workers stopped every registered worker; one that never
                # registered (the call failed early) or hangs is ended
                proc.join(timeout=3)
                if proc.is_alive():
                    proc.terminate()
                    proc.join(timeout=5)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _kill(procs: Sequence[Any]) -> None:
    """SIGKILL the local workers still running (their tasks' results are no longer wanted)."""
    for proc in procs:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            if proc.pid is not None and proc.is_alive():
                proc.kill()


def _close_workers(cluster: Any, procs: Sequence[Any]) -> None:
    """Stop the workers while the scheduler still runs, the client (and its results' keys) gone.

    Closing the scheduler under running workers can catch a heartbeat in flight, which a
    worker reports with a traceback on stderr; retiring them instead copies the results
    still held from one worker to the other.
    """
    scheduler = cluster.scheduler

    def close_all() -> None:
        for address in list(scheduler.workers):
            scheduler.close_worker(address)

    cluster.loop.add_callback(close_all)
    deadline = time.monotonic() + 5
    for proc in procs:
        if proc.pid is not None:
            proc.join(timeout=max(0.0, deadline - time.monotonic()))


def _start_all(procs: Sequence[Any], failed: list[BaseException]) -> None:
    """Start the worker processes (each start waits for the fork server); a failure is kept for the caller."""
    try:
        for proc in procs:
            proc.start()
    except BaseException as exc:  # re-raised on the calling thread
        failed.append(exc)


def _local_worker(receive: Any, module: str | None, scratch: str, config: dict[str, Any],
                  environ: dict[str, str], owner: str) -> None:
    """One worker process of the local cluster: import, wait for the scheduler's address, serve."""
    import asyncio
    import logging

    import dask
    from distributed import Worker

    # its parent is the fork server, which outlives a killed caller by a moment: watch the caller itself
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(owner)

    # the fork server's environment is the one of its first start: the caller's of now wins,
    # and Dask's config, read from DASK_* variables at import, is read again if they changed
    stale = {k: v for k, v in environ.items() if k.startswith("DASK_")} != \
        {k: v for k, v in os.environ.items() if k.startswith("DASK_")}
    os.environ.clear()
    os.environ.update(environ)
    if stale:
        dask.config.refresh()
    if module:
        try:  # the tasks' module is imported now, while the scheduler starts, not in the first task
            importlib.import_module(module)
        except Exception:  # the first task raises the real error, where it is reported
            pass
    try:
        address = receive.recv()
    except EOFError:  # the call ended before the scheduler started
        return
    # the caller holds the other end until the call is over: EOF means it ended (or was killed), and
    # this worker goes at once, before a lost scheduler makes it print tracebacks on the caller's stderr
    threading.Thread(target=_exit_on_eof, args=(receive,), name="myutils-caller-watch", daemon=True).start()
    # Each wake-up of the event loop takes the GIL from a pure-Python task: the statistical
    # profiler (every 10 ms), the GIL monitor (1 ms), the tick watchdog (20 ms), the system
    # and memory monitors. Under load, each one also waits for a core to hand the GIL back.
    dask.config.set(config)
    logging.getLogger("distributed").setLevel(logging.ERROR)
    # a task's error reaches the caller as itself (one line); the worker's own report of it is six
    # lines of traceback text on the caller's stderr
    logging.getLogger("distributed.worker").addFilter(no_task_failures)

    async def serve() -> None:
        async with Worker(address, nthreads=1, host="127.0.0.1", local_directory=scratch,
                          name=f"{os.getpid()}") as worker:
            # distributed's imports leave ~65,000 objects that every full collection walks
            # again: 0.09 s more gc a 54 MB trace than in a pool worker. Frozen, the
            # collections see only what the tasks allocate.
            gc.freeze()
            await worker.finished()

    asyncio.run(serve())


def _exit_on_eof(receive: Any) -> None:
    with contextlib.suppress(EOFError, OSError):
        while True:
            receive.recv()
    os._exit(0)


def _own_mp_tempdir() -> None:
    """multiprocessing's own temporary folder (the fork server's socket) inside one of ours.

    It is made once per process and removed at exit; a killed process leaves it. Named by its
    owner, a later run removes it (:func:`~my_utils.core.scratch.sweep_scratch`).
    """
    config = getattr(multiprocessing.current_process(), "_config", None)
    if isinstance(config, dict) and config.get("tempdir") is None:
        folder = str(make_scratch("myutils-mp-"))
        if len(folder) + len("/listener-12345678") > _AF_UNIX_PATH_MAX:
            # the socket's path would be too long: multiprocessing's shorter default name is kept
            shutil.rmtree(folder, ignore_errors=True)
            return
        config["tempdir"] = folder
        multiprocessing.util.Finalize(None, shutil.rmtree, args=(folder, True), exitpriority=-100)


def with_worker(exc: Exception) -> Exception:
    """``exc`` saying which cluster worker raised it (when it knows), for the one line the CLI prints.

    A file the worker could not open becomes an ``InputError`` naming the file and the worker: on
    a cluster, the inputs and ``$TMPDIR`` must be visible to every worker at the same paths.
    """
    from my_utils.core.errors import InputError, MyUtilsError

    worker = getattr(exc, WORKER_ATTR, None)
    if not worker:
        return exc
    if isinstance(exc, OSError) and exc.filename:
        return InputError(str(exc.filename), None, f"a file {worker} can read ({exc.strerror or exc}); every "
                                                   "worker must see the inputs and $TMPDIR at the same paths")
    why = getattr(exc, UNSEEN_ATTR, None)
    if isinstance(exc, InputError) and why:  # a reader's "cannot open": the file is not there for that worker
        return InputError(exc.where, None, f"a file {worker} can read ({why}); every worker must see the inputs "
                                           "and $TMPDIR at the same paths")
    if isinstance(exc, MyUtilsError) and exc.args and isinstance(exc.args[0], str):
        exc.args = (f"{exc.args[0]} (on {worker})", *exc.args[1:])
        return exc
    if hasattr(exc, "add_note"):  # Python >= 3.11: shown with a traceback (--traceback)
        exc.add_note(f"raised on {worker}")
    return exc
