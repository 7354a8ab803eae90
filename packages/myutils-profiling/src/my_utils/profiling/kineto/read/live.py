"""Metric events from a live ``torch.profiler.profile`` cycle (its ``function_events``).

The events go through the same ``TraceAggregator`` as trace files, so a live run and the
trace it exports give the same metric names. torch names every step span
``ProfilerStep*`` in ``function_events``; the cycle's steps are the last ones before the
profiler's current ``step_num``, numbered in start order.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from my_utils.core.events import MetricEvent
from my_utils.profiling.kineto.read.aggregate import TraceAggregator

LIVE_SOURCE = Path("<live torch.profiler>")


def events_from_function_events(function_events: Sequence[Any], rank: int | None, *,
                                trace_start_ns: int | None = None,
                                step_num: int | None = None) -> list[MetricEvent]:
    """Aggregate one profiling cycle; ``step_num`` is ``prof.step_num`` when the cycle ended."""
    agg = TraceAggregator(LIVE_SOURCE)
    step_spans = sorted(
        (e for e in function_events if str(e.name).startswith("ProfilerStep")),
        key=lambda e: e.time_range.start,
    )
    first_step = step_num - len(step_spans) if step_num is not None else 0
    step_ids = {id(e): first_step + i for i, e in enumerate(step_spans)}
    for e in function_events:
        start = float(e.time_range.start)
        dur = float(e.time_range.end) - start
        device = str(getattr(e, "device_type", "CPU")).rsplit(".", 1)[-1]
        if id(e) in step_ids:
            cat, name = "user_annotation", f"ProfilerStep#{step_ids[id(e)]}"
        elif device != "CPU":
            cat, name = "kernel", e.name
        elif getattr(e, "is_user_annotation", False):
            cat, name = "user_annotation", e.name
        else:
            cat, name = "cpu_op", e.name
        agg.add({"ph": "X", "cat": cat, "name": name, "ts": start, "dur": max(dur, 0.0)})
    meta = {"baseTimeNanoseconds": trace_start_ns} if trace_start_ns else {}
    source = "option" if rank is not None else "unknown"
    return agg.finish(meta, rank, source)
