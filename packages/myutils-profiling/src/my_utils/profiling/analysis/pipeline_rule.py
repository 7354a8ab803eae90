"""The pipeline-bubble fact and finding, from the ``kineto_pipeline_bubble`` table (``kineto.pipeline``) or, for
Nsight Systems exports, ``nsys_pipeline_bubble`` (``nsys.pipeline``).

Fact ``pipeline.bubble_excess:rank<r>`` (and the run's, the worst rank): the bubble beyond the schedule's
expected one, as a share of the step (median over the steps analysed), with the measured and expected
bubbles in its detail; ``NotMeasured`` when microbatch ranges were found but the stage count is unknown.
Finding ``pipeline:bubble``: the stages whose excess is flagged, the worst named first, its impact the
excess per step (an upper bound: a faster stage may still wait for the slowest).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from my_utils.profiling.analysis.rules._evidence import impact
from my_utils.profiling.model.report import EvidenceRow, Fact, NotMeasured

Rows = Sequence[Mapping[str, Any]]
TABLE = "kineto_pipeline_bubble"
NSYS_TABLE = "nsys_pipeline_bubble"
#: Advice for an excess bubble (one place to review).
ADVICE = ("the stages idle longer between microbatches than the schedule needs: balance the layers over the "
          "stages (the busiest stage sets the pace), raise the number of microbatches per step (the bubble is "
          "(p-1)/(m+p-1) of the step), or interleave model chunks per stage (virtual pipeline stages); a stage that "
          "waits while the others do not points at a slow send or receive between stages")


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v else None


def _table(tables: Mapping[str, Rows]) -> tuple[str, list[Mapping[str, Any]], str]:
    """(table name, rows, source): the Kineto table, else the Nsight Systems one."""
    for name, source in ((TABLE, "kineto"), (NSYS_TABLE, "nsys")):
        if tables.get(name):
            return name, list(tables[name]), source
    return TABLE, [], "kineto"


def pipeline_facts(tables: Mapping[str, Rows]) -> list[Fact]:
    """``pipeline.bubble_excess`` per rank and for the run (module docstring); none without microbatch ranges."""
    table, rows, source = _table(tables)
    if not rows:
        return []
    by_rank: dict[Any, list[Mapping[str, Any]]] = {}
    for r in rows:
        by_rank.setdefault(r.get("rank"), []).append(r)
    facts: list[Fact] = []
    best: Fact | None = None
    for rank, own in sorted(by_rank.items(), key=lambda x: (x[0] is None, x[0] or 0)):
        tag = f":rank{rank}" if rank is not None else ":norank"
        ev = tuple(EvidenceRow(table, {"rank": r.get("rank"), "step": r.get("step")},
                               {"bubble_pct": r.get("bubble_pct"), "expected_pct": r.get("expected_pct"),
                                "excess_us": r.get("excess_us"), "window_us": r.get("window_us")}) for r in own)
        judged = [r for r in own if _num(r.get("excess_step_pct")) is not None]
        if not judged:
            facts.append(Fact(f"pipeline.bubble_excess{tag}", "pipeline bubble beyond the schedule's",
                              NotMeasured(str(own[0].get("note") or "no expected bubble")), "%", source,
                              ranks=(rank,), evidence=ev))
            continue
        excess = statistics.median(float(r["excess_step_pct"]) for r in judged)
        step_ms = statistics.median(float(r["step_us"]) for r in judged) / 1e3
        bubble = statistics.median(float(r["bubble_pct"]) for r in judged)
        expected = statistics.median(float(r["expected_pct"]) for r in judged)
        first = judged[0]
        fact = Fact(f"pipeline.bubble_excess{tag}", "pipeline bubble beyond the schedule's", excess, "%", source,
                    "the step", step_ms, "ms", (rank,), "median over steps", len(judged), ev,
                    detail=(f"bubble {bubble:.1f}% of the pipeline window against {expected:.1f}% expected "
                            f"({first.get('schedule')}, p={first.get('stages')}, m={first.get('microbatches')}"
                            f"{', v=' + str(first.get('chunks')) if (first.get('chunks') or 1) > 1 else ''}; "
                            f"{first.get('framework')})"))
        facts.append(fact)
        if best is None or (fact.number or 0.0) > (best.number or 0.0):
            best = fact
    if best is not None:
        facts.append(Fact("pipeline.bubble_excess", best.label, best.value, "%", source, best.denominator,
                          best.denominator_value, "ms", best.ranks, "the stage with the largest excess",
                          best.steps, best.evidence, best.detail))
    return facts


def pipeline_findings(facts: Mapping[str, Fact], tables: Mapping[str, Rows]) -> list[dict[str, Any]]:
    """``pipeline:bubble`` when a stage's excess bubble is flagged (module docstring)."""
    table, every, source = _table(tables)
    rows = [r for r in every if r.get("flagged")]
    if not rows:
        return []
    ranks = sorted({r.get("rank") for r in rows}, key=lambda x: (x is None, x or 0))
    per: dict[Any, float] = {}
    found: dict[Any, Fact] = {}
    for rank in ranks:
        got = facts.get(f"pipeline.bubble_excess:rank{rank}" if rank is not None else "pipeline.bubble_excess:norank")
        if got is not None and got.number is not None:
            per[rank], found[rank] = got.number, got
    if not per:
        return []
    worst = max(per, key=lambda x: per[x])
    fact = found[worst]
    own = [r for r in rows if r.get("rank") == worst]
    excess_ms = statistics.median(float(r["excess_us"]) for r in own) / 1e3
    step_ms = fact.denominator_value
    where = f"rank {worst}" if worst is not None else "the run"
    others = [f"rank {x}: {per[x]:.1f}%" for x in ranks if x != worst and x in per]
    return [{
        "id": "pipeline:bubble", "category": "optimization", "severity": "warning",
        "title": f"pipeline stage on {where} idles {per[worst]:.1f}% of the step beyond its schedule's bubble",
        "detail": fact.detail + (f"; also flagged: {', '.join(others)}" if others else ""),
        "evidence": {"names": [], "ranks": ranks, "steps": sorted({r.get("step") for r in own
                                                                   if r.get("step") is not None}),
                     "table": table, "excess_ms": excess_ms},
        "suggestion": ADVICE, "facts": [fact.id],
        "impact": impact(excess_ms, step_ms, f"the bubble beyond (p-1)/(v*m+p-1) of the window on {where} "
                         f"({excess_ms:,.2f} ms per step)", fact.steps, "torch_profiler" if source == "kineto" else "nsys",
                         upper_bound=True),
        "advice": [{"text": ADVICE, "because": [e.to_dict() for e in fact.evidence], "facts": [fact.id],
                    "kind": "pipeline:bubble"}],
    }]
