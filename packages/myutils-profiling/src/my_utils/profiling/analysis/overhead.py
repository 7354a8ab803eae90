"""The instrumentation's own overhead, as measured by MyTimer itself.

What the events carry: every MyTimer region (``source="mytimer"``), so the analyzer knows
how many regions each step opened. What they do not carry: the timer's own cost per
region (MyTimer records no calibration in its rows or events — that is the missing
field; a ``timer.overhead`` event per run would make this exact for the training host).
So the cost of one start/stop pair is measured here by a MyTimer: one region enclosing
``pairs`` empty regions, timed with the timer's own clock, gives what each region adds to
its parent's time. The estimate is ``regions per step × pair cost``, stated against the
median step time. The report says which host the calibration ran on: the training host
when ``collector.analyze()`` runs in the training process, else the analysing host.
"""

from __future__ import annotations

import platform
import statistics
from typing import Any

#: Cost of one start/stop pair measured on this host, cached per process (it does not change).
_PAIR_NS: list[float] = []


def timer_pair_cost_ns(pairs: int = 1000, repeats: int = 5) -> float:
    """Median over ``repeats`` of the time one empty MyTimer region adds to its parent (ns)."""
    if _PAIR_NS:
        return _PAIR_NS[0]
    from my_utils.core.step_log import regions_of
    from my_utils.core.timer import MyTimer

    samples: list[float] = []
    for _ in range(repeats):
        timer = MyTimer()
        start, stop = timer.start, timer.stop
        start("calibration")
        for _ in range(pairs):
            start("r")
            stop("r")
        stop("calibration")
        # read the step's regions directly: step() would write these rows into the user's
        # profile log when a GlobalLogger is set up in this process
        outer = regions_of(timer._ev)[0]
        samples.append((outer[3] - outer[2]) / pairs)
        timer.enabled = False  # drops the recorded regions
    _PAIR_NS.append(statistics.median(samples))
    return _PAIR_NS[0]


def overhead_statement(regions_per_step: float | None, median_step_ms: float | None,
                       calibrated_on: str = "analysis host") -> dict[str, Any]:
    """The ``overhead`` section of a report (see the module docstring)."""
    out: dict[str, Any] = {
        "measured_by": "MyTimer (one region around empty regions, timed by the timer's own clock)",
        "calibrated_on": f"{calibrated_on} ({platform.node() or 'unknown'}, {platform.python_implementation()} "
                         f"{platform.python_version()})",
        "missing": "MyTimer events carry no per-region cost of the timer; the pair cost is calibrated "
                   "here, not read from the run",
    }
    try:
        pair_ns = timer_pair_cost_ns()
    except Exception as exc:  # an overhead statement must never stop an analysis
        out["error"] = f"{type(exc).__name__}: {exc}"
        return out
    out["pair_cost_us"] = round(pair_ns / 1e3, 4)
    if regions_per_step is None:
        out["detail"] = "no MyTimer regions in the events: the timer added nothing to this run"
        return out
    per_step_ms = regions_per_step * pair_ns / 1e6
    out.update(regions_per_step=round(regions_per_step, 2), per_step_ms=round(per_step_ms, 6))
    if median_step_ms:
        out["share_of_step_time"] = per_step_ms / median_step_ms
        out["detail"] = (f"{regions_per_step:.1f} regions per step × {pair_ns / 1e3:.3f} µs = "
                         f"{per_step_ms * 1e3:.2f} µs per step, {per_step_ms / median_step_ms:.4%} of the "
                         f"median step ({median_step_ms:.4g} ms)")
    return out
