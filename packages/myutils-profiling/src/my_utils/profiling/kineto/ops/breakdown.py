"""GPU time by operator category, by operator, and by operator and argument shapes, against the roofline.

Three tables per rank, each share a percent of the rank's GPU work (kernels, copies and sets;
``cuda_sync`` waits left out), each row naming an example event (``example_index``: its position
in ``traceEvents``) so that a user can find it in the trace:

* ``op_categories``: GPU time per category (``ops.categories``), with the part replayed from CUDA
  graphs (categorised by kernel name: :mod:`.attribution`);
* ``op_operators``: GPU time per launching operator (the innermost one), its dominant category,
  its calls, and the compiled region its kernels ran in (``torch.compile``); graph replays and
  kernels launched outside any operator are rows of their own, with a note;
* ``op_shapes``: per operator and distinct recorded arguments (shapes, dtypes, strides, concrete
  inputs), the calls and their GPU time, the modelled FLOPs and bytes per call (``ops.cost``,
  ranges where an assumption matters), the achieved TFLOP/s and GB/s, the arithmetic intensity,
  the bound and the percent of the roofline (``ops.roofline``), and whether a replay script can
  be written for it (``ops.replay``). Inductor's Triton launches carry the FLOPs and bytes
  Inductor recorded for them (``kernel_flop``, ``kernel_num_gb``), which are used as given.

``op_coverage`` says per rank how much of the GPU time each table could explain: under an
operator, under a modelled operator, replayed from graphs, under a compiled region.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from my_utils.profiling.kineto.mfu import TENSOR_CORE
from my_utils.profiling.kineto.ops.args import OpArgs
from my_utils.profiling.kineto.ops.attribution import Attribution, attribute, graph_note
from my_utils.profiling.kineto.ops.categories import CATEGORIES, LABELS, operator_category
from my_utils.profiling.kineto.ops.cost import Cost, op_cost
from my_utils.profiling.kineto.ops.roofline import HOST_COPY, HOST_LINK, ceiling, judge
from my_utils.profiling.kineto.rank_data import RankData
from my_utils.profiling.kineto.rows import Row, Tables, pct

#: ``op_shapes`` keeps the rows with the most GPU time (the JSON report holds them all up to this).
TOP_SHAPES = 300
GRAPH_ROW = "(CUDA graph replay)"
NO_OPERATOR = "(no operator)"


@dataclass(frozen=True)
class CategoryRow(Row):
    """GPU time of one category on one rank."""

    rank: int | None
    category: str
    label: str
    gpu_us: float
    pct: float
    kernels: int
    graph_us: float
    example: str
    example_index: int


@dataclass(frozen=True)
class OperatorRow(Row):
    """GPU time launched by one operator (the innermost operator above each kernel) on one rank."""

    rank: int | None
    operator: str
    category: str
    gpu_us: float
    pct: float
    calls: int
    kernels: int
    compiled_region: str
    example_index: int
    note: str


@dataclass(frozen=True)
class ShapeRow(Row):
    """One operator with one set of recorded arguments: its GPU time, modelled cost and place under the roofline.

    The first twelve fields are what a report page shows (its generic tables show twelve columns); the
    JSON, CSV and DataFrames hold them all.
    """

    rank: int | None
    operator: str
    input_dims: str
    calls: int
    gpu_us: float
    pct: float
    tflops: float | None
    gbps: float | None
    bound: str
    roofline_pct_low: float | None
    roofline_pct_high: float | None
    example_index: int
    category: str
    input_types: str
    input_strides: str
    concrete_inputs: str
    us_per_call: float
    flops_low: float | None
    flops_high: float | None
    bytes_low: float | None
    bytes_high: float | None
    intensity_low: float | None
    intensity_high: float | None
    roof: str
    peak_tflops: float | None
    bandwidth_gbps: float | None
    formula: str
    not_measured: str
    replay: str


@dataclass(frozen=True)
class CoverageRow(Row):
    """How much of a rank's GPU work the operation tables explain."""

    rank: int | None
    gpu_us: float
    operator_us: float
    modelled_us: float
    graph_us: float
    graph_kernels: int
    compiled_us: float
    triton_us: float
    triton_flops_us: float
    shapes_recorded: bool
    note: str


def _text(v: Any) -> str:
    """A recorded argument list as JSON text, spaced so that a page can wrap it."""
    return "" if v is None else json.dumps(v)


def inductor_cost(args: OpArgs, name: str) -> Cost | None:
    """A Triton launch's cost as Inductor recorded it (``kernel_flop``, ``kernel_num_gb``), None when it did not."""
    if args.kernel_flop is None and args.kernel_num_gb is None:
        return None
    flops = args.kernel_flop or 0.0
    nbytes = (args.kernel_num_gb or 0.0) * 1e9
    dtype = next((t for i in args.tensors() if (t := args.dtype(i))), "")
    what = "Inductor's kernel_flop" + (" and kernel_num_gb" if args.kernel_num_gb is not None else
                                       " (bytes not recorded: the compute roof only)")
    return Cost(flops, flops, nbytes, nbytes, dtype, "tem_" in name or "mm" in name, "inductor", what)


def replay_readiness(args: OpArgs | None) -> str:
    """``ready`` when a replay script can rebuild the call, else what the trace lacks."""
    if args is None or not args.dims:
        return "no shapes recorded for this call"
    missing = [w for w, gone in (("strides", args.strides is None), ("concrete inputs", args.concrete is None))
               if gone]
    return "ready" if not missing else f"no {' and no '.join(missing)} recorded (older torch): contiguous tensors " \
                                       "and default scalars would be guesses"


def op_tables(d: RankData, top: int = TOP_SHAPES) -> Tables:
    """``op_categories``, ``op_operators``, ``op_shapes`` and ``op_coverage`` of one rank (module docstring)."""
    if not len(d.gpu_ts):
        return {}
    a = attribute(d)
    total = a.total_us
    if total <= 0:
        return {}
    out: dict[str, Sequence[Row]] = {"op_categories": _categories(d, a, total)}
    operators, regions = _operators(d, a, total)
    out["op_operators"] = operators
    shapes, modelled_us, triton_us, triton_flops_us = _shapes(d, a, total, top)
    if shapes:
        out["op_shapes"] = shapes
    out["op_coverage"] = [CoverageRow(
        d.rank, total, float(a.dur[a.op >= 0].sum()), modelled_us, float(a.dur[a.graph].sum()), int(a.graph.sum()),
        float(a.dur[a.region >= 0].sum()), triton_us, triton_flops_us,
        bool(d.shaped_ops().any()),
        "; ".join(x for x in (graph_note(d, a), regions) if x))]
    return out


def _categories(d: RankData, a: Attribution, total: float) -> list[CategoryRow]:
    rows = []
    for code, name in enumerate(CATEGORIES):
        mine = a.category == code
        if not mine.any():
            continue
        durs = a.dur[mine]
        longest = int(np.argmax(durs))
        g = int(a.rows[mine][longest])
        rows.append(CategoryRow(d.rank, name, LABELS[name], float(durs.sum()), pct(float(durs.sum()), total),
                                int(mine.sum()), float(a.dur[mine & a.graph].sum()), d.names[int(d.gpu_name[g])],
                                int(d.gpu_index[g])))
    rows.sort(key=lambda r: -r.gpu_us)
    return rows


def _operators(d: RankData, a: Attribution, total: float) -> tuple[list[OperatorRow], str]:
    key = np.where(a.graph, -2, np.where(a.op >= 0, d.op_name[np.clip(a.op, 0, None)] if len(a.op) and
                                         d.op_name is not None and len(d.op_name) else -1, -1))
    rows = []
    triton_regions: dict[str, float] = {}
    for k in np.unique(key).tolist():
        mine = key == k
        durs = a.dur[mine]
        by_cat = np.bincount(a.category[mine].astype(np.int64), weights=durs, minlength=len(CATEGORIES))
        dominant = CATEGORIES[int(np.argmax(by_cat))]
        ops = a.op[mine]
        calls = len(np.unique(ops[ops >= 0]))
        regions = a.region[mine]
        region = ""
        if (regions >= 0).any():
            r_vals, r_counts = np.unique(regions[regions >= 0], return_counts=True)
            region = d.names[int(a.stacks.name[int(r_vals[np.argmax(r_counts)])])]
            if len(r_vals) > 1:
                region += f" (+{len(r_vals) - 1} more)"
        if k >= 0:
            per_op = np.bincount(np.searchsorted(np.unique(ops), ops), weights=durs)
            top_op = int(np.unique(ops)[int(np.argmax(per_op))])
            name, example, note = d.names[k], int(d.op_index[top_op]), ""
            own = operator_category(name)
            if own is not None and by_cat[CATEGORIES.index(own)] > 0:
                dominant = own if by_cat[CATEGORIES.index(own)] >= 0.5 * durs.sum() else dominant
        else:
            g = int(a.rows[mine][int(np.argmax(durs))])
            name, example = (GRAPH_ROW if k == -2 else NO_OPERATOR), int(d.gpu_index[g])
            note = ("replayed from a CUDA graph: no operator or shape in the trace, categorised by kernel name"
                    if k == -2 else "launched outside any recorded operator (a runtime call at the top of its "
                                    "thread, or a trace recorded without operators)")
        if region and name.startswith("triton_"):
            triton_regions[region] = triton_regions.get(region, 0.0) + float(durs.sum())
        rows.append(OperatorRow(d.rank, name, dominant, float(durs.sum()), pct(float(durs.sum()), total), calls,
                                int(mine.sum()), region, example, note))
    rows.sort(key=lambda r: -r.gpu_us)
    regions_text = "; ".join(f"Triton kernels under {r}: {us / 1e3:,.1f} ms" for r, us in
                             sorted(triton_regions.items(), key=lambda kv: -kv[1])[:3])
    return rows, regions_text


def _shapes(d: RankData, a: Attribution, total: float, top: int) -> tuple[list[ShapeRow], float, float, float]:
    """The ``op_shapes`` rows, and the µs under modelled operators, under Triton launches, and of those with FLOPs."""
    under = (a.op >= 0) & ~a.graph  # a graph's replay is no work of the operator that launched the graph
    if d.op_sig is None or not under.any():
        return [], 0.0, 0.0, 0.0
    ops = a.op[under]
    sig = d.op_sig[ops].astype(np.int64)
    name = d.op_name[ops].astype(np.int64)
    durs = a.dur[under]
    kernels = d.gpu_name[a.rows[under]]
    keys, back = np.unique(np.stack([name, sig], axis=1), axis=0, return_inverse=True)
    back = back.reshape(-1)
    per_key_us = np.bincount(back, weights=durs, minlength=len(keys))
    members = np.argsort(back, kind="stable")  # each key's kernels are one slice of this
    starts = np.searchsorted(back[members], np.arange(len(keys) + 1))
    gpu = str(d.context.get("gpu") or "")
    rows: list[ShapeRow] = []
    modelled_us = triton_us = triton_flops_us = 0.0
    for kidx in np.argsort(-per_key_us, kind="stable").tolist():
        nid, sid = (int(x) for x in keys[kidx])
        opname = d.names[nid]
        mine = members[starts[kidx]:starts[kidx + 1]]
        gpu_us = float(per_key_us[kidx])
        calls = len(np.unique(ops[mine]))
        raw = d.sigs[sid] if sid >= 0 else {}
        args = OpArgs.from_args(raw) if raw else None
        cost = None
        if args is not None:
            cost = inductor_cost(args, opname) or op_cost(opname, args)
        is_triton = opname.startswith("triton_") or raw.get("kernel_backend") == "triton"
        if is_triton:
            triton_us += gpu_us
            triton_flops_us += gpu_us if cost is not None and cost.flops_low > 0 else 0.0
        if cost is not None:
            modelled_us += gpu_us
        if len(rows) >= top:
            continue
        under_names = [d.names[k] for k in np.unique(kernels[mine]).tolist()]
        tensor_core = cost is not None and cost.matrix and cost.dtype == "fp32" and any(
            TENSOR_CORE.search(n) for n in under_names)
        host = any(HOST_COPY.match(n) for n in under_names)
        example = int(d.op_index[int(ops[mine][int(np.argmax(durs[mine]))])])
        rows.append(_shape_row(d, opname, raw, args, cost, calls, gpu_us, total, gpu, tensor_core, host, example))
    return rows, modelled_us, triton_us, triton_flops_us


def _shape_row(d: RankData, opname: str, raw: dict[str, Any], args: OpArgs | None, cost: Cost | None, calls: int,
               gpu_us: float, total: float, gpu: str, tensor_core: bool, host: bool, example: int) -> ShapeRow:
    category = operator_category(opname) or (cost.family if cost is not None and cost.family in CATEGORIES
                                             else "other")
    dims, types = _text(raw.get("Input Dims")), _text(raw.get("Input type"))
    strides, concrete = _text(raw.get("Input Strides")), _text(raw.get("Concrete Inputs"))
    per_call, share, replay = gpu_us / calls if calls else 0.0, pct(gpu_us, total), replay_readiness(args)
    if cost is None:
        why = "no shapes recorded" if args is None or not args.dims else "no model for this operator or these shapes"
        return ShapeRow(d.rank, opname, dims, calls, gpu_us, share, None, None, "", None, None, example, category,
                        types, strides, concrete, per_call, None, None, None, None, None, None, "", None, None, "",
                        why, replay)
    roof = HOST_LINK if host else ceiling(gpu, cost.dtype, cost.matrix, tensor_core)
    j = judge(cost, calls, gpu_us, roof)
    return ShapeRow(d.rank, opname, dims, calls, gpu_us, share, j.tflops, j.gbps, j.bound, j.roofline_pct_low,
                    j.roofline_pct_high, example, category, types, strides, concrete, per_call, cost.flops_low,
                    cost.flops_high, cost.bytes_low, cost.bytes_high, j.intensity_low, j.intensity_high, roof.label,
                    roof.flops / 1e12 if roof.flops else None, roof.bandwidth / 1e9 if roof.bandwidth else None,
                    cost.formula, j.not_measured, replay)
