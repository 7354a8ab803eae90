"""What the built-in rules attach to a finding: the facts it rests on, its impact, its evidence rows.

Every built-in finding names the series it read as fact ids (``series:<source>:<name>:rank<r>``,
one fact feeding one finding: the analyzer keeps the finding with the largest impact when two
share a fact), estimates the time a fix could save per step (:func:`impact`, weighted by how many
steps the claim rests on) and points at the rows a reader can check (:func:`series_row`).
Plain dicts: rules return JSON-ready findings (the plugin contract).
"""

from __future__ import annotations

import math
import operator
import statistics
from collections.abc import Mapping, Sequence
from itertools import islice
from typing import Any

from my_utils.profiling.analysis.rules._series import STEP_TIME, Series, SeriesKey

#: Two series whose per-step values differ by less than this (relative) are the same measurement.
SAME = 1e-9


def series_fact(s: Series) -> str:
    """The fact id of one series: ``series:<source>:<name>:rank<r>`` (``norank`` without a rank)."""
    rank = f"rank{s.rank}" if s.rank is not None else "norank"
    return f"series:{s.source}:{s.name}:{rank}"


def step_series(series: Mapping[SeriesKey, Series], s: Series) -> Series | None:
    """The ``step_time`` series of the same rank and source as ``s`` (None when there is none)."""
    return series.get((STEP_TIME, s.rank, s.source))


def same_as_step(series: Mapping[SeriesKey, Series], s: Series) -> bool:
    """Whether ``s`` measures the step itself (MyTimer's ``iter`` wrapper is ``step_time`` again)."""
    if s.name == STEP_TIME:
        return False
    step = step_series(series, s)
    if step is None or step.steps != s.steps or not s.values:
        return False
    return all(abs(a - b) <= SAME * max(abs(a), abs(b), 1e-300) for a, b in zip(s.values, step.values, strict=True))


def per_step_shares(s: Series, step: Series) -> list[float]:
    """``s``'s value over the step time at each step both have (steps with a zero step time are left out)."""
    steps = step.steps
    if s.steps == steps and len(step.values) == len(steps) and all(map(operator.lt, steps, islice(steps, 1, None))):
        # the usual case (a region timed on every step): the same steps, each once, so the step
        # time of each value is the one beside it; no dict of the steps (~30 % of the bottleneck rule)
        return [v / d for v, d in zip(s.values, step.values, strict=True) if d > 0 and math.isfinite(v)]
    by_step = dict(zip(steps, step.values, strict=True))
    return [v / by_step[st] for st, v in zip(s.steps, s.values, strict=True)
            if by_step.get(st, 0.0) > 0 and math.isfinite(v)]


def weight(steps: int | None) -> float:
    """``steps / (steps + 3)``: the evidence weight of ``model.report.evidence_weight``."""
    if steps is None:
        return 1.0
    return steps / (steps + 3.0) if steps > 0 else 0.0


def impact(ms_per_step: float | None, step_ms: float | None, basis: str, steps: int | None,
           step_source: str, upper_bound: bool = False) -> dict[str, Any]:
    """The ``impact`` object of a finding (``model.report.Impact``) from a saving per step."""
    share = ms_per_step / step_ms if ms_per_step is not None and step_ms else None
    return {"ms_per_step": ms_per_step, "share_of_step": share, "basis": basis, "steps": steps,
            "weight": round(weight(steps), 4), "step_source": step_source, "upper_bound": upper_bound}


def not_attributable(finding: dict[str, Any], reason: str) -> None:
    """State no saving for ``finding``: its evidence cannot tell the program from the host (or from its
    own parts), so a fix of the program may save nothing.

    The time the rule measured stays in ``evidence["excess_ms_per_step"]`` (the detail says it); the
    impact names no saving and ``reason`` as its basis, so that the one severity rule
    (``analysis.severity``: severity follows the stated saving) makes it information, as the rule judged.
    """
    old = finding.get("impact") or {}
    if old.get("ms_per_step") is not None:
        finding["evidence"]["excess_ms_per_step"] = old["ms_per_step"]
    finding["impact"] = impact(None, None, reason, old.get("steps"), str(old.get("step_source", "")))
    finding["severity"] = "info"


def median_step(series: Mapping[SeriesKey, Series], rank: int | None, source: str) -> float | None:
    """The median step time of (rank, source), None when there is no step time."""
    step = series.get((STEP_TIME, rank, source))
    return statistics.median(step.values) if step is not None and step.values else None


def series_row(s: Series, values: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """An evidence row pointing at the ``operations`` table row of ``s`` (name and source), with numbers."""
    return {"table": "operations", "key": {"name": s.name, "source": s.source},
            "values": dict(values or {}) | {"rank": s.rank}}


def steps_row(s: Series, steps: Sequence[int], values: Mapping[str, Any]) -> dict[str, Any]:
    """An evidence row pointing at the per-step series of ``s`` at ``steps``."""
    return {"table": "series", "key": {"name": s.name, "source": s.source, "rank": s.rank, "steps": list(steps)},
            "values": dict(values)}


def advice(text: str, because: Sequence[Mapping[str, Any]], kind: str, facts: Sequence[str] = ()) -> dict[str, Any]:
    """One ``advice`` entry (``model.report.Advice``)."""
    return {"text": text, "because": [dict(b) for b in because], "facts": list(facts), "kind": kind}
