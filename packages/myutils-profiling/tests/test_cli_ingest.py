"""``myutils-profile ingest``: configs that read nothing, a bad file among rank traces, all outputs or none."""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from my_utils.profiling.cli import app
from my_utils.profiling.examples import example_config_path

_PROFILE = [sys.executable, "-c", "from my_utils.profiling.cli import main; main()"]
_DATA = example_config_path().parent / "data"


def one_error_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert "Traceback" not in stderr
    return lines[0]


@pytest.mark.parametrize("name, text", [
    ("empty.json", "{}"),
    ("empty.yaml", "{}\n"),
    ("no_list.json", '{"providers": []}'),
    ("disabled.json", '{"providers": [{"provider": "mytimer", "input": "x.csv", "enabled": false}]}'),
])
def test_a_config_with_no_provider_is_bad_input(tmp_path: Path, name: str, text: str) -> None:
    # before: exit 0 after writing an empty metrics_events.jsonl ("wrote 0 metric events")
    cfg = tmp_path / name
    cfg.write_text(text)
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["ingest", "--config", str(cfg), "--output-dir", str(out), "-q"])
    assert res.exit_code == 2, res.output
    line = one_error_line(res.stderr)
    assert f"{cfg}:providers:" in line and "at least one enabled provider" in line
    assert not out.exists()


def test_a_memory_timeline_among_rank_traces_is_named_through_the_process_pool(real_fixtures: Any,
                                                                               tmp_path: Path) -> None:
    # before: exit 1 with "BrokenProcessPool" and no file named (errors did not unpickle)
    traces = tmp_path / "traces"
    traces.mkdir()
    for rank in (0, 1):
        shutil.copy(real_fixtures / f"kineto/hta/trace_filter__sampled_rank-{rank}.json.gz", traces)
    bad = traces / "memory_timeline.json.gz"  # named like a trace, so the folder scan takes it
    bad.write_bytes((real_fixtures / "kineto/hta/memory_analysis__memory_timeline.raw.gz").read_bytes())
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"providers": [{"provider": "torch_profiler", "input": "traces",
                                              "options": {"executor": "process"}}]}))
    out = tmp_path / "out"
    res = subprocess.run([*_PROFILE, "ingest", "--config", str(cfg), "--output-dir", str(out), "-q"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 2, res.stderr
    line = one_error_line(res.stderr)
    assert str(bad) in line and "memory timeline" in line and "BrokenProcessPool" not in line
    assert not out.exists() and res.stdout == ""


def _limit_file_size() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))


def test_ingest_analyze_writes_the_events_and_every_report_or_nothing(tmp_path: Path) -> None:
    # before: the events file and analysis_report.json/.md stayed when the HTML hit the file-size limit
    shutil.copy(_DATA / "profile_rank_0.csv", tmp_path)
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"providers": [{"provider": "mytimer", "input": "profile_rank_0.csv"}]}))
    out = tmp_path / "out"
    res = subprocess.run([*_PROFILE, "ingest", "--config", str(cfg), "--output-dir", str(out), "--analyze", "-q"],
                         capture_output=True, text=True, timeout=300, preexec_fn=_limit_file_size)
    assert res.returncode == 2, res.stderr
    line = one_error_line(res.stderr)
    assert "analysis_report.html" in line and ".tmp" not in line
    assert not out.exists() and res.stdout == ""
    ok = CliRunner().invoke(app, ["ingest", "--config", str(cfg), "--output-dir", str(out), "--analyze", "-q"])
    assert ok.exit_code == 0, ok.output
    assert sorted(p.name for p in out.iterdir()) == ["analysis_report.html", "analysis_report.json",
                                                     "analysis_report.md", "metrics_events.jsonl"]
    report = json.loads((out / "analysis_report.json").read_text())
    assert report["inputs"]["events_file"] == str(out / "metrics_events.jsonl")
    assert report["inputs"]["events"] == len((out / "metrics_events.jsonl").read_text().splitlines())


def test_the_output_never_replaces_the_config(tmp_path: Path) -> None:
    shutil.copy(_DATA / "profile_rank_0.csv", tmp_path)
    cfg = tmp_path / "metrics_events.jsonl"  # a config named like the output, in the output folder
    cfg.write_text(json.dumps({"providers": [{"provider": "mytimer", "input": "profile_rank_0.csv"}]}))
    before = cfg.read_bytes()
    res = CliRunner().invoke(app, ["ingest", "--config", str(cfg), "--output-dir", str(tmp_path), "-q"])
    assert res.exit_code == 2 and "would replace the input" in one_error_line(res.stderr)
    assert cfg.read_bytes() == before
