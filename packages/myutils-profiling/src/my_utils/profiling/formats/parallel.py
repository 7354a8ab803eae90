"""Run one parsing function over many files: in-process, local processes, or a Dask cluster.

Runs with hundreds of ranks have hundreds of trace files; each parse is independent, so the
work spreads over processes (default) or over Dask (install the ``[dask]`` extra; see
:mod:`~my_utils.profiling.formats.dask_run`). Errors keep their type and message.

:func:`stream_many` yields the results in call order *as they come*, with a bounded number
of calls in flight, so the caller can write each rank's result and let it go: the memory of
this process does not grow with the number of calls. :func:`run_many` is its list.

**Batches.** A task is a batch of calls (:mod:`~my_utils.profiling.formats.batches`): a
Dask task costs ~5 ms (scheduling, the workers' event loops), a pool task ~0.1 ms, and a
small rank's parse 30-60 ms. The batch size is ``calls // (4 x workers)``, between 1 and
:data:`BATCH_MAX` (8): every worker still gets at least 4 batches (a slow file holds up at
most a quarter of a worker's share), 8 calls share one task's cost, and a few large files
(8 ranks of 54 MB on 2 workers) stay one call a task. At most ``2 x workers`` batches are in
flight: each worker has the next batch queued while its last result is consumed, and this
process holds at most that many batches' results.

Calls whose results are a few numbers (``trace``'s and ``ingest``'s tasks return metadata; their
output goes to spill files) go to Dask in batches of up to :data:`DASK_SMALL_BATCH_MAX` (32)
instead (``small_results=True``): 1,000 ranks' two phases were 375 tasks and ~6 ms of the
scheduler's and client's CPU each in this process, on the cores the workers need. The cap stays 8
for results that hold events (``ingest`` on workers that cannot see its spill folder,
:meth:`Runner.sees`), whose batches this process holds in memory.
"""

from __future__ import annotations

import contextlib
import os
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from my_utils.profiling.formats.batches import Failed, outcomes, packed, run_batch, unpacked

if TYPE_CHECKING:
    from concurrent.futures import Future, ProcessPoolExecutor

    from my_utils.profiling.formats.dask_run import DASK_ENV as DASK_ENV

# The pools, the Dask glue and the process lifecycle are imported where a run needs them: one call
# runs in this process, and a one-file command then never pays for multiprocessing, concurrent.futures
# or the Dask session code (~0.05 s of CPU and ~5 MB: issues 20 and 22).

__all__ = ["BATCH_MAX", "DASK_ENV", "DASK_SMALL_BATCH_MAX", "POOL_MIN_BYTES", "Executor", "Failed", "Runner",
           "batch_size", "pool_for", "run_many", "runner", "stream_many"]

T = TypeVar("T")

Executor = Any  # None | "serial" | "process" | "dask" | "tcp://..." address | distributed.Client
BATCH_MAX = 8  # calls per task at most
DASK_SMALL_BATCH_MAX = 32  # calls per Dask task at most when each result is small (``small_results``)
BATCHES_PER_WORKER = 4  # batches each worker gets at least (when there are enough calls)
WINDOW_PER_WORKER = 2  # batches in flight per worker

#: Below this many bytes of input text in all, starting worker processes costs more than it saves
#: (a spawned worker imports the parser in ~0.5 s; a 4 MB trace parses in ~0.2 s).
POOL_MIN_BYTES = 16 << 20
_GZIP_RATIO = 20  # Kineto JSON compresses about 20:1 (the real traces: 17-24)

# the names tests and older callers use
_packed, _unpack = packed, unpacked


def __getattr__(name: str) -> Any:
    """``DASK_ENV``, re-exported from ``dask_run`` without importing it with this module."""
    if name == "DASK_ENV":
        from my_utils.profiling.formats.dask_run import DASK_ENV

        return DASK_ENV
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def batch_size(calls: int, workers: int, most: int = BATCH_MAX) -> int:
    """Calls per task for ``calls`` calls on ``workers`` workers, at most ``most`` (see the module doc)."""
    return max(1, min(most, calls // (max(workers, 1) * BATCHES_PER_WORKER)))


def pool_for(files: Sequence[str | Path]) -> str | None:
    """``"serial"`` for small inputs, else None (``run_many``'s default: a process per file)."""
    total = 0
    for f in files:
        try:
            size = Path(f).stat().st_size
        except OSError:
            return None  # the parse names the file
        total += size * (_GZIP_RATIO if str(f).endswith(".gz") else 1)
    return "serial" if total < POOL_MIN_BYTES else None


def run_many(func: Callable[..., T], calls: Sequence[tuple[Any, ...]], executor: Executor = None,
             max_workers: int | None = None) -> list[T]:
    """``[func(*args) for args in calls]``, spread according to ``executor``.

    ``None`` picks in-process for one call and local processes otherwise; ``"serial"``
    forces in-process; ``"process"`` forces processes; ``"dask"`` joins ``$DASK_SCHEDULER_ADDRESS``
    or starts a local Dask cluster; a scheduler address (``tcp://``, ``tls://``, ``ucx://``)
    or a ``distributed.Client`` runs the calls on that cluster. The first failing call (in
    call order) raises its error.
    """
    with contextlib.closing(stream_many(func, calls, executor, max_workers)) as results:
        return list(results)


def stream_many(func: Callable[..., T], calls: Sequence[tuple[Any, ...]], executor: Executor = None,
                max_workers: int | None = None, *, batch: int | None = None,
                keep_going: bool = False) -> Generator[Any, None, None]:
    """``func(*args)`` for each call, yielded in call order as the results come (see :func:`run_many`).

    A failing call raises its error once the results before it were yielded; with
    ``keep_going`` a :class:`Failed` holding the error is yielded in its place instead and the
    other calls go on. ``batch`` overrides the calls per task (:func:`batch_size`). Close the
    iterator (``contextlib.closing``) when stopping early: the workers end at once.
    """
    calls = list(calls)
    with runner(executor, max_workers, len(calls), getattr(func, "__module__", None)) as run:
        yield from run.stream(func, calls, batch=batch, keep_going=keep_going)


@contextlib.contextmanager
def runner(executor: Executor = None, max_workers: int | None = None, calls: int = 2,
           module: str | None = None) -> Iterator[Runner]:
    """One set of workers for several :meth:`Runner.stream` calls (a command with two phases starts them once).

    ``calls`` is how many calls the first stream will have (``None`` runs one call in this
    process, and a local cluster is not started for none); ``module`` is imported by a local
    cluster's workers while they start. The workers end with the block, at once on an error.
    """
    if executor == "serial" or (executor is None and calls <= 1):
        yield Runner(1)
        return
    if executor in (None, "process"):
        workers = max_workers or min(calls, os.cpu_count() or 1)
        run = Runner(workers)
        try:
            yield run
        except BaseException:  # an error, Ctrl-C, SIGTERM: the other tasks' results are not wanted
            run.stop()
            raise
        finally:
            run.close()
        return
    from my_utils.core.lifecycle import sigterm_exits
    from my_utils.profiling.formats.dask_run import DASK_ENV, dask_session, require_dask

    if isinstance(executor, str) and executor == "dask" and not os.environ.get(DASK_ENV, "").strip():
        require_dask()
        if not calls:  # no cluster is started for nothing
            yield Runner(1)
            return
    with sigterm_exits(), dask_session(executor, max_workers, calls, module) as session:
        yield Runner(session.workers or max_workers or 1, session)


class Runner:
    """Where :func:`runner`'s calls run: this process (one worker), a process pool (made at first use), or Dask."""

    def __init__(self, workers: int, dask: Any = None) -> None:
        self.workers = workers
        self.dask = dask
        self._pool: ProcessPoolExecutor | None = None

    def stream(self, func: Callable[..., Any], calls: Sequence[tuple[Any, ...]], *, batch: int | None = None,
               keep_going: bool = False, small_results: bool = False) -> Generator[Any, None, None]:
        """``func(*args)`` for each call, in call order as they come (see :func:`stream_many`).

        ``small_results``: each result is small (a few numbers, not events), so Dask may take
        larger batches (:data:`DASK_SMALL_BATCH_MAX`; see the module doc).
        """
        calls = list(calls)
        most = DASK_SMALL_BATCH_MAX if small_results and self.dask is not None else BATCH_MAX
        size = batch or batch_size(len(calls), self.workers, most)
        window = WINDOW_PER_WORKER * self.workers
        if self.dask is not None:
            from my_utils.profiling.formats.dask_run import with_worker

            session = self.dask
            yield from _in_order(lambda part: session.submit(func, part, keep_going), session.fetch,
                                 _batches(calls, size), window, keep_going, with_worker if session.named else None)
        elif self.workers <= 1 or len(calls) <= 1:
            yield from _serial(func, calls, keep_going)
        else:
            from my_utils.core.lifecycle import sigterm_exits

            pool = self._started()
            with sigterm_exits():
                try:
                    yield from _in_order(lambda part: pool.submit(run_batch, func, part, keep_going), _result,
                                         _batches(calls, size), window, keep_going, None)
                except BaseException:  # an error, Ctrl-C, SIGTERM, or the caller stopped early (GeneratorExit)
                    self.stop()
                    raise

    def sees(self, folder: str) -> bool:
        """Whether every worker sees ``folder`` of this machine at the same path (a spill folder).

        Always for this process, its pool and a local cluster; a cluster joined by address is asked.
        """
        return self.dask is None or self.dask.sees(folder)

    def _started(self) -> ProcessPoolExecutor:
        if self._pool is None:
            from my_utils.core.lifecycle import spawn_pool

            self._pool = spawn_pool(self.workers)
        return self._pool

    def stop(self) -> None:
        """End the pool's workers now (their results are no longer wanted); a later stream starts new ones."""
        if self._pool is not None:
            from my_utils.core.lifecycle import stop_pool

            pool, self._pool = self._pool, None
            stop_pool(pool)

    def close(self) -> None:
        """Shut the pool down (its workers have nothing left to do)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def _serial(func: Callable[..., Any], calls: Sequence[tuple[Any, ...]], keep_going: bool) -> Iterator[Any]:
    for args in calls:
        if not keep_going:
            yield func(*args)
            continue
        try:
            result = func(*args)
        except Exception as exc:
            yield Failed(exc)
        else:
            yield result


def _batches(calls: Sequence[tuple[Any, ...]], size: int) -> Iterator[Sequence[tuple[Any, ...]]]:
    return (calls[i:i + size] for i in range(0, len(calls), size))


def _in_order(submit: Callable[[Sequence[tuple[Any, ...]]], Any], fetch: Callable[[Any], Any],
              batches: Iterable[Sequence[tuple[Any, ...]]], window: int, keep_going: bool,
              translate: Callable[[Exception], Exception] | None) -> Iterator[Any]:
    """Submit the batches ``window`` at a time; yield their results in order (the next batch is queued first)."""
    pending: deque[Any] = deque()
    todo = iter(batches)
    for part in todo:
        pending.append(submit(part))
        if len(pending) >= window:
            break
    while pending:
        done = fetch(pending.popleft())
        for part in todo:  # one batch out, one in: the workers stay busy while the results are used
            pending.append(submit(part))
            break
        for result in outcomes(done):
            if isinstance(result, Failed):
                error = translate(result.error) if translate is not None else result.error  # type: ignore[arg-type]
                if not keep_going:
                    raise error
                result = Failed(error)
            yield result


def _result(future: Future[Any]) -> Any:
    return future.result()
