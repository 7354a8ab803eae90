"""The parts of a report that are neither rules nor tables: capture findings, the run's hardware,
what was not measured (and why), the warnings and the title.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from my_utils.profiling.analysis.rules._series import is_memory
from my_utils.profiling.analysis.rules.suggestions import suggest
from my_utils.profiling.model.report import SEVERITIES, Advice, EvidenceRow, Finding

if TYPE_CHECKING:
    from my_utils.profiling.analysis.aggregate import EventAggregate


def capture_findings(health: Sequence[Mapping[str, Any]]) -> list[Finding]:
    """One ``capture`` finding per capture-health check that is not ``ok`` (``kineto_health`` rows)."""
    out: list[Finding] = []
    for row in health:
        status = str(row.get("status", "ok"))
        if status == "ok":
            continue
        rank = row.get("rank")
        check = str(row.get("check", "capture"))
        where = f"rank {rank}" if rank is not None else "the run (no rank)"
        out.append(Finding(
            id=f"capture:{check}:{'rank' + str(rank) if rank is not None else 'all'}", category="capture",
            severity=status if status in SEVERITIES else "warning",
            title=f"capture health: {check} on {where}", detail=str(row.get("detail", "")),
            evidence={"names": [check], "ranks": [rank], "value": row.get("value"), "table": "kineto_health"},
            suggestion=suggest("capture", check),
            facts=(f"capture:{check}:{'rank' + str(rank) if rank is not None else 'all'}",),
            advice=(Advice(str(row.get("detail", "")) or suggest("capture", check),
                           (EvidenceRow("kineto_health", {"rank": rank, "check": check},
                                        {"status": status, "value": row.get("value")}),), (), f"capture:{check}"),)))
    return out



def run_hardware(given: Mapping[str, Any], contexts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The report's ``hardware``: what the caller gave, completed by the traces' own context."""
    if not contexts:
        return dict(given)
    from my_utils.profiling.kineto.context import run_context

    merged = run_context(contexts)
    merged.update(given)  # the caller's description (the training host) wins where both say something
    return merged


def not_measured(series: Mapping[Any, Any], agg: EventAggregate, kineto_tables: Mapping[str, Any],
              findings: Sequence[Finding]) -> dict[str, str]:
    """The score dimensions the run had no data for, each with the reason (a dimension is never 100 by default)."""
    missing: dict[str, str] = {}
    sources = ", ".join(f"{k} ({v:,} events)" for k, v in sorted(agg.by_source.items())) or "no events"
    timed = [s for s in series.values() if s.kind == "duration" and s.steps]
    if not timed and not kineto_tables.get("kineto_temporal"):
        missing["performance"] = (f"no per-step durations in the inputs ({sources}): the rules compare times per "
                                  "step, and totals without steps cannot be judged")
    if not any(len(s.steps) >= 6 for s in timed):
        missing["stability"] = "no series with 6 steps or more: too few steps to tell jitter from noise"
    if not any(is_memory(s) and len(s.steps) >= 6 for s in series.values()):
        missing["memory"] = "no memory gauge per step (6 steps or more) in the inputs"
    if not kineto_tables and not any(f.category == "capture" for f in findings):
        missing["capture"] = "no torch.profiler trace was analysed"
    return missing


def _warning_code(message: str) -> str:
    """The kind of a Kineto or Nsight warning, read from its wording (the producers write one sentence each)."""
    if " ranks analysed (" in message:
        return "ranks_missing"
    if "they are not steady state" in message:
        return "unsteady_steps"
    return "rank_unknown"


def run_warnings(agg: EventAggregate, kineto: Sequence[str], nsight: Sequence[str] = ()) -> list[dict[str, str]]:
    """What the analysis had to assume, one object per warning (``code``, ``message``)."""
    out = [{"code": _warning_code(w), "message": w} for w in [*kineto, *nsight]]
    # every folded event has its cell: without torch_profiler events there is no cell to look at
    if not kineto and "torch_profiler" in agg.by_source and any(
            src == "torch_profiler" and rank is None for (_n, _st, rank, src) in agg.cells):
        out.append({"code": "rank_unknown",
                    "message": "torch_profiler events without a rank (the trace had no distributedInfo.rank and no "
                               "rank in its file name): treated as the one process of a single-rank run"})
    return out


def report_title(inputs: Mapping[str, Any], tables: Mapping[str, Any]) -> str:
    """What the report is about: the run (its ids) when the events came from a run, else the trace files and
    nsys exports, else the events file."""
    run_ids = [str(r) for r in inputs.get("run_ids") or [] if r]
    if run_ids:
        return "run " + ", ".join(run_ids[:3]) + (f" and {len(run_ids) - 3} more" if len(run_ids) > 3 else "")
    files = [Path(str(r.get("file"))).name for name in ("kineto_inputs", "nsys_inputs")
             for r in tables.get(name) or [] if r.get("file")]
    if files:
        return ", ".join(files[:4]) + (f" and {len(files) - 4} more" if len(files) > 4 else "")
    if inputs.get("events_file"):
        return Path(str(inputs["events_file"])).parent.name or str(inputs["events_file"])
    return "analysis"
