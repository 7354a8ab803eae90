"""GPU kernel breakdown: time per kind (computation / communication / memory / other) and per kernel.

``total_us`` sums durations (two concurrent kernels count twice, like Holistic Trace
Analysis' per-kernel sums); ``busy_us`` is the time covered by at least one kernel of the
kind. Per-kernel statistics keep the sum of squares so ranks merge exactly. A memory
activity's row names its ``subtype`` (Memcpy DtoH / HtoD / DtoD / Memset / Memcpy Unknown:
HTA's ``get_memory_kernel_type``; ``kineto.memory_bw``), other rows leave it empty.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from my_utils.core.lazy import lazy_module
from my_utils.profiling.kineto import intervals
from my_utils.profiling.kineto.kinds import KINDS, KernelKind
from my_utils.profiling.kineto.memory_bw import memory_subtype
from my_utils.profiling.kineto.rank_data import RankData
from my_utils.profiling.kineto.rows import Row, pct

if TYPE_CHECKING:
    import numpy as np
else:  # numpy only when a function runs: the parent process of a run merges rows and never needs it
    np = lazy_module("numpy", __name__, "np")


@dataclass(frozen=True)
class KernelKindRow(Row):
    """GPU time of one kind on one rank (``rank`` None: all ranks)."""

    rank: int | None
    kind: str
    count: int
    total_us: float
    busy_us: float
    share_pct: float  # of the rank's summed GPU time


@dataclass(frozen=True)
class KernelStat(Row):
    """Duration statistics of one kernel name on one rank (``rank`` None: all ranks)."""

    _private = ("sumsq_us2",)

    rank: int | None
    kind: str
    name: str
    count: int
    total_us: float
    mean_us: float
    min_us: float
    max_us: float
    std_us: float  # population standard deviation
    sumsq_us2: float
    subtype: str = ""  # memory activities: Memcpy DtoH / HtoD / DtoD / Memset / Memcpy Unknown


def kind_breakdown(d: RankData) -> list[KernelKindRow]:
    """One row per kind present on the rank."""
    dur = d.gpu_dur
    grand = float(dur.sum())
    rows = []
    for k, kind in enumerate(KINDS):
        sel = d.gpu_kind == k
        if not sel.any():
            continue
        total = float(dur[sel].sum())
        rows.append(KernelKindRow(d.rank, kind.value, int(sel.sum()), total,
                                  intervals.length(d.gpu_ts[sel], d.gpu_end[sel]), pct(total, grand)))
    return rows


def kernel_stats(d: RankData) -> list[KernelStat]:
    """Statistics of every GPU activity name of the rank, largest total first."""
    if not len(d.gpu_name):
        return []
    dur = d.gpu_dur
    order = np.argsort(d.gpu_name, kind="stable")
    names, dur_sorted = d.gpu_name[order], dur[order]
    starts = np.concatenate(([0], np.flatnonzero(np.diff(names)) + 1))
    counts = np.diff(np.concatenate((starts, [len(names)])))
    sums = np.add.reduceat(dur_sorted, starts)
    sumsq = np.add.reduceat(dur_sorted * dur_sorted, starts)
    mins = np.minimum.reduceat(dur_sorted, starts)
    maxs = np.maximum.reduceat(dur_sorted, starts)
    kinds = d.gpu_kind[order][starts].tolist()  # a name has one kind
    rows = [_stat(d.rank, KINDS[k].value, d.names[nid], n, s, sq, lo, hi)
            for nid, k, n, s, sq, lo, hi in zip(names[starts].tolist(), kinds, counts.tolist(), sums.tolist(),
                                                 sumsq.tolist(), mins.tolist(), maxs.tolist(), strict=True)]
    rows.sort(key=lambda r: (-r.total_us, r.name))
    return rows


def _stat(rank: int | None, kind: str, name: str, n: int, s: float, sq: float, lo: float, hi: float) -> KernelStat:
    mean = s / n
    var = max(sq / n - mean * mean, 0.0)
    subtype = memory_subtype(name) if kind == KernelKind.MEMORY.value and name != "others" else ""
    return KernelStat(rank, kind, name, n, s, mean, lo, hi, math.sqrt(var), sq, subtype)


def merge_kind_rows(rows: Iterable[KernelKindRow]) -> list[KernelKindRow]:
    """All-ranks rows (``rank`` None): counts and sums added, busy time summed over ranks."""
    acc: dict[str, list[float]] = {}
    for r in rows:
        a = acc.setdefault(r.kind, [0, 0.0, 0.0])
        a[0] += r.count
        a[1] += r.total_us
        a[2] += r.busy_us
    grand = sum(a[1] for a in acc.values())
    return [KernelKindRow(None, kind.value, int(acc[kind.value][0]), acc[kind.value][1], acc[kind.value][2],
                          pct(acc[kind.value][1], grand))
            for kind in KINDS if kind.value in acc]


def merge_stats(stats: Iterable[KernelStat]) -> list[KernelStat]:
    """All-ranks statistics (``rank`` None) per (kind, name), largest total first."""
    acc: dict[tuple[str, str], list[float]] = {}
    for s in stats:
        a = acc.get((s.kind, s.name))
        if a is None:
            acc[(s.kind, s.name)] = [s.count, s.total_us, s.sumsq_us2, s.min_us, s.max_us]
        else:
            a[0] += s.count
            a[1] += s.total_us
            a[2] += s.sumsq_us2
            a[3] = min(a[3], s.min_us)
            a[4] = max(a[4], s.max_us)
    out = [_stat(None, kind, name, int(a[0]), a[1], a[2], a[3], a[4]) for (kind, name), a in acc.items()]
    out.sort(key=lambda r: (-r.total_us, r.name))
    return out


def top_kernels(stats: Sequence[KernelStat], top: int) -> list[KernelStat]:
    """The ``top`` largest kernels per (rank, kind); the rest folded into one ``others`` row each."""
    groups: dict[tuple[int | None, str], list[KernelStat]] = {}
    for s in stats:
        groups.setdefault((s.rank, s.kind), []).append(s)
    out: list[KernelStat] = []
    for (rank, kind), rows in groups.items():
        rows = sorted(rows, key=lambda r: (-r.total_us, r.name))
        out.extend(rows[:top])
        rest = rows[top:]
        if rest:
            merged = merge_stats(replace(r, rank=None, name="others") for r in rest)[0]
            out.append(replace(merged, rank=rank, kind=kind))
    return out
