"""Impact is time that could be saved, on one stated denominator (``diagnosis/CASES.md``, principle 2).

Applied to every finding after the rules, before severity and ranking:

- **Breakdowns.** A bottleneck's "takes X% of the step" is where the time is, not a saving (no fix
  removes a whole backward pass). Its impact states no saving: the region's time moves to
  ``region_ms`` / ``region_share`` with what the share is of (``region_of``: the title's share, the
  median of per-step shares or a total), so the card and the title quote one number.
- **What a fix can remove.** The host-wait idle a finding offers to save by launching faster is
  cut by the idle that lies inside setup windows (``setup.idle``: communicator init, compilation,
  module loading are not launch overhead); on a setup-dominated capture without that fact no
  saving is stated. Overlapping communication with computation saves nothing when no computation
  kernel ran. The saving before the cut stays in ``clamped_from_ms``.
- **One denominator.** Each saving names what its share is of (``denominator`` and
  ``denominator_ms``): the median step of its source, the capture's GPU span counted as one step
  (an nsys export without iterations), or the profiled kernels' time (Nsight Compute).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from my_utils.profiling.analysis.contents import CaptureContents
from my_utils.profiling.model.report import Fact, Finding, Impact

#: Device-name prefixes: their bottleneck shares are of GPU activity time, not of the step.
_DEVICE = ("kernel:", "memcpy:", "memset:", "device_op:")
#: Advice kinds whose saving is host-wait idle (filled by launching ahead of the GPU).
HOST_IDLE_KINDS = frozenset({"idle:host_wait"})
#: Advice kinds whose saving is communication overlapped with computation.
OVERLAP_KINDS = frozenset({"communication:no_overlap"})
#: Step sources whose "step" is the capture's GPU span when the export has no iterations.
_SPAN_SOURCES = frozenset({"nsys", "nsys_sqlite"})
_KERNEL_SOURCES = frozenset({"ncu", "ncu_csv"})


def state_impacts(findings: Sequence[Finding], facts: Mapping[str, Fact], bound: str,
                  contents: CaptureContents) -> list[Finding]:
    """Each finding with its impact restated (module docstring)."""
    out = []
    for f in findings:
        impact = f.impact
        if f.category == "bottleneck" and impact.upper_bound:
            impact = as_breakdown(f)
        kinds = {a.kind for a in f.advice}
        if kinds & HOST_IDLE_KINDS:
            impact = _without_setup_idle(f, impact, facts, bound)
        if kinds & OVERLAP_KINDS:
            impact = _overlap_needs_compute(f, impact, facts, contents)
        out.append(f if impact == f.impact else replace(f, impact=impact))
    return [replace(f, impact=with_denominator(f.impact, facts)) for f in out]


def as_breakdown(f: Finding) -> Impact:
    """A bottleneck's impact as a breakdown: the share its title quotes, with what it is of; no saving."""
    impact = f.impact
    ev = f.evidence
    names = ev.get("names") or [""]
    share = ev.get("share")
    steps = ev.get("steps_measured")
    of = str(ev.get("of") or "the step")
    if isinstance(share, (int, float)) and not isinstance(share, bool):
        measure = "median of per-step shares" if isinstance(steps, int) and steps >= 3 and \
            not str(names[0]).startswith(_DEVICE) else "share of the total"
        region_share: float | None = float(share)
        region_of = f"{of} ({measure})"
    else:
        region_share, region_of = impact.share_of_step, f"the median step ({impact.step_source} step time)"
    return replace(impact, ms_per_step=None, share_of_step=None, region_ms=impact.ms_per_step,
                   region_share=region_share, region_of=region_of)


def _rank_of(f: Finding) -> int | None:
    ranks = f.evidence.get("ranks") or []
    first = ranks[0] if isinstance(ranks, list) and ranks else None
    return first if isinstance(first, int) and not isinstance(first, bool) else None


def setup_idle_ms(facts: Mapping[str, Fact], rank: int | None) -> float | None:
    """GPU idle inside setup windows on ``rank`` (ms), from ``setup.idle:rank<r>`` or the run's ``setup.idle``
    when the run is that one rank; None when not measured."""
    if rank is not None:
        f = facts.get(f"setup.idle:rank{rank}")
        if f is not None and f.number is not None:
            return f.number
    run = facts.get("setup.idle")
    if run is not None and run.number is not None and (len([r for r in run.ranks if r is not None]) <= 1):
        return run.number
    return None


def _setup_fraction(facts: Mapping[str, Fact]) -> float | None:
    """The run's share of GPU idle inside setup (``setup.idle`` over the ``gpu.idle`` time), None without both."""
    run, idle = facts.get("setup.idle"), facts.get("gpu.idle")
    if run is None or run.number is None or idle is None or idle.number is None or not idle.denominator_value:
        return None
    idle_ms = idle.number * idle.denominator_value / 100.0
    return min(1.0, run.number / idle_ms) if idle_ms > 0 else None


def _without_setup_idle(f: Finding, impact: Impact, facts: Mapping[str, Fact], bound: str) -> Impact:
    ms = impact.ms_per_step
    if ms is None:
        return impact
    steps = impact.steps or 1
    inside = setup_idle_ms(facts, _rank_of(f))
    if inside is not None:
        new = max(0.0, ms - inside / steps)
        why = f"less {inside:,.1f} ms of idle inside setup windows (setup.idle), which launching faster cannot fill"
    else:
        fraction = _setup_fraction(facts)
        if fraction is None:
            if bound != "setup":
                return impact
            return replace(impact, ms_per_step=None, share_of_step=None, clamped_from_ms=ms,
                           basis=impact.basis + "; no saving stated: the capture is setup-dominated and the idle "
                                                "inside setup was not measured")
        new = ms * (1.0 - fraction)
        why = f"less the run's {100 * fraction:.0f}% of idle inside setup windows (setup.idle)"
    if new >= ms:
        return impact
    share = impact.share_of_step * new / ms if impact.share_of_step is not None and ms > 0 else None
    return replace(impact, ms_per_step=new, share_of_step=share, clamped_from_ms=ms, basis=f"{impact.basis}; {why}")


def _overlap_needs_compute(f: Finding, impact: Impact, facts: Mapping[str, Fact],
                           contents: CaptureContents) -> Impact:
    rank = _rank_of(f)
    compute = facts.get(f"gpu.compute:rank{rank}") if rank is not None else None
    none_ran = (compute.number == 0) if compute is not None and compute.number is not None \
        else contents.compute_kernels is False
    if not none_ran or impact.ms_per_step in (None, 0.0):
        return impact
    return replace(impact, ms_per_step=0.0, share_of_step=0.0 if impact.share_of_step is not None else None,
                   clamped_from_ms=impact.ms_per_step,
                   basis=impact.basis + "; no computation kernel ran beside it, so overlapping saves nothing")


def with_denominator(impact: Impact, facts: Mapping[str, Fact]) -> Impact:
    """``impact`` with ``denominator`` / ``denominator_ms`` stated (kept when a rule stated them)."""
    if impact.denominator or impact.share_of_step is None or not impact.ms_per_step or impact.share_of_step <= 0:
        return impact
    whole = impact.ms_per_step / impact.share_of_step
    source = impact.step_source
    median = facts.get(f"step_time.median:{source}")
    if median is None:
        run = facts.get("step_time.median")
        median = run if run is not None and run.source == source else None
    if median is not None and median.number and abs(whole - median.number) <= 1e-6 * max(1.0, median.number):
        words = "median step"
    elif median is not None and len([r for r in median.ranks if r is not None]) > 1:
        words = "median step of the rank it quotes"  # the run's median is of each step's slowest rank
    elif source in _SPAN_SOURCES:
        words = "GPU span of the capture (counted as one step: no NVTX iterations)"
    elif source in _KERNEL_SOURCES:
        words = "profiled kernels' total time"
    else:
        words = "step"
    return replace(impact, denominator=words, denominator_ms=whole)
