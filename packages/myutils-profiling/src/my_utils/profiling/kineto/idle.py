"""Idle-time breakdown: why the GPU sat idle, per stream and per device, never summed over streams.

Per stream (``kineto_idle``, Holistic Trace Analysis' ``get_idle_time_breakdown``): the
stream's activities in start order; the gap before an activity runs from the latest end
seen so far on that stream to its start (overlapping activities leave no gap). Idle per
stream answers "why did *this* stream wait"; adding it over streams counts the same wall
time once per stream (two streams idle together for 1 ms are 2 ms), so no row here adds
streams up.

Per device (``kineto_idle_device``): the same walk over every activity of the device, all
streams together, so the idle time is the span (first start to last end on the device)
minus the union of its busy intervals: the GPU idle that the temporal breakdown reports,
split by cause.

A gap is *host wait* when the runtime call that launched the activity ending it started
after the idle began (the CPU was late), *kernel wait* when it is shorter than
``kernel_wait_us`` (the launch overhead between back-to-back kernels), and *other*
otherwise (syncs, dependencies on other streams). HTA's categories and its default
threshold (30 on its µs timestamps). ``cuda_sync`` events are GPU time (they fill gaps) but
never end a gap on the per-stream walk, which HTA runs over kernels, copies and sets only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from my_utils.core.lazy import lazy_module
from my_utils.profiling.kineto.rank_data import RankData
from my_utils.profiling.kineto.rows import Row, pct

if TYPE_CHECKING:
    import numpy as np
else:  # numpy only when a function runs: the parent process of a run merges rows and never needs it
    np = lazy_module("numpy", __name__, "np")

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


@dataclass(frozen=True)
class DeviceIdleRow(Row):
    """Idle time of one device of one rank in one category: the span minus the union of busy time, by cause.

    ``share_pct`` is of the device's idle time, ``span_pct`` of its span (``span_us``: first
    start to last end of any activity on the device).
    """

    rank: int | None
    device: int | None
    category: str
    idle_us: float
    gaps: int
    share_pct: float
    span_us: float
    span_pct: float


def _walk(lane: Any, ts: Any, end: Any, rt: Any, rt_ts_all: Any,
          kernel_wait_us: float) -> tuple[Any, Any, Any, Any, Any]:
    """Gaps per lane of activities sorted by (lane, start): (gap, first-of-lane, host, kernel, other) masks."""
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
    rt_ts = np.where(rt >= 0, rt_ts_all[np.clip(rt, 0, None)] if len(rt_ts_all) else 0.0, -np.inf)
    host = has & (rt_ts > prev)
    kernel = has & ~host & (gap < kernel_wait_us)
    other = has & ~host & ~kernel
    return gap, has, host, kernel, other


def idle_breakdown(d: RankData, lanes: list[tuple[Any, Any]],
                   kernel_wait_us: float = KERNEL_WAIT_US) -> list[IdleRow]:
    """Rows per (stream, category); ``lanes[i]`` is the (device pid, stream) of lane ``i``."""
    walked = ~d.gpu_sync if d.gpu_sync is not None and len(d.gpu_sync) == len(d.gpu_ts) else np.ones(len(d.gpu_ts), bool)
    if int(walked.sum()) < 2:
        return []
    # group by lane, keeping start order inside each (gpu arrays are sorted by start)
    idx = np.flatnonzero(walked)
    order = idx[np.argsort(d.gpu_stream[idx], kind="stable")]
    lane = d.gpu_stream[order]
    gap, has, host, kernel, other = _walk(lane, d.gpu_ts[order], d.gpu_end[order], d.gpu_rt[order], d.rt_ts,
                                          kernel_wait_us)
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


def device_idle(d: RankData, kernel_wait_us: float = KERNEL_WAIT_US) -> list[DeviceIdleRow]:
    """Rows per (device, category): the device's idle time (span minus the union of busy time) by cause."""
    if len(d.gpu_ts) < 1:
        return []
    order = np.argsort(d.gpu_device, kind="stable")  # start order kept within each device
    dev = d.gpu_device[order]
    ts, end = d.gpu_ts[order], d.gpu_end[order]
    gap, has, host, kernel, other = _walk(dev, ts, end, d.gpu_rt[order], d.rt_ts, kernel_wait_us)
    rows = []
    for device in np.unique(dev).tolist():
        on = dev == device
        span = float(end[on].max() - ts[on].min())
        total = float(gap[on & has].sum())
        for name, sel in zip(CATEGORIES, (host, kernel, other), strict=True):
            m = on & sel
            idle = float(gap[m].sum())
            rows.append(DeviceIdleRow(d.rank, None if device < 0 else int(device), name, idle, int(m.sum()),
                                      pct(idle, total), span, pct(idle, span)))
    return rows
