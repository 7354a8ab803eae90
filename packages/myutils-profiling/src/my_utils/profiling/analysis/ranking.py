"""One finding per fact, ranked by the time it could save (ARCHITECTURE.md §8, ``diagnosis/CASES.md`` principle 2).

Findings are ordered in tiers: those stating a saving as a share of a step (largest first), then
those stating a saving in ms only (no step to compare with), then breakdowns (where the time is,
not a saving: largest region share, weighted by the evidence ``steps / (steps + 3)``), then the
rest. Within a tier the evidence weight, then severity, category and id break ties: the finding
ranked first saves at least as much as any other, never less because it rests on fewer steps
(thin evidence is said in its card and bounds its severity instead). Walking that order, the first
finding to name a fact owns it: a later finding resting on a fact already owned (a bottleneck on
an NCCL kernel after "communication is not overlapped", a suggestion repeating a bottleneck) is
folded into the owner, whose ``evidence["merged"]`` lists the folded ids. Findings without facts
(third-party rules, capture checks) are never folded.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from my_utils.profiling.model.report import SEVERITIES, Finding


def tier(f: Finding) -> int:
    """0: a saving as a share of a step; 1: a saving in ms only; 2: a breakdown; 3: nothing stated."""
    impact = f.impact
    if impact.share_of_step is not None:
        return 0
    if impact.ms_per_step is not None:
        return 1
    return 2 if impact.breakdown else 3


def rank_key(f: Finding) -> tuple[int, float, float, int, str, str]:
    """Sort key: the tier, the saving (or a breakdown's weighted share), the weight, severity, category, id."""
    impact = f.impact
    value = impact.rank_value if tier(f) < 2 else (impact.region_share or 0.0) * impact.weight
    return (tier(f), -value, -impact.weight, -SEVERITIES.index(f.severity), f.category, f.id)


def rank_findings(findings: Iterable[Finding]) -> list[Finding]:
    """The findings, one per fact, largest saving first (module docstring)."""
    owner_of: dict[str, int] = {}
    kept: list[Finding] = []
    merged: dict[int, list[str]] = {}
    for f in sorted(findings, key=rank_key):
        owner = next((owner_of[x] for x in f.facts if x in owner_of), None)
        if owner is not None:
            merged.setdefault(owner, []).append(f.id)
            continue
        for x in f.facts:
            owner_of[x] = len(kept)
        kept.append(f)
    for i, ids in merged.items():
        f = kept[i]
        kept[i] = replace(f, evidence={**f.evidence, "merged": [*f.evidence.get("merged", []), *ids]})
    return kept
