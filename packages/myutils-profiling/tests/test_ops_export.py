"""The operation tables as CSV files and one Excel workbook (``reports.table_export``, ``myutils-profile ops``),
the DataFrames of the notebook API (``ops.frames``) and the roofline figure (``reports.roofline_chart``)."""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from my_utils.profiling.cli import app
from my_utils.profiling.kineto.ops.frames import op_frames
from my_utils.profiling.kineto.ops.tables import TABLES
from my_utils.profiling.reports.roofline_chart import roofline_figure
from my_utils.profiling.reports.table_export import sheet_name, write_tables

TEST = "kineto/hta/trace_diff__test.json.gz"
HOSTILE = "=HYPERLINK(\"http://x\",\"y\")"


def test_csv_and_workbook_keep_trace_names_as_text(tmp_path: Path) -> None:
    openpyxl = pytest.importorskip("openpyxl")
    tables = {"op_operators": [{"operator": HOSTILE, "gpu_us": 1.5, "note": "+cmd", "pct": float("nan")}],
              "a/b:c*d?e[f]" * 4: [{"x": 1}]}
    paths = write_tables(tables, tmp_path, workbook="ops")
    assert [p.name for p in paths] == ["op_operators.csv", f"{'a_b_c_d_e_f_' * 4}.csv", "ops.xlsx"]
    with (tmp_path / "op_operators.csv").open(newline="") as fh:
        (row,) = list(csv.DictReader(fh))
    assert row == {"operator": "'" + HOSTILE, "gpu_us": "1.5", "note": "'+cmd", "pct": ""}
    wb = openpyxl.load_workbook(tmp_path / "ops.xlsx")
    assert wb.sheetnames[0] == "op_operators" and len(wb.sheetnames[1]) <= 31
    cell = wb["op_operators"]["A2"]
    assert cell.value == "'" + HOSTILE and cell.data_type == "s"  # text, never a formula
    assert wb["op_operators"]["B2"].value == 1.5


def test_sheet_names_are_unique_and_short() -> None:
    taken: set[str] = set()
    names = [sheet_name("x" * 40, taken) for _ in range(3)]
    assert len(set(names)) == 3 and all(len(n) <= 31 for n in names)


def test_the_ops_command_writes_every_table(real_fixtures: Any, tmp_path: Path) -> None:
    pytest.importorskip("openpyxl")
    res = CliRunner().invoke(app, ["ops", str(real_fixtures / TEST), "--output-dir", str(tmp_path),
                                   "--executor", "serial"])
    assert res.exit_code == 0, res.output
    for table in TABLES:
        assert (tmp_path / f"{table}.csv").exists(), table
    with (tmp_path / "op_categories.csv").open(newline="") as fh:
        cats = list(csv.DictReader(fh))
    with gzip.open(real_fixtures / TEST, "rt") as fh:
        total = sum(e["dur"] for e in json.load(fh)["traceEvents"] if e.get("cat") in ("kernel", "gpu_memcpy",
                                                                                        "gpu_memset"))
    assert sum(float(r["gpu_us"]) for r in cats) == total
    import openpyxl

    assert openpyxl.load_workbook(tmp_path / "ops.xlsx").sheetnames == list(TABLES)


def test_the_ops_command_writes_a_replay_script_and_refuses_bad_input(real_fixtures: Any, tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["ops", str(real_fixtures / TEST), "--output-dir", str(tmp_path),
                                   "--replay", "mm"])
    assert res.exit_code == 0, res.output
    script = (tmp_path / "replay.py").read_text()
    assert "aten::mm" in script and compile(script, "replay.py", "exec")
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [')
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["ops", str(bad), "--output-dir", str(out), "--executor", "serial"])
    assert res.exit_code == 2 and "bad.json" in res.output and "Traceback" not in res.output
    assert not out.exists()


def test_frames_and_the_roofline_figure(real_fixtures: Any) -> None:
    frames = op_frames(real_fixtures / TEST, executor="serial")
    assert list(frames) == list(TABLES)
    shapes = frames["op_shapes"]
    assert len(shapes) and {"operator", "input_dims", "roofline_pct_low", "example_index"} <= set(shapes.columns)
    assert frames["op_memory"].empty and list(frames["op_memory"].columns)  # no [memory] events: columns kept
    fig = roofline_figure(shapes)
    points = [t for t in fig.data if t.mode == "markers"]
    roofs = [t for t in fig.data if t.mode == "lines"]
    placed = shapes[(shapes["intensity_low"] > 0) & (shapes["tflops"] > 0)]
    assert sum(len(t.x) for t in points) == len(placed) > 0
    assert len(roofs) == 1 and max(roofs[0].y) == pytest.approx(15.7)  # the V100's fp32 roof
    # the same tables from a report's dict
    again = op_frames({f"kineto_{t}": df.to_dict("records") for t, df in frames.items()})
    assert len(again["op_shapes"]) == len(shapes)
