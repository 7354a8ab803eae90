"""VariabilityRule: operations whose time per step is unstable.

The spread is the robust coefficient of variation (1.4826 · MAD / median) of the per-step
values after warm-up: a single slow step does not make a name unstable (that is an
anomaly); a name that keeps jumping does. The plain CV is reported beside it. Names
under ``min_share`` of the step time are left out (a 1 µs op jittering is not news).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Any

from my_utils.core.events import MetricEvent
from my_utils.profiling.analysis.rules._series import (
    STEP_TIME,
    after_warmup,
    build_series,
    is_candidate_duration,
    is_gpu_family,
    rank_label,
    series_id,
)
from my_utils.profiling.analysis.rules._stats import cv, median_sorted, quantile, robust_cv
from my_utils.profiling.analysis.rules.suggestions import suggest


class VariabilityRule:
    """Flag names whose robust CV per step exceeds ``cv`` (critical above ``critical_cv``)."""

    name = "variability"

    def __init__(self, cv: float = 0.15, critical_cv: float = 0.5, warmup_steps: int = 1, min_steps: int = 5,
                 min_share: float = 0.01, max_findings: int = 20) -> None:
        self.cv = cv
        self.critical_cv = max(cv, critical_cv)
        self.warmup_steps = warmup_steps
        self.min_steps = max(3, min_steps)
        self.min_share = min_share
        self.max_findings = max_findings

    def evaluate(self, events: Sequence[MetricEvent]) -> list[dict[str, Any]]:
        """One finding per unstable (name, rank), most unstable first."""
        series = build_series(events)
        step_total = {(r, src): s.total for (n, r, src), s in series.items() if n == STEP_TIME}
        device_total: dict[int | None, float] = {}
        for (n, r, _src), s in series.items():
            if is_gpu_family(n) and s.kind == "duration":
                device_total[r] = device_total.get(r, 0.0) + s.total
        found: list[tuple[float, dict[str, Any]]] = []
        for (name, rank, source), s in series.items():
            if not (is_candidate_duration(s) or name == STEP_TIME):
                continue
            denom = device_total.get(rank, 0.0) if is_gpu_family(name) else step_total.get((rank, source), 0.0)
            if name != STEP_TIME and denom > 0 and s.total / denom < self.min_share:
                continue
            steps, values = after_warmup(s, self.warmup_steps)
            if len(values) < self.min_steps:
                continue
            ordered = sorted(values)  # one sort for the median, the quantiles and the spread
            med = median_sorted(ordered)
            rcv = robust_cv(values, med)
            if rcv <= self.cv:
                continue
            plain_cv = cv(values)
            slowest = [st for _, st in heapq.nlargest(5, zip(values, steps, strict=True))]
            fastest = [st for _, st in heapq.nsmallest(5, zip(values, steps, strict=True))]
            p10, p90 = quantile(ordered, 0.1), quantile(ordered, 0.9)
            found.append((rcv, {
                "id": f"variability:{series_id(s)}",
                "category": "variability",
                "severity": "critical" if rcv >= self.critical_cv else "warning",
                "title": f"{name} varies {rcv:.0%} from step to step on {rank_label(rank)}",
                "detail": (f"robust CV {rcv:.3f} (plain CV {plain_cv:.3f}) over {len(values)} steps; "
                           f"p10 {p10:.4g}, median {med:.4g}, p90 {p90:.4g} {s.unit}; threshold {self.cv:.0%}"),
                "evidence": {"names": [name], "ranks": [rank], "robust_cv": round(rcv, 4),
                             "cv": round(plain_cv, 4), "median": med, "p10": p10, "p90": p90, "unit": s.unit,
                             "steps": slowest, "fastest_steps": fastest, "steps_tested": len(values)},
                "suggestion": suggest("variability", name),
            }))
        found.sort(key=lambda kv: -kv[0])
        return [f for _, f in found[: self.max_findings]]
