"""Idle-time breakdown: why each GPU stream sat idle between two of its activities.

Per stream, activities in start order; the gap before an activity runs from the latest end
seen so far on that stream to its start (overlapping activities leave no gap). A gap is
*host wait* when the runtime call that launched the activity started after the stream
went idle (the CPU was late), *kernel wait* when it is shorter than ``kernel_wait_us``
(the launch overhead between back-to-back kernels), and *other* otherwise (syncs,
dependencies on other streams). These are Holistic Trace Analysis' categories; its
default threshold (30 on its µs timestamps) is ours.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from my_utils.profiling.analysis.kineto.rank_data import RankData
from my_utils.profiling.analysis.kineto.rows import Row, pct

CATEGORIES = ("host_wait", "kernel_wait", "other")
KERNEL_WAIT_US = 30.0


@dataclass(frozen=True)
class IdleRow(Row):
    """Idle time of one stream of one rank in one category (µs, and % of the stream's idle time)."""

    rank: int | None
    device: int | str | None
    stream: int | str | None
    category: str
    idle_us: float
    gaps: int
    share_pct: float


def idle_breakdown(d: RankData, lanes: list[tuple[Any, Any]],
                   kernel_wait_us: float = KERNEL_WAIT_US) -> list[IdleRow]:
    """Rows per (stream, category); ``lanes[i]`` is the (device pid, stream) of lane ``i``."""
    if len(d.gpu_ts) < 2:
        return []
    # group by lane, keeping start order inside each (gpu arrays are sorted by start)
    order = np.argsort(d.gpu_stream, kind="stable")
    lane = d.gpu_stream[order]
    ts, end, rt = d.gpu_ts[order], d.gpu_end[order], d.gpu_rt[order]
    first = np.concatenate(([True], lane[1:] != lane[:-1]))
    # latest end so far within the lane: a running max that restarts at each lane
    reach = end.copy()
    starts = np.flatnonzero(first)
    bounds = np.concatenate((starts, [len(lane)]))
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        np.maximum.accumulate(reach[a:b], out=reach[a:b])
    prev = np.empty_like(reach)
    prev[1:] = reach[:-1]
    prev[0] = np.nan
    gap = np.where(first, 0.0, np.maximum(ts - prev, 0.0))
    has = ~first & (gap > 0)
    rt_ts = np.where(rt >= 0, d.rt_ts[np.clip(rt, 0, None)] if len(d.rt_ts) else 0.0, -np.inf)
    host = has & (rt_ts > prev)
    kernel = has & ~host & (gap < kernel_wait_us)
    other = has & ~host & ~kernel
    rows = []
    for lane_id in np.unique(lane).tolist():
        in_lane = lane == lane_id
        total = float(gap[in_lane & has].sum())
        for name, sel in zip(CATEGORIES, (host, kernel, other), strict=True):
            m = in_lane & sel
            idle = float(gap[m].sum())
            rows.append(IdleRow(d.rank, *_scalars(lanes[lane_id]), name, idle, int(m.sum()), pct(idle, total)))
    return rows


def _scalars(lane: tuple[Any, Any]) -> tuple[int | str | None, int | str | None]:
    return tuple(v if v is None or isinstance(v, (int, str)) else str(v) for v in lane)  # type: ignore[return-value]


def merge_idle(rows: Iterable[IdleRow]) -> list[IdleRow]:
    """All ranks and streams together (``rank``, ``device`` and ``stream`` None), one row per category."""
    acc = {c: [0.0, 0] for c in CATEGORIES}
    for r in rows:
        acc[r.category][0] += r.idle_us
        acc[r.category][1] += r.gaps
    total = sum(a[0] for a in acc.values())
    return [IdleRow(None, None, None, c, a[0], int(a[1]), pct(a[0], total)) for c, a in acc.items()]
