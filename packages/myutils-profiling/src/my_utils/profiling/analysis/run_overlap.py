"""Inputs that hold more than one run over the same steps: a capture check, not a statistic.

A MyTimer profile CSV and a collector's ``metrics_events.jsonl`` are appended to, never
replaced (a resumed job keeps its history), so an output folder used twice holds two runs
whose step numbers overlap. Folded together, each repeated step's time is the sum or mean of
two runs, and every per-step statistic (variability, outlying steps, the median step) mixes
them. Nothing in the numbers alone tells which run is meant, so the check names the run ids,
the ranks and the repeated steps, and says how to analyse one run; it does not guess.

The evidence is the ``step_time`` cells of the folded events: one ``step_time`` per step,
rank and source is what every step source writes, so a cell holding more than one event
while the inputs carry more than one run id is a step recorded by two runs.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Protocol

from my_utils.profiling.analysis.rules._series import step_ranges

__all__ = ["repeated_step_rows"]

STEP_NAME = "step_time"


class _Folded(Protocol):
    cells: dict[tuple[str, int | None, int | None, str], Any]
    run_ids: set[str]


def repeated_step_rows(agg: _Folded) -> list[dict[str, Any]]:
    """Capture-health rows (``assembly.capture_findings``) for ranks whose steps were recorded more than once
    by different runs; empty when the inputs hold one run or no step is repeated."""
    if len(agg.run_ids) < 2:
        return []
    repeated: dict[int | None, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for (name, step, rank, source), cell in agg.cells.items():
        # a folded cell is a plain value for one event and [count, sum, min, max] for several
        if name == STEP_NAME and step is not None and isinstance(cell, list) and cell[0] > 1:
            repeated[rank][source].append(step)
    runs = sorted(agg.run_ids)
    named = ", ".join(runs[:3]) + (f" and {len(runs) - 3} more" if len(runs) > 3 else "")
    rows = []
    for rank in sorted(repeated, key=lambda r: (r is None, r or 0)):
        by_source = repeated[rank]
        source, steps = max(by_source.items(), key=lambda kv: len(kv[1]))
        steps.sort()
        rows.append({
            "check": "one run per step", "rank": rank, "status": "warning", "value": len(steps),
            "detail": (f"the inputs hold {len(runs)} runs ({named}) and {len(steps)} {source} step(s) "
                       f"({step_ranges(steps)}) were recorded by more than one of them: their times are folded "
                       "together, so the per-step statistics of this report mix the runs. Analyse one run: "
                       "give each run its own output folder (the profile CSV and metrics_events.jsonl are "
                       "appended to, never replaced), or move the older files away"),
        })
    return rows
