"""Read a run's files once, in parallel across files: Kineto traces, Nsight exports, and every provider's files.

One pool of tasks for the whole run, whatever the kinds: one task per Kineto trace (the
provider's events and the Kineto analyses from one pass, ``kineto.read.provider.read_trace``),
one task for the Nsight inputs together (the NCCL alignment needs every export at once,
``run.nsight.read_nsight``), one task per other file (its provider's reader). The tasks
run largest first, so the slowest file starts at once and the small ones fill the gaps. Small
runs stay in this process (``providers.parallel.pool_for``): starting workers would cost more.

Events: the traces' and exports' events are kept only when the caller asks (``with_events``:
without a metric-events file, or for the run model). The other files' events are always kept,
one list per file; :func:`events_beside` joins them to a metric-events file without counting
twice what that file already holds.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from my_utils.core.events import MetricEvent

__all__ = ["READERS", "ReadPlan", "RunRead", "events_beside", "read_events_file", "read_run"]

#: The reader of each provider's files: ``module:function`` taking ``(path, rank)`` and returning events.
READERS: dict[str, str] = {
    "mytimer": "my_utils.profiling.formats.mytimer:read_profile_csv_events",
    "module_profiler": "my_utils.profiling.formats.module_summary:read_module_summary",
    "nccl_log": "my_utils.profiling.formats.nccl_log:read_nccl_log",
    "nccl_inspector": "my_utils.profiling.formats.nccl_inspector:read_nccl_inspector",
    "perf_stat": "my_utils.profiling.formats.perf_stat:read_perf_stat",
    "dcgm_dmon": "my_utils.profiling.formats.dcgm:read_dcgm_dmon",
    "cprofile": "my_utils.profiling.formats.cprofile:read_pstats",
    "metric_events": "my_utils.profiling.run.read:read_events_file",
}


@dataclass(frozen=True)
class ReadPlan:
    """What to read: Kineto traces, nsys export specs and ncu exports, and ``(provider, file, rank)`` of the rest."""

    traces: tuple[Path, ...] = ()
    nsys: tuple[str, ...] = ()
    ncu: tuple[Path, ...] = ()
    readers: tuple[tuple[str, Path, int | None], ...] = ()

    def files(self) -> list[Path]:
        """Every file of the plan (nsys specs that are files included), for sizing the pool."""
        return [*self.traces, *(Path(s) for s in self.nsys if Path(s).is_file()), *self.ncu,
                *(f for _p, f, _r in self.readers)]


@dataclass
class RunRead:
    """What one pass over the plan gave: Kineto analyses, the Nsight read, each other file's events."""

    trace_events: list[MetricEvent] = field(default_factory=list)
    kineto: Any = None  # kineto.model.KinetoAnalysis
    nsight: Any = None  # run.nsight.NsightRead
    by_file: dict[Path, list[MetricEvent]] = field(default_factory=dict)  # the readers' files

    def events(self) -> list[MetricEvent]:
        """Every event read: the traces', the exports' (when asked for), then each other file's."""
        nsight = list(self.nsight.events) if self.nsight is not None else []
        return [*self.trace_events, *nsight, *(e for evs in self.by_file.values() for e in evs)]


def read_events_file(path: Path, rank: int | None = None) -> list[MetricEvent]:
    """The events of a metric-events file (one of several in a run; ``rank`` is unused: each event has its own)."""
    from my_utils.core.events import read_events

    return list(read_events(path))


def _read_reader(provider: str, path: str, rank: int | None) -> list[MetricEvent]:
    import importlib

    module, _, name = READERS[provider].partition(":")
    return list(getattr(importlib.import_module(module), name)(Path(path), rank))


def _read_task(kind: str, *args: Any) -> Any:
    """One task of the pool (module-level: workers import it by name)."""
    if kind == "trace":
        from my_utils.profiling.kineto.read.provider import read_trace

        return read_trace(*args)
    if kind == "nsight":
        from my_utils.profiling.run.nsight import read_nsight

        nsys, ncu, with_events, options = args
        return read_nsight(nsys, ncu, with_events=with_events, **options)
    return _read_reader(*args)


def _size(path: Path) -> int:
    try:
        size = path.stat().st_size
    except OSError:
        return 0
    return size * 20 if path.name.endswith(".gz") else size


def read_run(plan: ReadPlan, *, with_events: bool, trace_filter: Any = None, nsight_options: dict[str, Any] | None
             = None, executor: Any = None, progress: bool = False) -> RunRead:
    """Read every file of ``plan`` once (module docstring). ``nsight_options``: ``iteration_range``, ``gpu``, ``model``.

    ``executor`` as ``providers.parallel.run_many`` (default: this process for small runs, else a
    process pool); a file that is bad input raises its ``InputError`` naming it.
    """
    from my_utils.core.progress import progress as progress_bar
    from my_utils.profiling.formats._files import check_distinct_ranks
    from my_utils.profiling.formats.parallel import pool_for, stream_many
    from my_utils.profiling.kineto.run import KinetoPass, combine

    make = functools.partial(KinetoPass, trace_filter=trace_filter) if trace_filter is not None else KinetoPass
    calls: list[tuple[int, tuple[Any, ...]]] = []
    for t in plan.traces:
        calls.append((_size(t), ("trace", str(t), None, (make,), with_events)))
    if plan.nsys or plan.ncu:
        cost = sum(_size(Path(s)) for s in plan.nsys) + sum(_size(p) for p in plan.ncu)
        calls.append((cost, ("nsight", list(plan.nsys), list(plan.ncu), with_events, dict(nsight_options or {}))))
    for provider, path, rank in plan.readers:
        calls.append((_size(path), ("events", provider, str(path), rank)))
    order = sorted(range(len(calls)), key=lambda i: -calls[i][0])  # the largest first: it bounds the wall time
    if executor is None:
        executor = pool_for(plan.files())
    out = RunRead()
    results: dict[int, Any] = {}
    with progress_bar(len(calls), "analyze: reading", enabled=progress) as bar, \
            _closing(stream_many(_read_task, [calls[i][1] for i in order], executor)) as stream:
        for i, result in zip(order, stream, strict=True):
            results[i] = result
            bar.advance()
    reads = [results[i] for i, (_c, call) in enumerate(calls) if call[0] == "trace"]
    if reads:
        analyses = [r.results[0] for r in reads]
        check_distinct_ranks({Path(a.file): a.rank for a in analyses}, "trace")
        out.trace_events = [e for r in reads for e in r.events]
        out.kineto = combine(analyses)
    for i, (_c, call) in enumerate(calls):
        if call[0] == "nsight":
            out.nsight = results[i]
        elif call[0] == "events":
            out.by_file[Path(call[2])] = results[i]
    return out


def _closing(gen: Any) -> Any:
    import contextlib

    return contextlib.closing(gen)


def events_beside(events_file: Path, by_file: dict[Path, list[MetricEvent]], skipped: dict[Path, str]
                  ) -> Iterator[MetricEvent]:
    """The events of ``events_file``, then those of each other file whose source and ranks it does not already hold.

    A run folder often holds a collector's ``metrics_events.jsonl`` *and* the files it was made
    from (a MyTimer CSV ingested into it): counting both would double every step. A file whose
    (source, rank) pairs all appear in the events file is left out, and ``skipped`` says why.
    """
    from my_utils.core.events import iter_events

    held: set[tuple[str, int | None]] = set()
    for e in iter_events(events_file):
        held.add((e.source, e.rank))
        yield e
    for path, events in by_file.items():
        pairs = {(e.source, e.rank) for e in events}
        if pairs and pairs <= held:
            skipped[path] = f"its events are already in {events_file.name} (same source and ranks): not counted twice"
            continue
        yield from events
