"""BottleneckRule: names that take more than a share (10 % by default) of the time they belong to.

The share of a host region or operation is of the step time of the same rank and source
(``step_time``, else the sum of depth-0 regions); the share of a device name (``kernel:``,
``memcpy:``, ``memset:``, ``device_op:``) is of the summed GPU activity time of that rank
(concurrent activities counted twice). Every finding names its denominator (``of``) and
how many steps it rests on. With 3 steps or more the share is the median of the per-step
shares (one outlying step cannot carry it); a claim on fewer than ``MIN_STEPS_CRITICAL`` (5)
steps is never critical and its weight in the ranking is ``steps / (steps + 3)``.

A name on several ranks is reported once: the title quotes the worst rank *by number*, the
detail lists every rank above the threshold and the all-ranks aggregate (summed time over
summed denominators). The count is of occurrences (kernel launches, op calls), not events.
The only top-level region of a rank, when it covers 95 % or more of the step, is the
step itself (an ``iter`` wrapper) and is not reported.

**A breakdown, not a problem.** Where the step's time goes is a table (``backward`` at 70 % of
a training step is normal; a parent region's share holds its children's): every finding of this
rule is ``info``, and its impact names no saving (``ms_per_step`` None), so it never outranks a
finding that measured what a fix could save (``analysis.savings.as_breakdown`` restates the
impact). ``critical_share`` is kept for configurations
that set it and marks ``evidence["large"]``.
"""

from __future__ import annotations

import heapq
import statistics
from collections.abc import Sequence
from typing import Any

from my_utils.core.events import MetricEvent
from my_utils.profiling.analysis.advice import advice_for
from my_utils.profiling.analysis.rules._evidence import (
    advice,
    impact,
    median_step,
    per_step_shares,
    series_fact,
    series_row,
)
from my_utils.profiling.analysis.rules._series import (
    GPU_FAMILIES as GPU_PREFIXES,
)
from my_utils.profiling.analysis.rules._series import (
    STEP_TIME,
    Series,
    build_series,
    is_candidate_duration,
    is_gpu_family,
    series_total,
)
from my_utils.profiling.analysis.rules.suggestions import suggest

#: The only depth-0 region, at least this share of the step, is the step's own wrapper (``iter``).
WHOLE_STEP = 0.95


#: Operators without nesting information whose shares differ by less than this fraction are
#: taken as one nested chain (``evaluate_function: AddmmBackward0`` > ``AddmmBackward0`` >
#: ``aten::mm``) and reported once, the others named in ``evidence["same_cost"]``.
SAME_COST = 0.03
#: A share measured on fewer steps than this is never critical (two profiled steps, one an outlier,
#: must not outrank a region measured on every step).
MIN_STEPS_CRITICAL = 5


class BottleneckRule:
    """Flag names whose share of their rank's time exceeds ``share`` (critical above ``critical_share``)."""

    name = "bottleneck"

    def __init__(self, share: float = 0.10, critical_share: float = 0.30, max_findings: int = 20,
                 merge_same_cost: bool = True) -> None:
        if not 0.0 < share < 1.0:
            raise ValueError(f"BottleneckRule(share={share!r}): expected a fraction between 0 and 1, e.g. 0.1")
        self.min_steps_critical = MIN_STEPS_CRITICAL
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
                host_total[(s.source, rank)] = series_total(events, s)
            elif is_gpu_family(name) and s.kind == "duration":
                device_total[rank] = device_total.get(rank, 0.0) + series_total(events, s)
        top_level: dict[tuple[str, int | None], float] = {}  # used where a source has no step_time
        wrappers: dict[tuple[str, int | None], int] = {}  # depth-0 names per (source, rank)
        for (_name, rank, _source), s in series.items():
            if s.depth == 0 and is_candidate_duration(s):
                top_level[(s.source, rank)] = top_level.get((s.source, rank), 0.0) + series_total(events, s)
                wrappers[(s.source, rank)] = wrappers.get((s.source, rank), 0) + 1
        hits: dict[str, list[tuple[float, Series, float, str]]] = {}
        for (name, rank, _source), s in series.items():
            if not is_candidate_duration(s):
                continue
            total = series_total(events, s)
            if total <= 0:
                continue
            step = series.get((STEP_TIME, rank, s.source))
            if is_gpu_family(name):
                denom, of = device_total.get(rank, 0.0), "summed GPU activity time"
                step = None  # device time is not a part of the step time: shares of the device total
            else:
                denom = host_total.get((s.source, rank), 0.0)
                of = f"{s.source} step time"
                if denom <= 0:
                    denom, of = top_level.get((s.source, rank), 0.0), f"{s.source} time of the top-level regions"
            if denom <= 0:
                continue
            share = total / denom
            if step is not None and len(s.steps) >= 3:  # robust to one outlying step
                shares = per_step_shares(s, step)
                if len(shares) >= 3:
                    share = statistics.median(shares)
            if s.depth == 0 and share >= WHOLE_STEP and wrappers.get((s.source, rank)) == 1:
                continue  # the one region wrapping the whole step is the step, not a part of it
            if share > self.share:
                hits.setdefault(name, []).append((share, s, denom, of))
        self._series = series
        self._names = frozenset(n for n, _r, _s in series)
        self._all: dict[str, list[tuple[int | None, float, float]]] = {}
        for (name, rank, _source), s in series.items():
            if name in hits and series_total(events, s) > 0:
                d = device_total.get(rank, 0.0) if is_gpu_family(name) else host_total.get((s.source, rank), 0.0)
                if d > 0:
                    self._all.setdefault(name, []).append((rank, series_total(events, s), d))
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
        where = f"rank {s.rank}" if s.rank is not None else "the run (no rank)"
        others = [f"rank {r[1].rank}: {r[0]:.0%}" for r in rows[1:] if r[1].rank is not None]
        everywhere = self._all.get(name, [])
        aggregate = ""
        if len(everywhere) > 1:
            num, den = sum(t for _r, t, _d in everywhere), sum(d for _r, _t, d in everywhere)
            aggregate = (f"; all {len(everywhere)} ranks together: {num:.4g} of {den:.4g} {s.unit} "
                         f"({num / den:.0%}, summed over ranks)")
        n_steps = len(s.steps)
        thin = n_steps < self.min_steps_critical
        severity = "info"  # a breakdown (module docstring)
        step_ms = median_step(self._series, s.rank, s.source)
        per_step = statistics.median(s.values) if s.values else None
        measure = "median per-step share" if n_steps >= 3 and not name.startswith(GPU_PREFIXES) else "share"
        kind, text = advice_for(name, self._names)
        row = series_row(s, {"total": s.total, "denominator": denom, "of": of, "share": round(share, 4),
                             "steps": n_steps, "occurrences": s.occurrences or s.events})
        base = suggest("bottleneck", name)
        return {
            "id": f"bottleneck:{name}",
            "category": "bottleneck",
            "severity": severity,
            "title": (f"{name} takes {share:.0%} of {of} on {where}"
                      + (f" ({', '.join(others)})" if others else "")
                      + (f" — {n_steps} step{'s' if n_steps != 1 else ''} only" if thin else "")),
            "detail": (f"{name} sums to {s.total:.4g} {s.unit} of {denom:.4g} {s.unit} {of} on {where} "
                       f"({measure} {share:.1%}; {s.occurrences or s.events:,} occurrence(s) over {n_steps} step(s))"
                       + (f"; also above {self.share:.0%} on {', '.join(others)}" if others else "")
                       + aggregate + f"; threshold {self.share:.0%}"
                       + (f"; nested operators of the same cost: {', '.join(same)}" if same else "")),
            "evidence": {
                "names": [name, *same], "same_cost": same, "ranks": ranks, "share": round(share, 4),
                "rank_quoted": s.rank,
                "shares_by_rank": {str(r[1].rank): round(r[0], 4) for r in rows},
                "total": s.total, "denominator": denom, "of": of, "unit": s.unit, "source": s.source,
                "steps": [st for _, st in worst], "slowest_steps": [{"step": st, "value": v} for v, st in worst],
                "steps_measured": n_steps, "occurrences": s.occurrences or s.events, "threshold": self.share,
                "large": share >= self.critical_share and not thin,
                "per_step_ms": per_step, "step_ms": step_ms,
            },
            "suggestion": text or base,
            "facts": [series_fact(r[1]) for r in rows],
            # stated as at most all of the region's time; analysis.savings restates it as a breakdown
            # (the share the title quotes, no saving) once the facts are known
            "impact": impact(per_step if not name.startswith(GPU_PREFIXES) else None, step_ms,
                             f"at most all of {name}'s time per step (median over {n_steps} step(s))",
                             n_steps, s.source, upper_bound=True) if step_ms else impact(None, None, "no step time to compare with",
                                                                        n_steps, s.source),
            "advice": [advice(text or base, [row], kind or "bottleneck")],
        }
