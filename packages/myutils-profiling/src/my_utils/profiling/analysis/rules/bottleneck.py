"""BottleneckRule: names that take more than a share (10 % by default) of the time they belong to.

The share of a host region or operation is of the step time of the same rank (``step_time``,
else the sum of depth-0 regions); the share of a device name (``kernel:``, ``memcpy:``,
``memset:``, ``device_op:``) is of the summed device time of that rank. A name on several
ranks is reported once, with every rank above the threshold and the worst one's share.
The only top-level region of a rank, when it covers 95 % or more of the step, is the
step itself (an ``iter`` wrapper) and is not reported.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Any

from my_utils.core.events import MetricEvent
from my_utils.profiling.analysis.rules._series import (
    STEP_TIME,
    Series,
    build_series,
    is_candidate_duration,
    is_gpu_family,
)
from my_utils.profiling.analysis.rules.suggestions import suggest

#: The only depth-0 region, at least this share of the step, is the step's own wrapper (``iter``).
WHOLE_STEP = 0.95


#: Operators without nesting information whose shares differ by less than this fraction are
#: taken as one nested chain (``evaluate_function: AddmmBackward0`` > ``AddmmBackward0`` >
#: ``aten::mm``) and reported once, the others named in ``evidence["same_cost"]``.
SAME_COST = 0.03


class BottleneckRule:
    """Flag names whose share of their rank's time exceeds ``share`` (critical above ``critical_share``)."""

    name = "bottleneck"

    def __init__(self, share: float = 0.10, critical_share: float = 0.30, max_findings: int = 20,
                 merge_same_cost: bool = True) -> None:
        if not 0.0 < share < 1.0:
            raise ValueError(f"BottleneckRule(share={share!r}): expected a fraction between 0 and 1, e.g. 0.1")
        self.share = share
        self.critical_share = max(critical_share, share)
        self.max_findings = max_findings
        self.merge_same_cost = merge_same_cost

    def evaluate(self, events: Sequence[MetricEvent]) -> list[dict[str, Any]]:
        """One finding per name above the share, largest first (at most ``max_findings``)."""
        series = build_series(events)
        host_total: dict[tuple[str, int | None], float] = {}  # (source, rank) -> denominator
        device_total: dict[int | None, float] = {}
        for (name, rank, _source), s in series.items():
            if name == STEP_TIME:
                host_total[(s.source, rank)] = s.total
            elif is_gpu_family(name) and s.kind == "duration":
                device_total[rank] = device_total.get(rank, 0.0) + s.total
        top_level: dict[tuple[str, int | None], float] = {}  # used where a source has no step_time
        wrappers: dict[tuple[str, int | None], int] = {}  # depth-0 names per (source, rank)
        for (_name, rank, _source), s in series.items():
            if s.depth == 0 and is_candidate_duration(s):
                top_level[(s.source, rank)] = top_level.get((s.source, rank), 0.0) + s.total
                wrappers[(s.source, rank)] = wrappers.get((s.source, rank), 0) + 1
        hits: dict[str, list[tuple[float, Series, float, str]]] = {}
        for (name, rank, _source), s in series.items():
            if not is_candidate_duration(s) or s.total <= 0:
                continue
            if is_gpu_family(name):
                denom, of = device_total.get(rank, 0.0), "device time"
            else:
                denom = host_total.get((s.source, rank), 0.0)
                of = "step time"
                if denom <= 0:
                    denom, of = top_level.get((s.source, rank), 0.0), "time of the top-level regions"
            if denom <= 0:
                continue
            share = s.total / denom
            if s.depth == 0 and share >= WHOLE_STEP and wrappers.get((s.source, rank)) == 1:
                continue  # the one region wrapping the whole step is the step, not a part of it
            if share > self.share:
                hits.setdefault(name, []).append((share, s, denom, of))
        ordered = sorted(hits.items(), key=lambda kv: -max(h[0] for h in kv[1]))
        groups: list[tuple[str, list[tuple[float, Series, float, str]], list[str]]] = []
        for name, rows in ordered:
            worst = max(rows, key=lambda r: r[0])
            head = groups[-1] if groups else None
            if (self.merge_same_cost and head is not None and worst[1].depth is None and not is_gpu_family(name)
                    and head[1][0][1].depth is None and not is_gpu_family(head[0])
                    and head[1][0][1].source == worst[1].source):  # device kernels never nest
                head_share = max(r[0] for r in head[1])
                if head_share - worst[0] <= SAME_COST * head_share:
                    head[2].append(name)  # an operator nested in the one above, costing the same
                    continue
            groups.append((name, rows, []))
        return [self._finding(name, rows, same) for name, rows, same in groups[: self.max_findings]]

    def _finding(self, name: str, rows: list[tuple[float, Series, float, str]], same: list[str]) -> dict[str, Any]:
        rows.sort(key=lambda r: -r[0])
        rows = [r for r in rows if r[1].rank is not None] + [r for r in rows if r[1].rank is None]
        share, s, denom, of = rows[0]
        worst = heapq.nlargest(5, zip(s.values, s.steps, strict=True))  # sorted(..., reverse=True)[:5]
        ranks = [r[1].rank for r in rows]
        where = "all ranks" if len(rows) > 1 else (f"rank {s.rank}" if s.rank is not None else "the run")
        return {
            "id": f"bottleneck:{name}",
            "category": "bottleneck",
            "severity": "critical" if share >= self.critical_share else "warning",
            "title": f"{name} takes {share:.0%} of {of}",
            "detail": (f"{name} sums to {s.total:.4g} {s.unit} of {denom:.4g} {s.unit} {of} on {where} "
                       f"({s.events} event(s) over {len(s.steps)} step(s)); threshold {self.share:.0%}"
                       + (f"; nested operators of the same cost: {', '.join(same)}" if same else "")),
            "evidence": {
                "names": [name, *same], "same_cost": same, "ranks": ranks, "share": round(share, 4),
                "shares_by_rank": {str(r[1].rank): round(r[0], 4) for r in rows},
                "total": s.total, "denominator": denom, "of": of, "unit": s.unit, "source": s.source,
                "steps": [st for _, st in worst], "slowest_steps": [{"step": st, "value": v} for v, st in worst],
                "threshold": self.share,
            },
            "suggestion": suggest("bottleneck", name),
        }
