"""RankImbalanceRule: a rank whose steps are consistently slower than the other ranks' (a straggler).

Per source with step times on two ranks or more, each step's time on a rank is compared
with the median of all ranks at that step; a rank is reported when its median excess over
the steps they share is above ``excess`` (5 %). The median makes one slow step no
straggler, and the other ranks' median, not rank 0, is the reference (no rank is special).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from my_utils.core.events import MetricEvent
from my_utils.profiling.analysis.rules._series import STEP_TIME, Series, build_series
from my_utils.profiling.analysis.rules.suggestions import suggest


class RankImbalanceRule:
    """Flag ranks whose step time is above the all-ranks median by ``excess`` on most steps."""

    name = "rank_imbalance"

    def __init__(self, excess: float = 0.05, critical_excess: float = 0.25, min_steps: int = 3) -> None:
        self.excess = excess
        self.critical_excess = max(excess, critical_excess)
        self.min_steps = max(1, min_steps)

    def evaluate(self, events: Sequence[MetricEvent]) -> list[dict[str, Any]]:
        """One finding per straggling rank (per source of step times)."""
        by_source: dict[str, list[tuple[int, Series]]] = {}
        for (name, rank, source), s in build_series(events).items():
            if name == STEP_TIME and rank is not None:
                by_source.setdefault(source, []).append((rank, s))
        findings: list[dict[str, Any]] = []
        for source, ranks in sorted(by_source.items()):
            if len(ranks) < 2:
                continue
            per_step: dict[int, dict[int, float]] = {}
            for rank, s in ranks:
                for step, v in zip(s.steps, s.values, strict=True):
                    per_step.setdefault(step, {})[rank] = v
            # the median of all ranks at each shared step, once (not once per rank), in step order
            shared = [(st, vals, statistics.median(vals.values()))
                      for st, vals in sorted(per_step.items()) if len(vals) >= 2]
            for rank, _s in sorted(ranks, key=lambda x: x[0]):
                rows = []
                for st, vals, ref in shared:
                    if rank in vals and ref > 0:
                        rows.append((vals[rank] / ref - 1.0, st))
                if len(rows) < self.min_steps:
                    continue
                median_excess = statistics.median(r[0] for r in rows)
                if median_excess <= self.excess:
                    continue
                worst = sorted(rows, reverse=True)[:5]
                late = sum(1 for r in rows if r[0] > self.excess)
                findings.append({
                    "id": f"rank_imbalance:{source}:rank{rank}",
                    "category": "imbalance",
                    "severity": "critical" if median_excess >= self.critical_excess else "warning",
                    "title": f"rank {rank} is {median_excess:.0%} slower than the median rank ({source} step time)",
                    "detail": (f"on {late} of {len(rows)} shared steps rank {rank}'s step time is more than "
                               f"{self.excess:.0%} above the median of the {len(ranks)} ranks; the others wait for it "
                               "at every collective"),
                    "evidence": {"names": [STEP_TIME], "ranks": [rank], "source": source,
                                 "median_excess": round(median_excess, 4), "late_steps": late,
                                 "steps_compared": len(rows), "steps": [st for _, st in worst],
                                 "worst": [{"step": st, "excess": round(x, 4)} for x, st in worst]},
                    "suggestion": suggest("imbalance"),
                })
        return findings
