"""The numbers of one report that the history keeps, each named as the report names it.

A run keeps its **measured run-level facts** (``report.facts`` whose id has no ``:rank<r>`` part:
``step_time.median``, ``step_time.p90:mytimer``, ``gpu.busy``, ``gpu.idle``, ``comm.overlap``,
``comm.wait``, ``mfu``, ``nsys.iteration_time``, ``energy.*`` where an input measured it...) and the
**per-name step statistics** of its ``operations`` table for the names that take the most time
(``op.median:<name>``, ``op.mean:<name>``, ``op.share:<name>``). A fact that is "not measured" is
not stored: a gap in a trend, never a 0. Text facts (a GPU's name) are context, not metrics.

Whether up is worse (:func:`higher_is_better`) is decided here once, by the metric's name: shares of
useful work (GPU busy and compute, overlap, MFU, bandwidth as % of the link) are better higher;
everything else the reports measure (times, idle, waits, exposed communication, energy) is better lower.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from my_utils.profiling.model.report import AnalysisReport

#: Per-name statistics kept for this many names per run (those with the largest total time).
TOP_NAMES = 50
#: Longest metric name stored (a name from a trace is cut, with its start kept).
MAX_METRIC = 300
#: The metrics the gate and the team page look at first, in this order (those a run measured).
KEY_METRICS = ("step_time.median", "step_time.p90", "gpu.idle", "gpu.busy", "comm.exposed", "comm.wait", "mfu",
               "nsys.iteration_time")
_HIGHER_IS_BETTER = ("gpu.busy", "gpu.compute", "comm.overlap", "mfu", "comm.busbw_link", "critical_path.gpu_compute",
                     "throughput", "tokens_per_s", "samples_per_s")


@dataclass(frozen=True)
class MetricValue:
    """One stored number: the metric's name, its value and its unit."""

    name: str
    value: float
    unit: str


def higher_is_better(metric: str) -> bool:
    """True for metrics where a rise is an improvement (busy, overlap, MFU...); False for times, idle, waits."""
    base = metric.split(":", 1)[0]
    return base in _HIGHER_IS_BETTER or base.endswith(("_per_s", ".throughput"))


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    v = float(value)
    return v if math.isfinite(v) else None


def _name(text: str) -> str:
    """A metric name: one line, at most :data:`MAX_METRIC` characters."""
    one = " ".join(text.split())
    return one if len(one) <= MAX_METRIC else one[:MAX_METRIC - 1] + "…"


def report_metrics(report: AnalysisReport) -> list[MetricValue]:
    """Every number of ``report`` the history keeps (module docstring), each name once."""
    out: dict[str, MetricValue] = {}
    for fact in report.facts:
        value = fact.number
        if value is None or ":rank" in fact.id or fact.id.startswith("context."):
            continue
        if math.isfinite(value):
            out.setdefault(_name(fact.id), MetricValue(_name(fact.id), value, fact.unit))
    rows = [r for r in report.tables.get("operations") or [] if isinstance(r, Mapping)]
    rows.sort(key=lambda r: -(_number(r.get("total")) or 0.0))
    for row in rows[:TOP_NAMES]:
        name = str(row.get("name") or "")
        if not name:
            continue
        unit = str(row.get("unit") or "")
        for stat, metric_unit in (("median", unit), ("mean", unit), ("share", "fraction")):
            value = _number(row.get(stat))
            if value is not None:
                key = _name(f"op.{stat}:{name}")
                out.setdefault(key, MetricValue(key, value, metric_unit))
    return list(out.values())
