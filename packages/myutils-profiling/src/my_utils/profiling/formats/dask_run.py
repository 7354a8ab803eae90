"""The Dask side of :func:`~my_utils.profiling.formats.parallel.stream_many`: join a cluster, or start one here.

``executor="dask"`` joins the scheduler named by ``DASK_SCHEDULER_ADDRESS`` or else starts a
local cluster for the call; an address (``tcp://host:8786``) or a ``distributed.Client`` joins
that cluster (:func:`dask_session`). A local cluster listens on 127.0.0.1 only, on free ports,
keeps its scratch space in a temporary folder, and leaves one thing behind: multiprocessing's
fork server, which ends with this process and lets the next call's workers start in ~0.1 s.
On a real cluster the findings below apply to its workers too: set
``distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_`` to ``null`` in their Dask
config, and the settings of :data:`~my_utils.core.dask_local.QUIET_WORKERS`. An error raised
on a cluster's worker names that worker (:func:`with_worker`).

Where Dask's time went (8 rank files, links to one 54 MB-class real trace, 2 workers on a
shared 2-core machine, a fresh interpreter per sample; bench/bench_diff_trace.py measures
wall time and the CPU seconds of all processes, Dask and pool interleaved):

* Results: a list of ``MetricEvent`` dataclasses pickles at ~22 µs an event (frozen slotted
  dataclasses are rebuilt attribute by attribute), so event lists travel as plain tuples
  (:func:`~my_utils.profiling.formats.batches.packed`; 12 ms instead of 52 ms for a
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
  (``QUIET_WORKERS``; same CPU, 600-800 against 100-180 involuntary context switches).
* Start-up, the rest: ``import distributed`` costs 0.6-0.8 s of CPU in every process that
  needs it. With nannies, each worker process was spawned and imported it after this
  process had (3 imports in a row on the critical path; 2.7-3.6 s CPU for an idle cluster).
  Now the workers are plain ``Worker`` processes forked by a fork server that imports
  ``distributed`` once, beside this process's import (:mod:`my_utils.core.dask_local`, shared
  with ``stragglers``): 0.1 s of CPU a worker before its first task instead of 0.8 s, and
  closing takes 0.05 s instead of 0.2-0.75 s.
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
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from importlib.util import find_spec
from typing import Any

from my_utils.core.dask_local import LocalDask, join_scheduler, local_cluster, quiet_distributed
from my_utils.core.errors import UsageError
from my_utils.profiling.formats.batches import UNSEEN_ATTR, WORKER_ATTR, run_batch

DASK_ENV = "DASK_SCHEDULER_ADDRESS"
_SCHEMES = ("tcp://", "tls://", "ucx://", "inproc://", "ws://", "wss://")


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
    local: LocalDask | None = None  # the local cluster this call started (None: a cluster joined by address)
    named: bool = False  # errors name the worker that raised them (a real cluster)

    def submit(self, func: Callable[..., Any], calls: Sequence[tuple[Any, ...]], keep_going: bool) -> Any:
        """One batch of calls as one task (:func:`~my_utils.profiling.formats.batches.run_batch`)."""
        return self.client.submit(run_batch, func, list(calls), keep_going, self.named, pure=False)

    def sees(self, folder: str) -> bool:
        """Whether every worker joined now sees ``folder`` (a local cluster's do; another cluster's are asked).

        A folder made here with a unique name is seen by a worker only through a shared filesystem.
        """
        if self.local is not None:
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
        try:
            # a local cluster's workers have no nanny: once all of them exited, that is said
            return self.local.result(future) if self.local is not None else future.result()
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
                # the tasks' modules are imported by the workers while the scheduler starts
                preload = ["my_utils.profiling.formats.batches", *([module] if module else [])]
                with local_cluster(max_workers, preload, tasks=calls) as local:
                    yield DaskSession(local.client, local.workers, local)
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
        _dask_client_class()  # says how to install Dask when it is not
        quiet_distributed()
        with join_scheduler(address, where) as client:  # bounded: a silent or refused address is said at once
            yield DaskSession(client, _threads(client), named=True)
        return
    client_class = _dask_client_class()
    if isinstance(executor, client_class):
        yield DaskSession(executor, _threads(executor), named=True)
        return
    raise UsageError(f"executor of type {type(executor).__name__} is not supported; pass 'dask', an address "
                     "or a Client")


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
