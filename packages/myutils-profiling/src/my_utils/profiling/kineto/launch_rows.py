"""One row per kernel launch: the kernel, its stream, the call that launched it, the operator around the call, delays.

Holistic Trace Analysis' ``get_cuda_kernel_launch_stats`` returns per launch the ``correlation``,
``cpu_duration`` (the launch call), ``gpu_duration`` (the kernel, copy or set) and ``launch_delay``
(kernel start − call end, clipped at 0), joined on the correlation id of ``cudaLaunchKernel``,
``cudaLaunchKernelExC``, MTIA's ``runFunction`` and (``include_memory_events``) ``cudaMemcpyAsync`` /
``cudaMemsetAsync``; this table adds what its rows leave out: the kernel's name, its device and
stream, the call's name (``cuLaunchKernel``, Triton's, counts too: ``kineto.launch.LAUNCH_CALLS``), the
innermost operator or annotation around the call, and where the kernel starts in the trace.

``kineto_kernel_launches`` (per rank) keeps the ``limit`` launches with the longest delay (longest
first); ``limit=None`` keeps every launch, in start order, as ``kineto_frames`` does (a trace holds
tens of thousands of launches: the report keeps the ones worth reading).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from my_utils.profiling.kineto.kinds import KINDS
from my_utils.profiling.kineto.launch import _pairs
from my_utils.profiling.kineto.rank_data import RankData
from my_utils.profiling.kineto.rows import Row, Tables

LIMIT = 200


@dataclass(frozen=True)
class KernelLaunchRow(Row):
    """One launch on one rank: what ran where, what launched it, and how long it waited (µs)."""

    rank: int | None
    correlation: int
    kernel: str
    kind: str
    device: int
    stream: str
    launch_call: str
    operator: str
    cpu_us: float
    gpu_us: float
    launch_delay_us: float
    ts_us: float


def launch_rows(d: RankData) -> list[KernelLaunchRow]:
    """Every launch of one rank, in the order its GPU activity starts (module docstring)."""
    gi, ri = _pairs(d)
    if not len(gi):
        return []
    from my_utils.profiling.kineto.call_stacks import ANNOTATION, OP, build_stacks

    s = build_stacks(d)
    owner = s.nearest(s.kind.mask(OP) | s.kind.mask(ANNOTATION))
    rt_offset = (0 if d.op_ts is None else len(d.op_ts)) + len(d.ann_ts)
    ops = owner[ri + rt_offset]
    cpu = d.rt_dur[ri]
    delay = np.maximum(d.gpu_ts[gi] - d.rt_ts[ri] - cpu, 0.0)
    out = []
    for k, (g, r, o) in enumerate(zip(gi.tolist(), ri.tolist(), ops.tolist(), strict=True)):
        lane = d.lanes[int(d.gpu_stream[g])] if len(d.lanes) > int(d.gpu_stream[g]) else (None, None)
        out.append(KernelLaunchRow(
            d.rank, int(d.gpu_corr[g]), d.names[int(d.gpu_name[g])], KINDS[int(d.gpu_kind[g])].value,
            int(d.gpu_device[g]), str(lane[1]), d.names[int(d.rt_name[r])],
            d.names[int(s.name[o])] if o >= 0 else "", float(cpu[k]), float(d.gpu_dur[g]), float(delay[k]),
            float(d.gpu_ts[g])))
    return out


def launch_tables(d: RankData, limit: int | None = LIMIT) -> Tables:
    """``kernel_launches`` of one rank: the ``limit`` longest delays, or every launch (``limit=None``)."""
    rows = launch_rows(d)
    if not rows:
        return {}
    if limit is not None:
        rows = sorted(rows, key=lambda r: (-r.launch_delay_us, r.ts_us))[:limit]
    return {"kernel_launches": rows}
