"""Frequent kernel sequences: the same run of kernels launched again and again by one operator — fusion candidates.

Holistic Trace Analysis' ``get_frequent_cuda_kernel_sequences`` (``hta/analyzers/cuda_kernel_analysis.py``,
``tests/test_trace_analysis.py::test_frequent_cuda_kernel_sequences`` /
``test_no_frequent_cuda_kernel_sequences_found``): with ``operator_name``, the roots are the
events whose name contains it, at the smallest call-stack depth any of them has, that launched
at least ``min_pattern_len`` GPU activities; a root's pattern is its name followed by the names
of every GPU activity under it, by start. Patterns are counted with the GPU time under the roots
(``kernel_us``) and the roots' own CPU time (``cpu_us``), sorted by count then pattern, as HTA.

Without ``operator_name`` (the report's table, ``kineto_kernel_sequences``), the roots are the
outermost ATen operators (an ``aten::`` operator with no ``aten::`` operator above it) that
launched at least ``min_pattern_len`` activities, and the ``top`` patterns by GPU time are
kept: the operators whose kernels a fused kernel could replace, each with its occurrences.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from my_utils.profiling.kineto.call_stacks import OP, Stacks, build_stacks
from my_utils.profiling.kineto.rank_data import RankData
from my_utils.profiling.kineto.rows import Row, Tables

MIN_PATTERN_LEN = 3
TOP_SEQUENCES = 10


@dataclass(frozen=True)
class KernelSequenceRow(Row):
    """One pattern: the operator, the GPU activities it launched in order, how often, and their time."""

    rank: int | None
    operator: str
    kernels: str
    length: int
    count: int
    kernel_us: float
    cpu_us: float
    kernel_us_per_call: float


def kernel_sequences(d: RankData, operator_name: str | None = None, min_pattern_len: int = MIN_PATTERN_LEN,
                     top: int | None = None, stacks: Stacks | None = None) -> list[KernelSequenceRow]:
    """The patterns of one rank (module docstring): HTA's order with ``operator_name``, else by GPU time."""
    s = stacks or build_stacks(d)
    names = d.names
    if operator_name is not None:
        hit = np.array([operator_name in n for n in names] or [False])
        candidates = np.flatnonzero(hit[s.name]) if len(s.name) else np.zeros(0, np.int64)
        if not len(candidates):
            return []
        shallowest = int(s.depth[candidates].min())
        roots = [int(i) for i in candidates if s.depth[i] == shallowest and s.num_kernels[i] >= min_pattern_len]
    else:
        aten = np.array([n.startswith("aten::") for n in names] or [False])
        is_op = s.kind.mask(OP)
        aten_op = is_op & aten[s.name]
        outermost = s.nearest(aten_op, outermost=True)
        every = np.arange(len(s.parent))
        roots = every[aten_op & (outermost == every) & (s.num_kernels >= min_pattern_len)].tolist()
    is_root = np.zeros(len(s.parent), bool)
    is_root[roots] = True
    root_of = s.nearest(is_root, outermost=True)  # roots never nest (one depth, or no aten:: above)
    # the GPU rows under each root, by start then row: one sort of columns, not a dict of lists
    gpu_rows = np.arange(s.cpu_rows, len(s.parent))
    owners = root_of[gpu_rows]
    gpu_rows, owners = gpu_rows[owners >= 0], owners[owners >= 0]
    order = np.lexsort((gpu_rows, s.ts[gpu_rows], owners))
    gpu_names = s.name[gpu_rows[order]].tolist()
    owners = owners[order]
    roots_at = np.asarray(roots, dtype=np.int64)
    first = np.searchsorted(owners, roots_at, side="left").tolist()
    past = np.searchsorted(owners, roots_at, side="right").tolist()
    acc: dict[tuple[int, ...], list[float]] = {}
    for root, lo, hi in zip(roots, first, past, strict=True):
        pattern = (int(s.name[root]), *gpu_names[lo:hi])
        a = acc.setdefault(pattern, [0, 0.0, 0.0])
        a[0] += 1
        a[1] += float(s.kernel_us[root])
        a[2] += float(s.end[root] - s.ts[root])
    rows = [KernelSequenceRow(d.rank, names[p[0]], " | ".join(names[k] for k in p[1:]), len(p) - 1, int(a[0]), a[1],
                              a[2], a[1] / a[0]) for p, a in acc.items()]
    if operator_name is not None:
        rows.sort(key=lambda r: (-r.count, f"{r.operator}|{r.kernels.replace(' | ', '|')}"))
    else:
        rows.sort(key=lambda r: (-r.kernel_us, -r.count, r.operator, r.kernels))
    return rows if top is None else rows[:top]


def sequence_tables(d: RankData, operator_name: str | None = None, min_pattern_len: int = MIN_PATTERN_LEN,
                    top: int = TOP_SEQUENCES) -> Tables:
    """``kernel_sequences`` rows of one rank (none without launched GPU work)."""
    if not len(d.gpu_ts) or not (d.gpu_rt >= 0).any():
        return {}
    return {"kernel_sequences": kernel_sequences(d, operator_name, min_pattern_len, top)}
