"""Temporal breakdown: how the GPU's time splits into idle, computation and everything else.

Per rank, over the span from the first GPU activity's start to the last one's end (every
stream and device of the rank together): *compute* is the time covered by at least one
computation kernel, *non-compute* the time covered by other GPU activities only
(communication, memory copies and sets), *idle* the time covered by none. The three add up
to the span, as in Holistic Trace Analysis' ``get_temporal_breakdown``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from my_utils.profiling.kineto import intervals
from my_utils.profiling.kineto.kinds import KINDS, KernelKind
from my_utils.profiling.kineto.rank_data import RankData
from my_utils.profiling.kineto.rows import Row, pct


@dataclass(frozen=True)
class TemporalRow(Row):
    """One rank's GPU span split into idle / compute / non-compute (µs and % of the span)."""

    rank: int | None
    span_us: float
    idle_us: float
    compute_us: float
    non_compute_us: float
    idle_pct: float
    compute_pct: float
    non_compute_pct: float


def temporal_breakdown(d: RankData) -> TemporalRow | None:
    """The temporal breakdown of one rank; None when it has no GPU activity."""
    if not len(d.gpu_ts):
        return None
    span = float(d.gpu_end.max() - d.gpu_ts.min())
    busy = intervals.length(d.gpu_ts, d.gpu_end)
    comp = d.gpu_kind == KINDS.index(KernelKind.COMPUTATION)
    compute = intervals.length(d.gpu_ts[comp], d.gpu_end[comp])
    idle = span - busy
    non_compute = busy - compute
    return TemporalRow(d.rank, span, idle, compute, non_compute,
                       pct(idle, span), pct(compute, span), pct(non_compute, span))


def merge_temporal(rows: Sequence[TemporalRow]) -> TemporalRow:
    """All ranks together (``rank`` None): the µs summed over ranks, the shares of the summed span."""
    span = sum(r.span_us for r in rows)
    idle = sum(r.idle_us for r in rows)
    compute = sum(r.compute_us for r in rows)
    non_compute = sum(r.non_compute_us for r in rows)
    return TemporalRow(None, span, idle, compute, non_compute, pct(idle, span), pct(compute, span),
                       pct(non_compute, span))
