"""Per-operation memory from the allocator's ``[memory]`` events: what each operator allocates and frees, and
the peak of each step.

torch.profiler with ``profile_memory=True`` writes one instant event per allocation (``Bytes`` > 0)
and free (``Bytes`` < 0), with the block's ``Addr``, the device (``Device Type`` 0 CPU, 1 CUDA;
``Device Id``) and, in newer torch, the allocator's ``Total Allocated`` and ``Total Reserved``
after it. An event belongs to the innermost operator running on its thread at its time (the
call stacks' nesting). ``op_memory``: per operator and device, allocations and frees (count and
bytes), the net, and the bytes it allocated that no free in the trace released (matched by
address: held across the capture's end, or leaked). ``memory_peaks``: per step and device, the
highest ``Total Allocated`` and ``Total Reserved`` and the operator running at the peak; events
outside every ``ProfilerStep`` form one row with no step. Without ``[memory]`` events there is
no table (the trace was recorded without ``profile_memory``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from my_utils.profiling.kineto.call_stacks import OP, build_stacks
from my_utils.profiling.kineto.rank_data import RankData
from my_utils.profiling.kineto.rows import Row, Tables

TOP_OPERATORS = 100
_NO_OPERATOR = "(no operator)"


@dataclass(frozen=True)
class OpMemoryRow(Row):
    """Allocations and frees under one operator on one device of one rank."""

    rank: int | None
    operator: str
    device: str
    allocs: int
    alloc_bytes: int
    frees: int
    freed_bytes: int
    net_bytes: int
    unfreed_bytes: int
    largest_alloc: int
    example_index: int


@dataclass(frozen=True)
class MemoryPeakRow(Row):
    """The allocator's peak inside one step on one device of one rank."""

    rank: int | None
    step: int | None
    device: str
    peak_allocated: int | None
    peak_reserved: int | None
    operator_at_peak: str
    events: int
    example_index: int


def device_name(code: int) -> str:
    """``cuda:0`` / ``cpu`` from ``(Device Type + 1) * 1000 + Device Id + 1`` (``kineto.collect``)."""
    kind, index = int(code) // 1000 - 1, int(code) % 1000 - 1
    if kind == 0:
        return "cpu"
    if kind == 1:
        return f"cuda:{index}" if 0 <= index < 998 else "cuda"
    return f"device type {kind}:{index}" if kind > 0 else "unknown device"


def owners(d: RankData) -> Any:
    """For each ``[memory]`` event, the row of the innermost operator running on its thread (-1: none)."""
    n = len(d.mem_ts)
    out = np.full(n, -1, np.int64)
    n_ops = len(d.op_ts) if d.op_ts is not None else 0
    if not n or not n_ops:
        return out
    s = build_stacks(d)
    is_op = s.kind.mask(OP)
    for thread in np.unique(d.mem_thread).tolist():
        ops = np.flatnonzero(d.op_thread == thread)
        if not len(ops):
            continue
        ops = ops[np.argsort(d.op_ts[ops], kind="stable")]
        events = np.flatnonzero(d.mem_thread == thread)
        cand = np.searchsorted(d.op_ts[ops], d.mem_ts[events], side="right") - 1
        for e, c in zip(events.tolist(), cand.tolist(), strict=True):
            row = int(ops[c]) if c >= 0 else -1
            t = d.mem_ts[e]
            while row >= 0 and not (is_op[row] and d.op_end[row] >= t):
                row = int(s.parent[row])
            out[e] = row
    return out


def memory_tables(d: RankData, top: int = TOP_OPERATORS) -> Tables:
    """``op_memory`` and ``memory_peaks`` of one rank (module docstring)."""
    if d.mem_ts is None or not len(d.mem_ts):
        return {}
    owner = owners(d)
    nbytes = d.mem_bytes.astype(np.int64)
    op_key = np.where(owner >= 0, d.op_name[np.clip(owner, 0, None)] if len(d.op_name) else -1, -1)
    unfreed = _unfreed(d)
    rows = []
    for (k, dev) in {(int(a), int(b)) for a, b in zip(op_key.tolist(), d.mem_device.tolist(), strict=True)}:
        mine = (op_key == k) & (d.mem_device == dev)
        b = nbytes[mine]
        alloc, free = b[b > 0], b[b < 0]
        largest = int(np.argmax(np.where(b > 0, b, -1)))
        rows.append(OpMemoryRow(d.rank, d.names[k] if k >= 0 else _NO_OPERATOR, device_name(dev), len(alloc),
                                int(alloc.sum()), len(free), int(-free.sum()), int(b.sum()),
                                int(nbytes[mine & unfreed].sum()), int(alloc.max()) if len(alloc) else 0,
                                int(d.mem_index[np.flatnonzero(mine)[largest]])))
    rows.sort(key=lambda r: (-r.alloc_bytes, r.operator))
    out: dict[str, Sequence[Row]] = {"op_memory": rows[:top], "memory_peaks": _peaks(d, owner)}
    return out


def _unfreed(d: RankData) -> Any:
    """Allocations no later free of the same address and device releases within the trace."""
    live: dict[tuple[int, int], int] = {}
    order = np.argsort(d.mem_ts, kind="stable")
    for i in order.tolist():
        key = (int(d.mem_addr[i]), int(d.mem_device[i]))
        if d.mem_bytes[i] > 0:
            live[key] = i
        elif d.mem_bytes[i] < 0:
            live.pop(key, None)
    out = np.zeros(len(d.mem_ts), bool)
    out[list(live.values())] = True
    out &= d.mem_addr >= 0
    return out


def _peaks(d: RankData, owner: Any) -> list[MemoryPeakRow]:
    steps = sorted({(s[0], s[0] + s[1], s[2]) for s in d.step_events})
    starts = np.array([a for a, _b, _n in steps])
    ends = np.array([b for _a, b, _n in steps])
    pos = np.searchsorted(starts, d.mem_ts, side="right") - 1 if steps else np.full(len(d.mem_ts), -1)
    inside = (pos >= 0) & (d.mem_ts <= ends[np.clip(pos, 0, None)]) if steps else np.zeros(len(d.mem_ts), bool)
    step_of = np.where(inside, pos, -1)
    rows = []
    for p, dev in sorted({(int(a), int(b)) for a, b in zip(step_of.tolist(), d.mem_device.tolist(), strict=True)}):
        mine = np.flatnonzero((step_of == p) & (d.mem_device == dev))
        total = d.mem_total[mine]
        reserved = d.mem_reserved[mine]
        has_total = total >= 0
        at = int(mine[int(np.argmax(np.where(has_total, total, -1)))]) if has_total.any() else int(mine[0])
        who = int(owner[at])
        rows.append(MemoryPeakRow(d.rank, steps[p][2] if p >= 0 else None, device_name(dev),
                                  int(total.max()) if has_total.any() else None,
                                  int(reserved.max()) if (reserved >= 0).any() else None,
                                  d.names[int(d.op_name[who])] if who >= 0 else _NO_OPERATOR, len(mine),
                                  int(d.mem_index[at])))
    return rows
