"""MFU (model FLOPs utilisation): the FLOPs the operators' shapes imply, over the time and the GPU's dense peak.

Holistic Trace Analysis has no such estimate; this one says what it counts and when it cannot.

FLOPs come from the input shapes torch.profiler records with ``record_shapes=True`` (``Input
Dims`` / ``Input type``), for the operators whose FLOPs the shapes fix, each counted once at the
level that calls the kernels: ``aten::mm`` 2·M·K·N, ``aten::addmm`` 2·M·K·N, ``aten::bmm`` and
``aten::baddbmm`` 2·B·M·K·N, ``aten::convolution`` 2·N·O·(C/groups)·kh·kw·H'·W' (the output size
needs the stride/padding/dilation of ``Concrete Inputs``, written by newer torch), and the flash /
efficient attention kernels as ``ops.flops`` counts them (4·B·H·L·S·D, the causal pairs only when
``is_causal`` is set), and Triton launches with the FLOPs Inductor recorded for them
(``kernel_flop``, written with ``torch._inductor.config.benchmark_kernel``). Other operators are
not counted and are listed (``uncounted``); ``coverage_pct`` is the share of computation-kernel
time launched under counted operators, so a reader sees how much of the GPU's work the figure
covers. The dtype is the first tensor input's (``float`` → fp32, ``c10::Half`` → fp16,
``c10::BFloat16`` → bf16, ``double`` → fp64). An fp32 product whose kernels are tensor-core
kernels (a name holding ``tensorop``, ``tf32``, ``s1688`` or ``xmma``: cuBLAS/CUTLASS TF32
families) ran in TF32 and is counted against the TF32 peak; other fp32 products against fp32's.

The peak is the GPU's dense peak for each dtype (``kineto.peaks``: one sourced table); the
time is the profiled steps' summed duration (else the GPU span, said in ``window``). MFU =
Σ FLOPs_dtype / peak_dtype over the time. "Not measured" (``mfu_pct`` null, ``not_measured`` the
reason) when the trace names no GPU or one the table lacks, when no shapes were recorded, or
when no counted operator ran. ``kineto_mfu_ops``: per operator and dtype the calls, FLOPs, the
kernels' time under them and the throughput during those kernels.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from my_utils.profiling.hardware.peaks import peak_flops
from my_utils.profiling.kineto.call_stacks import GPU, Stacks, build_stacks
from my_utils.profiling.kineto.kinds import KINDS, KernelKind
from my_utils.profiling.kineto.rank_data import RankData
from my_utils.profiling.kineto.rows import Row, Tables

DTYPES = {"float": "fp32", "c10::Half": "fp16", "c10::BFloat16": "bf16", "double": "fp64", "c10::Float8_e4m3fn": "fp8",
          "c10::Float8_e5m2": "fp8"}
#: Kernel names of tensor-core (TF32 for fp32 inputs) matrix-product families.
TENSOR_CORE = re.compile(r"tensorop|tf32|s1688|xmma", re.IGNORECASE)
ATTENTION = ("aten::_scaled_dot_product_flash_attention", "aten::_scaled_dot_product_efficient_attention",
             "aten::_scaled_dot_product_cudnn_attention", "aten::_flash_attention_forward",
             "aten::_efficient_attention_forward")


@dataclass(frozen=True)
class MfuRow(Row):
    """One rank's MFU, or why it could not be estimated (``mfu_pct`` None and ``not_measured``)."""

    rank: int | None
    gpu: str
    window: str
    window_us: float
    flops: float
    achieved_tflops: float | None
    mfu_pct: float | None
    coverage_pct: float | None
    counted_ops: int
    uncounted: str
    peak: str
    not_measured: str


@dataclass(frozen=True)
class MfuOpRow(Row):
    """FLOPs of one operator and dtype on one rank, and the throughput while its kernels ran."""

    rank: int | None
    operator: str
    dtype: str
    calls: int
    flops: float
    kernel_us: float
    tflops_in_kernels: float | None
    pct_of_peak: float | None


def _ints(v: Any) -> list[int] | None:
    return [int(x) for x in v] if isinstance(v, list) and all(isinstance(x, int) for x in v) else None


def _concrete(args: dict[str, Any], i: int) -> list[int] | None:
    """The i-th ``Concrete Inputs`` value as a list of ints (``"[1, 1]"`` or ``"1"``), None when absent."""
    values = args.get("Concrete Inputs")
    if not isinstance(values, list) or i >= len(values):
        return None
    text = str(values[i])
    nums = re.findall(r"-?\d+", text)
    return [int(n) for n in nums] if nums else None


def _flag(args: dict[str, Any], i: int) -> bool:
    """Whether the i-th ``Concrete Inputs`` value is a true boolean (``"True"`` or ``"1"``)."""
    values = args.get("Concrete Inputs")
    return isinstance(values, list) and i < len(values) and str(values[i]).strip() in ("True", "1", "true")


def op_flops(name: str, args: dict[str, Any]) -> tuple[float, str] | None:
    """FLOPs and dtype of one operator call from its recorded shapes (None: not countable from what was recorded)."""
    dims = args.get("Input Dims")
    types = args.get("Input type")
    if not isinstance(dims, list) or not isinstance(types, list) or not types:
        return None
    dtype = DTYPES.get(str(types[0] if name not in ("aten::addmm", "aten::baddbmm") else types[1]))
    if dtype is None:
        return None
    shapes = [_ints(x) for x in dims]
    if name == "aten::mm" and len(shapes) >= 2 and shapes[0] and shapes[1] and len(shapes[0]) == 2:
        (m, k), n = shapes[0], shapes[1][-1]
        return 2.0 * m * k * n, dtype
    if name == "aten::addmm" and len(shapes) >= 3 and shapes[1] and shapes[2] and len(shapes[1]) == 2:
        (m, k), n = shapes[1], shapes[2][-1]
        return 2.0 * m * k * n, dtype
    if name in ("aten::bmm", "aten::baddbmm"):
        lhs, rhs = (shapes[0], shapes[1]) if name == "aten::bmm" else \
            (shapes[1], shapes[2]) if len(shapes) > 2 else (None, None)
        if lhs and rhs and len(lhs) == 3 and len(rhs) == 3:
            return 2.0 * lhs[0] * lhs[1] * lhs[2] * rhs[2], dtype
    if name == "aten::convolution" and len(shapes) >= 2 and shapes[0] and shapes[1]:
        x, w = shapes[0], shapes[1]
        stride, padding, dilation = _concrete(args, 3), _concrete(args, 4), _concrete(args, 5)
        groups = _concrete(args, 8)
        spatial = len(x) - 2
        if stride is None or padding is None or dilation is None or spatial < 1 or len(w) != len(x):
            return None
        st, pad, dil = ([v[0]] * spatial if len(v) == 1 else v for v in (stride, padding, dilation))
        out = [(x[2 + i] + 2 * pad[i] - dil[i] * (w[2 + i] - 1) - 1) // st[i] + 1 for i in range(spatial)]
        g = groups[0] if groups else 1
        return 2.0 * x[0] * w[0] * (x[1] // g) * math.prod(w[2:]) * math.prod(out), dtype
    if name in ATTENTION:  # the operation model knows each variant's layout and causal argument (ops.flops)
        from my_utils.profiling.kineto.ops.args import OpArgs
        from my_utils.profiling.kineto.ops.cost import op_cost

        cost = op_cost(name, OpArgs.from_args(args))
        return (cost.flops_low, dtype) if cost is not None else None
    return None


def inductor_rows(d: RankData, in_window: Any) -> dict[int, tuple[str, str, float]]:
    """Triton launches whose record carries Inductor's FLOPs (``kernel_flop``): row → (name, dtype, FLOPs).

    The dtype is the first tensor input's (Inductor records the launch's tensors); a launch
    without a known dtype is left out (its peak would be a guess).
    """
    out: dict[int, tuple[str, str, float]] = {}
    if d.op_sig is None or not d.sigs:
        return out
    flop_sigs = {i: s for i, s in enumerate(d.sigs) if isinstance(s.get("kernel_flop"), (int, float))
                 and s["kernel_flop"] > 0}
    if not flop_sigs:
        return out
    for row in np.flatnonzero(np.isin(d.op_sig, list(flop_sigs))).tolist():
        if not in_window[row]:
            continue
        sig = flop_sigs[int(d.op_sig[row])]
        dtype = next((DTYPES[t] for t in sig.get("Input type") or [] if t in DTYPES), None)
        if dtype is not None:
            out[row] = (d.names[int(d.op_name[row])], dtype, float(sig["kernel_flop"]))
    return out


def _window(d: RankData) -> tuple[float, str, Any]:
    """(µs, words, a predicate on start times) of the time MFU is over: the steps, else the GPU span."""
    steps = sorted({(s[0], s[0] + s[1]) for s in d.step_events})
    if steps:
        starts = np.array([a for a, _b in steps])
        ends = np.array([b for _a, b in steps])

        def inside(ts: Any) -> Any:
            pos = np.searchsorted(starts, ts, side="right") - 1
            return (pos >= 0) & (ts < ends[np.clip(pos, 0, None)])

        return float((ends - starts).sum()), f"{len(steps)} profiled step(s)", inside
    span = float(d.gpu_end.max() - d.gpu_ts.min()) if len(d.gpu_ts) else 0.0
    return span, "GPU span (no ProfilerStep)", lambda ts: np.ones(len(ts), bool)


def mfu_tables(d: RankData) -> Tables:
    """``mfu`` (always one row per rank with GPU activity) and ``mfu_ops`` (module docstring)."""
    if not len(d.gpu_ts):
        return {}
    gpu = str(d.context.get("gpu") or "")
    window_us, window, inside = _window(d)
    counted: dict[tuple[str, str], list[float]] = {}
    per_op_rows: dict[int, tuple[str, str, float]] = {}
    uncounted: dict[str, int] = {}
    shaped = 0
    in_window = inside(d.op_ts) if d.op_ts is not None and len(d.op_ts) else np.zeros(0, bool)
    for row, args in d.op_args.items():
        name = d.names[int(d.op_name[row])]
        if "Input Dims" in args:
            shaped += 1
        if not in_window[row]:
            continue
        got = op_flops(name, args)
        if got is None:
            uncounted[name] = uncounted.get(name, 0) + 1
            continue
        per_op_rows[row] = (name, got[1], got[0])
    per_op_rows.update(inductor_rows(d, in_window))  # torch.compile's Triton kernels, with Inductor's FLOPs
    stacks = build_stacks(d) if per_op_rows else None
    coverage = _coverage(d, stacks, per_op_rows) if stacks is not None else None
    if stacks is not None:
        for row, kernels in _kernels_under(stacks, per_op_rows).items():
            name, dtype, flops = per_op_rows[row]
            if dtype == "fp32" and any(TENSOR_CORE.search(d.names[k]) for k in kernels):
                per_op_rows[row] = (name, "tf32", flops)
    for row, (name, dtype, flops) in per_op_rows.items():
        a = counted.setdefault((name, dtype), [0, 0.0, 0.0])
        a[0] += 1
        a[1] += flops
        a[2] += float(stacks.kernel_us[row]) if stacks is not None else 0.0
    total = sum(a[1] for a in counted.values())
    reason = ""
    peaks = {dtype: peak_flops(gpu, dtype) for _n, dtype in counted} if gpu else {}
    if not gpu:
        reason = "the trace names no GPU (no deviceProperties)"
    elif not shaped and not counted:
        reason = "no operator shapes in the trace (record_shapes was off)"
    elif not counted:
        reason = "no operator whose FLOPs its shapes fix ran in the window"
    elif any(p is None for p in peaks.values()):
        missing = sorted(dtype for dtype, p in peaks.items() if p is None)
        reason = f"no dense peak for {gpu} in {', '.join(missing)} in the hardware table"
    mfu: float | None = None
    achieved: float | None = None
    peak_text = ""
    known = {dtype: p.value for dtype, p in peaks.items() if p is not None}
    if not reason and window_us > 0:
        used = sum(a[1] / known[dtype] for (_n, dtype), a in counted.items())
        mfu = 100.0 * used / (window_us * 1e-6)
        achieved = total / (window_us * 1e-6) / 1e12
        peak_text = "; ".join(f"{dtype} {p.value / 1e12:g} TFLOP/s ({p.model}, {p.source})"
                              for dtype, p in sorted(peaks.items()) if p is not None)
    summary = MfuRow(d.rank, gpu, window, window_us, total, achieved, mfu, coverage, sum(int(a[0]) for a in
                     counted.values()), ", ".join(f"{n} ×{c}" for n, c in sorted(uncounted.items())[:10]), peak_text,
                     reason)
    ops = []
    for (name, dtype), (calls, flops, kus) in sorted(counted.items(), key=lambda kv: -kv[1][1]):
        tflops = flops / (kus * 1e-6) / 1e12 if kus > 0 else None
        p = peaks.get(dtype)
        ops.append(MfuOpRow(d.rank, name, dtype, int(calls), flops, kus, tflops,
                            100.0 * tflops * 1e12 / p.value if tflops is not None and p is not None else None))
    out: dict[str, Sequence[Row]] = {"mfu": [summary]}
    if ops:
        out["mfu_ops"] = ops
    return out


def _kernels_under(s: Stacks, rows: dict[int, Any]) -> dict[int, list[int]]:
    """The names of the GPU activities under each of ``rows`` (operator rows)."""
    out: dict[int, list[int]] = {r: [] for r in rows}
    for g in range(s.cpu_rows, len(s.index)):
        for a in s.ancestors(g):
            if a in out:
                out[a].append(int(s.name[g]))
    return out


def _coverage(d: RankData, s: Stacks, counted: dict[int, Any]) -> float | None:
    """% of computation-kernel time launched under a counted operator."""
    comp = KINDS.index(KernelKind.COMPUTATION)
    total = float(d.gpu_dur[d.gpu_kind == comp].sum())
    if total <= 0:
        return None
    counted_rows = set(counted)  # op rows come first in the stacks table
    covered = 0.0
    for g in range(s.cpu_rows, len(s.index)):
        if s.kind[g] != GPU or d.gpu_kind[g - s.cpu_rows] != comp:
            continue
        if any(a in counted_rows for a in s.ancestors(g)):
            covered += float(d.gpu_dur[g - s.cpu_rows])
    return 100.0 * covered / total

