"""Metric events folded into one cell per (name, step, rank, source): the analyzer's one pass over events.

``EventAggregate`` streams an events file (or rows, or events) and keeps count, sum, min and max per
cell, so memory grows with names x steps x ranks, never with the number of raw events.
``AggregatedEvents`` shows the cells as the events a rule reads (one aggregated event per cell, its
``attrs`` carrying ``count``/``min``/``max``) and builds the rules' series once. Split from
``analysis.analyzer`` (which runs the rules and builds the report) so that each module has one role.
"""

from __future__ import annotations

import functools
import gc
import logging
import math
import operator
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from itertools import islice
from pathlib import Path
from typing import Any, ParamSpec, TypeVar, overload

from my_utils.core.events import MetricEvent, trusted_event
from my_utils.profiling.analysis.nsight.analyze import SOURCES as NSIGHT_SOURCES
from my_utils.profiling.analysis.rules._series import (
    START_SOURCES,
    Series,
    SeriesKey,
    SeriesSource,
)
from my_utils.profiling.analysis.tables import (
    Cell,
    cell_stats,
)

_log = logging.getLogger("my_utils.profiling.analysis")

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _without_cyclic_gc(method: Callable[_P, _R]) -> Callable[_P, _R]:
    """Run ``method`` with the cyclic garbage collector paused (restored after, as it was).

    An analysis holds ~1M cells and their series, all acyclic, and allocates steadily while it
    runs: each full collection walked all of them (3 per 1M-event analysis, ~15 % of its CPU
    time). Reference counting still frees everything as usual; only cycles wait for the end.
    """
    @functools.wraps(method)
    def paused(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        if not gc.isenabled():
            return method(*args, **kwargs)
        gc.disable()
        try:
            return method(*args, **kwargs)
        finally:
            gc.enable()
    return paused


class EventAggregate:
    """Events folded per (name, step, rank, source): what the analyzer keeps instead of the events."""

    def __init__(self) -> None:
        self.cells: dict[tuple[str, int | None, int | None, str], Cell] = {}
        self.meta: dict[tuple[str, str], tuple[str, str, int | None]] = {}  # (name, source) -> kind, unit, depth
        self.events = 0
        self.by_source: Counter[str] = Counter()
        self.run_ids: set[str] = set()
        self.trace_files: set[str] = set()
        self.nsight_files: set[tuple[str, str]] = set()  # (source, file name) of nsys/ncu events
        self.first_ts: float | None = None
        self.last_ts: float | None = None
        self.table_limits: dict[str, Any] = {}  # filled by the tables: rows kept per table and how
        # occurrences beyond one per event, per cell: a provider's pre-aggregated event (Kineto: one
        # event per kernel name and step) says in attrs["count"] how many launches it stands for
        self.extra_occurrences: dict[tuple[str, int | None, int | None, str], int] = {}
        # the first start (unix s) of each cell of a source whose events are timed regions with their
        # start (MyTimer): the rules tell a rank's work from its wait for the others by it
        self.starts: dict[tuple[str, int | None, int | None, str], float] = {}

    def cell(self, key: tuple[str, int | None, int | None, str]) -> tuple[int, float, float, float]:
        """``(count, sum, min, max)`` of the cell ``(name, step, rank, source)`` (KeyError when absent)."""
        return cell_stats(self.cells[key])

    def add(self, e: MetricEvent) -> None:
        """Fold one event in."""
        self.fold_rows(event_rows((e,)))

    def fold_rows(self, rows: Iterable[Mapping[str, Any]], advance: Callable[[int], object] = lambda n: None) -> None:
        """Fold in every validated event object (``iter_event_rows``, or ``event_rows`` of events),
        calling ``advance(n)`` every 65536 rows and at the end.

        The hot loop of a big run (~1M rows): one loop with the state in locals, since a call
        per row and the attribute lookups were a third of the reading.
        """
        cells = self.cells
        meta = self.meta
        extra = self.extra_occurrences
        starts = self.starts
        run_ids = self.run_ids
        nsight_files = self.nsight_files
        by_source: dict[str, int] = {}
        first, last = self.first_ts, self.last_ts
        get = cells.get
        intern = sys.intern
        chunk = total = 0
        try:
            for row in rows:
                # one string object per distinct name and source: the decoder makes a new one per
                # line, and each cell key would keep its own (~100 MB on a 1M-cell run)
                name = intern(row["name"])
                v = row["value"]
                source = intern(row["source"])
                step = row["step"]
                rank = row["rank"]
                ts = row["ts"]
                run_id = row["run_id"]
                if source in by_source:
                    by_source[source] += 1
                else:
                    by_source[source] = 1
                if run_id and run_id not in run_ids:
                    run_ids.add(run_id)
                key = (name, step, rank, source)
                attrs = row["attrs"]
                if attrs:
                    n = attrs.get("count")
                    if n.__class__ is int and n > 1:
                        extra[key] = extra.get(key, 0) + n - 1
                cell = get(key)
                if cell is None:
                    cells[key] = v if v == v else [0, 0.0, math.inf, -math.inf]
                    mk = (name, source)
                    if mk not in meta:
                        depth = attrs.get("depth")
                        meta[mk] = (row["kind"], row["unit"], depth if isinstance(depth, int) else None)
                        if source == "torch_profiler" and isinstance(attrs.get("file"), str):
                            self.trace_files.add(attrs["file"])
                    if source in NSIGHT_SOURCES and isinstance(attrs.get("file"), str):  # per cell: per export
                        nsight_files.add((source, attrs["file"]))
                elif v != v:  # NaN: a provider that could not measure; counted as an event, not as a value
                    pass
                elif isinstance(cell, float):
                    cells[key] = [2, cell + v, v if v < cell else cell, v if v > cell else cell]
                else:
                    cell[0] += 1
                    cell[1] += v
                    if v < cell[2]:
                        cell[2] = v
                    if v > cell[3]:
                        cell[3] = v
                if ts is not None:
                    if first is None or ts < first:
                        first = ts
                    if last is None or ts > last:
                        last = ts
                    if source in START_SOURCES:
                        known = starts.get(key)
                        if known is None or ts < known:
                            starts[key] = ts
                chunk += 1
                if chunk == 65536:
                    total += chunk
                    advance(chunk)
                    chunk = 0
            advance(chunk)
        finally:  # a bad line stops the fold: what was folded is still counted
            self.events += total + chunk
            self.by_source.update(by_source)
            self.first_ts, self.last_ts = first, last

    def fold_file(self, path: str | Path, advance: Callable[[int], object] = lambda n: None) -> None:
        """Fold in every event of a ``metrics_events.jsonl`` file: what ``fold_rows(iter_event_rows(path))`` does,
        with the reading and the folding in one loop.

        Each line is decoded, checked and folded with its fields read once (a generator between the
        two read every field twice and resumed once per line: ~13 % of the fold's instructions). A
        line that is not the common well-formed one (``iter_event_rows``'s inline test, repeated
        here) goes through the reader's own checks, so the same lines are refused with the same
        messages, a blank line is skipped and a torn last line ends the file.
        """
        from my_utils.core import events as reader  # its checks of the lines it does not take inline

        p, fh = reader._open(path)
        where = str(p)
        loads = reader._loads
        exact = reader._EXACT
        checked_row = reader._checked_row
        cells = self.cells
        meta = self.meta
        extra = self.extra_occurrences
        starts = self.starts
        keep_start = False  # whether the current run of lines is of a START_SOURCES source
        run_ids = self.run_ids
        nsight_files = self.nsight_files
        by_source: dict[str, int] = {}
        first, last = self.first_ts, self.last_ts
        get = cells.get
        intern = sys.intern
        chunk = total = lineno = run_count = 0
        run_source: Any = None  # the source of the current run of lines (None: before the first line)
        last_run_id: str | None = None
        try:
            for raw in fh:
                lineno += 1
                try:
                    data = loads(raw)
                except (ValueError, RecursionError):  # the reader's slow path decides (as in iter_event_rows)
                    data = reader._slow_line(raw, fh, p, lineno)
                    if data is reader._BLANK:
                        continue
                    if data is reader._TORN:
                        break
                    data = checked_row(data, raw, where, lineno, True)
                    plain = False
                else:
                    try:  # iter_event_rows' test of the common line, its fields kept for the fold
                        name = data["name"]
                        v = data["value"]
                        rank = data["rank"]
                        step = data["step"]
                        ts = data["ts"]
                        attrs = data["attrs"]
                        kind = data["kind"]
                        unit = data["unit"]
                        source = data["source"]
                        run_id = data["run_id"]
                        plain = not (type(v) is not float or type(name) is not str or not name
                                     or type(attrs) is not dict or type(kind) is not str or not kind
                                     or type(unit) is not str or type(source) is not str
                                     or type(run_id) is not str or type(data["schema_version"]) is not int
                                     or len(data) != 11 or (rank is not None and type(rank) is not int)
                                     or (step is not None and type(step) is not int)
                                     or (ts is not None and type(ts) is not float))
                    except (KeyError, TypeError, IndexError):
                        plain = False
                    if plain and attrs:
                        for x in attrs.values():  # as in iter_event_rows (events._exact)
                            if type(x) not in exact:
                                plain = False
                                break
                    if not plain:
                        data = checked_row(data, raw, where, lineno)
                if not plain:  # a row the reader's checks made: every known field there, typed
                    name = data["name"]
                    v = data["value"]
                    rank = data["rank"]
                    step = data["step"]
                    ts = data["ts"]
                    attrs = data["attrs"]
                    kind = data["kind"]
                    unit = data["unit"]
                    source = data["source"]
                    run_id = data["run_id"]
                # -- the fold: as fold_rows (see there for the why of each step) --
                # lines come in runs of one source and one run id: count a run, and look a run id up,
                # when it changes (a string comparison instead of two dict and one set lookups per line)
                if source == run_source:
                    run_count += 1
                else:
                    if run_count:
                        by_source[run_source] += run_count
                    if source not in by_source:
                        by_source[source] = 0
                    run_source, run_count = source, 1
                    keep_start = source in START_SOURCES
                if run_id != last_run_id:
                    last_run_id = run_id
                    if run_id and run_id not in run_ids:
                        run_ids.add(run_id)
                key = (name, step, rank, source)
                cell = get(key)
                if cell is None:
                    # one string object per distinct name and source (interned only for a new cell:
                    # a lookup finds an equal string as well)
                    name = intern(name)
                    source = intern(source)
                    key = (name, step, rank, source)
                    cells[key] = v if v == v else [0, 0.0, math.inf, -math.inf]
                    mk = (name, source)
                    if mk not in meta:
                        depth = attrs.get("depth")
                        meta[mk] = (kind, unit, depth if isinstance(depth, int) else None)
                        if source == "torch_profiler" and isinstance(attrs.get("file"), str):
                            self.trace_files.add(attrs["file"])
                    if source in NSIGHT_SOURCES and isinstance(attrs.get("file"), str):  # per cell: per export
                        nsight_files.add((source, attrs["file"]))
                elif v != v:  # NaN: counted as an event, not as a value
                    pass
                elif isinstance(cell, float):
                    cells[key] = [2, cell + v, v if v < cell else cell, v if v > cell else cell]
                else:
                    cell[0] += 1
                    cell[1] += v
                    if v < cell[2]:
                        cell[2] = v
                    if v > cell[3]:
                        cell[3] = v
                if attrs:
                    n = attrs.get("count")
                    if n.__class__ is int and n > 1:
                        extra[key] = extra.get(key, 0) + n - 1
                if ts is not None:
                    if first is None or ts < first:
                        first = ts
                    if last is None or ts > last:
                        last = ts
                    if keep_start:
                        known = starts.get(key)
                        if known is None or ts < known:
                            starts[key] = ts
                chunk += 1
                if chunk == 65536:
                    total += chunk
                    advance(chunk)
                    chunk = 0
            advance(chunk)
        finally:  # a bad line stops the fold: what was folded is still counted
            fh.close()
            if run_count:
                by_source[run_source] += run_count
            self.events += total + chunk
            self.by_source.update(by_source)
            self.first_ts, self.last_ts = first, last

    def aggregated(self) -> AggregatedEvents:
        """One event per cell: the sum (duration, counter), peak (gauge) or mean (ratio, info)."""
        return AggregatedEvents(self)

    def iter_aggregated(self, only: set[tuple[str, str]] | None = None) -> Iterator[MetricEvent]:
        """The events of :meth:`aggregated`, built one at a time; with ``only``, those of these (name, source)."""
        meta = self.meta
        extra = self.extra_occurrences
        starts = self.starts
        for key, cell in self.cells.items():
            name, step, rank, source = key
            if only is not None and (name, source) not in only:
                continue
            count, total, lo, hi = cell_stats(cell)
            if count == 0:
                continue
            kind, unit, depth = meta[(name, source)]
            value = hi if kind == "gauge" else total / count if kind in ("ratio", "info") else total
            attrs: dict[str, Any] = {"count": count, "min": lo, "max": hi}
            if key in extra:
                attrs["occurrences"] = count + extra[key]
            if depth is not None:
                attrs["depth"] = depth
            # the fields were checked when read (or built); only the value is computed here
            yield trusted_event(name, float(value), kind, unit, source, rank, step, starts.get(key), "", attrs)


#: how a cell of a kind becomes its step's value: 0 its peak (gauge), 1 its mean (ratio, info), else (2) its sum
_HOW = {"gauge": 0, "ratio": 1, "info": 1}


class AggregatedEvents(SeriesSource):
    """The aggregated events as a sequence that builds them on each pass instead of holding them.

    Holding one ``MetricEvent`` per cell would double the analyzer's memory on a big run (1M
    cells: ~400 MB). Indexing works but walks the cells: rules iterate. The built-in rules
    read the events through ``build_series``, which builds the series of this sequence once,
    straight from the cells (no event is built), and gives each rule its own copy.
    """

    def __init__(self, agg: EventAggregate) -> None:
        self._agg = agg
        self._len_memo: tuple[tuple[int, int], int] | None = None

    @property
    def _len(self) -> int:
        """Cells holding a value, counted when first asked for (a pass over 1M cells) and after any fold."""
        version = self.series_version()
        if self._len_memo is None or self._len_memo[0] != version:
            self._len_memo = (version, sum(1 for c in self._agg.cells.values() if type(c) is not list or c[0]))
        return self._len_memo[1]

    def series_version(self) -> tuple[int, int]:
        """Events folded and cells so far: both only grow, so the series memo is rebuilt after any ``fold``."""
        return self._agg.events, len(self._agg.cells)

    def build_series_now(self) -> dict[SeriesKey, Series]:
        """``build_series`` of these events, from the cells: one value per step already, so no per-step folding.

        The hot loop of the shared statistics (one pass over ~1M cells): per series a plain list
        ``[steps.append, values.append, how, events beyond one per cell, extra occurrences, steps,
        values]`` in locals, the ``Series`` built at the end. A cell of one event (most cells of a big
        run) costs two appends: its count is the cell count, added up at the end.
        """
        meta = self._agg.meta
        extra = self._agg.extra_occurrences
        slots: dict[SeriesKey, list[Any]] = {}  # in the order the first value of each series comes
        get = slots.get
        for ckey, cell in self._agg.cells.items():
            name, step, rank, source = ckey
            if step is None:
                continue
            key = (name, rank, source)
            slot = get(key)
            if type(cell) is list:
                count = cell[0]
                if not count:
                    continue
                # how a cell becomes the step's value, as iter_aggregated computes it: 0 peak, 1 mean, 2 sum
                how = slot[2] if slot is not None else _HOW.get(meta[(name, source)][0], 2)
                value = float(cell[3] if how == 0 else cell[1] / count if how == 1 else cell[1])
                if value != value:  # NaN (inf - inf in a sum) is left out as build_series does
                    continue
            else:  # one event: its value whatever the kind
                count = 1
                value = cell  # type: ignore[assignment]  # a bare float (the cell is not a list)
            if slot is None:
                steps: list[int] = []
                values: list[float] = []
                slot = slots[key] = [steps.append, values.append, _HOW.get(meta[(name, source)][0], 2), 0, 0,
                                     steps, values]
            slot[0](step)
            slot[1](value)
            if count != 1:
                slot[3] += count - 1
            if extra:
                more = extra.get(ckey)
                if more:
                    slot[4] += more
        out: dict[SeriesKey, Series] = {}
        for (name, rank, source), (_sa, _va, _how, beyond, more, st, vals) in slots.items():
            kind, unit, depth = meta[(name, source)]
            if not all(map(operator.lt, st, islice(st, 1, None))):  # cells are usually in step order already
                order = sorted(range(len(st)), key=st.__getitem__)
                st, vals = [st[i] for i in order], [vals[i] for i in order]
            events = len(st) + beyond
            out[(name, rank, source)] = Series(name, rank, kind, unit, source, depth, st, vals, events, events + more)
        return out

    def __iter__(self) -> Iterator[MetricEvent]:
        return self._agg.iter_aggregated()

    def named(self, keep: Callable[[str, str | None], bool]) -> Iterator[MetricEvent]:
        """The aggregated events of the names ``keep`` accepts, the others never built (a rule that reads a few
        names of a 1M-cell run would otherwise build 1M events: ``source_checks`` took ~30 % of the analysis)."""
        wanted = {key for key in self._agg.meta if keep(*key)}
        if not wanted:
            return iter(())
        return self._agg.iter_aggregated(wanted)

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, index: int) -> MetricEvent: ...

    @overload
    def __getitem__(self, index: slice) -> list[MetricEvent]: ...

    def __getitem__(self, index: int | slice) -> MetricEvent | list[MetricEvent]:
        if isinstance(index, slice):
            return list(self)[index]
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError(f"aggregated event index {index} out of range ({self._len} events)")
        for i, event in enumerate(self):
            if i == index:
                return event
        raise IndexError(index)  # pragma: no cover - the cells changed while indexing

def event_rows(events: Iterable[MetricEvent]) -> Iterator[dict[str, Any]]:
    """The fields ``EventAggregate.fold_rows`` reads, of each event (no ``MetricEvent`` is changed)."""
    for e in events:
        yield {"name": e.name, "value": float(e.value), "kind": e.kind, "unit": e.unit, "source": e.source,
               "rank": e.rank, "step": e.step, "ts": e.ts, "run_id": e.run_id, "attrs": e.attrs}
