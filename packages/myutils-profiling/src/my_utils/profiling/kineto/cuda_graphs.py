"""CUDA graphs in a Kineto trace: the graph launches, the kernels they ran, and the operator that launched them.

A graph replay submits every kernel of the graph with one ``cudaGraphLaunch`` (``cuGraphLaunch`` from
the driver API, ``hipGraphLaunch`` on ROCm); CUPTI gives each of those kernels the launch call's
correlation id, so in the trace they hang under that one runtime call. Kineto built against CUDA 12
or newer also writes ``graph id`` and ``graph node id`` on every kernel (0 outside a graph). A kernel
is *graph-launched* when its runtime call is a graph launch or its ``graph id`` is not 0.
Holistic Trace Analysis has no graph view (its launch statistics join kernels to ``cudaLaunchKernel`` calls
only, so graph kernels fall out of them silently).

Why it matters: per-kernel launch cost and launch delay do not exist for these kernels (the launch
statistics leave them out: their call is no kernel launch), and a run that already replays graphs
must not be told to use CUDA graphs. The ``cuda_graphs`` table names the launch call in its ``name``
column, so the capture's contents (``analysis.contents``) see the feature and the advice gate
(``analysis.advice_gate``) drops that advice.

Tables (per rank): ``kineto_cuda_graphs``, one row per (launch call, graph id): launches, the
kernels they ran, their GPU time and its share of the rank's kernel time, the operator (or
annotation) the launches ran under most often, and the graph captures / instantiations in the
window (one-off work: a capture inside the profiled steps is not steady state);
``kineto_cuda_graph_kernels``, the kernels the graphs ran, most GPU time first, each with its graph
and launching operator. No row without a graph launch (a trace without graphs has no such table).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from my_utils.profiling.kineto.kinds import KINDS, KernelKind
from my_utils.profiling.kineto.rank_data import RankData
from my_utils.profiling.kineto.rows import Row, Tables, pct

#: Runtime or driver calls that replay a graph.
GRAPH_LAUNCH = re.compile(r"^(cuda|cu|hip)GraphLaunch(_\w+)?$")
#: Calls that capture or instantiate a graph (one-off work when they fall inside the window).
GRAPH_BUILD = re.compile(r"^(cuda|cu|hip)(StreamBeginCapture|StreamEndCapture|GraphInstantiate)\w*$")
TOP_KERNELS = 20


@dataclass(frozen=True)
class CudaGraphRow(Row):
    """One launch call and graph on one rank: how often it replayed, what it ran, under which operator."""

    rank: int | None
    name: str
    graph_id: int | None
    launches: int
    kernels: int
    kernel_us: float
    kernel_share_pct: float
    launched_under: str
    captures: int
    instantiations: int


@dataclass(frozen=True)
class CudaGraphKernelRow(Row):
    """One kernel run by CUDA graph replays on one rank."""

    rank: int | None
    kernel: str
    graph_id: int | None
    count: int
    total_us: float
    launched_by: str


def _graph_ids(d: RankData) -> Any:
    """The ``graph id`` argument of every GPU row (0 when absent)."""
    out = np.zeros(len(d.gpu_ts), dtype=np.int64)
    for row, args in d.gpu_args.items():
        gid = args.get("graph id")
        if isinstance(gid, int) and not isinstance(gid, bool):
            out[row] = gid
    return out


def graph_launched(d: RankData) -> Any:
    """A mask over ``d``'s GPU rows: those a CUDA graph replayed (their runtime call is a graph launch, or their
    ``graph id`` is not 0). The one test of graph-launched work: ``ops.attribution`` uses it too."""
    if not len(d.gpu_ts):
        return np.zeros(0, bool)
    out = _graph_ids(d) != 0
    if len(d.rt_ts):
        launch_ids = [i for i in np.unique(d.rt_name).tolist() if GRAPH_LAUNCH.match(d.names[i])]
        if launch_ids:
            out |= (d.gpu_rt >= 0) & np.isin(d.rt_name[np.clip(d.gpu_rt, 0, None)], launch_ids)
    return out


def _launching_ops(d: RankData, calls: Any) -> list[str]:
    """The name of the innermost operator or annotation around each runtime row of ``calls`` ("" when none)."""
    from my_utils.profiling.kineto.call_stacks import ANNOTATION, OP, build_stacks

    if not len(calls):
        return []
    s = build_stacks(d)
    owner = s.nearest(s.kind.mask(OP) | s.kind.mask(ANNOTATION))
    rt_offset = (0 if d.op_ts is None else len(d.op_ts)) + len(d.ann_ts)
    rows = owner[np.asarray(calls) + rt_offset]
    return [d.names[int(s.name[r])] if r >= 0 else "" for r in rows.tolist()]


def cuda_graph_tables(d: RankData, top: int = TOP_KERNELS) -> Tables:
    """``cuda_graphs`` and ``cuda_graph_kernels`` of one rank (module docstring); none without a graph launch."""
    if not len(d.rt_ts):
        return {}
    is_launch = np.array([GRAPH_LAUNCH.match(n) is not None for n in d.names] or [False])
    is_build = np.array([GRAPH_BUILD.match(n) is not None for n in d.names] or [False])
    launch_rows = np.flatnonzero(is_launch[d.rt_name])
    if not len(launch_rows):
        return {}
    gids = _graph_ids(d)
    kernel = (d.gpu_kind != KINDS.index(KernelKind.MEMORY)) & ~d.gpu_sync if len(d.gpu_ts) else np.zeros(0, bool)
    in_graph = graph_launched(d) & kernel
    total_kernel_us = float(d.gpu_dur[kernel].sum()) if len(d.gpu_ts) else 0.0
    under = dict(zip(launch_rows.tolist(), _launching_ops(d, launch_rows), strict=True))
    builds = Counter(d.names[int(n)] for n in d.rt_name[is_build[d.rt_name]].tolist())
    captures = builds_of(builds, "Capture") // 2 if builds else 0  # a begin and an end per capture
    instantiations = builds_of(builds, "Instantiate")
    # per (launch call name, graph id): the launches, and the kernels each launch ran
    groups: dict[tuple[str, int | None], dict[str, Any]] = {}
    kernel_rows = np.flatnonzero(in_graph)
    graph_of_call: dict[int, int | None] = {}
    for g in kernel_rows.tolist():
        call = int(d.gpu_rt[g])
        gid = int(gids[g]) or None
        if call >= 0 and is_launch[d.rt_name[call]]:
            graph_of_call.setdefault(call, gid)
    for call in launch_rows.tolist():
        key = (d.names[int(d.rt_name[call])], graph_of_call.get(call))
        grp = groups.setdefault(key, {"launches": 0, "kernels": 0, "us": 0.0, "under": Counter()})
        grp["launches"] += 1
        grp["under"][under[call] or "(no operator)"] += 1
    kernel_groups: dict[tuple[int, int | None], dict[str, Any]] = {}
    for g in kernel_rows.tolist():
        call = int(d.gpu_rt[g])
        launched = call >= 0 and bool(is_launch[d.rt_name[call]])
        name = d.names[int(d.rt_name[call])] if launched else "graph id on the kernel"
        gid = int(gids[g]) or (graph_of_call.get(call) if launched else None)
        grp = groups.setdefault((name, gid), {"launches": 0, "kernels": 0, "us": 0.0, "under": Counter()})
        grp["kernels"] += 1
        grp["us"] += float(d.gpu_dur[g])
        kg = kernel_groups.setdefault((int(d.gpu_name[g]), gid), {"count": 0, "us": 0.0, "by": Counter()})
        kg["count"] += 1
        kg["us"] += float(d.gpu_dur[g])
        kg["by"][f"{name} under {under.get(call) or '(no operator)'}" if launched else name] += 1
    rows = [CudaGraphRow(d.rank, name, gid, g["launches"], g["kernels"], g["us"], pct(g["us"], total_kernel_us),
                         _most(g["under"]), captures, instantiations)
            for (name, gid), g in groups.items()]
    rows.sort(key=lambda r: (-r.kernel_us, -r.launches, r.name))
    kernels = [CudaGraphKernelRow(d.rank, d.names[nid], gid, k["count"], k["us"], _most(k["by"]))
               for (nid, gid), k in kernel_groups.items()]
    kernels.sort(key=lambda r: (-r.total_us, r.kernel))
    return {"cuda_graphs": rows, "cuda_graph_kernels": kernels[:top]}


def builds_of(calls: Counter[str], word: str) -> int:
    """How many of the graph-building calls have ``word`` in their name."""
    return sum(n for name, n in calls.items() if word in name)


def _most(counts: Counter[str]) -> str:
    """The most frequent entry, with how many others there were."""
    if not counts:
        return ""
    (top, n), others = counts.most_common(1)[0], len(counts) - 1
    return top + (f" ({n} of {sum(counts.values())}; {others} other)" if others else "")
