"""One run analysed: every file read once (``run.read``), then the analyzer, then the report's account of its inputs.

Both doors open the run here: ``myutils-profile analyze`` (``cli.analyze.stage_reports``, which
then writes the reports) and the notebook API (``run.api.open_run``, which keeps the report and
what was read in memory). So the two give the same report for the same files.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from my_utils.core.events import MetricEvent
from my_utils.profiling.run.inputs import RunInputs
from my_utils.profiling.run.read import ReadPlan, RunRead, events_beside, read_run

__all__ = ["Analysed", "analyse_run"]


@dataclass
class Analysed:
    """The report, what the one pass read (None when only an events file was analysed), the files not counted."""

    report: Any  # model.report.AnalysisReport
    read: RunRead | None = None
    skipped: dict[Path, str] = field(default_factory=dict)


def _source(read: RunRead, events: Path | Sequence[MetricEvent] | None, skipped: dict[Path, str]) -> Any:
    """What the analyzer reads: the events read, or the events file with the other files' events beside it."""
    if events is None:
        return read.events()
    if not read.by_file:
        return events
    if isinstance(events, Path):
        return events_beside(events, read.by_file, skipped)
    return _chain(events, read.by_file)


def _chain(events: Sequence[MetricEvent], by_file: dict[Path, list[MetricEvent]]) -> Iterator[MetricEvent]:
    yield from events
    for evs in by_file.values():
        yield from evs


def analyse_run(events: Path | Sequence[MetricEvent] | None, workload: str, traces: Sequence[Path] | None, *,
                settings: Any = None, nsight: dict[str, Any] | None = None, inputs: RunInputs | None = None,
                trace_filter: Any = None, progress: bool = False, executor: Any = None,
                events_file: Path | None = None) -> Analysed:
    """Read and analyse a run (see ``cli.analyze.stage_reports`` for the arguments); nothing is written.

    ``events``: an events file, events in memory, or None (the files' own events); ``traces``: Kineto
    traces (None: those the events name, found beside them); ``nsight``: ``nsys`` specs / files, ``ncu``
    files, ``iteration_range``, ``gpu``, ``model``; ``inputs``: the run's files told by their content,
    whose provider-read files join the one pass and whose table (``run_inputs``) joins the report.
    """
    from my_utils.profiling.analysis.analyzer import MetricsAnalyzer

    options: dict[str, Any] = {}
    source: Any = events
    skipped: dict[Path, str] = {}
    readers = inputs.readers if inputs is not None else ()
    read = None
    if traces or nsight or readers:
        nsys: tuple[str, ...] = ()
        ncu: tuple[Path, ...] = ()
        nsight_options: dict[str, Any] = {}
        if nsight:
            nsys = tuple(str(s) for s in (nsight.get("specs") or nsight["nsys"]))
            ncu = tuple(nsight["ncu"])
            nsight_options = {k: nsight.get(k) for k in ("iteration_range", "gpu", "model")}
        read = read_run(ReadPlan(tuple(traces or ()), nsys, ncu, readers), with_events=events is None,
                        trace_filter=trace_filter, nsight_options=nsight_options, executor=executor,
                        progress=progress)
        if traces:  # the hardware comes from the same pass: the analyzer reads it off the Kineto contexts
            options.update(kineto=read.kineto, traces=list(traces))
        if nsight:
            options["nsight"] = read.nsight.inputs
        source = _source(read, events, skipped)
    rules = list(settings.rules) if settings is not None and settings.rules is not None else None
    rule_options = settings.rule_options if settings is not None else None
    report = MetricsAnalyzer(source, workload, progress=progress, rules=rules, rule_options=rule_options,
                             trace_filter=trace_filter, **options).analyze()
    report = _writable(report)
    if events_file is not None:
        report.inputs["events_file"] = str(events_file)
    elif events is None and traces:
        report.inputs["trace_files"] = [str(t) for t in traces]
    if nsight:
        report.inputs["nsight_paths"] = [str(p) for p in (*nsight["nsys"], *nsight["ncu"])]
    if inputs:
        report.tables["run_inputs"] = inputs.table(skipped)
    return Analysed(report, read, skipped)


def _writable(report: Any) -> Any:
    """``report`` itself, or a copy whose strings a UTF-8 file can hold (a trace's name with a lone surrogate)."""
    import json

    from my_utils.profiling.formats.utf8 import utf8_clean
    from my_utils.profiling.model.report import AnalysisReport

    data = report.to_dict()
    try:
        json.dumps(data, ensure_ascii=False, default=str).encode("utf-8")
    except UnicodeEncodeError:
        return AnalysisReport.from_dict(utf8_clean(data), "<report>")
    return report
