"""``myutils-profile analyze``: metric events, Kineto traces and/or Nsight exports → ``analysis_report.json`` (and .md/.html).

``--trace`` alone analyses a torch.profiler trace without a prior ingest; with ``--events``
the traces only feed the Kineto analyses. Either way each trace is read once: the Kineto
provider's pass also feeds the Kineto analyses and reads the trace's context (GPU, world
size, versions: the report's ``hardware``). ``--nsys`` (Nsight Systems exports) and ``--ncu``
(Nsight Compute CSVs) work the same way (``run.nsight``: each export read once for
its events and the Nsight analyses). An input that is bad fails the command (exit 2); the
reports are written together at the end, or not at all.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from my_utils.core.cli.guard import exit_on_error
from my_utils.profiling.cli._app import app

if TYPE_CHECKING:
    from my_utils.core.events import MetricEvent
    from my_utils.profiling.cli._outputs import StagedOutputs

WORKLOADS = ("pretrain", "finetune", "inference")  # analysis.workloads.WORKLOADS; a test keeps them equal
_TRACE_PATTERNS = ("*.json", "*.json.gz")


@app.command("analyze")
@exit_on_error
def analyze(
    paths: list[str] = typer.Argument(
        None, help="The run's files, folders or globs (an nsys template like report_%q{RANK}.sqlite too): each "
                   "file's kind is told by its content (MyTimer and callback CSVs, metric events, Kineto traces, nsys "
                   "exports and reports, ncu exports, NCCL logs, perf stat, DCGM, cProfile); a file analyze does not "
                   "read gets one line saying what it is and what reads it.", show_default=False),
    events: Path | None = typer.Option(None, "--events", help="metrics_events.jsonl written by a collector or by "
                                       "ingest, or a profile_rank_<r>.csv (optional with --trace: the traces' own "
                                       "events are analysed)."),
    workload: str = typer.Option("pretrain", "--workload", help=f"Thresholds profile: {', '.join(WORKLOADS)}."),
    output_dir: Path = typer.Option(Path("./analysis_out"), "--output-dir", help="Where the reports are written."),
    trace: list[Path] = typer.Option(
        [], "--trace", help="A torch.profiler trace (.json/.json.gz, or a folder of rank traces) of the run "
                            "(repeatable). Alone, it is analysed without a prior ingest; with --events it feeds "
                            "the Kineto analyses (default: the trace files the events name, found beside them)."),
    formats: str = typer.Option("json,markdown,html", "--formats",
                                help="Reports to write, comma-separated: json, markdown, html."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar on stderr."),
    nsys: list[str] = typer.Option(
        [], "--nsys", help="Nsight Systems exports (nsys export --type sqlite) of the run: a file, folder, glob or "
                           "report_%q{RANK}.sqlite template (repeatable). Alone, they are analysed without a prior "
                           "ingest; with --events they feed the Nsight analyses (default: the exports the events "
                           "name, found beside them)."),
    ncu: list[Path] = typer.Option(
        [], "--ncu", help="Nsight Compute exports of the run: CSV (any layout), .ncu-rep, or a folder (repeatable); "
                          "as --nsys."),
    iteration_range: str | None = typer.Option(
        None, "--iteration-range", help="The NVTX range of one iteration in the nsys exports (GLOB; default: "
                                        "train_step, ProfilerStep#*, step, iteration, iter)."),
    gpu: str | None = typer.Option(None, "--gpu", help="The GPU the ncu exports were profiled on, as tools name it "
                                   "(e.g. 'NVIDIA A100-SXM4-80GB'), for the roofline when no input records it, and "
                                   "for the MFU of nsys exports without a GPU table."),
    flops: str | None = typer.Option(None, "--flops-per-iteration", help="Model FLOPs of ONE GPU in one NVTX "
                                     "iteration of the nsys exports: gives their MFU (see `nsys summary`)."),
    params: str | None = typer.Option(None, "--model-params", help="Model parameters N; with "
                                      "--tokens-per-iteration, FLOPs per iteration = 6·N·T."),
    tokens: str | None = typer.Option(None, "--tokens-per-iteration", help="Tokens ONE GPU processes per iteration."),
    dtype: str | None = typer.Option(None, "--dtype", help="Math precision of those FLOPs (bf16, fp16, tf32, fp32, "
                                     "fp8...): the dense peak MFU is measured against."),
    trace_filter: str | None = typer.Option(
        None, "--filter", help="Part of each trace the Kineto analyses read, ';'-separated: first_iteration, "
                               "iterations=N[,N], iteration_index=I, time=START:END, device=gpu|cpu, name=REGEX, "
                               "under=NAME\\[#POS] (no_gpu_kernels: without the kernels it launched), hta_default "
                               "(HTA's default: before the last ProfilerStep), combined=ROOT|PRECEDING|FOLLOWING "
                               "(HTA's CombinedOperatorFilter; combined_gpu: with their kernels)."),
    record: bool = typer.Option(False, "--record", help="Also store the run in the run history (`history add`)."),
    store: str | None = typer.Option(None, "--store", help="With --record: the run store (default: "
                                     "$MYUTILS_HISTORY_STORE, else history.sqlite in the user's data folder)."),
    headline: bool | None = typer.Option(
        None, "--headline/--no-headline", help="Print the verdict, the three fixes to make first and where the "
                                               "report is (default: when stdout is a terminal)."),
) -> None:
    """Analyse metric events or Kineto traces and write <output-dir>/analysis_report.json (and .md/.html).

    Exit 0 when every report was written; 2 for bad input (a malformed events file or trace,
    an unknown workload or format); nothing is written when the command fails.
    """
    from my_utils.core.errors import UsageError
    from my_utils.profiling.nsys.mfu import ModelFlops

    if not paths and events is None and not trace and not nsys and not ncu:
        raise UsageError("give the run's files or folders (analyze PATH...), or --events (a metrics_events.jsonl), "
                         "--trace (a torch.profiler trace), --nsys (an Nsight Systems export) or --ncu (an Nsight "
                         "Compute export), or several")
    model = ModelFlops.parse(flops=flops, params=params, tokens=tokens, dtype=dtype, gpu=gpu)
    report_paths = run_analysis(events, workload, output_dir, trace or None, formats, quiet, nsys=nsys, ncu=ncu,
                                iteration_range=iteration_range, gpu=gpu, trace_filter=trace_filter, model=model,
                                paths=paths or ())
    from my_utils.profiling.cli.analyze_run import say_result

    say_result(report_paths, headline)
    if record:  # after the reports: a store that refuses the run loses none of them
        from my_utils.profiling.cli.history import record_report

        typer.echo(record_report(output_dir / "analysis_report.json", store))


def report_formats(formats: str) -> list[str]:
    """The formats asked for (``json`` always first: ``diff`` reads it); UsageError for unknown ones."""
    from my_utils.core.errors import UsageError
    from my_utils.profiling.collector import REPORT_FORMATS

    wanted = [f.strip().lower() for f in formats.split(",") if f.strip()]
    bad = [f for f in wanted if f not in REPORT_FORMATS]
    if bad or not wanted:
        raise UsageError(f"--formats {formats!r}: expected a comma-separated list of json, markdown, html")
    chosen = list(dict.fromkeys("markdown" if f == "md" else f for f in wanted))
    return ["json", *(f for f in chosen if f != "json")]


def run_analysis(events: Path | None, workload: str, output_dir: Path, traces: list[Path] | None, formats: str,
                 quiet: bool, settings: Any = None, *, nsys: Sequence[str] = (), ncu: Sequence[Path] = (),
                 iteration_range: str | None = None, gpu: str | None = None,
                 trace_filter: str | None = None, model: Any = None, paths: Sequence[str] = ()) -> list[Path]:
    """Analyse ``events`` (and/or ``traces``, Nsight ``nsys``/``ncu`` exports) and write the requested reports
    together; return their paths.

    ``settings`` (a config's ``AnalysisSettings``) gives the rules and their options; ``trace_filter``
    (``--filter``) the part of each trace the Kineto analyses read (``kineto.filters.TraceFilter.parse``);
    ``paths`` the run's files, folders and globs, each file's kind told by its content (``run.inputs``).
    """
    from my_utils.profiling.cli._outputs import StagedOutputs, exits_on_out_of_memory

    check_workload(workload)
    outputs = StagedOutputs()
    with exits_on_out_of_memory("analyze"):  # anywhere below, a lazy import included
        _analyse(outputs, events, workload, output_dir, traces, formats, quiet, settings, nsys, ncu,
                 iteration_range, gpu, trace_filter, model, paths)
    return outputs.written


def _analyse(outputs: StagedOutputs, events: Path | None, workload: str, output_dir: Path, traces: list[Path] | None,
             formats: str, quiet: bool, settings: Any, nsys: Sequence[str], ncu: Sequence[Path],
             iteration_range: str | None, gpu: str | None, trace_filter: str | None, model: Any,
             paths: Sequence[str] = ()) -> None:
    """``run_analysis``'s work, staged in ``outputs`` (renamed into place when all are written)."""
    from my_utils.core.errors import InputError
    from my_utils.profiling.cli.analyze_run import RunArgs
    from my_utils.profiling.run.nsight import ncu_files, nsys_files

    wanted = report_formats(formats)
    kept = None
    if trace_filter:  # refused before anything is read
        from my_utils.profiling.kineto.filters import TraceFilter

        kept = TraceFilter.parse(trace_filter)
    if events is not None and not events.is_file():
        raise InputError(str(events), None, "an existing metrics_events.jsonl file (written by a collector or ingest)")
    run = RunArgs.of(paths, events, output_dir)  # the positional inputs, each told by its content
    events, traces, nsys, ncu = run.merged(events, traces, nsys, ncu)
    trace_files = expand_traces(traces or [])
    nsight_files = [*nsys_files(nsys)], [*ncu_files(ncu)]
    nsight = {"nsys": nsight_files[0], "ncu": nsight_files[1], "iteration_range": iteration_range, "gpu": gpu,
              "model": model, "specs": list(nsys)}
    outputs.inputs = [Path(p) for p in (*([events] if events is not None else []), *trace_files,
                                        *nsight_files[0], *nsight_files[1], *run.other_files())]
    with outputs:
        stage_reports(outputs, events, workload, output_dir, trace_files if traces else None, wanted, quiet,
                      settings, nsight=nsight if nsys or ncu else None, trace_filter=kept, run=run)


def check_workload(workload: str) -> None:
    """UsageError unless ``workload`` is a known thresholds profile."""
    from my_utils.core.errors import UsageError
    from my_utils.profiling.analysis.workloads import WORKLOADS as PROFILES

    if workload not in PROFILES:
        raise UsageError(f"--workload {workload!r}: expected one of {', '.join(PROFILES)}")


def expand_traces(traces: Sequence[Path]) -> list[Path]:
    """The trace files named (a folder gives its ``*.json``/``*.json.gz`` files); InputError for a missing one."""
    from my_utils.core.errors import InputError
    from my_utils.profiling.formats._files import find_inputs

    files: list[Path] = []
    for t in traces:
        if not t.exists():
            raise InputError(str(t), None, "an existing torch.profiler trace file (.json or .json.gz) or folder")
        files.extend(find_inputs(t, _TRACE_PATTERNS, "Kineto trace (.json/.json.gz)"))
    return files


def stage_reports(outputs: StagedOutputs, events: Path | Sequence[MetricEvent] | None, workload: str,
                  output_dir: Path, traces: Sequence[Path] | None, wanted: Sequence[str], quiet: bool,
                  settings: Any = None, events_file: Path | None = None, nsight: dict[str, Any] | None = None,
                  trace_filter: Any = None, run: Any = None) -> None:
    """Analyse and stage every report in ``outputs`` (written when the caller's ``outputs`` commits).

    ``events`` is an events file, events already in memory (``ingest --analyze``; then
    ``events_file`` names where they are being written), or None (the traces' own events).
    ``traces`` None lets the analyzer find the traces the events name, beside the events file;
    ``nsight`` (``nsys``/``ncu`` files, ``iteration_range``, ``gpu``) likewise for the Nsight exports;
    ``run`` (``cli.analyze_run.RunArgs``) the other files of the run and the table of every input.
    Every file is read once, all of them in one pool (``run.analysis.analyse_run``, as the Python API does).
    """
    from my_utils.core.errors import UsageError
    from my_utils.profiling.run.analysis import analyse_run

    targets = {fmt: output_dir / f"analysis_report.{'md' if fmt == 'markdown' else fmt}" for fmt in wanted}
    outputs.check(targets.values())
    report = analyse_run(events, workload, traces, settings=settings, nsight=nsight,
                         inputs=run.inputs if run is not None else None, trace_filter=trace_filter,
                         progress=not quiet, events_file=events_file).report
    if nsight and nsight["nsys"] and "html" in targets:
        # an nsys report links its exports' timeline page, written beside it
        from my_utils.profiling.run.nsight import TIMELINE_PAGE, write_timeline_page

        outputs.check([output_dir / TIMELINE_PAGE])
        outputs.write_with(output_dir / TIMELINE_PAGE, functools.partial(write_timeline_page, nsight["nsys"]))
        report.inputs["nsys_timeline"] = TIMELINE_PAGE
    for fmt, target in targets.items():
        try:
            outputs.write_with(target, functools.partial(_write_one, report, fmt, output_dir))
        except UsageError as exc:
            if fmt == "json" or "not available" not in str(exc):
                raise
            typer.echo(f"note: {fmt} report skipped: the reports part is not installed in this version", err=True)


def _write_one(report: Any, fmt: str, output_dir: Path, path: Path) -> Path:
    from my_utils.profiling.collector import write_report

    return write_report(report, fmt, path, output_dir)
