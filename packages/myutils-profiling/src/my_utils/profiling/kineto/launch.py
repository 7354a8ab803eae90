"""Kernel launch statistics: CPU launch cost, launch delay and short kernels, joined on correlation ids.

Each GPU activity is paired with the runtime call that launched it (``cudaLaunchKernel``,
``cudaLaunchKernelExC``, ``cuLaunchKernel``, ``cudaMemcpyAsync``, ``cudaMemsetAsync``, and
MTIA's submit call). *Launch delay* is the time from the end of that call to the start of
the activity (negative values clipped to 0); *runtime outliers* are calls longer than
``runtime_cutoff_us``; *delay outliers* wait longer than ``launch_delay_cutoff_us``; a
*short kernel* is a kernel (not a memory copy or set, counted in ``kernels``) that runs for less
time than its launch took on the CPU (and the call is no runtime outlier). These are Holistic
Trace Analysis' definitions and defaults (50 / 100 µs), plus the driver-API launches Triton uses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from my_utils.core.lazy import lazy_module
from my_utils.profiling.kineto.kinds import KINDS, KernelKind
from my_utils.profiling.kineto.rank_data import RankData
from my_utils.profiling.kineto.rows import Row

if TYPE_CHECKING:
    import numpy as np
else:  # numpy only when a function runs: the parent process of a run merges rows and never needs it
    np = lazy_module("numpy", __name__, "np")

LAUNCH_CALLS = frozenset({
    "cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx",
    "cudaMemcpyAsync", "cudaMemsetAsync", "runFunction - job_prep_and_submit_for_execution",
})
RUNTIME_CUTOFF_US = 50.0
LAUNCH_DELAY_CUTOFF_US = 100.0


@dataclass(frozen=True)
class LaunchRow(Row):
    """Launch statistics of one rank (µs)."""

    rank: int | None
    launches: int
    cpu_mean_us: float
    cpu_p95_us: float
    gpu_mean_us: float
    delay_mean_us: float
    delay_median_us: float
    delay_p95_us: float
    delay_max_us: float
    runtime_outliers: int
    delay_outliers: int
    short_kernels: int
    kernels: int = 0  # launches of kernels (``launches`` less memory copies and sets)


@dataclass(frozen=True)
class LaunchOutlier(Row):
    """One launch with a long delay: what ran, when it was asked for, how long it waited."""

    rank: int | None
    correlation: int
    name: str
    cpu_us: float
    gpu_us: float
    delay_us: float


def _pairs(d: RankData) -> tuple[np.ndarray, np.ndarray]:
    """(GPU activity indices, their runtime call indices) for the launches counted here."""
    launch_ids = np.array([i for i, n in enumerate(d.names) if n in LAUNCH_CALLS] or [-1])
    gi = np.flatnonzero(d.gpu_rt >= 0)
    ri = d.gpu_rt[gi]
    keep = np.isin(d.rt_name[ri], launch_ids)
    return gi[keep], ri[keep]


def launch_stats(d: RankData, runtime_cutoff_us: float = RUNTIME_CUTOFF_US,
                 launch_delay_cutoff_us: float = LAUNCH_DELAY_CUTOFF_US,
                 outliers: int = 10) -> tuple[LaunchRow | None, list[LaunchOutlier]]:
    """The statistics of one rank and its ``outliers`` longest-delayed launches."""
    gi, ri = _pairs(d)
    if not len(gi):
        return None, []
    cpu = d.rt_dur[ri]
    gpu = d.gpu_dur[gi]
    delay = np.maximum(d.gpu_ts[gi] - d.rt_ts[ri] - cpu, 0.0)
    kernel = d.gpu_kind[gi] != KINDS.index(KernelKind.MEMORY)
    short = kernel & (cpu <= runtime_cutoff_us) & (gpu < cpu)
    row = LaunchRow(
        d.rank, len(gi), float(cpu.mean()), float(np.percentile(cpu, 95)), float(gpu.mean()),
        float(delay.mean()), float(np.median(delay)), float(np.percentile(delay, 95)), float(delay.max()),
        int((cpu > runtime_cutoff_us).sum()), int((delay > launch_delay_cutoff_us).sum()), int(short.sum()),
        int(kernel.sum()),
    )
    worst = np.argsort(-delay, kind="stable")[:outliers]
    out = [LaunchOutlier(d.rank, int(d.gpu_corr[gi[w]]), d.names[int(d.gpu_name[gi[w]])], float(cpu[w]),
                         float(gpu[w]), float(delay[w]))
           for w in worst.tolist() if delay[w] > launch_delay_cutoff_us or math.isnan(delay[w])]
    return row, out
