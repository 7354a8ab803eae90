"""The collected columns of one trace as numpy arrays, joined once on correlation ids."""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from my_utils.core.lazy import lazy_module
from my_utils.profiling.kineto.collect import TraceCollector
from my_utils.profiling.kineto.kinds import KINDS, kind_of

if TYPE_CHECKING:
    import numpy as np
else:  # numpy only when a function runs: the parent process of a run merges rows and never needs it
    np = lazy_module("numpy", __name__, "np")


def _np(column: array[Any]) -> Any:
    return np.frombuffer(column, dtype=column.typecode) if len(column) else np.zeros(0, column.typecode)


@dataclass(frozen=True)
class RankData:
    """One rank's GPU activities (sorted by start), runtime calls and annotations.

    Times are µs relative to the first event kept (see ``TraceCollector.base``); durations
    are the ones written in the trace, never differences of rounded times.

    ``gpu_kind`` indexes :data:`~my_utils.profiling.kineto.kinds.KINDS`;
    ``gpu_rt`` is the index of the runtime call that launched each GPU activity (same
    correlation id), -1 when none was recorded; ``gpu_sync`` marks the ``cuda_sync`` events on
    a stream (GPU time of kind *other*, but no gap-ending launch: the per-stream idle walk and
    the launch and annotation joins leave them out, as HTA does); ``gpu_device`` is the device
    (the lane's ``pid``) of each activity. ``hsync_*``: ``cuda_sync`` events on no stream (the
    host waiting on the GPU). ``overhead``: Kineto ``overhead`` events, name → [count, µs];
    ``capture_us``: the profiler's own span (0 when the trace has none).

    ``*_index`` is each event's position in ``traceEvents`` (HTA's event index); ``op_*`` are
    the CPU operators (``cpu_op``); ``gpu_args`` / ``op_args`` / ``hsync_args`` map a row to the
    few arguments kept for it (``collect``); ``threads[i]`` is the ``(pid, tid)`` of thread lane
    ``i``; ``base_us`` the trace time that relative times count from (absolute = relative +
    base); ``step_events``, ``gpu_annotations`` and ``counters`` are short lists (``collect``);
    ``context`` the trace's description of the run (GPU model, world size...: ``kineto.context``).
    ``op_sig`` / ``sigs``: each operator's recorded arguments, stored once per distinct value (shapes,
    Inductor's figures, torch.compile's ``kernel_backend`` / ``kernel_hash``: ``collect.SIG_ARGS``);
    ``mem_*``: the allocator's ``[memory]`` events (the operation model: ``kineto.ops``).
    """

    rank: int | None
    names: list[str]
    gpu_stream: Any
    gpu_ts: Any
    gpu_dur: Any
    gpu_end: Any
    gpu_name: Any
    gpu_kind: Any
    gpu_corr: Any
    gpu_rt: Any
    gpu_sync: Any
    gpu_device: Any
    rt_thread: Any
    rt_ts: Any
    rt_dur: Any
    rt_name: Any
    rt_corr: Any
    rt_has_gpu: Any
    ann_thread: Any
    ann_ts: Any
    ann_end: Any
    ann_name: Any
    steps: list[tuple[float, float, int]]
    lanes: list[tuple[Any, Any]]  # (device pid, stream) of each GPU lane id
    empty_gpu_lanes: int
    hsync_ts: Any = None
    hsync_dur: Any = None
    hsync_name: Any = None
    overhead: dict[str, list[float]] | None = None
    capture_us: float = 0.0
    base_us: float = 0.0
    gpu_index: Any = None
    gpu_args: dict[int, dict[str, Any]] = field(default_factory=dict)
    rt_index: Any = None
    op_thread: Any = None
    op_ts: Any = None
    op_dur: Any = None
    op_end: Any = None
    op_name: Any = None
    op_index: Any = None
    op_args: dict[int, dict[str, Any]] = field(default_factory=dict)
    ann_index: Any = None
    hsync_corr: Any = None
    hsync_index: Any = None
    hsync_device: Any = None
    hsync_args: dict[int, dict[str, Any]] = field(default_factory=dict)
    threads: list[tuple[Any, Any]] = field(default_factory=list)
    step_events: list[tuple[float, float, int, int, int, int, int]] = field(default_factory=list)
    gpu_annotations: list[tuple[float, float, int, tuple[Any, Any], int]] = field(default_factory=list)
    counters: list[tuple[float, float, int, int, dict[str, float]]] = field(default_factory=list)
    context: dict[str, Any] = field(default_factory=dict)  # the trace's own description (kineto.context)
    op_sig: Any = None  # each operator row's recorded arguments: an index into ``sigs``, -1 when none
    sigs: list[dict[str, Any]] = field(default_factory=list)
    mem_ts: Any = None  # the allocator's "[memory]" events (``collect``), times relative like the rest
    mem_thread: Any = None
    mem_bytes: Any = None
    mem_total: Any = None
    mem_reserved: Any = None
    mem_device: Any = None
    mem_addr: Any = None
    mem_index: Any = None

    @property
    def stream_count(self) -> int:
        """GPU lanes holding at least one activity."""
        return len(self.lanes)

    def shaped_ops(self) -> Any:
        """A mask over the operator rows: those whose recorded arguments hold input shapes (``Input Dims``).

        ``op_sig >= 0`` alone also holds the operators with only Inductor's figures or a kernel backend.
        """
        if self.op_sig is None or not len(self.op_sig):
            return np.zeros(0 if self.op_ts is None else len(self.op_ts), bool)
        return np.isin(self.op_sig, [i for i, sig in enumerate(self.sigs) if "Input Dims" in sig])


def build(col: TraceCollector, rank: int | None) -> RankData:
    """Turn a finished collector into :class:`RankData`."""
    c = col.columns
    names = col.names.names
    order = np.argsort(_np(c.gpu_ts), kind="stable")
    ts = _np(c.gpu_ts)[order]
    dur = _np(c.gpu_dur)[order]
    end = ts + dur
    gname = _np(c.gpu_name)[order]
    kind_of_name = np.array([KINDS.index(kind_of(n)) for n in names] or [0], dtype=np.int8)
    gkind = kind_of_name[gname] if len(gname) else np.zeros(0, np.int8)
    gcorr = _np(c.gpu_corr)[order]

    rcorr = _np(c.rt_corr)
    gpu_rt = np.full(len(ts), -1, dtype=np.int64)
    rt_has_gpu = np.zeros(len(rcorr), dtype=bool)
    if len(ts) and len(rcorr):
        by_corr = np.argsort(rcorr, kind="stable")
        sorted_corr = rcorr[by_corr]
        pos = np.clip(np.searchsorted(sorted_corr, gcorr), 0, len(sorted_corr) - 1)
        hit = (sorted_corr[pos] == gcorr) & (gcorr >= 0)
        gpu_rt = np.where(hit, by_corr[pos], -1)
        rt_has_gpu[gpu_rt[hit]] = True

    sync = _np(c.gpu_sync)[order].astype(bool) if len(c.gpu_sync) else np.zeros(len(ts), dtype=bool)
    lane_device = np.array([_device(lane[0]) for lane in col.streams] or [-1], dtype=np.int64)
    gstream = _np(c.gpu_stream)[order]
    gdevice = lane_device[gstream] if len(gstream) else np.zeros(0, np.int64)
    used_lanes = set(col.streams)
    empty = sum(1 for lane in col.declared_lanes if lane[0] in col.gpu_pids and lane not in used_lanes)
    ann_ts = _np(c.ann_ts)
    position = np.empty(len(order), dtype=np.int64)
    position[order] = np.arange(len(order))  # collector row -> sorted row
    op_ts = _np(c.op_ts)
    op_dur = _np(c.op_dur)
    return RankData(
        rank=rank, names=names,
        gpu_stream=gstream, gpu_ts=ts, gpu_dur=dur, gpu_end=end, gpu_name=gname, gpu_kind=gkind,
        gpu_corr=gcorr, gpu_rt=gpu_rt, gpu_sync=sync, gpu_device=gdevice,
        rt_thread=_np(c.rt_thread), rt_ts=_np(c.rt_ts), rt_dur=_np(c.rt_dur), rt_name=_np(c.rt_name),
        rt_corr=rcorr, rt_has_gpu=rt_has_gpu,
        ann_thread=_np(c.ann_thread), ann_ts=ann_ts, ann_end=ann_ts + _np(c.ann_dur), ann_name=_np(c.ann_name),
        steps=sorted(set(c.steps)), lanes=list(col.streams), empty_gpu_lanes=empty,
        hsync_ts=_np(c.hsync_ts), hsync_dur=_np(c.hsync_dur), hsync_name=_np(c.hsync_name),
        overhead=dict(c.overhead), capture_us=c.capture_us, base_us=float(col.base or 0.0),
        gpu_index=_np(c.gpu_index)[order], gpu_args={int(position[k]): v for k, v in c.gpu_args.items()},
        rt_index=_np(c.rt_index), op_thread=_np(c.op_thread), op_ts=op_ts, op_dur=op_dur, op_end=op_ts + op_dur,
        op_name=_np(c.op_name), op_index=_np(c.op_index), op_args=dict(c.op_args), ann_index=_np(c.ann_index),
        hsync_corr=_np(c.hsync_corr), hsync_index=_np(c.hsync_index), hsync_device=_np(c.hsync_device),
        hsync_args=dict(c.hsync_args), threads=list(col.threads), step_events=list(c.step_events),
        gpu_annotations=list(c.gpu_annotations), counters=list(c.counters),
        op_sig=_np(c.op_sig) if len(c.op_sig) == len(c.op_ts) else np.full(len(c.op_ts), -1, np.int32),
        sigs=list(c.sigs), mem_ts=_np(c.mem_ts), mem_thread=_np(c.mem_thread), mem_bytes=_np(c.mem_bytes),
        mem_total=_np(c.mem_total), mem_reserved=_np(c.mem_reserved), mem_device=_np(c.mem_device),
        mem_addr=_np(c.mem_addr), mem_index=_np(c.mem_index),
    )


def _device(pid: Any) -> int:
    """The device index of a GPU lane's ``pid`` (Kineto writes the device number there); -1 when not a number."""
    if isinstance(pid, int) and not isinstance(pid, bool):
        return pid
    try:
        return int(str(pid))
    except ValueError:
        return -1
