"""VariabilityRule: operations whose time per step is unstable.

The spread is the robust coefficient of variation (1.4826 · MAD / median) of the per-step
values after warm-up: a single slow step does not make a name unstable (that is an
anomaly); a name that keeps jumping does. The plain CV is reported beside it. Names
under ``min_share`` of the step time are left out (a 1 µs op jittering is not news), and so
is a region that *is* the step (MyTimer's ``iter``, equal to ``step_time`` at every step).

**Estimation noise.** The robust CV of a few steps is itself noisy (the MAD has about 37 %
of the standard deviation's efficiency): each series gets a one-sided p-value for "its
robust CV is above ``cv``" (log scale, relative standard error ``sqrt((1.36 + π/2·cv²)/n)``)
and only those the Benjamini–Hochberg procedure keeps at :data:`FDR` over every series
tested are reported; the finding states the rate.

Advice comes from the evidence: for the step time, the sub-region carrying most of the
spread (its robust spread in ms) names the cause (``analysis.advice.JITTER_ADVICE``).

**The host is not the program.** A region's time on a rank that waited there for another rank
(a collective) is taken out first (``_waits``): waiting varies with the *other* rank. A loaded
host delays any region now and then; a spread (robust standard deviation, in ms) no larger
than the host's own jitter in this run (``_waits.HostJitter``: the tail of the other regions'
excess over their median, at least ``jitter_ms``) is the host's, and the finding is ``info``;
so is the step time's when its regions are timed (a step gathers every region's delays: the
regions' own findings say whether one of them varies). Beyond it, severity follows the time
above the median per step: critical from 5 % of the median step, a warning from 1 %.
"""

from __future__ import annotations

import heapq
import math
import operator
import statistics
from collections.abc import Sequence
from itertools import compress, repeat
from typing import Any

from my_utils.core.events import MetricEvent
from my_utils.profiling.analysis.advice import JITTER_ADVICE, jitter_cause
from my_utils.profiling.analysis.rules._evidence import (
    advice,
    impact,
    not_attributable,
    same_as_step,
    series_fact,
    steps_row,
)
from my_utils.profiling.analysis.rules._series import (
    STEP_TIME,
    after_warmup,
    build_series,
    is_candidate_duration,
    is_gpu_family,
    rank_label,
    series_id,
    series_total,
    step_summary,
)
from my_utils.profiling.analysis.rules._stats import MAD_TO_SIGMA, Summary, benjamini_hochberg, summarize
from my_utils.profiling.analysis.rules._waits import (
    HostJitter,
    excess_over_median,
    region_waits,
    working_series,
)
from my_utils.profiling.analysis.rules.suggestions import suggest

#: The false-discovery rate of the reported variability findings (Benjamini–Hochberg over the series tested).
FDR = 0.05
_NORMAL = statistics.NormalDist()
#: Share of the median step above which the time above the median is critical, and a warning.
CRITICAL_SHARE = 0.05
WARNING_SHARE = 0.01


def above_threshold_p(rcv: float, threshold: float, n: int) -> float:
    """One-sided p-value of "the robust CV of these ``n`` values is above ``threshold``" (module docstring)."""
    if rcv <= 0 or n < 2:
        return 1.0
    if not math.isfinite(rcv):
        return 0.0
    rel_se = math.sqrt((1.36 + math.pi / 2 * rcv * rcv) / n)
    return 1.0 - _NORMAL.cdf(math.log(rcv / threshold) / rel_se)


def _extreme_steps(values: list[float], steps: list[int], ordered: Sequence[float], k: int
                   ) -> tuple[list[int], list[int]]:
    """The steps of the ``k`` largest and ``k`` smallest (value, step) pairs, as ``heapq.nlargest``/``nsmallest`` give them.

    Only the pairs at or beyond the k-th value from each end (read off the sorted values) can
    be among them: those few go through ``heapq``, not all of the series.
    """
    if len(values) <= k:
        pairs = list(zip(values, steps, strict=True))
        return [st for _, st in heapq.nlargest(k, pairs)], [st for _, st in heapq.nsmallest(k, pairs)]
    if len(steps) != len(values):
        raise ValueError(f"{len(values)} values but {len(steps)} steps")
    top, bottom = ordered[-k], ordered[k - 1]
    # the masks and the picking run in C (map, compress): a Python loop over the series cost more than heapq
    is_high = list(map(operator.ge, values, repeat(top)))
    is_low = list(map(operator.le, values, repeat(bottom)))
    high = list(zip(compress(values, is_high), compress(steps, is_high), strict=True))
    low = list(zip(compress(values, is_low), compress(steps, is_low), strict=True))
    return [st for _, st in heapq.nlargest(k, high)], [st for _, st in heapq.nsmallest(k, low)]


class VariabilityRule:
    """Flag names whose robust CV per step exceeds ``cv`` (critical above ``critical_cv``)."""

    name = "variability"

    def __init__(self, cv: float = 0.15, critical_cv: float = 0.5, warmup_steps: int = 1, min_steps: int = 5,
                 min_share: float = 0.01, max_findings: int = 20, jitter_ms: float = 10.0) -> None:
        self.jitter_ms = jitter_ms
        self.cv = cv
        self.critical_cv = max(cv, critical_cv)
        self.warmup_steps = warmup_steps
        self.min_steps = max(3, min_steps)
        self.min_share = min_share
        self.max_findings = max_findings

    def evaluate(self, events: Sequence[MetricEvent]) -> list[dict[str, Any]]:
        """One finding per unstable (name, rank), most unstable first."""
        raw = self._raw = build_series(events)
        series = working_series(raw, region_waits(events, raw))
        step_total = {(r, src): series_total(events, s) for (n, r, src), s in raw.items() if n == STEP_TIME}
        device_total: dict[int | None, float] = {}
        for (n, r, _src), s in series.items():
            if is_gpu_family(n) and s.kind == "duration":
                device_total[r] = device_total.get(r, 0.0) + series_total(events, s)
        found: list[tuple[float, dict[str, Any]]] = []
        tested = 0
        ps: list[float] = []
        pool: dict[str, list[float]] = {}
        regions: set[tuple[int | None, str]] = set()  # (rank, source) whose step is made of tested regions
        for (name, rank, source), s in series.items():
            if not (is_candidate_duration(s) or name == STEP_TIME) or same_as_step(raw, s):
                continue
            denom = device_total.get(rank, 0.0) if is_gpu_family(name) else step_total.get((rank, source), 0.0)
            if name != STEP_TIME and denom > 0 and series_total(events, raw.get((name, rank, source), s)) / denom \
                    < self.min_share:
                continue
            steps, values = after_warmup(s, self.warmup_steps)
            if len(values) < self.min_steps:
                continue
            if name != STEP_TIME and not is_gpu_family(name):
                pool.setdefault(name, []).extend(excess_over_median(values))
                regions.add((rank, source))
            # shared: sorted once per analysis (a region with waits taken out is a new series)
            stats = step_summary(events, s, self.warmup_steps) if s is raw.get((name, rank, source)) \
                else summarize(values)
            med = stats.median
            rcv = stats.robust_cv
            tested += 1
            if rcv <= self.cv:
                continue
            p = above_threshold_p(rcv, self.cv, len(values))
            plain_cv = stats.cv
            slowest, fastest = _extreme_steps(values, steps, stats.ordered, 5)
            p10, p90 = stats.quantile(0.1), stats.quantile(0.9)
            found.append((rcv, {
                "id": f"variability:{series_id(s)}",
                "category": "variability",
                "severity": "critical" if rcv >= self.critical_cv else "warning",
                "title": f"{name} varies {rcv:.0%} from step to step on {rank_label(rank)}",
                "detail": (f"robust CV {rcv:.3f} (plain CV {plain_cv:.3f}) over {len(values)} steps; "
                           f"p10 {p10:.4g}, median {med:.4g}, p90 {p90:.4g} {s.unit}; threshold {self.cv:.0%}"),
                "evidence": {"names": [name], "ranks": [rank], "source": source, "robust_cv": round(rcv, 4),
                             "robust_sd": MAD_TO_SIGMA * stats.mad,
                             "cv": round(plain_cv, 4), "median": med, "p10": p10, "p90": p90, "unit": s.unit,
                             "steps": slowest, "fastest_steps": fastest, "steps_tested": len(values)},
                "suggestion": suggest("variability", name),
            }))
            ps.append(p)
            self._explain(series, s, steps, values, stats, found[-1][1], events)
        keep = benjamini_hochberg(ps, tested, FDR)
        found = [f for f, k in zip(found, keep, strict=True) if k]
        jitter = HostJitter(pool, self.jitter_ms)
        for _rcv, f in found:
            f["detail"] += (f"; kept by Benjamini–Hochberg at a {FDR:.0%} false-discovery rate over {tested} "
                            "series tested")
            f["evidence"]["fdr"] = FDR
            f["evidence"]["series_tested"] = tested
            self._grade(f, jitter, regions)
        found.sort(key=lambda kv: -kv[0])
        return [f for _, f in found[: self.max_findings]]

    def _grade(self, finding: dict[str, Any], jitter: HostJitter, regions: set[tuple[int | None, str]]) -> None:
        """Severity from the host's jitter and the time above the median (module docstring)."""
        ev = finding["evidence"]
        host = jitter.level(ev["names"][0])
        ev["host_jitter_ms"] = host
        share = finding["impact"].get("share_of_step")
        if ev["names"] == [STEP_TIME] and (ev["ranks"][0], ev["source"]) in regions:
            not_attributable(finding, "none stated here: the step gathers its timed regions' delays, whose own "
                                      "findings state theirs")
            finding["detail"] += ("; the step is the sum of its timed regions, whose own findings say whether one of "
                                  "them varies beyond the host's jitter (a step gathers every region's delays)")
        elif ev["robust_sd"] <= host:
            not_attributable(finding, "none attributable: the spread is within the host's own delays")
            finding["detail"] += (f"; its robust spread ({ev['robust_sd']:.4g} {ev['unit']}) is no larger than the "
                                  f"host's own delays in this run ({host:.4g}: the tail of the other regions' excess "
                                  f"over their median, at least {self.jitter_ms:g}): the host's, not the program's")
        elif share is None:
            finding["severity"] = "info"
        else:
            finding["severity"] = ("critical" if share >= CRITICAL_SHARE else
                                   "warning" if share >= WARNING_SHARE else "info")

    def _explain(self, series: dict[Any, Any], s: Any, steps: list[int], values: list[float], stats: Summary,
                 finding: dict[str, Any], events: Sequence[MetricEvent]) -> None:
        """Advice from the evidence, the impact and the facts (module docstring)."""
        med = stats.median
        spread = MAD_TO_SIGMA * stats.mad
        because = [steps_row(s, [], {"median": med, "robust_sd": spread, "steps": len(values)})]
        facts = [series_fact(s) + ":spread"]  # the spread, not the series' share (a bottleneck's fact)
        kind, text = "unexplained", JITTER_ADVICE["unexplained"]
        if s.name == STEP_TIME:
            best = None
            for other in series.values():
                if (other.rank, other.source) != (s.rank, s.source) or other.kind != "duration" \
                        or other.name == STEP_TIME or same_as_step(self._raw, other) or len(other.values) < 3:
                    continue
                o_spread = MAD_TO_SIGMA * step_summary(events, other, 0).mad
                if best is None or o_spread > best[0]:
                    best = (o_spread, other)
            if best is not None and spread > 0 and best[0] >= 0.5 * spread:
                kind = "spread"
                text = JITTER_ADVICE["spread"].format(name=best[1].name, advice=jitter_cause(best[1].name))
                because.append(steps_row(best[1], [], {"robust_sd": best[0]}))
        else:
            kind, text = "spread", JITTER_ADVICE["spread"].format(name=s.name, advice=jitter_cause(s.name))
        finding["suggestion"] = text
        finding["advice"] = [advice(text, because, f"jitter:{kind}")]
        finding["facts"] = facts
        # sum(v - med for v > med), left to right as a plain loop adds them, at C speed
        above = sum(map(operator.sub, compress(values, map(operator.gt, values, repeat(med))), repeat(med)))
        step = series.get((STEP_TIME, s.rank, s.source))
        step_ms = step_summary(events, step, 0).median if step is not None and step.values else None
        saving = above / len(values) if values else None
        finding["impact"] = impact(saving if step_ms else None, step_ms,
                                   f"the time above the median, averaged over the {len(values)} steps tested",
                                   len(values), s.source)
