"""Iterations from NVTX ranges: per-iteration time, GPU busy/idle and overlap, and step outliers.

The per-iteration table is the built-in query ``iterations`` (SQL: one sweep over NVTX
ranges and CUDA calls sorted by time, then a join on correlation ids); this module picks
the range, and computes the statistics per process over that table, which holds one row
per iteration and device (small).

Without a range name the usual step ranges are tried, in order (:data:`DEFAULT_RANGES`):
MyTimer's and the profiling session's ``train_step``, torch.profiler's ``ProfilerStep#N``,
then ``step``, ``iteration``, ``iter``. A pattern needs at least two occurrences in one
process to count as iterations.

Outliers: an iteration whose time lies more than :data:`OUTLIER_Z` robust z-scores
(``0.6745 (x - median) / MAD``, Iglewicz and Hoaglin) from its process's median, on either
side: a stall is slow, a skipped or cut-off step is fast (the sign of ``robust_z`` says
which); its position (``first``/``last``/``middle``) tells warm-up or a cut-off last step
from one in the middle.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any

from my_utils.profiling.nsys.model import IterationOutlier, Iterations, IterationStats, Table
from my_utils.profiling.nsys.queries import run_builtin
from my_utils.profiling.nsys.schema import NsysExport

DEFAULT_RANGES: tuple[str, ...] = ("train_step", "ProfilerStep#*", "step", "iteration", "iter")
OUTLIER_Z = 3.5
MIN_ITERATIONS = 2


def find_iterations(db: NsysExport, pattern: str | None = None) -> Iterations | None:
    """The iterations of ``pattern`` (or of the first default range present); None when none is found."""
    db.ensure_views()
    if pattern is not None:
        return _iterations(db, pattern, "given") if _occurrences(db, pattern) >= 1 else None
    for candidate in DEFAULT_RANGES:
        if _occurrences(db, candidate) >= MIN_ITERATIONS:
            return _iterations(db, candidate, "default")
    return None


def _occurrences(db: NsysExport, pattern: str) -> int:
    rows = db.query("SELECT MAX(n) FROM (SELECT COUNT(*) AS n FROM nsys_nvtx WHERE name GLOB ? GROUP BY pid)",
                    (pattern,), place="NVTX ranges")
    return int(rows[0][0] or 0)


def _iterations(db: NsysExport, pattern: str, chosen: str) -> Iterations:
    result = run_builtin(db, "iterations", {"range": pattern})
    table = Table("nsys_iterations", ("rank", *result.columns), tuple((db.rank, *r) for r in result.rows))
    names = tuple(r[0] for r in db.query(
        "SELECT DISTINCT name FROM nsys_nvtx WHERE name GLOB ? ORDER BY name LIMIT 5", (pattern,),
        place="NVTX ranges"))
    return Iterations(pattern, chosen, table, iteration_stats(table), names)


def iteration_stats(table: Table) -> tuple[IterationStats, ...]:
    """Statistics per process over a per-iteration table (rows per iteration and device)."""
    per: dict[Any, dict[int, dict[str, Any]]] = defaultdict(dict)
    for r in table.records():
        it = per[r["pid"]].setdefault(r["iteration"], {"cpu": r["cpu_ns"], "start": r["start"], "end": r["end"],
                                                         "busy": 0, "window": 0, "overlap": 0, "comm": 0})
        it["busy"] += r["busy_ns"] or 0
        it["window"] += r["gpu_window_ns"] or 0
        it["overlap"] += r["overlap_ns"] or 0
        it["comm"] += r["communication_ns"] or 0
    out = []
    for pid, its in per.items():
        order = sorted(its)
        times = [its[i]["cpu"] for i in order]
        out.append(IterationStats(
            pid=pid, count=len(order), median_ns=float(statistics.median(times)), p90_ns=_quantile(times, 0.9),
            max_ns=max(times), min_ns=min(times), first_start=its[order[0]]["start"], last_end=its[order[-1]]["end"],
            gpu_busy_ns=sum(its[i]["busy"] for i in order), gpu_window_ns=sum(its[i]["window"] for i in order),
            overlap_ns=sum(its[i]["overlap"] for i in order), communication_ns=sum(its[i]["comm"] for i in order),
            outliers=_outliers(pid, order, times)))
    return tuple(sorted(out, key=lambda s: (s.pid is None, s.pid or 0)))


def _quantile(values: list[int], q: float) -> float:
    s = sorted(values)
    pos = (len(s) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return float(s[lo] + (s[hi] - s[lo]) * (pos - lo))


def _outliers(pid: Any, order: list[int], times: list[int]) -> tuple[IterationOutlier, ...]:
    if len(times) < 3:
        return ()
    med = statistics.median(times)
    mad = statistics.median(abs(t - med) for t in times)
    if mad == 0:
        return ()
    out = []
    for idx, t in zip(order, times, strict=True):
        z = 0.6745 * (t - med) / mad
        if abs(z) > OUTLIER_Z:
            pos = "first" if idx == order[0] else "last" if idx == order[-1] else "middle"
            out.append(IterationOutlier(pid, idx, t, round(z, 2), pos))
    return tuple(out)
