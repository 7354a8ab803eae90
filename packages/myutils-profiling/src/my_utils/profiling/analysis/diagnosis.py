"""The diagnosis: from the rules' findings and the run's facts to a verdict and findings a reader can act on.

ARCHITECTURE.md §9's diagnosis layer, in the order ``diagnosis/CASES.md`` asks for: what the
capture holds (``analysis.contents``), the verdict class (``analysis.verdict``: CPU-only and
setup-dominated captures first), then every finding's impact on one stated denominator, cut to
what its fix can remove (``analysis.savings``), its severity from that impact
(``analysis.severity``), its advice gated by verdict and contents (``analysis.advice_gate``),
numbers written out without e-notation, and the ranking (``analysis.ranking``). A finding that only
restates a verdict the diagnosis contradicts (the Nsight triage on a setup-dominated capture) is
left out and named in ``dropped``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from my_utils.profiling.analysis.advice_gate import gate_findings
from my_utils.profiling.analysis.contents import CaptureContents, capture_contents
from my_utils.profiling.analysis.ranking import rank_findings
from my_utils.profiling.analysis.savings import state_impacts
from my_utils.profiling.analysis.severity import apply_severity
from my_utils.profiling.analysis.verdict import classify
from my_utils.profiling.model.report import Fact, Finding

Rows = Sequence[Mapping[str, object]]

#: A number in e-notation inside a text (``1.345e+04``), as Python's ``g`` format writes it.
_ENOTATION = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?[eE][+-]?\d+)(?![\w.])")
#: Advice kinds of a finding that restates a verdict (it is dropped when the diagnosis reaches another).
_VERDICT_KINDS = ("triage:",)


@dataclass(frozen=True)
class Diagnosis:
    """The verdict class, what the capture holds, the findings (ranked) and those left out with why."""

    bound: str
    contents: CaptureContents
    findings: list[Finding]
    dropped: list[dict[str, str]] = field(default_factory=list)


def plain_number(text: str) -> str:
    """``text`` with every e-notation number written out (``1.345e+04`` → ``13,450``)."""
    def fixed(m: re.Match[str]) -> str:
        value = float(m.group(1))
        if value == 0:
            return "0"
        if abs(value) >= 1:
            return f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.0f}"
        digits = max(0, 2 - int(f"{abs(value):e}".split("e")[1]))
        return f"{value:.{min(digits, 12)}f}".rstrip("0").rstrip(".")
    return _ENOTATION.sub(fixed, text) if text else text


def _plain(f: Finding) -> Finding:
    texts = (f.title, f.detail, f.suggestion)
    fixed = tuple(plain_number(t) for t in texts)
    advice = tuple(a if plain_number(a.text) == a.text else replace(a, text=plain_number(a.text)) for a in f.advice)
    if fixed == texts and advice == f.advice:
        return f
    return replace(f, title=fixed[0], detail=fixed[1], suggestion=fixed[2], advice=advice)


def _restates_another_verdict(f: Finding, bound: str) -> bool:
    kinds = [a.kind for a in f.advice if a.kind.startswith(_VERDICT_KINDS)]
    return bool(kinds) and all(k.split(":", 1)[1] != bound for k in kinds)


def diagnose(findings: Iterable[Finding], facts: Mapping[str, Fact], tables: Mapping[str, Rows],
             names: Iterable[str] = ()) -> Diagnosis:
    """The diagnosis of a run (module docstring); ``names``: every name the run holds, beyond its tables'."""
    contents = capture_contents(tables, facts, names)
    bound = classify(facts)
    kept: list[Finding] = []
    dropped: list[dict[str, str]] = []
    for f in findings:
        if _restates_another_verdict(f, bound):
            dropped.append({"id": f.id, "why": f"it restates a verdict the diagnosis does not reach ({bound})"})
        else:
            kept.append(f)
    kept = state_impacts(kept, facts, bound, contents)
    kept = apply_severity(kept)
    kept = gate_findings(kept, bound, contents)
    kept = [_plain(f) for f in kept]
    return Diagnosis(bound, contents, rank_findings(kept), dropped)



