"""One finding per fact, ranked by the time it could save (ARCHITECTURE.md §8).

Findings are ordered by ``impact.rank_value`` (the share of the step a fix could save, times
the evidence weight ``steps / (steps + 3)``), then severity, then id. Walking that order, the
first finding to name a fact owns it: a later finding resting on a fact already owned (a
bottleneck on an NCCL kernel after "communication is not overlapped", a suggestion repeating
a bottleneck) is folded into the owner, whose ``evidence["merged"]`` lists the folded ids.
Findings without facts (third-party rules, capture checks) are never folded.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from my_utils.profiling.analysis.model import SEVERITIES, Finding


def rank_key(f: Finding) -> tuple[float, int, str, str]:
    """Sort key: largest weighted impact first, then the most severe, then category and id."""
    return (-f.impact.rank_value, -SEVERITIES.index(f.severity), f.category, f.id)


def rank_findings(findings: Iterable[Finding]) -> list[Finding]:
    """The findings, one per fact, largest impact first (module docstring)."""
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
