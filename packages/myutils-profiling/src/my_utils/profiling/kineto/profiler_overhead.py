"""What the torch.profiler capture itself cost, as far as the trace tells.

Kineto writes CUPTI's own overhead as events of category ``overhead`` (buffer flushes,
instrumentation) when the profiler records them; their summed duration, over the capture
span (the ``PyTorch Profiler`` span, else the first-to-last event), is the measured cost.
A trace without such events cannot say what the profiler cost: the row says "not
measured" and gives what scales the cost (the CPU ops and runtime calls it recorded per
step), never a guess.
"""

from __future__ import annotations

from dataclasses import dataclass

from my_utils.profiling.kineto.rank_data import RankData
from my_utils.profiling.kineto.rows import Row, pct


@dataclass(frozen=True)
class ProfilerOverheadRow(Row):
    """The profiler's cost on one rank: ``measured`` only when the trace holds Kineto overhead events."""

    rank: int | None
    measured: bool
    overhead_us: float | None
    overhead_events: int
    capture_us: float
    overhead_pct: float | None
    recorded_per_step: float | None
    detail: str


def profiler_overhead(d: RankData, recorded_events: int) -> ProfilerOverheadRow:
    """The overhead row of one rank; ``recorded_events``: the host events the profiler recorded."""
    capture = d.capture_us
    steps = len(d.steps)
    per_step = recorded_events / steps if steps else None
    scale = (f"; it recorded {per_step:,.0f} host events per step, each adding the profiler's per-event cost"
             if per_step is not None else f"; it recorded {recorded_events:,} host events")
    spent = d.overhead or {}
    if spent:
        total = float(sum(v[1] for v in spent.values()))
        count = int(sum(v[0] for v in spent.values()))
        share = pct(total, capture) if capture > 0 else None
        names = ", ".join(f"{k} {v[1] / 1e3:,.3f} ms" for k, v in sorted(spent.items(), key=lambda kv: -kv[1][1]))
        return ProfilerOverheadRow(d.rank, True, total, count, capture, share, per_step,
                                   f"Kineto recorded {total / 1e3:,.3f} ms of profiler overhead ({names})"
                                   + (f", {share:.2f}% of the {capture / 1e3:,.1f} ms capture" if share is not None
                                      else ""))
    return ProfilerOverheadRow(d.rank, False, None, 0, capture, None, per_step,
                               "not measured: the trace holds no Kineto 'overhead' events, so what the profiler "
                               "cost is not in it" + scale)
