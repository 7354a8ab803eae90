"""``analyze PATH...``: the run's files told by their content, read once together, and the headline on the terminal.

The command's flags (``--events``, ``--trace``, ``--nsys``, ``--ncu``) say what a file is; the
positional paths leave it to ``run.inputs.collect_inputs``. :class:`RunArgs` merges both into
what ``analyze`` already knows how to analyse (an events file, traces, Nsight exports) plus the
files another provider's reader turns into events (MyTimer and callback CSVs, NCCL logs, perf,
DCGM, cProfile), and keeps the table of every input for the report; ``run.analysis`` reads them
in one pass. :func:`say_result` prints what was written and, on a terminal, the headline
(``views.terminal``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import typer

from my_utils.profiling.formats.kinds import FileKind
from my_utils.profiling.run.inputs import RunInputs

__all__ = ["OWN_OUTPUTS", "RunArgs", "say_result"]

#: What ``analyze`` writes into its output folder: never read back as an input of the next run.
OWN_OUTPUTS = ("analysis_report.json", "analysis_report.md", "analysis_report.html", "nsys_timeline.html")
#: Lines said on stderr about files the analysis leaves out; the rest are in the report's ``run_inputs`` table.
MAX_NOTES = 20


@dataclass(frozen=True)
class RunArgs:
    """The positional inputs of ``analyze`` and the files among them a provider's reader reads."""

    inputs: RunInputs = field(default_factory=RunInputs)
    events_moved: bool = False  # --events named a file that is no events file (a profile CSV): read as an input

    @classmethod
    def of(cls, paths: Sequence[str], events: Path | None, output_dir: Path) -> RunArgs:
        """Collect ``paths`` (and ``--events`` when it names another readable kind); files named that the
        analysis cannot read are refused here, before anything is read."""
        from my_utils.profiling.formats.sniff import sniff
        from my_utils.profiling.run.inputs import collect_inputs

        specs = list(paths)
        moved = False
        if events is not None:
            kind = sniff(events).kind
            if kind.readable and kind is not FileKind.EVENTS_JSONL:  # e.g. the callbacks' profile_rank_<r>.csv
                specs.append(str(events))
                moved = True
        if not specs:
            return cls()
        inputs = collect_inputs(specs, exclude=[output_dir / name for name in OWN_OUTPUTS])
        inputs.refuse_named()
        _say_left_out(inputs)
        return cls(inputs, moved)

    def merged(self, events: Path | None, traces: Sequence[Path] | None, nsys: Sequence[str], ncu: Sequence[Path]
               ) -> tuple[Path | None, list[Path] | None, list[str], list[Path]]:
        """The flags' inputs with the positional ones added: ``(events, traces, nsys specs, ncu files)``."""
        if self.events_moved:
            events = None
        found = self.inputs.of(FileKind.EVENTS_JSONL)
        if events is None and len(found) == 1:
            events = found[0]
        all_traces = [*(traces or []), *self.inputs.of(FileKind.KINETO_TRACE)]
        return (events, all_traces or None, [*nsys, *self.inputs.nsys_specs],
                [*ncu, *self.inputs.of(FileKind.NCU_CSV, FileKind.NCU_REP)])

    def other_files(self) -> list[Path]:
        """The files a provider's reader reads (an output must never replace one)."""
        return [p for _provider, p, _rank in self.inputs.readers]


def _say_left_out(inputs: RunInputs) -> None:
    left = inputs.left_out
    for f in left[:MAX_NOTES]:
        typer.echo(f"note: {f.line()}", err=True)
    if len(left) > MAX_NOTES:
        typer.echo(f"note: {len(left) - MAX_NOTES} more files not read (each with what reads it in the report's "
                   "run_inputs table)", err=True)


def say_result(paths: Sequence[Path], headline: bool | None) -> None:
    """``wrote PATH`` per report, then (on a terminal, or with ``--headline``) the verdict, the three fixes to make
    first with what each could save, and where the report is."""
    for path in paths:
        typer.echo(f"wrote {path}")
    if headline is False or (headline is None and not sys.stdout.isatty()):
        return
    json_path = next((p for p in paths if p.suffix == ".json"), None)
    if json_path is None:
        return
    from my_utils.profiling.model.report import AnalysisReport
    from my_utils.profiling.views.terminal import headline_lines

    report = AnalysisReport.load(json_path)
    by_name = {p.name: p for p in paths}
    shown = by_name.get("analysis_report.html") or by_name.get("analysis_report.md") or json_path
    typer.echo("")
    for line in headline_lines(report, shown):
        typer.echo(line)
