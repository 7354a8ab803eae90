"""Critical path of one iteration (or a window): the chain of CPU and GPU work that set its length.

Holistic Trace Analysis' lightweight critical path analysis (``CriticalPathAnalysis`` and
``CPGraph.critical_path``/``summary`` in ``hta/analyzers/critical_path_analysis.py`` at
``f4d0062``), checked against its ``tests/test_critical_path_analysis.py`` on the traces it uses
(``EndToEndTestCase``: 1,008 marked events on the whole simple_add trace;
``test_critical_path_basic_add``: edge weights 15, 14, 17, 15, 32 around ``aten::relu_``, a
27 µs launch delay, a 7 µs kernel gap, zero-weight sync edges, 315 nodes on the path;
``test_critical_path_overlaid_trace``: 159 events and 314 edges on it, 21 of the default
kinds; ``test_critical_path_inter_stream_sync``: 149 nodes on AlexNet's path;
``test_critical_path_analysis_event_sync*``: the sync edges) — see ``test_kineto_critical_path.py``.

The graph is ``cp_graph``'s; the path is the longest (heaviest) path through it, found in
the order HTA's networkx call walks it (ties go to the first predecessor added, the path ends
at the first node of largest distance), so that the same edges win a tie. An edge weighing
-1 µs or less counts 0 (sub-µs rounding can end a child after its parent), as in HTA.

Each edge on the path is time of one kind (``bound_by``): ``cpu_bound`` (an operator or
runtime call running on the CPU), ``gpu_compute_bound`` / ``gpu_communication_bound`` (a GPU
activity; NCCL kernels are communication), ``gpu_kernel_launch_overhead`` (launch call →
kernel start), ``gpu_kernel_kernel_overhead`` (a gap between kernels of a stream);
dependencies and syncs weigh nothing. Tables (``rank`` on every row):

``kineto_critical_path``
    one row per rank: the window (``window``: what was analysed, ``window_us``), the graph's
    size (``graph_nodes``/``graph_edges``: nodes touched by an edge, as networkx counts them),
    the path (``path_nodes``, ``path_edges``, ``path_events``), its length (``length_us``), the
    share of each kind, and ``coverage_pct``, the path's length over the window's (gaps between
    top-level operators weigh nothing, so a path rarely covers its whole step). A window where
    no path can start (no CPU operator or runtime call in it) gives a row with an empty path and
    ``not_measured`` saying why, never no row.
``kineto_critical_path_breakdown``
    per rank and kind: µs on the path, % of the path, edges.
``kineto_critical_path_top``
    per rank, the events holding the most time on the path (name, CPU/GPU, kind, µs, %).

The default window is the step whose duration is the median of the trace's steps (the lower
one of an even count; the whole trace when it has none), among the steps holding CPU work: a
stub ``ProfilerStep`` closed right after ``prof.step()`` has nothing to start a path from and is
left out (the label says so). ``annotation=``/``instance=`` pick another window, as HTA's
arguments do (an annotation is any event whose name contains the text; ``instance`` counts
its occurrences in file order, or is a ``(first, last)`` range).
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import numpy as np

from my_utils.profiling.kineto import cp_graph
from my_utils.profiling.kineto.cp_graph import (
    DEPENDENCY,
    KERNEL_KERNEL,
    LAUNCH,
    SYNC,
    Graph,
    Window,
    build_graph,
)
from my_utils.profiling.kineto.kinds import KernelKind, kind_of
from my_utils.profiling.kineto.rank_data import RankData
from my_utils.profiling.kineto.rows import Row, Tables, pct

BOUNDS = ("cpu_bound", "gpu_compute_bound", "gpu_communication_bound", "gpu_kernel_launch_overhead",
          "gpu_kernel_kernel_overhead")
#: Edge kinds drawn in the overlaid trace by default (HTA's ``DEFAULT_EDGE_TYPES_IN_VIZ``).
DRAWN_EDGES = frozenset({DEPENDENCY, LAUNCH, SYNC})
TOP_EVENTS = 20


@dataclass(frozen=True)
class CriticalPathRow(Row):
    """The critical path of one rank's window: its size, its length and the share of each kind."""

    rank: int | None
    window: str
    window_us: float
    graph_nodes: int
    graph_edges: int
    path_nodes: int
    path_edges: int
    path_events: int
    length_us: float
    cpu_bound_pct: float
    gpu_compute_bound_pct: float
    gpu_communication_bound_pct: float
    gpu_kernel_launch_overhead_pct: float
    gpu_kernel_kernel_overhead_pct: float
    coverage_pct: float = math.nan
    not_measured: str = ""


@dataclass(frozen=True)
class PathBreakdownRow(Row):
    """Time of one kind on one rank's critical path."""

    rank: int | None
    bound_by: str
    us: float
    pct: float
    edges: int


@dataclass(frozen=True)
class PathEventRow(Row):
    """One event's time on the critical path (the edges attributed to it)."""

    rank: int | None
    name: str
    side: str
    bound_by: str
    us: float
    pct: float
    edges: int


@dataclass(frozen=True, slots=True)  # slots: a long step's path has tens of thousands of edges
class PathEdge:
    """One edge of the graph, by the events at its ends (``traceEvents`` indices) and which end of each."""

    src: int
    src_start: bool
    dst: int
    dst_start: bool
    weight: float
    type: str
    critical: bool
    attributed: int | None
    bound_by: str


@dataclass(frozen=True)
class CriticalPath:
    """The result of one window: the graph's size, the path, and every edge (for the overlaid trace).

    ``path`` lists the path's nodes as ``(traceEvents index, is start)``; ``edges`` every edge of
    the graph with ``critical`` set on the path's; ``events`` the indices of the events on it.
    """

    rank: int | None
    window: Window
    graph_nodes: int
    graph_edges: int
    path: tuple[tuple[int, bool], ...]
    length_us: float
    events: frozenset[int]
    edges: tuple[PathEdge, ...] = field(repr=False)

    @property
    def path_edges(self) -> tuple[PathEdge, ...]:
        """The edges of the path, in path order."""
        on = {(e.src, e.src_start, e.dst, e.dst_start): e for e in self.edges if e.critical}
        return tuple(on[(a[0], a[1], b[0], b[1])] for a, b in pairwise(self.path))

    def breakdown(self) -> dict[str, float]:
        """µs on the path per kind (:data:`BOUNDS`)."""
        out = dict.fromkeys(BOUNDS, 0.0)
        for e in self.edges:
            if e.critical and e.bound_by:
                out[e.bound_by] += max(e.weight, 0.0) if e.weight > -1 else 0.0
        return out


def window_of(d: RankData, annotation: str | None = None, instance: int | tuple[int, int] | None = 0) -> Window:
    """The window to analyse (module docstring); ``annotation=""`` is the whole trace."""
    if annotation is None:
        steps = sorted(((s[1], s[0], s[2]) for s in d.step_events), key=lambda x: x[1])
        if not steps:
            return _whole(d)
        worked = [st for st in steps if _holds_cpu_work(d, st[1], st[1] + st[0])]
        skipped = len(steps) - len(worked) if worked else 0
        steps = worked or steps
        by_dur = sorted(range(len(steps)), key=lambda i: (steps[i][0], i))
        dur, ts, number = steps[by_dur[(len(steps) - 1) // 2]]
        left_out = f"; {skipped} without CPU work left out" if skipped else ""
        counted = f"{len(steps)} step" + ("s" if len(steps) != 1 else "")
        return Window(ts, ts + dur, f"ProfilerStep#{number} (median of {counted}{left_out})")
    if annotation == "":
        return _whole(d)
    ids = {i for i, n in enumerate(d.names) if annotation in n}
    found: list[tuple[int, float, float]] = []  # (traceEvents index, start, end): file order
    for names, ts, end, index in ((d.op_name, d.op_ts, d.op_end, d.op_index),
                                  (d.ann_name, d.ann_ts, d.ann_end, d.ann_index),
                                  (d.rt_name, d.rt_ts, d.rt_ts + d.rt_dur, d.rt_index)):
        if names is not None and len(names):
            for i in np.flatnonzero(np.isin(names, list(ids) or [-1])).tolist():
                found.append((int(index[i]), float(ts[i]), float(end[i])))
    found.extend((s[4], s[0], s[0] + s[1]) for s in d.step_events if s[5] in ids)
    found.sort()
    first, last = (instance, instance) if isinstance(instance, int) else instance if instance else (0, 0)
    chosen = found[first:last + 1]
    if not chosen:
        raise LookupError(f"annotation {annotation!r} instance {instance!r}: {len(found)} occurrence(s) in the trace")
    label = f"{d.names[_name_at(d, chosen[0][0])]}" + (f" … ({len(chosen)} occurrences)" if len(chosen) > 1 else "")
    return Window(min(c[1] for c in chosen), max(c[2] for c in chosen), label)


def _holds_cpu_work(d: RankData, start: float, end: float) -> bool:
    """Whether an operator or runtime call of positive duration starts in ``[start, end]`` (a path can start there)."""
    for ts, dur in ((d.op_ts, d.op_dur), (d.rt_ts, d.rt_dur)):
        if ts is not None and len(ts) and bool(np.any((ts >= start) & (ts <= end) & (dur > 0))):
            return True
    return False


def empty_reason(d: RankData, w: Window) -> str:
    """Why window ``w`` has no critical path (the ``not_measured`` text of its row)."""
    if not len(d.rt_ts) and not (d.op_ts is not None and len(d.op_ts)):
        return "the trace holds no CPU operators or runtime calls (the graph starts from them)"
    if not _holds_cpu_work(d, w.start, w.end):
        return (f"the window ({w.label}, {(w.end - w.start) / 1e3:,.3f} ms) holds no CPU operator or runtime "
                "call, where the path would start")
    return "the window's events form no dependency edge"


def _name_at(d: RankData, index: int) -> int:
    for names, idx in ((d.op_name, d.op_index), (d.ann_name, d.ann_index), (d.rt_name, d.rt_index)):
        if idx is not None and len(idx):
            hit = np.flatnonzero(idx == index)
            if len(hit):
                return int(names[hit[0]])
    return next(s[5] for s in d.step_events if s[4] == index)


def _whole(d: RankData) -> Window:
    starts = [a.min() for a in (d.gpu_ts, d.rt_ts, d.op_ts, d.ann_ts) if a is not None and len(a)]
    ends = [a.max() for a in (d.gpu_end, d.rt_ts + d.rt_dur, d.op_end, d.ann_end) if a is not None and len(a)]
    starts += [s[0] for s in d.step_events]
    ends += [s[0] + s[1] for s in d.step_events]
    if not starts:
        return Window(0.0, 0.0, "whole trace (empty)")
    return Window(float(min(starts)), float(max(ends)), "whole trace")


def longest_path(g: Graph) -> tuple[list[int], float, int]:
    """The heaviest path through ``g`` (HTA's networkx ``dag_longest_path`` order), its length, the graph's node count.

    networkx walks nodes in topological generations, starting from the nodes without a
    predecessor in the order they entered the graph (through their first edge), children in edge
    order; a node keeps its first predecessor of largest distance; the path ends at the first
    node of largest distance. Edge ids are insertion order, so sorting them by node keeps it.
    """
    src = np.frombuffer(g.src, dtype=np.int32) if len(g.src) else np.zeros(0, np.int32)
    dst = np.frombuffer(g.dst, dtype=np.int32) if len(g.dst) else np.zeros(0, np.int32)
    if not len(src):
        return [], 0.0, 0
    weight = np.frombuffer(g.weight, dtype=np.float64)
    weight = np.where(weight > -1, weight, 0.0)  # HTA counts an edge of -1 µs or less as 0
    # nodes in the order they entered the graph: u then v of each edge, first appearance
    ends = np.empty(2 * len(src), dtype=np.int64)
    ends[0::2], ends[1::2] = src, dst
    _uniq, first = np.unique(ends, return_index=True)
    del _uniq
    order = ends[np.sort(first)]
    del ends, first
    n_nodes = 2 * len(g.events)
    # typed arrays, not lists: indexing them is as fast and they hold no object per edge
    by_src = np.argsort(src, kind="stable")
    succ_start = _ints(np.searchsorted(src[by_src], np.arange(n_nodes + 1)))
    succ = _ints(dst[by_src])
    by_dst = np.argsort(dst, kind="stable")
    starts = np.searchsorted(dst[by_dst], np.arange(n_nodes + 1))
    pred_start = _ints(starts)
    pred_node = _ints(src[by_dst])
    pred_w = array("d", weight[by_dst].tobytes())
    indegree = _ints(np.diff(starts))
    del by_src, by_dst, starts, weight
    generation = order[np.frombuffer(indegree, dtype=np.int64)[order] == 0].tolist()
    # a typed array, not a list: a list holds an int object per node besides its slot
    topo: array[int] = array("q")
    while generation:
        topo.extend(generation)
        following: list[int] = []
        for node in generation:
            for child in succ[succ_start[node]:succ_start[node + 1]]:
                indegree[child] -= 1
                if indegree[child] == 0:
                    following.append(child)
        generation = following
    if len(topo) != len(order):
        raise ValueError(f"the dependency graph has a cycle ({len(order) - len(topo)} node(s) on it)")
    dist = array("d", bytes(8 * n_nodes))
    back = array("q", range(n_nodes))
    for v in topo:
        lo, hi = pred_start[v], pred_start[v + 1]
        if lo == hi:
            continue
        best_d, best_u = -math.inf, v
        for j in range(lo, hi):
            cand = dist[pred_node[j]] + pred_w[j]
            if cand > best_d:
                best_d, best_u = cand, pred_node[j]
        if best_d >= 0:
            dist[v], back[v] = best_d, best_u
    # the first node of largest distance in topological order (as max() would pick it)
    end = int(topo[int(np.argmax(np.frombuffer(dist, dtype=np.float64)[np.frombuffer(topo, dtype=np.int64)]))])
    path: list[int] = []
    prev = None
    while prev != end:
        path.append(end)
        prev = end
        end = back[end]
    path.reverse()
    return path, dist[path[-1]], len(order)


def _ints(a: Any) -> array[int]:
    return array("q", np.asarray(a, dtype=np.int64).tobytes())


def _bound(g: Graph, e: int, d: RankData) -> tuple[str, int | None]:
    """What edge ``e``'s time is (``BOUNDS``, or "" for dependencies and syncs) and the event it belongs to."""
    kind = g.type_of(e)
    owner = g.owner_of(e)
    if kind == KERNEL_KERNEL:
        return "gpu_kernel_kernel_overhead", owner
    if kind == LAUNCH:
        return "gpu_kernel_launch_overhead", None
    if kind in (DEPENDENCY, SYNC) or owner is None:
        return "", owner
    k = g.node(owner)
    if k is None or g.kind[k] != cp_graph.GPU:
        return "cpu_bound", owner
    name = d.names[g.name[k]]
    return ("gpu_communication_bound" if kind_of(name) == KernelKind.COMMUNICATION else "gpu_compute_bound"), owner


def critical_path(d: RankData, annotation: str | None = None, instance: int | tuple[int, int] | None = 0,
                  zero_weight_launch_edges: bool = False, all_edges: bool = True) -> CriticalPath:
    """The critical path of one window of ``d`` (module docstring).

    ``all_edges=False`` keeps only the path's edges in ``edges`` (the tables need no more; the
    graph of a long step has tens of thousands). ``zero_weight_launch_edges=True`` keeps every
    launch before its activity with a zero-weight edge, as HTA's unit tests run it (its
    ``CRITICAL_PATH_ADD_ZERO_WEIGHT_LAUNCH_EDGE=1``); by default, as HTA's default, they are left out.
    """
    w = window_of(d, annotation, instance)
    g = build_graph(d, w, zero_weight_launch_edges)
    nodes, length, graph_nodes = longest_path(g)
    on_path = {g.edge(u, v) for u, v in pairwise(nodes)}
    edges = []
    for e in range(len(g.src)) if all_edges else sorted(on_path):
        bound, owner = _bound(g, e, d)
        u, v = g.src[e], g.dst[e]
        edges.append(PathEdge(g.event_of(u), u % 2 == 0, g.event_of(v), v % 2 == 0, float(g.weight[e]), g.type_of(e),
                              e in on_path, owner, bound))
    return CriticalPath(d.rank, w, graph_nodes, len(g.src), tuple((g.event_of(n), n % 2 == 0) for n in nodes),
                        float(length), frozenset(g.event_of(n) for n in nodes), tuple(edges))


def critical_path_tables(d: RankData, annotation: str | None = None, instance: int | tuple[int, int] | None = 0,
                         top: int = TOP_EVENTS) -> Tables:
    """The ``critical_path*`` tables of one rank (module docstring); none without CPU or GPU events.

    The same tables as :func:`cp_rows` of :func:`critical_path`, summed straight from the graph:
    no :class:`PathEdge` per path edge (a long step's path has tens of thousands of them, and the
    tables run inside every rank's analysis).
    """
    has_cpu = bool(len(d.rt_ts)) or (d.op_ts is not None and len(d.op_ts) > 0)
    w = window_of(d, annotation, instance) if has_cpu else _whole(d)
    g = build_graph(d, w) if has_cpu else None
    nodes, length, graph_nodes = longest_path(g) if g is not None else ([], 0.0, 0)
    if g is None or not nodes:
        nan = math.nan
        return {"critical_path": [CriticalPathRow(d.rank, w.label, w.end - w.start, graph_nodes,
                                                  len(g.src) if g is not None else 0, 0, 0, 0, 0.0,
                                                  nan, nan, nan, nan, nan, nan, empty_reason(d, w))]}
    events = np.frombuffer(g.events, dtype=np.int64)
    n_events = len(np.unique(events[np.asarray(nodes, dtype=np.int64) // 2]))
    # edge-id order, as critical_path(all_edges=False) lists them: the sums add in the same order
    on_path = sorted({g.edge(u, v) for u, v in pairwise(nodes)})

    def critical() -> Iterator[tuple[float, str, int | None]]:
        for e in on_path:
            bound, owner = _bound(g, e, d)
            yield float(g.weight[e]), bound, owner

    return _tables(d, w, graph_nodes, len(g.src), len(nodes), n_events, float(length), critical, top)


def cp_rows(d: RankData, cp: CriticalPath, top: int = TOP_EVENTS) -> Tables:
    """The tables of one :class:`CriticalPath` result."""

    def critical() -> Iterator[tuple[float, str, int | None]]:
        return ((e.weight, e.bound_by, e.attributed) for e in cp.edges if e.critical)

    return _tables(d, cp.window, cp.graph_nodes, cp.graph_edges, len(cp.path), len(cp.events), cp.length_us,
                   critical, top)


def _tables(d: RankData, w: Window, graph_nodes: int, graph_edges: int, path_nodes: int, path_events: int,
            length_us: float, critical: Callable[[], Iterator[tuple[float, str, int | None]]], top: int) -> Tables:
    """The three tables from the path's edges, each ``(weight, bound_by, attributed event)``, read twice."""
    split = dict.fromkeys(BOUNDS, 0.0)
    edges: Counter[str] = Counter()
    per_event: dict[tuple[int, str], list[float]] = {}
    for weight, bound, owner in critical():
        if not bound:
            continue
        split[bound] += max(weight, 0.0) if weight > -1 else 0.0
        edges[bound] += 1
        if owner is not None and weight > 0:
            acc = per_event.setdefault((owner, bound), [0.0, 0])
            acc[0] += weight
            acc[1] += 1
    total = sum(split.values())
    cpu, compute, comm, launch, gaps = (pct(split[b], total) for b in BOUNDS)
    summary = CriticalPathRow(d.rank, w.label, w.end - w.start, graph_nodes, graph_edges, path_nodes,
                              max(path_nodes - 1, 0), path_events, length_us, cpu, compute, comm, launch, gaps,
                              coverage_pct=pct(length_us, w.end - w.start))
    breakdown = [PathBreakdownRow(d.rank, b, split[b], pct(split[b], total), edges[b]) for b in BOUNDS if edges[b]]
    names = _names_by_index(d, {owner for owner, _bound in per_event})
    grouped: dict[tuple[str, str, str], list[float]] = {}
    for (index, bound), (us, n) in per_event.items():
        side = "cpu" if bound == "cpu_bound" else "gpu"
        acc = grouped.setdefault((names.get(index, f"event {index}"), side, bound), [0.0, 0])
        acc[0] += us
        acc[1] += n
    top_rows = [PathEventRow(d.rank, name, side, bound, us, pct(us, total), int(n))
                for (name, side, bound), (us, n) in grouped.items()]
    top_rows.sort(key=lambda r: (-r.us, r.name))
    return {"critical_path": [summary], "critical_path_breakdown": breakdown,
            "critical_path_top": top_rows[:top]}


def _names_by_index(d: RankData, wanted: set[int]) -> dict[int, str]:
    """The names of the events at the ``traceEvents`` indices in ``wanted``."""
    out: dict[int, str] = {}
    keys = np.fromiter(wanted, dtype=np.int64, count=len(wanted))
    for names, index in ((d.op_name, d.op_index), (d.rt_name, d.rt_index), (d.gpu_name, d.gpu_index),
                         (d.ann_name, d.ann_index)):
        if index is not None and len(index) and len(keys):
            hit = np.flatnonzero(np.isin(index, keys))
            out.update((int(index[i]), d.names[int(names[i])]) for i in hit.tolist())
    return out

