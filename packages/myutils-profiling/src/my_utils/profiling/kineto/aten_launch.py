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

from my_utils.profiling.kineto.call_stacks import build_stacks
from my_utils.profiling.kineto.rank_data import RankData
from my_utils.profiling.kineto.rows import Row, Tables

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
    """Every (operator, kernel sequence) of one rank, most occurrences first (module docstring).

    Columns, not dicts: a large trace has tens of thousands of launches, and this runs beside
    the call stacks that several analyses share.
    """
    if d.op_ts is None or not len(d.op_ts) or not len(d.gpu_ts):
        return []
    aten = np.array([n.startswith("aten::") for n in d.names] or [False])
    ops = np.flatnonzero(aten[d.op_name])
    launches = np.array([LAUNCH_PATTERN.match(n) is not None for n in d.names] or [False])
    # runtime row -> the GPU row it launched (of several, the last, as a dict built in row order keeps)
    launched = np.flatnonzero(d.gpu_rt >= 0)
    kernel_of = np.full(len(d.rt_ts), -1, dtype=np.int64)
    rts = d.gpu_rt[launched]
    _u, last_first = np.unique(rts[::-1], return_index=True)
    kernel_of[rts[::-1][last_first]] = launched[::-1][last_first]
    calls = np.flatnonzero(launches[d.rt_name] & (kernel_of >= 0))
    if not len(ops) or not len(calls):
        return []
    owner = _owners_in_stack(d, aten) if same_thread else _owners_any_thread(d, ops, calls)
    calls = calls[owner[calls] >= 0]
    if not len(calls):
        return []
    o, g = owner[calls], kernel_of[calls]
    start = d.rt_ts[calls].astype(np.float64)
    op_ts = d.op_ts[o].astype(np.float64)
    op_delay = start - op_ts
    rt_delay = d.gpu_ts[g].astype(np.float64) - start
    kernel = d.gpu_name[g].astype(np.int64)
    # occurrences: (thread, operator name, operator start); the launches of each in call order
    keys = np.rec.fromarrays((d.op_thread[o].astype(np.int64), d.op_name[o].astype(np.int64), op_ts))
    _k, first, group = np.unique(keys, return_index=True, return_inverse=True)
    group = group.ravel()
    by_group = np.argsort(group, kind="stable")
    bounds = np.searchsorted(group[by_group], np.arange(len(first) + 1))
    kernels = kernel[by_group].tolist()
    names = d.op_name[o].astype(np.int64)
    acc: dict[tuple[int, tuple[int, ...]], list[float]] = {}
    for gi in np.argsort(first, kind="stable").tolist():  # occurrences in order of their first launch
        head = int(first[gi])
        a = acc.setdefault((int(names[head]), tuple(kernels[bounds[gi]:bounds[gi + 1]])), [0, 0.0, 0.0])
        a[0] += 1
        a[1] += float(op_delay[head])
        a[2] += float(rt_delay[head])
    rows = [AtenLaunchRow(d.rank, d.names[name], " -> ".join(d.names[k] for k in seq), int(a[0]),
                          round(a[1] / a[0], 3), round(a[2] / a[0], 3)) for (name, seq), a in acc.items()]
    rows.sort(key=lambda r: (-r.count, -r.op_to_launch_us, r.operator, r.kernels))
    return rows


def _owners_in_stack(d: RankData, aten: Any) -> Any:
    """Per runtime row, the operator row of the innermost ``aten::`` operator above the call on its thread's
    stack (-1: none)."""
    s = build_stacks(d)
    is_aten_op = np.zeros(len(s.parent), bool)
    n_ops = len(d.op_ts)
    is_aten_op[:n_ops] = aten[d.op_name]
    nearest = s.nearest(is_aten_op)
    rt_offset = n_ops + len(d.ann_ts)
    parents = s.parent[rt_offset:rt_offset + len(d.rt_ts)]
    above = nearest[parents]
    return np.where(parents >= 0, above, -1).astype(np.int64)


def _owners_any_thread(d: RankData, ops: Any, calls: Any) -> Any:
    """Per runtime row, the latest-starting ``aten::`` operator of any thread covering the call (HTA's search;
    -1: none)."""
    op_ts, op_end = d.op_ts[ops], d.op_end[ops]
    # by start, and among equal starts the longest first: reversed, the innermost (shortest) comes first
    by_start = np.lexsort((-(op_end - op_ts), op_ts))
    out = np.full(len(d.rt_ts), -1, dtype=np.int64)
    for r in calls.tolist():
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
