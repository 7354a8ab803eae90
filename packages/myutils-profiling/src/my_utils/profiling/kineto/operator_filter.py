"""The CPU events between two operators under a third, in the first iteration: HTA's ``CombinedOperatorFilter``.

Holistic Trace Analysis (``hta/common/trace_stack_filter.py``, checked by ``tests/test_trace_filter.py::
testCombinedOperatorFilter``) selects a slice of one iteration by three operator names, in this order:

1. the first iteration (``FirstIterationFilter``);
2. the CPU events under the first ``root`` (start at or after its start, end at or before its end);
3. of those, the ones starting at or after the end of the *last* ``preceding``;
4. of those, the ones ending at or before the start of the *first* ``following``;
5. with ``include_gpu_kernels``, the GPU activities (of the whole trace) launched by the runtime calls kept.

A name that does not occur where it is looked for leaves its criterion out (unlike the single
``under`` filter, where a missing operator keeps nothing). Each step reads what the previous ones kept,
so ``following`` is the first occurrence *inside* the slice. HTA's ``stack_depths`` option (keep
CPU events of given stack depths) is :attr:`CombinedOperatorFilter.depths` here, the depths of
``kineto.call_stacks`` (0 for a top-level event).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from my_utils.core.errors import UsageError
from my_utils.profiling.kineto.rank_data import RankData


@dataclass(frozen=True)
class CombinedOperatorFilter:
    """What HTA's ``CombinedOperatorFilter(root_op_name, preceding_op_name, following_op_name, ...)`` keeps."""

    root: str
    preceding: str
    following: str
    include_gpu_kernels: bool = False
    depths: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        for field, value in (("root", self.root), ("preceding", self.preceding), ("following", self.following)):
            if not isinstance(value, str) or not value:
                raise UsageError(f"CombinedOperatorFilter {field}={value!r}: expected an operator or annotation name")

    def describe(self) -> str:
        """In words, for reports."""
        return (f"first iteration, under {self.root!r}, after the last {self.preceding!r}, before the first "
                f"{self.following!r}" + (" with their GPU activities" if self.include_gpu_kernels else "")
                + (f", stack depths {', '.join(map(str, self.depths))}" if self.depths else ""))

    def apply(self, d: RankData) -> RankData:
        """The part of ``d`` this filter keeps (module docstring)."""
        from my_utils.profiling.kineto.filters import TraceFilter, _in_range, _under, find_occurrence

        part = TraceFilter(first_iteration=True).apply(d)
        if find_occurrence(part, self.root, 0) is not None:
            part = _under(part, self.root, 0, False).take(part)
        found = find_occurrence(part, self.preceding, -1)
        if found is not None:
            part = _in_range(part, found[1], np.inf).take(part)  # starts at or after the end, no end bound
            part = _cpu_only(part)
        found = find_occurrence(part, self.following, 0)
        if found is not None:
            part = _in_range(part, -np.inf, found[0]).take(part)
            part = _cpu_only(part)
        keep = _same_rows(d, part)
        if self.depths:
            _keep_depths(d, keep, self.depths)
        keep.gpu = np.zeros(len(d.gpu_ts), bool)
        if self.include_gpu_kernels and len(d.gpu_ts):
            launched = d.gpu_rt >= 0
            keep.gpu[launched] = keep.rt[d.gpu_rt[launched]]
        return keep.take(d)


def _cpu_only(d: RankData) -> RankData:
    """``d`` without its GPU activities (HTA's operator filters keep the operator's own stream: the CPU's)."""
    from my_utils.profiling.kineto.filters import Keep

    keep = Keep.everything(d)
    keep.gpu = np.zeros(len(d.gpu_ts), bool)
    return keep.take(d)


def _same_rows(d: RankData, part: RankData) -> Any:
    """A :class:`~.filters.Keep` of ``d`` holding the rows ``part`` kept (matched by their ``traceEvents`` index)."""
    from my_utils.profiling.kineto.filters import Keep

    def rows(index: Any, kept: Any) -> Any:
        if index is None or not len(index):
            return np.zeros(0 if index is None else len(index), bool)
        return np.isin(index, kept if kept is not None else np.zeros(0, np.int64))

    step_kept = {s[4] for s in part.step_events}
    return Keep(rows(d.gpu_index, part.gpu_index), rows(d.rt_index, part.rt_index), rows(d.op_index, part.op_index),
                rows(d.ann_index, part.ann_index), rows(d.hsync_index, part.hsync_index),
                np.array([s[4] in step_kept for s in d.step_events], dtype=bool))


def _keep_depths(d: RankData, keep: Any, depths: tuple[int, ...]) -> None:
    """Leave in ``keep`` only CPU events at one of ``depths`` in their thread's call stack."""
    from my_utils.profiling.kineto.call_stacks import build_stacks

    s = build_stacks(d)
    at = np.isin(s.depth[:s.cpu_rows], list(depths))
    by_index = dict(zip(s.index[:s.cpu_rows].tolist(), at.tolist(), strict=True))

    def mask(index: Any) -> Any:
        return np.array([by_index.get(int(i), False) for i in index.tolist()], dtype=bool) if index is not None \
            and len(index) else np.zeros(0, bool)

    keep.rt &= mask(d.rt_index)
    if d.op_index is not None and len(d.op_index):
        keep.op &= mask(d.op_index)
    keep.ann &= mask(d.ann_index)
    keep.step &= np.array([by_index.get(int(s[4]), False) for s in d.step_events], dtype=bool)
