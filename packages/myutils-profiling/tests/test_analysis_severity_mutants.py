"""Severity, ranking and savings on the sides of their conditions the other tests leave out (issue 36).

Each test is a plausible bug of ``.ci/mutants/diagnosis.toml`` that ``test_analysis_severity.py``
let pass: a capture check costing little stays a warning, a saving in ms with no step ranks after
every share of a step, a breakdown's share is weighted by its evidence, a finding on an owned fact
is folded, a bottleneck measured on exactly 3 steps is a median of per-step shares (a kernel's
never), the run's setup idle summed over ranks is never one rank's, the run's setup fraction is of
the idle (not the span), and a one-rank median is no "median of the rank it quotes". Findings are
built with the impact the rules give; every expected figure is worked out in the test.
"""

from __future__ import annotations

import pytest

from my_utils.profiling.analysis.contents import CaptureContents
from my_utils.profiling.analysis.ranking import rank_findings, tier
from my_utils.profiling.analysis.savings import as_breakdown, setup_idle_ms, state_impacts, with_denominator
from my_utils.profiling.analysis.severity import severity_for
from my_utils.profiling.model.report import Advice, Fact, Finding, Impact


def _f(fid: str, share: float | None, severity: str = "warning", category: str = "optimization", steps: int = 5,
       step_ms: float = 100.0, facts: tuple[str, ...] = (), kind: str = "", evidence: dict | None = None) -> Finding:
    ms = None if share is None else share * step_ms
    return Finding(fid, category, severity, fid, "", dict(evidence or {}), facts=facts,
                   impact=Impact(ms, share, "basis", steps, steps / (steps + 3), "mytimer"),
                   advice=(Advice("text", kind=kind),) if kind else ())


def test_a_capture_check_that_costs_little_stays_a_warning() -> None:
    """0.1 % of the step earns info, but a capture check's numbers may be wrong: its rule's warning stands."""
    assert severity_for(_f("capture:gaps", 0.001, "warning", "capture")) == "warning"
    assert severity_for(_f("variability:x", 0.001, "warning")) == "info"  # the look-alike: no capture check


def test_a_saving_in_ms_only_ranks_after_every_share_of_a_step() -> None:
    ms_only = Finding("ms", "optimization", "warning", "ms", "", impact=Impact(50.0, None, "b", 5))
    zero = _f("zero", 0.0)
    assert (tier(zero), tier(ms_only)) == (0, 1)
    assert [f.id for f in rank_findings([ms_only, zero])] == ["zero", "ms"]


def _breakdown(fid: str, share: float, steps: int) -> Finding:
    return Finding(fid, "bottleneck", "info", fid, "",
                   impact=Impact(None, None, "b", steps, steps / (steps + 3), region_ms=10.0, region_share=share))


def test_a_breakdown_on_two_steps_ranks_after_a_smaller_one_on_thirty() -> None:
    """Breakdowns are ranked by share × weight: 0.5 × 2/5 = 0.20 against 0.3 × 30/33 = 0.27."""
    out = rank_findings([_breakdown("thin", 0.5, 2), _breakdown("thick", 0.3, 30)])
    assert [f.id for f in out] == ["thick", "thin"]


def test_a_finding_on_an_owned_fact_is_folded_into_its_owner() -> None:
    owner = _f("communication:no_overlap", 0.3, facts=("comm.overlap", "comm.time"))
    twin = _f("bottleneck:nccl", 0.1, facts=("comm.time", "series:x"))
    other = _f("gpu:host_bound", 0.2, facts=("gpu.idle",))
    out = rank_findings([twin, other, owner])
    assert [f.id for f in out] == ["communication:no_overlap", "gpu:host_bound"]
    assert out[0].evidence["merged"] == ["bottleneck:nccl"]


def _bottleneck(name: str, steps: int) -> Finding:
    return _f(f"bottleneck:{name}", 0.3, "warning", "bottleneck", steps,
              evidence={"names": [name], "share": 0.4, "steps_measured": steps, "of": "step time"})


def test_a_share_over_three_steps_is_a_median_and_a_kernels_share_never_is() -> None:
    assert as_breakdown(_bottleneck("cpu_op:forward", 3)).region_of == "step time (median of per-step shares)"
    assert as_breakdown(_bottleneck("cpu_op:forward", 2)).region_of == "step time (share of the total)"
    assert as_breakdown(_bottleneck("kernel:sm80_gemm", 30)).region_of == "step time (share of the total)"


def test_the_runs_setup_idle_over_several_ranks_is_not_one_ranks() -> None:
    """``setup.idle`` summed over ranks 0 and 1 says nothing of rank 0 alone; over rank 0 alone it does."""
    both = Fact("setup.idle", "GPU idle inside setup", 300.0, "ms", "kineto", ranks=(0, 1))
    assert setup_idle_ms({"setup.idle": both}, 0) is None
    one = Fact("setup.idle", "GPU idle inside setup", 300.0, "ms", "kineto", ranks=(0,))
    assert setup_idle_ms({"setup.idle": one}, 0) == 300.0


def test_without_a_ranks_setup_idle_the_runs_fraction_of_the_idle_is_taken_out() -> None:
    """The run: 48 % idle of a 1,000 ms span is 480 ms, 30 ms of it inside setup (summed over two ranks, so no
    rank's own): a host-wait saving of 10 ms per step keeps 1 − 30/480 of it, 9.375 ms."""
    idle = Fact("gpu.idle", "GPU idle", 48.0, "%", "kineto", "GPU span", 1000.0, "ms", (0, 1))
    in_setup = Fact("setup.idle", "GPU idle inside setup", 30.0, "ms", "kineto", ranks=(0, 1))
    f = _f("gpu:host_bound", 0.1, kind="idle:host_wait", evidence={"ranks": [0]})
    (out,) = state_impacts([f], {idle.id: idle, in_setup.id: in_setup}, "host", CaptureContents())
    assert out.impact.ms_per_step == pytest.approx(10.0 * (1 - 30 / 480))
    assert out.impact.share_of_step == pytest.approx(0.1 * (1 - 30 / 480))


def test_a_one_rank_median_that_differs_is_just_the_step() -> None:
    """A saving of 10 ms = 10 % of a 100 ms step, against a one-rank median of 120 ms: not that median, and not
    "the rank it quotes" either (only a median over several ranks is a slowest-rank median)."""
    median = Fact("step_time.median:mytimer", "median", 120.0, "ms", "mytimer", ranks=(0,), steps=30)
    assert with_denominator(_f("x", 0.1).impact, {median.id: median}).denominator == "step"
