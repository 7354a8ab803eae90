"""MemoryGrowthRule: memory that keeps growing over the steps (a leak), found with a robust slope.

For each memory gauge on each rank the rule fits a Theil–Sen line over (step, level) and
takes Sen's confidence interval of the slope. It reports growth when

- the interval's lower bound is above zero (growth at the chosen confidence, e.g. 95 %): a
  rise whose interval contains 0 is noise, however steep its point estimate;
- the fitted growth over the range is at least ``min_growth`` of the starting level, and
- the last half of the range still grows: its own interval's lower bound is above zero
  *and* its slope is at least :data:`TAIL_SHARE` of the whole range's, so memory that rises
  during warm-up and then stays flat (whose last half has a slope of noise, positive half
  the time) is not a leak, while a steady leak (the same slope throughout) is.

The finding names the step range it was fitted on, the slope per step and its bounds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from my_utils.core.events import MetricEvent
from my_utils.profiling.analysis.rules._series import build_series, is_memory, rank_label, series_id
from my_utils.profiling.analysis.rules._stats import theil_sen
from my_utils.profiling.analysis.rules.suggestions import suggest

#: The last half's slope must be at least this share of the whole range's (a plateau's is ~0).
TAIL_SHARE = 0.25


class MemoryGrowthRule:
    """Flag memory gauges that grow steadily (see the module docstring for the test)."""

    name = "memory_growth"

    def __init__(self, confidence: float = 0.95, min_growth: float = 0.05, min_steps: int = 6,
                 critical_growth: float = 0.5) -> None:
        if not 0.5 <= confidence < 1.0:
            raise ValueError(f"MemoryGrowthRule(confidence={confidence!r}): expected 0.5 <= confidence < 1, e.g. 0.95")
        self.confidence = confidence
        self.min_growth = min_growth
        self.min_steps = max(3, min_steps)
        self.critical_growth = critical_growth

    def evaluate(self, events: Sequence[MetricEvent]) -> list[dict[str, Any]]:
        """One finding per (memory name, rank) that grows."""
        findings: list[dict[str, Any]] = []
        for (name, rank, _source), s in sorted(build_series(events).items(),
                                               key=lambda kv: (kv[0][0], kv[0][1] or -1, kv[0][2])):
            if not is_memory(s) or len(s.steps) < self.min_steps:
                continue
            xs = [float(x) for x in s.steps]
            trend = theil_sen(xs, s.values, self.confidence)
            if trend is None or trend.low <= 0:
                continue
            half = len(xs) // 2
            tail = theil_sen(xs[half:], s.values[half:], self.confidence)
            if tail is not None and (tail.low <= 0 or tail.slope < TAIL_SHARE * trend.slope):
                continue  # flat (or barely rising) at the end: a warm-up plateau, not a leak
            first, last = s.steps[0], s.steps[-1]
            start = trend.intercept + trend.slope * first
            end = trend.intercept + trend.slope * last
            base = abs(start) if start else max(abs(v) for v in s.values) or 1.0
            growth = (end - start) / base
            if growth < self.min_growth:
                continue
            unit = s.unit or "units"
            rate = _amount(trend.slope, unit)
            findings.append({
                "id": f"memory_growth:{series_id(s)}",
                "category": "memory",
                "severity": "critical" if growth >= self.critical_growth else "warning",
                "title": (f"{name} grows {growth:.0%} over steps {first}-{last} on {rank_label(rank)}: "
                          f"{rate} per step ({_amount(trend.low, unit)} to {_amount(trend.high, unit)})"),
                "detail": (f"Theil–Sen slope {trend.slope:.4g} {unit}/step "
                           f"({self.confidence:.0%} interval {trend.low:.4g} to {trend.high:.4g}) "
                           f"from {start:.4g} to {end:.4g} {unit} over {len(s.steps)} steps"),
                "evidence": {
                    "names": [name], "ranks": [rank], "step_range": [first, last], "steps": [first, last],
                    "slope_per_step": trend.slope, "slope_low": trend.low, "slope_high": trend.high,
                    "confidence": self.confidence, "start": start, "end": end, "growth": round(growth, 4),
                    "unit": s.unit, "points": trend.points, "rate_per_step": rate,
                    "tail_slope_per_step": None if tail is None else tail.slope,
                    "tail_slope_low": None if tail is None else tail.low,
                },
                "facts": [f"series:{s.source}:{name}:{'rank' + str(rank) if rank is not None else 'norank'}"],
                "impact": {"ms_per_step": None, "share_of_step": None, "steps": len(s.steps), "step_source": s.source,
                           "basis": "memory growth saves no time; it ends in an out-of-memory error"},
                "advice": [{"text": suggest("memory", name), "kind": "memory_growth", "facts": [],
                            "because": [{"table": "memory", "key": {"name": name, "rank": rank},
                                         "values": {"slope_per_step": trend.slope, "slope_low": trend.low,
                                                    "start": start, "end": end}}]}],
                "suggestion": suggest("memory", name),
            })
        return findings


_BYTE_UNITS = {"b": 1, "byte": 1, "bytes": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "kib": 2**10, "mib": 2**20, "gib": 2**30}


def _amount(value: float, unit: str) -> str:
    """``value`` of ``unit`` for people: bytes as KiB/MiB/GiB, anything else with its unit."""
    scale = _BYTE_UNITS.get(unit.lower())
    if scale is None:
        return f"{value:.4g} {unit}"
    size = value * scale
    for name, step in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(size) >= step:
            return f"{size / step:.3g} {name}"
    return f"{size:.4g} B"
