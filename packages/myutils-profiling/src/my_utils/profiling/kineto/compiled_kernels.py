"""torch.compile's generated kernels: which backend wrote each, its hash, and the GPU time it launched.

When Inductor runs a kernel it generated, the profiler records a CPU operator named after the kernel
(``triton_poi_fused_add_cos_sin_0``) whose arguments say ``kernel_backend`` (``triton``, ``cpp``...)
and ``kernel_hash`` (the name of the cached source file, the same across runs of the same code) —
Holistic Trace Analysis reads the same two fields (``ParserConfig.ARGS_TRITON_KERNELS``;
``tests/test_trace_parse.py::test_triton_trace``: one operator, backend ``triton``, hash
``cqaokwf2…``). The kernel the operator launches (through ``cuLaunchKernel``) hangs under it.

``kineto_compiled_kernels`` (per rank): one row per (operator, backend, hash): calls, the GPU
activities launched under those calls and their time, the kernel names. The kernel file's path is
left out: it holds the user's name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from my_utils.profiling.kineto.rank_data import RankData
from my_utils.profiling.kineto.rows import Row, Tables


@dataclass(frozen=True)
class CompiledKernelRow(Row):
    """One generated kernel's operator on one rank."""

    rank: int | None
    operator: str
    kernel_backend: str
    kernel_hash: str
    calls: int
    gpu_activities: int
    gpu_us: float
    kernels: str


def _text(value: Any, limit: int = 120) -> str:
    return str(value)[:limit] if value is not None else ""


def compiled_kernel_tables(d: RankData) -> Tables:
    """``compiled_kernels`` rows of one rank (module docstring); none when no operator names a kernel backend."""
    # the operators' recorded arguments (``collect.SIG_ARGS``) hold the backend and hash, once per distinct value
    kernel_sigs = [i for i, sig in enumerate(d.sigs) if "kernel_backend" in sig]
    if not kernel_sigs or d.op_sig is None:
        return {}
    rows = np.flatnonzero(np.isin(d.op_sig, kernel_sigs)).tolist()
    under: dict[int, list[int]] = {r: [] for r in rows}
    if len(d.gpu_ts):
        from my_utils.profiling.kineto.call_stacks import build_stacks

        s = build_stacks(d)
        mask = np.zeros(len(s.parent), bool)
        mask[rows] = True  # operators are the first rows of the stacks' table
        owner = s.nearest(mask)[s.cpu_rows:]
        for g in np.flatnonzero(owner >= 0).tolist():
            under[int(owner[g])].append(g)
    groups: dict[tuple[str, str, str], list[Any]] = {}
    for r in rows:
        args = d.sigs[int(d.op_sig[r])]
        key = (d.names[int(d.op_name[r])], _text(args.get("kernel_backend"), 40), _text(args.get("kernel_hash")))
        g = groups.setdefault(key, [0, 0, 0.0, {}])
        g[0] += 1
        g[1] += len(under[r])
        g[2] += float(d.gpu_dur[under[r]].sum()) if under[r] else 0.0
        for k in under[r]:
            g[3][d.names[int(d.gpu_name[k])]] = None
    out = [CompiledKernelRow(d.rank, op, backend, digest, calls, n, us, ", ".join(list(names)[:5]))
           for (op, backend, digest), (calls, n, us, names) in groups.items()]
    out.sort(key=lambda x: (-x.gpu_us, -x.calls, x.operator))
    return {"compiled_kernels": out}
