"""A Dask cluster on this machine for one call: a scheduler here, plain worker processes from a fork server.

Shared by every command that takes ``--executor dask`` without a scheduler address (myutils-profiling's
``ingest``/``trace``, myutils-distributed's ``stragglers``): each distribution depends on core and never
on a sibling, so the machinery lives here. ``distributed`` is imported only inside the calls (the
``[dask]`` extras of those distributions install it); importing this module costs nothing more.

Why not ``LocalCluster(n_workers=N)`` (measured on a shared 2-core machine; myutils-profiling's
``providers/dask_run`` has the parse-side figures):

* **Start-up.** ``import distributed`` costs 0.6-0.8 s of CPU in every process that needs it. A
  ``LocalCluster`` spawns a nanny per worker, which spawns the worker, which imports it again after
  this process has: three imports in a row on the critical path. Here a fork server imports it
  once, on the other core, while this process imports it and starts the scheduler; the workers are
  forked from it ready to run (0.1 s of CPU each before the first task instead of 0.8 s), and
  closing takes 0.05 s instead of 0.2-0.75 s. The server outlives the call (it ends with this
  process), so a later call's workers start in ~0.1 s.
* **No nannies.** They export ``MALLOC_TRIM_THRESHOLD_=65536``, which also pins glibc's mmap
  threshold: 83,000 page faults and +0.2 s of kernel time per 54 MB parse.
* **Quiet event loops** (:data:`QUIET_WORKERS`): the statistical profiler, the GIL monitor and the
  fast tick each take the GIL from a pure-Python task at every wake-up.
* **gc.freeze()** once a worker runs: the ~65,000 objects ``distributed`` leaves are no longer
  walked by every full collection (+0.09 s of gc per 54 MB parse otherwise).

The workers end with the caller (a SIGKILLed caller's workers go within a second), ignore
Ctrl-C (the caller's to handle) and drop their own "Compute Failed" report of a task's error
(the caller gets the error itself, as one line).
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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any

from my_utils.core.errors import UsageError
from my_utils.core.lifecycle import die_with_parent, remove_scratch, signals_deferred
from my_utils.core.scratch import make_scratch, owner_token

if TYPE_CHECKING:
    import logging

__all__ = ["LOOPBACK_HTTP", "QUIET_LOOP", "QUIET_WORKERS", "LocalDask", "connect_timeout", "frozen_gc",
           "join_scheduler", "local_cluster", "no_task_failures", "quiet_distributed"]

#: the periodic work of a process's event loop, slowed down: the scheduler's (in this process) for a local cluster
QUIET_LOOP = {"distributed.admin.system-monitor.gil.enabled": False,
              "distributed.admin.tick.interval": "1s",
              "distributed.admin.system-monitor.interval": "5s"}
#: what a worker's event loop does less of, besides :data:`QUIET_LOOP` (a real cluster's workers want it too)
QUIET_WORKERS = {**QUIET_LOOP,
                 "distributed.worker.profile.enabled": False,
                 "distributed.worker.memory.monitor-interval": "1s"}
#: where the local scheduler serves its HTTP routes: a free port on loopback (never a host-less ":0")
LOOPBACK_HTTP = "127.0.0.1:0"
_AF_UNIX_PATH_MAX = 100  # a unix socket's path (the fork server's) is at most 104-108 bytes, whatever the OS


def no_task_failures(record: logging.LogRecord) -> bool:
    """Logging filter for ``distributed.worker``: drop a worker's "Compute Failed" report of a task's error.

    The caller gets the task's exception as itself (one line); the report is a traceback's worth of
    text on the caller's stderr.
    """
    return not str(getattr(record, "msg", "")).startswith("Compute Failed")


def quiet_distributed() -> None:
    """Raise the ``distributed`` loggers of this process to ERROR, and leave them there.

    A cluster or client started here logs INFO lines with tracebacks ("Batched Comm Closed ...")
    on stderr while it shuts down; ``LocalCluster(silence_logs=...)`` quiets only its handlers and
    restores them at its exit, before those late lines arrive, and a command promises one line per
    error. Call it once ``distributed`` is imported: the import sets the level from Dask's config
    (INFO), over a level set before.
    """
    import logging

    log = logging.getLogger("distributed")
    if log.getEffectiveLevel() < logging.ERROR:
        log.setLevel(logging.ERROR)


def connect_timeout() -> float:
    """Seconds a scheduler has to answer: Dask's ``distributed.comm.timeouts.connect`` (30 s unless set)."""
    import dask
    import distributed  # noqa: F401 - its import puts its defaults into Dask's config
    from dask.utils import parse_timedelta

    return float(parse_timedelta(dask.config.get("distributed.comm.timeouts.connect"), default="seconds"))


def join_scheduler(address: str, where: str) -> Any:
    """A ``distributed.Client`` of the scheduler at ``address``, or a one-line ``UsageError`` in bounded time.

    ``Client(address, timeout=...)`` bounds the TCP connection but not Dask's handshake: a server
    that accepts and never answers held a command until the peer hung up, and a refused address
    was retried for the whole timeout. So the address is tried first: a refused or unreachable
    one fails at once, and the handshake must finish within :func:`connect_timeout` (a probe
    connection, closed right after). ``where`` names the option the address came from.
    """
    timeout = connect_timeout()
    _answers(address, timeout, where)
    from distributed import Client

    return Client(address, set_as_default=False, timeout=timeout)


def _answers(address: str, timeout: float, where: str) -> None:
    """Raise ``UsageError`` unless a Dask scheduler at ``address`` completes a handshake within ``timeout``."""
    import asyncio

    from distributed.comm import connect
    from distributed.comm.addressing import get_address_host_port, parse_address

    scheme, _ = parse_address(address)
    if scheme in ("tcp", "tls", "ws", "wss"):  # a socket first: refused or unreachable is said at once
        import socket

        try:
            host, port = get_address_host_port(address)
            with socket.create_connection((host, port), timeout=timeout):
                pass
        except TimeoutError:
            raise UsageError(_no_answer(address, timeout, where, "")) from None
        except (OSError, ValueError) as exc:
            reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            raise UsageError(_no_answer(address, None, where, reason)) from None
    failed: list[BaseException] = []

    async def handshake() -> None:
        comm = await asyncio.wait_for(connect(address, timeout=timeout), timeout)
        await comm.close()

    def run() -> None:  # its own thread and loop: the caller may run one itself (a notebook)
        try:
            asyncio.run(handshake())
        except BaseException as exc:  # reported on the calling thread
            failed.append(exc)

    probe = threading.Thread(target=run, name="myutils-dask-probe", daemon=True)
    probe.start()
    probe.join(timeout + 5)
    if probe.is_alive() or failed:
        error = failed[0] if failed else None
        if error is None or isinstance(error, (TimeoutError, asyncio.TimeoutError)):
            raise UsageError(_no_answer(address, timeout, where, ""))
        # something answered, but not Dask's handshake (another service on that port)
        raise UsageError(_no_answer(address, None, where, f"something answered, but not as a Dask scheduler: "
                                                          f"{type(error).__name__}: {str(error)[:120]}"))


def _no_answer(address: str, timeout: float | None, where: str, reason: str) -> str:
    within = f" within {timeout:g} s" if timeout is not None else ""
    why = f" ({reason})" if reason else ""
    return (f"no Dask scheduler answered at {address}{within}{why}, given by {where}; check the address and that "
            "the scheduler runs (the time allowed is Dask's distributed.comm.timeouts.connect)")


@contextlib.contextmanager
def frozen_gc() -> Iterator[None]:
    """The objects of this process, as of now, out of the collector's way for the block (``gc.freeze``).

    For the work a command does in this process after a Dask call: ``distributed``'s import left
    ~65,000 objects here that every full collection would walk again (``stragglers`` at 1,000 ranks:
    its report, which allocates each step's sections, took 0.25-0.95 s longer after a local cluster,
    3 paired runs).
    Undone at the end (``gc.unfreeze``: what it froze is collected as before); nothing is done in a
    process that froze objects itself, whose freeze is its own to undo.
    """
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@dataclass
class LocalDask:
    """A running local cluster: its client, its scheduler's cluster object and its worker processes."""

    client: Any
    cluster: Any
    procs: Sequence[Any]

    @property
    def workers(self) -> int:
        """Worker processes (one task thread each)."""
        return len(self.procs)

    def result(self, future: Any) -> Any:
        """``future.result()``, unless every worker exits first: then a ``UsageError`` saying so.

        The workers have no nanny to restart them: once all of them have exited nothing will ever
        run the tasks, and waiting would hang the command.
        """
        done = threading.Event()
        future.add_done_callback(lambda _: done.set())
        while not done.wait(timeout=1):
            if not any(p.is_alive() for p in self.procs):
                codes = sorted({p.exitcode for p in self.procs}, key=str)
                raise UsageError(f"the local Dask workers exited (exit codes {codes}) before the tasks finished; "
                                 "use executor 'process', or a running cluster")
        return future.result()


@contextlib.contextmanager
def local_cluster(workers: int | None, preload: Sequence[str] = (), scratch: str | os.PathLike[str] | None = None,
                  *, tasks: int = 1) -> Iterator[LocalDask]:
    """A cluster for the block: a scheduler in this process and ``workers`` single-threaded worker processes.

    ``workers=None``: one per core, but no more than ``tasks`` (the calls the block will make).

    ``preload``: modules the workers import before their first task, ``my_utils.`` ones in the fork
    server (once for all), any other in each worker (one that fails to import would take the server
    down; a worker that cannot import one leaves the error to the first task that needs it).
    ``scratch``: the cluster's space (made if missing, left in place); by default a scratch folder of
    this process, removed with the block. Everything listens on 127.0.0.1 only, on free ports.
    Raises ``UsageError`` when ``distributed`` is not installed.
    """
    # looked up, not imported: the import (0.3-0.4 s here) runs below, beside the fork server's
    if find_spec("distributed") is None:
        raise UsageError("executor 'dask' needs dask.distributed; install a distribution's [dask] extra "
                         "(`pip install 'myutils-profiling[dask]'` or `'myutils-distributed[dask]'`), or use "
                         "executor 'process'")
    workers = max(1, workers or min(tasks, os.cpu_count() or 1))
    # forkserver, not fork: forking this process, which holds threads (dask's loop, torch), can deadlock
    # the child; the server is a fresh single-threaded interpreter. Its preload applies to its first
    # start in this process; it then stays up, and later calls start their workers in ~0.1 s.
    own_modules = [m for m in preload if m.startswith("my_utils.")]
    if "forkserver" in multiprocessing.get_all_start_methods():
        _own_mp_tempdir()
        ctx: Any = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["distributed", __name__, *own_modules])
    else:  # Windows: each worker imports distributed itself
        ctx = multiprocessing.get_context("spawn")
    owned = scratch is None
    space: str | None = None
    pipes: list[Any] = []
    procs: list[Any] = []
    starter: threading.Thread | None = None
    try:
        # the workers' scratch space goes with the call, never left in the cwd; named by this process, so
        # that a later run removes it if this one is killed
        space = str(make_scratch("myutils-dask-")) if owned else str(scratch)
        if not owned:
            Path(space).mkdir(parents=True, exist_ok=True)
        config = {**QUIET_WORKERS, "temporary-directory": space}
        for n in range(workers):
            receive, send = ctx.Pipe(duplex=False)
            procs.append(ctx.Process(target=_local_worker, name=f"myutils-dask-worker-{n}", daemon=True,
                                     args=(receive, list(preload), space, config, dict(os.environ), owner_token())))
            pipes.append(send)
        failed: list[BaseException] = []
        starter = threading.Thread(target=_start_all, args=(procs, failed), name="myutils-dask-start", daemon=True)
        starter.start()
        try:
            import dask
            from distributed import Client, LocalCluster

            quiet_distributed()
            with contextlib.ExitStack() as started:
                # Ctrl-C or SIGTERM while the scheduler starts acts once it has, so that it is closed (a
                # scheduler interrupted half-way is never closed: its loop thread outlives the call)
                with signals_deferred():
                    started.enter_context(dask.config.set({**QUIET_LOOP, "temporary-directory": space}))
                    # loopback only, its HTTP routes too: a dashboard address without a host (":0") binds
                    # 0.0.0.0, where /info and /json/identity.json list the workers, folders and logs to any
                    # host; port 0 is a free one (None binds the fixed 8787). silence_logs: its INFO lines
                    # stay quiet. QUIET_LOOP: the scheduler's system monitor (every 0.5 s) and tick (20 ms)
                    # took 2.6 % of a core while idle, 0.75 % with these
                    cluster = started.enter_context(LocalCluster(
                        n_workers=0, host="127.0.0.1", dashboard_address=LOOPBACK_HTTP, silence_logs=40,
                        local_directory=space))
                starter.join()
                if failed:
                    raise failed[0]
                for send in pipes:
                    send.send(cluster.scheduler_address)
                try:
                    with Client(cluster, set_as_default=False) as client:
                        yield LocalDask(client, cluster, procs)
                except BaseException:
                    _kill(procs)  # a failure, Ctrl-C or SIGTERM: the other tasks' results are not wanted
                    raise
                finally:
                    with signals_deferred():
                        _close_workers(cluster, procs)
        except BaseException:
            _kill(procs)
            raise
    finally:
        # Ctrl-C or SIGTERM during the clean-up acts once it is over: interrupted, a join let a closing
        # worker write into the scratch folder after its removal, or the removal stopped half-way, and
        # the folder was left in $TMPDIR (the crash matrix caught it once in 3 SIGINTs)
        with signals_deferred():
            _finish(starter, pipes, procs)
            if owned and space is not None:
                remove_scratch(space)


def _finish(starter: threading.Thread | None, pipes: Sequence[Any], procs: Sequence[Any]) -> None:
    """End the local workers: wait for their start, close their pipes, and join them (or end them)."""
    if starter is not None:
        starter.join()
    for send in pipes:
        send.close()  # a worker still waiting for the address gives up
    for proc in procs:
        if proc.pid is None:
            continue
        # _close_workers stopped every registered worker; one that never registered (the call failed
        # early) or hangs is ended
        proc.join(timeout=3)
        if proc.is_alive():
            proc.terminate()
            proc.join(timeout=5)


def _kill(procs: Sequence[Any]) -> None:
    """SIGKILL the local workers still running (their tasks' results are no longer wanted)."""
    for proc in procs:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            if proc.pid is not None and proc.is_alive():
                proc.kill()


def _close_workers(cluster: Any, procs: Sequence[Any]) -> None:
    """Stop the workers while the scheduler still runs, the client (and its results' keys) gone.

    Closing the scheduler under running workers can catch a heartbeat in flight, which a worker
    reports with a traceback on stderr; retiring them instead copies the results still held from
    one worker to the other.
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


def _local_worker(receive: Any, preload: Sequence[str], scratch: str, config: dict[str, Any],
                  environ: dict[str, str], owner: str) -> None:
    """One worker process of the local cluster: import, wait for the scheduler's address, serve."""
    import asyncio
    import logging

    import dask
    from distributed import Worker

    # its parent is the fork server, which outlives a killed caller by a moment: watch the caller itself
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(owner)

    # the fork server's environment is the one of its first start: the caller's of now wins, and Dask's
    # config, read from DASK_* variables at import, is read again if they changed
    stale = {k: v for k, v in environ.items() if k.startswith("DASK_")} != \
        {k: v for k, v in os.environ.items() if k.startswith("DASK_")}
    os.environ.clear()
    os.environ.update(environ)
    if stale:
        dask.config.refresh()
    for module in preload:
        try:  # the tasks' modules are imported now, while the scheduler starts, not in the first task
            importlib.import_module(module)
        except Exception:  # the first task raises the real error, where it is reported
            pass
    try:
        address = receive.recv()
    except EOFError:  # the call ended before the scheduler started
        return
    # the caller holds the other end until the call is over: EOF means it ended (or was killed), and this
    # worker goes at once, before a lost scheduler makes it print tracebacks on the caller's stderr
    threading.Thread(target=_exit_on_eof, args=(receive,), name="myutils-caller-watch", daemon=True).start()
    dask.config.set(config)
    logging.getLogger("distributed").setLevel(logging.ERROR)
    logging.getLogger("distributed.worker").addFilter(no_task_failures)

    async def serve() -> None:
        async with Worker(address, nthreads=1, host="127.0.0.1", local_directory=scratch,
                          name=f"{os.getpid()}") as worker:
            gc.freeze()  # distributed's own ~65,000 objects: out of every later collection's way
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
