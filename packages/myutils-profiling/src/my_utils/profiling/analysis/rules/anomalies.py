"""AnomalyRule: steps far from the usual value of a name, by 3σ and by a median/MAD score.

Two tests per (name, rank) series after the warm-up steps:

- ``sigma``: ``|x - mean| > sigma · std`` (the seed's 3σ rule; a few outliers inflate
  ``std`` and can hide each other, and with under 10 points one outlier can never pass it);
- ``mad``: ``|x - median| / (1.4826 · MAD) > mad_z`` (the robust z-score of Iglewicz and
  Hoaglin; one outlier does not move the median nor the MAD).

``method`` picks ``sigma``, ``mad``, ``either`` (default: flagged by one test, the finding
says which) or ``both``; a step must also differ from the median by ``min_excess`` (10 %)
of it, so that a near-constant series does not report its noise.

Only ``step_time`` and the ``max_names`` names with the largest totals are tested, so a trace
with thousands of kernel names gives a handful of findings, not thousands; a host name
under ``min_share`` of its step time is left out. The finding
names the steps, their values and scores, and which tests flagged them.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from my_utils.core.events import MetricEvent
from my_utils.profiling.analysis.rules._series import (
    STEP_TIME,
    Series,
    after_warmup,
    build_series,
    is_candidate_duration,
    is_gpu_family,
    rank_label,
    series_id,
    step_ranges,
)
from my_utils.profiling.analysis.rules._stats import MAD_TO_SIGMA, mad, median_sorted, pstdev
from my_utils.profiling.analysis.rules.suggestions import suggest

METHODS = ("sigma", "mad", "either", "both")


class AnomalyRule:
    """Flag outlying steps per name and rank (see the module docstring)."""

    name = "anomalies"

    def __init__(self, sigma: float = 3.0, mad_z: float = 3.5, method: str = "either", warmup_steps: int = 1,
                 min_steps: int = 8, max_names: int = 20, min_excess: float = 0.10, min_share: float = 0.01) -> None:
        if method not in METHODS:
            raise ValueError(f"AnomalyRule(method={method!r}): expected one of {list(METHODS)}")
        self.sigma = sigma
        self.mad_z = mad_z
        self.method = method
        self.warmup_steps = warmup_steps
        self.min_steps = max(3, min_steps)
        self.max_names = max_names
        self.min_excess = min_excess
        self.min_share = min_share

    def evaluate(self, events: Sequence[MetricEvent]) -> list[dict[str, Any]]:
        """One finding per (name, rank) with outlying steps."""
        series = build_series(events)
        names = {n for (n, _, _), s in series.items() if n == STEP_TIME and s.kind == "duration"}
        totals: dict[str, float] = {}
        for (n, _, _), s in series.items():
            if is_candidate_duration(s):
                totals[n] = totals.get(n, 0.0) + s.total
        names.update(sorted(totals, key=lambda n: -totals[n])[: self.max_names])
        step_total = {(r, src): s.total for (n, r, src), s in series.items() if n == STEP_TIME}
        findings: list[dict[str, Any]] = []
        for (name, _rank, _source), s in sorted(series.items(), key=lambda kv: (
                kv[0][0] != STEP_TIME, kv[0][0], kv[0][1] or -1, kv[0][2])):
            if name not in names:
                continue
            denom = step_total.get((s.rank, s.source), 0.0)
            if name != STEP_TIME and not is_gpu_family(name) and denom > 0 and s.total / denom < self.min_share:
                continue  # a 1 % region jittering cannot move the step
            steps, values = after_warmup(s, self.warmup_steps)
            if len(values) < self.min_steps:
                continue
            finding = self._check(s, steps, values)
            if finding is not None:
                findings.append(finding)
        return findings

    def _check(self, s: Series, steps: list[int], values: list[float]) -> dict[str, Any] | None:
        name, rank, unit = s.name, s.rank, s.unit
        mean = statistics.fmean(values)
        std = pstdev(values, mean)
        ordered = sorted(values)
        med = median_sorted(ordered)
        scale = MAD_TO_SIGMA * mad(values, med)
        sigma, mad_z, method = self.sigma, self.mad_z, self.method
        excess = self.min_excess * abs(med)

        def scores(v: float) -> tuple[float, float]:
            return (v - mean) / std if std > 0 else 0.0, (v - med) / scale if scale > 0 else 0.0

        # Both scores grow with the value, so the steps a test can flag are the ends of the sorted
        # values: find the cuts there and score only the steps beyond them (a few, not all).
        # Non-finite statistics (an inf in the series) keep the plain loop over every step.
        everything = not all(map(math.isfinite, (mean, std, med, scale)))
        hi_cut = lo_cut = None
        if not everything:
            for v in reversed(ordered):
                z, rz = scores(v)
                if not (z > sigma or rz > mad_z):
                    break
                hi_cut = v
            for v in ordered:
                z, rz = scores(v)
                if not (z < -sigma or rz < -mad_z):
                    break
                lo_cut = v
        rows: list[dict[str, Any]] = []
        for step, v in zip(steps, values, strict=True):
            if not (everything or (hi_cut is not None and v >= hi_cut) or (lo_cut is not None and v <= lo_cut)):
                continue
            z, rz = scores(v)
            by_sigma = abs(z) > sigma
            by_mad = abs(rz) > mad_z
            if not (by_sigma or by_mad):  # the usual step: no test flags it, whatever the method
                continue
            by = [m for m, hit in (("sigma", by_sigma), ("mad", by_mad)) if hit]
            if method == "both" and len(by) < 2:
                by = []
            elif method in ("sigma", "mad"):
                by = [m for m in by if m == method]
            # a robust score over a near-constant series flags noise: require a visible excess too
            if by and abs(v - med) > excess:
                rows.append({"step": step, "value": v, "z": round(z, 3), "robust_z": round(rz, 3), "by": by})
        if not rows:
            return None
        flagged = [r["step"] for r in rows]
        both = all(len(r["by"]) == 2 for r in rows)
        worst = max(rows, key=lambda r: abs(r["value"] - med))
        slow = worst["value"] > med
        return {
            "id": f"anomaly:{series_id(s)}",
            "category": "anomaly",
            "severity": "critical" if both and abs(worst["value"] - med) > abs(med) else "warning",
            "title": f"{name}: {len(rows)} outlying step(s) ({step_ranges(flagged)}) on {rank_label(rank)}",
            "detail": (f"step {worst['step']} took {worst['value']:.4g} {unit} against a median of {med:.4g} "
                       f"(mean {mean:.4g}, std {std:.4g}; {self.sigma:g}σ and robust z > {self.mad_z:g}); "
                       f"{'slower' if slow else 'faster'} than usual"),
            "evidence": {"names": [name], "ranks": [rank], "steps": flagged, "outliers": rows[:50],
                         "median": med, "mean": mean, "std": std, "mad_sigma": scale, "unit": unit,
                         "method": self.method, "steps_tested": len(values)},
            "suggestion": suggest("anomaly", name),
        }
