"""What the templates show: an ``AnalysisReport`` turned into display rows (no markup here).

The HTML and Markdown templates read the same context, so both show the same headline,
findings, scores and tables; only the charts are HTML-only (Markdown gets their numbers as
tables). Long lists are cut to what a reader can use (the JSON report keeps everything) and
every cut is said in the report; a row that evidence points at is always shown, with an
``id`` the evidence links to. Numbers read the same everywhere (``formatting``): ms with
separators, µs columns shown in ms under a header that says so, shares as % of a named whole.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from my_utils.profiling.analysis.verdict import tied
from my_utils.profiling.model.report import SEVERITIES, AnalysisReport, Finding
from my_utils.profiling.reports.formatting import (
    column_title,
    fmt_count,
    fmt_ms,
    fmt_pct,
    fmt_value,
    source_label,
)
from my_utils.profiling.reports.headline import (
    dimension_views,
    evidence_anchor,
    evidence_links,
    fact_view,
    find_row,
    finding_anchor,
    headline_view,
)
from my_utils.profiling.reports.names import ellipsize, short_names

#: Findings listed in full; more are counted ("N more in analysis_report.json").
MAX_FINDINGS = 200
#: Rows of the operations table and of each other table.
MAX_OPERATION_ROWS = 30
MAX_TABLE_ROWS = 50
#: Columns of a generic (Kineto) table.
MAX_COLUMNS = 12
#: Tables of other names (third-party rules) listed at most.
MAX_OTHER_TABLES = 20
#: Characters of a name in a table cell; longer names are cut, the full name in the cell's title.
MAX_NAME_CHARS = 80
_OPERATION_COLUMNS = ("name", "source", "unit", "count", "steps", "total", "mean", "p90", "cv", "share")
#: Kineto tables shown with fewer columns than they hold (the operation model's are wide; the JSON has every one).
KINETO_COLUMNS: dict[str, tuple[str, ...]] = {
    "kineto_op_shapes": ("rank", "operator", "input_dims", "calls", "gpu_us", "pct", "tflops", "gbps", "bound",
                         "roofline_pct_low", "roofline_pct_high"),
    # every launch's kernel, its operator and its launch call are three long names side by side: the page
    # keeps what ranks a launch (its kernel, its operator, its delay); the correlation id and the rest are in the JSON
    "kineto_kernel_launches": ("rank", "kernel", "operator", "gpu_us", "launch_delay_us", "ts_us"),
}
#: Tables whose ``name`` column holds GPU kernel names (shortened like the charts' labels).
_KERNEL_TABLES = frozenset({"kineto_top_kernels", "kineto_launch_outliers", "nsys_top_kernels"})
#: The Nsight tables (``analysis.nsight``) in display order: title and the columns shown (every column is in the JSON).
NSIGHT_TABLES: dict[str, tuple[str, tuple[str, ...]]] = {
    "nsys_inputs": ("Nsight Systems: exports read", ("file", "rank", "rank_source", "world_size", "host", "exporter",
                                                     "gpus", "not_measured")),
    "nsys_rank_overview": ("Nsight Systems: one row per rank (device)",
                           ("rank", "host", "device", "gpu", "capture_ns", "setup_pct", "span_ns", "busy_pct",
                            "idle_outside_setup_ns", "top_kernel", "top_kernel_ns", "nccl_ns", "nccl_wait_ns",
                            "iterations", "iteration_median_ns")),
    "nsys_capture": ("Nsight Systems: capture span and one-off work per process",
                     ("rank", "pid", "capture_ns", "setup_ns", "setup_in_gpu_span_ns", "kernels", "kernel_names",
                      "repeated_names", "iterations", "one_shot", "one_shot_reason")),
    "nsys_setup": ("Nsight Systems: one-off work (setup) per process and kind",
                   ("rank", "pid", "kind", "names", "count", "union_ns")),
    "nsys_setup_idle": ("Nsight Systems: GPU idle inside setup per device",
                        ("rank", "device", "idle_ns", "setup_idle_ns", "host_wait_ns", "setup_host_wait_ns")),
    "nsys_pipeline_bubble": ("Nsight Systems: pipeline bubble per stage (microbatch NVTX ranges)",
                             ("rank", "schedule", "stages", "microbatches", "window_us", "bubble_pct", "expected_pct",
                              "excess_us", "flagged", "note")),
    "nsys_busy_device": ("Nsight Systems: GPU busy and idle per device",
                         ("rank", "device", "span_ns", "busy_ns", "idle_ns", "busy_pct", "ops", "gaps")),
    "nsys_idle_causes": ("Nsight Systems: why the GPU sat idle (per device)",
                         ("rank", "device", "category", "gaps", "idle_ns", "share_pct")),
    "nsys_busy_kind": ("Nsight Systems: busy time per kind of work (unions)",
                       ("rank", "device", "kind", "ops", "busy_ns", "share_of_busy_pct")),
    "nsys_overlap": ("Nsight Systems: compute–communication overlap",
                     ("rank", "device", "communication_ns", "computation_ns", "overlap_ns", "exposed_communication_ns",
                      "overlap_pct")),
    "nsys_kernel_kinds": ("Nsight Systems: kernel time per kind", ("rank", "device", "kind", "count", "total_ns",
                                                                   "share_pct")),
    "nsys_top_kernels": ("Nsight Systems: top kernels per kind", ("rank", "kind", "name", "count", "total_ns",
                                                                  "mean_ns", "max_ns", "share_pct")),
    "nsys_copies": ("Nsight Systems: copies and sets per direction",
                    ("rank", "op", "direction", "count", "bytes", "total_ns", "bandwidth_gbps", "peak_gbps", "limit_gbps",
                     "implausible")),
    "nsys_cuda_api": ("Nsight Systems: CUDA API time", ("rank", "name", "count", "total_ns", "mean_ns", "max_ns",
                                                        "share_pct")),
    "nsys_cuda_api_slowest": ("Nsight Systems: slowest CUDA API calls", ("rank", "name", "dur_ns", "tid", "corr")),
    "nsys_osrt": ("Nsight Systems: OS runtime waits", ("rank", "name", "count", "total_ns", "mean_ns", "max_ns",
                                                       "threads")),
    "nsys_iterations": ("Nsight Systems: iterations (NVTX)",
                        ("rank", "pid", "iteration", "name", "device", "cpu_ns", "gpu_window_ns", "busy_ns", "idle_ns",
                         "communication_ns", "overlap_ns")),
    "nsys_nccl_ranks": ("Nsight Systems: NCCL collectives per rank",
                        ("rank", "collective", "count", "total_ns", "max_ns", "wait_ns", "last_arrivals",
                         "busbw_gbps_mean")),
    "nsys_nccl_skew": ("Nsight Systems: collectives with the largest arrival skew",
                       ("collective", "seq", "ranks", "first_rank", "last_rank", "skew_ns", "duration_ns",
                        "message_bytes", "busbw_gbps", "size_source")),
    "nsys_nccl_hosts": ("Nsight Systems: NCCL arrivals per host",
                        ("host", "ranks", "collectives", "late", "mean_lag_ns", "separation_min_ns",
                         "separation_max_ns", "spread_max_ns")),
    "nsys_nccl_sizes": ("Nsight Systems: NCCL bandwidth per rank, collective and message size",
                        ("rank", "collective", "ranks", "message_bytes", "count", "total_ns", "algbw_gbps",
                         "busbw_gbps", "link_gbps", "link_pct", "link", "size_source")),
    "nsys_mfu": ("Nsight Systems: MFU per process (model FLOPs given; dense peak of the hardware table)",
                 ("rank", "pid", "gpu", "dtype", "flops_per_iteration", "iterations", "mean_iteration_ns",
                  "achieved_tflops", "peak_tflops", "mfu_pct", "peak_row", "not_measured")),
    "nsys_nccl_kernels": ("Nsight Systems: NCCL kernels", ("rank", "device", "stream", "collective", "count",
                                                           "total_ns", "mean_ns", "max_ns")),
    "nsys_nvtx": ("Nsight Systems: NVTX ranges", ("rank", "domain", "name", "count", "total_ns", "mean_ns", "max_ns")),
    "nsys_busy_stream": ("Nsight Systems: GPU busy per stream (never added up: streams overlap)",
                         ("rank", "device", "stream", "span_ns", "busy_ns", "idle_ns", "busy_pct", "ops")),
    "ncu_kernels": ("Nsight Compute: kernels (means over launches)",
                    ("kernel", "launches", "duration_ms", "sol_compute_pct", "sol_memory_pct", "bound",
                     "limiting_unit", "achieved_occupancy_pct", "theoretical_occupancy_pct", "arithmetic_intensity",
                     "attained_gflops", "roof_pct")),
}
_NCU_RULE_COLUMNS = ("index", "kernel", "launch_id", "rule", "rule_type", "speedup_type", "speedup_pct", "description")
_TEXT_COLUMNS = frozenset({"name", "file", "detail", "series", "check", "rule", "layer"})


def _kernel_labels(rows: Sequence[Mapping[str, Any]], table: str) -> dict[str, str]:
    """Distinct short names of the kernel names in ``rows`` (``kernel:`` prefix kept), as the charts show them."""
    names = sorted({str(r["name"]) for r in rows if isinstance(r.get("name"), str)
                    and (table in _KERNEL_TABLES or str(r["name"]).startswith("kernel:"))})
    bare = [n[len("kernel:"):] if n.startswith("kernel:") else n for n in names]
    return {n: ("kernel:" if n.startswith("kernel:") else "") + s
            for n, s in zip(names, short_names(bare, MAX_NAME_CHARS), strict=True)}


def _cell(value: Any, column: str, table: str, kernels: Mapping[str, str] | None = None) -> dict[str, str]:
    """One cell: its ``text``, the full value as ``title`` when the text was shortened, ``num`` for numbers."""
    text = fmt_value(value, column)
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    cell = {"text": text, "title": "", "num": "num" if number else ""}
    if column == "source" and isinstance(value, str):
        cell["text"] = source_label(value)
    elif column == "name" and isinstance(value, str) and kernels and value in kernels:
        cell.update(text=kernels[value], title=value if kernels[value] != value else "")
    elif len(text) > MAX_NAME_CHARS and (column in _TEXT_COLUMNS or isinstance(value, str)):
        cell.update(text=ellipsize(text, MAX_NAME_CHARS), title=text)
    return cell


def _share_cell(row: Mapping[str, Any]) -> dict[str, str]:
    """A share with its whole: ``35.7% of device time`` (``share_of`` names the whole when the row has it)."""
    share = row.get("share")
    if share is None:
        return {"text": fmt_value(None), "title": "", "num": ""}
    whole = row.get("share_of")
    text = fmt_pct(share, fraction=True)
    return {"text": f"{text} of {whole}" if whole else text, "title": "", "num": ""}


def table_view(title: str, rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None,
               limit: int = MAX_TABLE_ROWS, name: str = "", pinned: Sequence[int] = ()) -> dict[str, Any]:
    """A table for the templates: ``title``, column ``headers``, ``rows`` of cells with row ``id``s, a ``note``.

    ``name`` is the report's table name: rows get ``id`` anchors (``row-<name>-<index>``) and the
    rows in ``pinned`` (evidence) are shown even past ``limit``.
    """
    if columns is None:
        seen: dict[str, None] = {}
        for r in rows[:limit]:
            seen.update(dict.fromkeys(str(k) for k in r))
        columns = list(seen)[:MAX_COLUMNS]
    shown = list(range(min(limit, len(rows))))
    extra = sorted(i for i in set(pinned) if limit <= i < len(rows))
    out_rows = []
    kernels = _kernel_labels([rows[i] for i in shown + extra], name) if "name" in columns else {}
    for i in shown + extra:
        row = rows[i]
        cells = [_share_cell(row) if c == "share" else _cell(row.get(c), c, name, kernels) for c in columns]
        out_rows.append({"id": evidence_anchor(name, i) if name else "", "cells": cells, "index": i})
    headers = [column_title(c) for c in columns]
    if "share" in columns and not any(r.get("share_of") for r in rows[:limit]):
        headers[list(columns).index("share")] = "total share of step time (all steps summed; GPU rows: of GPU time)"
    note = f"first {limit} of {len(rows)} rows" if len(rows) > limit else ""
    if extra:
        note += f" (and {len(extra)} more that findings cite)"
    return {"title": title, "name": name, "id": f"table-{name}" if name else "", "columns": headers,
            "rows": out_rows, "note": note}


def _evidence_cells(f: Finding) -> list[tuple[str, str]]:
    return [(str(k), fmt_value(v, str(k))) for k, v in f.evidence.items()]


def _impact_text(f: Finding, short: bool = False) -> str:
    """What fixing ``f`` could save, on the one denominator the analysis states; ``short`` leaves out how it
    was estimated. A breakdown says where the time is and that it is no saving."""
    impact = f.impact
    parts = []
    if impact.breakdown:
        share = f"{fmt_pct(impact.region_share, fraction=True)} of {impact.region_of}" \
            if impact.region_share is not None else ""
        took = f"{fmt_ms(impact.region_ms)} per step" if impact.region_ms is not None else ""
        parts.append("where the time is, not a saving: " + ", ".join(p for p in (share, took) if p)
                     + " (a fix saves part of it)")
    elif impact.ms_per_step is not None and impact.upper_bound:
        # all of something's time bounds a saving; it is never shown as one
        parts.append(f"takes {fmt_ms(impact.ms_per_step)} per step (a fix saves part of it)")
    elif impact.ms_per_step is not None:
        parts.append(f"could save up to {fmt_ms(impact.ms_per_step)} per step")
    if impact.share_of_step is not None and not impact.breakdown:
        whole = impact.denominator or "median step"
        of = [fmt_ms(impact.denominator_ms)] if impact.denominator_ms is not None and not short else []
        if impact.step_source and not short:
            of.append(f"{source_label(impact.step_source)}")
        parts.append(f"{fmt_pct(impact.share_of_step, fraction=True)} of the {whole}"
                     + (f" ({', '.join(of)})" if of else ""))
    if impact.clamped_from_ms is not None and not short:
        parts.append(f"cut from {fmt_ms(impact.clamped_from_ms)}")
    if impact.steps is not None and impact.step_source not in ("ncu", "ncu_csv"):
        parts.append(f"rests on {fmt_count(impact.steps)} step{'s' if impact.steps != 1 else ''}")
    if impact.basis and not short:
        parts.append(impact.basis)
    return " · ".join(parts)


def finding_view(report: AnalysisReport, f: Finding, index: int) -> dict[str, Any]:
    """One finding for the templates: text, anchors, impact line, advice with its evidence rows, fact links."""
    facts = [report.fact(i) for i in f.facts]
    fact_views = [fact_view(report, x) for x in facts if x is not None]
    advice = [{"text": a.text, "evidence": evidence_links(report, a.because)} for a in f.advice]
    links = [e for v in fact_views for e in v["evidence"]] + [e for a in advice for e in a["evidence"]]
    return {"id": f.id, "anchor": finding_anchor(f.id), "index": index, "category": f.category,
            "severity": f.severity, "title": f.title, "detail": f.detail, "suggestion": f.suggestion,
            "impact": _impact_text(f), "impact_short": _impact_text(f, short=True), "facts": fact_views, "advice": advice,
            "evidence": _evidence_cells(f), "evidence_links": links,
            "href": next((e["href"] for e in links if e["href"]), f"#{finding_anchor(f.id)}")}


def _state_ties(findings: Sequence[Finding], views: list[dict[str, Any]]) -> None:
    """Say on each card whose saving reads the same as a neighbour's that the two are a tie (the order is then
    the evidence's weight, not a larger saving)."""
    for i, f in enumerate(findings):
        if f.impact.share_of_step is None or f.impact.breakdown or f.impact.share_of_step <= 0:
            continue
        mates = [j + 1 for j in (i - 1, i + 1) if 0 <= j < len(findings) and findings[j].impact.share_of_step
                 is not None and not findings[j].impact.breakdown
                 and tied(findings[j].impact.share_of_step or 0.0, f.impact.share_of_step)]
        if mates:
            note = "a tie with finding " + " and ".join(map(str, mates))
            views[i]["impact"] = f"{views[i]['impact']} · {note}" if views[i]["impact"] else note
            views[i]["impact_short"] = f"{views[i]['impact_short']} · {note}" if views[i]["impact_short"] else note


def _ncu_rules(report: AnalysisReport, pinned: Sequence[int] = ()) -> dict[str, Any] | None:
    """Nsight Compute rule rows: an ``ncu_rules`` table when the analyzer gives one, else ``ncu.rule:*`` totals."""
    if report.tables.get("ncu_rules"):
        return table_view("Nsight Compute rules (estimated speedup)", report.tables["ncu_rules"], _NCU_RULE_COLUMNS,
                          name="ncu_rules", pinned=pinned)
    rows = [dict(r, rule=str(r["name"])[len("ncu.rule:"):]) for key in ("totals", "operations")
            for r in report.tables.get(key) or [] if str(r.get("name", "")).startswith("ncu.rule:")]
    if not rows:
        return None
    return table_view("Nsight Compute rules (estimated speedup)", rows, ["rule", "rank", "count", "total", "max", "unit"])


def _key_values(data: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Scalar entries as (key, text); a list of objects is drawn as a table instead (``_sub_tables``)."""
    return [(str(k), fmt_value(v, str(k))) for k, v in data.items() if not _is_rows(v)]


def _is_rows(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, Mapping) for v in value)


def _sub_tables(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The entries of ``data`` that are lists of objects (per-instrument overheads...), as tables."""
    return [table_view(str(k).replace("_", " "), v) for k, v in data.items() if _is_rows(v)]


def _pinned(report: AnalysisReport) -> dict[str, set[int]]:
    """Per table, the rows that facts and advice cite (always shown, so every evidence link has a target)."""
    rows = [e for fact in report.facts for e in fact.evidence]
    rows += [b for f in report.findings for a in f.advice for b in a.because]
    out: dict[str, set[int]] = {}
    for ev in rows:
        i = find_row(report, ev)
        if i is not None:
            out.setdefault(ev.table, set()).add(i)
    return out


def _distinct_facts(report: AnalysisReport) -> list[dict[str, Any]]:
    """Every fact once: a fact that reads exactly like one listed (a rank's copy of the headline figure) is left out."""
    seen: set[tuple[str, str, str]] = set()
    out = []
    for fact in report.facts:
        view = fact_view(report, fact)
        key = (view["label"], view["value"], view["basis"])
        if key not in seen:
            seen.add(key)
            out.append(view)
    return out


def _title_of(name: str) -> str:
    return f"Kineto: {name[len('kineto_'):].replace('_', ' ')}" if name.startswith("kineto_") else \
        name.replace("_", " ")


def build_context(report: AnalysisReport) -> dict[str, Any]:
    """The template context of ``report`` (plain strings and lists; the templates escape them)."""
    summary = report.summary
    steps = summary.get("steps") if isinstance(summary.get("steps"), Mapping) else {}
    ranks = summary.get("ranks")
    run_ids = report.inputs.get("run_ids") or []
    # the rules' thresholds profile (--workload), not a fact of the capture: said as what it is, so that a
    # default "pretrain" never reads as what the program was
    facts = [("thresholds profile", f"{report.workload} (--workload: the thresholds the rules apply)"),
             ("schema", report.schema_version),
             ("events", fmt_value(summary.get("events", report.inputs.get("events")))),
             # no step numbered in the inputs (an nsys export without an iteration range): said, not "0 (–––)"
             ("steps", f"{fmt_value(steps.get('count'))} ({fmt_value(steps.get('first'), 'step')}"
                       f"–{fmt_value(steps.get('last'), 'step')})" if steps and steps.get("count")
              else "not measured: no input numbers its steps"),
             # the events' own rank numbers; none (Nsight exports) leaves the row to "ranks analysed" below
             *((("ranks", ", ".join(str(r) for r in ranks)),) if isinstance(ranks, list) and ranks else ()),
             ("sources", ", ".join(source_label(s) for s in summary.get("sources") or []) or "-"),
             ("run ids", ", ".join(str(r) for r in run_ids) if isinstance(run_ids, list) and run_ids
              else "none: only my_utils' own events carry a run id")]
    counts = {s: sum(1 for f in report.findings if f.severity == s) for s in SEVERITIES}
    pinned = _pinned(report)
    step_time = summary.get("step_time")
    step_rows = [dict(v, series=k) for k, v in step_time.items() if isinstance(v, Mapping)] \
        if isinstance(step_time, Mapping) else []
    tables = []
    if step_rows:
        tables.append(table_view("Step time per rank and source", step_rows,
                                 ["series", "source", "steps", "unit", "median", "p90", "max", "mean", "min", "cv"]))
    if report.tables.get("ranks"):
        tables.append(table_view("Ranks", report.tables["ranks"], name="ranks", pinned=sorted(pinned.get("ranks", ()))))
    kineto = [table_view(_title_of(name), rows, KINETO_COLUMNS.get(name), name=name,
                         pinned=sorted(pinned.get(name, ())))
              for name, rows in report.tables.items() if name.startswith("kineto_") and rows]
    nsight = [table_view(title, report.tables[name], [c for c in cols if any(c in r for r in report.tables[name])],
                         name=name, pinned=sorted(pinned.get(name, ())))
              for name, (title, cols) in NSIGHT_TABLES.items() if report.tables.get(name)]
    # tables another rule or analysis added: listed too, so a plugin's data reaches the reader
    shown = {"operations", "steps", "memory", "ranks", "totals", "ncu_rules", *NSIGHT_TABLES}
    other = [table_view(_title_of(name), rows, name=name, pinned=sorted(pinned.get(name, ())))
             for name, rows in report.tables.items()
             if name not in shown and not name.startswith("kineto_") and rows][:MAX_OTHER_TABLES]
    ops = report.tables.get("operations") or []
    findings = [finding_view(report, f, i) for i, f in enumerate(report.findings[:MAX_FINDINGS], start=1)]
    _state_ties(report.findings[:MAX_FINDINGS], findings)
    return {
        "title": f"Analysis report: {report.workload or 'run'}",
        "headline": headline_view(report, findings),
        "facts": facts,
        "dimensions": dimension_views(report),
        "scores": [(d["name"], d["value"]) for d in dimension_views(report)],
        "counts": counts,
        "findings": findings,
        "findings_more": max(0, len(report.findings) - MAX_FINDINGS),
        "all_facts": _distinct_facts(report),
        "operations": table_view("Operations (largest total first)", ops, _OPERATION_COLUMNS, MAX_OPERATION_ROWS,
                                 name="operations", pinned=sorted(pinned.get("operations", ()))) if ops else None,
        "tables": tables,
        "kineto": kineto,
        "other_tables": other,
        "kineto_note": str(summary.get("kineto", "")),
        "nsight": nsight,
        "nsight_note": str(summary.get("nsight", "")),
        "nsys_timeline": str(report.inputs.get("nsys_timeline") or ""),
        "warnings": [str(w.get("message", w)) if isinstance(w, Mapping) else str(w)
                     for w in summary.get("warnings") or []],
        "ncu": _ncu_rules(report, sorted(pinned.get("ncu_rules", ()))),
        "overhead": _key_values(report.overhead),
        "overhead_tables": _sub_tables(report.overhead),
        "hardware": _key_values(report.hardware),
        "rule_errors": [(str(e.get("rule", "?")), str(e.get("error", ""))) for e in summary.get("rule_errors") or []
                        if isinstance(e, Mapping)],
    }
