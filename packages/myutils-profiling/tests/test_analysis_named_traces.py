"""Trace files named in the events are names inside the events' folder: never patterns, never a way out.

Before: ``attrs.file: "**/x**"`` raised ``ValueError`` from ``rglob`` (a traceback out of ``analyze``),
and an absolute path or ``../`` name made the analyzer read a file outside the folder the user
pointed at. The same held for the Nsight exports the events name.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from my_utils.core.events import MetricEvent, write_events
from my_utils.profiling.analysis import MetricsAnalyzer
from my_utils.profiling.analysis.nsight.analyze import find_named

TRACE = "kineto/hta/trace_filter__sampled_rank-0.json.gz"


def _events(folder: Path, file_names: list[str], source: str = "torch_profiler") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    events = [MetricEvent(f"op{i}", 1.0 + i, "duration", "ms", source, 0, 1, attrs={"file": name})
              for i, name in enumerate(file_names)]
    out = folder / "metrics_events.jsonl"
    write_events(out, events)
    return out


@pytest.mark.parametrize("name", ["**/x**", "[a-z]*.json", "x?.json.gz", "\x00bad"])
def test_a_name_that_looks_like_a_pattern_is_only_a_name(tmp_path: Path, name: str) -> None:
    report = MetricsAnalyzer(_events(tmp_path / "run", [name])).analyze()  # before: ValueError from rglob
    assert not any(k.startswith("kineto_") for k in report.tables)


def test_a_name_never_leads_outside_the_events_folder(real_fixtures: Any, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere" / "secret.json.gz"
    outside.parent.mkdir()
    shutil.copy(real_fixtures / TRACE, outside)
    run = tmp_path / "run"
    for name in (str(outside), "../elsewhere/secret.json.gz"):
        report = MetricsAnalyzer(_events(run, [name])).analyze()
        assert "kineto_temporal" not in report.tables, name  # before: the outside trace was analysed
    # the same file inside the folder (by its last component) is found and analysed
    (run / "traces").mkdir()
    shutil.copy(real_fixtures / TRACE, run / "traces" / "secret.json.gz")
    report = MetricsAnalyzer(_events(run, [str(outside)])).analyze()
    assert report.tables["kineto_temporal"]


def test_nsight_exports_named_in_events_stay_inside_the_folder(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere" / "report.sqlite"
    outside.parent.mkdir()
    outside.write_bytes(b"")
    events = _events(tmp_path / "run", [], "nsys_sqlite")
    found = find_named([("nsys_sqlite", str(outside)), ("nsys_sqlite", "**/x**")], events)
    assert found.nsys == () and sorted(n for _, n in found.missing) == sorted([str(outside), "**/x**"])
