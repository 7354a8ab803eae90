"""The report's header and numbers on generated MyTimer runs: the run's title, the worst step after warm-up,
plain numbers in every finding, one stated denominator per card (issue 33, "wrong or unreadable numbers")."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from my_utils.core.events import MetricEvent
from my_utils.profiling.analysis import MetricsAnalyzer
from my_utils.profiling.reports.render import render_text

E_NOTATION = re.compile(r"(?<![\w.])\d+(?:\.\d+)?[eE][+-]?\d+(?![\w.])")
RUN = "20260101-000000-abcdef"


def _run(step_ms: list[float], region_ms: float = 500.0, seed: int = 3) -> list[MetricEvent]:
    """A MyTimer run: per step a ``forward`` and a ``backward`` region and the step time."""
    rng = random.Random(seed)
    events = []
    for step, total in enumerate(step_ms):
        fwd = region_ms * (1 + rng.gauss(0, 0.01))
        events += [MetricEvent("forward", fwd, "duration", "ms", "mytimer", 0, step, run_id=RUN, attrs={"depth": 0}),
                   MetricEvent("backward", total - fwd, "duration", "ms", "mytimer", 0, step, run_id=RUN,
                               attrs={"depth": 0}),
                   MetricEvent("step_time", total, "duration", "ms", "mytimer", 0, step, run_id=RUN)]
    return events


def test_the_worst_step_leaves_the_warm_up_out_and_says_so() -> None:
    steps = [5000.0] + [1000.0 + 10 * (i % 3) for i in range(1, 30)]
    steps[17] = 1400.0
    report = MetricsAnalyzer(_run(steps)).analyze()
    worst = report.fact("step_time.worst")
    assert worst.value == 1400.0 and worst.detail.startswith("step 17 on rank 0")  # before: step 0, 5,000 ms
    assert "warm-up step 0 left out" in worst.detail and worst.steps == 29
    assert report.fact("step_time.median").steps == 30  # the median is of every step, as before
    short = MetricsAnalyzer(_run([5000.0, 1000.0, 1010.0])).analyze().fact("step_time.worst")
    assert short.value == 5000.0 and "left out" not in short.detail  # too few steps to leave one out


def test_the_title_is_the_run_and_every_finding_reads_in_plain_numbers() -> None:
    """Regions of 500 ms over 30 steps sum to 15,000 ms: the bottleneck detail wrote "1.5e+04 ms" before."""
    report = MetricsAnalyzer(_run([1000.0 + 300 * (i % 7 == 3) for i in range(30)])).analyze()
    assert report.headline["title"] == f"run {RUN}"
    texts = [t for f in report.findings for t in (f.title, f.detail, f.suggestion, *(a.text for a in f.advice))]
    assert any(re.search(r"sums to 1\d,\d{3} ms", t) for t in texts)  # the large total is there, written out
    assert [t for t in texts if E_NOTATION.search(t)] == []
    markdown = render_text(report, "markdown")
    assert not E_NOTATION.search(markdown.split("## Tables", 1)[0])


def test_each_card_states_the_one_share_it_gives() -> None:
    report = MetricsAnalyzer(_run([1000.0 + 400 * (i % 5 == 2) for i in range(30)])).analyze()
    markdown = render_text(report, "markdown")
    savers = [f for f in report.findings if f.impact.share_of_step is not None]
    breakdowns = [f for f in report.findings if f.impact.breakdown]
    assert savers and breakdowns
    for f in savers:
        assert f.impact.denominator == "median step" and f.impact.denominator_ms == pytest.approx(
            report.fact("step_time.median").value)
    assert f"of the median step ({report.fact('step_time.median').value:,.0f}" in markdown.replace(".0 ms", " ms")
    for f in breakdowns:  # the title's share, said to be a median of per-step shares, and no saving
        assert f.impact.region_share == f.evidence["share"] and "median of per-step shares" in f.impact.region_of
        assert f"{round(100 * f.evidence['share'])}%" in f.title
    assert "where the time is, not a saving" in markdown


@given(st.floats(min_value=1e-9, max_value=1e12, allow_nan=False, allow_infinity=False))
def test_plain_number_writes_any_g_formatted_number_out(value: float) -> None:
    from my_utils.profiling.analysis.diagnosis import plain_number

    text = f"sums to {value:.4g} ms of {value:.3g}"
    out = plain_number(text)
    assert not E_NOTATION.search(out), out
    written = [float(x.replace(",", "")) for x in re.findall(r"[\d,]+(?:\.\d+)?", out)]
    for shown, expected in zip(written, (float(f"{value:.4g}"), float(f"{value:.3g}")), strict=True):
        assert shown == pytest.approx(expected, rel=5e-3, abs=1e-12 + 0.006 * expected)


def test_plain_number_leaves_names_alone() -> None:
    from my_utils.profiling.analysis.diagnosis import plain_number

    assert plain_number("kernel sm90_fp8e4m3_gemm and 1e-3 and v2.1e5x") == "kernel sm90_fp8e4m3_gemm and 0.001 and v2.1e5x"


def test_a_tie_is_stated_on_both_cards() -> None:
    from my_utils.profiling.model.report import AnalysisReport, Finding, Impact

    findings = [Finding(f"f{i}", "optimization", "critical", f"finding {i}", "",
                        impact=Impact(10.0 * s, s, "", 30, 0.9, "mytimer", denominator="median step",
                                      denominator_ms=100.0))
                for i, s in enumerate((0.30, 0.10, 0.10, 0.05))]
    report = AnalysisReport("1.2", "pretrain", {}, findings, {})
    markdown = render_text(report, "markdown")
    cards = {i: markdown.split(f"[critical] finding {i}")[1].split("###")[0] for i in range(4)}
    assert "a tie with finding 3" in cards[1] and "a tie with finding 2" in cards[2]
    assert "a tie" not in cards[0] and "a tie" not in cards[3]
