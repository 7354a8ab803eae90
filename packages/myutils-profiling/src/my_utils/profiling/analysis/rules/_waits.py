"""Working, not waiting; the host's own jitter; recurring steps: what the time-series rules share.

- **Waits.** A synchronous collective makes every rank leave it together, so a rank that came in
  first waits there for the last one and its region looks long although the cause is another
  rank's earlier region. From each region's start and time per step and rank (MyTimer: the
  sources in ``START_SOURCES``), :func:`region_waits` applies ``my_utils.core.rank_waits``
  (the rule ``myutils stragglers`` uses too) and :func:`working_series` takes the waits out.
- **The host's jitter.** A loaded host delays any region of any rank now and then (a time slice,
  tens of ms on a busy machine). :class:`HostJitter` measures how far in *this* run: the
  :data:`TAIL` quantile of every tested region's excess over its median, pooled over the other
  names and the ranks. An isolated step beyond the median by less than that is what the host
  does to every region; the rules do not warn about it.
- **Recurring steps.** ``my_utils.core.step_patterns.recurring`` (re-exported here) finds outlying
  steps that come back every p steps through the whole run with a similar size (a stall of the
  data loader), which random delays do not.
- **One finding per cause.** :func:`fold_waiting` folds the step-time finding of a rank that only
  waited into the finding of the rank it waited for, and joins ranks with the same recurring cause.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from my_utils.core.events import MetricEvent
from my_utils.core.rank_waits import ends_in_collective, step_waits
from my_utils.core.step_patterns import recurring
from my_utils.profiling.analysis.rules._evidence import same_as_step
from my_utils.profiling.analysis.rules._series import (
    START_SOURCES,
    STEP_TIME,
    Series,
    SeriesKey,
    SeriesSource,
    is_candidate_duration,
    rank_label,
)

__all__ = ["TAIL", "HostJitter", "Waits", "excess_over_median", "fold_waiting", "recurring", "region_starts",
           "region_waits", "working_series"]

#: The quantile of the pooled excess taken as the host's jitter.
TAIL = 0.99
#: Fewer pooled values than this cannot give a tail quantile: the fixed floor alone applies.
MIN_POOL = 30


def region_starts(events: Iterable[MetricEvent]) -> dict[SeriesKey, dict[int, float]]:
    """``{(name, rank, source): {step: first start (unix s)}}`` of the timed regions that carry a start."""
    if isinstance(events, SeriesSource):
        found: Iterable[MetricEvent] = events.named(lambda _name, source: source in START_SOURCES)
    else:
        found = (e for e in events if e.source in START_SOURCES)
    starts: dict[SeriesKey, dict[int, float]] = {}
    for e in found:
        if e.ts is None or e.step is None or e.kind != "duration" or not math.isfinite(e.ts):
            continue
        per_step = starts.setdefault((e.name, e.rank, e.source), {})
        known = per_step.get(e.step)
        if known is None or e.ts < known:
            per_step[e.step] = e.ts
    return starts


@dataclass(frozen=True)
class Waits:
    """Per region series, the ms it waited at each step; and which (name, source) end in a collective."""

    ms: dict[SeriesKey, dict[int, float]]
    collective: frozenset[tuple[str, str]]

    def at(self, key: SeriesKey, step: int) -> float:
        """The wait of ``key`` at ``step`` (0 when none)."""
        return self.ms.get(key, {}).get(step, 0.0)


def region_waits(events: Iterable[MetricEvent], series: Mapping[SeriesKey, Series]) -> Waits:
    """The waits of every region timed on two ranks or more (module docstring); a region that is the step
    itself (MyTimer's ``iter``) has none: its ranks start together and wait in its children."""
    starts = region_starts(events)
    by_name: dict[tuple[str, str], list[SeriesKey]] = {}
    for key in starts:
        name, rank, source = key
        s = series.get(key)
        if rank is not None and s is not None and is_candidate_duration(s) and not same_as_step(series, s):
            by_name.setdefault((name, source), []).append(key)
    waits: dict[SeriesKey, dict[int, float]] = {}
    collective: set[tuple[str, str]] = set()
    for (name, source), keys in by_name.items():
        if len(keys) < 2:
            continue
        per_step: dict[int, dict[int, tuple[float, float]]] = {}
        for key in keys:
            s, at, rank = series[key], starts[key], key[1]
            if rank is None:
                continue
            for step, value in zip(s.steps, s.values, strict=True):
                start = at.get(step)
                if start is not None:
                    per_step.setdefault(step, {})[rank] = (value, start)
        steps = {step: step_waits(times) for step, times in per_step.items() if len(times) >= 2}
        loose = ends_in_collective(w.spread_ratio for w in steps.values())
        if loose:
            collective.add((name, source))
        for step, w in steps.items():
            for rank, ms in (w.loose if loose else w.strict).items():
                waits.setdefault((name, rank, source), {})[step] = ms
    return Waits(waits, frozenset(collective))


def working_series(series: Mapping[SeriesKey, Series], waits: Waits) -> dict[SeriesKey, Series]:
    """``series`` with each region's waits taken out of its values (the others as they are, shared)."""
    out = dict(series)
    for key, per_step in waits.ms.items():
        s = series.get(key)
        if s is None or not per_step:
            continue
        values = [max(0.0, v - per_step.get(st, 0.0)) for st, v in zip(s.steps, s.values, strict=True)]
        out[key] = Series(s.name, s.rank, s.kind, s.unit, s.source, s.depth, list(s.steps), values, s.events,
                          s.occurrences)
    return out


class HostJitter:
    """How far this run's host delays a region in one step: the pooled tail of the excess over the median.

    ``excess_by_name`` holds, per name, every tested value's excess over its series' median (0 at
    or below it). :meth:`level` of a name pools the *other* names (a region that really varies
    does not set its own bar) and is never below ``floor``.
    """

    def __init__(self, excess_by_name: Mapping[str, Sequence[float]], floor: float, tail: float = TAIL) -> None:
        self.floor = floor
        self.tail = tail
        self._by_name = {name: sorted(v) for name, v in excess_by_name.items()}
        self._all = sorted(x for v in self._by_name.values() for x in v)
        self._memo: dict[str, float] = {}

    def level(self, name: str) -> float:
        """The jitter for judging ``name`` (ms): the tail quantile of the other names' excess, at least the floor."""
        found = self._memo.get(name)
        if found is None:
            own = self._by_name.get(name, [])
            n = len(self._all) - len(own)
            found = self.floor
            if n >= MIN_POOL:
                k = min(n - 1, math.ceil(self.tail * n) - 1)  # rank of the quantile in the pool without `name`
                found = max(self.floor, _kth_without(self._all, own, k))
            self._memo[name] = found
        return found

    def pooled(self) -> int:
        """How many values the pool holds."""
        return len(self._all)


def _kth_without(ordered: Sequence[float], removed: Sequence[float], k: int) -> float:
    """The ``k``-th smallest (0-based) of ``ordered`` once the values of ``removed`` (a sorted sub-multiset) are out."""
    lo, hi = 0, len(ordered) - 1
    while lo < hi:  # smallest index i whose value has more than k kept values at or below it
        mid = (lo + hi) // 2
        kept = (mid + 1) - bisect.bisect_right(removed, ordered[mid])
        if kept > k:
            hi = mid
        else:
            lo = mid + 1
    return ordered[lo]


def excess_over_median(values: Sequence[float]) -> list[float]:
    """Each value's excess over the median of ``values`` (0 at or below it)."""
    if not values:
        return []
    med = statistics.median(values)
    return [v - med if v > med else 0.0 for v in values]


def fold_waiting(findings: list[dict[str, Any]], waited: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Name each rank's waiting steps in the finding of the rank it waited for; join ranks with the same finding.

    ``waited`` holds the steps a rank's step time was long because it waited for another rank
    (``rank``, ``step``, ``in``, ``ms``, ``for_rank``): they are no anomaly of that rank and go to the
    ``waiting_ranks`` of the finding of ``for_rank`` that holds the step. Step-time findings of several
    ranks explained by the same region on the same recurring steps become one (``ranks``).
    """
    for w in waited:
        target = next((f for f in findings if f["evidence"]["ranks"] == [w["for_rank"]]
                       and w["step"] in f["evidence"]["steps"] and f["evidence"].get("source", w["source"]) == w["source"]),
                      None)
        if target is None:
            continue
        entry = {"rank": w["rank"], "in": w["in"], "ms": w["ms"], "steps": [w["step"]]}
        target["evidence"].setdefault("waiting_ranks", []).append(entry)
        target["detail"] += (f"; rank {w['rank']} waited {w['ms']:.4g} {target['evidence']['unit']} for it in "
                             f"{w['in']} at step {w['step']}")
    joined: dict[tuple[Any, ...], dict[str, Any]] = {}
    result: list[dict[str, Any]] = []
    for f in findings:
        ev = f["evidence"]
        explained = ev.get("explained_by")
        if ev["names"][0] != STEP_TIME or explained is None or "recurring_steps" not in ev:
            result.append(f)
            continue
        key = (explained["name"], tuple(ev["recurring_steps"]), ev["period"])
        head = joined.get(key)
        if head is None:
            joined[key] = f
            result.append(f)
            continue
        first = head["evidence"]["ranks"][0]
        head["evidence"]["ranks"] = sorted({*head["evidence"]["ranks"], *ev["ranks"]})
        head["facts"] = [*head.get("facts", []), *f.get("facts", [])]
        head["detail"] += f"; the same on rank {ev['ranks'][0]}"
        head["title"] = head["title"].replace(rank_label(first),
                                              "ranks " + ", ".join(map(str, head["evidence"]["ranks"])), 1)
    return result
