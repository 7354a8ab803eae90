"""MetricsAnalyzer: metric events → an ``AnalysisReport`` (scores, findings, summary, tables).

The events file is streamed (``iter_events``) and folded on the fly into one cell per
(name, step, rank, source): count, sum, min, max. Memory grows with names × steps × ranks,
never with the number of raw events (a 2M-event trace ingested into a few thousand
aggregated events stays a few thousand cells). Rules then see one aggregated event per
cell — the plugin contract's ``evaluate(events)`` with events whose ``attrs`` carry
``count``/``min``/``max`` — so a third-party rule gets the same view as the built-ins.

Rules are the ``myutils_analysis_rules`` plugins (the built-ins included); each is built
with the workload profile's options for it, runs alone, and a rule that fails or returns
a malformed finding is named in ``summary["rule_errors"]`` while the others still report.
When the events came from torch.profiler traces and the traces can be found, the Kineto
analyses (``my_utils.profiling.analysis.kineto``) add their tables.
"""

from __future__ import annotations

import logging
import math
import operator
import statistics
import sys
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import islice
from pathlib import Path
from typing import Any, overload

from my_utils.core.errors import InputError
from my_utils.core.events import MetricEvent, iter_event_rows, trusted_event
from my_utils.profiling.analysis.model import REPORT_SCHEMA_VERSION, SEVERITIES, AnalysisReport, Finding
from my_utils.profiling.analysis.overhead import overhead_statement
from my_utils.profiling.analysis.rules._series import (
    STEP_TIME,
    Series,
    SeriesKey,
    SeriesSource,
    build_series,
    is_gpu_family,
    is_memory,
)
from my_utils.profiling.analysis.rules._stats import cv, quantile, std_cv
from my_utils.profiling.analysis.rules.suggestions import suggest
from my_utils.profiling.analysis.scores import compute_scores
from my_utils.profiling.analysis.workloads import DEFAULT_WORKLOAD, WorkloadProfile, get_workload

_log = logging.getLogger("my_utils.profiling.analysis")
#: Rows kept in the ``operations`` table (largest totals first); the rest are counted in the summary.
MAX_OPERATION_ROWS = 1000
#: Rows kept per series (one source, rank and name) in the ``steps`` and ``memory`` tables. A
#: longer series is cut into ``MAX_SERIES_ROWS // 2`` buckets of consecutive steps, each keeping
#: its lowest and its highest step, so a spike survives and a 1M-event run still makes a
#: report of a few MB; the rules and the ``ranks``/``operations`` tables still see every step.
MAX_SERIES_ROWS = 1000

#: A cell: one measured value as a bare float (most cells of a big run: a quarter of the
#: memory of a list), else ``[count, sum, min, max]`` (count 0: only NaN values were seen).
_Cell = float | list[Any]


class EventAggregate:
    """Events folded per (name, step, rank, source): what the analyzer keeps instead of the events."""

    def __init__(self) -> None:
        self.cells: dict[tuple[str, int | None, int | None, str], _Cell] = {}
        self.meta: dict[tuple[str, str], tuple[str, str, int | None]] = {}  # (name, source) -> kind, unit, depth
        self.events = 0
        self.by_source: Counter[str] = Counter()
        self.run_ids: set[str] = set()
        self.trace_files: set[str] = set()
        self.first_ts: float | None = None
        self.last_ts: float | None = None
        self.table_limits: dict[str, Any] = {}  # filled by the tables: rows kept per table and how

    def cell(self, key: tuple[str, int | None, int | None, str]) -> tuple[int, float, float, float]:
        """``(count, sum, min, max)`` of the cell ``(name, step, rank, source)`` (KeyError when absent)."""
        return _stats(self.cells[key])

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
        run_ids = self.run_ids
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
                cell = get(key)
                if cell is None:
                    cells[key] = v if v == v else [0, 0.0, math.inf, -math.inf]
                    mk = (name, source)
                    if mk not in meta:
                        attrs = row["attrs"]
                        depth = attrs.get("depth")
                        meta[mk] = (row["kind"], row["unit"], depth if isinstance(depth, int) else None)
                        if source == "torch_profiler" and isinstance(attrs.get("file"), str):
                            self.trace_files.add(attrs["file"])
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

    def aggregated(self) -> AggregatedEvents:
        """One event per cell: the sum (duration, counter), peak (gauge) or mean (ratio, info)."""
        return AggregatedEvents(self)

    def iter_aggregated(self) -> Iterator[MetricEvent]:
        """The events of :meth:`aggregated`, built one at a time."""
        meta = self.meta
        for (name, step, rank, source), cell in self.cells.items():
            count, total, lo, hi = _stats(cell)
            if count == 0:
                continue
            kind, unit, depth = meta[(name, source)]
            value = hi if kind == "gauge" else total / count if kind in ("ratio", "info") else total
            attrs: dict[str, Any] = {"count": count, "min": lo, "max": hi}
            if depth is not None:
                attrs["depth"] = depth
            # the fields were checked when read (or built); only the value is computed here
            yield trusted_event(name, float(value), kind, unit, source, rank, step, None, "", attrs)


def _stats(cell: _Cell) -> tuple[int, float, float, float]:
    if type(cell) is list:
        return cell[0], cell[1], cell[2], cell[3]
    return 1, cell, cell, cell  # type: ignore[return-value]  # a bare float: one value


class AggregatedEvents(SeriesSource):
    """The aggregated events as a sequence that builds them on each pass instead of holding them.

    Holding one ``MetricEvent`` per cell would double the analyzer's memory on a big run (1M
    cells: ~400 MB). Indexing works but walks the cells: rules iterate. The built-in rules
    read the events through ``build_series``, which builds the series of this sequence once,
    straight from the cells (no event is built), and gives each rule its own copy.
    """

    def __init__(self, agg: EventAggregate) -> None:
        self._agg = agg
        self._len = sum(1 for c in agg.cells.values() if type(c) is not list or c[0])

    def series_version(self) -> tuple[int, int]:
        """Events folded and cells so far: both only grow, so the series memo is rebuilt after any ``fold``."""
        return self._agg.events, len(self._agg.cells)

    def build_series_now(self) -> dict[SeriesKey, Series]:
        """``build_series`` of these events, from the cells: one value per step already, so no per-step folding."""
        meta = self._agg.meta
        out: dict[SeriesKey, Series] = {}
        for (name, step, rank, source), cell in self._agg.cells.items():
            if step is None:
                continue
            if type(cell) is list:
                count, total, hi = cell[0], cell[1], cell[3]
                if not count:
                    continue
            else:
                count = 1
                total = hi = cell
            kind, unit, depth = meta[(name, source)]
            # as iter_aggregated computes it; NaN (inf - inf in a sum) is left out as build_series does
            value = float(hi if kind == "gauge" else total / count if kind in ("ratio", "info") else total)
            if value != value:
                continue
            key = (name, rank, source)
            series = out.get(key)
            if series is None:
                series = out[key] = Series(name, rank, kind, unit, source, depth)
            series.steps.append(step)
            series.values.append(value)
            series.events += count
        for series in out.values():
            st = series.steps
            if not all(map(operator.lt, st, islice(st, 1, None))):  # cells are usually in step order already
                order = sorted(range(len(st)), key=st.__getitem__)
                series.steps = [st[i] for i in order]
                series.values = [series.values[i] for i in order]
        return out

    def __iter__(self) -> Iterator[MetricEvent]:
        return self._agg.iter_aggregated()

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


class MetricsAnalyzer:
    """Analyse metric events (a ``metrics_events.jsonl`` path, or events) into an ``AnalysisReport``.

    ``workload`` picks the thresholds (``pretrain``, ``finetune``, ``inference``); ``rules``
    restricts the rules to these names (default: every installed rule); ``rule_options``
    overrides options per rule name; ``traces`` names torch.profiler trace files for the
    Kineto analyses (default: the files named in the events, looked up beside the events
    file); ``hardware`` describes the machine of the run (the diff warns when two differ);
    ``progress`` draws a counter of events read on stderr (a terminal only); ``kineto`` is a
    ``KinetoAnalysis`` already made from the traces (``analyze --trace`` reads each trace once).
    A trace that is bad input raises ``InputError``: the report is never presented without it.
    """

    def __init__(self, events: str | Path | Iterable[MetricEvent], workload: str | WorkloadProfile = DEFAULT_WORKLOAD,
                 *, rules: Sequence[str] | None = None, rule_options: Mapping[str, Mapping[str, Any]] | None = None,
                 traces: Sequence[str | Path] | None = None, hardware: Mapping[str, Any] | None = None,
                 overhead_host: str = "analysis host", progress: bool = False, kineto: Any = None) -> None:
        self.source = events
        self.workload = get_workload(workload)
        self.rule_names = list(rules) if rules is not None else None
        self.rule_options = {k: dict(v) for k, v in (rule_options or {}).items()}
        self.traces = [Path(t) for t in traces] if traces is not None else None
        self.hardware = dict(hardware or {})
        self.overhead_host = overhead_host
        self.progress = progress
        self.kineto = kineto  # a KinetoAnalysis the caller made in its own pass over the traces

    # -- reading ---------------------------------------------------------------------

    def aggregate(self) -> EventAggregate:
        """Stream the events once into an ``EventAggregate``."""
        from my_utils.core.progress import progress

        agg = EventAggregate()
        # from a file, validated JSON objects are folded directly: a MetricEvent per line
        # would cost more than the folding itself
        with progress(None, "analyze: events", enabled=self.progress) as bar:
            if isinstance(self.source, (str, Path)):
                agg.fold_rows(iter_event_rows(self.source), bar.advance)
            else:
                agg.fold_rows(event_rows(self.source), bar.advance)
        return agg

    # -- the report ------------------------------------------------------------------

    def analyze(self) -> AnalysisReport:
        """Read, run every rule, score, and return the report (nothing is written)."""
        agg = self.aggregate()
        events = agg.aggregated()
        series = build_series(events)
        findings, ran, errors = self._run_rules(events)
        tables = _tables(series, agg)
        kineto_tables, kineto_note = self._kineto(agg)
        tables.update(kineto_tables)
        findings += [f for f in capture_findings(kineto_tables.get("kineto_health", []))
                     if f.id not in {g.id for g in findings}]
        dimensions = {"performance", "stability"}
        if any(is_memory(s) for s in series.values()):
            dimensions.add("memory")
        if kineto_tables or any(f.category == "capture" for f in findings):
            dimensions.add("capture")
        findings.sort(key=lambda f: (-SEVERITIES.index(f.severity), f.category, f.id))
        summary = _summary(agg, series, findings, ran, errors)
        if kineto_note:
            summary["kineto"] = kineto_note
        return AnalysisReport(
            schema_version=REPORT_SCHEMA_VERSION, workload=self.workload.name,
            scores=compute_scores(findings, dimensions), findings=findings, summary=summary, tables=tables,
            overhead=self._overhead(series), inputs=self._inputs(agg), hardware=self.hardware,
        )

    def _run_rules(self, events: Sequence[MetricEvent]) -> tuple[list[Finding], list[str], list[dict[str, str]]]:
        from my_utils.core.plugin_types import PluginKind
        from my_utils.core.plugins import get_registry, load_component

        available = get_registry().descriptions(PluginKind.ANALYSIS_RULE)
        names = sorted(available) if self.rule_names is None else self.rule_names
        findings: list[Finding] = []
        ran: list[str] = []
        errors: list[dict[str, str]] = []
        seen: set[str] = set()
        for name in names:
            options = {**self.workload.options_for(name), **self.rule_options.get(name, {})}
            try:
                rule = load_component(PluginKind.ANALYSIS_RULE, name)(**options)
                produced = list(rule.evaluate(events))
            except Exception as exc:  # one rule's failure must not lose the others' findings
                errors.append({"rule": name, "error": f"{type(exc).__name__}: {exc}"})
                _log.warning("analysis rule %s failed and was skipped: %s: %s", name, type(exc).__name__, exc)
                continue
            ran.append(name)
            for i, raw in enumerate(produced):
                try:
                    finding = Finding.from_dict(raw, f"analysis rule {name!r}", f"finding {i}")
                except Exception as exc:
                    errors.append({"rule": name, "error": str(exc)})
                    continue
                if finding.id in seen:  # two rules (or one twice) on the same cause: keep the first
                    continue
                seen.add(finding.id)
                findings.append(finding)
        return findings, ran, errors

    def _overhead(self, series: Mapping[Any, Any]) -> dict[str, Any]:
        counts = _mytimer_region_counts(series)
        steps = [v for (name, _rank, source), s in series.items() if name == STEP_TIME and source == "mytimer"
                 for v in s.values]
        return overhead_statement(statistics.fmean(counts.values()) if counts else None,
                                  statistics.median(steps) if steps else None, self.overhead_host)

    def _inputs(self, agg: EventAggregate) -> dict[str, Any]:
        out: dict[str, Any] = {"events": agg.events, "by_source": dict(sorted(agg.by_source.items())),
                               "run_ids": sorted(agg.run_ids)}
        if isinstance(self.source, (str, Path)):
            out["events_file"] = str(self.source)
        if agg.first_ts is not None and agg.last_ts is not None:
            out["time_range"] = [agg.first_ts, agg.last_ts]
        out["analyzed_with"] = _software()
        return out

    def _trace_paths(self, agg: EventAggregate) -> list[Path]:
        if self.traces is not None:
            return self.traces
        if not agg.trace_files or not isinstance(self.source, (str, Path)):
            return []
        root = Path(self.source).parent
        found: list[Path] = []
        for name in sorted(agg.trace_files):
            hits = [p for p in (root / name,) if p.is_file()] or sorted(root.rglob(name))[:1]
            found.extend(hits)
        return found

    def _kineto(self, agg: EventAggregate) -> tuple[dict[str, list[dict[str, Any]]], str]:
        """Tables of the Kineto analyses over the run's traces; a note says why there are none."""
        if self.kineto is not None:
            return _kineto_tables(self.kineto), f"Kineto analyses of {len(self.kineto.inputs)} trace file(s)"
        paths = self._trace_paths(agg)
        if not paths:
            return {}, "no torch.profiler trace files given or found beside the events" if agg.trace_files else ""
        try:
            from my_utils.profiling.analysis import kineto

            analyze_traces = kineto.analyze_traces
        except (ImportError, AttributeError):
            return {}, "the Kineto analyses (my_utils.profiling.analysis.kineto) are not installed in this version"
        try:
            result = analyze_traces(paths)
        except InputError:  # a trace the run names is bad input: exit 2, never a report without it
            raise
        except Exception as exc:  # the metric analysis stands on its own; say why the trace part is missing
            _log.warning("Kineto analyses of %s failed: %s: %s", [str(p) for p in paths], type(exc).__name__, exc)
            return {}, f"Kineto analyses failed: {type(exc).__name__}: {exc}"
        return _kineto_tables(result), f"Kineto analyses of {len(paths)} trace file(s)"


def event_rows(events: Iterable[MetricEvent]) -> Iterator[dict[str, Any]]:
    """The fields ``EventAggregate.fold_rows`` reads, of each event (no ``MetricEvent`` is changed)."""
    for e in events:
        yield {"name": e.name, "value": float(e.value), "kind": e.kind, "unit": e.unit, "source": e.source,
               "rank": e.rank, "step": e.step, "ts": e.ts, "run_id": e.run_id, "attrs": e.attrs}


def _software() -> dict[str, str]:
    """Versions of what produced the report (the analyzer's, and torch when it is already loaded)."""
    import platform

    from my_utils.profiling._version import __version__

    out = {"myutils_profiling": __version__, "python": platform.python_version()}
    torch = sys.modules.get("torch")
    if torch is not None:
        out["torch"] = str(getattr(torch, "__version__", ""))
    return out


def _mytimer_region_counts(series: Mapping[Any, Any]) -> dict[tuple[int, int | None], float]:
    """MyTimer regions opened per (step, rank): the count of CPU region events of each step."""
    by_rank: dict[int | None, list[tuple[list[int], float]]] = {}
    for (name, rank, source), s in series.items():
        if source != "mytimer" or s.kind != "duration" or name == STEP_TIME or name.startswith("cuda:"):
            continue
        per_event = s.events / len(s.steps) if s.steps else 0.0  # regions of this name per step, on average
        by_rank.setdefault(rank, []).append((s.steps, per_event))
    counts: dict[tuple[int, int | None], float] = {}
    for rank, entries in by_rank.items():
        first = entries[0][0]
        if all(steps == first for steps, _ in entries):  # the usual case: every region on every step
            total = 0.0
            for _, per_event in entries:  # the same additions, in the same order, as step by step below
                total += per_event
            for step in first:
                counts[(step, rank)] = total
            continue
        for steps, per_event in entries:
            for step in steps:
                counts[(step, rank)] = counts.get((step, rank), 0.0) + per_event
    return counts


def _kineto_tables(result: Any) -> dict[str, list[dict[str, Any]]]:
    """``KinetoAnalysis.to_rows()`` (tables keyed ``kineto_<table>``), or a mapping of rows, as JSON rows."""
    raw: Any = result.to_rows() if callable(getattr(result, "to_rows", None)) else result
    if not isinstance(raw, Mapping):
        return {}
    return {str(name): [dict(r) for r in rows] for name, rows in raw.items() if isinstance(rows, (list, tuple))}


def capture_findings(health: Sequence[Mapping[str, Any]]) -> list[Finding]:
    """One ``capture`` finding per capture-health check that is not ``ok`` (``kineto_health`` rows)."""
    out: list[Finding] = []
    for row in health:
        status = str(row.get("status", "ok"))
        if status == "ok":
            continue
        rank = row.get("rank")
        check = str(row.get("check", "capture"))
        where = f"rank {rank}" if rank is not None else "all ranks"
        out.append(Finding(
            id=f"capture:{check}:{'rank' + str(rank) if rank is not None else 'all'}", category="capture",
            severity=status if status in SEVERITIES else "warning",
            title=f"capture health: {check} on {where}", detail=str(row.get("detail", "")),
            evidence={"names": [check], "ranks": [rank], "value": row.get("value"), "table": "kineto_health"},
            suggestion=suggest("capture", check)))
    return out


def _tables(series: Mapping[Any, Any], agg: EventAggregate) -> dict[str, list[dict[str, Any]]]:
    step_total: dict[tuple[int | None, str], float] = {}
    device_total: dict[int | None, float] = {}
    for (name, rank, source), s in series.items():
        if name == STEP_TIME:
            step_total[(rank, source)] = s.total
        elif is_gpu_family(name) and s.kind == "duration":
            device_total[rank] = device_total.get(rank, 0.0) + s.total
    # one operations row per (name, source), all ranks together
    ops: dict[tuple[str, str], dict[str, Any]] = {}
    for (name, rank, source), s in series.items():
        if s.kind != "duration":
            continue
        row = ops.setdefault((name, source), {"name": name, "source": source, "unit": s.unit, "count": 0,
                                              "values": [], "ranks": set(), "denominator": 0.0})
        row["count"] += s.events
        row["values"].extend(s.values)
        row["ranks"].add(rank)
        row["denominator"] += device_total.get(rank, 0.0) if is_gpu_family(name) else step_total.get((rank, source), 0.0)
    op_rows: list[dict[str, Any]] = []
    for row in ops.values():
        values = sorted(row.pop("values"))
        total = float(sum(values))
        denom = row.pop("denominator")
        row["ranks"] = sorted(r for r in row["ranks"] if r is not None)
        std, spread = std_cv(values)  # pstdev and cv share the mean: one pass less per row
        row.update(steps=len(values), total=total, mean=total / len(values), std=std,
                   min=values[0], max=values[-1], median=quantile(values, 0.5), p90=quantile(values, 0.9),
                   cv=spread, share=(total / denom) if denom > 0 and row["name"] != STEP_TIME else None)
        op_rows.append(row)
    op_rows.sort(key=lambda r: -r["total"])
    limits: dict[str, Any] = {}
    steps = [{"step": s.steps[i], "rank": rank, "source": source, "step_time": s.values[i],
              "regions": None} for (name, rank, source), s in series.items() if name == STEP_TIME
             for i in _kept(s.values, "steps", limits)]
    # the summed depth-0 regions of each kept row only (a few thousand rows, not every step of
    # every region), added in series order as a sum over all steps would add them
    depth0: dict[tuple[int | None, str], list[Any]] = {}
    for (name, rank, source), s in series.items():
        if s.depth == 0 and s.kind == "duration" and name != STEP_TIME:
            depth0.setdefault((rank, source), []).append(s)
    for row in steps:
        step, regions = row["step"], None
        for s in depth0.get((row["rank"], row["source"]), ()):
            i = bisect_left(s.steps, step)
            if i < len(s.steps) and s.steps[i] == step:
                regions = (0.0 if regions is None else regions) + s.values[i]
        row["regions"] = regions
    steps.sort(key=lambda r: (r["source"], -1 if r["rank"] is None else r["rank"], r["step"]))
    memory = [{"name": name, "step": s.steps[i], "rank": rank, "source": source, "value": s.values[i],
               "unit": s.unit}
              for (name, rank, source), s in series.items() if is_memory(s)
              for i in _kept(s.values, "memory", limits)]
    memory.sort(key=lambda r: (r["name"], -1 if r["rank"] is None else r["rank"], r["step"]))
    ranks: dict[int | None, list[float]] = {}
    for (name, rank, _source), s in series.items():
        if name == STEP_TIME:
            ranks.setdefault(rank, []).extend(s.values)
    rank_rows = [{"rank": r, "steps": len(v), "mean_step_time": statistics.fmean(v),
                  "median_step_time": statistics.median(v), "total_time": float(sum(v))}
                 for r, v in sorted(ranks.items(), key=lambda kv: -1 if kv[0] is None else kv[0]) if v]
    no_step: list[dict[str, Any]] = [{"name": name, "rank": rank, "source": source, "count": c[0], "total": c[1], "min": c[2], "max": c[3],
                "unit": agg.meta[(name, source)][1]}
               for (name, step, rank, source), cell in agg.cells.items() if step is None
               for c in (_stats(cell),) if c[0]]
    no_step.sort(key=lambda r: -r["total"])
    tables = {"operations": op_rows[:MAX_OPERATION_ROWS], "steps": steps, "memory": memory, "ranks": rank_rows}
    if no_step:
        tables["totals"] = no_step[:MAX_OPERATION_ROWS]
    for name in ("steps", "memory"):
        entry = limits.setdefault(name, {"series": 0, "series_downsampled": 0, "points": 0})
        entry.update(rows=len(tables[name]), max_rows_per_series=MAX_SERIES_ROWS,
                     method="beyond the cap, the lowest and highest step of each bucket of consecutive steps")
    agg.table_limits = limits
    return tables


def _kept(values: Sequence[float], table: str, limits: dict[str, Any]) -> list[int]:
    """Indices of the points of one series kept in ``table`` (all up to ``MAX_SERIES_ROWS``), counted in ``limits``."""
    n = len(values)
    entry = limits.setdefault(table, {"series": 0, "series_downsampled": 0, "points": 0})
    entry["series"] += 1
    entry["points"] += n
    if n <= MAX_SERIES_ROWS:
        return list(range(n))
    entry["series_downsampled"] += 1
    buckets = MAX_SERIES_ROWS // 2
    kept: list[int] = []
    for b in range(buckets):
        start, stop = b * n // buckets, (b + 1) * n // buckets
        lo = hi = start
        for i in range(start + 1, stop):
            v = values[i]
            if v < values[lo]:
                lo = i
            elif v > values[hi]:
                hi = i
        kept.extend((lo, hi) if lo < hi else (hi, lo) if hi < lo else (lo,))
    return kept


def _summary(agg: EventAggregate, series: Mapping[Any, Any], findings: list[Finding], ran: list[str],
             errors: list[dict[str, str]]) -> dict[str, Any]:
    steps = sorted({st for (_n, st, _r, _s) in agg.cells if st is not None})
    ranks = sorted({r for (_n, _st, r, _s) in agg.cells if r is not None})
    step_time: dict[str, Any] = {}
    for (name, rank, source), s in series.items():
        if name == STEP_TIME and s.values:
            values = sorted(s.values)
            step_time[f"{source}:rank{rank}" if rank is not None else source] = {
                "source": source, "rank": rank, "steps": len(values), "unit": s.unit,
                "mean": statistics.fmean(values), "median": quantile(values, 0.5), "p90": quantile(values, 0.9),
                "min": values[0], "max": values[-1], "cv": cv(values)}
    by_severity = Counter(f.severity for f in findings)
    return {
        "events": agg.events, "aggregated_cells": len(agg.cells), "names": len({n for n, _ in agg.meta}),
        "sources": sorted(s for s in agg.by_source if s),
        "steps": {"count": len(steps), "first": steps[0] if steps else None, "last": steps[-1] if steps else None},
        "ranks": ranks, "step_time_name": STEP_TIME, "time_unit": "ms", "step_time": step_time,
        "findings": {sev: by_severity.get(sev, 0) for sev in SEVERITIES},
        "rules": ran, "rule_errors": errors, "table_limits": agg.table_limits,
    }
