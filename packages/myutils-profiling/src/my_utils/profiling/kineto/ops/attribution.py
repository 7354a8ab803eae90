"""Each GPU activity of a rank tied to what launched it: its operator, its category, a CUDA graph, a compiled region.

A kernel, copy or set is tied to the innermost CPU operator above its launch call in the call
stacks (``kineto.call_stacks``, HTA's call graph); its category follows ``ops.categories``. A
kernel launched by ``cudaGraphLaunch`` (``cuGraphLaunch``, ``hipGraphLaunch``), or carrying a ``graph id``,
was replayed from a CUDA graph (``kineto.cuda_graphs.graph_launched``, the one test of it): Kineto links it to the launch call only, never to the operator that was captured
(CUPTI's graph-node records are not written into the trace), so it gets no operator and no shape
and is categorised by its name; :func:`graph_note` says so, and whether the capture is in the
trace at all. A kernel under a ``Torch-Compiled Region`` (``torch.compile``), ``CompiledFunction``
or ``## Call CompiledFxGraph`` range belongs to that compiled region (the outermost such range).
``cuda_sync`` events on a stream are waits, not work: they are left out here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from my_utils.profiling.kineto.call_stacks import ANNOTATION, OP, Stacks, build_stacks
from my_utils.profiling.kineto.cuda_graphs import GRAPH_BUILD, graph_launched
from my_utils.profiling.kineto.ops.categories import CATEGORIES, STRUCTURAL, category, operator_category
from my_utils.profiling.kineto.rank_data import RankData

REGION = re.compile(r"^(?:Torch-Compiled Region|CompiledFunction|## Call CompiledFxGraph|## Call CompiledFunction)")


@dataclass(frozen=True)
class Attribution:
    """One rank's GPU work, one entry per activity (``cuda_sync`` waits left out).

    ``rows``: the activities' rows in the rank's GPU columns; ``dur`` their µs; ``op``: the innermost
    operator's row in the rank's operator columns (-1: none); ``category``: an index into
    :data:`~.categories.CATEGORIES`; ``graph``: replayed from a CUDA graph; ``region``: the compiled
    region's row in ``stacks`` (-1: none); ``stacks`` the call stacks they were read from.
    """

    rows: Any
    dur: Any
    op: Any
    category: Any
    graph: Any
    region: Any
    stacks: Stacks

    @property
    def total_us(self) -> float:
        """All GPU work of the rank (µs): the denominator of every share."""
        return float(self.dur.sum())


def _ids(names: list[str], ids: Any, pattern: re.Pattern[str]) -> list[int]:
    """The name ids among ``ids`` whose name matches ``pattern``."""
    out = []
    for i in np.unique(ids).tolist() if ids is not None and len(ids) else []:
        name = names[i]
        if pattern.search(name):
            out.append(i)
    return out


def attribute(d: RankData) -> Attribution:
    """Tie every GPU activity of ``d`` to its operator, category, graph and compiled region (module docstring)."""
    s = build_stacks(d)
    rows = np.flatnonzero(~np.asarray(d.gpu_sync, dtype=bool)) if len(d.gpu_ts) else np.zeros(0, np.int64)
    at = rows + s.cpu_rows
    n_ops = len(d.op_ts) if d.op_ts is not None else 0
    op_rows = s.kind.mask(OP)
    inner = s.nearest(op_rows)[at] if len(at) else np.zeros(0, np.int64)
    inner = np.where((inner >= 0) & (inner < n_ops), inner, -1)
    op_names = np.unique(d.op_name).tolist() if n_ops else []
    structural = {i: c for i in op_names if (c := operator_category(d.names[i])) in STRUCTURAL}
    struct_code = np.full(len(at), -1, np.int16)
    if structural and len(at):
        above = s.nearest(op_rows & np.isin(s.name, list(structural)))[at]
        hit = above >= 0
        struct_code[hit] = [CATEGORIES.index(structural[int(n)]) for n in s.name[above[hit]].tolist()]
    region_ids = _ids(d.names, np.concatenate([x for x in (d.op_name, d.ann_name) if x is not None and len(x)] or
                                              [np.zeros(0, np.int32)]), REGION)
    region = np.full(len(at), -1, np.int64)
    if region_ids and len(at):
        mask = (op_rows | s.kind.mask(ANNOTATION)) & np.isin(s.name, region_ids)
        region = s.nearest(mask, outermost=True)[at]
    graph = graph_launched(d)[rows]  # the one test of a graph replay (kineto.cuda_graphs)
    kname = d.gpu_name[rows]
    lname = np.where(inner >= 0, d.op_name[np.clip(inner, 0, None)] if n_ops else -1, -1)
    cats = np.zeros(len(at), np.int8)
    if len(at):
        combos, back = np.unique(np.stack([kname, lname, struct_code.astype(np.int64)], axis=1), axis=0,
                                 return_inverse=True)
        codes = np.array([CATEGORIES.index(category(d.names[k], d.names[ln] if ln >= 0 else None,
                                                    CATEGORIES[sc] if sc >= 0 else None))
                          for k, ln, sc in combos.tolist()], dtype=np.int8)
        cats = codes[back.reshape(-1)]
    return Attribution(rows, d.gpu_dur[rows], inner, cats, graph, region, s)


def graph_note(d: RankData, a: Attribution) -> str:
    """What the trace says about its CUDA-graph replays: how many kernels, and why they have no operator."""
    n = int(a.graph.sum())
    if not n:
        return ""
    us = float(a.dur[a.graph].sum())
    captured = _ids(d.names, d.rt_name, GRAPH_BUILD)
    where = ("the capture is in the trace, but Kineto records no link from a replayed kernel to the launch it "
             "captured (CUPTI's graph-node records are not written)" if captured else
             "the graph was captured before the profiler started (no cudaStreamBeginCapture in the trace)")
    return (f"{n} GPU activities ({us / 1e3:,.1f} ms) were replayed from CUDA graphs: {where}, so they have no "
            "operator and no shape; they are categorised by kernel name")
