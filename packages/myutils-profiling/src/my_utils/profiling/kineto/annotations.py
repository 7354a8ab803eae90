"""GPU time per user annotation: the GPU activities launched inside each ``record_function`` range.

A GPU activity belongs to an annotation when the runtime call that launched it (joined on
the correlation id) started inside a range of that name on the same CPU thread (``cuda_sync``
events are not launched work and do not count). Nested or
repeated ranges of one name count each activity once; an activity under ``forward`` and
``forward/linear`` counts for both names. ``cpu_us`` is the time the ranges cover.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from my_utils.core.lazy import lazy_module
from my_utils.profiling.kineto import intervals
from my_utils.profiling.kineto.rank_data import RankData
from my_utils.profiling.kineto.rows import Row

if TYPE_CHECKING:
    import numpy as np
else:  # numpy only when a function runs: the parent process of a run merges rows and never needs it
    np = lazy_module("numpy", __name__, "np")


@dataclass(frozen=True)
class AnnotationRow(Row):
    """One annotation name on one rank (``rank`` None: all ranks)."""

    rank: int | None
    name: str
    ranges: int
    cpu_us: float
    kernels: int
    gpu_us: float


def annotation_gpu_time(d: RankData) -> list[AnnotationRow]:
    """One row per annotation name, largest GPU time first."""
    if not len(d.ann_ts):
        return []
    # per thread: launch start times sorted, with prefix sums of the GPU time they launched
    gi = np.flatnonzero((d.gpu_rt >= 0) & ~d.gpu_sync)  # a sync is waited on, not launched
    ri = d.gpu_rt[gi]
    per_thread: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    thread_of = d.rt_thread[ri]
    for t in np.unique(thread_of).tolist():
        sel = thread_of == t
        ts = d.rt_ts[ri[sel]]
        order = np.argsort(ts, kind="stable")
        dur = d.gpu_dur[gi[sel]][order]
        per_thread[t] = (ts[order], np.concatenate(([0.0], np.cumsum(dur))))
    key = d.ann_name.astype(np.int64) * (int(d.ann_thread.max()) + 1) + d.ann_thread
    order = np.argsort(key, kind="stable")
    bounds = np.concatenate(([0], np.flatnonzero(np.diff(key[order])) + 1, [len(key)]))
    acc: dict[int, list[float]] = {}
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        idx = order[a:b]
        name, thread = int(d.ann_name[idx[0]]), int(d.ann_thread[idx[0]])
        s, e = intervals.union(d.ann_ts[idx], d.ann_end[idx])
        row = acc.setdefault(name, [0, 0.0, 0, 0.0])
        row[0] += b - a
        row[1] += float((e - s).sum())
        launched = per_thread.get(thread)
        if launched is not None:
            ts, cum = launched
            lo = np.searchsorted(ts, s, side="left")
            hi = np.searchsorted(ts, e, side="left")  # ranges are half-open [start, end)
            row[2] += int((hi - lo).sum())
            row[3] += float((cum[hi] - cum[lo]).sum())
    out = [AnnotationRow(d.rank, d.names[n], int(r[0]), r[1], int(r[2]), r[3]) for n, r in acc.items()]
    out.sort(key=lambda r: (-r.gpu_us, r.name))
    return out


def merge_annotations(rows: Iterable[AnnotationRow]) -> list[AnnotationRow]:
    """All-ranks rows (``rank`` None): every figure summed over ranks."""
    acc: dict[str, list[float]] = {}
    for r in rows:
        a = acc.setdefault(r.name, [0, 0.0, 0, 0.0])
        a[0] += r.ranges
        a[1] += r.cpu_us
        a[2] += r.kernels
        a[3] += r.gpu_us
    out = [AnnotationRow(None, n, int(a[0]), a[1], int(a[2]), a[3]) for n, a in acc.items()]
    out.sort(key=lambda r: (-r.gpu_us, r.name))
    return out
