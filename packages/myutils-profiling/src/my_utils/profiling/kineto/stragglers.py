"""Straggler kernels across ranks: for each heavy kernel, how its time spreads over the ranks, and which rank is slow.

Holistic Trace Analysis draws, per kernel of its breakdown, the mean time on each rank with
the min and max as error bars (``get_gpu_kernel_breakdown``, its per-kernel bar charts); this
table holds those numbers. For the :data:`TOP` kernels by time summed over ranks, and only
when at least two ranks ran them: the total time per rank (min with its rank, median, max with
its rank), the mean time per call on the fastest and slowest rank, and ``spread`` = max / median
of the totals. ``straggler`` marks a kernel whose slowest rank spends at least
:data:`STRAGGLER_RATIO` times the median: the rank the others wait for at the next collective.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from my_utils.profiling.kineto.rank_data import RankData
from my_utils.profiling.kineto.rows import Row, Tables

TOP = 15
STRAGGLER_RATIO = 1.2


@dataclass(frozen=True)
class StragglerRow(Row):
    """One kernel across ranks: its total time's distribution and the ranks at both ends."""

    kind: str
    name: str
    ranks: int
    min_us: float
    min_rank: int | None
    median_us: float
    max_us: float
    max_rank: int | None
    spread: float
    mean_call_min_us: float
    mean_call_max_us: float
    straggler: bool


def no_rows(d: RankData) -> Tables:
    """Nothing per rank: this analysis reads the kernel statistics every rank already has."""
    return {}


def across_ranks(results: Sequence[Any], top: int = TOP) -> Tables:
    """``kernel_stragglers`` rows (module docstring); none with fewer than two ranks."""
    import statistics  # here, in the parent: a worker loads this module for nothing per rank

    per: dict[tuple[str, str], dict[int | None, Any]] = {}
    for r in results:
        for s in r.kernel_stats:
            per.setdefault((s.kind, s.name), {})[r.rank] = s
    if len({r.rank for r in results}) < 2:
        return {}
    heavy = sorted(per, key=lambda k: -sum(s.total_us for s in per[k].values()))
    rows = []
    for kind, name in heavy:
        by_rank = per[(kind, name)]
        if len(by_rank) < 2:
            continue
        lo = min(by_rank, key=lambda r: by_rank[r].total_us)
        hi = max(by_rank, key=lambda r: by_rank[r].total_us)
        med = statistics.median(s.total_us for s in by_rank.values())
        spread = by_rank[hi].total_us / med if med > 0 else 1.0
        rows.append(StragglerRow(kind, name, len(by_rank), by_rank[lo].total_us, lo, med, by_rank[hi].total_us, hi,
                                 spread, by_rank[lo].mean_us, by_rank[hi].mean_us, spread >= STRAGGLER_RATIO))
        if len(rows) == top:
            break
    return {"kernel_stragglers": rows}
