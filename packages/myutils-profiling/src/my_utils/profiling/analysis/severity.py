"""Severity follows impact: one rule for every finding, applied after the rules (``diagnosis/CASES.md``, principle 2).

``critical`` only when the saving a finding states is at least :data:`CRITICAL_SHARE` of the step
it states, ``warning`` at least :data:`WARNING_SHARE`, ``info`` below. A finding that states no
saving as a share of a step (a breakdown of where the time is, a verdict restated, a saving in ms
with no step to compare with) is ``info``, except the kinds in :data:`WITHOUT_SAVING`: a capture
check (numbers that may be wrong), memory growth (it ends the run) and a rank imbalance, which
keep their rule's severity up to ``warning``. The rules' own severities are read only there;
everywhere else the severity is the impact's, so that severity, impact and rank agree.
"""

from __future__ import annotations

from dataclasses import replace

from my_utils.profiling.model.report import SEVERITIES, Finding

#: A saving of at least this share of the step it states may be critical.
CRITICAL_SHARE = 0.05
#: A saving of at least this share of the step it states may be a warning.
WARNING_SHARE = 0.01
#: Categories that may stay up to this severity without a saving stated (their rule's severity, capped).
WITHOUT_SAVING: dict[str, str] = {"capture": "warning", "memory": "warning", "imbalance": "warning"}
#: Capture checks: numbers that may be wrong are a warning even when the time they cost is small.
VALIDITY = frozenset({"capture"})


def _min(a: str, b: str) -> str:
    return a if SEVERITIES.index(a) <= SEVERITIES.index(b) else b


def level(share: float) -> str:
    """The severity a saving of ``share`` (of the step it states) earns."""
    if share >= CRITICAL_SHARE:
        return "critical"
    return "warning" if share >= WARNING_SHARE else "info"


def severity_for(f: Finding) -> str:
    """The severity ``f`` earns by its impact (module docstring)."""
    share = f.impact.share_of_step
    cap = WITHOUT_SAVING.get(f.category)
    if share is None or f.impact.breakdown:
        return _min(f.severity, cap) if cap is not None else "info"
    earned = level(share)
    if f.category in VALIDITY and cap is not None:  # a capture check stays a warning even when it costs little
        earned = max(earned, _min(f.severity, cap), key=SEVERITIES.index)
    return earned


def apply_severity(findings: list[Finding]) -> list[Finding]:
    """Each finding with the severity its impact earns; ``evidence["rule_severity"]`` keeps a changed one."""
    out = []
    for f in findings:
        sev = severity_for(f)
        out.append(f if sev == f.severity else replace(f, severity=sev,
                                                        evidence={**f.evidence, "rule_severity": f.severity}))
    return out
