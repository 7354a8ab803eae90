"""Outputs written as a set land together or not at all (issue 35, item 7).

``nsys summary --csv-dir`` (and its ``--json``), ``nsys diff --output --markdown``, a trace split into
parts and the analysis reports each write several files. A run that fails part-way (a full disk, here a
file-size limit; or one target that is a folder, which fails only at its rename) must leave the previous
run's set exactly as it was: no mix of two runs, no temporary left behind. The earlier set and the new
one differ (other inputs), so a mix would show.
"""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from my_utils.profiling.cli import app

EXPORT_A = "nsys/nsysai__mfu_2gpu_before.sqlite"
EXPORT_B = "nsys/pipit__saxpy-mpi-cuda_perlmutter0.sqlite"
CLI = [sys.executable, "-c", "from my_utils.profiling.cli import main; main()"]


def _files(folder: Path) -> dict[str, bytes]:
    """Every file below ``folder`` (hidden temporaries included) by relative path, with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _limited(limit: int) -> Any:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def _summary(export: Path, out: Path) -> list[str]:
    return ["nsys", "summary", str(export), "--json", str(out / "summary.json"), "--csv-dir", str(out / "csv")]


@pytest.fixture
def first_summary(real_fixtures: Any, tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    out = tmp_path / "out"
    res = CliRunner().invoke(app, _summary(real_fixtures / EXPORT_A, out))
    assert res.exit_code == 0, res.output
    files = _files(out)
    assert len([n for n in files if n.startswith("csv/")]) >= 10
    return out, files


def test_a_table_path_that_is_a_folder_leaves_the_earlier_tables(first_summary: tuple[Path, dict[str, bytes]],
                                                                  real_fixtures: Any) -> None:
    """The folder fails only at its rename; the tables renamed before it would have been the new run's."""
    out, _ = first_summary
    tables = sorted((out / "csv").iterdir())
    blocked = tables[len(tables) // 2]  # a table in the middle of the set
    blocked.unlink()
    blocked.mkdir()
    before = _files(out)
    res = CliRunner().invoke(app, _summary(real_fixtures / EXPORT_B, out))
    assert res.exit_code == 2, res.output
    (line,) = res.stderr.splitlines()
    assert str(blocked) in line and "folder" in line, line
    assert _files(out) == before and blocked.is_dir()


def test_a_full_disk_leaves_the_earlier_tables(first_summary: tuple[Path, dict[str, bytes]],
                                               real_fixtures: Any) -> None:
    """A file-size limit that lets the first tables of the new run through and stops a later, larger one."""
    from my_utils.profiling.nsys.render import csv_text
    from my_utils.profiling.nsys.run import analyze_run

    out, before = first_summary
    sizes = [len(csv_text(t.columns, t.rows).encode())
             for t in analyze_run([str(real_fixtures / EXPORT_B)]).tables().values()]
    later = sizes.index(max(sizes))  # the largest table: every one before it fits under the limit
    assert later >= 2 and max(sizes[:later]) < sizes[later]  # written one by one, those would have been replaced
    args = ["nsys", "summary", str(real_fixtures / EXPORT_B), "--csv-dir", str(out / "csv")]
    res = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=300,
                         preexec_fn=_limited(max(sizes[:later]) + 1))
    assert res.returncode == 2, res.stderr[-2000:]
    (line,) = res.stderr.splitlines()
    assert "File too large" in line and "Traceback" not in res.stderr, line
    assert _files(out) == before


def test_a_rerun_replaces_the_whole_set(first_summary: tuple[Path, dict[str, bytes]], real_fixtures: Any) -> None:
    """A table the new run does not write (the earlier export had it) is gone: the folder holds one run."""
    out, before = first_summary
    res = CliRunner().invoke(app, _summary(real_fixtures / EXPORT_B, out))
    assert res.exit_code == 0, res.output
    after = _files(out)
    from my_utils.profiling.nsys.run import analyze_run

    expected = {f"csv/{name}.csv" for name in analyze_run([str(real_fixtures / EXPORT_B)]).tables()}
    assert set(after) == expected | {"summary.json"} and after != before


def test_nsys_diff_writes_both_files_or_neither(real_fixtures: Any, tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["nsys", "diff", str(real_fixtures / EXPORT_A), str(real_fixtures / "nsys/nsysai__mfu_2gpu_after.sqlite"),
            "--output", str(out / "diff.json"), "--markdown", str(out / "diff.md")]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    (out / "diff.md").unlink()
    (out / "diff.md").mkdir()  # the second file's path is taken by a folder
    before = _files(out)
    res = CliRunner().invoke(app, [*args[:3], str(real_fixtures / EXPORT_A), *args[4:]])
    assert res.exit_code == 2, res.output
    assert _files(out) == before


def test_trace_parts_with_a_part_path_that_is_a_folder(tmp_path: Path) -> None:
    from my_utils.core.events import MetricEvent, write_events

    events = tmp_path / "metrics_events.jsonl"
    write_events(events, [MetricEvent(name="iter", value=0.5, kind="duration", unit="ms", source="mytimer", rank=r,
                                      step=s, ts=1_700_000_000.0 + s * 0.001, attrs={"depth": 0})
                          for r in range(4) for s in range(3000)])
    out = tmp_path / "out" / "t.json"
    args = ["trace", "--events", str(events), "--output", str(out), "-q", "--max-mb", "0.3"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    parts = sorted(out.parent.iterdir())
    assert len(parts) >= 4
    parts[2].unlink()
    parts[2].mkdir()
    before = _files(out.parent)
    res = CliRunner().invoke(app, [*args[:-1], "0.25"])  # more, smaller parts: each file differs
    assert res.exit_code == 2, res.output
    assert str(parts[2]) in res.stderr
    assert _files(out.parent) == before


def test_analysis_reports_with_one_report_path_a_folder(tmp_path: Path) -> None:
    from my_utils.profiling.examples import example_config_path

    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["ingest", "--config", str(example_config_path()), "--output-dir", str(out), "-q"])
    assert res.exit_code == 0, res.output
    args = ["analyze", "--events", str(out / "metrics_events.jsonl"), "--output-dir", str(out / "reports"),
            "--formats", "json,markdown,html", "-q"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    (out / "reports" / "analysis_report.md").unlink()
    (out / "reports" / "analysis_report.md").mkdir()
    before = _files(out / "reports")
    res = CliRunner().invoke(app, [*args, "--workload", "inference"])
    assert res.exit_code == 2, res.output
    assert _files(out / "reports") == before
