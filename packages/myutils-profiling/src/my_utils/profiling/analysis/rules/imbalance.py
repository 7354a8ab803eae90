"""RankImbalanceRule: a rank whose steps, or one of whose regions, are consistently slower than the other ranks'.

**Step time.** Per source with step times on two ranks or more, each step's time on a rank is
compared with the median of the *other* ranks at that step (with two ranks, the other rank: a
median of both would halve every excess); a rank is reported when its median excess over the
steps they share is above ``excess`` (5 %) *and* it is slower than that median on more steps
than chance explains: a one-sided sign test (binomial, p = 1/2 per step) whose p-value the
Benjamini–Hochberg procedure keeps at :data:`FDR` over the ranks tested. Two ranks that take
turns being late (17 of 30 steps against 13) are no straggler. The median makes one slow step
no straggler, and no rank is special.

**Regions, working not waiting.** Ranks that meet in a collective every step have equal step
times: the slow rank is then seen in a region. For each timed region with its starts (MyTimer),
on two ranks or more, a rank's *working* time (its wait for the others taken out, ``_waits``)
is compared the same way; a rank whose median ratio to the others is at least ``min_slowdown``
(1.2: late on at least half the steps) and late on more steps than chance gives (the sign test
on the late steps: under a busy host two ranks can each be the slower on half the steps) is
reported, with the time it costs per step and where the other ranks wait for it. A rank's step-time finding is
left out when one of its regions is reported (the region says where).

Severity follows what a fix could save: the others' wait per step (the rank's median excess)
over the median step, critical from 5 %, a warning from 1 %, else info. The finding says what
was measured (late on k of n steps, by how much) and mentions collectives only when the run
has some (communication kernels or c10d/NCCL operations, or regions that end in a collective):
without them the ranks never wait for each other.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from my_utils.core.events import MetricEvent
from my_utils.profiling.analysis.advice import family_of
from my_utils.profiling.analysis.rules._evidence import advice, impact, same_as_step, series_fact, steps_row
from my_utils.profiling.analysis.rules._series import (
    START_SOURCES,
    STEP_TIME,
    Series,
    build_series,
    is_candidate_duration,
    series_total,
    step_summary,
)
from my_utils.profiling.analysis.rules._stats import benjamini_hochberg
from my_utils.profiling.analysis.rules._waits import Waits, region_waits, working_series
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


#: Share of the median step above which the others' wait per step is critical, and a warning.
CRITICAL_SHARE = 0.05
WARNING_SHARE = 0.01


def _others_median(per_step: dict[int, dict[int, float]], rank: int) -> list[tuple[int, float, float]]:
    """(step, the rank's value, the median of the other ranks' values) at each step both have."""
    out = []
    for st in sorted(per_step):
        vals = per_step[st]
        if rank in vals and len(vals) >= 2:
            out.append((st, vals[rank], statistics.median(v for r, v in vals.items() if r != rank)))
    return out


class RankImbalanceRule:
    """Flag ranks whose step time, or working time in a region, stays above the other ranks' (module docstring)."""

    name = "rank_imbalance"

    def __init__(self, excess: float = 0.05, critical_excess: float = 0.25, min_steps: int = 3,
                 min_slowdown: float = 1.2) -> None:
        self.excess = excess
        self.critical_excess = max(excess, critical_excess)
        self.min_steps = max(1, min_steps)
        self.min_slowdown = min_slowdown

    def evaluate(self, events: Sequence[MetricEvent]) -> list[dict[str, Any]]:
        """One finding per straggling rank (per source of step times) and per rank slow in a region."""
        raw = build_series(events)
        waits = region_waits(events, raw)
        series = working_series(raw, waits)
        collectives = sorted({n for (n, _r, _src), s in raw.items() if s.kind == "duration" and series_total(events, s) > 0
                              and (n == "gpu.comm_time" or _is_communication(n))})
        steps_of: dict[tuple[str, str], list[tuple[int, Series]]] = {}
        for (name, rank, source), s in series.items():
            if rank is None or not s.values:
                continue
            if name == STEP_TIME or (source in START_SOURCES and is_candidate_duration(s) and not same_as_step(raw, s)):
                steps_of.setdefault((source, name), []).append((rank, s))
        candidates: list[tuple[float, dict[str, Any]]] = []
        tested = 0
        for (source, name), ranks in sorted(steps_of.items()):
            if len(ranks) < 2:
                continue
            per_step: dict[int, dict[int, float]] = {}
            for rank, s in ranks:
                for step, v in zip(s.steps, s.values, strict=True):
                    per_step.setdefault(step, {})[rank] = v
            for rank, s in sorted(ranks, key=lambda x: x[0]):
                rows = [(v / ref - 1.0, st, v - ref, ref) for st, v, ref in _others_median(per_step, rank) if ref > 0]
                if len(rows) < self.min_steps:
                    continue
                tested += 1
                found = (self._step_time(source, rank, s, ranks, rows, collectives, raw, events) if name == STEP_TIME
                         else self._region(source, rank, s, ranks, rows, waits, raw, events))
                if found is not None:
                    candidates.append(found)
        keep = benjamini_hochberg([p for p, _ in candidates], tested, FDR)
        findings = [f for (_p, f), k in zip(candidates, keep, strict=True) if k]
        in_region = {(f["evidence"]["source"], f["evidence"]["ranks"][0]) for f in findings
                     if f["evidence"]["names"] != [STEP_TIME]}
        return [f for f in findings if f["evidence"]["names"] != [STEP_TIME]
                or (f["evidence"]["source"], f["evidence"]["ranks"][0]) not in in_region]

    def _step_time(self, source: str, rank: int, s: Series, ranks: list[tuple[int, Series]],
                   rows: list[tuple[float, int, float, float]], collectives: list[str], raw: dict[Any, Series],
                   events: Sequence[MetricEvent]) -> tuple[float, dict[str, Any]] | None:
        median_excess = statistics.median(r[0] for r in rows)
        if median_excess <= self.excess:
            return None
        worst = sorted(rows, reverse=True)[:5]
        above = sum(1 for r in rows if r[0] > 0)
        late = sum(1 for r in rows if r[0] > self.excess)
        n = len(rows)
        p = sign_test_p(above, n)
        ms = statistics.median(r[2] for r in rows)
        ref_ms = statistics.median(r[3] for r in rows)  # the others' median step
        others = [r for r, _ in ranks if r != rank]
        if collectives:
            why = (f"the run has collectives ({', '.join(collectives[:3])}{'…' if len(collectives) > 3 else ''}): "
                   f"each waits for the slowest rank, so ranks {', '.join(map(str, others))} idle about "
                   f"{ms:.4g} {s.unit} per step for it")
        else:
            why = ("the run records no collectives (no communication kernels, no c10d/NCCL operations), so "
                   "no rank waits for it: it only finishes later")
        because = [steps_row(s, [st for _, st, *_ in worst], {"excess_over_median": [round(x, 4) for x, *_ in worst]})]
        step_ms = _median_step(raw, rank, source, events)
        found = impact(ms if collectives else None, step_ms if collectives else ref_ms,
                       "the time the other ranks wait for it per step (median excess)" if collectives
                       else "none: without collectives no rank waits", n, source)
        severity = ("critical" if median_excess >= self.critical_excess else "warning") if not collectives \
            else _by_share(found["share_of_step"])
        return p, {
            "id": f"rank_imbalance:{source}:rank{rank}",
            "category": "imbalance",
            "severity": severity,
            "title": (f"rank {rank} is slower than the median of the other {len(ranks) - 1} rank(s) on {above} of "
                      f"{n} steps (median excess {median_excess:.0%}, {source} step time)"),
            "detail": (f"rank {rank}'s {source} step time is above the median of the other ranks on {above} of {n} "
                       f"shared steps (more than {self.excess:.0%} above on {late}); its median excess is "
                       f"{median_excess:.1%} ({ms:.4g} {s.unit}); sign test p = {p:.2g}; {why}"),
            "evidence": {"names": [STEP_TIME], "ranks": [rank], "source": source,
                         "median_excess": round(median_excess, 4), "late_steps": late, "above_median_steps": above,
                         "steps_compared": n, "sign_test_p": p, "collectives": collectives[:10],
                         "steps": [st for _, st, *_ in worst],
                         "worst": [{"step": st, "excess": round(x, 4)} for x, st, *_ in worst]},
            "suggestion": suggest("imbalance"),
            "facts": [series_fact(s)],
            "impact": found,
            "advice": [advice(suggest("imbalance"), because, "imbalance")],
        }

    def _region(self, source: str, rank: int, s: Series, ranks: list[tuple[int, Series]],
                rows: list[tuple[float, int, float, float]], waits: Waits, raw: dict[Any, Series],
                events: Sequence[MetricEvent]) -> tuple[float, dict[str, Any]] | None:
        n = len(rows)
        late = sum(1 for r in rows if r[0] + 1.0 >= self.min_slowdown)
        ratio = statistics.median_low(r[0] + 1.0 for r in rows)
        if ratio < self.min_slowdown:
            return None
        above = sum(1 for r in rows if r[0] > 0)
        p = sign_test_p(late, n)  # late (>= min_slowdown) more often than chance: a conservative test
        ms = statistics.median(r[2] for r in rows)
        own = statistics.median(r[3] + r[2] for r in rows)
        theirs = statistics.median(r[3] for r in rows)
        waited = _waits_for(waits, source, rank, [r[1] for r in rows], [r for r, _ in ranks])
        step_ms = _median_step(raw, rank, source, events)
        found = impact(ms, step_ms, f"the time the other ranks wait for rank {rank}'s {s.name} per step (its median "
                       "excess over the other ranks' working time)", n, source)
        worst = sorted(rows, reverse=True)[:5]
        where = "; ".join(f"rank {w['rank']} waits {w['ms']:.4g} {s.unit} per step in {w['in']}" for w in waited)
        because = [steps_row(s, [st for _, st, *_ in worst], {"ratio": [round(x + 1.0, 4) for x, *_ in worst]})]
        return p, {
            "id": f"rank_imbalance:{source}:{s.name}:rank{rank}",
            "category": "imbalance",
            "severity": _by_share(found["share_of_step"]),
            "title": (f"rank {rank} is slow in {s.name}: {own:.4g} {s.unit} per step against {theirs:.4g} on the "
                      f"other rank(s) ({ratio:.2f}x, +{ms:.4g} {s.unit}, late on {late} of {n} steps)"),
            "detail": (f"rank {rank}'s working time in {s.name} ({source}; time spent waiting for other ranks taken "
                       f"out) is at least {self.min_slowdown:.2f} times the other ranks' median on {late} of {n} "
                       f"shared steps (median {ratio:.2f}x, {ms:.4g} {s.unit} more per step; sign test of the late "
                       f"steps p = {p:.2g}); above it on {above}"
                       + (f"; the other ranks wait for it: {where}" if waited else
                          "; no other rank was seen waiting for it (no region that ends in a collective)")),
            "evidence": {"names": [s.name], "ranks": [rank], "source": source, "median_ratio": round(ratio, 4),
                         "excess_ms": ms, "late_steps": late, "above_median_steps": above, "steps_compared": n,
                         "sign_test_p": p, "waiting": waited, "steps": [st for _, st, *_ in worst],
                         "unit": s.unit, "others_ms": theirs, "rank_ms": own},
            "suggestion": suggest("imbalance"),
            "facts": [series_fact(raw.get((s.name, rank, source), s))],
            "impact": found,
            "advice": [advice(suggest("imbalance"), because, "imbalance")],
        }


def _by_share(share: float | None) -> str:
    if share is None:
        return "info"
    return "critical" if share >= CRITICAL_SHARE else "warning" if share >= WARNING_SHARE else "info"


def _median_step(series: dict[Any, Series], rank: int, source: str, events: Sequence[MetricEvent]) -> float | None:
    step = series.get((STEP_TIME, rank, source))
    return step_summary(events, step, 0).median if step is not None and step.values else None


def _waits_for(waits: Waits, source: str, rank: int, steps: list[int], ranks: list[int]) -> list[dict[str, Any]]:
    """Per other rank, the region where it waits most at ``steps`` and its mean wait per step there."""
    out = []
    for other in ranks:
        if other == rank:
            continue
        best: tuple[float, str] | None = None
        for (name, r, src), per_step in waits.ms.items():
            if r != other or src != source:
                continue
            total = sum(per_step.get(st, 0.0) for st in steps)
            if total > 0 and (best is None or total > best[0]):
                best = (total, name)
        if best is not None:
            out.append({"rank": other, "in": best[1], "ms": best[0] / len(steps)})
    return out
