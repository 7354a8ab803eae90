"""What the Nsight rules share: the clock a saving is compared with, scopes of per-device facts, and severity.

A saving is spread over the NVTX iterations when they cover the GPU span, else it is a share
of the capture's GPU span, and the impact says so (``denominator``). Severity follows the
impact: ``critical`` from :data:`CRITICAL_SHARE` of the stated step, ``warning`` from
:data:`WARNING_SHARE`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from my_utils.profiling.analysis.rules._evidence import impact
from my_utils.profiling.model.report import Fact

MIN_COVERAGE = 0.5  # of the GPU span: iterations that cover less are not a clock for savings
CRITICAL_SHARE = 0.05  # of the step the impact states: nothing below is critical
WARNING_SHARE = 0.01  # ... nor a warning
MS = 1e6


def tag(rank: Any) -> str:
    return f"rank{rank}" if rank is not None else "norank"


def where(rank: Any, device: Any = None) -> str:
    parts = ([f"rank {rank}"] if rank is not None else []) + ([f"device {device}"] if device is not None else [])
    return ", ".join(parts) or "the run"


@dataclass(frozen=True)
class Clock:
    """What a saving is compared with: the median NVTX iteration, or the capture's GPU span (one 'step')."""

    steps: int | None
    step_ms: float | None

    def impact(self, saving_ms: float, span_ms: float | None, basis: str, *, upper: bool = False,
               span_label: str = "the capture's GPU span") -> dict[str, Any]:
        if self.steps and self.step_ms:
            return impact(saving_ms / self.steps, self.step_ms,
                          f"{basis}, spread over {self.steps} NVTX iteration(s)", self.steps, "nsys", upper)
        out = impact(saving_ms, span_ms, f"{basis}, over the whole capture (no NVTX iterations found: the capture "
                                         "counts as one step, a share of its GPU span)", None, "nsys", upper)
        if span_ms:
            out["denominator"] = f"{span_label.removeprefix('the ')} (no step time measured)"
            out["denominator_ms"] = span_ms
        return out


def clock_of(facts: Mapping[str, Fact]) -> Clock:
    """Iterations when they cover at least :data:`MIN_COVERAGE` of the GPU span (a range around a launch alone
    does not: its CPU time says nothing of the GPU's), else the capture."""
    median = facts.get("step_time.median")
    span = mean_span(facts)
    if median is not None and median.source == "nsys" and median.number and median.steps and span \
            and median.number * median.steps >= MIN_COVERAGE * span:
        return Clock(median.steps, median.number)
    return Clock(None, None)


def scopes(facts: Mapping[str, Fact], prefix: str) -> dict[str, Fact]:
    """``scope -> fact`` for the facts ``<prefix>:<scope>`` (scope ``rank1:device0``, ``device0``...)."""
    return {k[len(prefix) + 1:]: f for k, f in facts.items() if k.startswith(prefix + ":")}


def rank_device(fact: Fact) -> tuple[Any, Any]:
    key = fact.evidence[0].key if fact.evidence else {}
    return key.get("rank"), key.get("device")


def one(per: list[dict[str, Any]], fid: str) -> list[dict[str, Any]]:
    """One finding from per-scope ones: the largest impact quoted, the others named (``fact_rules``' way)."""
    if not per:
        return []
    ordered = sorted(per, key=lambda f: f.get("impact", {}).get("share_of_step") or 0.0, reverse=True)
    head = dict(ordered[0], id=fid)
    if len(ordered) > 1:
        head["detail"] += "; also: " + "; ".join(o["title"] for o in ordered[1:8])
        head["evidence"] = dict(head["evidence"], ranks=[r for f in ordered for r in f["evidence"]["ranks"]],
                                per_scope=[{"where": f["evidence"]["where"], "title": f["title"]} for f in ordered])
        head["facts"] = [x for f in ordered for x in f["facts"]]
        head["advice"] = [dict(a, because=[b for f in ordered for a2 in f["advice"] if a2["kind"] == a["kind"]
                                           for b in a2["because"]]) for a in head["advice"]]
    return [head]


def severity_by_impact(finding: dict[str, Any]) -> dict[str, Any]:
    """Severity follows the time a fix could save: ``critical`` only from :data:`CRITICAL_SHARE` of the step the
    impact states, ``warning`` only from :data:`WARNING_SHARE` (a capture-validity finding keeps its warning)."""
    share = (finding.get("impact") or {}).get("share_of_step")
    if not isinstance(share, (int, float)) or finding.get("category") == "capture":
        return finding
    severity = finding.get("severity")
    if severity == "critical" and share < CRITICAL_SHARE:
        severity = "warning"
    if severity == "warning" and share < WARNING_SHARE:
        severity = "info"
    return finding if severity == finding.get("severity") else dict(finding, severity=severity)


def span_ms(busy: Fact) -> float:
    return busy.denominator_value or 0.0


def span_label(facts: Mapping[str, Fact]) -> str:
    n = len([f for f in scopes(facts, "nsys.gpu_busy").values() if f.denominator_value])
    return "the capture's GPU span" if n == 1 else f"the capture's mean GPU span over {n} devices"


def mean_span(facts: Mapping[str, Fact]) -> float | None:
    spans = [f.denominator_value for f in scopes(facts, "nsys.gpu_busy").values() if f.denominator_value]
    return sum(spans) / len(spans) if spans else None


