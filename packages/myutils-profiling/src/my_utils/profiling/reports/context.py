"""What the templates show: an ``AnalysisReport`` turned into display rows (no markup here).

The HTML and Markdown templates read the same context, so both show the same findings,
scores and tables; only the charts are HTML-only (Markdown gets their numbers as tables).
Long lists are cut to what a reader can use (the JSON report keeps everything) and every
cut is said in the report.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from my_utils.profiling.analysis.model import SEVERITIES, AnalysisReport

#: Findings listed in full; more are counted ("N more in analysis_report.json").
MAX_FINDINGS = 200
#: Rows of the operations table and of each other table.
MAX_OPERATION_ROWS = 30
MAX_TABLE_ROWS = 50
#: Columns of a generic (Kineto) table.
MAX_COLUMNS = 12
#: Tables of other names (third-party rules) listed at most.
MAX_OTHER_TABLES = 20
#: Characters of one evidence value.
MAX_VALUE_CHARS = 400
_OPERATION_COLUMNS = ("name", "source", "unit", "count", "steps", "total", "mean", "p90", "cv", "share")


def fmt_value(value: Any) -> str:
    """A cell: numbers with 4 significant digits, lists/objects as compact JSON, cut at ``MAX_VALUE_CHARS``."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else str(value)
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= MAX_VALUE_CHARS else text[:MAX_VALUE_CHARS - 1] + "…"


def _rows(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> list[list[str]]:
    return [[fmt_value(r.get(c)) for c in columns] for r in rows]


def table_view(title: str, rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None,
               limit: int = MAX_TABLE_ROWS) -> dict[str, Any]:
    """A table for the templates: ``title``, ``columns``, formatted ``rows`` and a ``note`` on what was cut."""
    if columns is None:
        seen: dict[str, None] = {}
        for r in rows[:limit]:
            seen.update(dict.fromkeys(str(k) for k in r))
        columns = list(seen)[:MAX_COLUMNS]
    note = f"first {limit} of {len(rows)} rows" if len(rows) > limit else ""
    return {"title": title, "columns": list(columns), "rows": _rows(rows[:limit], columns), "note": note}


def _finding_view(f: Any) -> dict[str, Any]:
    return {"id": f.id, "category": f.category, "severity": f.severity, "title": f.title, "detail": f.detail,
            "suggestion": f.suggestion, "evidence": [(str(k), fmt_value(v)) for k, v in f.evidence.items()]}


def _ncu_rules(report: AnalysisReport) -> dict[str, Any] | None:
    """Nsight Compute rule rows: an ``ncu_rules`` table when the analyzer gives one, else ``ncu.rule:*`` totals."""
    if report.tables.get("ncu_rules"):
        return table_view("Nsight Compute rules", report.tables["ncu_rules"])
    rows = [dict(r, rule=str(r["name"])[len("ncu.rule:"):]) for key in ("totals", "operations")
            for r in report.tables.get(key) or [] if str(r.get("name", "")).startswith("ncu.rule:")]
    if not rows:
        return None
    return table_view("Nsight Compute rules (estimated speedup)", rows,
                      ["rule", "rank", "count", "total", "max", "unit"])


def _key_values(data: Mapping[str, Any]) -> list[tuple[str, str]]:
    return [(str(k), fmt_value(v)) for k, v in data.items()]


def build_context(report: AnalysisReport) -> dict[str, Any]:
    """The template context of ``report`` (plain strings and lists; the templates escape them)."""
    summary = report.summary
    steps = summary.get("steps") if isinstance(summary.get("steps"), Mapping) else {}
    facts = [("workload", report.workload), ("schema", report.schema_version),
             ("events", fmt_value(summary.get("events", report.inputs.get("events")))),
             ("steps", f"{fmt_value(steps.get('count'))} ({fmt_value(steps.get('first'))}"
                       f"–{fmt_value(steps.get('last'))})" if steps else "-"),
             ("ranks", fmt_value(summary.get("ranks"))), ("sources", fmt_value(summary.get("sources"))),
             ("run ids", fmt_value(report.inputs.get("run_ids")))]
    counts = {s: sum(1 for f in report.findings if f.severity == s) for s in SEVERITIES}
    step_time = summary.get("step_time")
    step_rows = [dict(v, series=k) for k, v in step_time.items() if isinstance(v, Mapping)] \
        if isinstance(step_time, Mapping) else []
    tables = []
    if step_rows:
        tables.append(table_view("Step time per rank", step_rows,
                                 ["series", "steps", "unit", "mean", "median", "p90", "min", "max", "cv"]))
    if report.tables.get("ranks"):
        tables.append(table_view("Ranks", report.tables["ranks"]))
    kineto = [table_view(f"Kineto: {name[len('kineto_'):].replace('_', ' ')}", rows)
              for name, rows in report.tables.items() if name.startswith("kineto_") and rows]
    # tables another rule or analysis added: listed too, so a plugin's data reaches the reader
    shown = {"operations", "steps", "memory", "ranks", "totals", "ncu_rules"}
    other = [table_view(name.replace("_", " "), rows) for name, rows in report.tables.items()
             if name not in shown and not name.startswith("kineto_") and rows][:MAX_OTHER_TABLES]
    ops = report.tables.get("operations") or []
    return {
        "title": f"Analysis report: {report.workload or 'run'}",
        "facts": facts,
        "scores": [(k, fmt_value(report.scores[k])) for k in sorted(report.scores, key=lambda k: (k != "overall", k))],
        "counts": counts,
        "findings": [_finding_view(f) for f in report.findings[:MAX_FINDINGS]],
        "findings_more": max(0, len(report.findings) - MAX_FINDINGS),
        "operations": table_view("Operations (largest total first)", ops, _OPERATION_COLUMNS, MAX_OPERATION_ROWS)
        if ops else None,
        "tables": tables,
        "kineto": kineto,
        "other_tables": other,
        "kineto_note": str(summary.get("kineto", "")),
        "ncu": _ncu_rules(report),
        "overhead": _key_values(report.overhead),
        "hardware": _key_values(report.hardware),
        "rule_errors": [(str(e.get("rule", "?")), str(e.get("error", ""))) for e in summary.get("rule_errors") or []
                        if isinstance(e, Mapping)],
    }
