"""The torch traces the events name are names inside the events' folder: never glob patterns, never a way out of
the folder, and never dropped without a word."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from my_utils.core.events import MetricEvent, write_events
from my_utils.core.testing.trace_check import check_trace
from my_utils.profiling.cli import app

BASE_NS = 1_700_000_000_000_000_000


def _trace(path: Path, rank: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"traceEvents": [{"ph": "X", "name": f"op_of_{path.name}", "ts": 1.0, "dur": 2.0,
                                                 "pid": 1, "tid": 1}],
                                "baseTimeNanoseconds": BASE_NS, "distributedInfo": {"rank": rank}}))
    return path


def _named(folder: Path, names: list[str]) -> Path:
    events = [MetricEvent(name="aten::mm", value=1.0, kind="duration", unit="ms", source="torch_profiler", rank=0,
                          step=0, attrs={"file": name}) for name in names]
    events.append(MetricEvent(name="iter", value=1.0, kind="duration", unit="ms", source="mytimer", rank=0, step=0,
                              ts=BASE_NS / 1e9, attrs={"depth": 0}))
    path = folder / "metrics_events.jsonl"
    write_events(path, events)
    return path


def _merged_ops(out: Path) -> set[str]:
    doc: Any = json.loads(out.read_text())
    assert check_trace(doc) == []
    return {e["name"] for e in doc["traceEvents"] if e.get("name", "").startswith("op_of_")}


def test_names_are_looked_up_inside_the_events_folder_only(tmp_path: Path) -> None:
    run = tmp_path / "run"
    outside = _trace(tmp_path / "elsewhere" / "rank0.json", 0)
    _trace(tmp_path / "up.json", 1)
    _trace(run / "sub" / "rank2.json", 2)  # a relative path inside the folder
    _trace(run / "a" / "b" / "rank3.json", 3)  # a name alone, found below the folder
    _trace(run / "x" / "dup.json", 4)
    _trace(run / "y" / "dup.json", 5)
    (run / "x**").mkdir()  # a glob-looking name that is a folder here: not a trace
    events = _named(run, [str(outside), "../up.json", "sub/rank2.json", "rank3.json", "dup.json", "**/x**",
                          "**/*.json", "", "a\x00b", "not_here.json"])
    out = tmp_path / "merged.json"
    res = CliRunner().invoke(app, ["trace", "--events", str(events), "--output", str(out), "-q",
                                   "--executor", "serial"])
    assert res.exit_code == 0, res.output
    assert _merged_ops(out) == {"op_of_rank2.json", "op_of_rank3.json"}  # nothing from outside, no pattern
    warnings = [line for line in res.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 2, warnings
    missing, ambiguous = warnings
    # '' is no name at all; the other 6 are said, 5 by name (a long path by its end)
    assert "name 6 torch traces" in missing and "and 1 more" in missing and "--torch-trace" in missing
    shown = missing.split("torch traces '", 1)[1].split("' and 1 more")[0].split("', '")
    expected = {"../up.json", "**/x**", "**/*.json", "not_here.json", "a\\x00b"}
    assert len(shown) == 5 and all(n in expected or n.endswith("elsewhere/rank0.json") for n in shown), shown
    assert "'dup.json'" in ambiguous and "none is merged" in ambiguous
    assert json.loads(out.read_text())["otherData"]["warnings"][:2] == [w.removeprefix("warning: ") for w in warnings]


def test_a_trace_outside_the_folder_is_merged_when_named_on_the_command_line(tmp_path: Path) -> None:
    outside = _trace(tmp_path / "elsewhere" / "rank0.json", 0)
    events = _named(tmp_path / "run", [str(outside)])
    out = tmp_path / "merged.json"
    res = CliRunner().invoke(app, ["trace", "--events", str(events), "--torch-trace", str(outside),
                                   "--output", str(out), "-q", "--executor", "serial"])
    assert res.exit_code == 0, res.output
    assert _merged_ops(out) == {"op_of_rank0.json"} and "warning" not in res.stderr


def test_torch_trace_takes_a_folder_as_analyze_trace_does(real_fixtures: Any, tmp_path: Path) -> None:
    """``--torch-trace FOLDER`` merges the folder's traces exactly as naming each file does (refused before)."""
    import shutil

    folder = tmp_path / "traces"
    folder.mkdir()
    for name in ("trace_filter__sampled_rank-0.json.gz", "trace_filter__sampled_rank-1.json.gz"):
        shutil.copyfile(real_fixtures / f"kineto/hta/{name}", folder / name)
    by_folder, by_files = tmp_path / "folder.json", tmp_path / "files.json"
    res = CliRunner().invoke(app, ["trace", "--torch-trace", str(folder), "--output", str(by_folder), "-q",
                                   "--executor", "serial"])
    assert res.exit_code == 0, res.output
    named = [a for p in sorted(folder.iterdir()) for a in ("--torch-trace", str(p))]
    res = CliRunner().invoke(app, ["trace", *named, "--output", str(by_files), "-q", "--executor", "serial"])
    assert res.exit_code == 0, res.output
    a, b = json.loads(by_folder.read_text()), json.loads(by_files.read_text())
    assert check_trace(a) == [] and a["traceEvents"] == b["traceEvents"]
    ranks = {e["args"]["name"].split(" (")[0] for e in a["traceEvents"] if e.get("name") == "process_name"}
    assert ranks == {"rank 0", "rank 1"}
