"""Idle explained: for each gap on the compute stream, the CPU operator that was running while the GPU waited.

Holistic Trace Analysis splits idle time by cause (``kineto.idle``: host wait, kernel wait,
other) but does not say *what* the host was doing. Here, per device, the compute stream is the
stream with the most computation-kernel time; each gap on it that is *host wait* (the launch of
the activity ending the gap started after the gap began: ``kineto.idle``'s rule) is given to
the innermost CPU operator or ``record_function`` annotation running on the launching thread
when the gap began (data loading shows as its ``enumerate(DataLoader)…`` annotation). When nothing
runs on a thread other than the main one (the thread holding the ``ProfilerStep`` events, else
the one with the most operators), the gap goes to what the main thread runs then: autograd's
thread sits idle between backward operators while the main thread is inside ``backward()`` (a
``## backward ##`` annotation, say), and that time is the backward pass's. ``where`` says which
thread named it. A gap with nothing recorded running on either is :data:`NOTHING`. Per rank,
``kineto_idle_host_ops`` lists the operators by the idle time they held: "the GPU waited N ms on
these host ops".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from my_utils.profiling.kineto.kinds import KINDS, KernelKind
from my_utils.profiling.kineto.rank_data import RankData
from my_utils.profiling.kineto.rows import Row, Tables, pct

NOTHING = "(nothing on the launching thread)"
LAUNCHING = "launching thread"
MAIN = "main thread (the launching thread ran nothing)"
TOP = 20


@dataclass(frozen=True)
class IdleHostOpRow(Row):
    """One CPU operator the GPU's compute stream waited on: how many gaps, how long, which share of host-wait idle."""

    rank: int | None
    device: int | None
    stream: int | str | None
    operator: str
    where: str
    gaps: int
    idle_us: float
    pct_of_host_wait: float


def _compute_lanes(d: RankData) -> dict[int, int]:
    """device -> the lane with the most computation-kernel time on it."""
    comp = KINDS.index(KernelKind.COMPUTATION)
    sel = (d.gpu_kind == comp) & ~d.gpu_sync
    best: dict[int, tuple[float, int]] = {}
    for lane in np.unique(d.gpu_stream[sel]).tolist():
        on = sel & (d.gpu_stream == lane)
        dev = int(d.gpu_device[on][0])
        t = float(d.gpu_dur[on].sum())
        if dev not in best or t > best[dev][0]:
            best[dev] = (t, lane)
    return {dev: lane for dev, (_t, lane) in best.items()}


def _host_wait_gaps(d: RankData, lane: int) -> tuple[Any, Any, Any]:
    """(gap start, gap length, launch row) of the host-wait gaps of one lane."""
    rows = np.flatnonzero((d.gpu_stream == lane) & ~d.gpu_sync)
    ts, end = d.gpu_ts[rows], d.gpu_end[rows]
    reach = np.maximum.accumulate(end)
    start = reach[:-1]
    gap = np.maximum(ts[1:] - start, 0.0)
    rt = d.gpu_rt[rows[1:]]
    launched = rt >= 0
    rt_ts = np.where(launched, d.rt_ts[np.clip(rt, 0, None)] if len(d.rt_ts) else 0.0, -np.inf)
    host = (gap > 0) & launched & (rt_ts > start)
    return start[host], gap[host], rt[host]


def _running_op(d: RankData, thread: int, times: Any) -> list[int]:
    """For each time, the name id of the innermost operator or annotation of ``thread`` covering it (-1: none)."""
    out = [-1] * len(times)
    parts = [(d.op_ts[s], d.op_end[s], d.op_name[s]) for s in [np.flatnonzero(d.op_thread == thread)]
             if d.op_ts is not None and len(d.op_ts)]
    parts += [(d.ann_ts[s], d.ann_end[s], d.ann_name[s]) for s in [np.flatnonzero(d.ann_thread == thread)]]
    ts = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0)
    if not len(ts):
        return out
    end = np.concatenate([p[1] for p in parts])
    name = np.concatenate([p[2] for p in parts])
    order_ops = np.lexsort((-(end - ts), ts))  # by start, the outer first on ties
    ts, end, name = ts[order_ops], end[order_ops], name[order_ops]
    stack: list[int] = []
    j = 0
    for q in np.argsort(times, kind="stable").tolist():
        t = times[q]
        while j < len(ts) and ts[j] <= t:
            while stack and end[stack[-1]] <= ts[j]:
                stack.pop()
            stack.append(j)
            j += 1
        while stack and end[stack[-1]] <= t:
            stack.pop()
        # the stack holds open events, innermost last (a sibling that ended is gone)
        out[q] = int(name[stack[-1]]) if stack else -1
    return out


def _main_thread(d: RankData) -> int | None:
    """The thread lane of the ProfilerStep events, else the one with the most operators and annotations."""
    if d.step_events:
        lanes = [s[3] for s in d.step_events]
        return max(set(lanes), key=lanes.count)
    held = np.concatenate([a for a in (d.op_thread, d.ann_thread) if a is not None and len(a)] or [np.zeros(0, int)])
    if not len(held):
        return None
    values, counts = np.unique(held, return_counts=True)
    return int(values[int(np.argmax(counts))])


def idle_host_op_rows(d: RankData, top: int = TOP) -> list[IdleHostOpRow]:
    """The operators the compute stream's host-wait gaps fell on, most idle first (module docstring)."""
    if len(d.gpu_ts) < 2:
        return []
    rows: list[IdleHostOpRow] = []
    for device, lane in sorted(_compute_lanes(d).items()):
        starts, gaps, rts = _host_wait_gaps(d, lane)
        if not len(gaps):
            continue
        owner: dict[tuple[str, str], list[float]] = {}
        threads = d.rt_thread[rts]
        main = _main_thread(d)
        for thread in np.unique(threads).tolist():
            sel = np.flatnonzero(threads == thread)
            ops = _running_op(d, int(thread), starts[sel])
            where = [LAUNCHING if op >= 0 else "" for op in ops]
            idle = [k for k, op in enumerate(ops) if op < 0]
            if idle and main is not None and main != thread:
                for k, op in zip(idle, _running_op(d, main, starts[sel[idle]]), strict=True):
                    if op >= 0:
                        ops[k], where[k] = op, MAIN
            for i, op, w in zip(sel.tolist(), ops, where, strict=True):
                a = owner.setdefault((d.names[op], w) if op >= 0 else (NOTHING, ""), [0, 0.0])
                a[0] += 1
                a[1] += float(gaps[i])
        total = float(gaps.sum())
        stream = d.lanes[lane][1]
        for (name, where_), (n, us) in sorted(owner.items(), key=lambda kv: -kv[1][1])[:top]:
            rows.append(IdleHostOpRow(d.rank, None if device < 0 else device,
                                      stream if stream is None or isinstance(stream, (int, str)) else str(stream),
                                      name, where_, int(n), us, pct(us, total)))
    return rows


def idle_explained_tables(d: RankData, top: int = TOP) -> Tables:
    """``idle_host_ops`` rows of one rank (none without host-wait gaps)."""
    rows = idle_host_op_rows(d, top)
    return {"idle_host_ops": rows} if rows else {}
