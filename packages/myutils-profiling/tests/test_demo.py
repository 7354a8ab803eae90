"""The README's demo command runs in a fresh interpreter and writes what it promises."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from my_utils.core.events import read_events
from my_utils.core.profile_csv import read_profile_csv
from my_utils.core.testing.trace_check import assert_valid_trace
from my_utils.profiling.analysis import AnalysisReport

pytest.importorskip("torch", reason="the demo trains a model with torch")

DEMO = "my_utils.profiling.examples.unified_metrics_demo"


def test_demo_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "demo_output"
    proc = subprocess.run([sys.executable, "-m", DEMO, "--steps", "12", "--collect-every", "5",
                           "--output-dir", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    events = read_events(out / "metrics_events.jsonl")
    by_source = {e.source for e in events}
    assert by_source == {"mytimer", "torch_profiler"}
    timer_steps = sorted({e.step for e in events if e.source == "mytimer" and e.name == "forward"})
    assert timer_steps == list(range(12))  # every step collected exactly once across 3 collects
    assert len([e for e in events if e.source == "mytimer" and e.name == "forward"]) == 12
    rows = read_profile_csv(out / "logs" / "profile_rank_0.csv")
    assert len(rows) == 12 * 5 * 2  # 5 regions per step, START + END each
    assert_valid_trace(out / "mytimer_trace.json")
    trace = json.loads((out / "mytimer_trace.json").read_text())
    assert {e["name"] for e in trace["traceEvents"] if e.get("ph") == "B"} == {
        "iter", "data", "forward", "backward", "optimizer"}
    (torch_trace,) = (out / "torch_traces").glob("*.json")
    assert "aten::linear" in torch_trace.read_text()
    assert "written:" in proc.stdout and str(out / "metrics_events.jsonl") in proc.stdout
    # next: the report page, the merged timeline, and the command for the whole folder
    after = proc.stdout.split("next:\n", 1)[1].splitlines()
    assert after[0].startswith(f"  open {out / 'analysis_report.html'}") or \
        not (out / "analysis_report.html").exists()
    assert any(line.startswith(f"  open {out / 'merged_trace.json'} in https://ui.perfetto.dev") for line in after) \
        or not (out / "merged_trace.json").exists()
    assert after[-1].startswith(f"  myutils-profile analyze {out}")
    # the seed's quick start ran: collector.analyze() then export_report() per format
    report = AnalysisReport.load(out / "analysis_report.json")
    assert report.summary["steps"]["count"] == 12 and report.summary["rule_errors"] == []
    assert {"mytimer", "torch_profiler"} <= set(report.summary["sources"])
    assert report.overhead["regions_per_step"] == 5.0 and report.overhead["share_of_step_time"] < 0.05
    assert any(f.id == "bottleneck:backward" or f.id == "bottleneck:forward" for f in report.findings)
    assert f"report_json      {out / 'analysis_report.json'}" in proc.stdout
    assert "analysis (pretrain): overall" in proc.stdout
    if importlib.util.find_spec("my_utils.profiling.reports") is not None:
        for ext in ("md", "html"):
            assert (out / f"analysis_report.{ext}").stat().st_size > 0
            assert str(out / f"analysis_report.{ext}") in proc.stdout
    from my_utils.profiling.cli import app

    if "trace" in {c.name for c in app.registered_commands}:
        assert_valid_trace(out / "merged_trace.json")
        assert str(out / "merged_trace.json") in proc.stdout
        merged = json.loads((out / "merged_trace.json").read_text())["traceEvents"]
        iters = {e["args"]["step"]: (e["ts"], e["ts"] + e["dur"]) for e in merged
                 if e.get("cat") == "mytimer" and e["args"].get("path") == "iter"}
        steps = {int(e["name"].split("#")[1]): e["ts"] for e in merged
                 if str(e.get("name", "")).startswith("ProfilerStep#")}
        assert steps and set(steps) <= set(iters)
        # one clock: torch's step N begins in prof.step() after MyTimer's iter N-1 ended and before iter N
        # begins. Ordered, not "within 20 ms": on a loaded machine the gap between the two can grow past any bound
        for step, ts in steps.items():
            after = iters[step - 1][1] if step - 1 in iters else -math.inf
            assert after - 1_000 <= ts <= iters[step][0] + 1_000, (step, ts, iters.get(step - 1), iters[step])


def test_demo_rejects_bad_arguments(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", DEMO, "--steps", "0", "--output-dir", str(tmp_path / "o")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "--steps and --collect-every must be at least 1" in proc.stderr
    assert not (tmp_path / "o").exists()
