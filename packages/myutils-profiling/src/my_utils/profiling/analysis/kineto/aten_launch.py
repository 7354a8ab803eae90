"""ATen operator → kernel launch delay: how long each operator takes to launch its kernels, and how long they wait.

Holistic Trace Analysis' ``get_aten_op_kernels_and_delay`` (``hta/analyzers/cuda_kernel_analysis.py``,
``tests/test_trace_analysis.py::test_get_mtia_aten_op_kernels_and_delay_inference_single_rank``):
every kernel launch call (``cuda…LaunchKernel``, ``cuLaunchKernel``, MTIA's ``runFunction``) is
given the innermost ``aten::`` operator around it (the latest-starting one that covers the
call); per operator occurrence, its launches in order give a kernel sequence, the *operator
delay* (operator start → first launch call) and the *runtime delay* (first launch call → its
kernel's start). Per (operator, kernel sequence): occurrences and the two delays' means, sorted
by occurrences (then the operator delay), as HTA's ``sort_by``.

HTA searches the covering operator among the ``aten::`` operators of *every* thread; by default
here only the call's own thread counts (``same_thread=True``: an operator of another thread
does not launch this thread's kernels); ``same_thread=False`` is HTA's search. Of operators
starting at the same µs (``aten::matmul`` and the ``aten::mm`` it calls) the shorter, inner one
is taken; HTA takes whichever its unstable sort puts first. Launch calls whose kernel was not
recorded are left out (HTA stops on them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from my_utils.profiling.analysis.kineto.call_stacks import build_stacks
from my_utils.profiling.analysis.kineto.rank_data import RankData
from my_utils.profiling.analysis.kineto.rows import Row, Tables

#: HTA's ``KERNEL_LAUNCH_CATEGORY_PATTERN``, matched at the start of the call's name.
LAUNCH_PATTERN = re.compile(r"(cuda.*LaunchKernel)|(cuLaunchKernel)|(^runFunction)")
TOP_ROWS = 30


@dataclass(frozen=True)
class AtenLaunchRow(Row):
    """One (operator, kernel sequence) on one rank: how often, and its mean launch and runtime delays (µs)."""

    rank: int | None
    operator: str
    kernels: str
    count: int
    op_to_launch_us: float
    launch_to_kernel_us: float


def aten_launch_rows(d: RankData, same_thread: bool = True) -> list[AtenLaunchRow]:
    """Every (operator, kernel sequence) of one rank, most occurrences first (module docstring)."""
    if d.op_ts is None or not len(d.op_ts) or not len(d.gpu_ts):
        return []
    aten = np.array([n.startswith("aten::") for n in d.names] or [False])
    ops = np.flatnonzero(aten[d.op_name])
    launches = np.array([LAUNCH_PATTERN.match(n) is not None for n in d.names] or [False])
    kernel_of = {int(r): g for g, r in enumerate(d.gpu_rt.tolist()) if r >= 0}
    calls = [r for r in np.flatnonzero(launches[d.rt_name]).tolist() if r in kernel_of]
    if not len(ops) or not calls:
        return []
    owner_of = _owners_in_stack(d, aten) if same_thread else _owners_any_thread(d, ops, calls)
    groups: dict[tuple[int, int, float], list[tuple[float, float, int]]] = {}  # (thread, op name, start) -> launches
    for r in calls:
        start = float(d.rt_ts[r])
        o = owner_of.get(r, -1)
        if o < 0:
            continue
        g = kernel_of[r]
        key = (int(d.op_thread[o]), int(d.op_name[o]), float(d.op_ts[o]))
        groups.setdefault(key, []).append((start - float(d.op_ts[o]), float(d.gpu_ts[g]) - start, int(d.gpu_name[g])))
    acc: dict[tuple[int, tuple[int, ...]], list[float]] = {}
    for (_thread, name, _ts), items in groups.items():
        a = acc.setdefault((name, tuple(k for _a, _b, k in items)), [0, 0.0, 0.0])
        a[0] += 1
        a[1] += items[0][0]
        a[2] += items[0][1]
    rows = [AtenLaunchRow(d.rank, d.names[name], " -> ".join(d.names[k] for k in seq), int(a[0]),
                          round(a[1] / a[0], 3), round(a[2] / a[0], 3)) for (name, seq), a in acc.items()]
    rows.sort(key=lambda r: (-r.count, -r.op_to_launch_us, r.operator, r.kernels))
    return rows


def _owners_in_stack(d: RankData, aten: Any) -> dict[int, int]:
    """runtime row -> the operator row of the innermost ``aten::`` operator above the call on its thread's stack."""
    s = build_stacks(d)
    is_aten_op = np.zeros(len(s.parent), bool)
    n_ops = len(d.op_ts)
    is_aten_op[:n_ops] = aten[d.op_name]
    nearest = s.nearest(is_aten_op)
    rt_offset = n_ops + len(d.ann_ts)
    above = nearest[s.parent[rt_offset:rt_offset + len(d.rt_ts)]]
    has = s.parent[rt_offset:rt_offset + len(d.rt_ts)] >= 0
    return {r: int(o) for r, (o, ok) in enumerate(zip(above.tolist(), has.tolist(), strict=True)) if ok and o >= 0}


def _owners_any_thread(d: RankData, ops: Any, calls: list[int]) -> dict[int, int]:
    """runtime row -> the latest-starting ``aten::`` operator of any thread covering the call (HTA's search)."""
    op_ts, op_end = d.op_ts[ops], d.op_end[ops]
    # by start, and among equal starts the longest first: reversed, the innermost (shortest) comes first
    by_start = np.lexsort((-(op_end - op_ts), op_ts))
    out: dict[int, int] = {}
    for r in calls:
        start, end = float(d.rt_ts[r]), float(d.rt_ts[r] + d.rt_dur[r])
        last = np.searchsorted(op_ts[by_start], start, side="right")
        cand = by_start[:last][::-1]  # latest-starting first
        hit = np.flatnonzero(op_end[cand] >= end)
        if len(hit):
            out[r] = int(ops[cand[hit[0]]])
    return out


def aten_launch_tables(d: RankData, same_thread: bool = True, top: int = TOP_ROWS) -> Tables:
    """``aten_launch`` rows of one rank: the ``top`` sequences by occurrences (none without launches)."""
    rows = aten_launch_rows(d, same_thread)
    return {"aten_launch": rows[:top]} if rows else {}
