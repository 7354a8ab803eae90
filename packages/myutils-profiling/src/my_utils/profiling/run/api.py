"""The notebook's door onto a run: ``open_run(PATH...)`` opens what ``myutils-profile analyze PATH...`` opens.

``open_run`` collects the files (told by their content), reads each once and analyses the run
through ``run.analysis.analyse_run``, the function the command calls, so a notebook and the
command agree on every number. The :class:`Run` it returns holds the report and gives it the
ways a notebook wants: every table as a pandas DataFrame, every chart of the HTML page as a
plotly Figure (the same figure), the headline and the ranked findings, the critical path as an
object that writes its overlay, and the Kineto, nsys and ncu diffs against another run as
DataFrames. Nothing is written unless asked (:meth:`Run.write`).

Works in a plain script without an ``if __name__ == "__main__":`` guard and in Jupyter: the
process pools it may start never re-run the caller's ``__main__`` (``my_utils.core.mainless``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from my_utils.profiling.formats.kinds import FileKind
from my_utils.profiling.run.inputs import RunInputs

if TYPE_CHECKING:
    import pandas as pd
    import plotly.graph_objects as go

    from my_utils.profiling.kineto.filters import TraceFilter
    from my_utils.profiling.kineto.overlay import OverlayResult
    from my_utils.profiling.model.report import AnalysisReport, Finding

__all__ = ["CriticalPathView", "Run", "open_run"]


def open_run(*paths: str | os.PathLike[str], workload: str = "pretrain", trace_filter: str | TraceFilter | None = None,
             iteration_range: str | None = None, gpu: str | None = None, executor: Any = None,
             progress: bool = False) -> Run:
    """Open and analyse the run in ``paths`` (files, folders, globs, nsys templates: what ``analyze`` takes).

    ``trace_filter``: the part of each Kineto trace analysed (``"hta_default"``, ``"first_iteration"``... as
    ``--filter``, or a ``TraceFilter``); ``iteration_range``/``gpu``: as ``analyze``'s options for Nsight
    exports; ``executor``: ``"serial"``, ``"process"``, ``"dask"``... (default: this process for small runs).
    A file the run cannot read that was named directly raises ``UnsupportedInputError`` saying what reads it.
    """
    from my_utils.core.errors import UsageError
    from my_utils.profiling.analysis.workloads import get_workload
    from my_utils.profiling.kineto.filters import TraceFilter
    from my_utils.profiling.run.inputs import collect_inputs

    if not paths:
        raise UsageError("open_run(): give the run's files or folders, e.g. open_run('traces/')")
    get_workload(workload)  # an unknown workload is refused before anything is read
    kept = TraceFilter.parse(trace_filter) if isinstance(trace_filter, str) else trace_filter
    inputs = collect_inputs([os.fspath(p) for p in paths])
    inputs.refuse_named()
    return Run(inputs, workload=workload, trace_filter=kept, iteration_range=iteration_range, gpu=gpu,
               executor=executor, progress=progress)


class Run:
    """One analysed run (module docstring). Build it with :func:`open_run`."""

    def __init__(self, inputs: RunInputs, *, workload: str = "pretrain", trace_filter: TraceFilter | None = None,
                 iteration_range: str | None = None, gpu: str | None = None, executor: Any = None,
                 progress: bool = False) -> None:
        from my_utils.profiling.run.analysis import analyse_run

        self.files = inputs
        self.trace_filter = trace_filter
        events = inputs.of(FileKind.EVENTS_JSONL)
        nsys, ncu = list(inputs.nsys_specs), inputs.of(FileKind.NCU_CSV, FileKind.NCU_REP)
        nsight = {"nsys": inputs.of(FileKind.NSYS_SQLITE), "ncu": ncu, "specs": nsys,
                  "iteration_range": iteration_range, "gpu": gpu, "model": None} if nsys or ncu else None
        analysed = analyse_run(events[0] if len(events) == 1 else None, workload,
                               inputs.of(FileKind.KINETO_TRACE) or None, nsight=nsight, inputs=inputs,
                               trace_filter=trace_filter, progress=progress, executor=executor)
        self.report: AnalysisReport = analysed.report
        self._executor = executor

    def __repr__(self) -> str:
        kinds = sorted({f.kind.name.lower() for f in self.files.files if f.read})
        first = self.verdict.splitlines()[0] if self.verdict else "no verdict"
        return f"<Run of {sum(f.read for f in self.files.files)} files ({', '.join(kinds)}): " \
               f"{first if len(first) <= 100 else first[:99] + '…'}>"

    def _repr_html_(self) -> str:
        import html

        from my_utils.profiling.views.terminal import headline_lines

        return "<pre>" + html.escape("\n".join(headline_lines(self.report))) + "</pre>"

    # -- what the run holds ------------------------------------------------------------

    @property
    def inputs(self) -> pd.DataFrame:
        """Every file of the run: its kind, rank (and where the rank came from), whether it was read, what reads it."""
        from my_utils.profiling.views.frames import table_frame

        return table_frame("run_inputs", self.report.tables.get("run_inputs") or self.files.rows())

    @property
    def traces(self) -> list[Path]:
        """The Kineto traces of the run."""
        return self.files.of(FileKind.KINETO_TRACE)

    # -- tables, findings, headline ----------------------------------------------------

    @property
    def tables(self) -> list[str]:
        """The names of the report's tables (``steps``, ``kineto_temporal``, ``nsys_busy_device``...)."""
        return [n for n, rows in self.report.tables.items() if isinstance(rows, list)]

    def table(self, name: str) -> pd.DataFrame:
        """One table of the report as a DataFrame (``KeyError`` naming the tables there are)."""
        from my_utils.profiling.views.frames import table_frame

        if name not in self.tables:
            from my_utils.profiling.kineto.frames import columns

            if name.startswith("kineto_") and columns(name.removeprefix("kineto_")):
                return table_frame(name, [])  # a Kineto table with no row in this run: the report leaves it out
            raise KeyError(f"{name!r}: this run's report has no such table; it has {', '.join(self.tables)}")
        return table_frame(name, self.report.tables[name])

    def frames(self) -> dict[str, pd.DataFrame]:
        """Every table of the report as a DataFrame, keyed by name."""
        from my_utils.profiling.views.frames import table_frames

        return table_frames(self.report)

    @property
    def findings(self) -> pd.DataFrame:
        """The findings, largest time a fix could save first (``findings_list`` has the objects)."""
        from my_utils.profiling.views.frames import findings_frame

        return findings_frame(self.report)

    @property
    def findings_list(self) -> list[Finding]:
        """The findings as objects (evidence, advice and impact included)."""
        return list(self.report.findings)

    @property
    def headline(self) -> dict[str, Any]:
        """The report's first screen: context, figures, verdict, top findings (the JSON report's ``headline``)."""
        return dict(self.report.headline or {})

    @property
    def verdict(self) -> str:
        """The verdict's lines, as the page and the terminal say them."""
        return "\n".join(str(x) for x in (self.headline.get("verdict") or {}).get("lines") or [])

    def summary(self) -> str:
        """The headline as ``analyze`` prints it on a terminal: verdict, the fixes to make first, the run."""
        from my_utils.profiling.views.terminal import headline_lines

        return "\n".join(headline_lines(self.report))

    # -- charts ---------------------------------------------------------------------

    @cached_property
    def _figures(self) -> dict[str, go.Figure]:
        from my_utils.profiling.views.figures import report_figures

        return report_figures(self.report)

    def figures(self) -> dict[str, go.Figure]:
        """Every chart of the HTML report as a plotly Figure, keyed by its id on the page (``chart-step-time``...)."""
        return dict(self._figures)

    def figure(self, chart_id: str) -> go.Figure:
        """One chart (``KeyError`` naming the charts there are)."""
        if chart_id not in self._figures:
            raise KeyError(f"{chart_id!r}: no such chart for this run; there are {', '.join(self._figures) or 'none'}")
        return self._figures[chart_id]

    # -- critical path ------------------------------------------------------------------

    def critical_path(self, rank: int | None = None) -> CriticalPathView:
        """The critical path of ``rank``'s trace (the first rank when None), as the report computed it."""
        paths = self.table("kineto_critical_path") if "kineto_critical_path" in self.tables else None
        if paths is None or paths.empty:
            from my_utils.core.errors import UsageError

            raise UsageError("critical_path(): this run has no Kineto trace with a critical path (give a "
                             "torch.profiler trace with GPU activity)")
        ranks = paths["rank"].tolist()
        chosen = ranks[0] if rank is None else rank
        if chosen not in ranks:
            raise KeyError(f"rank {rank}: the critical path is known for ranks {ranks}")
        trace = self._trace_of(chosen)

        def of(name: str) -> pd.DataFrame:
            frame = self.table(name) if name in self.tables else paths.iloc[0:0]
            return frame[frame["rank"] == chosen].reset_index(drop=True) if "rank" in frame else frame

        return CriticalPathView(chosen, trace, of("kineto_critical_path"), of("kineto_critical_path_breakdown"),
                            of("kineto_critical_path_top"), self.trace_filter)

    def _trace_of(self, rank: Any) -> Path:
        for row in self.report.tables.get("kineto_inputs") or []:
            if row.get("rank") == rank and row.get("file"):
                return Path(str(row["file"]))
        if len(self.traces) == 1:
            return self.traces[0]
        raise KeyError(f"rank {rank}: no trace file of that rank in this run")

    # -- diffs -----------------------------------------------------------------------

    def diff(self, other: Run | str | os.PathLike[str] | Sequence[str | os.PathLike[str]], *, sigmas: float = 3.0,
             min_pct: float = 5.0) -> dict[str, pd.DataFrame]:
        """This run (base) against ``other`` (target; a Run or its paths): ``{"kineto"|"nsys"|"ncu": DataFrame}``
        for each kind both runs hold, one row per name (and metric for ncu), as ``myutils-profile diff``,
        ``nsys diff`` and ``ncu diff`` compare them."""
        from my_utils.profiling.run.diffs import diff_results
        from my_utils.profiling.views.frames import diff_frame

        if not isinstance(other, Run):
            from my_utils.profiling.run.inputs import collect_inputs

            specs = [other] if isinstance(other, (str, os.PathLike)) else list(other)
            other_files = collect_inputs([os.fspath(p) for p in specs])
        else:
            other_files = other.files
        results = diff_results(self.files, other_files, sigmas=sigmas, min_pct=min_pct, executor=self._executor)
        return {kind: diff_frame(result) for kind, result in results.items()}

    # -- writing -----------------------------------------------------------------------

    def write(self, output_dir: str | os.PathLike[str], formats: Sequence[str] = ("json", "markdown", "html")
              ) -> list[Path]:
        """Write the reports ``analyze`` writes (``analysis_report.json``, ``.md``, ``.html``) into ``output_dir``."""
        from my_utils.profiling.collector import write_report

        folder = Path(output_dir)
        folder.mkdir(parents=True, exist_ok=True)
        return [write_report(self.report, fmt, None, folder) for fmt in formats]


@dataclass(frozen=True)
class CriticalPathView:
    """One rank's critical path: its summary row, its breakdown by kind, the events that set it, and its trace.

    :meth:`write_overlay` writes the trace back with the path drawn on it (flow arrows, ``args.critical``)
    and the counter tracks, for Perfetto (``kineto.overlay.write_overlay``).
    """

    rank: Any
    trace: Path
    summary: pd.DataFrame
    breakdown: pd.DataFrame
    top: pd.DataFrame
    trace_filter: Any = None

    @property
    def length_us(self) -> float:
        """The path's length (µs)."""
        return float(self.summary["length_us"].iloc[0])

    def write_overlay(self, output: str | os.PathLike[str], **options: Any) -> OverlayResult:
        """Copy the trace to ``output`` (``.json``/``.json.gz``) with the critical path and counters drawn on it."""
        from my_utils.profiling.kineto.overlay import write_overlay

        options.setdefault("trace_filter", self.trace_filter)
        return write_overlay(self.trace, Path(output), rank=self.rank, **options)
