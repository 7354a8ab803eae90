"""The first screen of a report: the analysis' headline fact set, as display text and links.

The analysis builds the headline (``AnalysisReport.headline``, ``model.report.Headline``):
GPU × world size, step time (median, p90, worst step), GPU busy / idle, communication share
and overlap, a verdict and the ids of the top three findings, each figure a ``Fact`` with its
unit, denominator, source, ranks and steps. This module only turns those facts into text:
a value in its unit (``fmt_*``), a line saying what it rests on (source · ranks · steps ·
"of <denominator>"), "not measured (reason)" for a value the inputs could not give, and the
anchors of the evidence rows (``evidence_anchor``) that the tables carry as ``id``.

A report without a headline (an older ``analysis_report.json``) gets a block that says so;
nothing here works the figures out instead.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from my_utils.profiling.model.report import AnalysisReport, EvidenceRow, Fact, NotMeasured
from my_utils.profiling.reports.formatting import (
    MISSING,
    fmt_count,
    fmt_ms,
    fmt_number,
    fmt_pct,
    source_label,
)

#: The headline tiles, in display order: (title, the fact ids shown in it, main first).
TILES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Step time", ("step_time.median", "step_time.p90", "step_time.worst")),
    ("GPU idle / busy", ("gpu.idle", "gpu.busy")),
    ("Communication", ("comm.share", "comm.overlap")),
)
#: Facts whose ``detail`` a tile shows beside the value (it says which step the worst one was).
_TILE_DETAIL = frozenset({"step_time.worst"})
_CONTEXT_ORDER = ("context.gpu", "context.gpu_count", "context.world_size", "context.ranks", "context.hosts",
                  "context.backend", "context.cuda_runtime", "context.cuda_driver", "context.cpu_only")
_SLUG = re.compile(r"[^A-Za-z0-9_.-]+")


def slug(text: Any) -> str:
    """``text`` as an HTML id part: letters, digits, ``_.-``; everything else one ``-``."""
    return _SLUG.sub("-", str(text)).strip("-") or "x"


def finding_anchor(finding_id: str) -> str:
    """The ``id`` of a finding's article in the HTML report."""
    return f"finding-{slug(finding_id)}"


def _key_text(key: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in key.items())


def evidence_anchor(table: str, index: int) -> str:
    """The ``id`` of row ``index`` of ``table`` in the HTML report (a link target for evidence)."""
    return f"row-{slug(table)}-{index}"


def find_row(report: AnalysisReport, ev: EvidenceRow) -> int | None:
    """The index of the row of ``ev.table`` whose columns equal ``ev.key``; None when absent (no search beyond equality)."""
    rows = report.tables.get(ev.table)
    if not rows or not ev.key:
        return None
    for i, row in enumerate(rows):
        if all(row.get(k) == v for k, v in ev.key.items()):
            return i
    return None


def evidence_links(report: AnalysisReport, rows: Sequence[EvidenceRow]) -> list[dict[str, Any]]:
    """Display rows of evidence: ``text`` (table, key, values), ``href`` to the table row when it is in the report."""
    out = []
    for ev in rows:
        index = find_row(report, ev)
        values = ", ".join(f"{k} = {_value_text(k, v)}" for k, v in ev.values.items())
        where = ev.table.replace("_", " ") + (f" [{_key_text(ev.key)}]" if ev.key else "")
        out.append({"text": f"{where}: {values}" if values else where, "where": where, "table": ev.table,
                    "href": f"#{evidence_anchor(ev.table, index)}" if index is not None else None,
                    "index": index})
    return out


def _value_text(column: str, value: Any) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if column.endswith(("_us", "_ns")):
            return fmt_ms(value, column[-2:])
        if column.endswith("_pct"):
            return fmt_pct(value)
        return fmt_number(float(value)) if isinstance(value, float) else f"{value:,}"
    return str(value)


def fact_value(fact: Fact) -> str:
    """The fact's value in its unit: ``345.8 ms``, ``42.3%``, ``2,020``, a text; ``not measured`` when not."""
    if not fact.measured:
        return "not measured"
    v = fact.value
    if isinstance(v, (str, NotMeasured)):
        return str(v)
    unit = fact.unit
    if unit in ("ms", "us", "µs", "s", "ns"):
        return fmt_ms(v, unit)
    if unit == "%":
        return fmt_pct(v)
    if unit == "flag":
        return "yes" if v else "no"
    if unit in ("fraction", "share"):
        return fmt_pct(v, fraction=True)
    if unit in ("count", ""):
        return fmt_count(v)
    return f"{fmt_number(float(v))} {unit}"


def _ranks_text(fact: Fact) -> str:
    if fact.aggregate:
        return fact.aggregate
    ranks = [r for r in fact.ranks if r is not None]
    if not ranks:
        return ""
    return f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {', '.join(str(r) for r in ranks)}"


def fact_basis(fact: Fact, detail: bool = True) -> str:
    """What a fact rests on, in one line: ``of GPU span = 1,733 ms · torch.profiler · rank 1 · 5 steps``.

    ``detail`` adds the fact's own words (``step 3 on rank 1``) at the end.
    """
    if isinstance(fact.value, NotMeasured):
        return fact.value.reason
    parts = []
    if fact.denominator:
        denom = fact.denominator
        if fact.denominator_value is not None:
            unit = fact.denominator_unit or "ms"
            shown = fmt_ms(fact.denominator_value, unit) if unit in ("ms", "us", "µs", "s") else \
                f"{fmt_number(fact.denominator_value)} {unit}".strip()
            denom = f"{denom} = {shown}"
        parts.append(f"of {denom}")
    if fact.source:
        parts.append(source_label(fact.source))
    ranks = _ranks_text(fact)
    if ranks:
        parts.append(ranks)
    if fact.steps is not None:
        parts.append(f"{fmt_count(fact.steps)} step{'s' if fact.steps != 1 else ''}")
    if detail and fact.detail:
        parts.append(fact.detail)
    return " · ".join(parts)


def fact_view(report: AnalysisReport, fact: Fact) -> dict[str, Any]:
    """One fact for the templates: id, label, value text, basis line, measured flag, evidence links."""
    links = evidence_links(report, fact.evidence)
    return {"id": fact.id, "anchor": f"fact-{slug(fact.id)}", "label": fact.label, "value": fact_value(fact),
            "basis": fact_basis(fact), "core": fact_basis(fact, detail=False), "detail": fact.detail,
            "measured": fact.measured, "evidence": links,
            "href": next((x["href"] for x in links if x["href"]), None)}


def _facts_of(report: AnalysisReport, data: Any) -> list[Fact]:
    out = []
    for i, item in enumerate(data or []):
        if isinstance(item, Fact):
            out.append(item)
        elif isinstance(item, Mapping):
            out.append(Fact.from_dict(item, "analysis_report.json", f"headline.facts[{i}]"))
    return out


def _context_line(context: Mapping[str, Fact]) -> str:
    """``Tesla V100-SXM2-32GB × 2 ranks (world size) · rank 1 in this trace``: what ran where."""
    gpu = context.get("context.gpu")
    world = context.get("context.world_size")
    cpu = context.get("context.cpu_only")
    if cpu is not None and cpu.number == 1:
        gpu_text = "CPU only"
    else:
        gpu_text = fact_value(gpu) if gpu is not None and gpu.measured else "GPU not recorded"
    world_text = (f"world size {fact_value(world)}" if world is not None and world.measured
                  else "world size not recorded")
    ranks = context.get("context.ranks")
    ranks_text = f" · {ranks.label}: {fact_value(ranks)}" if ranks is not None and ranks.measured else ""
    return f"{gpu_text} × {world_text}{ranks_text}"


def headline_view(report: AnalysisReport, findings: Sequence[Any]) -> dict[str, Any] | None:
    """The headline for the templates, or None when the report has none (an older analyzer wrote it).

    ``findings`` are the display findings (``context.finding_view``), so the top three link to
    the same articles and evidence rows as the findings list.
    """
    data = report.headline
    if not isinstance(data, Mapping) or not data:
        return None
    context = {f.id: f for f in _facts_of(report, data.get("context"))}
    facts = {f.id: f for f in _facts_of(report, data.get("facts"))}
    tiles = []
    for title, ids in TILES:
        shown = [facts[i] for i in ids if i in facts]
        if not shown:
            continue
        main = fact_view(report, shown[0])
        more = []
        for f in shown[1:]:
            view = fact_view(report, f)
            # a second figure says only what differs from the first: its whole, or which step
            view["note"] = f.detail if f.id in _TILE_DETAIL else (view["core"] if view["core"] != main["core"] else "")
            more.append(view)
        tiles.append({"title": title, "main": main, "more": more})
    placed = {i for _, ids in TILES for i in ids}
    extra = [fact_view(report, f) for i, f in facts.items() if i not in placed]
    raw_verdict = data.get("verdict")
    verdict: Mapping[str, Any] = raw_verdict if isinstance(raw_verdict, Mapping) else {}
    by_id = {f["id"]: f for f in findings}
    top = [by_id[i] for i in data.get("top_findings") or [] if i in by_id][:3]
    ordered_context = [context[i] for i in _CONTEXT_ORDER if i in context] + \
        [f for i, f in context.items() if i not in _CONTEXT_ORDER]
    return {
        "title": str(data.get("title") or report.workload or "run"),
        "where": _context_line(context),
        "context": [fact_view(report, f) for f in ordered_context],
        "tiles": tiles,
        "extra": extra,
        "verdict": {"bound": str(verdict.get("bound") or MISSING),
                    "lines": [str(x) for x in verdict.get("lines") or []]},
        "top": top,
    }


def dimension_views(report: AnalysisReport) -> list[dict[str, Any]]:
    """Scores for display, overall first: ``name``, ``value`` (text), ``measured``, ``reason`` when not measured.

    Read from ``report.dimensions`` (every dimension, measured or not) and ``report.scores``;
    a dimension without data reads "not measured", never a number.
    """
    out: dict[str, dict[str, Any]] = {}
    for name, number in report.scores.items():
        out[name] = {"name": name, "value": fmt_number(float(number)), "score": float(number), "measured": True,
                     "reason": ""}
    for name, entry in (report.dimensions or {}).items():
        if not isinstance(entry, Mapping):
            continue
        score = entry.get("score")
        if isinstance(score, (int, float)) and not isinstance(score, bool):
            out[name] = {"name": name, "value": fmt_number(float(score)), "score": float(score), "measured": True,
                         "reason": ""}
        else:
            out[name] = {"name": name, "value": "not measured", "score": None, "measured": False,
                         "reason": str(entry.get("not_measured") or "no data for it in this run")}
    return sorted(out.values(), key=lambda d: (d["name"] != "overall", not d["measured"], d["name"]))
