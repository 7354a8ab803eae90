"""myutils-profile diff: reports from the real analyzer, the real Kineto control/test pair, noise, CI exit codes."""

from __future__ import annotations

import gzip
import json
import random
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from my_utils.core.events import MetricEvent, write_events
from my_utils.profiling.analysis import AnalysisReport, MetricsAnalyzer
from my_utils.profiling.analysis.diff import OpStats, compare, diff_reports, diff_traces
from my_utils.profiling.cli import app

CONTROL = "kineto/hta/trace_diff__control.json.gz"
TEST = "kineto/hta/trace_diff__test.json.gz"


def _run_events(path: Path, slow: dict[str, float], seed: int, steps: int = 20) -> Path:
    """A MyTimer-like run: forward ~50 ms (noisy, ±10 %), backward ~80 ms (steady), data ~5 ms."""
    rnd = random.Random(seed)
    events = []
    for step in range(steps):
        regions = {"forward": 50 * rnd.uniform(0.9, 1.1), "backward": 80 * rnd.uniform(0.995, 1.005),
                   "data": 5 * rnd.uniform(0.99, 1.01)}
        total = 0.0
        for name, ms in regions.items():
            ms *= slow.get(name, 1.0)
            total += ms
            events.append(MetricEvent(name=name, value=ms, kind="duration", unit="ms", source="mytimer", rank=0,
                                      step=step, ts=1.7e9 + step, attrs={"depth": 0}))
        events.append(MetricEvent(name="step_time", value=total, kind="duration", unit="ms", source="mytimer",
                                  rank=0, step=step, ts=1.7e9 + step))
    out = path / "metrics_events.jsonl"
    path.mkdir(parents=True, exist_ok=True)
    write_events(out, events)
    return out


def _report(tmp: Path, name: str, slow: dict[str, float], seed: int,
            hardware: dict[str, Any] | None = None) -> Path:
    events = _run_events(tmp / name, slow, seed)
    report = MetricsAnalyzer(events, "pretrain", hardware=hardware).analyze()
    return report.write(tmp / name / "analysis_report.json")


def test_analyzer_reports_flag_the_slowed_region_and_not_the_noisy_one(tmp_path: Path) -> None:
    # forward drifts +3 % inside its own ±10 % noise; backward gets 10 % slower on a steady base
    base = _report(tmp_path, "a", {}, seed=1)
    target = _report(tmp_path, "b", {"forward": 1.03, "backward": 1.10}, seed=2)
    result = diff_reports(AnalysisReport.load(base), AnalysisReport.load(target))
    by_name = {c.name: c for c in result.changes}
    assert by_name["backward"].significant and by_name["backward"].delta_pct == pytest.approx(10, abs=1.0)
    assert not by_name["forward"].significant
    assert not by_name["data"].significant
    assert result.step_time is not None and result.step_time.delta > 0


def test_cli_gate_exit_codes_outputs_and_markdown(tmp_path: Path) -> None:
    base = _report(tmp_path, "a", {}, seed=1, hardware={"gpu": "H100", "cpu_count": 8})
    target = _report(tmp_path, "b", {"backward": 1.25}, seed=2, hardware={"gpu": "A100", "cpu_count": 8})
    runner = CliRunner()
    out_json, out_md = tmp_path / "d.json", tmp_path / "d.md"
    args = ["diff", "--base-report", str(base), "--target-report", str(target), "--output", str(out_json),
            "--markdown", str(out_md)]
    failed = runner.invoke(app, [*args, "--fail-on-regression", "20"])
    assert failed.exit_code == 1, failed.output
    assert "regression over 20%" in failed.stderr and "backward" in failed.stderr
    assert "different hardware" in failed.stderr and "'H100' vs 'A100'" in failed.stderr
    passed = runner.invoke(app, [*args, "--fail-on-regression", "30"])
    assert passed.exit_code == 0, passed.output
    data = json.loads(out_json.read_text())
    significant = {c["name"] for c in data["changes"] if c["significant"]}
    assert "backward" in significant and "forward" not in significant
    md = out_md.read_text()
    assert "| backward | changed |" in md and "| forward |" not in md
    assert "different hardware" in md and "passed" in md


def test_real_control_test_traces_match_hand_counted_kernels(real_fixtures: Any) -> None:
    control, test = real_fixtures / CONTROL, real_fixtures / TEST
    result = diff_traces([control], [test])
    by_name = {c.name: c for c in result.changes}
    for path, side in ((control, "base"), (test, "target")):
        with gzip.open(path, "rt") as fh:
            raw = json.load(fh)["traceEvents"]
        count: dict[str, int] = defaultdict(int)
        total: dict[str, float] = defaultdict(float)
        steps = [e["dur"] for e in raw if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")]
        for e in raw:
            if e.get("ph") == "X" and e.get("cat") in ("kernel", "Kernel"):
                count[e["name"]] += 1
                total[e["name"]] += e["dur"]
        assert count, path
        for name, n in count.items():
            stats = getattr(by_name[f"kernel:{name}"], side)
            assert stats.count == n
            assert stats.mean * stats.steps == pytest.approx(total[name] / 1e3, rel=1e-9)
        step_stats = getattr(result.step_time, side)
        assert step_stats.steps == len(steps) == 6
        assert step_stats.mean == pytest.approx(sum(steps) / len(steps) / 1e3)
    # names only one side has: kernels compiled away or added by the test run
    assert {c.status for c in result.changes} >= {"added", "removed", "changed", "unchanged"}
    added = [c for c in result.changes if c.status == "added"]
    assert all(c.base is None and c.target is not None for c in added)


def test_trace_pair_auto_detected_through_report_flags(real_fixtures: Any, tmp_path: Path) -> None:
    out = tmp_path / "d.json"
    res = CliRunner().invoke(app, ["diff", "--base-report", str(real_fixtures / CONTROL), "--target-report",
                                   str(real_fixtures / TEST), "--output", str(out)])
    assert res.exit_code == 0, res.output
    assert json.loads(out.read_text())["step_time"]["significant"] is True


@pytest.mark.parametrize("content, expected", [
    ("{not json", "line 1"),
    ('{"schema_version": "9.0"}', "newer than this reader"),
    ('{"schema_version": "1.1", "tables": {"operations": [{"name": "x"}]}}', "tables.operations[0]"),
])
def test_bad_reports_exit_2_with_one_line_and_write_nothing(tmp_path: Path, content: str, expected: str) -> None:
    good = _report(tmp_path, "a", {}, seed=1)
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    out = tmp_path / "d.json"
    res = CliRunner().invoke(app, ["diff", "--base-report", str(good), "--target-report", str(bad),
                                   "--output", str(out)])
    assert res.exit_code == 2
    assert expected in res.stderr and str(bad) in res.stderr and "Traceback" not in res.output
    assert len(res.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_missing_side_is_a_usage_error(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["diff", "--base-report", str(tmp_path / "none.json"),
                                   "--target-report", str(tmp_path / "none.json")])
    assert res.exit_code == 2 and "no such file" in res.stderr


stats = st.builds(OpStats, name=st.just("x"), count=st.integers(1, 1000), steps=st.integers(1, 50),
                  mean=st.floats(0.001, 1e4), std=st.floats(0, 1e3))


@settings(max_examples=200, deadline=None)
@given(stats, st.floats(0, 10), st.floats(0, 50))
def test_a_run_never_differs_from_itself_and_noise_bounds_significance(s: OpStats, sigmas: float,
                                                                      min_pct: float) -> None:
    (same,) = compare({"x": s}, {"x": s}, sigmas=sigmas, min_pct=min_pct)
    assert not same.significant and same.delta == 0
    moved = OpStats("x", s.count, s.steps, s.mean * 1.5 + 1, s.std)
    (change,) = compare({"x": s}, {"x": moved}, sigmas=sigmas, min_pct=min_pct)
    # one sample a side has no spread: never judged, whatever the change (issue 34)
    assert change.significant == (s.steps >= 2 and abs(change.delta) > change.noise)
    assert change.status == ("unmeasured" if s.steps < 2 else "changed" if change.significant else "unchanged")
    assert change.noise >= s.mean * min_pct / 100
