"""``myutils-profile nsys``: Nsight Systems exports → summary, diff, and named SQL queries.

Inputs are ``nsys export --type sqlite`` files, folders of them, globs, or nsys output
templates (``report_%q{RANK}.sqlite``). Exit 0: everything named was read; 1: ``diff
--fail-on-regression`` found a regression; 2: bad input (one line naming the file and the
table or column), and no output file is written.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from my_utils.core.cli.guard import exit_on_error
from my_utils.profiling.cli._app import app

if TYPE_CHECKING:
    from my_utils.profiling.nsys.model import ExportSummary
    from my_utils.profiling.nsys.run import RunSummary

nsys_app = typer.Typer(name="nsys", help="Analyse Nsight Systems SQLite exports (one per rank, or one per node).",
                       no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False)
sql_app = typer.Typer(name="sql", help="Named, parameterised SQL queries over any nsys export (2021 to 2026).",
                      no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False)
nsys_app.add_typer(sql_app, name="sql")
app.add_typer(nsys_app, name="nsys")

_INPUTS_HELP = ("nsys SQLite exports: files, folders, globs, or an nsys output template such as "
                "'report_%q{RANK}.sqlite' (the rank is read from it).")
_BYTES = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9,
          "t": 10**12, "tb": 10**12, "ki": 2**10, "kib": 2**10, "mi": 2**20, "mib": 2**20, "gi": 2**30,
          "gib": 2**30, "ti": 2**40, "tib": 2**40}


def parse_bytes(text: str) -> int:
    """``2MiB``, ``2097152``, ``1.5GB`` → bytes; UsageError otherwise."""
    from my_utils.core.errors import UsageError

    m = _BYTES.match(text)
    unit = (m.group(2) or "").lower() if m else None
    if not m or unit not in _UNITS:
        raise UsageError(f"--nccl-bytes {text!r}: expected a size such as 2097152, 2MiB or 1.5GB")
    return int(float(m.group(1)) * _UNITS[unit])


def _write(path: Path, text: str) -> None:
    from my_utils.core.atomic import atomic_write

    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path) as fh:
        fh.write(text)


@nsys_app.command("summary")
@exit_on_error
def summary(
    inputs: list[str] = typer.Argument(..., help=_INPUTS_HELP),
    iteration_range: str | None = typer.Option(None, "--iteration-range", help="NVTX range of one iteration "
                                               "(GLOB: * and ?); default: train_step, ProfilerStep#*, step, "
                                               "iteration, iter."),
    top: int = typer.Option(10, "--top", min=1, help="Kernels per kind, API calls and ranges to list."),
    nccl_bytes: str | None = typer.Option(None, "--nccl-bytes", help="NCCL's per-rank message size (e.g. 2MiB) "
                                          "when the export lacks NCCL's NVTX payloads: gives bus bandwidth."),
    flops: str | None = typer.Option(None, "--flops-per-iteration", help="Model FLOPs of ONE GPU in one iteration "
                                     "(e.g. 3.2e15): gives MFU against the hardware table's dense peak."),
    params: str | None = typer.Option(None, "--model-params", help="Model parameters N; with "
                                      "--tokens-per-iteration, FLOPs per iteration = 6·N·T."),
    tokens: str | None = typer.Option(None, "--tokens-per-iteration", help="Tokens ONE GPU processes per "
                                      "iteration (T of 6·N·T)."),
    dtype: str | None = typer.Option(None, "--dtype", help="Math precision of the model's FLOPs: fp64, fp64_tensor, "
                                     "fp32, tf32, bf16, fp16, fp8 or int8 (no default: nsys records none)."),
    gpu: str | None = typer.Option(None, "--gpu", help="The GPU, as tools name it, for exports without a GPU table "
                                   "(e.g. 'NVIDIA H100 80GB HBM3')."),
    json_out: Path | None = typer.Option(None, "--json", help="Write every table, iteration and fact as JSON."),
    csv_dir: Path | None = typer.Option(None, "--csv-dir", help="Write each table as <name>.csv in this folder "
                                        "(the tables of an earlier run there are replaced, all together)."),
    detail: bool = typer.Option(False, "--detail", help="With several ranks, also print every export's own tables "
                                "(the default is one row per rank and what holds across them)."),
) -> None:
    """Where the GPU time went, per rank and across ranks: busy/idle, setup, overlap, kernels, copies, API, NCCL, MFU.

    With several ranks the output leads with one row per rank (``--detail`` adds each export's tables);
    with one, it prints that export's tables."""
    from my_utils.core.safe_io import refuse_overwriting_inputs, strict_json
    from my_utils.profiling.cli._outputs import StagedOutputs
    from my_utils.profiling.formats.ranks import expand_inputs
    from my_utils.profiling.nsys.mfu import ModelFlops
    from my_utils.profiling.nsys.render import csv_text
    from my_utils.profiling.nsys.run import analyze_run

    message = parse_bytes(nccl_bytes) if nccl_bytes is not None else None
    model = ModelFlops.parse(flops=flops, params=params, tokens=tokens, dtype=dtype, gpu=gpu)
    sources = [i.path for i in expand_inputs(inputs)]
    refuse_overwriting_inputs([p for p in (json_out,) if p], sources)
    run = analyze_run(inputs, iteration_range=iteration_range, top=top, message_bytes=message, model=model)
    tables = run.tables()
    csvs = {csv_dir / f"{name}.csv": t for name, t in tables.items()} if csv_dir is not None else {}
    # the JSON and every table land together or not at all: a run failing part-way leaves the earlier set
    with StagedOutputs(sources) as out:
        out.check([*([json_out] if json_out is not None else []), *csvs])
        if json_out is not None:
            out.write_text(json_out, strict_json(run.to_dict(), indent=2) + "\n")
        for path, t in csvs.items():
            out.write_text(path, csv_text(t.columns, t.rows))
    if csv_dir is not None and csv_dir.is_dir():
        _drop_stale_tables(csv_dir, set(csvs))
    typer.echo(render_run(run, top, detail=detail))
    for warning in run.warnings:
        typer.echo(f"warning: {warning}", err=True)


_TABLE_CSV = re.compile(r"nsys_[a-z0-9_]+\.csv")


def _drop_stale_tables(folder: Path, written: set[Path]) -> None:
    """Remove the tables an earlier ``--csv-dir`` run left in ``folder`` that this one did not write."""
    import contextlib
    import os

    with os.scandir(folder) as entries:
        stale = [Path(e.path) for e in entries if _TABLE_CSV.fullmatch(e.name) and e.is_file(follow_symlinks=False)
                 and folder / e.name not in written]
    for path in stale:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def render_run(run: RunSummary, top: int = 10, *, detail: bool = False) -> str:
    """The text a terminal shows for a run (every figure computed by the analysis): with several ranks, one row per
    rank and the cross-rank facts first, each export's tables only with ``detail``."""
    from my_utils.profiling.cli.nsys_overview import render_overview

    if len(run.exports) > 1 or (run.nccl is not None and len(run.nccl.participants) > 1):
        head = render_overview(run)
        if not detail:
            return head + "\n\neach export's own tables: --detail; every table and fact: --json / --csv-dir"
        return head + "\n\n" + _render_details(run, top)
    return _render_details(run, top)


def _render_details(run: RunSummary, top: int) -> str:
    from my_utils.profiling.nsys.render import text_table
    from my_utils.profiling.reports.formatting import counted

    parts: list[str] = []
    for s in run.exports:
        parts.append(_render_export(s, top))
    a = run.nccl
    if a is not None and len(run.exports) + len(a.participants) > 2:
        parts.append(f"== NCCL across {counted(len(a.participants), 'rank')}: "
                     f"{counted(a.collectives, 'collective')} matched"
                     + ("" if a.aligned else " (no UTC clock anchor: arrival order not measured)"))
        t = run.tables()
        for name in ("nsys_nccl_ranks", "nsys_nccl_skew", "nsys_nccl_sizes"):
            if name in t and len(t[name].columns):
                parts.append(text_table(t[name].columns, t[name].rows[:top], title=name))
        for f in a.facts():
            # a rank number is said as one ("rank 3"), never bare, where a reader takes it for a count
            value = f"rank {f.value}" if f.id.startswith("nsys.nccl_last_rank") else f"{_fmt(f.value)} {f.unit}"
            parts.append(f"  {f.label}: " + (f"not measured ({f.not_measured})" if not f.measured
                                               else value.rstrip()))
        if a.clock_note:
            parts.append(f"  note: {a.clock_note}")
    return "\n\n".join(parts)


def _fmt(v: Any) -> str:
    return f"{v:.3f}" if isinstance(v, float) else str(v)


def _render_export(s: ExportSummary, top: int) -> str:
    from my_utils.profiling.nsys.render import text_table

    gpus = ", ".join(sorted({g.name for g in s.gpus})) or "not recorded"
    head = (f"== {s.label}" + (f" (rank {s.rank})" if s.rank is not None else "")
            + (f" on {s.host}" if s.host else "")
            + f": nsys {s.meta.era}, {s.meta.family}; GPUs: {gpus}")
    out = [head]
    order = ["nsys_busy_device", "nsys_busy_stream", "nsys_busy_kind", "nsys_idle_causes", "nsys_overlap",
             "nsys_kernel_kinds", "nsys_top_kernels", "nsys_copies", "nsys_cuda_api", "nsys_cuda_api_slowest",
             "nsys_osrt", "nsys_nvtx"]
    hide = {"rank", "span_start", "span_end", "name", "start", "pid"}
    for name in order:
        t = s.table(name)
        if not len(t):
            continue
        keep = [i for i, c in enumerate(t.columns) if c not in hide or (name == "nsys_cuda_api" and c == "name")
                or (name in ("nsys_osrt", "nsys_nvtx", "nsys_cuda_api_slowest") and c == "name")]
        out.append(text_table([t.columns[i] for i in keep], [[r[i] for i in keep] for r in t.rows[:max(top, 1) * 4]],
                              title=name))
    if s.iterations is not None:
        it = s.iterations
        out.append(_render_iterations(it))
    out += [line for line in (_render_mfu(s),) if line]
    if s.not_measured:
        out.append("not measured:\n" + "\n".join(f"  {k}: {v}" for k, v in s.not_measured.items()))
    return "\n\n".join(out)


def _render_mfu(s: ExportSummary) -> str:
    """The MFU of each process with its denominator (peak, hardware.csv row, iteration time); empty when not measured
    (the reason is listed under "not measured")."""
    lines = []
    for r in s.table("nsys_mfu").records():
        if r["mfu_pct"] is None:
            continue
        who = f"pid {r['pid']}: " if r["pid"] is not None else ""
        lines.append(f"  {who}MFU {r['mfu_pct']:.1f}% = {r['flops_per_iteration']:.4g} FLOPs per iteration "
                     f"({r['flops_source']}) / {r['mean_iteration_ns'] / 1e6:,.3f} ms mean of {r['iterations']} "
                     f"iteration(s) = {r['achieved_tflops']:,.1f} TFLOP/s of the dense {r['dtype']} peak "
                     f"{r['peak_tflops']:g} TFLOP/s of {r['gpu']}")
        lines.append(f"    peak: {r['peak_row']} ({r['peak_source']}); GPU from {r['gpu_source']}")
    return "MFU:\n" + "\n".join(lines) if lines else ""


def _render_iterations(it: Any) -> str:
    lines = [f"iterations ({it.chosen} range {it.pattern!r}):"]
    for st in it.stats:
        idle = (f", GPU idle {100.0 * (st.gpu_window_ns - st.gpu_busy_ns) / st.gpu_window_ns:.1f}% of the GPU windows"
                if st.gpu_window_ns else "")
        lines.append(f"  pid {st.pid}: {st.count} iteration(s), median {st.median_ns / 1e6:.3f} ms, p90 "
                     f"{st.p90_ns / 1e6:.3f} ms, worst {st.max_ns / 1e6:.3f} ms{idle}")
        for o in st.outliers[:10]:
            lines.append(f"    outlier #{o.iteration} ({o.position}): {o.cpu_ns / 1e6:.3f} ms, robust z {o.robust_z}")
    return "\n".join(lines)


@nsys_app.command("diff")
@exit_on_error
def diff(
    base: str = typer.Argument(..., help="The base run: an export, folder, glob or %q{RANK} template."),
    target: str = typer.Argument(..., help="The target run, same forms."),
    iteration_range: str | None = typer.Option(None, "--iteration-range", help="NVTX range of one iteration "
                                               "(default: train_step, ProfilerStep#*, step, iteration, iter): "
                                               "GPU figures, categories and the iteration time per iteration."),
    output: Path | None = typer.Option(None, "--output", help="Write the full diff as JSON here."),
    markdown: Path | None = typer.Option(None, "--markdown", help="Write a pull-request-ready Markdown summary."),
    html: Path | None = typer.Option(None, "--html", help="Write an offline HTML page (headline, GPU level before "
                                     "-> after, charts of the largest changes) here."),
    fail_on_regression: float | None = typer.Option(
        None, "--fail-on-regression", metavar="PCT",
        help="Exit 1 when a significant slow-down of at least PCT percent is found (CI gate)."),
    sigmas: float = typer.Option(3.0, "--sigmas", help="A change must exceed this many standard errors."),
    min_pct: float = typer.Option(5.0, "--min-pct", help="...and this percentage of the base value."),
    rows: int = typer.Option(20, "--rows", min=1, help="Changes to print."),
) -> None:
    """Compare two runs: GPU busy/idle before -> after first, then per kernel, NVTX scope and category.

    Only repeated samples are judged (each launch of a kernel, each NVTX range, each NVTX
    iteration); a name seen once per side is listed as not judged, never as significant.
    """
    import math

    from my_utils.core.errors import UsageError
    from my_utils.core.safe_io import strict_json
    from my_utils.profiling.analysis.diff_nsys import diff_exports
    from my_utils.profiling.cli._outputs import StagedOutputs
    from my_utils.profiling.cli.diff import echo_gate, echo_result
    from my_utils.profiling.nsys.render import text_table
    from my_utils.profiling.reports.diff_markdown import render_markdown

    numbers = [sigmas, min_pct] + ([fail_on_regression] if fail_on_regression is not None else [])
    if any(not math.isfinite(x) or x < 0 for x in numbers):
        raise UsageError("--sigmas, --min-pct and --fail-on-regression take finite numbers >= 0")
    outputs = StagedOutputs([Path(p) for p in (base, target) if Path(p).exists()])
    outputs.check(p for p in (output, markdown, html) if p is not None)
    result = diff_exports([base], [target], iteration_range=iteration_range, sigmas=sigmas, min_pct=min_pct)
    with outputs:
        if output is not None:
            outputs.write_text(output, strict_json(result.to_dict(fail_on_regression), indent=2) + "\n")
        if markdown is not None:
            outputs.write_text(markdown, render_markdown(result, fail_on_regression))
        if html is not None:
            from my_utils.profiling.reports.diff_html import render_diff_html

            outputs.write_text(html, render_diff_html(result, fail_on_regression, tool="nsys"))
    echo_result(result)
    for path in outputs.written:
        typer.echo(f"wrote {path}")
    listed = result.largest()
    step = result.step_time
    if step is not None and step.base and step.target:
        verdict = ("significant" if step.significant else "within noise") if step.measured else "not judged"
        typer.echo(f"iteration time {step.base.mean:.3f} -> {step.target.mean:.3f} ms "
                   f"({'n/a' if step.delta_pct is None else f'{step.delta_pct:+.1f}%'}, {verdict})")
    what = "largest unjudged change(s)" if result.descriptive else "significant change(s)"
    typer.echo(f"{len(listed)} {what} among {len(result.changes)} names "
               f"({sum(1 for c in result.changes if not c.measured)} seen once on a side: not judged)")
    if listed:
        typer.echo(text_table(
            ["name", "status", "base", "target", "unit", "delta_pct", "count_base", "count_target"],
            [[c.name, c.status, c.base.mean if c.base else None, c.target.mean if c.target else None,
              _unit(c), c.delta_pct,
              c.base.count if c.base else None, c.target.count if c.target else None] for c in listed[:rows]]))
    if fail_on_regression is not None:
        echo_gate(result, fail_on_regression)


def _unit(change: Any) -> str:
    side = change.base or change.target
    return side.unit if side is not None else ""


@nsys_app.command("timeline")
@exit_on_error
def timeline(
    inputs: list[str] = typer.Argument(..., help=_INPUTS_HELP),
    output: Path | None = typer.Option(None, "--output", help="Chrome/Perfetto trace: T.json or T.json.gz."),
    html: Path | None = typer.Option(None, "--html", help="A standalone timeline page: one offline HTML file "
                                     "(no network, no viewer to install) with the same lanes as the trace."),
    max_events: int = typer.Option(2_000_000, "--max-events", min=1, help="At most this many events in all, in "
                                   "the trace and the page alike (each rank keeps its first share in start order; "
                                   "what was left out is in otherData and the page's header)."),
    bins: str = typer.Option("auto", "--bins", help="The page only: merge slices shorter than one pixel of the "
                             "full view into per-lane density bins. auto: when the page would hold more than "
                             "250,000 slices (it then stays under about 20 MB); always; never (about 25 bytes "
                             "per slice)."),
) -> None:
    """Kernels, copies, NCCL and NVTX lanes per rank as a Chrome/Perfetto trace, a standalone HTML page, or both.

    Give --output, --html or both: both come from one pass over the exports and appear together
    at the end (nothing is written when an export is bad input).
    """
    from my_utils.core.errors import UsageError
    from my_utils.profiling.cli._outputs import StagedOutputs
    from my_utils.profiling.formats.ranks import expand_inputs
    from my_utils.profiling.nsys.timeline import TimelineSink, read_timeline, write_timeline
    from my_utils.profiling.nsys.timeline_html import TimelinePage
    from my_utils.profiling.reports.formatting import counted

    if output is None and html is None:
        raise UsageError("nsys timeline: give --output T.json[.gz] (a Chrome/Perfetto trace), --html T.html "
                         "(a standalone page), or both")
    page = TimelinePage(bins=bins) if html is not None else None
    sinks: list[TimelineSink] = [page] if page is not None else []
    other: dict[str, Any] = {}
    with StagedOutputs([i.path for i in expand_inputs(inputs)]) as out:
        out.check([p for p in (output, html) if p is not None])
        if output is not None:
            trace = output
            out.write_with(output, lambda tmp: other.update(write_timeline(
                inputs, tmp, max_events=max_events, sinks=sinks, compress=trace.name.endswith(".gz"))))
        else:
            read_timeline(inputs, sinks, max_events=max_events)
        if page is not None and html is not None:
            out.write_with(html, page.write)
    if output is not None:
        cut = sum(other["truncated"].values())
        typer.echo(f"wrote {output}: {other['events']} events from {counted(len(other['ranks']), 'export')}"
                   + (f"; {cut} left out by --max-events" if cut else ""))
    if page is not None and html is not None:
        left = sum(r["left_out"] for r in page.ranks)
        binned = page.binned
        typer.echo(f"wrote {html} ({html.stat().st_size / 1e6:.1f} MB): {page.kept} events from "
                   f"{counted(len(page.ranks), 'export')}" + (f"; {left} left out by --max-events" if left else "")
                   + (f"; {binned} in density bins" if binned else ""))


@sql_app.command("list")
@exit_on_error
def sql_list(queries: list[Path] = typer.Option([], "--queries", help="Another folder of .sql queries.")) -> None:
    """List the named queries (built-in, from plugins, MYUTILS_NSYS_QUERIES and --queries)."""
    from my_utils.profiling.nsys.queries import load_catalog
    from my_utils.profiling.nsys.render import text_table

    cat = load_catalog(queries)
    for problem in cat.problems:
        typer.echo(f"warning: {problem}", err=True)
    typer.echo(text_table(["name", "params", "origin", "title"],
                          [[q.name, " ".join(p.name + ("*" if p.required else "") for p in q.params), q.origin,
                            q.title] for q in sorted(cat.queries.values(), key=lambda q: q.name)]))


@sql_app.command("show")
@exit_on_error
def sql_show(name: str = typer.Argument(..., help="A query name (see `nsys sql list`)."),
             queries: list[Path] = typer.Option([], "--queries", help="Another folder of .sql queries.")) -> None:
    """Print a named query: its header (title, parameters) and its SQL."""
    from my_utils.profiling.nsys.queries import load_catalog

    q = load_catalog(queries).get(name)
    typer.echo(f"-- file: {q.path}  ({q.origin})")
    typer.echo(q.text.rstrip("\n"))


@sql_app.command("views")
@exit_on_error
def sql_views(export: Path = typer.Argument(..., help="An nsys export: its canonical views' definitions.")) -> None:
    """Print the CREATE TEMP VIEW statements the queries read, as built for this export (paste into sqlite3)."""
    from my_utils.profiling.nsys.schema import NsysExport

    with NsysExport(export) as db:
        db.ensure_views()
        typer.echo(";\n".join(db.view_sql) + ";")


@sql_app.command("run")
@exit_on_error
def sql_run(
    name: str = typer.Argument(..., help="A query name (see `nsys sql list`)."),
    inputs: list[str] = typer.Argument(..., help=_INPUTS_HELP),
    param: list[str] = typer.Option([], "--param", "-p", help="NAME=VALUE (repeatable); 'null' for none."),
    fmt: str = typer.Option("table", "--format", help="table or csv."),
    output: Path | None = typer.Option(None, "--output", help="Write the result here instead of stdout."),
    max_rows: int | None = typer.Option(None, "--max-rows", min=1, help="Stop after this many rows per export."),
    queries: list[Path] = typer.Option([], "--queries", help="Another folder of .sql queries."),
) -> None:
    """Run a named query on each export; several exports give one table with an ``export`` and a ``rank`` column."""
    from my_utils.core.errors import UsageError
    from my_utils.core.safe_io import refuse_overwriting_inputs
    from my_utils.profiling.formats.ranks import expand_inputs
    from my_utils.profiling.nsys.queries import load_catalog, run_query
    from my_utils.profiling.nsys.render import csv_text, text_table
    from my_utils.profiling.nsys.schema import NsysExport

    if fmt not in ("table", "csv"):
        raise UsageError(f"--format {fmt!r}: expected table or csv")
    values: dict[str, str] = {}
    for p in param:
        key, sep, value = p.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--param {p!r}: expected NAME=VALUE")
        values[key.strip()] = value
    q = load_catalog(queries).get(name)
    q.bind(values)  # refuse unknown or missing parameters before opening anything
    found = expand_inputs(inputs)
    if output is not None:
        refuse_overwriting_inputs([output], [i.path for i in found])
    columns: tuple[str, ...] = ()
    rows: list[tuple[Any, ...]] = []
    multi = len(found) > 1
    for i in found:
        with NsysExport(i.path, rank=i.rank) as db:
            res = run_query(db, q, values, max_rows=max_rows)
        columns = (("export", "rank") if multi else ()) + res.columns
        rows += [((db.label, i.rank) if multi else ()) + r for r in res.rows]
    text = csv_text(columns, rows) if fmt == "csv" else text_table(columns, rows) + "\n"
    if output is not None:
        _write(output, text)
    else:
        typer.echo(text, nl=False)

