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
analyses (``my_utils.profiling.analysis.kineto``) add their tables and the traces' context
(GPU, world size, versions) joins ``hardware``.

Facts, then findings (ARCHITECTURE.md §8): after the rules, ``analysis.facts`` states the
run's numbers as facts, ``analysis.fact_rules`` promotes the clearest to findings,
``analysis.ranking`` keeps one finding per fact ranked by the time it could save, and
``analysis.headline`` builds the first screen. A score dimension without data is "not
measured" (``report.dimensions``), never 100.
"""

from __future__ import annotations

import logging
import math
import operator
import statistics
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import islice
from pathlib import Path
from typing import Any, overload

from my_utils.core.events import MetricEvent, iter_event_rows, trusted_event
from my_utils.profiling.analysis.assembly import (
    capture_findings,
    not_measured,
    report_title,
    run_hardware,
    run_warnings,
)
from my_utils.profiling.analysis.model import (
    REPORT_SCHEMA_VERSION,
    SEVERITIES,
    AnalysisReport,
    Finding,
)
from my_utils.profiling.analysis.overhead import overhead_statement
from my_utils.profiling.analysis.rules._series import (
    STEP_TIME,
    Series,
    SeriesKey,
    SeriesSource,
    build_series,
)
from my_utils.profiling.analysis.rules._stats import cv, quantile
from my_utils.profiling.analysis.scores import compute_scores, score_dimensions
from my_utils.profiling.analysis.tables import (
    MAX_OPERATION_ROWS,
    MAX_SERIES_ROWS,
    Cell,
    build_tables,
    cell_stats,
)

__all__ = ["MAX_OPERATION_ROWS", "MAX_SERIES_ROWS", "AggregatedEvents", "EventAggregate", "MetricsAnalyzer",
           "build_tables", "capture_findings", "event_rows"]
from my_utils.profiling.analysis.workloads import DEFAULT_WORKLOAD, WorkloadProfile, get_workload

_log = logging.getLogger("my_utils.profiling.analysis")


class EventAggregate:
    """Events folded per (name, step, rank, source): what the analyzer keeps instead of the events."""

    def __init__(self) -> None:
        self.cells: dict[tuple[str, int | None, int | None, str], Cell] = {}
        self.meta: dict[tuple[str, str], tuple[str, str, int | None]] = {}  # (name, source) -> kind, unit, depth
        self.events = 0
        self.by_source: Counter[str] = Counter()
        self.run_ids: set[str] = set()
        self.trace_files: set[str] = set()
        self.first_ts: float | None = None
        self.last_ts: float | None = None
        self.table_limits: dict[str, Any] = {}  # filled by the tables: rows kept per table and how
        # occurrences beyond one per event, per cell: a provider's pre-aggregated event (Kineto: one
        # event per kernel name and step) says in attrs["count"] how many launches it stands for
        self.extra_occurrences: dict[tuple[str, int | None, int | None, str], int] = {}

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
        extra = self.extra_occurrences
        for key, cell in self.cells.items():
            name, step, rank, source = key
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
            yield trusted_event(name, float(value), kind, unit, source, rank, step, None, "", attrs)


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
        extra = self._agg.extra_occurrences
        out: dict[SeriesKey, Series] = {}
        for ckey, cell in self._agg.cells.items():
            name, step, rank, source = ckey
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
            series.occurrences += count + extra.get(ckey, 0)
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
    restricts the rules to these names (default: every installed rule, and the fact findings of
    ``analysis.fact_rules``, which ``"facts"`` names); ``rule_options``
    overrides options per rule name; ``traces`` names torch.profiler trace files for the
    Kineto analyses (default: the files named in the events, looked up beside the events
    file); ``hardware`` describes the machine of the run (the diff warns when two differ);
    ``progress`` draws a counter of events read on stderr (a terminal only).
    """

    def __init__(self, events: str | Path | Iterable[MetricEvent], workload: str | WorkloadProfile = DEFAULT_WORKLOAD,
                 *, rules: Sequence[str] | None = None, rule_options: Mapping[str, Mapping[str, Any]] | None = None,
                 traces: Sequence[str | Path] | None = None, hardware: Mapping[str, Any] | None = None,
                 overhead_host: str = "analysis host", progress: bool = False, trace_filter: Any = None) -> None:
        self.source = events
        self.workload = get_workload(workload)
        self.rule_names = list(rules) if rules is not None else None
        self.rule_options = {k: dict(v) for k, v in (rule_options or {}).items()}
        self.traces = [Path(t) for t in traces] if traces is not None else None
        self.hardware = dict(hardware or {})
        self.overhead_host = overhead_host
        self.progress = progress
        self.trace_filter = trace_filter  # kineto.filters.TraceFilter: the part of each trace the Kineto analyses read

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
        """Read, run every rule, state the facts, rank the findings, score, and return the report (nothing is written)."""
        from my_utils.profiling.analysis.fact_rules import fact_findings
        from my_utils.profiling.analysis.facts import build_facts, primary_step_source
        from my_utils.profiling.analysis.headline import build_headline
        from my_utils.profiling.analysis.ranking import rank_findings

        agg = self.aggregate()
        events = agg.aggregated()
        series = build_series(events)
        findings, ran, errors = self._run_rules(events)
        tables = build_tables(series, agg, primary_step_source(series))
        kineto_tables, kineto_note, kineto_warnings = self._kineto(agg)
        tables.update(kineto_tables)
        hardware = run_hardware(self.hardware, kineto_tables.get("kineto_context") or [])
        facts = build_facts(series, tables, hardware)
        by_id = {f.id: f for f in facts}
        seen = {f.id for f in findings}
        promoted = fact_findings(by_id, series, tables) if self.rule_names is None or "facts" in self.rule_names \
            else []  # a run restricted to named rules runs those only ("facts" names these)
        for i, raw in enumerate(promoted):
            try:
                finding = Finding.from_dict(raw, "analysis.fact_rules", f"finding {i}")
            except Exception as exc:  # a fact rule's bug must not lose the report
                errors.append({"rule": "fact_rules", "error": str(exc)})
                continue
            if finding.id not in seen:
                findings.append(finding)
                seen.add(finding.id)
        findings += [f for f in capture_findings(kineto_tables.get("kineto_health", [])) if f.id not in seen]
        findings = rank_findings(findings)
        unmeasured = not_measured(series, agg, kineto_tables, findings)
        scores = compute_scores(findings, [d for d in ("performance", "stability", "memory", "capture")
                                           if d not in unmeasured])
        summary = _summary(agg, series, findings, ran, errors)
        summary["warnings"] = run_warnings(agg, kineto_warnings)
        summary["step_time_source"] = primary_step_source(series)
        if kineto_note:
            summary["kineto"] = kineto_note
        inputs = self._inputs(agg)
        headline = build_headline(facts, findings, report_title(inputs, tables))
        return AnalysisReport(
            schema_version=REPORT_SCHEMA_VERSION, workload=self.workload.name,
            scores=scores, findings=findings, summary=summary, tables=tables,
            overhead=self._overhead(series, agg, kineto_tables), inputs=inputs, hardware=hardware,
            facts=facts, headline=headline.to_dict(), dimensions=score_dimensions(scores, unmeasured),
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

    def _overhead(self, series: Mapping[Any, Any], agg: EventAggregate,
                  kineto_tables: Mapping[str, list[dict[str, Any]]]) -> dict[str, Any]:
        """What each instrument of the run cost: MyTimer (calibrated here), torch.profiler (from the
        trace's own overhead events, or "not measured"), any other source ("not measured").

        The MyTimer keys stay at the top level when the run has MyTimer events (the seed's shape);
        ``instruments`` lists one statement per instrument. A report without MyTimer events has no
        MyTimer section.
        """
        instruments: list[dict[str, Any]] = []
        out: dict[str, Any] = {}
        counts = _mytimer_region_counts(series)
        if counts or "mytimer" in agg.by_source:
            steps = [v for (name, _rank, source), s in series.items() if name == STEP_TIME and source == "mytimer"
                     for v in s.values]
            out = overhead_statement(statistics.fmean(counts.values()) if counts else None,
                                     statistics.median(steps) if steps else None, self.overhead_host)
            instruments.append({"instrument": "mytimer", "measured": "per_step_ms" in out,
                                "detail": out.get("detail", out.get("error", ""))})
        for row in kineto_tables.get("kineto_profiler_overhead") or []:
            instruments.append({"instrument": "torch.profiler", "rank": row.get("rank"),
                                "measured": bool(row.get("measured")), "overhead_ms": (
                                    row["overhead_us"] / 1e3 if row.get("overhead_us") is not None else None),
                                "detail": row.get("detail", "")})
        if "torch_profiler" in agg.by_source and not kineto_tables.get("kineto_profiler_overhead"):
            instruments.append({"instrument": "torch.profiler", "measured": False,
                                "detail": "not measured: the traces were not analysed here (give them with --trace)"})
        for source in sorted(agg.by_source):
            if source and source not in ("mytimer", "torch_profiler"):
                instruments.append({"instrument": source, "measured": False,
                                    "detail": f"not measured: {source} inputs do not record what the tool cost"})
        out["instruments"] = instruments
        if "detail" not in out:
            out["detail"] = "; ".join(f"{i['instrument']}: {i['detail']}" for i in instruments) or \
                "no instrument in the inputs"
        return out

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

    def _kineto(self, agg: EventAggregate) -> tuple[dict[str, list[dict[str, Any]]], str, list[str]]:
        """Tables of the Kineto analyses over the run's traces, a note (why there are none), their warnings."""
        paths = self._trace_paths(agg)
        if not paths:
            return {}, ("no torch.profiler trace files given or found beside the events" if agg.trace_files
                        else ""), []
        try:
            from my_utils.profiling.analysis import kineto

            analyze_traces = kineto.analyze_traces
        except (ImportError, AttributeError):
            return {}, "the Kineto analyses (my_utils.profiling.analysis.kineto) are not installed in this version", []
        try:
            result = analyze_traces(paths, trace_filter=self.trace_filter) if self.trace_filter is not None \
                else analyze_traces(paths)
        except Exception as exc:  # the metric analysis stands on its own; say why the trace part is missing
            _log.warning("Kineto analyses of %s failed: %s: %s", [str(p) for p in paths], type(exc).__name__, exc)
            return {}, f"Kineto analyses failed: {type(exc).__name__}: {exc}", []
        warnings = [str(w) for w in getattr(result, "warnings", ())]
        for w in warnings:
            _log.warning("%s", w)
        kept = getattr(result, "trace_filter", "")
        return (_kineto_tables(result), f"Kineto analyses of {len(paths)} trace file(s)" + (f" ({kept})" if kept else ""),
                warnings)


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
