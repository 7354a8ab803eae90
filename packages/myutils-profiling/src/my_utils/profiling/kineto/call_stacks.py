"""Call stacks: each CPU event's parent, depth and height, the kernels under it, and the GPU annotation spans.

Holistic Trace Analysis' call graph (``hta/common/trace_call_graph.py`` / ``trace_call_stack.py``,
checked by ``tests/test_trace_call_graph.py`` on its ``call_stack/backward_thread.json``):

* per CPU thread, operators, annotations, ``ProfilerStep`` ranges and runtime calls nest by time
  (an event's parent is the innermost one open when it starts; at one instant ends come before
  starts, a longer event starts before a shorter one); a GPU activity's parent is the runtime
  call that launched it;
* the backward thread is hung under the main thread: when exactly one thread holds the
  ``ProfilerStep#`` ranges (main) and exactly one other holds ``autograd::`` operators (backward),
  each top-level event of the backward thread gets as parent the main thread's ``## backward ##``
  annotation that contains it (else the ``ProfilerStep#`` that does);
* ``depth``: 0 for a top-level event, one more per level; ``height``: 0 for a GPU activity, 1 for
  a CPU event with no GPU activity under it, else one more than its highest child;
  ``num_kernels`` / ``kernel_us``: the GPU activities under an event and their summed time.

``kineto_op_stacks`` (per rank) lists the operator stacks that launched the most GPU time —
the path of operator and annotation names from the top of the stack to the operator that
called the runtime, ``ProfilerStep#N`` left out so that iterations add up — with the kernels
and their time; ``kineto_gpu_annotations`` gives HTA's
``get_gpu_user_annotation_breakdown`` (``use_gpu_annotation=True``): count, sum, mean, min, max
and std of the ``gpu_user_annotation`` spans per name. :func:`stack_of` returns the stack of
one event (its ancestors, itself and, for a CPU event, everything under it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from my_utils.profiling.kineto.rank_data import RankData
from my_utils.profiling.kineto.rows import Row, Tables

OP, ANNOTATION, STEP, RUNTIME, GPU = "cpu_op", "user_annotation", "profiler_step", "cuda_runtime", "gpu"
KINDS = (OP, ANNOTATION, STEP, RUNTIME, GPU)
BACKWARD_ANNOTATION = "## backward ##"


class Kinds:
    """The kind of each row (one byte per row; ``kinds[i]`` is the kind's name, ``codes`` the bytes)."""

    def __init__(self, codes: Any) -> None:
        self.codes = codes

    def __getitem__(self, i: int) -> str:
        return KINDS[self.codes[i]]

    def __len__(self) -> int:
        return len(self.codes)

    def mask(self, kind: str) -> Any:
        """Rows of ``kind``."""
        return self.codes == KINDS.index(kind)
TOP_STACKS = 30


@dataclass(frozen=True)
class Stacks:
    """Every CPU event and GPU activity of a rank as one table (CPU rows first), with its place in the stacks.

    ``index`` is the ``traceEvents`` index; ``parent`` a row of this table (-1: top level);
    ``kind`` one of ``cpu_op``, ``user_annotation``, ``profiler_step``, ``cuda_runtime``, ``gpu``.
    """

    index: Any
    kind: Kinds
    name: Any
    thread: Any
    ts: Any
    end: Any
    parent: Any
    depth: Any
    height: Any
    num_kernels: Any
    kernel_us: Any
    cpu_rows: int

    def row_of(self, index: int) -> int:
        """The row of the event at ``traceEvents[index]`` (KeyError when it is no CPU event or GPU activity)."""
        hit = np.flatnonzero(self.index == index)
        if not len(hit):
            raise KeyError(f"traceEvents[{index}] is no CPU operator, annotation, runtime call or GPU activity")
        return int(hit[0])

    def nearest(self, mask: Any, outermost: bool = False) -> Any:
        """For each row, the nearest row on its path to the top (itself included) where ``mask`` holds, -1 if none;
        with ``outermost``, the farthest such row instead (vectorised, one pass per depth level)."""
        n = len(self.parent)
        out = np.where(mask, np.arange(n), -1)
        for level in range(1, int(self.depth.max(initial=0)) + 1):
            rows = np.flatnonzero((self.depth == level) & (self.parent >= 0))
            above = out[self.parent[rows]]
            if outermost:
                out[rows] = np.where(above >= 0, above, out[rows])
            else:
                out[rows] = np.where(out[rows] >= 0, out[rows], above)
        return out

    def ancestors(self, row: int) -> list[int]:
        """``row``'s ancestors, the top first."""
        out: list[int] = []
        p = int(self.parent[row])
        while p >= 0:
            out.append(p)
            p = int(self.parent[p])
        return out[::-1]


def _points_order(thread: Any, ts: Any, end: Any, index: Any) -> Any:
    """Start and end points of every CPU event, by thread then in HTA's call-stack order, as ``2i`` / ``2i + 1``.

    At one instant: ends first (shorter first, then higher index), then starts (longer first,
    then lower index); a zero-length event starts after the longer starts and ends after them.
    Sorted one thread at a time: the sort keys of ~2 points per event are the largest
    temporaries of the stacks, and a thread holds only part of them.
    """
    n = len(ts)
    out = np.empty(2 * n, dtype=np.int32 if 2 * n < 2**31 else np.int64)
    at = 0
    for t in np.unique(thread).tolist():
        rows = np.flatnonzero(thread == t)
        order = _thread_points(ts[rows], end[rows], index[rows])
        k = len(rows)
        point = rows[order % k]
        point *= 2
        point[order >= k] += 1  # an end
        del order
        out[at:at + 2 * k] = point
        at += 2 * k
    return out


def _thread_points(ts: Any, end: Any, index: Any) -> Any:
    """The points of one thread's events in call-stack order: ``j`` the start, ``k + j`` the end of row ``j``."""
    dur = end - ts
    k = len(ts)
    idx32 = np.asarray(index, dtype=np.int32)  # narrow: these keys are the sort's memory
    order = np.lexsort((np.concatenate((idx32, -idx32)), np.concatenate((-dur, dur)),
                        np.concatenate((np.ones(k, np.int8), np.where(dur > 0, 0, 2).astype(np.int8))),
                        np.concatenate((ts, end))))
    return order.astype(np.int32) if 2 * k < 2**31 else order


_CACHE: list[tuple[RankData, Stacks]] = []


def forget() -> None:
    """Drop the stacks kept for the rank last analysed."""
    _CACHE.clear()


def build_stacks(d: RankData) -> Stacks:
    """The call stacks of one rank (module docstring); built once per rank's data (several analyses read them)."""
    if _CACHE and _CACHE[0][0] is d:
        return _CACHE[0][1]
    s = _build(d)
    _CACHE[:] = [(d, s)]
    return s


def _build(d: RankData) -> Stacks:
    parts: list[tuple[str, Any, Any, Any, Any, Any]] = [
        (OP, d.op_index, d.op_name, d.op_thread, d.op_ts, d.op_end),
        (ANNOTATION, d.ann_index, d.ann_name, d.ann_thread, d.ann_ts, d.ann_end),
        (RUNTIME, d.rt_index, d.rt_name, d.rt_thread, d.rt_ts, d.rt_ts + d.rt_dur),
    ]
    if d.step_events:
        parts.append((STEP, np.array([s[4] for s in d.step_events]), np.array([s[5] for s in d.step_events]),
                      np.array([s[3] for s in d.step_events]), np.array([s[0] for s in d.step_events]),
                      np.array([s[0] + s[1] for s in d.step_events])))
    kind: list[Any] = []
    cols: list[list[Any]] = [[], [], [], [], []]
    for k, *arrays in parts:
        if arrays[0] is None or not len(arrays[0]):
            continue
        kind.append(np.full(len(arrays[0]), KINDS.index(k), dtype=np.int8))
        for c, a in zip(cols, arrays, strict=True):
            c.append(np.asarray(a))
    index, name, thread, ts, end = (np.concatenate(c) if c else np.zeros(0) for c in cols)
    del cols
    n_cpu = len(index)
    # the runtime rows' offset in the table, then the parts go: the runtime calls' ends are a copy
    rt_offset = sum(len(p[1]) for p in parts[:2] if p[1] is not None)
    del parts
    order = _points_order(thread, ts, end, index)
    parent = np.full(n_cpu, -1, dtype=np.int32)  # after the sort: its keys are the build's peak
    stack: list[int] = []
    current = None
    for chunk in range(0, len(order), 1 << 16):  # a list of every point would cost ~40 bytes each
        for p in order[chunk:chunk + (1 << 16)].tolist():
            i = p >> 1
            t = thread[i]
            if t != current:
                stack, current = [], t
            if not p & 1:
                parent[i] = stack[-1] if stack else -1
                stack.append(i)
            elif stack:
                stack.pop()  # as HTA: the innermost closes, whatever ends (overlaps are not nesting)
    del order
    codes = np.concatenate(kind) if kind else np.zeros(0, np.int8)
    is_step = codes == KINDS.index(STEP)
    _link_backward(d, is_step, name, thread, ts, end, parent)
    # GPU activities under their launch call
    gpu_parent = np.where(d.gpu_rt >= 0, d.gpu_rt + rt_offset, -1) if len(d.gpu_ts) else np.zeros(0, np.int64)
    # 32-bit columns: a large trace has a few hundred thousand rows, and several analyses hold them at once;
    # each CPU-only column is dropped as soon as its whole-table copy exists (the build's peak is these copies)
    all_parent = np.concatenate((parent, gpu_parent)).astype(np.int32)
    del parent, gpu_parent
    all_index = (np.concatenate((index, d.gpu_index)) if len(d.gpu_ts) else index).astype(np.int64)
    del index
    all_kind = Kinds(np.concatenate((codes, np.full(len(d.gpu_ts), KINDS.index(GPU), dtype=np.int8))))
    del codes, is_step
    all_name = (np.concatenate((name, d.gpu_name)) if len(d.gpu_ts) else name).astype(np.int32)
    del name
    all_thread = (np.concatenate((thread, np.full(len(d.gpu_ts), -1))) if len(d.gpu_ts) else thread).astype(np.int32)
    del thread
    all_ts = np.concatenate((ts, d.gpu_ts)) if len(d.gpu_ts) else ts
    del ts
    all_end = np.concatenate((end, d.gpu_end)) if len(d.gpu_ts) else end
    del end
    depth, height, num, us = _levels(all_parent, n_cpu, d.gpu_dur if len(d.gpu_ts) else np.zeros(0))
    return Stacks(all_index, all_kind, all_name, all_thread, all_ts, all_end, all_parent, depth, height, num, us,
                  n_cpu)


def _link_backward(d: RankData, is_step: Any, name: Any, thread: Any, ts: Any, end: Any, parent: Any) -> None:
    """Hang the backward thread's top-level events under the main thread's backward annotation (or step)."""
    main = np.unique(thread[is_step]).tolist()
    autograd = np.array(["autograd::" in n for n in d.names] or [False])
    bwd = [t for t in np.unique(thread[autograd[name]]).tolist() if t not in main]
    if len(main) != 1 or len(bwd) != 1:
        return
    on_main = np.flatnonzero(thread == main[0])
    for prefix in (BACKWARD_ANNOTATION, "ProfilerStep#"):
        starts = np.array([n.startswith(prefix) for n in d.names] or [False])
        holders = on_main[starts[name[on_main]]].tolist()
        if holders:
            break
    else:
        return
    for i in np.flatnonzero((thread == bwd[0]) & (parent == -1)).tolist():
        for h in holders:
            if ts[i] >= ts[h] and end[i] <= end[h]:
                parent[i] = h
                break


def _levels(parent: Any, n_cpu: int, gpu_dur: Any) -> tuple[Any, Any, Any, Any]:
    """Depth, height, kernels under and their time, for every row, level by level (vectorised)."""
    n = len(parent)
    depth = np.zeros(n, dtype=np.int32)
    has_parent = parent >= 0
    safe = np.where(has_parent, parent, 0)
    for _ in range(n):  # one pass per level: stops when no depth changes
        new = np.where(has_parent, depth[safe] + 1, 0)
        if np.array_equal(new, depth):
            break
        depth = new
    gpu = np.arange(n) >= n_cpu
    height = np.where(gpu, 0, 1).astype(np.int32)
    num = gpu.astype(np.int32)
    us = np.zeros(n, dtype=np.float64)
    us[n_cpu:] = gpu_dur
    for level in range(int(depth.max(initial=0)), 0, -1):  # children before their parents
        rows = np.flatnonzero((depth == level) & has_parent)
        np.add.at(num, parent[rows], num[rows])
        np.add.at(us, parent[rows], us[rows])
        np.maximum.at(height, parent[rows], height[rows] + 1)
    return depth, height, num, us


def stack_of(d: RankData, index: int, stacks: Stacks | None = None) -> list[dict[str, Any]]:
    """The stack of the event at ``traceEvents[index]``: ancestors, itself, and (a CPU event) all under it, by start.

    A GPU activity's stack is its launch call's ancestors, the call and the activity. Each row:
    ``index``, ``name``, ``kind``, ``depth``, ``height``, ``num_kernels``, ``kernel_us``, ``ts_us``, ``dur_us``.
    """
    s = stacks or build_stacks(d)
    row = s.row_of(index)
    rows = [*s.ancestors(row), row]
    if s.kind[row] != GPU:
        todo = [row]
        while todo:
            i = todo.pop()
            kids = np.flatnonzero(s.parent == i).tolist()
            rows.extend(kids)
            todo.extend(kids)
    rows = sorted(set(rows), key=lambda i: (float(s.ts[i]), int(s.depth[i])))
    return [{"index": int(s.index[i]), "name": d.names[int(s.name[i])], "kind": s.kind[i], "depth": int(s.depth[i]),
             "height": int(s.height[i]), "num_kernels": int(s.num_kernels[i]), "kernel_us": float(s.kernel_us[i]),
             "ts_us": float(s.ts[i]) + d.base_us, "dur_us": float(s.end[i] - s.ts[i])} for i in rows]


@dataclass(frozen=True)
class OpStackRow(Row):
    """One operator stack (top → the operator that launched) and the GPU work launched under it."""

    rank: int | None
    stack: str
    depth: int
    launches: int
    kernels: int
    gpu_us: float
    top_kernel: str


@dataclass(frozen=True)
class GpuAnnotationRow(Row):
    """One ``gpu_user_annotation`` name on one rank: its spans on the device (HTA's GPU user-annotation breakdown)."""

    rank: int | None
    name: str
    count: int
    sum_us: float
    mean_us: float
    min_us: float
    max_us: float
    std_us: float


def op_stack_rows(d: RankData, s: Stacks, top: int = TOP_STACKS) -> list[OpStackRow]:
    """The operator stacks that launched the most GPU time (annotations and operators only, runtime calls left out)."""
    acc: dict[tuple[int, ...], list[Any]] = {}
    for g in range(s.cpu_rows, len(s.index)):
        call = int(s.parent[g])
        if call < 0:
            continue
        path = tuple(int(s.name[i]) for i in s.ancestors(call) if s.kind[i] not in (RUNTIME, STEP))
        a = acc.setdefault(path, [set(), 0, 0.0, {}])
        a[0].add(call)
        a[1] += 1
        a[2] += float(s.end[g] - s.ts[g])
        kname = int(s.name[g])
        a[3][kname] = a[3].get(kname, 0.0) + float(s.end[g] - s.ts[g])
    rows = [OpStackRow(d.rank, " > ".join(d.names[n] for n in path) or "(no operator)", len(path), len(a[0]), a[1],
                       a[2], d.names[max(a[3], key=a[3].get)]) for path, a in acc.items()]
    rows.sort(key=lambda r: (-r.gpu_us, r.stack))
    return rows[:top]


def gpu_annotation_rows(d: RankData) -> list[GpuAnnotationRow]:
    """HTA's GPU user-annotation breakdown: duration statistics of the ``gpu_user_annotation`` spans per name."""
    per: dict[int, list[float]] = {}
    for _ts, dur, name, _lane, _index in d.gpu_annotations:
        per.setdefault(name, []).append(dur)
    out = []
    for name, durs in per.items():
        a = np.array(durs)
        out.append(GpuAnnotationRow(d.rank, d.names[name], len(a), float(a.sum()), float(a.mean()), float(a.min()),
                                    float(a.max()), float(a.std(ddof=1)) if len(a) > 1 else math.nan))
    out.sort(key=lambda r: (-r.sum_us, r.name))
    return out


def call_stack_tables(d: RankData, top: int = TOP_STACKS) -> Tables:
    """``op_stacks`` and ``gpu_annotations`` rows of one rank (module docstring)."""
    out: dict[str, Sequence[Row]] = {}
    if len(d.gpu_ts) and (d.gpu_rt >= 0).any():
        out["op_stacks"] = op_stack_rows(d, build_stacks(d), top)
    if d.gpu_annotations:
        out["gpu_annotations"] = gpu_annotation_rows(d)
    return out
