"""Setup: the one-off work of a capture, and the GPU idle that lies inside it.

A capture that is mostly compilation or first calls has no steady state to judge, and GPU idle
inside such work cannot be saved by launching faster (``diagnosis/CASES.md``, principle 1). Per
rank (Holistic Trace Analysis has no such analysis; its idle and critical path analyses count
setup like any other time), the one-off work is the union of:

``compilation``
    torch.compile: Dynamo, AOTAutograd and Inductor record their phases as operators named
    ``… (dynamo_timed)`` or ``entire_frame_compile``, ``inductor_compile``… (:data:`COMPILE_NAMES`).
    ``Torch-Compiled Region``, ``TorchDynamo Cache Lookup`` and ``CompiledFunction`` are *not*
    setup: every call of a compiled model runs them.
``autotuning``
    Inductor's autotuning and cuDNN's algorithm search, by name (:data:`AUTOTUNE`).
``allocation and loading``
    runtime calls that allocate or pin memory or load modules (:data:`SETUP_CALLS`): the
    caching allocator stops calling them once warm, so each one is growth, not steady work.
``cuDNN benchmark``
    the first call of a convolution operator taking far longer than its later calls (as below): cuDNN
    timing its algorithms (``torch.backends.cudnn.benchmark``) before it settles on one.
``first calls``
    the first call of a runtime call, or of a cuBLAS operator (lazy handles, workspaces), taking at
    least :data:`FIRST_CALL_MIN_US` and :data:`FIRST_CALL_RATIO` times the median of at least two later
    calls. Blocking calls are left out: their first wait is the
    GPU's work, not setup.
``graph capture``
    CUDA graph capture (``cudaStreamBeginCapture`` to ``cudaStreamEndCapture`` on one thread) and
    instantiation (``cudaGraphInstantiate``): done once, then the graph is replayed.
``first step``
    ``ProfilerStep#0``, the program's first iteration, when the trace has it.

Each kind says which ``ProfilerStep`` numbers its events start in (``steps``; "before the first step"
for work outside them), and the rank's row lists the steps that hold compilation, autotuning, graph
capture or a cuDNN benchmark (``unsteady_steps``): those steps are not the steady state, and a step time read from them
overstates it.

Tables (``rank`` on every row): ``kineto_setup``, one row per rank: the capture (first to last
recorded event; the profiler's own ``Trace`` span left out), the setup time (the union above) and its share, the GPU idle (span minus busy union) and
the part of it inside setup, the step count and whether the capture is *one-shot* (no repeated
work to judge: fewer than two steps and no kernel but elementwise ones running twice; unknown,
with the reason, when there are neither steps nor kernels); ``kineto_setup_kinds``, per rank and
kind, the events and their union.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from my_utils.profiling.kineto import intervals
from my_utils.profiling.kineto.cp_graph import BLOCKING_CALLS
from my_utils.profiling.kineto.kinds import KINDS, KernelKind
from my_utils.profiling.kineto.rank_data import RankData
from my_utils.profiling.kineto.rows import Row, Tables, pct

COMPILE_NAMES = frozenset({
    "entire_frame_compile", "entire_backward_compile", "inductor_compile", "backend_compile",
    "fx_codegen_and_compile", "compile_file", "async_compile.wait", "create_aot_dispatcher_function",
})
_COMPILE = re.compile(r" \(dynamo_timed\)$")
AUTOTUNE = re.compile(r"autotun|cudnnFind|cudnn_?benchmark", re.IGNORECASE)
SETUP_CALLS = frozenset({
    "cudaMalloc", "cudaMallocHost", "cudaHostAlloc", "cudaHostRegister", "cudaMallocManaged", "cudaMallocAsync",
    "cudaMallocPitch", "cuMemAlloc", "cuMemAlloc_v2", "cuMemCreate", "cuMemHostAlloc", "cuMemHostRegister",
    "cuMemHostRegister_v2", "cuModuleLoad", "cuModuleLoadData", "cuModuleLoadDataEx", "cuModuleLoadFatBinary",
    "cuLibraryLoadData", "cuLibraryLoadFromFile", "hipMalloc", "hipHostMalloc", "hipHostRegister",
})
#: Operators whose first call sets up a library (cuBLAS handles and workspaces, cuDNN's algorithm search).
FIRST_CALL_OPS = re.compile(r"^aten::(mm|addmm|bmm|baddbmm|matmul|linear|cudnn_\w+|convolution\w*|_convolution\w*)$")
FIRST_CALL_MIN_US = 1000.0
FIRST_CALL_RATIO = 10.0
#: Calls that capture or instantiate a CUDA graph (``kineto.cuda_graphs``).
GRAPH_BEGIN = re.compile(r"^(cuda|cu|hip)StreamBeginCapture")
GRAPH_END = re.compile(r"^(cuda|cu|hip)StreamEndCapture")
GRAPH_INSTANTIATE = re.compile(r"^(cuda|cu|hip)GraphInstantiate")
KIND_NAMES = ("compilation", "autotuning", "allocation and loading", "graph capture", "cuDNN benchmark", "first calls",
              "first step")
#: Kinds whose steps are not steady state (the compiled or tuned code runs from the next step on).
UNSTEADY = ("compilation", "autotuning", "graph capture", "cuDNN benchmark")
#: First calls of these operators are cuDNN's algorithm search (``torch.backends.cudnn.benchmark``).
CUDNN_BENCHMARK = re.compile(r"^aten::(cudnn_\w+|convolution\w*|_convolution\w*)$")


@dataclass(frozen=True)
class SetupRow(Row):
    """One rank's one-off work: how long, which share of the capture, and the GPU idle inside it."""

    rank: int | None
    capture_us: float
    setup_us: float
    setup_pct: float
    gpu_span_us: float
    gpu_idle_us: float
    setup_idle_us: float
    steps: int
    one_shot: int | None
    one_shot_reason: str
    detail: str
    unsteady_steps: str = ""  # ProfilerSteps holding compilation, autotuning or graph capture


@dataclass(frozen=True)
class SetupKindRow(Row):
    """One kind of one-off work on one rank: its events, the time they cover, the longest one."""

    rank: int | None
    kind: str
    events: int
    us: float
    longest: str
    longest_us: float
    steps: str = ""  # the ProfilerStep numbers its events start in


def _union_pieces(d: RankData) -> dict[str, list[tuple[Any, Any, Any]]]:
    """Per kind, (starts, ends, name ids) of its events."""
    pieces: dict[str, list[tuple[Any, Any, Any]]] = {k: [] for k in KIND_NAMES}
    names = d.names
    compile_ids = [i for i, n in enumerate(names) if n in COMPILE_NAMES or _COMPILE.search(n)]
    autotune_ids = [i for i, n in enumerate(names) if AUTOTUNE.search(n)]
    setup_ids = [i for i, n in enumerate(names) if n in SETUP_CALLS]
    host = [(d.op_ts, d.op_end, d.op_name), (d.ann_ts, d.ann_end, d.ann_name)]
    for ts, end, name in host:
        if ts is None or not len(ts):
            continue
        for kind, ids in (("compilation", compile_ids), ("autotuning", autotune_ids)):
            sel = np.isin(name, ids or [-1])
            if sel.any():
                pieces[kind].append((ts[sel], end[sel], name[sel]))
    if len(d.rt_ts):
        rt_end = d.rt_ts + d.rt_dur
        sel = np.isin(d.rt_name, setup_ids or [-1])
        if sel.any():
            pieces["allocation and loading"].append((d.rt_ts[sel], rt_end[sel], d.rt_name[sel]))
        pieces["graph capture"].extend(_graph_capture(d, rt_end))
        blocking = [i for i, n in enumerate(names) if n in BLOCKING_CALLS]
        keep = ~np.isin(d.rt_name, blocking or [-1]) & ~sel
        pieces["first calls"].extend(_first_calls(d.rt_ts[keep], rt_end[keep], d.rt_name[keep]))
    if d.op_ts is not None and len(d.op_ts):
        conv = [i for i, n in enumerate(names) if CUDNN_BENCHMARK.match(n)]
        lib = np.isin(d.op_name, [i for i, n in enumerate(names) if FIRST_CALL_OPS.match(n) and i not in conv] or [-1])
        pieces["first calls"].extend(_first_calls(d.op_ts[lib], d.op_end[lib], d.op_name[lib]))
        sel = np.isin(d.op_name, conv or [-1])
        pieces["cuDNN benchmark"].extend(_first_calls(d.op_ts[sel], d.op_end[sel], d.op_name[sel]))
    first = [s for s in d.step_events if s[2] == 0]
    if first:
        pieces["first step"].append((np.array([s[0] for s in first]), np.array([s[0] + s[1] for s in first]),
                                     np.array([s[5] for s in first])))
    return pieces


def _graph_capture(d: RankData, rt_end: Any) -> list[tuple[Any, Any, Any]]:
    """Each graph capture (a begin to the next end on the same thread) and each instantiation call."""
    begin = np.array([GRAPH_BEGIN.match(n) is not None for n in d.names] or [False])[d.rt_name]
    end = np.array([GRAPH_END.match(n) is not None for n in d.names] or [False])[d.rt_name]
    inst = np.array([GRAPH_INSTANTIATE.match(n) is not None for n in d.names] or [False])[d.rt_name]
    starts: list[float] = []
    ends: list[float] = []
    names: list[int] = []
    open_at: dict[int, int] = {}
    for r in np.flatnonzero(begin | end).tolist():  # runtime rows are in file order, per thread in time order
        t = int(d.rt_thread[r])
        if begin[r]:
            open_at[t] = r
        elif t in open_at:
            b = open_at.pop(t)
            starts.append(float(d.rt_ts[b]))
            ends.append(float(rt_end[r]))
            names.append(int(d.rt_name[b]))
    for r in np.flatnonzero(inst).tolist():
        starts.append(float(d.rt_ts[r]))
        ends.append(float(rt_end[r]))
        names.append(int(d.rt_name[r]))
    return [(np.array(starts), np.array(ends), np.array(names, dtype=np.int64))] if starts else []


def _steps_of(d: RankData, starts: Any) -> list[int | None]:
    """The ``ProfilerStep`` number each start falls in (None: outside every step)."""
    spans = sorted({(s[0], s[0] + s[1], s[2]) for s in d.step_events})
    if not spans:
        return [None] * len(starts)
    lo = np.array([x[0] for x in spans])
    hi = np.array([x[1] for x in spans])
    pos = np.searchsorted(lo, starts, side="right") - 1
    return [spans[p][2] if p >= 0 and t < hi[p] else None for p, t in zip(pos.tolist(), list(starts), strict=True)]


def _steps_text(steps: list[int | None]) -> str:
    from my_utils.profiling.model.rank_coverage import ranges

    numbered = sorted({s for s in steps if s is not None})
    parts = ([f"step{'s' if len(numbered) > 1 else ''} {ranges(numbered)}"] if numbered else []) + \
        (["before or between steps"] if any(s is None for s in steps) else [])
    return "; ".join(parts)


def _first_calls(ts: Any, end: Any, name: Any) -> list[tuple[Any, Any, Any]]:
    """The first call of each name that took far longer than its later calls (module docstring)."""
    if not len(ts):
        return []
    order = np.lexsort((ts, name))
    ts, end, name = ts[order], end[order], name[order]
    starts = np.concatenate(([0], np.flatnonzero(np.diff(name)) + 1))
    counts = np.diff(np.concatenate((starts, [len(name)])))
    dur = end - ts
    heavy = starts[(counts >= 3) & (dur[starts] >= FIRST_CALL_MIN_US)]
    keep = [int(s) for s, n in zip(heavy.tolist(), counts[np.isin(starts, heavy)].tolist(), strict=True)
            if dur[s] >= FIRST_CALL_RATIO * float(np.median(dur[s + 1:s + n]))]
    return [(ts[keep], end[keep], name[keep])] if keep else []


def _one_shot(d: RankData, steps: int) -> tuple[int | None, str]:
    if steps >= 2:
        return 0, f"{steps} ProfilerSteps"
    kernel_kinds = [KINDS.index(KernelKind.COMPUTATION), KINDS.index(KernelKind.COMMUNICATION)]
    sel = np.isin(d.gpu_kind, kernel_kinds) & ~d.gpu_sync if len(d.gpu_ts) else np.zeros(0, bool)
    kept: list[tuple[str, int]] = []
    if sel.any():
        ids, counts = np.unique(d.gpu_name[sel], return_counts=True)
        kept = [(d.names[int(i)], int(c)) for i, c in zip(ids.tolist(), counts.tolist(), strict=True)
                if "elementwise" not in d.names[int(i)]]
    if not kept:
        return None, (f"{steps} ProfilerStep and " if steps else "no ProfilerStep and ") + \
            "no kernel other than elementwise ones: repeated work cannot be told from one-off work"
    name, most = max(kept, key=lambda x: (x[1], x[0]))
    if most >= 2:
        return 0, f"{name} runs {most} times"
    return 1, (f"each of the {len(kept)} non-elementwise kernels runs once, in "
               f"{'1 ProfilerStep' if steps == 1 else 'no ProfilerStep'}")


def _span(d: RankData) -> tuple[float, float]:
    """First to last recorded event: operators, annotations, runtime calls, GPU activities, host syncs, steps."""
    hs_end = d.hsync_ts + d.hsync_dur if d.hsync_ts is not None and len(d.hsync_ts) else None
    starts = [float(a.min()) for a in (d.gpu_ts, d.rt_ts, d.op_ts, d.ann_ts, d.hsync_ts) if a is not None and len(a)]
    ends = [float(a.max()) for a in (d.gpu_end, d.rt_ts + d.rt_dur if len(d.rt_ts) else None, d.op_end, d.ann_end,
                                     hs_end) if a is not None and len(a)]
    starts += [s[0] for s in d.step_events]
    ends += [s[0] + s[1] for s in d.step_events]
    return (min(starts), max(ends)) if starts else (0.0, 0.0)


def setup_tables(d: RankData) -> Tables:
    """``setup`` and ``setup_kinds`` rows of one rank (module docstring)."""
    start, stop = _span(d)
    pieces = _union_pieces(d)
    kind_rows: list[SetupKindRow] = []
    all_s: list[Any] = []
    all_e: list[Any] = []
    unsteady: set[int] = set()
    for kind in KIND_NAMES:
        parts = pieces[kind]
        if not parts:
            continue
        s = np.concatenate([p[0] for p in parts])
        e = np.concatenate([p[1] for p in parts])
        n = np.concatenate([p[2] for p in parts])
        longest = int(np.argmax(e - s))
        steps_in = _steps_of(d, s) if d.step_events else []
        if kind in UNSTEADY:
            unsteady.update(x for x in steps_in if x is not None)
        kind_rows.append(SetupKindRow(d.rank, kind, len(s), intervals.length(s, e), d.names[int(n[longest])],
                                      float(e[longest] - s[longest]), _steps_text(steps_in)))
        all_s.append(s)
        all_e.append(e)
    su, eu = intervals.union(np.concatenate(all_s), np.concatenate(all_e)) if all_s else (np.zeros(0), np.zeros(0))
    setup_us = float((eu - su).sum())
    gpu_span = gpu_idle = setup_idle = 0.0
    busy = ~d.gpu_sync if len(d.gpu_ts) else np.zeros(0, bool)
    if busy.any():
        bs, be = intervals.union(d.gpu_ts[busy], d.gpu_end[busy])
        gpu_span = float(be[-1] - bs[0])
        gs, ge = be[:-1], bs[1:]  # the idle gaps between busy intervals
        gpu_idle = float((ge - gs).sum())
        setup_idle = _overlap(gs, ge, su, eu)
    steps = len({s[2] for s in d.step_events})
    one_shot, why = _one_shot(d, steps)
    detail = "; ".join(f"{r.kind} {r.us / 1e3:,.1f} ms ({r.events:,} event{'s' if r.events != 1 else ''}, "
                       f"longest {r.longest} {r.longest_us / 1e3:,.1f} ms)" for r in kind_rows)
    capture = stop - start
    from my_utils.profiling.model.rank_coverage import ranges

    row = SetupRow(d.rank, capture, setup_us, pct(setup_us, capture) if capture > 0 else math.nan, gpu_span, gpu_idle,
                   setup_idle, steps, one_shot, why, detail or "no one-off work found",
                   ranges(sorted(unsteady)) if unsteady else "")
    return {"setup": [row], "setup_kinds": kind_rows}


def _overlap(a_s: Any, a_e: Any, b_s: Any, b_e: Any) -> float:
    """Length covered by both sets of disjoint sorted intervals."""
    if not len(a_s) or not len(b_s):
        return 0.0
    return intervals.overlap_length((a_s, a_e), (b_s, b_e))
