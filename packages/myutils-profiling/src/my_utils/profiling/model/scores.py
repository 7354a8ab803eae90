"""Scores: 0–100 per dimension and overall, computed from the findings only.

Formula (also in the profiling README):

- within one finding category, the worst finding costs its penalty by severity (``info`` 2,
  ``warning`` 10, ``critical`` 25 points) and every further finding 2 points, at most 5 of
  them (one cause often shows in several names: ten nested operators of one slow layer
  must not read as ten problems) — so a category costs at most 35 points;
- a dimension's score is ``max(0, 100 - the sum over its categories)``;
- dimensions and the finding categories they take: ``performance`` (``bottleneck``,
  ``optimization``, ``imbalance``), ``stability`` (``anomaly``, ``variability``), ``memory`` (``memory``),
  ``capture`` (``capture``); findings of other categories (third-party rules) count in
  ``performance``;
- a dimension is scored only when the analysis had data for it (``performance`` needs
  per-step durations, ``stability`` enough steps to test, ``memory`` memory events per step,
  ``capture`` traces); the others are "not measured", with the reason
  (:func:`score_dimensions`), so missing data never reads as a perfect score;
- ``overall`` is the mean of the scored dimensions, rounded to one decimal, and is absent
  when no dimension was measured (a report of Nsight or cProfile totals alone).

Same findings, same scores: two reports compare by their scores as well as their findings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from my_utils.profiling.model.report import Finding

PENALTY: dict[str, float] = {"info": 2.0, "warning": 10.0, "critical": 25.0}
EXTRA_FINDING = 2.0
MAX_EXTRA_FINDINGS = 5
DIMENSIONS: dict[str, tuple[str, ...]] = {
    "performance": ("bottleneck", "optimization", "imbalance"),
    "stability": ("anomaly", "variability"),
    "memory": ("memory",),
    "capture": ("capture",),
}


def dimension_of(category: str) -> str:
    """The dimension a finding category counts in (``performance`` for unknown categories)."""
    for dim, cats in DIMENSIONS.items():
        if category in cats:
            return dim
    return "performance"


def compute_scores(findings: Iterable[Finding], dimensions: Iterable[str]) -> dict[str, float]:
    """``overall`` plus one score per dimension in ``dimensions`` (those the data covers)."""
    scored = [d for d in DIMENSIONS if d in set(dimensions)]
    penalty = dict.fromkeys(scored, 0.0)
    by_category: dict[str, list[float]] = {}
    for f in findings:
        by_category.setdefault(f.category, []).append(PENALTY.get(f.severity, 0.0))
    for category, costs in by_category.items():
        dim = dimension_of(category)
        if dim in penalty:
            extra = min(len(costs) - 1, MAX_EXTRA_FINDINGS)
            penalty[dim] += max(costs) + EXTRA_FINDING * extra
    scores = {d: max(0.0, 100.0 - p) for d, p in penalty.items()}
    if not scores:
        return {}
    return {"overall": round(sum(scores.values()) / len(scores), 1), **scores}


def score_dimensions(scores: Mapping[str, float], not_measured: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """Every dimension: ``{"score": n}`` when scored, ``{"score": None, "not_measured": reason}`` otherwise."""
    out: dict[str, dict[str, Any]] = {}
    for dim in DIMENSIONS:
        if dim in scores:
            out[dim] = {"score": scores[dim]}
        else:
            out[dim] = {"score": None, "not_measured": not_measured.get(dim, "no data for this dimension")}
    return out
