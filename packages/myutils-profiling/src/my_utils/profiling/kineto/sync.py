"""CUDA synchronisation: where the GPU or the host waited, from Kineto's ``cuda_sync`` events.

A ``cuda_sync`` event on a stream (``Stream Sync``, ``Stream Wait Event``...) is GPU time of
kind *other*, counted in the temporal breakdown as non-compute time as Holistic Trace
Analysis does; one on no stream (``stream`` -1: ``Event Sync``, ``Context Sync``) is the host
blocked until the GPU got there: a CPU stall, reported here on its own (``where`` =
``host``) and never added to GPU time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from my_utils.core.lazy import lazy_module
from my_utils.profiling.kineto.rank_data import RankData
from my_utils.profiling.kineto.rows import Row

if TYPE_CHECKING:
    import numpy as np
else:  # numpy only when a function runs: the parent process of a run merges rows and never needs it
    np = lazy_module("numpy", __name__, "np")


@dataclass(frozen=True)
class SyncRow(Row):
    """One kind of sync on one rank: on a GPU stream (``where`` ``stream``) or on the host (``host``)."""

    rank: int | None
    name: str
    where: str
    count: int
    total_us: float
    max_us: float


def sync_rows(d: RankData) -> list[SyncRow]:
    """Rows per (where, name), longest total first."""
    rows: list[SyncRow] = []
    if d.gpu_sync is not None and d.gpu_sync.any():
        sel = np.flatnonzero(d.gpu_sync)
        rows.extend(_group(d, "stream", d.gpu_name[sel], d.gpu_dur[sel]))
    if d.hsync_ts is not None and len(d.hsync_ts):
        rows.extend(_group(d, "host", d.hsync_name, d.hsync_dur))
    rows.sort(key=lambda r: (r.where != "host", -r.total_us, r.name))
    return rows


def _group(d: RankData, where: str, names: np.ndarray, durs: np.ndarray) -> list[SyncRow]:
    out = []
    for nid in np.unique(names).tolist():
        m = names == nid
        out.append(SyncRow(d.rank, d.names[nid], where, int(m.sum()), float(durs[m].sum()), float(durs[m].max())))
    return out
