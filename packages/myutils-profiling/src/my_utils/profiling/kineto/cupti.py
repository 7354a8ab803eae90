"""CUPTI counters: the per-kernel metrics of a CUPTI profiler-range trace, with the operators that launched each kernel.

Holistic Trace Analysis' ``get_cupti_counter_data_with_operators`` (``hta/analyzers/cupti_counter_analysis.py``,
``tests/test_cupti_profiler.py``): in a trace recorded with CUPTI's range profiler each kernel is a
``cuda_profiler_range`` event whose arguments are the counters measured on it. The n-th such
event (by start) is the kernel of the n-th ``cudaLaunchKernel`` call (by start); when the counts
differ nothing can be paired and there is no table. Each kernel gets the CPU operators above its
launch call (``op_stack``, top first), the top one and the bottom one (the operator that called
the runtime). ``flops`` adds the SASS floating-point instruction counters that are present,
an FMA counting 2 (HTA's ``CUDA_SASS_INSTRUCTION_COUNTER_FLOPS``).

``kineto_cupti_counters``: one row per kernel (rank, index, name, top_op, bottom_op, ts_us,
dur_us, flops and every counter); ``kineto_cupti_ops``: per (top operator, bottom operator) the
kernels, their time and FLOPs.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from my_utils.profiling.kineto.call_stacks import OP, build_stacks
from my_utils.profiling.kineto.rank_data import RankData
from my_utils.profiling.kineto.rows import Tables

#: FLOPs per SASS instruction counter (fused multiply-adds count 2).
SASS_FLOPS: dict[str, int] = {f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum": 2 if "fma" in op else 1
                              for op in ("ffma", "fmul", "fadd", "hfma", "hmul", "hadd", "dfma", "dmul", "dadd")}
_LAUNCH = re.compile(r"cudaLaunchKernel")


def cupti_rows(d: RankData) -> list[dict[str, Any]]:
    """One row per profiled kernel (module docstring); empty when kernels and launches cannot be paired."""
    if not d.counters:
        return []
    ranges = sorted(d.counters, key=lambda c: (c[0], c[3]))
    launch_ids = np.array([_LAUNCH.match(n) is not None for n in d.names] or [False])
    calls = np.flatnonzero(launch_ids[d.rt_name]) if len(d.rt_name) else np.zeros(0, np.int64)
    calls = calls[np.argsort(d.rt_ts[calls], kind="stable")]
    if len(calls) != len(ranges):
        return []
    s = build_stacks(d)
    rt_offset = len(d.op_ts) + len(d.ann_ts)
    rows = []
    for (ts, dur, name, index, counters), call in zip(ranges, calls.tolist(), strict=True):
        ops = [i for i in s.ancestors(rt_offset + call) if s.kind[i] == OP]
        names = [d.names[int(s.name[i])] for i in ops]
        flops = sum(counters[k] * w for k, w in SASS_FLOPS.items() if k in counters)
        rows.append({"rank": d.rank, "index": index, "name": d.names[name], "top_op": names[0] if names else "",
                     "bottom_op": names[-1] if names else "", "op_stack": " > ".join(names), "ts_us": ts + d.base_us,
                     "dur_us": dur, "flops": flops, **counters})
    return rows


def cupti_tables(d: RankData) -> Tables:
    """``cupti_counters`` and ``cupti_ops`` of one rank (none without paired profiler ranges)."""
    rows = cupti_rows(d)
    if not rows:
        return {}
    ops: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        a = ops.setdefault((r["top_op"], r["bottom_op"]), [0, 0.0, 0.0])
        a[0] += 1
        a[1] += r["dur_us"]
        a[2] += r["flops"]
    summary = [{"rank": d.rank, "top_op": top, "bottom_op": bottom, "kernels": int(a[0]), "dur_us": a[1],
                "flops": a[2]} for (top, bottom), a in sorted(ops.items(), key=lambda kv: -kv[1][1])]
    return {"cupti_counters": rows, "cupti_ops": summary}
