"""Per-kernel rows across ranks: each heavy kernel's count and time on every rank, side by side.

Holistic Trace Analysis' ``get_gpu_kernel_breakdown`` returns, besides the kinds, one row per
(kernel type, kernel name, rank) with the sum, max, min, std and mean of its durations, for the kernels
that make up most of the time; ``kineto_kernel_stragglers`` summarises the spread of each kernel over
ranks in one row, this table keeps every rank's own figures so that a notebook can plot or join them.

``kineto_kernel_ranks`` (across ranks, two ranks or more): for the :data:`TOP` kernels by time summed over
ranks, one row per rank that ran them: count, total, mean, min, max and standard deviation (µs), the
kernel's share of that rank's GPU time, and its total over the median rank's (``vs_median``).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from my_utils.profiling.kineto.rows import Row, Tables, pct

TOP = 15


@dataclass(frozen=True)
class KernelRankRow(Row):
    """One kernel on one rank, beside the same kernel on the other ranks."""

    kind: str
    name: str
    rank: int | None
    count: int
    total_us: float
    mean_us: float
    min_us: float
    max_us: float
    std_us: float
    share_pct: float
    vs_median: float


def across_ranks(results: Sequence[Any], top: int = TOP) -> Tables:
    """``kernel_ranks`` rows (module docstring); none with fewer than two ranks."""
    if len({r.rank for r in results}) < 2:
        return {}
    per: dict[tuple[str, str], dict[int | None, Any]] = {}
    grand: dict[int | None, float] = {}
    for r in results:
        for s in r.kernel_stats:
            per.setdefault((s.kind, s.name), {})[r.rank] = s
            grand[r.rank] = grand.get(r.rank, 0.0) + s.total_us
    heavy = sorted(per, key=lambda k: (-sum(s.total_us for s in per[k].values()), k))[:top]
    rows = []
    for kind, name in heavy:
        by_rank = per[(kind, name)]
        med = statistics.median(s.total_us for s in by_rank.values())
        for rank in sorted(by_rank, key=lambda x: (x is None, x or 0)):
            s = by_rank[rank]
            rows.append(KernelRankRow(kind, name, rank, s.count, s.total_us, s.mean_us, s.min_us, s.max_us, s.std_us,
                                      pct(s.total_us, grand.get(rank, 0.0)), s.total_us / med if med > 0 else 1.0))
    return {"kernel_ranks": rows}


def no_rows(d: Any) -> Tables:
    """Nothing per rank: the kernel statistics every rank already has are read across ranks."""
    return {}
