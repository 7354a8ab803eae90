"""CUDA queue length per stream over time, its summary, and the time the launch queue was full.

Holistic Trace Analysis' definition (``TraceCounters.get_queue_length_time_series``, checked
by its ``test_get_queue_length_stats`` and ``test_generate_trace_with_counters``): the queue of
a stream holds the operations launched on it and not yet started. It goes up by one at each
launch call (``cudaLaunchKernel``, ``cudaMemcpyAsync``... :data:`QUEUE_LAUNCHES`) whose GPU
activity was recorded, and down by one when that activity starts. The series has one point per
change (a step function); the summary (``kineto_queue_length``: count, mean, std, min,
quartiles, max) is over those points, as HTA's ``describe()``, plus ``time_mean`` (the mean
weighted by how long each value held, which HTA does not give).

``kineto_queue_full``: per stream, the time the queue held at least ``max_queue_length``
operations (CUDA's launch queue holds 1024 by default; past it the launching thread blocks),
and that time over the trace's duration (last start minus first start of any event, as HTA).
HTA keeps one row per rank (the last stream it looked at); here every stream with such time
has its row.

Streams are GPU lanes ``(device, stream)``; HTA groups by the stream number alone, which
joins the same number on two GPUs of one process. A rank without GPU activity has no row
(empty, never zeros). ``kineto_queue_length_series`` keeps at most :data:`SERIES_POINTS`
points per stream (min/max buckets: every extreme survives), timed from the trace's first event
(:func:`trace_start`), for the chart; the DataFrame API
(``kineto.frames``) gives every point.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from my_utils.profiling.kineto.rank_data import RankData
from my_utils.profiling.kineto.rows import Row, Tables

#: The runtime calls that put an operation on a stream's queue (HTA's ``get_runtime_launch_events_query``).
QUEUE_LAUNCHES = frozenset({
    "cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cudaMemcpyAsync", "cudaMemsetAsync",
    "runFunction - job_prep_and_submit_for_execution", "hipLaunchKernel", "hipExtModuleLaunchKernel",
    "hipMemcpyAsync", "hipMemsetAsync", "hipMemcpyWithStream",
})
MAX_QUEUE_LENGTH = 1024
SERIES_POINTS = 400


@dataclass(frozen=True)
class QueueLengthRow(Row):
    """Queue-length statistics of one stream of one rank (over the points of its step function)."""

    rank: int | None
    device: int | str | None
    stream: int | str | None
    count: int
    mean: float
    std: float
    min: float
    p25: float
    p50: float
    p75: float
    max: float
    time_mean: float


@dataclass(frozen=True)
class QueueFullRow(Row):
    """Time one stream's launch queue held at least ``max_queue_length`` operations."""

    rank: int | None
    device: int | str | None
    stream: int | str | None
    max_queue_length: int
    duration_us: float
    relative_duration: float


@dataclass(frozen=True)
class QueuePointRow(Row):
    """One point of the (downsampled) queue-length series: the value from ``ts_us`` (µs since the trace's first event)."""

    rank: int | None
    device: int | str | None
    stream: int | str | None
    ts_us: float
    queue_length: int


@dataclass(frozen=True)
class QueueSeries:
    """The full step functions of one rank, and the value each GPU activity saw.

    ``lanes[i]`` is a GPU lane id; ``ts[i]`` / ``value[i]`` its points (relative µs, queue
    length after the change). ``at_start[g]`` is the queue length right after GPU row ``g``
    started, ``at_launch[g]`` right after its launch call was counted (-1: not counted).
    """

    lanes: list[int]
    ts: list[Any]
    value: list[Any]
    at_start: Any
    at_launch: Any


def queue_series(d: RankData) -> QueueSeries:
    """The queue-length step function of every stream of ``d`` (module docstring)."""
    n = len(d.gpu_ts)
    at_start = np.full(n, -1, dtype=np.int64)
    at_launch = np.full(n, -1, dtype=np.int64)
    launch_ids = np.array([i for i, name in enumerate(d.names) if name in QUEUE_LAUNCHES] or [-1])
    gi = np.flatnonzero(d.gpu_rt >= 0) if n else np.zeros(0, np.int64)
    if len(gi):
        gi = gi[np.isin(d.rt_name[d.gpu_rt[gi]], launch_ids)]
    if not len(gi):
        return QueueSeries([], [], [], at_start, at_launch)
    lane = d.gpu_stream[gi]
    # one +1 at each launch, one -1 at each start; launches first where times tie (concatenation order)
    ts = np.concatenate((d.rt_ts[d.gpu_rt[gi]], d.gpu_ts[gi]))
    delta = np.concatenate((np.ones(len(gi), np.int64), -np.ones(len(gi), np.int64)))
    owner = np.concatenate((gi, gi))
    is_launch = np.concatenate((np.ones(len(gi), bool), np.zeros(len(gi), bool)))
    lanes2 = np.concatenate((lane, lane))
    order = np.lexsort((np.arange(len(ts)), ts, lanes2))
    lanes_sorted = lanes2[order]
    out_lanes, out_ts, out_val = [], [], []
    bounds = np.concatenate(([0], np.flatnonzero(np.diff(lanes_sorted)) + 1, [len(order)]))
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        idx = order[a:b]
        value = np.cumsum(delta[idx])
        launches = is_launch[idx]
        at_launch[owner[idx[launches]]] = value[launches]
        at_start[owner[idx[~launches]]] = value[~launches]
        out_lanes.append(int(lanes_sorted[a]))
        out_ts.append(ts[idx])
        out_val.append(value)
    return QueueSeries(out_lanes, out_ts, out_val, at_start, at_launch)


def _lane(d: RankData, lane: int) -> tuple[int | str | None, int | str | None]:
    device, stream = d.lanes[lane]
    return (device if device is None or isinstance(device, (int, str)) else str(device),
            stream if stream is None or isinstance(stream, (int, str)) else str(stream))


def _starts(d: RankData) -> list[Any]:
    starts = [a for a in (d.gpu_ts, d.rt_ts, d.op_ts, d.ann_ts, d.hsync_ts) if a is not None and len(a)]
    return starts + ([np.array([s[0] for s in d.step_events])] if d.step_events else [])


def trace_start(d: RankData) -> float:
    """The first start of any event kept (relative µs; the collector counts from the first event *in file
    order*, which need not be the earliest: a trace can hold events that start before it)."""
    starts = _starts(d)
    return float(min(a.min() for a in starts)) if starts else 0.0


def trace_duration(d: RankData) -> float:
    """Last start minus first start over every event kept (HTA's ``get_trace_duration``)."""
    starts = _starts(d)
    if not starts:
        return 0.0
    return float(max(a.max() for a in starts) - min(a.min() for a in starts))


def queue_length_tables(d: RankData, max_queue_length: int = MAX_QUEUE_LENGTH,
                        series_points: int | None = SERIES_POINTS) -> Tables:
    """``queue_length``, ``queue_full`` and ``queue_length_series`` rows of one rank (module docstring).

    ``series_points=None`` keeps every point of the series.
    """
    s = queue_series(d)
    summary: list[Row] = []
    full: list[Row] = []
    points: list[Row] = []
    duration = trace_duration(d)
    origin = trace_start(d)
    for lane, ts, value in zip(s.lanes, s.ts, s.value, strict=True):
        device, stream = _lane(d, lane)
        v = value.astype(np.float64)
        held = np.diff(ts)
        time_mean = float((v[:-1] * held).sum() / held.sum()) if len(held) and held.sum() > 0 else math.nan
        q25, q50, q75 = np.percentile(v, [25, 50, 75]).tolist()
        summary.append(QueueLengthRow(d.rank, device, stream, len(v), float(v.mean()),
                                      float(v.std(ddof=1)) if len(v) > 1 else math.nan, float(v.min()), q25, q50,
                                      q75, float(v.max()), time_mean))
        at_max = value[:-1] >= max_queue_length
        if at_max.any():
            blocked = float(held[at_max].sum())
            full.append(QueueFullRow(d.rank, device, stream, max_queue_length, blocked,
                                     blocked / duration if duration > 0 else math.nan))
        for i in (range(len(v)) if series_points is None else _downsample(v, series_points)):
            points.append(QueuePointRow(d.rank, device, stream, float(ts[i] - origin), int(value[i])))
    return {"queue_length": summary, "queue_full": full, "queue_length_series": points}


def _downsample(values: Any, max_points: int) -> list[int]:
    """Indices of at most ``max_points`` points: each bucket's lowest and highest value, in order."""
    n = len(values)
    if n <= max_points:
        return list(range(n))
    buckets = max(1, max_points // 2)
    edges = np.linspace(0, n, buckets + 1).astype(np.int64)
    keep: set[int] = {0, n - 1}
    for lo, hi in zip(edges[:-1].tolist(), edges[1:].tolist(), strict=True):
        if hi > lo:
            chunk = values[lo:hi]
            keep.add(lo + int(np.argmin(chunk)))
            keep.add(lo + int(np.argmax(chunk)))
    return sorted(keep)
