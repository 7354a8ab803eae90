"""Capture health: is this trace fit to be analysed, and what in it would mislead?

Per rank, four checks, each a row with status ``ok``, ``warning`` or ``info``:

``profiler_steps``
    ``ProfilerStep#N`` markers present (without them nothing can be said per step).
``gpu_lanes``
    GPU activity recorded; a warning when the CPU launched work but no GPU lane holds any
    (CUPTI was off or failed), info listing stream lanes declared but empty.
``dropped_events``
    launches whose GPU activity is missing, and GPU activities whose launch is missing
    (joined on correlation ids); more than ``dropped_warn_pct`` of either suggests the
    profiler's buffers overflowed.
``warmup_steps``
    leading steps longer than ``warmup_factor`` times the median of the later ones: warm-up
    (allocator, autotuning, compilation) captured inside the window skews every average.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from my_utils.core.lazy import lazy_module
from my_utils.profiling.kineto.launch import LAUNCH_CALLS
from my_utils.profiling.kineto.rank_data import RankData
from my_utils.profiling.kineto.rows import Row, pct

if TYPE_CHECKING:
    import numpy as np
else:  # numpy only when a function runs: the parent process of a run merges rows and never needs it
    np = lazy_module("numpy", __name__, "np")

DROPPED_WARN_PCT = 1.0
WARMUP_FACTOR = 1.5


@dataclass(frozen=True)
class HealthRow(Row):
    """One capture-health check of one rank."""

    rank: int | None
    check: str
    status: str
    value: float
    detail: str


def capture_health(d: RankData, dropped_warn_pct: float = DROPPED_WARN_PCT,
                   warmup_factor: float = WARMUP_FACTOR) -> list[HealthRow]:
    """The four checks of one rank."""
    r = d.rank
    rows = []
    n_steps = len(d.steps)
    rows.append(HealthRow(r, "profiler_steps", "ok" if n_steps else "warning", float(n_steps),
                          f"{n_steps} ProfilerStep markers" if n_steps else
                          "no ProfilerStep markers: call prof.step() each iteration to get per-step figures"))

    launch_ids = np.array([i for i, n in enumerate(d.names) if n in LAUNCH_CALLS] or [-1])
    is_launch = np.isin(d.rt_name, launch_ids)
    launches = int(is_launch.sum())
    launched = ~d.gpu_sync  # a cuda_sync event is no launched activity
    n_gpu = int(launched.sum())
    if n_gpu == 0 and launches:
        rows.append(HealthRow(r, "gpu_lanes", "warning", 0.0,
                              f"{launches} kernel launches but no GPU activity recorded: enable "
                              "ProfilerActivity.CUDA (CUPTI) in the profiler's activities"))
    elif d.empty_gpu_lanes:
        rows.append(HealthRow(r, "gpu_lanes", "info", float(d.empty_gpu_lanes),
                              f"{d.empty_gpu_lanes} GPU stream lane(s) declared with no activity"))
    else:
        rows.append(HealthRow(r, "gpu_lanes", "ok", float(d.stream_count),
                              f"{d.stream_count} GPU lane(s) with activity" if n_gpu else "CPU-only trace"))

    no_gpu = int((is_launch & ~d.rt_has_gpu).sum())
    no_launch = int(((d.gpu_rt < 0) & (d.gpu_corr >= 0) & launched).sum())
    worst = max(pct(no_gpu, launches) if launches else 0.0, pct(no_launch, n_gpu) if n_gpu else 0.0)
    rows.append(HealthRow(r, "dropped_events", "warning" if worst > dropped_warn_pct else "ok", worst,
                          f"{no_gpu} of {launches} launches without their GPU activity, {no_launch} of "
                          f"{n_gpu} GPU activities without their launch"
                          + ("; the profiler probably dropped events (raise its buffer size or shorten "
                             "the active window)" if worst > dropped_warn_pct else "")))

    durs = [dur for _ts, dur, _n in d.steps]
    slow = 0
    if len(durs) >= 3:
        import statistics  # here: the module costs ~2 MB of every analysis process otherwise

        median = statistics.median(durs[1:])
        while slow < len(durs) - 2 and durs[slow] > warmup_factor * median:
            slow += 1
    numbers = [n for _ts, _dur, n in d.steps[:slow]]
    rows.append(HealthRow(r, "warmup_steps", "warning" if slow else "ok", float(slow),
                          f"step(s) {numbers} take over {warmup_factor}x the median of later steps: "
                          "warm-up inside the window; add wait/warmup steps to the profiler schedule"
                          if slow else "no warm-up step detected"))
    return rows
