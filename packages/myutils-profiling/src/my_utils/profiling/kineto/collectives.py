"""Collectives from NCCL kernel arguments: algorithm and bus bandwidth per collective, per rank and across ranks.

torch.profiler writes on each NCCL kernel its collective's arguments (``Collective name``,
``In msg nelems``, ``Out msg nelems``, ``dtype``, ``Group size``, ``Process Group Name`` /
``Description`` / ``Ranks``; HTA parses the same ones: ``tests/test_trace_parse.py::
test_nccl_parser_config`` — 21 NCCL kernels in its ``nccl_data`` trace, the longest an
``allreduce`` of 2,049,000 elements in ``default_pg`` of ranks ``[0, 1]``).

Bandwidths follow NCCL-tests' definitions (``doc/PERFORMANCE.md`` and each test's ``GetBw``): the
*algorithm bandwidth* is the collective's data size ``S`` over the kernel's time; the *bus
bandwidth* scales it by what a ring moves per rank so that it compares with the link's speed,
whatever the group size ``n``: ``allreduce`` 2(n−1)/n; ``reducescatter``, ``allgather``,
``alltoall``, ``gather``, ``scatter`` (n−1)/n; ``broadcast``, ``reduce``, send / receive 1.
``S`` is the *whole* array (:func:`total_elements`): the buffer of an allreduce, broadcast,
reduce or send; ``n`` × the per-rank chunk of a reducescatter (its input), allgather and gather
(their output) and scatter (its input); a rank's whole send buffer for all-to-all. torch writes
the whole in one of ``In msg nelems`` / ``Out msg nelems`` and the chunk in the other, but a
variant that records only the chunk on both sides is scaled by ``n`` rather than read as the
whole. Bytes per element come from the dtype; GB/s are 10⁹ bytes per second.

``kineto_collectives`` (per rank): one row per (process group, collective, dtype, message
size): count, time, bytes, algbw and busbw (over the summed time), the GPU's per-direction
NVLink bandwidth (``kineto.peaks``) and the busbw's share of it; ``flagged`` when a message of
at least :data:`MIN_FLAG_BYTES` reaches under :data:`FLAG_SHARE` of the link (small messages are
latency-bound: never flagged). A group larger than the GPUs of one host may cross the network,
whose speed the trace does not record: its link is "not measured" — unless the ``nccl_log`` option names
the job's ``NCCL_DEBUG=INFO`` log, whose communicator of that size decides (``nccl.topology``).

``kineto_collectives_ranks`` (across ranks): the k-th occurrence of a (process group,
collective, dtype, size) on each rank is one collective; its *transfer* time is the shortest
kernel among the ranks (the last rank to arrive waits for no one), the *wait* is the longest
minus the shortest. Per key: collectives seen on every rank, mean transfer and wait, busbw from
the transfer time, and the rank that arrived last most often.

A kernel without the arguments (older traces) has no row: its sizes are unknown. The kind is
read from the kernel name then (``ncclKernel_AllReduce…``) only to say so in ``unsized``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from my_utils.core.lazy import lazy_module
from my_utils.profiling.hardware.peaks import nvlink_bandwidth
from my_utils.profiling.kineto.kinds import KINDS, KernelKind
from my_utils.profiling.kineto.rank_data import RankData
from my_utils.profiling.kineto.rows import Row, Tables

if TYPE_CHECKING:
    import numpy as np
else:  # numpy only when a function runs: the parent process of a run merges rows and never needs it
    np = lazy_module("numpy", __name__, "np")

#: Bytes per element of the dtype names torch writes.
DTYPE_BYTES = {"Float": 4, "Half": 2, "BFloat16": 2, "Double": 8, "Long": 8, "Int": 4, "Short": 2, "Char": 1,
               "Byte": 1, "Bool": 1, "Float8_e4m3fn": 1, "Float8_e5m2": 1, "ComplexFloat": 8, "ComplexDouble": 16,
               "UInt16": 2, "UInt32": 4, "UInt64": 8}
MIN_FLAG_BYTES = 1 << 20
FLAG_SHARE = 0.25


#: Collective kinds, by the prefix of the name lower-cased without ``_`` (``_reduce_scatter_base``,
#: ``allgather_into_tensor_coalesced``, ``all_to_allv``...); longer prefixes first.
_KINDS = ("allreduce", "reducescatter", "allgather", "alltoall", "broadcast", "sendrecv", "send", "recv", "reduce",
          "gather", "scatter")
_RING = frozenset({"reducescatter", "allgather", "alltoall", "gather", "scatter"})


def collective_kind(collective: str) -> str | None:
    """The NCCL-tests kind of a collective's name (``allreduce``, ``reducescatter``...), None when unknown."""
    c = collective.lower().replace("_", "").lstrip()
    return next((k for k in _KINDS if c.startswith(k)), None)


def bus_factor(collective: str, n: int) -> float | None:
    """NCCL-tests' bus-bandwidth factor of a collective over ``n`` ranks (None: not a known collective)."""
    kind = collective_kind(collective)
    if n < 1 or kind is None:
        return None
    if kind == "allreduce":
        return 2.0 * (n - 1) / n
    if kind in _RING:
        return (n - 1) / n
    return 1.0


def total_elements(collective: str, in_nelems: int, out_nelems: int, n: int) -> int | None:
    """NCCL-tests' ``S`` in elements from torch's recorded counts (module docstring); None for an unknown kind."""
    kind = collective_kind(collective)
    if kind in ("reducescatter", "scatter"):
        return max(in_nelems, n * out_nelems)
    if kind in ("allgather", "gather"):
        return max(out_nelems, n * in_nelems)
    if kind in ("alltoall", "send", "recv", "sendrecv"):
        return max(in_nelems, out_nelems)
    if kind in ("allreduce", "broadcast", "reduce"):
        return in_nelems or out_nelems
    return None


@dataclass(frozen=True)
class CollectiveRow(Row):
    """One kind of collective of one rank (process group, collective, dtype, size), and its bandwidths."""

    rank: int | None
    process_group: str
    collective: str
    dtype: str
    group_size: int
    message_bytes: float
    count: int
    total_us: float
    mean_us: float
    algbw_gbps: float
    busbw_gbps: float
    link_gbps: float
    link_pct: float
    flagged: bool
    link: str


@dataclass(frozen=True)
class CollectiveRanksRow(Row):
    """One kind of collective across ranks: transfer time (shortest kernel) and wait (longest − shortest)."""

    process_group: str
    collective: str
    dtype: str
    group_size: int
    message_bytes: float
    ranks: int
    collectives: int
    transfer_us: float
    wait_us: float
    busbw_gbps: float
    last_rank: int | None


@dataclass(frozen=True)
class Collective:
    """One NCCL kernel with its arguments (what the across-ranks matching reads)."""

    process_group: str
    collective: str
    dtype: str
    group_size: int
    message_bytes: float
    ts_us: float
    dur_us: float


def collectives_of(d: RankData) -> list[Collective]:
    """Every NCCL kernel of ``d`` that carries its collective's arguments, by start."""
    comm = KINDS.index(KernelKind.COMMUNICATION)
    out: list[Collective] = []
    for r in np.flatnonzero(d.gpu_kind == comm).tolist() if len(d.gpu_ts) else []:
        a = d.gpu_args.get(r)
        if not a or not isinstance(a.get("Collective name"), str):
            continue
        name = a["Collective name"]
        dtype = str(a.get("dtype", ""))
        size = DTYPE_BYTES.get(dtype)
        group = a.get("Group size")
        counts = [a.get("In msg nelems"), a.get("Out msg nelems")]
        if size is None or not isinstance(group, int) or not any(isinstance(c, int) for c in counts):
            continue
        ins, outs = (c if isinstance(c, int) else 0 for c in counts)
        nelems = total_elements(name, ins, outs, group)
        if nelems is None:  # a kind NCCL-tests does not define (barrier...): its size, no bus bandwidth
            nelems = ins or outs
        pg = str(a.get("Process Group Description") or a.get("Process Group Name") or "")
        out.append(Collective(pg, name, dtype, group, float(nelems * size), float(d.gpu_ts[r]), float(d.gpu_dur[r])))
    out.sort(key=lambda c: c.ts_us)
    return out


def link_speed(gpu: object, gpus_per_host: object, group_size: int, *, source: str = "the trace") -> tuple[float, str]:
    """Per-direction link bandwidth (GB/s) a group of ``group_size`` ranks can expect, and its name (or why not).

    Shared with the Nsight Systems collectives (``nsys.nccl_sizes``), so both compare a bus bandwidth with the same
    figure of ``kineto.peaks``; ``source`` names where ``gpu`` and ``gpus_per_host`` were read.
    """
    if not isinstance(gpu, str) or not gpu:
        return math.nan, f"not measured: {source} names no GPU"
    if isinstance(gpus_per_host, int) and group_size > gpus_per_host:
        return math.nan, f"not measured: {group_size} ranks > {gpus_per_host} GPUs of one host (network speed unknown)"
    peak = nvlink_bandwidth(gpu)
    if peak is None:
        return math.nan, f"not measured: no NVLink figure for {gpu}"
    return peak.value / 1e9, f"NVLink of {peak.model} per direction ({peak.source})"


def _link(d: RankData, group_size: int, nccl_log: str | None = None) -> tuple[float, str]:
    """Per-direction link bandwidth (GB/s) a group of ``group_size`` ranks can expect, and its name (or why not).

    With ``nccl_log`` (the job's ``NCCL_DEBUG=INFO`` log), the communicator of that size as the log describes
    it decides (``nccl.topology.expected_busbw``); without one, or when the log has no such communicator,
    the GPU's NVLink figure when the group fits on one host.
    """
    if nccl_log:
        from my_utils.profiling.nccl.topology import cached_topology, expected_busbw

        comm = cached_topology(str(nccl_log)).for_group(group_size)
        if comm is not None:
            gbps, why = expected_busbw(comm, d.context.get("gpu"))
            return gbps, f"{why} [NCCL log {Path(nccl_log).name}]"
    return link_speed(d.context.get("gpu"), d.context.get("gpu_count"), group_size)


def collective_rows(d: RankData, nccl_log: str | None = None) -> list[CollectiveRow]:
    """Per-rank rows (module docstring), most time first."""
    groups: dict[tuple[str, str, str, int, float], list[float]] = {}
    for c in collectives_of(d):
        groups.setdefault((c.process_group, c.collective, c.dtype, c.group_size, c.message_bytes), []).append(c.dur_us)
    rows = []
    for (pg, name, dtype, n, nbytes), durs in groups.items():
        total = sum(durs)
        algbw = nbytes * len(durs) / (total * 1e-6) / 1e9 if total > 0 else math.nan
        factor = bus_factor(name, n)
        busbw = algbw * factor if factor is not None else math.nan
        link, link_name = _link(d, n, nccl_log)
        share = busbw / link if link == link and link > 0 and busbw == busbw else math.nan
        flagged = bool(share == share and share < FLAG_SHARE and nbytes >= MIN_FLAG_BYTES)
        rows.append(CollectiveRow(d.rank, pg, name, dtype, n, nbytes, len(durs), total, total / len(durs), algbw,
                                  busbw, link, 100.0 * share if share == share else math.nan, flagged, link_name))
    rows.sort(key=lambda r: (-r.total_us, r.collective))
    return rows


def collective_tables(d: RankData, nccl_log: str | None = None) -> Tables:
    """``collectives`` rows of one rank (none without sized NCCL kernels), and each kernel for the across-ranks match.

    ``_collective_kernels`` (a table whose name starts with ``_``) crosses to :func:`across_ranks` and
    never reaches the report.
    """
    rows = collective_rows(d, nccl_log)
    if not rows:
        return {}
    kernels = [{"process_group": c.process_group, "collective": c.collective, "dtype": c.dtype,
                "group_size": c.group_size, "message_bytes": c.message_bytes, "dur_us": c.dur_us}
               for c in collectives_of(d)]
    return {"collectives": rows, "_collective_kernels": kernels}


def across_ranks(results: Sequence[Any]) -> Tables:
    """``collectives_ranks``: the k-th occurrence of each kind matched across ranks (module docstring)."""
    import statistics  # here, in the parent: a worker loads this module for its per-rank rows only

    per_rank: dict[int | None, dict[tuple[str, str, str, int, float], list[float]]] = {}
    for r in results:
        per_rank[r.rank] = {}
        for c in r.tables.get("_collective_kernels", ()):
            key = (c["process_group"], c["collective"], c["dtype"], c["group_size"], c["message_bytes"])
            per_rank[r.rank].setdefault(key, []).append(c["dur_us"])
    if len(per_rank) < 2:
        return {}
    keys = set.intersection(*(set(v) for v in per_rank.values()))
    rows = []
    for key in sorted(keys):
        n = min(len(v[key]) for v in per_rank.values())
        transfer, wait, last = [], [], Counter[Any]()
        for k in range(n):
            durs = {rank: v[key][k] for rank, v in per_rank.items()}
            shortest = min(durs, key=lambda x: durs[x])
            transfer.append(durs[shortest])
            wait.append(max(durs.values()) - durs[shortest])
            last[shortest] += 1
        pg, name, dtype, group, nbytes = key
        mean_transfer = statistics.fmean(transfer)
        factor = bus_factor(name, group)
        busbw = nbytes / (mean_transfer * 1e-6) / 1e9 * factor if factor is not None and mean_transfer > 0 else math.nan
        rows.append(CollectiveRanksRow(pg, name, dtype, group, nbytes, len(per_rank), n, mean_transfer,
                                       statistics.fmean(wait), busbw, last.most_common(1)[0][0]))
    rows.sort(key=lambda r: (-(r.transfer_us + r.wait_us) * r.collectives, r.collective))
    return {"collectives_ranks": rows}
