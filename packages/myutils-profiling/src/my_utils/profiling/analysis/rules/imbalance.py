"""RankImbalanceRule: a rank whose steps are consistently slower than the other ranks' (a straggler).

Per source with step times on two ranks or more, each step's time on a rank is compared
with the median of all ranks at that step; a rank is reported when its median excess over
the steps they share is above ``excess`` (5 %) *and* it is slower than that median on more
steps than chance explains: a one-sided sign test (binomial, p = 1/2 per step) whose
p-value the Benjamini–Hochberg procedure keeps at :data:`FDR` over the ranks tested. Two
ranks that take turns being late (17 of 30 steps against 13) are no straggler. The median
makes one slow step no straggler, and the other ranks' median, not rank 0, is the
reference (no rank is special).

The finding says what was measured (late on k of n steps, by how much) and mentions
collectives only when the run has some (communication kernels or c10d/NCCL operations):
without them the ranks never wait for each other.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from my_utils.core.events import MetricEvent
from my_utils.profiling.analysis.advice import family_of
from my_utils.profiling.analysis.rules._evidence import advice, impact, series_fact, steps_row
from my_utils.profiling.analysis.rules._series import STEP_TIME, Series, build_series, series_total
from my_utils.profiling.analysis.rules._stats import benjamini_hochberg
from my_utils.profiling.analysis.rules.suggestions import suggest

#: The false-discovery rate over the ranks tested (sign test per rank).
FDR = 0.05


def _is_communication(name: str) -> bool:
    family = family_of(name)
    return family is not None and family.key == "communication"


def sign_test_p(late: int, n: int) -> float:
    """One-sided P(X ≥ late) for X ~ Binomial(n, 1/2): how surprising ``late`` slow steps of ``n`` are."""
    if n <= 0:
        return 1.0
    return sum(math.comb(n, k) for k in range(late, n + 1)) / 2.0 ** n


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
        all_series = build_series(events)
        collectives = sorted({n for (n, _r, _src), s in all_series.items() if s.kind == "duration" and series_total(events, s) > 0
                              and (n == "gpu.comm_time" or _is_communication(n))})
        candidates: list[tuple[float, dict[str, Any]]] = []
        tested = 0
        for (name, rank, source), s in all_series.items():
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
            for rank, s in sorted(ranks, key=lambda x: x[0]):
                rows = []
                for st, vals, ref in shared:
                    if rank in vals and ref > 0:
                        rows.append((vals[rank] / ref - 1.0, st, vals[rank] - ref))
                if len(rows) < self.min_steps:
                    continue
                tested += 1
                median_excess = statistics.median(r[0] for r in rows)
                if median_excess <= self.excess:
                    continue
                worst = sorted(rows, reverse=True)[:5]
                above = sum(1 for r in rows if r[0] > 0)
                late = sum(1 for r in rows if r[0] > self.excess)
                n = len(rows)
                p = sign_test_p(above, n)
                ms = statistics.median(r[2] for r in rows)
                ref_ms = statistics.median(ref for _st, _vals, ref in shared)
                others = [r for r, _ in ranks if r != rank]
                if collectives:
                    why = (f"the run has collectives ({', '.join(collectives[:3])}{'…' if len(collectives) > 3 else ''}): "
                           f"each waits for the slowest rank, so ranks {', '.join(map(str, others))} idle about "
                           f"{ms:.4g} {s.unit} per step for it")
                else:
                    why = ("the run records no collectives (no communication kernels, no c10d/NCCL operations), so "
                           "no rank waits for it: it only finishes later")
                because = [steps_row(s, [st for _, st, _ in worst], {"excess_over_median": [round(x, 4) for x, _, _ in worst]})]
                candidates.append((p, {
                    "id": f"rank_imbalance:{source}:rank{rank}",
                    "category": "imbalance",
                    "severity": "critical" if median_excess >= self.critical_excess else "warning",
                    "title": (f"rank {rank} is slower than the median of {len(ranks)} ranks on {above} of {n} steps "
                              f"(median excess {median_excess:.0%}, {source} step time)"),
                    "detail": (f"rank {rank}'s {source} step time is above the median of the {len(ranks)} ranks on "
                               f"{above} of {n} shared steps (more than {self.excess:.0%} above on {late}); its median "
                               f"excess is {median_excess:.1%} ({ms:.4g} {s.unit}); sign test p = {p:.2g}; {why}"),
                    "evidence": {"names": [STEP_TIME], "ranks": [rank], "source": source,
                                 "median_excess": round(median_excess, 4), "late_steps": late, "above_median_steps": above,
                                 "steps_compared": n, "sign_test_p": p, "collectives": collectives[:10],
                                 "steps": [st for _, st, _ in worst],
                                 "worst": [{"step": st, "excess": round(x, 4)} for x, st, _ in worst]},
                    "suggestion": suggest("imbalance"),
                    "facts": [series_fact(s)],
                    "impact": impact(ms if collectives else None, ref_ms,
                                     "the time the other ranks wait for it per step (median excess)" if collectives
                                     else "none: without collectives no rank waits", n, source),
                    "advice": [advice(suggest("imbalance"), because, "imbalance")],
                }))
        keep = benjamini_hochberg([p for p, _ in candidates], tested, FDR)
        for (_p, f), k in zip(candidates, keep, strict=True):
            if k:
                findings.append(f)
        return findings
