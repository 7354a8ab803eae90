"""One streaming pass over a Kineto trace, keeping only the numbers the analyses need.

Every analysis of this package reads the same few columns: GPU activities (stream, start,
duration, name, correlation), runtime calls (thread, start, duration, name, correlation),
``record_function`` ranges, ``ProfilerStep#N`` spans and the lanes the trace declares.
``cuda_sync`` events (``Stream Sync``, ``Event Sync``, ``Context Sync``, ``Stream Wait
Event``) on a real stream are GPU activities flagged ``gpu_sync`` (non-compute GPU time, as
in Holistic Trace Analysis); those on no stream (``stream`` -1, or its unsigned spelling
4294967295) are the host waiting on the GPU and land in their own columns (``hsync_*``).
Kineto's ``overhead`` events (CUPTI's own cost) are summed per name into ``overhead``.
Each lands in typed ``array`` columns (names interned to ints), so a 2-million-event trace
costs a few tens of bytes per kept event instead of a dict each; the raw events are
dropped as soon as they are read.

Every kept event also keeps its position in ``traceEvents`` (``*_index``: Holistic Trace
Analysis' event index, so results can name an event and be written back into the trace).
CPU operators (``cpu_op``) land in ``op_*`` columns; the few arguments later analyses read
are kept beside them in small dicts keyed by row: NCCL kernels' collective arguments,
copies' bytes and bandwidth, kernels' CUDA ``graph id`` / ``graph node id``, the ``wait_on_*`` arguments of
event syncs, the input shapes of the operators whose FLOPs can be counted (:data:`SHAPED_OPS`). Every operator's
recorded arguments (:data:`SIG_ARGS`: shapes, types, strides, concrete inputs, Inductor's FLOPs, and the
``kernel_backend`` / ``kernel_hash`` of the operators launching torch.compile's kernels) are kept once per distinct
value (``sigs``, the row's id in ``op_sig``): a model repeats a few hundred shapes thousands of times. The
allocator's ``[memory]`` instant events land in ``mem_*`` columns. ``gpu_user_annotation``
spans, ``cuda_profiler_range`` events (CUPTI counters) and the ``ProfilerStep`` events
themselves (for call stacks) are kept as short lists.
"""

from __future__ import annotations

import re
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from my_utils.core.errors import InputError
from my_utils.profiling.kineto.read.aggregate import group_of

_GPU_GROUPS = ("kernel", "memcpy", "memset", "device_op")
_STEP_NAME = re.compile(r"ProfilerStep#(\d+)$")
_GPU_LABEL = re.compile(r"^(GPU|MTIA|XPU|HPU)\b", re.IGNORECASE)
#: ``stream`` values that mean "no stream": a sync the host waits on, not GPU time.
_NO_STREAM = (-1, 4294967295)
_OVERHEAD_CATS = frozenset({"overhead", "Overhead"})
#: Operators whose input shapes are kept (FLOPs are counted for them: ``kineto.mfu``).
SHAPED_OPS = frozenset({
    "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::convolution", "aten::convolution_backward",
    "aten::_scaled_dot_product_flash_attention", "aten::_scaled_dot_product_efficient_attention",
    "aten::_scaled_dot_product_cudnn_attention", "aten::_flash_attention_forward",
    "aten::_efficient_attention_forward",
})
#: NCCL kernels' collective arguments, and copies' size and bandwidth, kept per row.
_NCCL_ARGS = ("Collective name", "In msg nelems", "Out msg nelems", "In msg size", "Out msg size", "Group size",
              "dtype", "Process Group Name", "Process Group Description", "Process Group Ranks", "Rank",
              "In split size", "Out split size", "Seq")
_COPY_ARGS = ("bytes", "memory bandwidth (GB/s)")
_OP_ARGS = ("Input Dims", "Input type", "Concrete Inputs")
#: The recorded arguments the operation model (``kineto.ops``) and ``kineto.compiled_kernels`` read, kept once per
#: distinct value. ``kernel_backend`` / ``kernel_hash`` are what torch.compile writes on the operator that launches one
#: of its generated kernels (Triton, C++); its ``kernel_file`` is left out (the path holds the user's name).
SIG_ARGS = ("Input Dims", "Input type", "Input Strides", "Concrete Inputs", "kernel_flop", "kernel_num_gb",
            "kernel_backend", "kernel_hash", "kernel_name")
_GRAPH_ARGS = ("graph id", "graph node id")


class Names:
    """Interned strings: ``id(name)`` gives a small int, ``names[i]`` gives it back."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.names: list[str] = []

    def id(self, name: object) -> int:
        """The id of ``name`` (made a string), allocated on first sight."""
        key = name if isinstance(name, str) else str(name)
        nid = self.ids.get(key)
        if nid is None:
            nid = self.ids[key] = len(self.names)
            self.names.append(key)
        return nid


@dataclass
class Columns:
    """The compact columns of one trace; times in µs as written by Kineto."""

    # GPU activities (kernels, memcpy, memset, non-CUDA device ops)
    gpu_stream: array[int] = field(default_factory=lambda: array("i"))
    gpu_ts: array[float] = field(default_factory=lambda: array("d"))
    gpu_dur: array[float] = field(default_factory=lambda: array("d"))
    gpu_name: array[int] = field(default_factory=lambda: array("i"))
    gpu_corr: array[int] = field(default_factory=lambda: array("q"))
    gpu_sync: array[int] = field(default_factory=lambda: array("b"))  # 1: a cuda_sync event on a stream
    gpu_index: array[int] = field(default_factory=lambda: array("q"))  # position in traceEvents
    gpu_args: dict[int, dict[str, Any]] = field(default_factory=dict)  # row -> kept arguments (_GPU_ARGS)
    # cuda_sync events on no stream: the host blocked on the GPU
    hsync_ts: array[float] = field(default_factory=lambda: array("d"))
    hsync_dur: array[float] = field(default_factory=lambda: array("d"))
    hsync_name: array[int] = field(default_factory=lambda: array("i"))
    hsync_corr: array[int] = field(default_factory=lambda: array("q"))
    hsync_index: array[int] = field(default_factory=lambda: array("q"))
    hsync_device: array[int] = field(default_factory=lambda: array("i"))  # the event's pid when a number, else -1
    hsync_args: dict[int, dict[str, Any]] = field(default_factory=dict)
    # host runtime calls (cudaLaunchKernel, cudaMemcpyAsync...)
    rt_thread: array[int] = field(default_factory=lambda: array("i"))
    rt_ts: array[float] = field(default_factory=lambda: array("d"))
    rt_dur: array[float] = field(default_factory=lambda: array("d"))
    rt_name: array[int] = field(default_factory=lambda: array("i"))
    rt_corr: array[int] = field(default_factory=lambda: array("q"))
    rt_index: array[int] = field(default_factory=lambda: array("q"))
    # CPU operators (cpu_op; ProfilerStep#N excluded: those are steps)
    op_thread: array[int] = field(default_factory=lambda: array("i"))
    op_ts: array[float] = field(default_factory=lambda: array("d"))
    op_dur: array[float] = field(default_factory=lambda: array("d"))
    op_name: array[int] = field(default_factory=lambda: array("i"))
    op_index: array[int] = field(default_factory=lambda: array("q"))
    op_args: dict[int, dict[str, Any]] = field(default_factory=dict)  # row -> input shapes (SHAPED_OPS only)
    op_sig: array[int] = field(default_factory=lambda: array("i"))  # row -> its recorded arguments in sigs, -1: none
    sigs: list[dict[str, Any]] = field(default_factory=list)  # each distinct (operator, recorded arguments) once
    # "[memory]" instant events (the allocator's, with record_memory / profile_memory)
    mem_ts: array[float] = field(default_factory=lambda: array("d"))
    mem_thread: array[int] = field(default_factory=lambda: array("i"))
    mem_bytes: array[int] = field(default_factory=lambda: array("q"))  # > 0 allocated, < 0 freed
    mem_total: array[int] = field(default_factory=lambda: array("q"))  # "Total Allocated" after it, -1: absent
    mem_reserved: array[int] = field(default_factory=lambda: array("q"))  # "Total Reserved" after it, -1: absent
    mem_device: array[int] = field(default_factory=lambda: array("i"))  # (Device Type + 1) * 1000 + Device Id + 1
    mem_addr: array[int] = field(default_factory=lambda: array("q"))
    mem_index: array[int] = field(default_factory=lambda: array("q"))
    # record_function ranges (ProfilerStep#N excluded: those are steps)
    ann_thread: array[int] = field(default_factory=lambda: array("i"))
    ann_ts: array[float] = field(default_factory=lambda: array("d"))
    ann_dur: array[float] = field(default_factory=lambda: array("d"))
    ann_name: array[int] = field(default_factory=lambda: array("i"))
    ann_index: array[int] = field(default_factory=lambda: array("q"))
    steps: list[tuple[float, float, int]] = field(default_factory=list)  # (ts, dur, step number)
    # the ProfilerStep events themselves: (ts, dur, step, thread lane, traceEvents index, name id, 1 if a cpu_op)
    step_events: list[tuple[float, float, int, int, int, int, int]] = field(default_factory=list)
    # gpu_user_annotation spans: (ts, dur, name id, (pid, tid) as written, traceEvents index)
    gpu_annotations: list[tuple[float, float, int, tuple[Any, Any], int]] = field(default_factory=list)
    # cuda_profiler_range events (CUPTI counters): (ts, dur, name id, traceEvents index, numeric args)
    counters: list[tuple[float, float, int, int, dict[str, float]]] = field(default_factory=list)
    overhead: dict[str, list[float]] = field(default_factory=dict)  # name -> [count, total µs]
    capture_us: float = 0.0  # the profiler's own span ("PyTorch Profiler (0)"), 0 when absent


class TraceCollector:
    """Feed it every event of one trace (``add``); read ``columns``, ``names`` and the lanes after."""

    def __init__(self, path: Path, keep_ops: bool = True) -> None:
        self.path = path
        self.keep_ops = keep_ops  # CPU operators: only the analyses beyond the core set read them
        self.columns = Columns()
        self.names = Names()
        self.streams: dict[tuple[Any, Any], int] = {}  # (pid, stream) -> stream id
        self.threads: dict[tuple[Any, Any], int] = {}  # (pid, tid) -> thread id
        self.gpu_pids: set[Any] = set()  # processes labelled "GPU n" by metadata
        self.gpu_labels: set[str] = set()  # their labels ("GPU 0", "MTIA 17"): the device family
        self.declared_lanes: set[tuple[Any, Any]] = set()  # (pid, tid) named by thread_name metadata
        self.count = 0
        self.host_events = 0  # cpu ops, annotations and runtime calls: what the profiler recorded on the host
        # times are kept relative to the first one: at unix-epoch µs (1.6e15) a float64 step is
        # 0.25 µs, so ``ts + dur`` there would lose the sub-µs part that Kineto writes
        self.base: float | None = None
        self._sig_ids: dict[tuple[int, str], int] = {}

    def _rel(self, ts: Any) -> float:
        if self.base is None:
            self.base = float(ts)
        return ts - self.base

    def _lane(self, table: dict[tuple[Any, Any], int], key: tuple[Any, Any]) -> int:
        lid = table.get(key)
        if lid is None:
            lid = table[key] = len(table)
        return lid

    def add(self, ev: dict[str, Any]) -> None:
        """Keep what the analyses need from one decoded trace event."""
        index = self.count
        self.count += 1
        ph = ev.get("ph")
        if ph == "M":
            self._metadata(ev)
            return
        if ph != "X":
            if ph == "i" and self.keep_ops and ev.get("name") == "[memory]":
                self._memory(ev, index)
            return
        cat = ev.get("cat")
        group = group_of(cat)
        c = self.columns
        try:
            if group is None:
                if cat == "cuda_sync":
                    self._sync(ev, index)
                elif cat in _OVERHEAD_CATS:
                    row = c.overhead.setdefault(str(ev.get("name", "")), [0, 0.0])
                    row[0] += 1
                    row[1] += float(ev.get("dur", 0) or 0)
                elif cat == "Trace" and isinstance(ev.get("dur"), (int, float)):
                    c.capture_us = max(c.capture_us, float(ev["dur"]))
                elif cat == "gpu_user_annotation":
                    c.gpu_annotations.append((float(self._rel(ev["ts"])), float(ev.get("dur", 0)),
                                              self.names.id(ev.get("name", "")), (ev.get("pid"), ev.get("tid")),
                                              index))
                elif cat == "cuda_profiler_range":
                    args = ev.get("args")
                    counters = {k: float(v) for k, v in args.items() if isinstance(v, (int, float))
                                and not isinstance(v, bool)} if isinstance(args, dict) else {}
                    c.counters.append((float(self._rel(ev["ts"])), float(ev.get("dur", 0)),
                                       self.names.id(ev.get("name", "")), index, counters))
                return
            if group in ("cpu_op", "annotation", "runtime"):
                self.host_events += 1
            if group in _GPU_GROUPS:
                args = ev.get("args")
                args = args if isinstance(args, dict) else {}
                stream = args.get("stream", ev.get("tid"))
                ts = self._rel(ev["ts"])
                dur = ev.get("dur", 0)
                c.gpu_dur.append(dur)
                c.gpu_ts.append(ts)
                c.gpu_stream.append(self._lane(self.streams, (ev.get("pid"), stream)))
                c.gpu_name.append(self.names.id(ev.get("name", "")))
                c.gpu_corr.append(_corr(args))
                c.gpu_sync.append(0)
                c.gpu_index.append(index)
                # only what the analyses read: a dict per kernel would cost more than the kernel's columns
                if "Collective name" in args:
                    c.gpu_args[len(c.gpu_index) - 1] = {k: args[k] for k in _NCCL_ARGS if k in args}
                elif group != "kernel" and "bytes" in args:
                    c.gpu_args[len(c.gpu_index) - 1] = {k: args[k] for k in _COPY_ARGS if k in args}
                if args.get("graph id"):  # replayed by a CUDA graph (Kineto on CUDA 12+: 0 outside graphs)
                    c.gpu_args.setdefault(len(c.gpu_index) - 1, {}).update(
                        {k: args[k] for k in _GRAPH_ARGS if k in args})
            elif group == "runtime":
                args = ev.get("args")
                ts = self._rel(ev["ts"])
                c.rt_dur.append(ev.get("dur", 0))
                c.rt_ts.append(ts)
                c.rt_thread.append(self._lane(self.threads, (ev.get("pid"), ev.get("tid"))))
                c.rt_name.append(self.names.id(ev.get("name", "")))
                c.rt_corr.append(_corr(args) if isinstance(args, dict) else -1)
                c.rt_index.append(index)
            else:  # annotation or cpu_op
                name = ev.get("name", "")
                m = _STEP_NAME.match(name) if isinstance(name, str) and name[:1] == "P" else None
                if m is not None:
                    ts, dur = float(self._rel(ev["ts"])), float(ev.get("dur", 0))
                    c.steps.append((ts, dur, int(m.group(1))))
                    c.step_events.append((ts, dur, int(m.group(1)),
                                          self._lane(self.threads, (ev.get("pid"), ev.get("tid"))), index,
                                          self.names.id(name), int(group == "cpu_op")))
                elif group == "annotation":
                    ts = self._rel(ev["ts"])
                    c.ann_dur.append(ev.get("dur", 0))
                    c.ann_ts.append(ts)
                    c.ann_thread.append(self._lane(self.threads, (ev.get("pid"), ev.get("tid"))))
                    c.ann_name.append(self.names.id(name))
                    c.ann_index.append(index)
                elif self.keep_ops:
                    ts = self._rel(ev["ts"])
                    c.op_dur.append(ev.get("dur", 0))
                    c.op_ts.append(ts)
                    key = (ev.get("pid"), ev.get("tid"))
                    lane = self.threads.get(key)
                    c.op_thread.append(lane if lane is not None else self._lane(self.threads, key))
                    nid = self.names.ids.get(name)
                    c.op_name.append(nid if nid is not None else self.names.id(name))
                    c.op_index.append(index)
                    args = ev.get("args")
                    # an operator with shapes, Inductor's figures or a generated kernel (a plain or, not any():
                    # this runs once per operator)
                    if isinstance(args, dict) and ("Input Dims" in args or "kernel_flop" in args
                                                   or "kernel_backend" in args):
                        c.op_sig.append(self._sig(c.op_name[-1], args))
                        if name in SHAPED_OPS:
                            c.op_args[len(c.op_index) - 1] = {k: args[k] for k in _OP_ARGS if k in args}
                    else:
                        c.op_sig.append(-1)
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            from my_utils.profiling.kineto.read.aggregate import field_at_fault

            raise InputError(self.path, f"traceEvents[{index}]", field_at_fault(ev, ev.get("cat"), exc)) from None

    def add_typed(self, events: list[Any]) -> None:
        """``add`` for a run of typed events with shapes (``trace_events.KinetoShapeEvent``), without a dict each.

        Operators, annotations, steps, runtime calls and GPU activities land in the same columns as
        through ``add``; any other complete event is handed to ``add`` as the dict of the fields a typed
        event holds, and the others (flows, instants, metadata) are counted only. Typed events carry
        only the correlation, stream and recorded-argument ``args``: a collector whose analyses read
        more (NCCL arguments, copy sizes, lane labels, ``[memory]`` events) is fed dicts instead
        (``needs_shapes`` passes only take this path).
        """
        c, names, rel, lane = self.columns, self.names, self._rel, self._lane
        streams, threads, keep_ops = self.streams, self.threads, self.keep_ops
        for ev in events:
            ph = ev.ph
            if ph != "X":  # flows, instants, metadata: a typed event holds none of what add() reads of them
                self.count += 1
                continue
            group = _TYPED_GROUP.get(ev.cat, "")
            ts = ev.ts
            if not group or ts != ts:  # a rarer category, or no ts: the dict path keeps (or refuses) it as ever
                self.add(_typed_dict(ev))
                continue
            index = self.count
            self.count += 1
            name, dur, a = ev.name, ev.dur, ev.args
            if group == "gpu":
                c.gpu_dur.append(dur)
                c.gpu_ts.append(rel(ts))
                c.gpu_stream.append(lane(streams, (ev.pid, a.stream if a.stream is not None else ev.tid)))
                c.gpu_name.append(names.id(name))
                c.gpu_corr.append(a.correlation)
                c.gpu_sync.append(0)
                c.gpu_index.append(index)
                continue
            self.host_events += 1
            if group == "runtime":
                c.rt_dur.append(dur)
                c.rt_ts.append(rel(ts))
                c.rt_thread.append(lane(threads, (ev.pid, ev.tid)))
                c.rt_name.append(names.id(name))
                c.rt_corr.append(a.correlation)
                c.rt_index.append(index)
            elif name[:1] == "P" and _STEP_NAME.match(name):
                self.count -= 1  # add() counts it again
                self.add(_typed_dict(ev))
            elif group == "annotation":
                c.ann_dur.append(dur)
                c.ann_ts.append(rel(ts))
                c.ann_thread.append(lane(threads, (ev.pid, ev.tid)))
                c.ann_name.append(names.id(name))
                c.ann_index.append(index)
            elif keep_ops:
                c.op_dur.append(dur)
                c.op_ts.append(rel(ts))
                c.op_thread.append(lane(threads, (ev.pid, ev.tid)))
                nid = names.id(name)
                c.op_name.append(nid)
                c.op_index.append(index)
                if a.input_dims is not None or a.kernel_flop is not None or a.kernel_backend is not None:
                    c.op_sig.append(self._sig_of((nid, repr(values := (
                        a.input_dims, a.input_type, a.input_strides, a.concrete_inputs, a.kernel_flop,
                        a.kernel_num_gb, a.kernel_backend, a.kernel_hash, a.kernel_name))), values))
                    if name in SHAPED_OPS:
                        args = _typed_args(a)
                        c.op_args[len(c.op_index) - 1] = {k: args[k] for k in _OP_ARGS if k in args}
                else:
                    c.op_sig.append(-1)

    def _sig(self, name_id: int, args: dict[str, Any]) -> int:
        """The id of this operator's recorded arguments, each distinct value stored once (a model has few)."""
        values = tuple(args.get(k) for k in SIG_ARGS)
        return self._sig_of((name_id, repr(values)), values)  # lists do not hash; their repr is exact for JSON

    def _sig_of(self, key: tuple[int, str], values: tuple[Any, ...]) -> int:
        """The id of ``values`` (in :data:`SIG_ARGS` order) under ``key`` (the operator and the values' repr)."""
        sid = self._sig_ids.get(key)
        if sid is None:
            sid = self._sig_ids[key] = len(self.columns.sigs)
            self.columns.sigs.append({k: v for k, v in zip(SIG_ARGS, values, strict=True) if v is not None})
        return sid

    def _memory(self, ev: dict[str, Any], index: int) -> None:
        """A ``[memory]`` event: bytes allocated (> 0) or freed (< 0), and the allocator's totals after it."""
        args = ev.get("args")
        if not isinstance(args, dict):
            return
        nbytes = args.get("Bytes")
        if not isinstance(nbytes, int) or isinstance(nbytes, bool) or not isinstance(ev.get("ts"), (int, float)):
            return
        c = self.columns
        c.mem_ts.append(float(self._rel(ev["ts"])))
        c.mem_thread.append(self._lane(self.threads, (ev.get("pid"), ev.get("tid"))))
        c.mem_bytes.append(nbytes)
        for column, key in ((c.mem_total, "Total Allocated"), (c.mem_reserved, "Total Reserved"),
                            (c.mem_addr, "Addr")):
            v = args.get(key)
            column.append(v if isinstance(v, int) and not isinstance(v, bool) and -2**63 <= v < 2**63 else -1)
        dtype, did = args.get("Device Type"), args.get("Device Id")
        # (type + 1) * 1000 + (id + 1): a CPU's id is -1, an unknown type 0
        c.mem_device.append(((dtype + 1) * 1000 if isinstance(dtype, int) and 0 <= dtype < 999 else 0)
                            + (did + 1 if isinstance(did, int) and -1 <= did < 998 else 999))
        c.mem_index.append(index)

    def _sync(self, ev: dict[str, Any], index: int) -> None:
        """A ``cuda_sync`` event: GPU time on its stream, or host wait when it has none."""
        args = ev.get("args")
        args = args if isinstance(args, dict) else {}
        stream = args.get("stream", ev.get("tid"))
        c = self.columns
        kept = {k: args[k] for k in ("wait_on_stream", "wait_on_cuda_event_record_corr_id") if k in args}
        ts = self._rel(ev["ts"])
        dur = ev.get("dur", 0)
        if stream is None or stream in _NO_STREAM:
            c.hsync_dur.append(dur)
            c.hsync_ts.append(ts)
            c.hsync_name.append(self.names.id(ev.get("name", "")))
            c.hsync_corr.append(_corr(args))
            c.hsync_index.append(index)
            pid = ev.get("pid")
            c.hsync_device.append(pid if isinstance(pid, int) and not isinstance(pid, bool) and 0 <= pid < 2**31 else -1)
            if kept:
                c.hsync_args[len(c.hsync_index) - 1] = kept
            return
        c.gpu_dur.append(dur)
        c.gpu_ts.append(ts)
        c.gpu_stream.append(self._lane(self.streams, (ev.get("pid"), stream)))
        c.gpu_name.append(self.names.id(ev.get("name", "")))
        c.gpu_corr.append(_corr(args))
        c.gpu_sync.append(1)
        c.gpu_index.append(index)
        if kept:
            c.gpu_args[len(c.gpu_index) - 1] = kept

    def _metadata(self, ev: dict[str, Any]) -> None:
        args = ev.get("args")
        if not isinstance(args, dict):
            return
        name = ev.get("name")
        label = args.get("labels") if name == "process_labels" else args.get("name") if name == "process_name" else None
        if label is not None and _GPU_LABEL.match(str(label)):
            self.gpu_pids.add(ev.get("pid"))
            self.gpu_labels.add(str(label)[:40])
        elif name == "thread_name":
            self.declared_lanes.add((ev.get("pid"), ev.get("tid")))


def _corr(args: dict[str, Any]) -> int:
    """The ``correlation`` argument as an int, -1 when absent or not an integer."""
    corr = args.get("correlation")
    return corr if isinstance(corr, int) and not isinstance(corr, bool) else -1


#: Categories whose typed events ``add_typed`` keeps itself (the common ones), by their ``add`` group.
_TYPED_GROUP = {"kernel": "gpu", "Kernel": "gpu", "gpu_memcpy": "gpu", "Memcpy": "gpu", "gpu_memset": "gpu",
                "Memset": "gpu", "cuda_runtime": "runtime", "Runtime": "runtime", "cuda_driver": "runtime",
                "cpu_op": "cpu_op", "Operator": "cpu_op", "user_annotation": "annotation"}
#: The recorded-argument fields of a typed event's ``args`` and their keys in a trace.
_TYPED_ARGS = (("input_dims", "Input Dims"), ("input_type", "Input type"), ("input_strides", "Input Strides"),
               ("concrete_inputs", "Concrete Inputs"), ("kernel_flop", "kernel_flop"),
               ("kernel_num_gb", "kernel_num_gb"), ("kernel_backend", "kernel_backend"),
               ("kernel_hash", "kernel_hash"), ("kernel_name", "kernel_name"))


def _typed_args(a: Any) -> dict[str, Any]:
    """A typed event's recorded arguments as the trace's ``args`` keys (the absent ones left out)."""
    return {key: v for attr, key in _TYPED_ARGS if (v := getattr(a, attr)) is not None}


def _typed_dict(ev: Any) -> dict[str, Any]:
    """The dict of what a typed event holds (``add``'s input); a NaN ``ts`` (absent) is left out, as it was."""
    a = ev.args
    args: dict[str, Any] = {"correlation": a.correlation, **_typed_args(a)}
    if a.stream is not None:
        args["stream"] = a.stream
    out = {"ph": ev.ph, "cat": ev.cat, "name": ev.name, "dur": ev.dur, "pid": ev.pid, "tid": ev.tid, "args": args}
    if ev.ts == ev.ts:
        out["ts"] = ev.ts
    return out
