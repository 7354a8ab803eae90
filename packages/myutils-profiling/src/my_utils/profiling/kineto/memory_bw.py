"""Memory copies and sets by subtype (Memcpy DtoH / HtoD / DtoD / ..., Memset), and the copy bandwidth over time.

Holistic Trace Analysis' ``get_memory_kernel_type`` names the subtype of a memory activity:
``Memset`` for sets, the first 11 characters (``Memcpy DtoH``) for copies, ``Memcpy Unknown``
otherwise. Its ``TraceCounters.get_memory_bw_time_series`` adds each copy's
``memory bandwidth (GB/s)`` argument while it runs (a copy of 0 µs counts as 1 µs), per
subtype; ``get_memory_bw_summary`` describes the positive points of that step function
(``test_generate_trace_with_counters``: 4 subtypes on its ``negative_queue_length`` trace, no
negative point). Tables:

``kineto_memory_kinds``
    per rank and subtype: copies, µs, bytes (the ``bytes`` argument), mean bandwidth (bytes
    over time, GB/s) — the memory rows of the kernel breakdown split by direction.
``kineto_memory_bw``
    per rank and subtype: HTA's summary (count, mean, std, min, quartiles, max GB/s of the
    concurrent bandwidth at each change).

The full step functions (for the counter tracks written back into a trace, and the
DataFrame API) come from :func:`bandwidth_series`. A rank without copies has no row.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from my_utils.core.lazy import lazy_module
from my_utils.profiling.kineto.kinds import KINDS, KernelKind
from my_utils.profiling.kineto.rank_data import RankData
from my_utils.profiling.kineto.rows import Row, Tables

if TYPE_CHECKING:
    import numpy as np
else:  # numpy only when a function runs: the parent process of a run merges rows and never needs it
    np = lazy_module("numpy", __name__, "np")

BANDWIDTH_ARG = "memory bandwidth (GB/s)"


def memory_subtype(name: str) -> str:
    """HTA's subtype of a memory activity: ``Memset``, ``Memcpy XtoY`` (11 characters) or ``Memcpy Unknown``."""
    if name[:6] == "Memset":
        return "Memset"
    if name[:6] != "Memcpy":
        return "Memcpy Unknown"
    return name[:11]


@dataclass(frozen=True)
class MemoryKindRow(Row):
    """Copies or sets of one subtype on one rank."""

    rank: int | None
    subtype: str
    count: int
    total_us: float
    bytes: float
    gb_per_s: float


@dataclass(frozen=True)
class MemoryBandwidthRow(Row):
    """HTA's bandwidth summary of one subtype on one rank (GB/s, over the positive points of its step function)."""

    rank: int | None
    subtype: str
    count: int
    mean: float
    std: float
    min: float
    p25: float
    p50: float
    p75: float
    max: float


def _memory_rows(d: RankData) -> Any:
    mem = KINDS.index(KernelKind.MEMORY)
    return np.flatnonzero((d.gpu_kind == mem) & ~d.gpu_sync) if len(d.gpu_ts) else np.zeros(0, np.int64)


def bandwidth_series(d: RankData) -> dict[str, tuple[Any, Any, int | None]]:
    """Per subtype: (times, GB/s after each change, the device of its first copy), HTA's step function."""
    rows = _memory_rows(d)
    per: dict[str, list[int]] = {}
    for r in rows.tolist():
        per.setdefault(memory_subtype(d.names[int(d.gpu_name[r])]), []).append(r)
    out: dict[str, tuple[Any, Any, int | None]] = {}
    for subtype, rs in sorted(per.items()):
        idx = np.array(rs, dtype=np.int64)
        bw = np.array([_number(d.gpu_args.get(int(r), {}).get(BANDWIDTH_ARG)) for r in rs])
        dur = np.where(d.gpu_dur[idx] == 0, 1.0, d.gpu_dur[idx])
        ts = np.concatenate((d.gpu_ts[idx], d.gpu_ts[idx] + dur))
        delta = np.concatenate((bw, -bw))
        order = np.argsort(ts, kind="stable")
        value = np.cumsum(delta[order])
        value = np.where(np.abs(value) < 1e-9 * max(1.0, float(np.abs(bw).max(initial=0.0))), 0.0, value)
        out[subtype] = (ts[order], value, int(d.gpu_device[idx[0]]))
    return out


def _number(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else 0.0


def memory_tables(d: RankData) -> Tables:
    """``memory_kinds`` and ``memory_bw`` rows of one rank (module docstring)."""
    rows = _memory_rows(d)
    if not len(rows):
        return {}
    acc: dict[str, list[float]] = {}
    for r in rows.tolist():
        a = acc.setdefault(memory_subtype(d.names[int(d.gpu_name[r])]), [0, 0.0, 0.0])
        a[0] += 1
        a[1] += float(d.gpu_dur[r])
        a[2] += _number(d.gpu_args.get(r, {}).get("bytes"))
    kinds = [MemoryKindRow(d.rank, s, int(a[0]), a[1], a[2], a[2] / a[1] / 1e3 if a[1] > 0 else math.nan)
             for s, a in sorted(acc.items(), key=lambda kv: -kv[1][1])]
    summary = []
    for subtype, (_ts, value, _dev) in bandwidth_series(d).items():
        v = value[value > 0]
        if not len(v):
            continue
        q25, q50, q75 = np.percentile(v, [25, 50, 75]).tolist()
        summary.append(MemoryBandwidthRow(d.rank, subtype, len(v), float(v.mean()),
                                          float(v.std(ddof=1)) if len(v) > 1 else math.nan, float(v.min()), q25, q50,
                                          q75, float(v.max())))
    return {"memory_kinds": kinds, "memory_bw": summary}
