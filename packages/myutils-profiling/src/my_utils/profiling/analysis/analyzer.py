"""MetricsAnalyzer: metric events → an ``AnalysisReport`` (scores, findings, summary, tables).

The events file is streamed (``iter_events``) and folded on the fly (``analysis.aggregate``) into one cell per
(name, step, rank, source): count, sum, min, max. Memory grows with names × steps × ranks,
never with the number of raw events (a 2M-event trace ingested into a few thousand
aggregated events stays a few thousand cells). Rules then see one aggregated event per
cell — the plugin contract's ``evaluate(events)`` with events whose ``attrs`` carry
``count``/``min``/``max`` — so a third-party rule gets the same view as the built-ins.

Rules are the ``myutils_analysis_rules`` plugins (the built-ins included); each is built
with the workload profile's options for it, runs alone, and a rule that fails or returns
a malformed finding is named in ``summary["rule_errors"]`` while the others still report.
When the events came from torch.profiler traces and the traces can be found, the Kineto
analyses (``my_utils.profiling.kineto``) add their tables and the traces' context
(GPU, world size, versions) joins ``hardware``; likewise Nsight Systems exports and Nsight
Compute CSVs (``analysis.nsight.analyze``) add their tables, facts and findings (``analysis.nsight.rules``).

Facts, then findings (ARCHITECTURE.md §8): after the rules, ``analysis.facts`` states the
run's numbers as facts, ``analysis.fact_rules`` promotes the clearest to findings,
``analysis.diagnosis`` reaches the verdict, restates each finding's impact on one denominator,
sets severity from it, gates the advice by verdict and by what the capture holds, and ranks the
findings by the time they could save (one per fact); ``analysis.headline`` builds the first screen. A score dimension without data is "not
measured" (``report.dimensions``), never 100.
"""

from __future__ import annotations

import logging
import operator
import os
import statistics
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from my_utils.core.errors import InputError
from my_utils.core.events import MetricEvent
from my_utils.core.paths import as_path, as_paths
from my_utils.profiling.analysis.aggregate import (
    AggregatedEvents,
    EventAggregate,
    _without_cyclic_gc,
    event_rows,
)
from my_utils.profiling.analysis.assembly import (
    capture_findings,
    not_measured,
    report_title,
    run_hardware,
    run_warnings,
)
from my_utils.profiling.analysis.nsight.analyze import NsightInputs, NsightResult
from my_utils.profiling.analysis.overhead import overhead_statement
from my_utils.profiling.analysis.rules._series import (
    STEP_TIME,
    build_series,
)
from my_utils.profiling.analysis.rules._stats import cv, quantile
from my_utils.profiling.analysis.tables import (
    MAX_OPERATION_ROWS,
    MAX_SERIES_ROWS,
    build_tables,
)
from my_utils.profiling.analysis.workloads import DEFAULT_WORKLOAD, WorkloadProfile, get_workload
from my_utils.profiling.model.report import (
    REPORT_SCHEMA_VERSION,
    SEVERITIES,
    AnalysisReport,
    Finding,
)
from my_utils.profiling.model.scores import compute_scores, score_dimensions

_log = logging.getLogger("my_utils.profiling.analysis")

__all__ = ["MAX_OPERATION_ROWS", "MAX_SERIES_ROWS", "AggregatedEvents", "EventAggregate", "MetricsAnalyzer",
           "build_tables", "capture_findings", "event_rows"]


class MetricsAnalyzer:
    """Analyse metric events (a ``metrics_events.jsonl`` path, or events) into an ``AnalysisReport``.

    ``workload`` picks the thresholds (``pretrain``, ``finetune``, ``inference``); ``rules``
    restricts the rules to these names (default: every installed rule, and the fact findings of
    ``analysis.fact_rules``, which ``"facts"`` names); ``rule_options``
    overrides options per rule name; ``traces`` names torch.profiler trace files for the
    Kineto analyses (default: the files named in the events, looked up beside the events
    file); ``hardware`` describes the machine of the run (the diff warns when two differ);
    ``progress`` draws a counter of events read on stderr (a terminal only); ``kineto`` is a
    ``KinetoAnalysis`` already made from the traces (``analyze --trace`` reads each trace once);
    ``nsight`` names Nsight Systems exports / Nsight Compute CSVs, or carries what the caller made
    of them (``analysis.nsight.NsightInputs``; default: the exports named in the events, found
    beside the events file). A trace or export that is bad input raises ``InputError``: the
    report is never presented without it.
    """

    def __init__(self, events: str | Path | Iterable[MetricEvent], workload: str | WorkloadProfile = DEFAULT_WORKLOAD,
                 *, rules: Sequence[str] | None = None, rule_options: Mapping[str, Mapping[str, Any]] | None = None,
                 traces: Sequence[str | Path] | None = None, hardware: Mapping[str, Any] | None = None,
                 overhead_host: str = "analysis host", progress: bool = False, kineto: Any = None,
                 nsight: NsightInputs | None = None, trace_filter: Any = None) -> None:
        # a path of any kind is read as a file; anything else is the events themselves
        self.source = as_path(events, "events") if isinstance(events, (str, os.PathLike)) else events
        self.workload = get_workload(workload)
        self.rule_names = list(rules) if rules is not None else None
        self.rule_options = {k: dict(v) for k, v in (rule_options or {}).items()}
        self.traces = as_paths(traces, "traces") if traces is not None else None
        self.hardware = dict(hardware or {})
        self.overhead_host = overhead_host
        self.progress = progress
        self.kineto = kineto  # a KinetoAnalysis the caller made in its own pass over the traces
        self.nsight = nsight
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
                agg.fold_file(self.source, bar.advance)
            else:
                agg.fold_rows(event_rows(self.source), bar.advance)
        return agg

    # -- the report ------------------------------------------------------------------

    @_without_cyclic_gc
    def analyze(self) -> AnalysisReport:
        """Read, run every rule, state the facts, rank the findings, score, and return the report (nothing is written)."""
        from my_utils.profiling.analysis.diagnosis import diagnose
        from my_utils.profiling.analysis.fact_rules import fact_findings
        from my_utils.profiling.analysis.facts import build_facts, primary_step_source
        from my_utils.profiling.analysis.headline import build_headline
        from my_utils.profiling.analysis.nsight.analyze import measured_dimensions, merge_facts
        from my_utils.profiling.analysis.nsight.rules import nsight_findings
        from my_utils.profiling.analysis.run_overlap import repeated_step_rows

        agg = self.aggregate()
        events = agg.aggregated()
        series = build_series(events)
        findings, ran, errors = self._run_rules(events)
        tables = build_tables(series, agg, primary_step_source(series), events)
        kineto_tables, kineto_note, kineto_warnings = self._kineto(agg)
        tables.update(kineto_tables)
        hardware = run_hardware(self.hardware, kineto_tables.get("kineto_context") or [])
        nsight = self._nsight(agg, hardware)
        tables.update(nsight.tables)
        warmup = {**self.workload.options_for("variability"),
                  **self.rule_options.get("variability", {})}.get("warmup_steps", 1)
        facts = merge_facts(build_facts(series, tables, hardware, warmup if isinstance(warmup, int) else 1),
                            nsight.facts)
        hardware = {**nsight.hardware, **hardware}  # the caller's and the traces' description win
        by_id = {f.id: f for f in facts}
        seen = {f.id for f in findings}
        promoted = fact_findings(by_id, series, tables) + nsight_findings(by_id, tables) \
            if self.rule_names is None or "facts" in self.rule_names \
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
        findings += [f for f in capture_findings(kineto_tables.get("kineto_health", []) + repeated_step_rows(agg))
                     if f.id not in seen]
        diagnosis = diagnose(findings, by_id, tables, (name for name, _source in agg.meta))
        findings = diagnosis.findings
        unmeasured = measured_dimensions(not_measured(series, agg, kineto_tables, findings), tables)
        if diagnosis.bound == "setup":  # principle 1: a capture of one-off work has no steady state to score
            unmeasured = {**unmeasured, "performance": "the capture is setup-dominated: no steady state to judge "
                                                       "(see the verdict)"}
        scores = compute_scores(findings, [d for d in ("performance", "stability", "memory", "capture")
                                           if d not in unmeasured])
        summary = _summary(agg, series, findings, ran, errors)
        summary["warnings"] = run_warnings(agg, kineto_warnings, nsight.warnings)
        summary["step_time_source"] = primary_step_source(series)
        summary["verdict"] = diagnosis.bound
        summary["contents"] = diagnosis.contents.to_dict()
        if diagnosis.dropped:
            summary["dropped_findings"] = diagnosis.dropped
        if kineto_note:
            summary["kineto"] = kineto_note
        if nsight.note:
            summary["nsight"] = nsight.note
        inputs = self._inputs(agg)
        if nsight.files:
            inputs["nsight_files"] = nsight.files
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
        from my_utils.profiling.formats._files import locate_named

        # names read from the events are names inside the events' folder, never patterns or ways out
        located, missing, ambiguous = locate_named(Path(self.source).parent, agg.trace_files)
        for what, names in (("not found beside the events", missing), ("ambiguous (several files below the "
                            "events' folder have that name)", ambiguous)):
            if names:
                _log.warning("torch.profiler trace(s) named by the events %s: %s; pass them with --trace",
                             what, ", ".join(map(repr, names[:5])))
        return sorted(set(located.values()))

    def _nsight(self, agg: EventAggregate, hardware: Mapping[str, Any]) -> NsightResult:
        """The Nsight analyses of the exports given, or named in the events (``analysis.nsight``)."""
        from my_utils.profiling.analysis.nsight.analyze import (
            analyze_nsight,
            combine,
            find_named,
            missing_note,
        )

        events_path = self.source if isinstance(self.source, (str, Path)) else None
        inputs = combine(self.nsight, find_named(agg.nsight_files, events_path))
        if not inputs:
            return NsightResult(note=missing_note(inputs, events_path is None) if inputs.missing else "")
        try:
            return analyze_nsight(inputs, hardware)
        except InputError:  # an export the run names is bad input: exit 2, never a report without it
            raise
        except Exception as exc:  # the metric analysis stands on its own; say why the Nsight part is missing
            _log.warning("Nsight analyses failed: %s: %s", type(exc).__name__, exc)
            return NsightResult(note=f"Nsight analyses failed: {type(exc).__name__}: {exc}")

    def _kineto(self, agg: EventAggregate) -> tuple[dict[str, list[dict[str, Any]]], str, list[str]]:
        """Tables of the Kineto analyses over the run's traces, a note (why there are none), their warnings."""
        if self.kineto is not None:  # made by the caller in its own pass over the traces
            warnings = [str(w) for w in getattr(self.kineto, "warnings", ())]
            for w in warnings:
                _log.warning("%s", w)
            kept = getattr(self.kineto, "trace_filter", "")
            return (_kineto_tables(self.kineto), f"Kineto analyses of {len(self.kineto.inputs)} trace file(s)"
                    + (f" ({kept})" if kept else ""), warnings)
        paths = self._trace_paths(agg)
        if not paths:
            return {}, ("no torch.profiler trace files given or found beside the events" if agg.trace_files
                        else ""), []
        try:
            from my_utils.profiling import kineto

            analyze_traces = kineto.analyze_traces
        except (ImportError, AttributeError):
            return {}, "the Kineto analyses (my_utils.profiling.kineto) are not installed in this version", []
        try:
            result = analyze_traces(paths, trace_filter=self.trace_filter) if self.trace_filter is not None \
                else analyze_traces(paths)
        except InputError:  # a trace the run names is bad input: exit 2, never a report without it
            raise
        except Exception as exc:  # the metric analysis stands on its own; say why the trace part is missing
            _log.warning("Kineto analyses of %s failed: %s: %s", [str(p) for p in paths], type(exc).__name__, exc)
            return {}, f"Kineto analyses failed: {type(exc).__name__}: {exc}", []
        warnings = [str(w) for w in getattr(result, "warnings", ())]
        for w in warnings:
            _log.warning("%s", w)
        kept = getattr(result, "trace_filter", "")
        return (_kineto_tables(result), f"Kineto analyses of {len(paths)} trace file(s)" + (f" ({kept})" if kept else ""),
                warnings)




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
    # the distinct steps and ranks of the cells, the sets made at C speed (a Python loop over 1M keys cost more)
    steps = sorted(set(map(operator.itemgetter(1), agg.cells)) - {None})
    ranks = sorted(set(map(operator.itemgetter(2), agg.cells)) - {None})
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
