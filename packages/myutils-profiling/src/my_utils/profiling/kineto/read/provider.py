"""TorchProfilerMetricsProvider: torch.profiler results, live or from Kineto trace files.

Files: ``.json`` / ``.json.gz`` Chrome traces written by ``export_chrome_trace`` or
``tensorboard_trace_handler`` (a file, or a folder of rank files parsed in parallel).
The rank comes from ``distributedInfo.rank``, else from the file name (``rank-3``,
``worker0``), else from the ``rank`` option; several files claiming one rank are refused.
Where rank files are parsed is the ``executor`` option (``providers.parallel.run_many``):
``"process"`` (default for several files), ``"serial"``, ``"dask"`` (the scheduler in
``$DASK_SCHEDULER_ADDRESS``, else a local cluster), a scheduler address, or a ``distributed.Client``.

Live: pass the ``torch.profiler.profile`` object; each ``collect()`` returns the metrics
of the profiling cycle finished since the previous call. With a schedule, build the
provider first (``TorchProfilerMetricsProvider(None)``) and pass ``trace_handler()`` as
the profiler's ``on_trace_ready``: every cycle is then queued, whenever collect() runs.
"""

from __future__ import annotations

import dataclasses
import gc
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from my_utils.core.errors import InputError, UnsupportedInputError
from my_utils.core.events import MetricEvent
from my_utils.profiling.formats._files import (
    FileProviderBase,
    check_distinct_ranks,
    rank_from_name,
    read_head,
)
from my_utils.profiling.kineto.read.aggregate import TraceAggregator
from my_utils.profiling.kineto.read.context import TraceContext
from my_utils.profiling.kineto.read.scan import ScannedRun

if TYPE_CHECKING:
    from my_utils.profiling.formats.parallel import Executor


TRACE_PATTERNS = ("*.json", "*.json.gz")


def trace_rank(path: Path, metadata: dict[str, Any], rank: int | None) -> tuple[int | None, str]:
    """The rank of one trace and where it came from: ``distributedInfo``, the file name, or ``rank``."""
    info = metadata.get("distributedInfo")
    info_rank = info.get("rank") if isinstance(info, dict) else None
    if isinstance(info_rank, int) and not isinstance(info_rank, bool):
        return info_rank, "distributedInfo"
    if (by_name := rank_from_name(path)) is not None:
        return by_name, "file name"
    return rank, ("option" if rank is not None else "unknown")


class TracePass(Protocol):
    """Something fed every event of a trace in the provider's own pass (see :func:`read_trace`).

    A pass may also define ``add_batch(events)``, taking a list of typed events
    (``trace_events.KinetoEvent``: only the fields that schema names) exactly as ``add`` takes
    each one's dict. When every pass of a read has it (and msgspec is installed), the trace
    is decoded into typed runs, ~3x faster; otherwise every event reaches ``add`` as a dict.
    A pass whose class sets ``needs_lanes = True`` gets ``pid``/``tid`` on the typed events too, one that sets
    ``needs_shapes = True`` the operators' recorded shapes as well (``trace_events.KinetoShapeEvent``).
    Either way a pass sees every event once, in file order.
    """

    def add(self, ev: dict[str, Any]) -> None:
        """One decoded trace event, in file order."""

    def finish(self, metadata: Mapping[str, Any], event_count: int, rank: int | None) -> Any:
        """After the last event: the trace's top-level keys, its event count and rank; returns the result."""


@dataclass(frozen=True)
class TraceRead:
    """One pass over a trace: the provider's events, the trace's context, and each extra pass's result."""

    events: list[MetricEvent]
    context: TraceContext
    results: tuple[Any, ...] = ()


def read_trace(path: str | Path, rank: int | None = None,
               passes: Sequence[Callable[[Path], TracePass]] = (), events: bool = True) -> TraceRead:
    """Stream one trace file once: its aggregated metric events, its context, and ``passes`` fed the same events.

    ``passes`` are factories (classes) called with the path; each gets every event and its
    ``finish`` result lands in ``TraceRead.results``, in order. This is how a command that
    needs both the events and other analyses of a trace reads it only once. ``events=False``
    skips the provider's aggregation (``TraceRead.events`` is empty) when only the passes and
    the context are wanted. ``rank`` is used only when the file has no ``distributedInfo``
    and its name holds no rank. Module-level so that process pools and Dask workers can import it.
    """
    from my_utils.profiling.kineto.read.context import trace_context
    from my_utils.profiling.kineto.read.stream import TraceStream

    p = Path(path)
    stream = TraceStream(p)
    agg = TraceAggregator(p)
    extra = [make(p) for make in passes]
    consumers: list[Any] = [_FiniteTimes(p), *([agg] if events else []), *extra]
    adds = [x.add for x in consumers]
    # the pass allocates ~2 objects per event, all acyclic (freed by reference counts): the cyclic
    # collector would run every 700 of them and cost ~10% of the pass for nothing
    collecting = gc.isenabled()
    gc.disable()
    try:
        if all(hasattr(x, "add_batch") for x in consumers):
            batch_adds = [x.add_batch for x in consumers]
            # the compiled scanner fills the aggregator's columns from the text: only when no other pass
            # needs the events themselves (the check of finite times only counts a run)
            scan = agg.scanner() if events and not extra else None
            lanes: bool | str = "shapes" if any(getattr(x, "needs_shapes", False) for x in consumers) else \
                any(getattr(x, "needs_lanes", False) for x in consumers)
            for item in stream.items(lanes=lanes, scan=scan):
                if item.__class__ is list or item.__class__ is ScannedRun:
                    for add_batch in batch_adds:
                        add_batch(item)
                else:
                    for add in adds:
                        add(item)
        else:
            for ev in stream.events():
                for add in adds:
                    add(ev)
    except RecursionError:  # JSON nested deeper than the decoder's recursion: bad input, one line
        raise InputError(p, f"traceEvents[{stream.event_count}]", "trace events nested less deeply than "
                                                                  "Python's JSON reader allows") from None
    finally:
        if collecting:
            gc.enable()
    found, source = trace_rank(p, stream.metadata, rank)
    context = trace_context(stream.metadata, p)
    if found is not None and found != context.rank:  # the ``rank`` option: what the events carry
        context = dataclasses.replace(context, rank=found, rank_source=source)
    out: list[MetricEvent] = []
    if events:  # sums of durations near 1e308 overflow to inf, silently: the consumers judge that (diff refuses it)
        out = agg.finish(stream.metadata, found, source)
    return TraceRead(out, context, tuple(x.finish(stream.metadata, stream.event_count, found) for x in extra))


class _FiniteTimes:
    """Refuses a ``ts`` or ``dur`` that is not a finite number (``1e999``, ``NaN``: what no clock writes).

    The trace decoders accept them (the stdlib reads ``NaN`` and ``1e999`` as floats); left in,
    an infinite time lands outside every step and an infinite duration poisons every sum.
    Costs one type test per event (integers are always finite; too large ones fail the parse).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.index = -1

    def add_batch(self, events: list[Any]) -> None:
        """Typed events are finite by their schema: only counted."""
        self.index += len(events)

    def add(self, ev: dict[str, Any]) -> None:
        """Check one event."""
        self.index += 1
        ts = ev.get("ts")
        dur = ev.get("dur")
        if (ts.__class__ is float and ts - ts != 0.0) or (dur.__class__ is float and dur - dur != 0.0):
            raise InputError(self.path, f"traceEvents[{self.index}]",
                             f"finite 'ts'/'dur' (µs); found ts {ts!r}, dur {dur!r}")


def parse_trace_file(path: str | Path, rank: int | None = None) -> list[MetricEvent]:
    """Stream one trace file and return its aggregated metric events (:func:`read_trace`'s ``events``).

    ``rank`` is used only when the file has no ``distributedInfo`` and its name holds
    no rank. Module-level so that process pools and Dask workers can import it.
    """
    return read_trace(path, rank).events


class TorchProfilerMetricsProvider(FileProviderBase):
    """Metrics from torch.profiler: a live ``profile`` object or Kineto trace files."""

    name = "torch_profiler"
    patterns = TRACE_PATTERNS
    what = "Kineto trace (.json/.json.gz)"

    def __init__(self, source: Any = None, *, rank: int | None = None, executor: Executor = None,
                 **options: Any) -> None:
        self.executor = executor
        self._live = None
        self._lock = threading.Lock()
        self._pending: list[MetricEvent] = []
        self._last_results: Any = None  # strong ref: its identity marks the cycle taken
        self._taken = 0
        if isinstance(source, (str, Path)):
            super().__init__(source, rank=rank, **options)
        else:
            self.path = Path()
            self.rank = rank
            self.options = options
            self._live = source

    def sniff(self, file: Path) -> None:
        """Refuse files that do not start like JSON."""
        head = read_head(file, 64).lstrip(b"\xef\xbb\xbf \t\r\n")
        if head[:1] not in (b"{", b"["):
            raise UnsupportedInputError(file, "byte 0", "a JSON trace (starting with '{' or '[')")

    def _read_files(self, files: list[Path]) -> list[MetricEvent]:
        calls = [(str(f), self.rank) for f in files]
        if len(calls) <= 1 and self.executor in (None, "serial"):
            # what run_many does for one call: in this process (importing the pools costs a one-file
            # command ~0.05 s of CPU: multiprocessing, concurrent.futures, the Dask glue)
            results = [parse_trace_file(*args) for args in calls]
        else:
            from my_utils.profiling.formats.parallel import run_many

            results = run_many(parse_trace_file, calls, self.executor)
        ranks = {f: next((e.rank for e in evs), self.rank) for f, evs in zip(files, results, strict=True)}
        check_distinct_ranks(ranks, "trace")
        return [e for evs in results for e in evs]

    # -- live profiler -----------------------------------------------------------------

    def trace_handler(self, inner: Callable[[Any], None] | None = None) -> Callable[[Any], None]:
        """An ``on_trace_ready`` callable: records the finished cycle, then calls ``inner``."""

        def handler(prof: Any) -> None:
            self._take(prof)
            if inner is not None:
                inner(prof)

        return handler

    def _take(self, prof: Any) -> None:
        inner = getattr(prof, "profiler", None)
        results = getattr(inner, "kineto_results", None)
        if inner is None or results is None or results is self._last_results:
            return  # not stopped yet, or this cycle was already taken
        try:
            function_events = list(inner.function_events or ())
        except Exception as exc:  # results that torch cannot parse: report, keep training
            import logging  # here: the module costs ~2.5 MB to every process that reads a trace

            logging.getLogger("my_utils.profiling.kineto.read.provider").warning(
                "torch profiler results could not be read: %s", exc)
            return
        # acc_events=True keeps earlier cycles in the list: take only what is new
        fresh = function_events[self._taken:] if getattr(prof, "acc_events", False) else function_events
        from my_utils.profiling.kineto.read.live import events_from_function_events

        start_ns = None
        try:
            start_ns = int(results.trace_start_ns())
        except Exception:  # older torch: no wall clock for this cycle
            start_ns = None
        events = events_from_function_events(
            fresh, self.rank, trace_start_ns=start_ns, step_num=getattr(prof, "step_num", None)
        )
        with self._lock:
            self._last_results = results
            self._taken = len(function_events)
            self._pending.extend(events)

    def collect(self, step: int | None = None) -> Sequence[MetricEvent]:
        """Events of trace files not read before, or of profiling cycles finished since the last call."""
        if self.path != Path():
            return super().collect(step)
        if self._live is not None:
            self._take(self._live)
        with self._lock:
            out, self._pending = self._pending, []
        return out
