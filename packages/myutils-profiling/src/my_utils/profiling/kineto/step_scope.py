"""Which ProfilerSteps an analysis read, and Holistic Trace Analysis' default as a filter (``hta_default``).

HTA's ``TraceAnalysis`` (``include_last_profiler_step=False``, its default;
``hta/common/trace.py::_filter_irrelevant_gpu_kernels``) keeps the CPU events that start before
the *last* ``ProfilerStep`` starts and only the GPU activities those CPU events launched (joined
on the correlation id): the last step, and the GPU work launched in it, are not analysed. We read
every step by default, so on a trace of few steps its idle, overlap and queue figures differ from
ours. :func:`before_last_step` is that cut as a trace filter criterion (``--filter hta_default``),
and :func:`step_scope_rows` states, per rank, the steps present, the steps analysed, and what
HTA's default would have left out, so that a reader comparing numbers knows why they differ.

A trace without ``ProfilerStep`` annotations has no last step: the criterion keeps everything
and the row says so.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from my_utils.profiling.kineto.rank_data import RankData

__all__ = ["before_last_step", "last_step", "step_scope_rows", "step_scope_tables"]


def last_step(d: RankData) -> tuple[float, int] | None:
    """``(start, number)`` of the last ``ProfilerStep`` of ``d`` by start (relative µs), None without steps."""
    if not d.step_events:
        return None
    ts, _dur, number, *_ = max(d.step_events, key=lambda s: s[0])
    return float(ts), int(number)


def before_last_step(d: RankData) -> Any:
    """The :class:`~.filters.Keep` of HTA's default cut (module docstring): everything when ``d`` has no step."""
    from my_utils.profiling.kineto.filters import Keep

    every = Keep.everything(d)
    last = last_step(d)
    if last is None:
        return every
    start = last[0]

    def before(ts: Any) -> Any:
        return np.zeros(0, bool) if ts is None else np.asarray(ts) < start

    rt = before(d.rt_ts)
    gpu = np.zeros(len(d.gpu_ts), bool)
    launched = d.gpu_rt >= 0
    gpu[launched] = rt[d.gpu_rt[launched]]  # a GPU activity stays when the call that launched it does
    steps = np.array([s[0] < start for s in d.step_events], dtype=bool)
    return Keep(gpu, rt, before(d.op_ts), before(d.ann_ts), before(d.hsync_ts), steps)


def _span(numbers: list[int]) -> str:
    if not numbers:
        return "none"
    return f"{numbers[0]}" if len(numbers) == 1 else f"{numbers[0]}–{numbers[-1]} ({len(numbers)})"


def _busy_us(d: RankData) -> float:
    return float(np.sum(d.gpu_dur)) if len(d.gpu_dur) else 0.0


def step_scope_rows(full: RankData, kept: RankData, described: str) -> list[dict[str, Any]]:
    """One row for the rank: steps in the trace, steps analysed (after the filter ``described``), HTA's default."""
    present = sorted({int(s[2]) for s in full.step_events})
    analysed = sorted({int(s[2]) for s in kept.step_events})
    last = last_step(full)
    row: dict[str, Any] = {"rank": full.rank, "steps_in_trace": _span(present), "steps_analysed": _span(analysed),
                           "filter": described or "no filter"}
    if last is None:
        row.update(hta_default="no ProfilerStep in the trace: HTA's cut does not apply", same_as_hta=None,
                   gpu_us_left_out_by_hta=None, gpu_pct_left_out_by_hta=None)
        return [row]
    hta = before_last_step(full).take(full)
    left_out = _busy_us(full) - _busy_us(hta)
    total = _busy_us(full)
    hta_steps = sorted({int(s[2]) for s in hta.step_events})
    same = analysed == hta_steps and len(kept.gpu_ts) == len(hta.gpu_ts)
    row.update(
        hta_default=f"steps {_span(hta_steps)}: HTA's TraceAnalysis leaves out the last ProfilerStep ({last[1]}) and "
                    "the GPU work launched in it" + ("" if same else "; give --filter hta_default for its figures"),
        same_as_hta=same, gpu_us_left_out_by_hta=left_out,
        gpu_pct_left_out_by_hta=100.0 * left_out / total if total else None)
    return [row]


def step_scope_tables(d: RankData, before_filter: RankData | None = None, described: str = "") -> dict[str, Any]:
    """The registered analysis (``kineto.registry``): ``{"steps": [row]}`` of ``d`` against the whole trace.

    ``before_filter`` is the rank's data before the trace filter ran (the Kineto pass passes it;
    ``d`` itself when there was no filter), ``described`` the filter in words.
    """
    return {"steps": step_scope_rows(before_filter if before_filter is not None else d, d, described)}
