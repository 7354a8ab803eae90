"""``analyze --nsys`` / ``--ncu``: each Nsight export read once, for both its events and the Nsight analyses.

An nsys export is opened once (``nsys.run.analyze_run``): the summary, the NCCL alignment and
the ``nsys_sqlite`` provider's events (``nsys.provider.export_events``, called on the open
export) share the connection. An ncu CSV is parsed once (``ncu.csv_read.read_ncu_csv``): its
events are the provider's, and the launches the analysis reads are grouped from them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from my_utils.core.events import MetricEvent


@dataclass
class NsightRead:
    """What one pass over the Nsight inputs gave: the events (when asked for) and the analysis inputs."""

    events: list[MetricEvent] = field(default_factory=list)
    inputs: Any = None  # analysis.nsight.NsightInputs
    files: list[Path] = field(default_factory=list)


def nsys_files(specs: Sequence[str | Path]) -> list[Path]:
    """The exports ``--nsys`` names (files, folders, globs, ``%q{RANK}`` templates); bad ones raise at once."""
    from my_utils.profiling.formats.ranks import expand_inputs

    return [i.path for i in expand_inputs(specs)] if specs else []


def ncu_files(paths: Sequence[Path]) -> list[Path]:
    """The ncu exports ``--ncu`` names: CSV files (any layout), ``.ncu-rep`` files, or folders of CSVs."""
    from my_utils.core.errors import InputError
    from my_utils.profiling.ncu.provider import NcuCsvMetricsProvider

    out: list[Path] = []
    for p in paths:
        if not p.exists():
            raise InputError(str(p), None, "an existing Nsight Compute export (CSV or .ncu-rep) or folder")
        out.extend([p] if p.is_file() else NcuCsvMetricsProvider(p).files())
    return out


def read_nsight(nsys: Sequence[str | Path], ncu: Sequence[Path], *, with_events: bool,
                iteration_range: str | None = None, gpu: str | None = None, model: Any = None) -> NsightRead:
    """Read every Nsight input once (module docstring); ``with_events``: also return the providers' events.

    ``model`` (``nsys.mfu.ModelFlops``) gives the nsys exports' MFU."""
    from my_utils.profiling.analysis.nsight.analyze import NsightInputs

    out = NsightRead()
    run = None
    if nsys:
        from my_utils.profiling.nsys.provider import export_events
        from my_utils.profiling.nsys.run import analyze_run

        def visit(db: Any) -> None:
            out.events.extend(export_events(db))

        run = analyze_run(nsys, iteration_range=iteration_range, visit=visit if with_events else None, model=model)
        out.files += [i.path for i in run.inputs]
    launches = None
    if ncu:
        from my_utils.profiling.ncu.csv_read import read_ncu_csv
        from my_utils.profiling.ncu.launches import launches_from_events, read_launches

        launches = []
        for path in ncu:
            if path.suffix.lower() == ".ncu-rep":
                launches += read_launches(path)  # through ncu_report, or refused in one line
                continue
            events = read_ncu_csv(path)
            launches += launches_from_events(events)
            if with_events:
                out.events.extend(events)
        out.files += list(ncu)
    out.inputs = NsightInputs(nsys_run=run, ncu_launches=tuple(launches) if launches is not None else None,
                              iteration_range=iteration_range, gpu=gpu, model=model)
    return out


#: The standalone timeline page ``analyze --nsys`` writes beside an HTML report, and the events it may hold.
TIMELINE_PAGE = "nsys_timeline.html"
TIMELINE_EVENTS = 500_000


def write_timeline_page(specs: Sequence[str | Path], path: Path) -> Path:
    """The exports' standalone timeline page (``nsys timeline --html``, at most :data:`TIMELINE_EVENTS` events,
    short slices in density bins) at ``path``: the page an nsys report links to."""
    from my_utils.profiling.nsys.timeline import read_timeline
    from my_utils.profiling.nsys.timeline_html import TimelinePage

    page = TimelinePage(bins="auto")
    read_timeline(list(specs), [page], max_events=TIMELINE_EVENTS)
    page.write(path)
    return path

