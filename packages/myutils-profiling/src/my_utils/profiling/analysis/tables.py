"""The report's own tables, built from the per-step series and the aggregated cells.

``operations`` (one row per name and source, every share naming its denominator), ``steps``
and ``memory`` (bounded per series: a longer series keeps the lowest and highest step of
each bucket of consecutive steps), ``ranks`` (one row per rank and source, never pooled) and
``totals`` (events without a step). ``model.report`` documents the columns.
"""

from __future__ import annotations

import operator
import statistics
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from itertools import compress, repeat
from typing import TYPE_CHECKING, Any

from my_utils.profiling.analysis.rules._series import STEP_TIME, SeriesSource, is_gpu_family, is_memory
from my_utils.profiling.analysis.rules._stats import quantile, std_cv

if TYPE_CHECKING:
    from my_utils.profiling.analysis.aggregate import EventAggregate

#: Rows kept in the ``operations`` table (largest totals first); the rest are counted in the summary.
MAX_OPERATION_ROWS = 1000
#: Rows kept per series (one source, rank and name) in the ``steps`` and ``memory`` tables. A
#: longer series is cut into ``MAX_SERIES_ROWS // 2`` buckets of consecutive steps, each keeping
#: its lowest and its highest step, so a spike survives and a 1M-event run still makes a
#: report of a few MB; the rules and the ``ranks``/``operations`` tables still see every step.
MAX_SERIES_ROWS = 1000

#: A cell: one measured value as a bare float (most cells of a big run: a quarter of the
#: memory of a list), else ``[count, sum, min, max]`` (count 0: only NaN values were seen).
Cell = float | list[Any]


def cell_stats(cell: Cell) -> tuple[int, float, float, float]:
    if type(cell) is list:
        return cell[0], cell[1], cell[2], cell[3]
    return 1, cell, cell, cell  # type: ignore[return-value]  # a bare float: one value



def build_tables(series: Mapping[Any, Any], agg: EventAggregate,
            primary: str | None = None, events: SeriesSource | None = None) -> dict[str, list[dict[str, Any]]]:
    """The report's tables (module docstring) of ``series``; ``events``: the events they were built from, whose
    shared summaries give each series' values already sorted (the ``operations`` rows then merge sorted runs
    instead of sorting every value again: the same sorted list, since the sort is stable)."""
    step_total: dict[tuple[int | None, str], float] = {}
    device_total: dict[int | None, float] = {}
    for (name, rank, source), s in series.items():
        if name == STEP_TIME:
            step_total[(rank, source)] = s.total if events is None else events.total(s)
        elif is_gpu_family(name) and s.kind == "duration":
            device_total[rank] = device_total.get(rank, 0.0) + (s.total if events is None else events.total(s))
    # one operations row per (name, source), all ranks together
    ops: dict[tuple[str, str], dict[str, Any]] = {}
    for (name, rank, source), s in series.items():
        if s.kind != "duration":
            continue
        row = ops.setdefault((name, source), {"name": name, "source": source, "unit": s.unit, "count": 0,
                                              "occurrences": 0, "values": [], "ranks": set(), "denominator": 0.0,
                                              "depth": s.depth})
        row["count"] += s.events
        row["occurrences"] += s.occurrences or s.events
        row["values"].extend(s.values if events is None else events.summary(s, 0).ordered)
        row["ranks"].add(rank)
        row["denominator"] += device_total.get(rank, 0.0) if is_gpu_family(name) else step_total.get((rank, source), 0.0)
    op_rows: list[dict[str, Any]] = []
    for row in ops.values():
        values = sorted(row.pop("values"))
        total = float(sum(values))
        denom = row.pop("denominator")
        row["ranks"] = sorted(r for r in row["ranks"] if r is not None)
        std, spread = std_cv(values)  # pstdev and cv share the mean: one pass less per row
        has_share = denom > 0 and row["name"] != STEP_TIME
        row.update(steps=len(values), total=total, mean=total / len(values), std=std,
                   min=values[0], max=values[-1], median=quantile(values, 0.5), p90=quantile(values, 0.9),
                   cv=spread, share=(total / denom) if has_share else None,
                   share_of=(_share_of(row["name"], row["source"]) if has_share else None),
                   share_denominator=denom if has_share else None)
        op_rows.append(row)
    op_rows.sort(key=lambda r: -r["total"])
    limits: dict[str, Any] = {}
    steps = [{"step": s.steps[i], "rank": rank, "source": source, "step_time": s.values[i],
              "regions": None} for (name, rank, source), s in series.items() if name == STEP_TIME
             for i in _kept(s.values, "steps", limits)]
    # the summed depth-0 regions of each kept row only (a few thousand rows, not every step of
    # every region), added in series order as a sum over all steps would add them
    depth0: dict[tuple[int | None, str], list[Any]] = {}
    for (name, rank, source), s in series.items():
        if s.depth == 0 and s.kind == "duration" and name != STEP_TIME:
            depth0.setdefault((rank, source), []).append(s)
    for row in steps:
        step, regions = row["step"], None
        for s in depth0.get((row["rank"], row["source"]), ()):
            i = bisect_left(s.steps, step)
            if i < len(s.steps) and s.steps[i] == step:
                regions = (0.0 if regions is None else regions) + s.values[i]
        row["regions"] = regions
    steps.sort(key=lambda r: (r["source"], -1 if r["rank"] is None else r["rank"], r["step"]))
    memory = [{"name": name, "step": s.steps[i], "rank": rank, "source": source, "value": s.values[i],
               "unit": s.unit}
              for (name, rank, source), s in series.items() if is_memory(s)
              for i in _kept(s.values, "memory", limits)]
    memory.sort(key=lambda r: (r["name"], -1 if r["rank"] is None else r["rank"], r["step"]))
    # one row per (rank, source): MyTimer's 30 steps and torch.profiler's 2 are never pooled
    rank_rows = [{"rank": rank, "source": source, "steps": len(s.values), "mean_step_time": statistics.fmean(s.values),
                  "median_step_time": statistics.median(s.values), "total_time": float(sum(s.values)),
                  "primary": source == primary}
                 for (name, rank, source), s in sorted(series.items(), key=lambda kv: (
                     kv[0][2] != primary, kv[0][2], -1 if kv[0][1] is None else kv[0][1]))
                 if name == STEP_TIME and s.values]
    # the cells without a step, picked at C speed (a Python loop over every key of a 1M-cell run cost more)
    stepless = compress(agg.cells.items(), map(operator.is_, map(operator.itemgetter(1), agg.cells), repeat(None)))
    no_step: list[dict[str, Any]] = [{"name": name, "rank": rank, "source": source, "count": c[0], "total": c[1], "min": c[2], "max": c[3],
                "unit": agg.meta[(name, source)][1]}
               for (name, _step, rank, source), cell in stepless
               for c in (cell_stats(cell),) if c[0]]
    no_step.sort(key=lambda r: -r["total"])
    tables = {"operations": op_rows[:MAX_OPERATION_ROWS], "steps": steps, "memory": memory, "ranks": rank_rows}
    if no_step:
        tables["totals"] = no_step[:MAX_OPERATION_ROWS]
    for name in ("steps", "memory"):
        entry = limits.setdefault(name, {"series": 0, "series_downsampled": 0, "points": 0})
        entry.update(rows=len(tables[name]), max_rows_per_series=MAX_SERIES_ROWS,
                     method="beyond the cap, the lowest and highest step of each bucket of consecutive steps")
    agg.table_limits = limits
    return tables



def _kept(values: Sequence[float], table: str, limits: dict[str, Any]) -> list[int]:
    """Indices of the points of one series kept in ``table`` (all up to ``MAX_SERIES_ROWS``), counted in ``limits``."""
    n = len(values)
    entry = limits.setdefault(table, {"series": 0, "series_downsampled": 0, "points": 0})
    entry["series"] += 1
    entry["points"] += n
    if n <= MAX_SERIES_ROWS:
        return list(range(n))
    entry["series_downsampled"] += 1
    buckets = MAX_SERIES_ROWS // 2
    kept: list[int] = []
    for b in range(buckets):
        start, stop = b * n // buckets, (b + 1) * n // buckets
        lo = hi = start
        for i in range(start + 1, stop):
            v = values[i]
            if v < values[lo]:
                lo = i
            elif v > values[hi]:
                hi = i
        kept.extend((lo, hi) if lo < hi else (hi, lo) if hi < lo else (lo,))
    return kept



def _share_of(name: str, source: str) -> str:
    """What the ``share`` of an operations row is of, in words (every share names its denominator)."""
    if is_gpu_family(name):
        return "summed GPU activity time of the same ranks (kernels, copies, sets; concurrent ones counted twice)"
    return f"{source} step time of the same ranks"
