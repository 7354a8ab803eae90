"""Impact on one stated denominator, severity that follows it, and a ranking by the saving (issue 33, principle 2).

Findings are generated here with the impact the rules give (``model.report.Impact``); the
diagnosis restates it (``analysis.savings``), sets the severity (``analysis.severity``) and ranks
(``analysis.ranking``). Each rule is tested at its threshold and on both sides of it.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from my_utils.profiling.analysis.contents import CaptureContents
from my_utils.profiling.analysis.ranking import rank_findings, tier
from my_utils.profiling.analysis.savings import state_impacts, with_denominator
from my_utils.profiling.analysis.severity import CRITICAL_SHARE, WARNING_SHARE, apply_severity, severity_for
from my_utils.profiling.model.report import SEVERITIES, Advice, Fact, Finding, Impact


def _f(fid: str, share: float | None, severity: str = "critical", category: str = "optimization",
       steps: int | None = 5, upper: bool = False, kind: str = "", evidence: dict | None = None,
       step_ms: float = 100.0, source: str = "mytimer") -> Finding:
    ms = None if share is None else share * step_ms
    return Finding(fid, category, severity, fid, "", dict(evidence or {}),
                   impact=Impact(ms, share, "basis", steps, 1.0 if steps is None else steps / (steps + 3), source,
                                 upper),
                   advice=(Advice("text", kind=kind),) if kind else ())


def test_severity_at_and_around_its_thresholds() -> None:
    assert severity_for(_f("a", CRITICAL_SHARE)) == "critical"
    assert severity_for(_f("a", CRITICAL_SHARE - 1e-9)) == "warning"
    assert severity_for(_f("a", WARNING_SHARE)) == "warning"
    assert severity_for(_f("a", WARNING_SHARE - 1e-9)) == "info"
    assert severity_for(_f("a", 0.30, severity="warning")) == "critical"  # a rule's warning on 30% of the step
    assert severity_for(_f("a", None)) == "info"  # no saving stated: nothing to be critical about
    # a capture check keeps its warning (its numbers may be wrong) but is never critical without a saving
    assert severity_for(_f("capture:x", None, "critical", "capture")) == "warning"
    assert severity_for(_f("capture:x", None, "info", "capture")) == "info"
    assert severity_for(_f("memory_growth:x", None, "critical", "memory")) == "warning"


def test_the_h100_sendrecv_wait_of_two_percent_is_not_critical() -> None:
    """The H100 pair's rank wait at SendRecv: 6.69 ms of a 299.9 ms span (2.2%), rated critical by its rule."""
    f = _f("nsys:rank_skew:SendRecv", 6.69 / 299.9, "critical", "imbalance", None, step_ms=299.9, source="nsys")
    (out,) = apply_severity([f])
    assert out.severity == "warning" and out.evidence["rule_severity"] == "critical"


_shares = st.one_of(st.none(), st.floats(0.0, 1.5, allow_nan=False))
_findings = st.lists(st.tuples(_shares, st.sampled_from(SEVERITIES), st.sampled_from(
    ["optimization", "bottleneck", "variability", "capture", "imbalance"]), st.booleans(),
    st.one_of(st.none(), st.integers(1, 40))), max_size=12)


@settings(max_examples=150, deadline=None)
@given(rows=_findings)
def test_no_critical_below_five_percent_and_findings_in_saving_order(rows: list) -> None:
    findings = [_f(f"f{i}", share, sev, cat, steps, upper) for i, (share, sev, cat, upper, steps) in enumerate(rows)]
    out = rank_findings(apply_severity(state_impacts(findings, {}, "host", CaptureContents())))
    for f in out:
        share = f.impact.share_of_step
        if f.severity == "critical":
            assert share is not None and share >= CRITICAL_SHARE and not f.impact.breakdown
        if f.severity == "warning" and f.category not in ("capture", "imbalance", "memory"):
            assert share is not None and share >= WARNING_SHARE
    savers = [f.impact.share_of_step for f in out if tier(f) == 0]
    assert savers == sorted(savers, reverse=True)  # the first saves at least as much as any other
    assert [tier(f) for f in out] == sorted(tier(f) for f in out)  # savings, then ms only, breakdowns, the rest
    levels = [SEVERITIES.index(f.severity) for f in out if tier(f) == 0 and f.category != "capture"]
    assert levels == sorted(levels, reverse=True)  # severity never rises down the list


def test_thin_evidence_breaks_ties_only() -> None:
    """A saving on 2 steps above one on 30 ranks first (before: 0.30 × 0.4 < 0.20 × 0.91 put it second)."""
    out = rank_findings([_f("thick", 0.20, steps=30), _f("thin", 0.30, steps=2)])
    assert [f.id for f in out] == ["thin", "thick"]
    out = rank_findings([_f("thin", 0.20, steps=2), _f("thick", 0.20, steps=30)])
    assert [f.id for f in out] == ["thick", "thin"]


def test_a_bottleneck_share_is_a_breakdown_with_the_share_its_title_quotes() -> None:
    """The demo's backward: title 53% (median of per-step shares), impact 28.7% of the median step (its median
    time over the median step): one card, one number, said what it is of."""
    f = _f("bottleneck:backward", 0.287, "critical", "bottleneck", 30, upper=True,
           evidence={"names": ["backward"], "share": 0.53, "steps_measured": 30, "of": "mytimer step time"})
    (out,) = apply_severity(state_impacts([f], {}, "cpu", CaptureContents()))
    assert out.impact.breakdown and out.impact.share_of_step is None and out.impact.ms_per_step is None
    assert out.impact.region_share == 0.53 and out.impact.region_of == "mytimer step time (median of per-step shares)"
    assert out.impact.region_ms == f.impact.ms_per_step and out.severity == "info"
    thin = _f("bottleneck:op", 0.4, "warning", "bottleneck", 2, upper=True,
              evidence={"names": ["cpu_op:aten::mm"], "share": 0.41, "steps_measured": 2, "of": "step time"})
    (out,) = state_impacts([thin], {}, "host", CaptureContents())
    assert out.impact.region_of == "step time (share of the total)"
    slow_link = _f("communication:slow_link", 0.08, "warning", "optimization", upper=True)  # a saving, bounded
    (out,) = state_impacts([slow_link], {}, "host", CaptureContents())
    assert not out.impact.breakdown and out.impact.share_of_step == 0.08


def _setup_idle(value: float, rank: int | None = None) -> Fact:
    fid = "setup.idle" if rank is None else f"setup.idle:rank{rank}"
    return Fact(fid, "GPU idle inside setup", value, "ms", "nsys", ranks=(rank,) if rank is not None else ())


def test_host_idle_inside_setup_is_not_a_saving() -> None:
    """The ring's rank 2: 1,486.2 ms of host-wait idle over the capture, 1,200 ms of it inside ncclCommInitRank."""
    f = _f("nsys:gpu_idle", 1486.2 / 1501.8, "critical", steps=None, kind="idle:host_wait",
           evidence={"ranks": [2, 0, 1]}, step_ms=1501.8, source="nsys")
    (out,) = state_impacts([f], {"setup.idle:rank2": _setup_idle(1200.0, 2)}, "setup", CaptureContents())
    assert out.impact.ms_per_step == f.impact.ms_per_step - 1200.0 and out.impact.clamped_from_ms == f.impact.ms_per_step
    assert out.impact.share_of_step == (f.impact.ms_per_step - 1200.0) / 1501.8
    assert "inside setup" in out.impact.basis
    # per profiled step: 5 steps share the setup idle
    g = _f("gpu:host_bound", 0.41, kind="idle:host_wait", evidence={"ranks": [1]}, step_ms=345.8)
    (out,) = state_impacts([g], {"setup.idle": _setup_idle(100.0, 1)}, "host", CaptureContents())
    assert out.impact.ms_per_step == g.impact.ms_per_step - 100.0 / 5
    # setup-dominated without setup.idle: no saving stated; not setup-dominated: the saving stands
    (out,) = state_impacts([f], {}, "setup", CaptureContents())
    assert out.impact.ms_per_step is None and out.impact.clamped_from_ms == f.impact.ms_per_step
    (out,) = state_impacts([f], {}, "host", CaptureContents())
    assert out.impact.ms_per_step == f.impact.ms_per_step
    (out,) = state_impacts([f], {"setup.idle:rank2": _setup_idle(5000.0, 2)}, "setup", CaptureContents())
    assert out.impact.ms_per_step == 0.0 and apply_severity([out])[0].severity == "info"


def test_overlap_saves_nothing_without_computation() -> None:
    """The ring: one all-reduce, no compute kernel; 41.8 ms of exposed NCCL is not saved by overlapping."""
    f = _f("nsys:comm_exposed", 0.03, kind="communication:no_overlap", evidence={"ranks": [4]}, source="nsys")
    (out,) = state_impacts([f], {}, "setup", CaptureContents(compute_kernels=False))
    assert out.impact.ms_per_step == 0.0 and out.impact.share_of_step == 0.0 and out.impact.clamped_from_ms == 3.0
    compute = Fact("gpu.compute:rank4", "GPU computing", 0.0, "%")
    (out,) = state_impacts([f], {compute.id: compute}, "host", CaptureContents(compute_kernels=True))
    assert out.impact.ms_per_step == 0.0  # that rank's own compute decides
    (out,) = state_impacts([f], {}, "host", CaptureContents(compute_kernels=True))
    assert out.impact == with_denominator(f.impact, {})  # computation ran: the saving stands


def test_every_saving_names_its_denominator() -> None:
    median = Fact("step_time.median:mytimer", "median", 12.77, "ms", "mytimer", steps=30)
    f = _f("variability:x", 0.5, step_ms=12.77)
    assert with_denominator(f.impact, {median.id: median}).denominator == "median step"
    assert with_denominator(f.impact, {median.id: median}).denominator_ms == 12.77
    pair = Fact("step_time.median:torch_profiler", "median", 619.3, "ms", "torch_profiler", ranks=(0, 1), steps=2)
    rank0 = _f("gpu:host_bound", 0.295, step_ms=615.12, source="torch_profiler").impact  # rank 0's own median step
    assert with_denominator(rank0, {pair.id: pair}).denominator == "median step of the rank it quotes"
    nsys = _f("nsys:gpu_idle", 0.99, step_ms=1501.8, source="nsys").impact
    assert with_denominator(nsys, {}).denominator.startswith("GPU span of the capture")
    ncu = _f("ncu:roofline", 0.13, step_ms=40.0, source="ncu").impact
    assert with_denominator(ncu, {}).denominator == "profiled kernels' total time"
