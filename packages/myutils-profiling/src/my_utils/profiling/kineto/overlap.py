"""Compute–communication overlap: the share of communication time hidden under computation.

Per rank: the time covered by communication kernels (``nccl...Kernel``) that is also
covered by computation kernels, over the time covered by communication kernels, as in
Holistic Trace Analysis' ``get_comm_comp_overlap``. A rank without communication has no ratio.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from my_utils.core.lazy import lazy_module
from my_utils.profiling.kineto import intervals
from my_utils.profiling.kineto.kinds import KINDS, KernelKind
from my_utils.profiling.kineto.rank_data import RankData
from my_utils.profiling.kineto.rows import Row, pct

if TYPE_CHECKING:
    import numpy as np
else:  # numpy only when a function runs: the parent process of a run merges rows and never needs it
    np = lazy_module("numpy", __name__, "np")


@dataclass(frozen=True)
class OverlapRow(Row):
    """Communication time of one rank, and how much of it overlaps computation."""

    rank: int | None
    communication_us: float
    computation_us: float
    overlap_us: float
    overlap_pct: float  # of communication_us; NaN (None in JSON) without communication
    comm_streams: tuple[int | str, ...] = ()  # streams holding communication kernels
    shared_streams: tuple[int | str, ...] = ()  # of those, the ones also holding computation kernels


def comm_comp_overlap(d: RankData) -> OverlapRow:
    """The overlap row of one rank."""
    comm = d.gpu_kind == KINDS.index(KernelKind.COMMUNICATION)
    comp = d.gpu_kind == KINDS.index(KernelKind.COMPUTATION)
    a = intervals.union(d.gpu_ts[comm], d.gpu_end[comm])
    b = intervals.union(d.gpu_ts[comp], d.gpu_end[comp])
    comm_us = float((a[1] - a[0]).sum())
    comp_us = float((b[1] - b[0]).sum())
    both = intervals.overlap_length(a, b)
    comm_lanes = {int(x) for x in np.unique(d.gpu_stream[comm]).tolist()}
    comp_lanes = {int(x) for x in np.unique(d.gpu_stream[comp]).tolist()}
    return OverlapRow(d.rank, comm_us, comp_us, both, pct(both, comm_us),
                      tuple(_stream(d, i) for i in sorted(comm_lanes)),
                      tuple(_stream(d, i) for i in sorted(comm_lanes & comp_lanes)))


def _stream(d: RankData, lane: int) -> int | str:
    stream = d.lanes[lane][1]
    return stream if isinstance(stream, (int, str)) and not isinstance(stream, bool) else str(stream)


def merge_overlap(rows: Sequence[OverlapRow]) -> OverlapRow:
    """All ranks together (``rank`` None): overlapped communication time over all communication time."""
    comm = sum(r.communication_us for r in rows)
    both = sum(r.overlap_us for r in rows)
    return OverlapRow(None, comm, sum(r.computation_us for r in rows), both, pct(both, comm))
