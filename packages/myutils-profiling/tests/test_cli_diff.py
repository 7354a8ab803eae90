"""``myutils-profile diff`` end to end: gates that see no data, hostile numbers, context warnings, the outputs.

Reports come from the real analyzer over synthetic MyTimer runs; traces are the real HTA
control/test pair, or small hand-written traces where a case needs impossible numbers.
"""

from __future__ import annotations

import gzip
import html
import json
import random
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from my_utils.core.events import MetricEvent, write_events
from my_utils.profiling.analysis import MetricsAnalyzer
from my_utils.profiling.cli import app

CONTROL = "kineto/hta/trace_diff__control.json.gz"
TEST = "kineto/hta/trace_diff__test.json.gz"


def run_report(tmp: Path, name: str, scale: dict[str, float] | None = None, seed: int = 1, steps: int = 20,
               hardware: dict[str, Any] | None = None) -> Path:
    """A MyTimer-like run (forward/backward/data, noisy but steady) analysed into ``<tmp>/<name>/analysis_report.json``."""
    rnd = random.Random(seed)
    scale = scale or {}
    events = []
    for step in range(steps):
        total = 0.0
        for region, ms in (("forward", 50.0), ("backward", 80.0), ("data", 5.0)):
            value = ms * rnd.uniform(0.995, 1.005) * scale.get(region, 1.0)
            total += value
            events.append(MetricEvent(region, value, "duration", "ms", "mytimer", 0, step, 1.7e9 + step))
        events.append(MetricEvent("step_time", total, "duration", "ms", "mytimer", 0, step, 1.7e9 + step))
    folder = tmp / name
    folder.mkdir(parents=True, exist_ok=True)
    write_events(folder / "metrics_events.jsonl", events)
    report = MetricsAnalyzer(folder / "metrics_events.jsonl", "pretrain", hardware=hardware).analyze()
    return report.write(folder / "analysis_report.json")


def write_trace(path: Path, kernels: list[tuple[str, float]], steps: int = 3, meta: dict[str, Any] | None = None,
                dur_token: str | None = None) -> Path:
    """A small Kineto-like trace: ``steps`` ProfilerStep spans, each launching ``kernels`` (name, µs)."""
    events: list[dict[str, Any]] = []
    corr = 0
    for s in range(steps):
        t0 = s * 10_000
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}", "pid": 1, "tid": 1,
                       "ts": t0, "dur": 9_000})
        for i, (name, dur) in enumerate(kernels):
            corr += 1
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                           "ts": t0 + 10 + i, "dur": 1, "args": {"correlation": corr}})
            events.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": t0 + 20 + i * 100,
                           "dur": dur, "args": {"correlation": corr, "stream": 7}})
    text = json.dumps({**(meta or {}), "traceEvents": events})
    if dur_token is not None:
        text = text.replace("123456.0", dur_token)
    path.write_text(text)
    return path


def one_error_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert "Traceback" not in stderr
    return lines[0]


def _outputs(tmp: Path) -> tuple[list[str], list[Path]]:
    paths = [tmp / "out" / "d.json", tmp / "out" / "d.md", tmp / "out" / "d.html"]
    return ["--output", str(paths[0]), "--markdown", str(paths[1]), "--html", str(paths[2])], paths


# -- a gate that sees no data does not pass (issue 17) ------------------------------------------------------


@pytest.mark.parametrize("empty", [
    {"traceEvents": []},
    {"traceEvents": [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}}],
     "schemaVersion": 1},
])
def test_diff_against_an_empty_trace_is_refused_not_passed(tmp_path: Path, empty: dict[str, Any]) -> None:
    # before: "0 significant change(s)", "Regression gate (5%): passed", exit 0
    a = write_trace(tmp_path / "a.json", [("gemm", 100.0)])
    b = tmp_path / "empty.json"
    b.write_text(json.dumps(empty))
    args, outs = _outputs(tmp_path)
    res = CliRunner().invoke(app, ["diff", "--base-trace", str(a), "--target-trace", str(b), *args,
                                   "--fail-on-regression", "5"])
    assert res.exit_code == 2, res.output
    line = one_error_line(res.stderr)
    assert "empty.json" in line and "found none" in line and "gate" in line
    assert "passed" not in res.output and not any(p.exists() for p in outs) and not (tmp_path / "out").exists()


def test_report_with_an_empty_operations_table_and_no_steps_is_refused(tmp_path: Path) -> None:
    good = run_report(tmp_path, "a")
    data = json.loads(good.read_text())
    data["tables"]["operations"] = []
    data["tables"]["steps"] = []
    empty = tmp_path / "empty_report.json"
    empty.write_text(json.dumps(data))
    args, outs = _outputs(tmp_path)
    res = CliRunner().invoke(app, ["diff", "--base-report", str(good), "--target-report", str(empty), *args,
                                   "--fail-on-regression", "5"])
    assert res.exit_code == 2, res.output
    assert str(empty) in one_error_line(res.stderr)
    assert not any(p.exists() for p in outs)


def test_report_with_steps_but_no_operations_compares_the_step_time_and_says_so(tmp_path: Path) -> None:
    good = run_report(tmp_path, "a")
    data = json.loads(run_report(tmp_path, "b", {"backward": 1.3}).read_text())
    data["tables"]["operations"] = []
    steps_only = tmp_path / "steps_only.json"
    steps_only.write_text(json.dumps(data))
    res = CliRunner().invoke(app, ["diff", "--base-report", str(good), "--target-report", str(steps_only),
                                   "--fail-on-regression", "5"])
    assert res.exit_code == 1, res.output  # the step time is 18 % slower: the gate saw data and failed
    assert "no operations table" in res.stderr and "step_time" in res.stderr


# -- hostile numbers: one line, exit 2, nothing written (issue 17) ------------------------------------------


def _mutated_report(good: Path, tmp: Path, key: str, token: str) -> Path:
    data = json.loads(good.read_text())
    data["tables"]["operations"][0][key] = "@@TOKEN@@"
    bad = tmp / "bad_report.json"
    bad.write_text(json.dumps(data).replace('"@@TOKEN@@"', token))
    return bad


@pytest.mark.parametrize("key, token, expected", [
    ("mean", "NaN", "strict JSON (no bare NaN or Infinity)"),
    ("mean", "-Infinity", "strict JSON (no bare NaN or Infinity)"),
    ("mean", "9" * 400, "an integer of 400 digits"),
    ("mean", "1e999", "a finite number"),
    ("steps", "1e999", "a finite number"),
    ("steps", "2.5", "whole number of steps"),
    ("steps", "0.5", "whole number of steps"),
    ("std", "-3", "std >= 0"),
    ("count", "-1", "a count >= 0"),
    ("mean", "[" * 100_000 + "]" * 100_000, "nested at most 64 levels"),
    ("mean", "[" * 80 + "]" * 80, "nested at most 64 levels"),
    ("mean", "1e308", "within the range of a 64-bit float"),
])
def test_reports_with_hostile_numbers_are_one_line_exit_2(tmp_path: Path, key: str, token: str,
                                                          expected: str) -> None:
    # before: ValueError/OverflowError/RecursionError tracebacks, or NaN deltas written as bare NaN
    good = run_report(tmp_path, "a")
    bad = _mutated_report(good, tmp_path, key, token)
    args, outs = _outputs(tmp_path)
    res = CliRunner().invoke(app, ["diff", "--base-report", str(bad), "--target-report", str(good), *args])
    assert res.exit_code == 2, res.output
    line = one_error_line(res.stderr)
    assert str(bad) in line and expected in line, line
    assert not any(p.exists() for p in outs)


@pytest.mark.parametrize("token", ["1e308", "1.7e308"])
def test_traces_whose_durations_overflow_are_one_line_exit_2(tmp_path: Path, token: str) -> None:
    # two such kernels in a step: their per-step total overflows a float
    # before: OverflowError / NaN deltas (ValueError from the strict JSON writer), tracebacks
    a = write_trace(tmp_path / "a.json", [("gemm", 100.0), ("huge", 123456.0), ("huge", 123456.0)], dur_token=token)
    b = write_trace(tmp_path / "b.json", [("gemm", 110.0), ("huge", 1.0)])
    args, outs = _outputs(tmp_path)
    res = CliRunner().invoke(app, ["diff", "--base-trace", str(a), "--target-trace", str(b), *args])
    assert res.exit_code == 2, res.output
    line = one_error_line(res.stderr)
    assert "a.json" in line and "kernel:huge" in line and "64-bit float" in line
    assert not any(p.exists() for p in outs)


@pytest.mark.parametrize("token", ["1e308", "1e300"])
def test_huge_but_finite_durations_are_compared_exactly(tmp_path: Path, token: str) -> None:
    a = write_trace(tmp_path / "a.json", [("gemm", 100.0), ("huge", 123456.0)], dur_token=token)
    b = write_trace(tmp_path / "b.json", [("gemm", 110.0), ("huge", 1.0)])
    args, outs = _outputs(tmp_path)
    res = CliRunner().invoke(app, ["diff", "--base-trace", str(a), "--target-trace", str(b), *args])
    assert res.exit_code == 0, res.output
    data = json.loads(outs[0].read_text(), parse_constant=lambda t: pytest.fail(f"bare {t}"))
    huge = next(c for c in data["changes"] if c["name"] == "kernel:huge")
    assert huge["base"]["mean"] == pytest.approx(float(token) / 1e3) and huge["significant"]


# -- the gate: speed-ups pass (issue 19) ---------------------------------------------------------------------


def test_a_25_percent_speed_up_passes_the_gate(tmp_path: Path) -> None:
    base = run_report(tmp_path, "a", seed=1)
    faster = run_report(tmp_path, "b", {"backward": 0.75, "forward": 0.75}, seed=2)
    out = tmp_path / "d.json"
    res = CliRunner().invoke(app, ["diff", "--base-report", str(base), "--target-report", str(faster),
                                   "--output", str(out), "--fail-on-regression", "5"])
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    backward = next(c for c in data["changes"] if c["name"] == "backward")
    assert backward["significant"] and backward["delta_pct"] == pytest.approx(-25, abs=1)
    assert data["step_time"]["significant"] and data["step_time"]["delta_pct"] < -20
    message = data["gate"].pop("message")
    assert data["gate"] == {"threshold_pct": 5.0, "passed": True, "regressions": []}
    assert message.startswith("passed. Step time 135.0 → 102.6 ms") and message.endswith(data["headline"])
    assert "regression gate (5%): passed" in res.stdout
    # and the same run the other way round is a 33 % slow-down that fails it
    back = CliRunner().invoke(app, ["diff", "--base-report", str(faster), "--target-report", str(base),
                                    "--fail-on-regression", "5"])
    assert back.exit_code == 1 and "backward +3" in back.stderr
    assert back.stderr.count("step_time") == 1  # the operations table also holds it: listed once


# -- the real pair: context warnings, folding, units, HTML (issue 18) --------------------------------------------


@pytest.fixture(scope="module")
def real_diff(real_fixtures: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, dict[str, Any], str, str]:
    tmp = tmp_path_factory.mktemp("real_diff")
    args, (out_json, out_md, out_html) = _outputs(tmp)
    res = CliRunner().invoke(app, ["diff", "--base-trace", str(real_fixtures / CONTROL), "--target-trace",
                                   str(real_fixtures / TEST), *args, "--fail-on-regression", "5"])
    return res, json.loads(out_json.read_text()), out_md.read_text(), out_html.read_text()


def test_different_gpu_device_count_and_world_size_are_warned_everywhere(real_diff: Any) -> None:
    # before: "+60.1%, significant" with warnings: [] although A100 x8 rank 3 of 8 meets V100 x2 rank 1 of 2
    res, data, md, html = real_diff
    assert res.exit_code == 1
    (warning,) = data["warnings"][:1]
    for field in ("gpu: 'NVIDIA A100-PG509-200' vs 'Tesla V100-SXM2-16GB'", "gpu_count: 8 vs 2", "world_size: 8 vs 2"):
        assert field in warning
        assert field.replace("_", "\\_") in md  # Markdown escapes the underscore
    assert "rank" not in warning.split("(")[1]  # where a trace was taken is not a difference
    assert data["hardware"]["base"]["rank"] == 3 and data["hardware"]["target"]["world_size"] == 2
    gate_line = next(line for line in res.stderr.splitlines() if line.startswith("regression over 5%"))
    assert "hardware or software differ" in gate_line
    assert "warning: the two runs used different hardware" in res.stderr
    assert "Regression gate (5%):** FAILED" in md and "hardware or software differ" in md
    assert "NVIDIA A100-PG509-200" in html and 'class="differs"' in html


def test_nested_names_are_folded_under_their_parent_and_counted_once(real_diff: Any) -> None:
    res, data, md, _ = real_diff
    by_name = {c["name"]: c for c in data["changes"]}
    child = by_name["cpu_op:aten::_local_scalar_dense"]
    assert child["parent"] == "cpu_op:aten::item" and child["folded_into"] == "cpu_op:aten::item"
    table = [line for line in md.splitlines() if line.startswith("| ")]
    item_row = next(i for i, line in enumerate(table) if "cpu\\_op:aten::item |" in line)
    assert "↳ cpu\\_op:aten::\\_local\\_scalar\\_dense |" in table[item_row + 1]
    assert sum("aten::\\_local\\_scalar\\_dense" in line for line in table) == 1
    top = data["summary"]["significant"] - data["summary"]["folded"]
    assert f"{top} significant change(s) among 415 names, {data['summary']['folded']} more nested" in md
    assert f"{top} significant change(s) (+{data['summary']['folded']} nested in them)" in res.stdout


def test_markdown_cuts_long_names_with_an_ellipsis_and_puts_units_on_both_sides(real_diff: Any) -> None:
    _, _, md, _ = real_diff
    rows = [line for line in md.splitlines() if line.startswith("| ") and "significant" not in line][2:]
    long_kernels = [line for line in rows if "split\\_embedding\\_backward" in line]
    cells = [html.unescape(line.split(" | ")[0].replace("\\", "")) for line in long_kernels]
    assert cells and all("…" in c and len(c) <= 82 for c in cells)
    # cut in the middle and around where they differ: no two rows of different names read alike (issue 34)
    assert len(set(cells)) == len(cells) >= 2
    changed = next(line for line in rows if "| changed |" in line)
    cells = changed.split(" | ")
    assert re.fullmatch(r"[\d,.]+ ± [\d,.]+ ms", cells[2]) and re.fullmatch(r"[\d,.]+ ± [\d,.]+ ms", cells[3])
    assert cells[4].endswith(" ms")
    assert "Step time:** 77.491 ms → 124.067 ms" in md


def test_json_output_is_strict_and_keeps_full_names(real_diff: Any, real_fixtures: Any) -> None:
    _, data, _, _ = real_diff
    with gzip.open(real_fixtures / TEST, "rt") as fh:
        longest = max((e["name"] for e in json.load(fh)["traceEvents"] if e.get("cat") == "kernel"), key=len)
    assert f"kernel:{longest}" in {c["name"] for c in data["changes"]}


def _share_inside(path: Path, child: str, parent: str) -> float:
    """Share of ``child``'s time (cpu_op) that lies inside a ``parent`` range (user_annotation) on the same thread."""
    with gzip.open(path, "rt") as fh:
        events = [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]
    parents: dict[tuple[Any, Any], list[tuple[float, float]]] = {}
    for e in events:
        if e.get("cat") == "user_annotation" and e["name"] == parent:
            parents.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    inside = total = 0.0
    for e in events:
        if e.get("cat") == "cpu_op" and e["name"] == child:
            total += e["dur"]
            s, t = e["ts"], e["ts"] + e["dur"]
            inside += sum(max(0.0, min(t, b) - max(s, a)) for a, b in parents.get((e["pid"], e["tid"]), []))
    return inside / total


def test_a_child_is_listed_under_its_true_parent_only(real_diff: Any, real_fixtures: Any) -> None:
    """Issue 34: aten::item (+28.41 ms) was listed under ## all2all_tw_data:init ## (+23.91 ms) though only part of it
    runs there, and a child cannot change more than its parent."""
    _, data, md, _ = real_diff
    by = {c["name"]: c for c in data["changes"]}
    item, init = by["cpu_op:aten::item"], by["annotation:## all2all_tw_data:init ##"]
    shares = [_share_inside(real_fixtures / p, "aten::item", "## all2all_tw_data:init ##") for p in (CONTROL, TEST)]
    assert min(shares) < 0.95 and item["parent"] == init["name"]
    assert item["parent_share"] == pytest.approx(min(shares), abs=0.01)
    assert item["delta"] > init["delta"] > 0 and item["folded_into"] is None  # listed on its own
    table = [line for line in md.splitlines() if line.startswith("| ")]
    assert any(line.startswith("| cpu\\_op:aten::item |") for line in table)  # a top-level row, not "↳"
    # a true child (all its time inside, changing no more than its parent) is still folded
    dense = by["cpu_op:aten::_local_scalar_dense"]
    assert dense["folded_into"] == "cpu_op:aten::item" and dense["parent_share"] >= 0.95
    assert abs(dense["delta"]) <= abs(item["delta"]) + 1e-9
    for c in data["changes"]:
        if c["folded_into"]:
            assert c["parent_share"] >= 0.95 and abs(c["delta"]) <= abs(by[c["folded_into"]]["delta"]) + 1e-9
