"""The demo's report: one source per figure, evidence weighed by its steps, one finding per fact.

The demo times every step with MyTimer and profiles two steps with torch.profiler. Before, the
ranks table pooled both ("32 steps" for a 30-step run), ``iter`` and ``step_time`` gave the same
finding twice, and a 2-step torch.profiler share outranked a region measured on every step.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from my_utils.core.events import read_events
from my_utils.profiling.analysis import AnalysisReport, MetricsAnalyzer

pytest.importorskip("torch", reason="the demo trains a model with torch")
STEPS = 12


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, AnalysisReport]:
    out = tmp_path_factory.mktemp("demo")
    proc = subprocess.run([sys.executable, "-m", "my_utils.profiling.examples.unified_metrics_demo", "--steps",
                           str(STEPS), "--output-dir", str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    (trace,) = (out / "torch_traces").glob("*.json")
    return out, MetricsAnalyzer(out / "metrics_events.jsonl", traces=[trace]).analyze()


def test_one_source_per_figure(demo: Any) -> None:
    out, report = demo
    events = read_events(out / "metrics_events.jsonl")
    timer = [e.value for e in events if e.name == "step_time" and e.source == "mytimer"]
    torch_steps = [e.value for e in events if e.name == "step_time" and e.source == "torch_profiler"]
    assert len(timer) == STEPS and 1 <= len(torch_steps) < STEPS
    rows = {(r["rank"], r["source"]): r for r in report.tables["ranks"]}
    assert set(rows) == {(0, "mytimer"), (0, "torch_profiler")}  # before: one row, "14 steps", pooled
    assert rows[(0, "mytimer")]["steps"] == STEPS and rows[(0, "mytimer")]["primary"] is True
    assert rows[(0, "torch_profiler")]["steps"] == len(torch_steps) and rows[(0, "torch_profiler")]["primary"] is False
    assert rows[(0, "mytimer")]["mean_step_time"] == pytest.approx(statistics.fmean(timer))
    median = report.fact("step_time.median")
    assert median is not None and median.source == "mytimer" and median.steps == STEPS
    assert median.number == pytest.approx(statistics.median(timer))
    assert report.summary["step_time_source"] == "mytimer"


def test_thin_evidence_is_weighed_and_said(demo: Any) -> None:
    _out, report = demo
    thin = [f for f in report.findings if f.category == "bottleneck" and f.evidence.get("source") == "torch_profiler"]
    full = [f for f in report.findings if f.category == "bottleneck" and f.evidence.get("source") == "mytimer"]
    assert thin and full
    for f in thin:  # 2 profiled steps: never critical, and the title says how little it rests on
        assert f.severity != "critical" and f.impact.steps == f.evidence["steps_measured"] < 5
        assert "steps only" in f.title or "step only" in f.title
    order = [f.id for f in report.findings]
    # a region's share is a breakdown, not a saving (issue 33): ranked after the savings, and among
    # breakdowns by the share its title quotes, weighed by the steps it rests on
    for a in full + thin:
        assert a.impact.breakdown and a.impact.region_share == a.evidence["share"] and a.severity == "info"
    for a in full:
        for b in thin:
            if a.impact.region_share >= b.impact.region_share:
                assert order.index(a.id) < order.index(b.id), (a.title, b.title)


def test_the_step_wrapper_is_not_a_second_finding_and_advice_names_sgd(demo: Any) -> None:
    _out, report = demo
    assert not [f for f in report.findings if f.evidence.get("names") == ["iter"]]  # iter is step_time again
    optimizer = [f for f in report.findings if "optimizer" in f.id.lower()]
    for f in optimizer:
        assert "AdamW" not in f.suggestion and "fused" not in f.suggestion if f.category in ("variability", "anomaly") \
            else "SGD" in f.suggestion
    assert "mytimer" in {i["instrument"] for i in report.overhead["instruments"]}
    assert report.fact("gpu.idle") is not None and not report.fact("gpu.idle").measured  # a CPU-only run


#: The categories of the time-series rules, whose findings a loaded host used to make louder.
TIMING_CATEGORIES = ("bottleneck", "anomaly", "variability", "imbalance", "memory")


def _loud(report: AnalysisReport) -> set[tuple[str, str]]:
    return {(f.id, f.severity) for f in report.findings
            if f.category in TIMING_CATEGORIES and f.severity in ("warning", "critical")}


def test_the_demos_findings_do_not_follow_the_machines_load(demo: Any, tmp_path: Path) -> None:
    """Issue 36: one run under load gave 5 "critical" findings and a quieter one 3. Beside a busy loop per
    core the time-series rules must say what they say on a quiet run: a region's share is a breakdown, and
    steps the host delayed are not the program's (one or two outlying steps, a spread within the jitter)."""
    _out, quiet = demo
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)]
    try:
        proc = subprocess.run([sys.executable, "-m", "my_utils.profiling.examples.unified_metrics_demo", "--steps",
                               str(STEPS), "--output-dir", str(tmp_path)], capture_output=True, text=True, timeout=600)
    finally:
        for loop in loops:
            loop.kill()
        for loop in loops:
            loop.wait()
    assert proc.returncode == 0, proc.stderr
    (trace,) = (tmp_path / "torch_traces").glob("*.json")
    loaded = MetricsAnalyzer(tmp_path / "metrics_events.jsonl", traces=[trace]).analyze()
    assert _loud(loaded) == _loud(quiet) == set()
    for report in (quiet, loaded):  # and what is loud says a saving that deserves it
        for f in report.findings:
            share = f.impact.share_of_step
            if f.category in TIMING_CATEGORIES and f.severity in ("warning", "critical") and share is not None:
                assert share >= (0.05 if f.severity == "critical" else 0.01), f.title


def test_a_second_demo_into_the_same_folder_analyses_its_own_steps(demo: Any) -> None:
    """The profile CSV and the events file are appended to: a second demo run into the folder of the first
    analysed both runs folded together (12 + 12 steps as 24 'steps', each step's time the sum of two runs)."""
    out, _ = demo
    proc = subprocess.run([sys.executable, "-m", "my_utils.profiling.examples.unified_metrics_demo", "--steps",
                           "5", "--output-dir", str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "replaced" in proc.stderr and "earlier demo run" in proc.stderr
    events = read_events(out / "metrics_events.jsonl")
    assert sorted(e.step for e in events if e.name == "step_time" and e.source == "mytimer") == list(range(5))
    rows = (out / "logs" / "profile_rank_0.csv").read_text().splitlines()
    assert sum(1 for r in rows if ",iter,END," in r) == 5
    assert "5 steps" in proc.stdout and "12 steps" not in proc.stdout


def _step_events(run_id: str, steps: range, ms: float) -> list[Any]:
    from my_utils.core.events import MetricEvent

    return [MetricEvent("step_time", ms, "duration", "ms", "mytimer", 0, s, 1.0e9 + s, run_id) for s in steps]


def test_two_runs_over_the_same_steps_are_a_capture_warning() -> None:
    """Events of two runs that both recorded steps 0-9 (an output folder used twice) are named, with the
    repeated steps; runs that recorded different steps, and one run alone, are not."""
    both = MetricsAnalyzer(_step_events("run-a", range(10), 10.0) + _step_events("run-b", range(5, 15), 30.0)).analyze()
    (warn,) = [f for f in both.findings if f.id.startswith("capture:one run per step")]
    assert warn.severity == "warning" and warn.evidence["ranks"] == [0] and warn.evidence["value"] == 5
    assert "2 runs (run-a, run-b)" in warn.detail and "(5-9)" in warn.detail
    apart = MetricsAnalyzer(_step_events("run-a", range(10), 10.0) + _step_events("run-b", range(10, 20), 30.0))
    assert not [f for f in apart.analyze().findings if f.id.startswith("capture:one run per step")]
    alone = MetricsAnalyzer(_step_events("run-a", range(10), 10.0) * 2).analyze()  # one run: a region twice per step
    assert not [f for f in alone.findings if f.id.startswith("capture:one run per step")]
