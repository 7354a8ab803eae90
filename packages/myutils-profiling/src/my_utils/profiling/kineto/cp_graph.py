"""The CPU–GPU dependency graph of a window of one rank's trace (the critical path's graph).

Holistic Trace Analysis' construction (``CPGraph`` in ``hta/analyzers/critical_path_analysis.py``
at ``f4d0062``), restated: every CPU operator, runtime call and GPU activity of the window is
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
    weight = the time between the two starts. With ``zero_weight_launch_edges`` (off by default, as
    HTA's ``CRITICAL_PATH_ADD_ZERO_WEIGHT_LAUNCH_EDGE``; HTA's own unit tests turn it on) a zero-weight
    edge of the same type keeps every other launch before its activity.
``kernel_kernel_delay``
    previous activity's end on the stream → this one's start, weight = the gap, when it was not a
    launch delay and the gap is under :data:`KERNEL_KERNEL_MAX_US` (HTA since ``ce386f4``): queued work
    starts within microseconds of its predecessor, so a longer gap is a dependency the trace does not
    record (the host blocked in ``cudaMalloc``, say), not GPU overhead. The activity then has no edge
    from its stream, and the path runs through whatever the host did meanwhile.
``sync_dependency``
    weight 0: from the GPU work a host sync waited for to the end of the sync call
    (``Stream Sync``: the stream's last activity; ``Context Sync``: every stream's last; ``Event
    Sync``: the last activity launched on the event's stream before ``cudaEventRecord``), and
    from that work to the first activity launched after ``cudaStreamWaitEvent`` (``Stream Wait
    Event``: a GPU → GPU dependency across streams).

PyTorch runs backward on an autograd thread while the main thread waits in ``backward()``, so a
thread-by-thread graph leaves the backward pass off the step's path. As HTA since ``77300a9``, when
exactly one thread of the window has operators or annotations named with ``"autograd"`` and exactly
one other with ``"forward"``, the first thread's events join the second's call stack
(:func:`backward_thread`; the two are not expected to overlap in time).

HTA since ``3565ded`` also chains the calls that take the CUDA runtime lock (``cudaLaunchKernel``,
``cudaMemcpyAsync``, ``cudaHostAlloc``) across threads, and in doing so weighs ``cudaMemcpyAsync``'s
wait as CPU time. Neither is done here: a blocking call's wait stays the GPU's (``BLOCKING_CALLS``),
and calls on different threads are linked only through the GPU (docs/guide/report.md measures the difference).

The window's events are HTA's: CPU events (operators, annotations, runtime calls, host syncs)
starting inside it with a positive duration; GPU activities whose launch call is one of them
(and every ``Stream Wait Event``). Annotations shape the call stacks but get no nodes. Edges
are added in HTA's order (threads by ``(pid, tid)``, then GPU activities by start, syncs by
end), since the longest path's tie-breaking follows it. Streams are keyed by GPU lane
``(device, stream)`` where HTA keys by stream number (the same on one GPU).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from my_utils.profiling.kineto.queue_length import QUEUE_LAUNCHES, queue_series
from my_utils.profiling.kineto.rank_data import RankData

OPERATOR = "operator"
DEPENDENCY = "dependency"
LAUNCH = "kernel_launch_delay"
KERNEL_KERNEL = "kernel_kernel_delay"
SYNC = "sync_dependency"
EDGE_TYPES = (OPERATOR, DEPENDENCY, LAUNCH, KERNEL_KERNEL, SYNC)
_TYPE_ID = {t: i for i, t in enumerate(EDGE_TYPES)}
#: Calls whose wait is the GPU's time, not the CPU's (the edge into their end weighs 0).
BLOCKING_CALLS = frozenset({"cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventQuery",
                            "cudaEventSynchronize", "cudaMemcpy", "cudaMemcpyAsync"})
#: The longest gap between two activities of a stream counted as a kernel-to-kernel delay (µs, exclusive).
KERNEL_KERNEL_MAX_US = 1500.0
_EVENT_RECORD = "cudaEventRecord"
_STREAM_WAIT = "cudaStreamWaitEvent"

# node event kinds: a CPU operator or runtime call, or a GPU activity
HOST, GPU = 0, 1
#: ``Graph.owner`` of an edge attributed to no event.
NO_OWNER = -(1 << 62)


@dataclass
class Window:
    """The part of the trace analysed: ``[start, end]`` (relative µs, both ends included) and its name."""

    start: float
    end: float
    label: str


class Graph:
    """Nodes (``2k`` start, ``2k + 1`` end of the ``k``-th node event) and edges in insertion order.

    ``events[k]`` is the ``traceEvents`` index of node event ``k``; ``kind``/``name``/``lane``
    describe it (``lane`` -1 on the CPU). Edge ``e`` goes ``src[e] → dst[e]`` with ``weight[e]``
    and kind ``EDGE_TYPES[etype[e]]``; ``owner[e]`` is the event an operator or kernel-kernel edge
    is attributed to (``NO_OWNER`` for the others: :meth:`owner_of`). Typed arrays, not objects
    or dicts: a step of a large trace has tens of thousands of nodes and edges, and a dict entry
    with its two int objects costs ~100 bytes where an array slot costs 4 or 8.
    """

    def __init__(self) -> None:
        self.events: array[int] = array("q")
        self.kind: array[int] = array("b")
        self.name: array[int] = array("i")
        self.lane: array[int] = array("i")
        self.node_ts: array[float] = array("d")
        self.src: array[int] = array("i")
        self.dst: array[int] = array("i")
        self.weight: array[float] = array("d")
        self.etype: array[int] = array("b")
        self.owner: array[int] = array("q")
        self._node_of: array[int] = array("i")  # traceEvents index -> node event k, -1 when it has none
        self._keys: Any = None  # sorted (u << 32 | v) and their edge ids, once finished

    def add_event(self, index: int, kind: int, name: int, lane: int, ts: float, end: float) -> None:
        """Make the two nodes of one event."""
        node_of = self._node_of
        if index >= len(node_of):  # grown in steps: indices arrive in time order, not index order
            node_of.extend(array("i", [-1]) * (index + 1 - len(node_of) + (len(node_of) >> 1)))
        node_of[index] = len(self.events)
        self.events.append(index)
        self.kind.append(kind)
        self.name.append(name)
        self.lane.append(lane)
        self.node_ts.append(ts)
        self.node_ts.append(end)

    def node(self, index: int) -> int | None:
        """The node event ``k`` of the event at ``traceEvents[index]`` (None when it has no nodes)."""
        node_of = self._node_of
        k = node_of[index] if 0 <= index < len(node_of) else -1
        return None if k < 0 else k

    def start(self, index: int) -> int | None:
        """The start node of the event at ``traceEvents[index]`` (None when it has no nodes)."""
        k = self.node(index)
        return None if k is None else 2 * k

    def end(self, index: int) -> int | None:
        """The end node of the event at ``traceEvents[index]`` (None when it has no nodes)."""
        k = self.node(index)
        return None if k is None else 2 * k + 1

    def owner_of(self, e: int) -> int | None:
        """The event edge ``e``'s time is attributed to (None for dependencies, syncs and launches)."""
        o = self.owner[e]
        return None if o == NO_OWNER else o

    def add_edge(self, u: int, v: int, kind: str, zero_weight: bool = False) -> int:
        """An edge ``u → v`` (its id); dependencies, syncs and ``zero_weight`` edges weigh 0, others the time between."""
        weight = 0.0 if kind in (DEPENDENCY, SYNC) or zero_weight else self.node_ts[v] - self.node_ts[u]
        self.src.append(u)
        self.dst.append(v)
        self.weight.append(weight)
        self.etype.append(_TYPE_ID[kind])
        self.owner.append(NO_OWNER)
        return len(self.src) - 1

    def finish(self) -> None:
        """Fold an edge added twice into its first copy with the last one's weight, kind and owner (networkx's
        ``add_edge`` updates the edge in place), and index the edges for :meth:`edge`."""
        src = np.frombuffer(self.src, dtype=np.int32).astype(np.int64)
        keys = src << 32 | np.frombuffer(self.dst, dtype=np.int32).astype(np.int64)
        order = np.argsort(keys, kind="stable")
        sk = keys[order]
        dup = np.flatnonzero(sk[1:] == sk[:-1]) + 1 if len(sk) else np.zeros(0, np.int64)
        if len(dup):
            first_of: dict[int, int] = {}
            for i in range(len(sk)):
                if i and sk[i] == sk[i - 1]:
                    first, later = first_of[int(sk[i])], int(order[i])
                    self.weight[first], self.etype[first] = self.weight[later], self.etype[later]
                    if self.owner[later] != NO_OWNER:
                        self.owner[first], self.owner[later] = self.owner[later], NO_OWNER
                else:
                    first_of[int(sk[i])] = int(order[i])
            keep = np.ones(len(keys), bool)
            keep[order[dup]] = False
            for name in ("src", "dst", "weight", "etype", "owner"):
                old = getattr(self, name)
                setattr(self, name, array(old.typecode, np.frombuffer(old, dtype=old.typecode)[keep].tobytes()))
            keys = keys[keep]
            order = np.argsort(keys, kind="stable")
        self._keys = (keys[order], order)

    def edge(self, u: int, v: int) -> int:
        """The id of the edge ``u → v`` (KeyError when there is none); after :meth:`finish`."""
        sk, order = self._keys
        key = u << 32 | v
        i = int(np.searchsorted(sk, key))
        if i == len(sk) or sk[i] != key:
            raise KeyError((u, v))
        return int(order[i])

    def type_of(self, e: int) -> str:
        """The kind of edge ``e``."""
        return EDGE_TYPES[self.etype[e]]

    def attribute(self, e: int, parent: int) -> None:
        """The event an operator or kernel-kernel edge's time belongs to (HTA's four cases)."""
        kind = EDGE_TYPES[self.etype[e]]
        if kind not in (OPERATOR, KERNEL_KERNEL):
            return
        u, v = self.src[e], self.dst[e]
        if kind == KERNEL_KERNEL or u % 2 == 0:
            owner = self.events[u // 2]  # a delay belongs to the previous kernel; from a start: that event
        elif v % 2 == 1:
            owner = self.events[v // 2]  # end → end: unwinding into the enclosing event
        else:
            owner = parent  # end → start: the gap between two children belongs to their parent
        self.owner[e] = owner

    def event_of(self, node: int) -> int:
        """The ``traceEvents`` index of a node's event."""
        return self.events[node // 2]


# -- the window's events ---------------------------------------------------------------


@dataclass
class _Hosts:
    """The window's CPU events as columns (operators, runtime calls, annotations and steps), in that order."""

    thread: Any
    ts: Any
    dur: Any
    name: Any
    index: Any
    node: Any
    blocking: Any


def _rounded(ts: Any, dur: Any, integral: bool) -> tuple[Any, Any]:
    """HTA's rounding of sub-µs traces (start up, end down), so that nested events stay nested."""
    if integral:
        return ts, dur
    start = np.ceil(ts)
    return start, np.floor(ts + dur) - start


def _host_events(d: RankData, w: Window, integral: bool) -> _Hosts:
    """The window's CPU events (HTA: ``stream == -1``, starting in the window, ``dur > 0``)."""
    blocking = np.array([n in BLOCKING_CALLS for n in d.names] or [False])
    parts: list[tuple[Any, ...]] = []

    def add(thread: Any, ts: Any, dur: Any, names: Any, index: Any, node: Any) -> None:
        if ts is None or not len(ts):
            return
        ts, dur = _rounded(ts, dur, integral)
        sel = (ts >= w.start) & (ts <= w.end) & (dur > 0)
        flags = np.broadcast_to(np.asarray(node, dtype=bool), ts.shape)
        parts.append((thread[sel], ts[sel], dur[sel], names[sel], index[sel], flags[sel]))

    add(d.op_thread, d.op_ts, d.op_dur, d.op_name, d.op_index, True)
    add(d.rt_thread, d.rt_ts, d.rt_dur, d.rt_name, d.rt_index, True)
    add(d.ann_thread, d.ann_ts, d.ann_end - d.ann_ts, d.ann_name, d.ann_index, False)
    if d.step_events:
        steps = np.array([(s[3], s[0], s[1], s[5], s[4], s[6]) for s in d.step_events], dtype=np.float64)
        add(steps[:, 0].astype(np.int64), steps[:, 1], steps[:, 2], steps[:, 3].astype(np.int64),
            steps[:, 4].astype(np.int64), steps[:, 5].astype(bool))
    if not parts:
        empty = np.zeros(0)
        return _Hosts(empty.astype(np.int64), empty, empty, empty.astype(np.int64), empty.astype(np.int64),
                      empty.astype(bool), empty.astype(bool))
    cols = [np.concatenate([p[i] for p in parts]) for i in range(6)]
    name = cols[3].astype(np.int64)
    return _Hosts(cols[0].astype(np.int64), cols[1], cols[2], name, cols[4].astype(np.int64), cols[5],
                  blocking[name] if len(name) else np.zeros(0, bool))


def _stack_points(h: _Hosts, rows: Any) -> Any:
    """Start (``2i``) and end (``2i + 1``) points of one thread's rows in HTA's call-stack order (``compare_events``).

    At one time: ends before starts; among starts the longer (the parent) first, then the lower
    index; among ends the shorter (the child) first, then the higher index.
    """
    ts, dur, index = h.ts[rows], h.dur[rows], h.index[rows]
    n = len(rows)
    order = np.lexsort((np.concatenate((index, -index)), np.concatenate((-dur, dur)),
                        np.concatenate((np.ones(n, np.int8), np.zeros(n, np.int8))), np.concatenate((ts, ts + dur))))
    return np.where(order < n, 2 * rows[order % n], 2 * rows[order % n] + 1)


def _points_then_unwind(points: Any, stack: list[tuple[int, int]]) -> Iterator[int]:
    """The points in order, then one -1 (an end) per event still open: the depth-first walk leaves those last."""
    for chunk in range(0, len(points), 1 << 16):  # a list of every point would cost ~40 bytes each
        yield from points[chunk:chunk + (1 << 16)].tolist()
    while stack:
        yield -1


def _cpu_edges(g: Graph, h: _Hosts, rows: Any) -> None:
    """HTA's ``_construct_graph_from_call_stack`` over one thread's rows of ``h``.

    HTA nests the thread's events into a call stack (an event's parent is the innermost one open
    when it starts; an end closes the innermost open event, whatever ends: overlaps are not
    nesting) and walks it depth first. That walk enters and leaves events exactly in the order of
    the start and end points (``_stack_points``), so one pass over the points with a stack does
    both, with no tree of dicts (a thread of a large trace has ~100,000 events).
    """
    node, index, blocking = h.node, h.index, h.blocking
    last: int | None = None
    last_top: int | None = None
    last_parent = -1
    depth = 0
    stack: list[tuple[int, int]] = []  # open rows and their parent's traceEvents index
    for p in _points_then_unwind(_stack_points(h, rows), stack):
        if p >= 0 and not p & 1:
            i, entering = p >> 1, True
            parent_index = int(index[stack[-1][0]]) if stack else -1
            stack.append((i, parent_index))
        elif stack:
            (i, parent_index), entering = stack.pop(), False
        else:
            continue
        if not node[i]:
            continue
        start, end = g.start(int(index[i])), g.end(int(index[i]))
        assert start is not None and end is not None
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
                g.attribute(g.add_edge(last, end, OPERATOR, zero_weight=bool(blocking[i])), last_parent)
            if depth == 0:
                last, last_top = None, end
            else:
                last, last_parent = end, parent_index


def build_graph(d: RankData, w: Window, zero_weight_launch_edges: bool = False) -> Graph:
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
    cpu = np.flatnonzero(hosts.node)
    gpu = gpu_rows[d.gpu_corr[gpu_rows] >= 0]
    n_ts = np.concatenate((hosts.ts[cpu], gpu_ts[gpu]))
    n_index = np.concatenate((hosts.index[cpu], d.gpu_index[gpu]))
    n_end = np.concatenate((hosts.ts[cpu] + hosts.dur[cpu], gpu_ts[gpu] + gpu_dur[gpu]))
    n_name = np.concatenate((hosts.name[cpu], d.gpu_name[gpu]))
    n_lane = np.concatenate((np.full(len(cpu), -1), d.gpu_stream[gpu]))
    n_kind = np.concatenate((np.full(len(cpu), HOST), np.full(len(gpu), GPU)))
    for k in np.lexsort((n_index, n_ts)).tolist():
        g.add_event(int(n_index[k]), int(n_kind[k]), int(n_name[k]), int(n_lane[k]), float(n_ts[k]), float(n_end[k]))
    # CPU edges, thread by thread in (pid, tid) order
    by_thread: dict[int, list[int]] = {}
    merged = backward_thread(d, hosts)
    for i, t in enumerate(hosts.thread.tolist()):
        by_thread.setdefault(merged.get(t, t), []).append(i)
    for thread in sorted(by_thread, key=lambda t: _sort_key(d.threads[t])):
        _cpu_edges(g, hosts, np.array(by_thread[thread], dtype=np.int64))
    _gpu_edges(d, g, gpu_rows, gpu_ts, gpu_dur, rt_ts_r, zero_weight_launch_edges, w, integral)
    g.finish()
    return g


def backward_thread(d: RankData, hosts: _Hosts) -> dict[int, int]:
    """HTA's backward-thread merge: {lane of the autograd thread: lane of the forward thread}, or {} (module docstring).

    Each side is the one thread (by ``tid``, as HTA keys it) whose window operators or annotations
    (runtime calls aside) have a name holding ``"autograd"`` / ``"forward"``; none, or several, and
    nothing merges.
    """
    if not len(hosts.thread):
        return {}
    op_like = ~np.isin(hosts.index, d.rt_index) if d.rt_index is not None and len(d.rt_index) else \
        np.ones(len(hosts.thread), bool)
    tids = {}
    for word in ("autograd", "forward"):
        ids = [i for i, n in enumerate(d.names) if word in n]
        lanes = np.unique(hosts.thread[op_like & np.isin(hosts.name, ids or [-1])]).tolist()
        found = {d.threads[lane][1] for lane in lanes}
        tids[word] = next(iter(found)) if len(found) == 1 else None
    bwd, fwd = tids["autograd"], tids["forward"]
    if bwd is None or fwd is None or bwd == fwd:
        return {}
    lanes = np.unique(hosts.thread).tolist()
    into = next((lane for lane in lanes if d.threads[lane][1] == fwd), None)
    if into is None:
        return {}
    return {lane: into for lane in lanes if d.threads[lane][1] == bwd}


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
    rt_of_corr = _CorrIndex(d.rt_corr)
    launches = _Launches(d)
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
        elif (prev is not None and g.node_ts[start] - g.node_ts[prev] < KERNEL_KERNEL_MAX_US
              and (sync_end is None or g.node_ts[sync_end] < g.node_ts[prev])):
            g.attribute(g.add_edge(prev, start, KERNEL_KERNEL), -1)
        if zero_weight and not launch_added and rt_node is not None:
            g.add_edge(rt_node, start, LAUNCH, zero_weight=True)
        last_node[lane] = end


class _CorrIndex:
    """runtime row of a correlation id (the first call carrying it), from sorted arrays rather than a dict."""

    def __init__(self, corr: Any) -> None:
        order = np.argsort(corr, kind="stable")
        self.sorted, self.rows = corr[order], order

    def get(self, c: int) -> int | None:
        i = int(np.searchsorted(self.sorted, c, side="left"))
        return int(self.rows[i]) if c >= 0 and i < len(self.sorted) and self.sorted[i] == c else None


class _Launches:
    """Every launch call whose activity was recorded, by start (then row): time, runtime row, lane, GPU row."""

    def __init__(self, d: RankData) -> None:
        launch_ids = np.array([n in QUEUE_LAUNCHES for n in d.names] or [False])
        gr = np.flatnonzero(d.gpu_rt >= 0) if len(d.gpu_ts) else np.zeros(0, np.int64)
        gr = gr[launch_ids[d.rt_name[d.gpu_rt[gr]]]] if len(gr) else gr
        rt = d.gpu_rt[gr]
        order = np.lexsort((rt, d.rt_ts[rt])) if len(rt) else np.zeros(0, np.int64)
        self.ts, self.rt, self.gpu = d.rt_ts[rt][order], rt[order], gr[order]
        self.lane = d.gpu_stream[self.gpu]
        self.stream = np.array([_stream_number(d.lanes[int(x)][1]) for x in self.lane] or [], dtype=np.int64)
        self.thread = d.rt_thread[self.rt] if len(self.rt) else np.zeros(0, np.int64)


def _stream_number(stream: Any) -> int:
    return stream if isinstance(stream, int) and not isinstance(stream, bool) else -2


def _sync(d: RankData, g: Graph, table: str, r: int, name: list[str], sync_names: set[str],
          rt_of_corr: _CorrIndex, launches: _Launches,
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


def _recorded_kernel(d: RankData, args: dict[str, Any], rt_of_corr: _CorrIndex, launches: _Launches) -> int | None:
    """The GPU row an event sync waits for: the last launch on the recorded stream before ``cudaEventRecord``."""
    record_corr, stream = args.get("wait_on_cuda_event_record_corr_id"), args.get("wait_on_stream")
    if not isinstance(record_corr, int) or not isinstance(stream, int) or stream < 0:
        return None
    record = rt_of_corr.get(record_corr)
    if record is None or d.names[int(d.rt_name[record])] != _EVENT_RECORD:
        return None
    upto = int(np.searchsorted(launches.ts, float(d.rt_ts[record]), side="right"))
    hit = np.flatnonzero(launches.stream[:upto] == stream)
    return int(launches.gpu[hit[-1]]) if len(hit) else None


def _next_launch(d: RankData, wait_call: int, lane: int, launches: _Launches) -> int | None:
    """The GPU row of the first launch after ``cudaStreamWaitEvent`` on its thread and stream."""
    start = int(np.searchsorted(launches.ts, float(d.rt_ts[wait_call]), side="left"))
    ok = (launches.lane[start:] == lane) & (launches.thread[start:] == d.rt_thread[wait_call]) \
        & (launches.rt[start:] != wait_call)
    hit = np.flatnonzero(ok)
    return int(launches.gpu[start + hit[0]]) if len(hit) else None
