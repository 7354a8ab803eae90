"""NcuCsvMetricsProvider on the real ncu exports and on every documented header variant."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from my_utils.core.errors import UnsupportedInputError
from my_utils.profiling.ncu.provider import NcuCsvMetricsProvider, read_ncu_csv

CSV_FILES = [
    "ai4mat__metrics_713_paddle_.csv",
    "ai4mat__gcn_torch_ncu_metrics_show.csv.txt",
    "ai4mat__gcn_paddle_ncu_metrics_show.csv.txt",
]


def _rows(path: Path) -> tuple[int, list[dict[str, str]]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID","Process ID"'))
    return start, list(csv.DictReader(lines[start:]))


def test_every_ncu_fixture_is_listed(real_fixtures: Path) -> None:
    names = {name.removeprefix("ncu/") for name in real_fixtures.names("ncu/")}
    # the .ncu-rep is read by test_ncu_report.py
    assert names == set(CSV_FILES) | {"ai4mat__gcn_torch_ncu_metrics_prof.human.txt", "nsight-training__CuVectorAddDrv.ncu-rep"}


@pytest.mark.parametrize("name", CSV_FILES)
def test_real_export_matches_csv_module(real_fixtures: Path, name: str) -> None:
    path = real_fixtures / "ncu" / name
    start, rows = _rows(path)
    assert start > 0  # program output before the header
    events = NcuCsvMetricsProvider.from_input(path).collect()
    assert len(events) == len(rows)
    assert {e.attrs["launch_id"] for e in events} == {r["ID"] for r in rows}
    assert {e.attrs["kernel"] for e in events} == {r["Kernel Name"].strip() for r in rows}
    nvtx = {r["Id:Domain:Start/Stop_Range:PL_Type:PL_Value"].strip().strip('"').strip() for r in rows}
    assert {tuple(e.attrs["nvtx"]) for e in events} == {(n,) for n in nvtx}
    for e, r in zip(events, rows, strict=True):
        assert e.name == f"ncu:{r['Metric Name']}"
        raw = float(r["Metric Value"].replace(",", ""))
        if r["Metric Unit"] == "nsecond":
            assert (e.unit, e.value) == ("ms", pytest.approx(raw / 1e6))
            assert e.attrs["raw_value"] == raw
        else:
            assert (e.unit, e.value) == (r["Metric Unit"], pytest.approx(raw))


def test_thousands_separator(real_fixtures: Path) -> None:
    events = read_ncu_csv(real_fixtures / "ncu/ai4mat__metrics_713_paddle_.csv")
    duration = next(e for e in events if e.name == "ncu:gpu__time_duration.sum" and e.attrs["launch_id"] == "0")
    assert duration.attrs["raw_value"] == 8192.0  # written "8,192"


def test_console_output_is_refused(real_fixtures: Path) -> None:
    with pytest.raises(UnsupportedInputError, match=r"console output.*--csv"):
        NcuCsvMetricsProvider.from_input(real_fixtures / "ncu/ai4mat__gcn_torch_ncu_metrics_prof.human.txt").collect()


def _q(*cells: str) -> str:
    return ",".join(f'"{c}"' for c in cells)


V2025 = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
         "Grid Size", "Device", "CC", "Section Name", "Metric Name", "Metric Unit", "Metric Value", "Rule Name",
         "Rule Type", "Rule Description", "Estimated Speedup Type", "Estimated Speedup")


def test_v2025_with_rule_rows_and_ragged_rows(tmp_path: Path) -> None:
    ident = ("0", "42", "python", "host", "gemm", "1", "7", "(128, 1, 1)", "(64, 1, 1)", "0", "9.0")
    text = "\n".join([
        "==PROF== Connected to process 42",
        _q(*V2025),
        _q(*ident, "GPU Speed Of Light", "Duration", "usecond", "1,234.5", "", "", "", "", ""),
        _q(*ident, "GPU Speed Of Light", "Memory Throughput", "%", "n/a", "", "", "", "", ""),
        _q(*ident, "GPU Speed Of Light", "", "", "", "SOLBottleneck", "OPT", "Memory is busy", "global", "12.5"),
        _q(*ident, "Occupancy", "Achieved Occupancy", "%", "48.2"),  # ragged: rule cells missing
        "",
    ])
    path = tmp_path / "v2025.csv"
    path.write_text(text)
    events = read_ncu_csv(path)
    names = [e.name for e in events]
    assert names == ["ncu:Duration", "ncu:Memory Throughput", "ncu.rule:SOLBottleneck", "ncu:Achieved Occupancy"]
    assert events[0].value == pytest.approx(1.2345) and events[0].unit == "ms"
    assert events[1].kind == "info" and math.isnan(events[1].value) and events[1].attrs["text"] == "n/a"
    assert events[2].value == 12.5 and events[2].attrs["rule_type"] == "OPT"
    assert events[3].value == 48.2 and events[0].attrs["grid"] == "(64, 1, 1)"


@pytest.mark.parametrize("columns", [
    ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Section Name",
     "Metric Name", "Metric Unit", "Metric Value"),
    ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Kernel Time", "Context", "Stream",
     "Section Name", "Metric Name", "Metric Unit", "Metric Value"),
    V2025[:15],
], ids=["11-columns", "12-columns-kernel-time", "15-columns"])
def test_documented_header_variants(tmp_path: Path, columns: tuple[str, ...]) -> None:
    values = {"ID": "3", "Kernel Name": "k(int, float)", "Metric Name": "dram__bytes.sum", "Metric Unit": "byte",
              "Metric Value": "81,920", "Kernel Time": "2024-Nov-13 18:14:36"}
    path = tmp_path / "v.csv"
    path.write_text(_q(*columns) + "\n" + _q(*(values.get(c, "x") for c in columns)) + "\n")
    (event,) = read_ncu_csv(path)
    assert (event.name, event.value, event.unit) == ("ncu:dram__bytes.sum", 81920.0, "byte")
    assert event.attrs["kernel"] == "k(int, float)" and event.attrs["launch_id"] == "3"


def test_raw_page_with_units_row(tmp_path: Path) -> None:
    header = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
              "Grid Size", "Device", "CC", "gpu__time_duration.sum", "sm__throughput.avg.pct_of_peak_sustained_elapsed")
    units = ("", "", "", "", "", "", "", "", "", "", "", "nsecond", "%")
    rows = [("0", "1", "p", "h", "k0", "1", "7", "(1,1,1)", "(1,1,1)", "0", "8.0", "2,048", "31.5"),
            ("1", "1", "p", "h", "k1", "1", "7", "(1,1,1)", "(1,1,1)", "0", "8.0", "1,024", "n/a")]
    path = tmp_path / "raw.csv"
    path.write_text("\n".join(_q(*r) for r in (header, units, *rows)) + "\n")
    events = read_ncu_csv(path)
    assert [(e.attrs["kernel"], e.name) for e in events] == [
        ("k0", "ncu:gpu__time_duration.sum"), ("k0", "ncu:sm__throughput.avg.pct_of_peak_sustained_elapsed"),
        ("k1", "ncu:gpu__time_duration.sum"), ("k1", "ncu:sm__throughput.avg.pct_of_peak_sustained_elapsed")]
    assert events[0].value == pytest.approx(2048 / 1e6) and events[1].unit == "%"
    assert events[3].kind == "info"


def test_a_folder_finds_the_log_and_txt_exports_it_reads_when_named(real_fixtures: Path, tmp_path: Path) -> None:
    src = real_fixtures / "ncu/ai4mat__metrics_713_paddle_.csv"
    direct = read_ncu_csv(src)
    sub = tmp_path / "runs" / "rank0"
    sub.mkdir(parents=True)
    (sub / "ncu_rank0.log").write_bytes(src.read_bytes())  # `ncu --csv ... > ncu_rank0.log`
    (tmp_path / "runs" / "ncu_rank1.txt").write_bytes(src.read_bytes())
    # console output (no --csv) and notes beside the exports are not ncu CSV: not read from a folder
    (tmp_path / "runs" / "console.txt").write_bytes(
        (real_fixtures / "ncu/ai4mat__gcn_torch_ncu_metrics_prof.human.txt").read_bytes())
    (tmp_path / "runs" / "notes.log").write_text("started at 12:00\n")
    provider = NcuCsvMetricsProvider(tmp_path / "runs")
    assert [p.name for p in provider.files()] == ["ncu_rank1.txt", "ncu_rank0.log"]
    events = provider.collect()
    assert len(events) == 2 * len(direct)
    assert {e.rank for e in events} == {0, 1}
    assert len(NcuCsvMetricsProvider(sub / "ncu_rank0.log").collect()) == len(direct)
