"""``capture.overhead``: what profiling cost per step, measured from steps inside and outside capture windows.

Kineto's own ``overhead`` events say what CUPTI spent, when a trace has them (most do not).
A my_utils capture window knows more: the step times of the steps it profiled and of those
before it (``kineto.capture_steps``). The cost is the median step inside a window minus the
median step outside, as a share of the outside median; its noise is a 95% bootstrap interval
of that difference (2,000 resamples, a fixed seed: the same inputs give the same interval).
When the interval holds zero the fact says the difference is within noise.

Which steps count: ``inside`` steps were profiled from start to end; the step a window
started or stopped in (the profiler's start-up, the trace export) counts for neither side,
and the run's first ``warmup_steps`` steps are left out of ``outside`` (setup is not steady
state). Without the trace's step record, MyTimer's step times are split by the windows'
first and last steps (their first and last held steps are the partial ones). Steps of every
rank are pooled: each step is one sample.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from my_utils.profiling.analysis.rules._series import STEP_TIME, Series
from my_utils.profiling.analysis.rules._stats import quantile
from my_utils.profiling.model.report import EvidenceRow, Fact, NotMeasured

Rows = Sequence[Mapping[str, Any]]
RESAMPLES = 2000
MIN_INSIDE = 2
MIN_OUTSIDE = 3
LABEL = "profiling cost per step (inside capture windows vs outside)"


def _split_record(rows: Rows, warmup_steps: int) -> tuple[list[float], list[float], list[EvidenceRow]]:
    inside: list[float] = []
    outside: list[float] = []
    per: dict[tuple[Any, str], list[float]] = {}
    first = {r.get("rank"): min(x["step"] for x in rows if x.get("rank") == r.get("rank")) for r in rows}
    for r in rows:
        if r["state"] == "inside":
            inside.append(float(r["ms"]))
        elif r["state"] == "outside" and r["step"] >= first[r.get("rank")] + warmup_steps:
            outside.append(float(r["ms"]))
        else:
            continue
        per.setdefault((r.get("rank"), r["state"]), []).append(float(r["ms"]))
    evidence = [EvidenceRow("kineto_capture_steps", {"rank": rank, "state": state},
                            {"steps": len(v), "median_ms": statistics.median(v)}) for (rank, state), v in per.items()]
    return inside, outside, evidence


def _split_timer(windows: Rows, series: Mapping[Any, Series], warmup_steps: int
                 ) -> tuple[list[float], list[float], list[EvidenceRow], str]:
    timed = {(r, src): s for (n, r, src), s in series.items() if n == STEP_TIME and s.values}
    spans = [(w.get("rank"), w["first_step"], w["last_step"]) for w in windows
             if isinstance(w.get("first_step"), int) and isinstance(w.get("last_step"), int)]
    inside: list[float] = []
    outside: list[float] = []
    evidence: list[EvidenceRow] = []
    sources = set()
    for (rank, src), s in timed.items():
        mine = [(a, b) for r, a, b in spans if r == rank or r is None or rank is None]
        if not mine:
            continue
        sources.add(src)
        start = min(s.steps) + warmup_steps
        ins = [v for st, v in zip(s.steps, s.values, strict=True) if any(a < st < b for a, b in mine)]
        outs = [v for st, v in zip(s.steps, s.values, strict=True)
                if st >= start and not any(a <= st <= b for a, b in mine)]
        inside += ins
        outside += outs
        evidence.append(EvidenceRow("series", {"name": STEP_TIME, "rank": rank, "source": src},
                                    {"inside_steps": len(ins), "outside_steps": len(outs)}))
    return inside, outside, evidence, ", ".join(sorted(sources))


def _interval(inside: list[float], outside: list[float]) -> tuple[float, float]:
    rng = random.Random(0)
    diffs = sorted(statistics.median(rng.choices(inside, k=len(inside)))
                   - statistics.median(rng.choices(outside, k=len(outside))) for _ in range(RESAMPLES))
    return quantile(diffs, 0.025), quantile(diffs, 0.975)


def capture_overhead_facts(tables: Mapping[str, Rows], series: Mapping[Any, Series],
                           warmup_steps: int = 1) -> list[Fact]:
    """``capture.overhead`` when the inputs hold a my_utils capture (module docstring); none otherwise."""
    windows = list(tables.get("kineto_capture_windows") or [])
    if not windows:
        return []
    ranks = tuple(sorted({w.get("rank") for w in windows}, key=lambda r: -1 if r is None else r))
    inside, outside, evidence = _split_record(list(tables.get("kineto_capture_steps") or []), warmup_steps)
    source = "the capture windows' step record"
    if len(inside) < MIN_INSIDE or len(outside) < MIN_OUTSIDE:
        t_in, t_out, t_ev, t_src = _split_timer(windows, series, warmup_steps)
        if len(t_in) >= MIN_INSIDE and len(t_out) >= MIN_OUTSIDE:
            inside, outside, evidence, source = t_in, t_out, t_ev, f"{t_src} step times split by the capture windows"
    if len(inside) < MIN_INSIDE or len(outside) < MIN_OUTSIDE:
        return [Fact("capture.overhead", LABEL, NotMeasured(
            f"{len(inside)} step(s) profiled from start to end and {len(outside)} outside the windows after warm-up "
            f"(at least {MIN_INSIDE} and {MIN_OUTSIDE} needed): capture a longer window, or let steps run before it"),
            "%", source, ranks=ranks)]
    med_in, med_out = statistics.median(inside), statistics.median(outside)
    diff = med_in - med_out
    lo, hi = _interval(inside, outside)
    noise = lo <= 0.0 <= hi
    verdict = "within noise (the interval holds 0)" if noise else ("above the noise" if diff > 0 else
                                                                  "below the noise: profiled steps ran faster")
    detail = (f"inside {med_in:,.2f} ms (median of {len(inside)} steps), outside {med_out:,.2f} ms (median of "
              f"{len(outside)} steps): {diff:+,.2f} ms ({100.0 * diff / med_out:+.1f}%); 95% interval {lo:+,.2f} to "
              f"{hi:+,.2f} ms, {verdict}")
    estimate = EvidenceRow("capture_overhead", {}, {
        "inside_median_ms": med_in, "outside_median_ms": med_out, "difference_ms": diff, "interval_low_ms": lo,
        "interval_high_ms": hi, "within_noise": noise, "inside_steps": len(inside), "outside_steps": len(outside)})
    return [Fact("capture.overhead", LABEL, 100.0 * diff / med_out, "%", source,
                 "median step time outside capture windows", med_out, "ms", ranks,
                 "steps of every rank pooled" if len(ranks) > 1 else "", len(inside) + len(outside),
                 (estimate, *evidence), detail)]
