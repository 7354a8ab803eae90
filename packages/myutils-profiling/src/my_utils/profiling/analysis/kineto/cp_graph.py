"""The CPU–GPU dependency graph of a window of one rank's trace (the critical path's graph).

Holistic Trace Analysis' construction (``CPGraph`` in ``hta/analyzers/critical_path_analysis.py``,
release 0.5.0), restated: every CPU operator, runtime call and GPU activity of the window is
two nodes (its start and its end, at those times); edges say what had to happen before what:

``operator``
    within a CPU thread, walking the call stack depth first: from one node to the next
    (start of a child, end of a child, end of the parent), weight = the time between them, so
    the edges of an operator add up to its duration; a GPU activity's start → end. The edge
    into the end of a blocking call (``cudaDeviceSynchronize``, ``cudaStreamSynchronize``,
    ``cudaEventQuery``, ``cudaEventSynchronize``, ``cudaMemcpy``, ``cudaMemcpyAsync``) weighs 0:
    the time it waited belongs to the GPU work it waited for.
``dependency``
    between consecutive top-level operators of a thread (end → start), weight 0.
``kernel_launch_delay``
    launch call's start → the activity's start, when the stream's queue was empty at the
    launch (queue length 1 after it, 0 when the activity started: ``queue_length``) and the
    previous activity of the stream (and any activity it waits on) ended before the launch;
    weight = the time between the two starts. Otherwise a zero-weight edge of the same type keeps
    the launch before the activity (HTA's ``CRITICAL_PATH_ADD_ZERO_WEIGHT_LAUNCH_EDGE=1``).
``kernel_kernel_delay``
    previous activity's end on the stream → this one's start, weight = the gap, when it was not
    a launch delay.
``sync_dependency``
    weight 0: from the GPU work a host sync waited for to the end of the sync call
    (``Stream Sync``: the stream's last activity; ``Context Sync``: every stream's last; ``Event
    Sync``: the last activity launched on the event's stream before ``cudaEventRecord``), and
    from that work to the first activity launched after ``cudaStreamWaitEvent`` (``Stream Wait
    Event``: a GPU → GPU dependency across streams).

The window's events are HTA's: CPU events (operators, annotations, runtime calls, host syncs)
starting inside it with a positive duration; GPU activities whose launch call is one of them
(and every ``Stream Wait Event``). Annotations shape the call stacks but get no nodes. Edges
are added in HTA's order (threads by ``(pid, tid)``, then GPU activities by start, syncs by
end), since the longest path's tie-breaking follows it. Streams are keyed by GPU lane
``(device, stream)`` where HTA keys by stream number (the same on one GPU).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from my_utils.profiling.analysis.kineto.queue_length import QUEUE_LAUNCHES, queue_series
from my_utils.profiling.analysis.kineto.rank_data import RankData

OPERATOR = "operator"
DEPENDENCY = "dependency"
LAUNCH = "kernel_launch_delay"
KERNEL_KERNEL = "kernel_kernel_delay"
SYNC = "sync_dependency"
EDGE_TYPES = (OPERATOR, DEPENDENCY, LAUNCH, KERNEL_KERNEL, SYNC)
#: Calls whose wait is the GPU's time, not the CPU's (the edge into their end weighs 0).
BLOCKING_CALLS = frozenset({"cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventQuery",
                            "cudaEventSynchronize", "cudaMemcpy", "cudaMemcpyAsync"})
_EVENT_RECORD = "cudaEventRecord"
_STREAM_WAIT = "cudaStreamWaitEvent"

# event kinds of the window's table
CPU_OP, RUNTIME, ANNOTATION, HOST_SYNC, GPU = 0, 1, 2, 3, 4


@dataclass
class Window:
    """The part of the trace analysed: ``[start, end]`` (relative µs, both ends included) and its name."""

    start: float
    end: float
    label: str


@dataclass
class Graph:
    """Nodes (``2k`` start, ``2k + 1`` end of the ``k``-th node event) and edges in insertion order.

    ``events[k]`` is the ``traceEvents`` index of node event ``k``; ``kind``/``name``/``stream``
    describe it (``stream`` -1 on the CPU). ``edges[(u, v)] = [weight, type]``;
    ``attributed[(u, v)]`` is the event an operator or kernel-kernel edge is attributed to.
    """

    events: list[int] = field(default_factory=list)
    kind: list[int] = field(default_factory=list)
    name: list[int] = field(default_factory=list)
    lane: list[int] = field(default_factory=list)
    node_ts: list[float] = field(default_factory=list)
    edges: dict[tuple[int, int], list[Any]] = field(default_factory=dict)
    attributed: dict[tuple[int, int], int] = field(default_factory=dict)
    node_of: dict[int, int] = field(default_factory=dict)  # traceEvents index -> node event k

    def add_event(self, index: int, kind: int, name: int, lane: int, ts: float, end: float) -> None:
        """Make the two nodes of one event."""
        self.node_of[index] = len(self.events)
        self.events.append(index)
        self.kind.append(kind)
        self.name.append(name)
        self.lane.append(lane)
        self.node_ts.extend((ts, end))

    def start(self, index: int) -> int | None:
        """The start node of the event at ``traceEvents[index]`` (None when it has no nodes)."""
        k = self.node_of.get(index)
        return None if k is None else 2 * k

    def end(self, index: int) -> int | None:
        """The end node of the event at ``traceEvents[index]`` (None when it has no nodes)."""
        k = self.node_of.get(index)
        return None if k is None else 2 * k + 1

    def add_edge(self, u: int, v: int, kind: str, zero_weight: bool = False) -> tuple[int, int]:
        """An edge ``u → v``; dependencies, syncs and ``zero_weight`` edges weigh 0, others the time between."""
        weight = 0.0 if kind in (DEPENDENCY, SYNC) or zero_weight else self.node_ts[v] - self.node_ts[u]
        self.edges[(u, v)] = [weight, kind]
        return (u, v)

    def attribute(self, e: tuple[int, int], parent: int) -> None:
        """The event an operator or kernel-kernel edge's time belongs to (HTA's four cases)."""
        kind = self.edges[e][1]
        if kind not in (OPERATOR, KERNEL_KERNEL):
            return
        u, v = e
        if kind == KERNEL_KERNEL or u % 2 == 0:
            owner = self.events[u // 2]  # a delay belongs to the previous kernel; from a start: that event
        elif v % 2 == 1:
            owner = self.events[v // 2]  # end → end: unwinding into the enclosing event
        else:
            owner = parent  # end → start: the gap between two children belongs to their parent
        self.attributed[e] = owner

    def event_of(self, node: int) -> int:
        """The ``traceEvents`` index of a node's event."""
        return self.events[node // 2]


# -- the window's events ---------------------------------------------------------------


@dataclass
class _Host:
    """One CPU event of the window (operators, annotations, runtime calls, host syncs)."""

    index: int
    ts: float
    dur: float
    kind: int
    name: int
    node: bool
    blocking: bool


def _rounded(ts: Any, dur: Any, integral: bool) -> tuple[Any, Any]:
    """HTA's rounding of sub-µs traces (start up, end down), so that nested events stay nested."""
    if integral:
        return ts, dur
    start = np.ceil(ts)
    return start, np.floor(ts + dur) - start


def _host_events(d: RankData, w: Window, integral: bool) -> dict[int, list[_Host]]:
    """The window's CPU events per thread lane (HTA: ``stream == -1``, starting in the window, ``dur > 0``)."""
    blocking = {i for i, n in enumerate(d.names) if n in BLOCKING_CALLS}
    per_thread: dict[int, list[_Host]] = {}

    def add(thread: Any, ts: Any, dur: Any, names: Any, index: Any, kind: int, node: bool | Any) -> None:
        if ts is None or not len(ts):
            return
        ts, dur = _rounded(ts, dur, integral)
        sel = np.flatnonzero((ts >= w.start) & (ts <= w.end) & (dur > 0))
        flags = np.broadcast_to(np.asarray(node, dtype=bool), ts.shape)
        for i in sel.tolist():
            n = int(names[i])
            per_thread.setdefault(int(thread[i]), []).append(
                _Host(int(index[i]), float(ts[i]), float(dur[i]), kind, n, bool(flags[i]), n in blocking))

    add(d.op_thread, d.op_ts, d.op_dur, d.op_name, d.op_index, CPU_OP, True)
    add(d.rt_thread, d.rt_ts, d.rt_dur, d.rt_name, d.rt_index, RUNTIME, True)
    add(d.ann_thread, d.ann_ts, d.ann_end - d.ann_ts, d.ann_name, d.ann_index, ANNOTATION, False)
    if d.step_events:
        st = np.array([s[0] for s in d.step_events])
        add(np.array([s[3] for s in d.step_events]), st, np.array([s[1] for s in d.step_events]),
            np.array([s[5] for s in d.step_events]), np.array([s[4] for s in d.step_events]), ANNOTATION,
            np.array([bool(s[6]) for s in d.step_events]))
    return per_thread


def _stack_order(events: list[_Host]) -> list[tuple[int, int]]:
    """Start (+1) and end (-1) points in HTA's call-stack order (``compare_events``), as (position, ±1)."""
    points = []
    for i, e in enumerate(events):
        # at one time: ends before starts; among starts the longer (the parent) first, then the lower
        # index; among ends the shorter (the child) first, then the higher index
        points.append(((e.ts, 1, -e.dur, e.index), i, 1))
        points.append(((e.ts + e.dur, 0, e.dur, -e.index), i, -1))
    points.sort(key=lambda p: p[0])
    return [(i, sign) for _key, i, sign in points]


def _children(events: list[_Host]) -> tuple[list[list[int]], list[int]]:
    """The call stack of one thread: each event's children (in start order) and parent (-1: top level)."""
    children: list[list[int]] = [[] for _ in events]
    parent = [-1] * len(events)
    top: list[int] = []
    stack: list[int] = []
    for i, sign in _stack_order(events):
        if sign > 0:
            if stack:
                parent[i] = stack[-1]
                children[stack[-1]].append(i)
            else:
                top.append(i)
            stack.append(i)
        elif stack:
            stack.pop()  # HTA pops the innermost event whatever ends (overlaps are not nesting)
    return [top, *children], parent


def _walk(roots: list[int], children: list[list[int]]) -> Iterator[tuple[int, bool]]:
    """Depth-first ``(event, entering)`` over the call stack (iterative: stacks can be deep)."""
    todo: list[tuple[int, bool]] = [(r, True) for r in reversed(roots)]
    while todo:
        i, entering = todo.pop()
        yield i, entering
        if entering:
            todo.append((i, False))
            todo.extend((c, True) for c in reversed(children[i]))


def _cpu_edges(g: Graph, events: list[_Host]) -> None:
    """HTA's ``_construct_graph_from_call_stack`` over one thread."""
    tree, parent = _children(events)
    roots, children = tree[0], tree[1:]
    last: int | None = None
    last_top: int | None = None
    last_parent = -1
    depth = 0
    for i, entering in _walk(roots, children):
        e = events[i]
        if not e.node:
            continue
        start, end = g.start(e.index), g.end(e.index)
        assert start is not None and end is not None
        parent_index = events[parent[i]].index if parent[i] >= 0 else -1
        if entering:
            if depth == 0 and last_top is not None:
                g.add_edge(last_top, start, DEPENDENCY)
            depth += 1
            if last is not None:
                g.attribute(g.add_edge(last, start, OPERATOR), last_parent)
            last, last_parent = start, parent_index
        else:
            depth -= 1
            if last is not None:
                g.attribute(g.add_edge(last, end, OPERATOR, zero_weight=e.blocking), last_parent)
            if depth == 0:
                last, last_top = None, end
            else:
                last, last_parent = end, parent_index


def build_graph(d: RankData, w: Window, zero_weight_launch_edges: bool = True) -> Graph:
    """The dependency graph of window ``w`` of ``d`` (module docstring)."""
    integral = _integral(d)
    g = Graph()
    hosts = _host_events(d, w, integral)
    gpu_ts, gpu_dur = _rounded(d.gpu_ts, d.gpu_dur, integral)
    rt_ts_r, rt_dur_r = _rounded(d.rt_ts, d.rt_dur, integral)
    # GPU activities of the window: launched from a runtime call inside it, or Stream Wait Events
    wait_names = {i for i, n in enumerate(d.names) if n == "Stream Wait Event"}
    launched = d.gpu_rt >= 0
    rt = np.clip(d.gpu_rt, 0, None)
    in_window = launched & (rt_ts_r[rt] >= w.start) & (rt_ts_r[rt] <= w.end) & (rt_dur_r[rt] > 0) \
        if len(d.rt_ts) else np.zeros(len(d.gpu_ts), bool)
    gpu_rows = np.flatnonzero(in_window | np.isin(d.gpu_name, list(wait_names) or [-1]))
    # nodes: every CPU operator and runtime call, GPU activities with a correlation, in start order
    node_rows: list[tuple[float, int, int, int, int, float]] = []
    for thread_events in hosts.values():
        for e in thread_events:
            if e.node:
                node_rows.append((e.ts, e.index, e.kind, e.name, -1, e.ts + e.dur))
    for r in gpu_rows.tolist():
        if d.gpu_corr[r] >= 0:
            node_rows.append((float(gpu_ts[r]), int(d.gpu_index[r]), GPU, int(d.gpu_name[r]), int(d.gpu_stream[r]),
                              float(gpu_ts[r] + gpu_dur[r])))
    node_rows.sort(key=lambda x: (x[0], x[1]))
    for ts, index, kind, name, lane, end in node_rows:
        g.add_event(index, kind, name, lane, ts, end)
    # CPU edges, thread by thread in (pid, tid) order
    for thread in sorted(hosts, key=lambda t: _sort_key(d.threads[t])):
        _cpu_edges(g, hosts[thread])
    _gpu_edges(d, g, gpu_rows, gpu_ts, gpu_dur, rt_ts_r, zero_weight_launch_edges, w, integral)
    return g


def _sort_key(lane: tuple[Any, Any]) -> tuple[Any, ...]:
    return tuple((not isinstance(x, (int, float)), x if isinstance(x, (int, float)) else 0, str(x)) for x in lane)


def _integral(d: RankData) -> bool:
    """Whether the trace's times are whole µs (HTA rounds sub-µs traces before building the graph)."""
    for a in (d.gpu_ts, d.gpu_dur, d.rt_ts, d.rt_dur):
        if a is not None and len(a) and not np.all(np.mod(a, 1.0) == 0):
            return False
    return True


def _gpu_edges(d: RankData, g: Graph, gpu_rows: Any, gpu_ts: Any, gpu_dur: Any, rt_ts: Any, zero_weight: bool,
               w: Window, integral: bool) -> None:
    """HTA's ``_construct_graph_from_kernels``: launches, kernel-kernel gaps and syncs, by start (syncs by end)."""
    q = queue_series(d)
    name = d.names
    rt_of_corr: dict[int, int] = {}
    for r, c in enumerate(d.rt_corr.tolist()):
        if c >= 0:
            rt_of_corr.setdefault(c, r)
    launch_ids = {i for i, n in enumerate(name) if n in QUEUE_LAUNCHES}
    # launches with their activity's lane, by start: for the event-record and stream-wait lookups
    launches = [(float(d.rt_ts[r]), r, int(d.gpu_stream[gr]), int(d.gpu_device[gr]), gr)
                for gr, r in enumerate(d.gpu_rt.tolist()) if r >= 0 and int(d.rt_name[r]) in launch_ids]
    launches.sort()
    rows: list[tuple[float, int, str, int]] = []  # (sort time, order, "gpu"/"hsync", row)
    sync_names = {"Stream Sync", "Context Sync", "Event Sync", "Stream Wait Event"}
    for r in gpu_rows.tolist():
        if d.gpu_corr[r] < 0:
            continue
        is_sync = bool(d.gpu_sync[r])
        rows.append((float(gpu_ts[r] + gpu_dur[r]) if is_sync else float(gpu_ts[r]), len(rows), "gpu", r))
    if d.hsync_ts is not None and len(d.hsync_ts):
        hs_ts, hs_dur = _rounded(d.hsync_ts, d.hsync_dur, integral)
        for r in range(len(d.hsync_ts)):
            n = name[int(d.hsync_name[r])]
            if n in ("Event Sync", "Context Sync") and d.hsync_corr[r] >= 0 and w.start <= hs_ts[r] <= w.end \
                    and hs_dur[r] > 0:
                rows.append((float(hs_ts[r] + hs_dur[r]), len(rows), "hsync", r))
    rows.sort(key=lambda x: (x[0], x[1]))
    last_node: dict[int, int] = {}  # lane -> end node of its last activity
    kernel_sync: dict[int, int | None] = {}  # dest GPU row -> GPU row it waits for
    for _t, _o, table, r in rows:
        if table == "hsync" or (table == "gpu" and d.gpu_sync[r]):
            _sync(d, g, table, r, name, sync_names, rt_of_corr, launches, last_node, kernel_sync)
            continue
        index = int(d.gpu_index[r])
        start, end = g.start(index), g.end(index)
        assert start is not None and end is not None
        g.attribute(g.add_edge(start, end, OPERATOR), -1)
        lane = int(d.gpu_stream[r])
        rt_row = int(d.gpu_rt[r])
        rt_node = g.start(int(d.rt_index[rt_row])) if rt_row >= 0 else None
        src = kernel_sync.get(r)
        sync_end: int | None = None
        launch_added = False
        if src is not None:
            sync_end = g.end(int(d.gpu_index[src]))
            if sync_end is None:
                src = None
            else:
                g.add_edge(sync_end, start, SYNC)
            kernel_sync[r] = None
        launch_ts = float(rt_ts[rt_row]) if rt_row >= 0 else math.inf
        prev = last_node.get(lane)
        if (q.at_launch[r] == 1 and q.at_start[r] == 0 and rt_node is not None
                and (prev is None or g.node_ts[prev] < launch_ts)
                and (sync_end is None or g.node_ts[sync_end] < launch_ts)):
            g.add_edge(rt_node, start, LAUNCH)
            launch_added = True
        elif prev is not None and (sync_end is None or g.node_ts[sync_end] < g.node_ts[prev]):
            g.attribute(g.add_edge(prev, start, KERNEL_KERNEL), -1)
        if zero_weight and not launch_added and rt_node is not None:
            g.add_edge(rt_node, start, LAUNCH, zero_weight=True)
        last_node[lane] = end


def _sync(d: RankData, g: Graph, table: str, r: int, name: list[str], sync_names: set[str],
          rt_of_corr: dict[int, int], launches: list[tuple[float, int, int, int, int]],
          last_node: dict[int, int], kernel_sync: dict[int, int | None]) -> None:
    """One ``cuda_sync`` event: GPU → CPU edges into its runtime call's end, or a GPU → GPU wait."""
    if table == "gpu":
        n, corr, args, lane = name[int(d.gpu_name[r])], int(d.gpu_corr[r]), d.gpu_args.get(r, {}), int(d.gpu_stream[r])
    else:
        n, corr, args, lane = name[int(d.hsync_name[r])], int(d.hsync_corr[r]), d.hsync_args.get(r, {}), -1
    if n not in sync_names:
        return
    call = rt_of_corr.get(corr)
    call_end = g.end(int(d.rt_index[call])) if call is not None else None
    if n in ("Stream Wait Event", "Event Sync"):
        src = _recorded_kernel(d, args, rt_of_corr, launches)
        if src is None:
            return
        if n == "Stream Wait Event":
            if call is None:
                return
            dest = _next_launch(d, call, lane, launches)
            if dest is not None:
                kernel_sync[dest] = src
            return
        src_end = g.end(int(d.gpu_index[src]))
        if src_end is not None and call_end is not None:
            g.add_edge(src_end, call_end, SYNC)
        return
    if call_end is None:
        return
    nodes = list(last_node.values()) if n == "Context Sync" else [last_node[lane]] if lane in last_node else []
    for node in nodes:
        g.add_edge(node, call_end, SYNC)


def _recorded_kernel(d: RankData, args: dict[str, Any], rt_of_corr: dict[int, int],
                     launches: list[tuple[float, int, int, int, int]]) -> int | None:
    """The GPU row an event sync waits for: the last launch on the recorded stream before ``cudaEventRecord``."""
    record_corr, stream = args.get("wait_on_cuda_event_record_corr_id"), args.get("wait_on_stream")
    if not isinstance(record_corr, int) or not isinstance(stream, int) or stream < 0:
        return None
    record = rt_of_corr.get(record_corr)
    if record is None or d.names[int(d.rt_name[record])] != _EVENT_RECORD:
        return None
    record_ts = float(d.rt_ts[record])
    best: int | None = None
    for ts, _r, lane, _device, gr in launches:
        if ts > record_ts:
            break
        if d.lanes[lane][1] == stream:
            best = gr
    return best


def _next_launch(d: RankData, wait_call: int, lane: int, launches: list[tuple[float, int, int, int, int]]) -> int | None:
    """The GPU row of the first launch after ``cudaStreamWaitEvent`` on its thread and stream."""
    thread = int(d.rt_thread[wait_call])
    wait_ts = float(d.rt_ts[wait_call])
    for ts, r, launch_lane, _device, gr in launches:
        if ts >= wait_ts and launch_lane == lane and int(d.rt_thread[r]) == thread and r != wait_call:
            return gr
    return None
