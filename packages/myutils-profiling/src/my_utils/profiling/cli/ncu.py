"""``myutils-profile ncu``: Nsight Compute exports → per-kernel analysis and before/after diffs.

Exit 0: everything named was read; 1: ``diff --fail-on-regression`` found a regression; 2:
bad input (one line naming the file and place; a ``.ncu-rep`` without NVIDIA's
``ncu_report`` says how to export a CSV), and no output file is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from my_utils.core.cli.guard import exit_on_error
from my_utils.profiling.cli._app import app

if TYPE_CHECKING:
    from my_utils.profiling.analysis.diff_ncu import NcuDiff, NcuDiffRow

ncu_app = typer.Typer(name="ncu", help="Analyse Nsight Compute exports (CSV of any layout; .ncu-rep with ncu_report).",
                      no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False)
app.add_typer(ncu_app, name="ncu")


def _write(path: Path, text: str) -> None:
    from my_utils.core.atomic import atomic_write

    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path) as fh:
        fh.write(text)


@ncu_app.command("summary")
@exit_on_error
def summary(
    files: list[Path] = typer.Argument(..., help="ncu exports: CSV (--csv, any page) or .ncu-rep."),
    gpu: str | None = typer.Option(None, "--gpu", help="The GPU profiled, as tools name it (e.g. 'NVIDIA A100-SXM4-"
                                   "80GB'): its peaks from the hardware table place kernels on the roofline."),
    json_out: Path | None = typer.Option(None, "--json", help="Write kernels, rules and facts as JSON."),
    top: int = typer.Option(20, "--top", min=1, help="Kernels and rules to print."),
) -> None:
    """Per kernel: speed of light, what bounds it, occupancy, roofline position, and ncu's rules."""
    from dataclasses import asdict

    from my_utils.core.safe_io import refuse_overwriting_inputs, strict_json
    from my_utils.profiling.ncu.analysis import analyze_files
    from my_utils.profiling.nsys.render import text_table

    if json_out is not None:
        refuse_overwriting_inputs([json_out], files)
    a = analyze_files(files, gpu=gpu)
    if json_out is not None:
        _write(json_out, strict_json({"files": list(a.files), "gpu": a.gpu,
                                      "kernels": [asdict(k) for k in a.kernels],
                                      "rules": [asdict(r) for r in a.rules],
                                      "facts": [f.to_dict() for f in a.facts()]}, indent=2) + "\n")
    cols = ["kernel", "launches", "duration_ms", "sol_compute_pct", "sol_memory_pct", "bound", "limiting_unit",
            "achieved_occupancy_pct", "theoretical_occupancy_pct", "arithmetic_intensity", "attained_gflops",
            "roof_pct"]
    typer.echo(text_table(cols, [[getattr(k, c) for c in cols] for k in a.kernels[:top]],
                          title=f"kernels ({len(a.kernels)}; longest total time first)"))
    if a.rules:
        rules = sorted(a.rules, key=lambda r: -(r.speedup_pct or 0.0))
        typer.echo("")
        typer.echo(text_table(["kernel", "launch_id", "rule", "rule_type", "speedup_type", "speedup_pct"],
                              [[r.kernel, r.launch_id, r.rule, r.rule_type, r.speedup_type, r.speedup_pct]
                               for r in rules[:top]], title=f"ncu rules ({len(a.rules)})"))


@ncu_app.command("diff")
@exit_on_error
def diff(
    base: list[Path] = typer.Option(..., "--base", help="ncu export(s) of the base run (repeatable)."),
    target: list[Path] = typer.Option(..., "--target", help="ncu export(s) of the target run (repeatable)."),
    output: Path | None = typer.Option(None, "--output", help="Write every (kernel, metric) row as JSON."),
    html: Path | None = typer.Option(None, "--html", help="Write an offline HTML page (headline, kernel time before "
                                     "-> after, charts of the largest changes, the metric rows) here."),
    fail_on_regression: float | None = typer.Option(
        None, "--fail-on-regression", metavar="PCT",
        help="Exit 1 when a metric got significantly worse by at least PCT percent (CI gate)."),
    sigmas: float = typer.Option(3.0, "--sigmas", help="A change must exceed this many standard errors."),
    min_pct: float = typer.Option(5.0, "--min-pct", help="...and this percentage of the base value."),
    rows: int = typer.Option(25, "--rows", min=1, help="Significant rows to print."),
) -> None:
    """The kernel time before and after by kernel, then each metric of the same kernels judged by its better direction.

    Only repeated launches are judged: a kernel profiled once on a side is listed, never significant.
    """
    import math

    from my_utils.core.errors import InputError, UsageError
    from my_utils.core.safe_io import strict_json
    from my_utils.profiling.analysis.diff_ncu import diff_ncu
    from my_utils.profiling.cli._outputs import StagedOutputs
    from my_utils.profiling.nsys.render import text_table

    numbers = [sigmas, min_pct] + ([fail_on_regression] if fail_on_regression is not None else [])
    if any(not math.isfinite(x) or x < 0 for x in numbers):
        raise UsageError("--sigmas, --min-pct and --fail-on-regression take finite numbers >= 0")
    outputs = StagedOutputs([*base, *target])
    outputs.check(p for p in (output, html) if p is not None)
    d = diff_ncu(base, target, sigmas=sigmas, min_pct=min_pct)
    if fail_on_regression is not None and d.descriptive:  # before any output: a gate over no sample must not pass
        raise InputError(f"{', '.join(map(str, base))} vs {', '.join(map(str, target))}", None,
                         "repeated launches of a kernel on both sides for the regression gate; no kernel has them, so "
                         "no change can be told from noise (profile at least 2 launches per kernel: ncu --launch-count)")
    bad = d.regressions(fail_on_regression) if fail_on_regression is not None else []
    with outputs:
        if output is not None:
            outputs.write_text(output, strict_json(d.to_dict(), indent=2) + "\n")
        if html is not None:
            outputs.write_text(html, _html(d, fail_on_regression, bad))
    typer.echo(d.headline)
    for warning in d.warnings:
        typer.echo(f"warning: {warning}", err=True)
    for path in outputs.written:
        typer.echo(f"wrote {path}")
    sig = d.significant
    unmeasured = sum(1 for r in d.rows if r.verdict == "unmeasured")
    typer.echo(f"{len(sig)} significant change(s) among {len(d.rows)} (kernel, metric) rows"
               + (f" ({unmeasured} resting on one launch a side: not judged)" if unmeasured else ""))
    if sig:
        typer.echo(text_table(["kernel", "metric", "verdict", "better", "base_mean", "target_mean", "unit", "delta_pct"],
                              [[r.kernel, r.metric, r.verdict, r.better, r.base_mean, r.target_mean, r.unit,
                                r.delta_pct] for r in sig[:rows]]))
    if fail_on_regression is not None:
        if bad:
            names = ", ".join(f"{r.kernel[:60]} {r.metric} {r.delta_pct:+.1f}%" for r in bad[:5])
            typer.echo(f"regression over {fail_on_regression:g}%: {names}. {d.headline}", err=True)
            raise typer.Exit(1)
        typer.echo(f"regression gate ({fail_on_regression:g}%): passed. {d.headline}")


def _html(d: NcuDiff, fail_on_regression: float | None, bad: Sequence[NcuDiffRow]) -> str:
    """The ``ncu diff`` page: the diff page of its kernels, the metric rows below, the gate on the metrics."""
    from my_utils.profiling.reports.diff_html import ExtraTable, render_diff_html

    ordered = [*d.significant, *(r for r in d.rows if not r.significant)]
    table = ExtraTable("Metrics per kernel (significant first)",
                       ("kernel", "metric", "verdict", "better", "base", "target", "unit", "Δ %"),
                       [(r.kernel, r.metric, r.verdict, r.better or "", _num(r.base_mean), _num(r.target_mean), r.unit,
                         "" if r.delta_pct is None else f"{r.delta_pct:+.1f}%") for r in ordered])
    gate = None
    if fail_on_regression is not None:
        names = ", ".join(f"{r.kernel[:60]} {r.metric}" for r in bad[:5])
        gate = (not bad, f"{fail_on_regression:g}", "passed" if not bad else f"FAILED: {names}")
    return render_diff_html(d.as_result(), None, tool="ncu", extra=table, gate=gate)


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:,.4g}"
