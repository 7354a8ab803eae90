"""DcgmDmonProvider on hand-built ``dcgmi dmon`` tables (no public real one exists) and bad input."""

from __future__ import annotations

import math
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from my_utils.core.errors import InputError, MyUtilsError, UnsupportedInputError
from my_utils.profiling.providers.dcgm import DcgmDmonProvider, read_dcgm_dmon

DATA = Path(__file__).resolve().parent / "data"
H100 = DATA / "dcgmi_dmon_2gpu_h100.txt"


def _column(path: Path, gpu: int, field: str) -> list[str]:
    """The cells of one column for one GPU, read with str.split (not the provider's column positions)."""
    header: list[str] = []
    cells = []
    for line in path.read_text().splitlines():
        parts = line.split()
        if parts and parts[0] == "#Entity":
            header = parts[1:]
        elif parts[:2] == ["GPU", str(gpu)]:
            cells.append(parts[2 + header.index(field)])
    return cells


def test_per_gpu_per_sample_with_units() -> None:
    events = DcgmDmonProvider.from_input(H100).collect()
    assert len(events) == 2 * 16 * 8 and {e.source for e in events} == {"dcgm_dmon"}
    for gpu in (0, 1):
        sm = [e for e in events if e.name == f"dcgm.sm_active:gpu{gpu}"]
        cells = _column(H100, gpu, "SMACT")
        assert [e.attrs["sample"] for e in sm] == list(range(16)) == list(range(len(cells)))
        assert [e.value for e in sm] == [pytest.approx(float(c) * 100) for c in cells]
        assert {(e.unit, e.kind, e.attrs["gpu"], e.attrs["entity"]) for e in sm} == {("%", "ratio", gpu, f"GPU {gpu}")}
        power = [e for e in events if e.name == f"dcgm.power:gpu{gpu}"]
        assert [e.value for e in power] == [float(c) for c in _column(H100, gpu, "POWER")]
        assert {(e.unit, e.kind) for e in power} == {("W", "gauge")}
    mean_sm1 = statistics.fmean(float(c) * 100 for c in _column(H100, 1, "SMACT"))
    assert mean_sm1 < 25  # the starved GPU of this fixture
    units = {e.name.split(":")[0]: e.unit for e in events}
    assert units == {"dcgm.gr_engine_active": "%", "dcgm.sm_active": "%", "dcgm.sm_occupancy": "%",
                     "dcgm.tensor_active": "%", "dcgm.dram_active": "%", "dcgm.power": "W", "dcgm.gpu_temp": "C",
                     "dcgm.fb_used": "MiB"}


def test_na_is_not_measured_never_zero() -> None:
    events = read_dcgm_dmon(H100)
    (blank,) = [e for e in events if math.isnan(e.value)]
    line = 1 + next(i for i, t in enumerate(H100.read_text().splitlines()) if "N/A" in t)
    assert (blank.name, blank.attrs["status"], blank.attrs["line"]) == ("dcgm.tensor_active:gpu1", "N/A", line)


def test_time_stamps_and_the_dcgm3_layout() -> None:
    path = DATA / "dcgmi_dmon_v3_ts.txt"
    events = read_dcgm_dmon(path)
    stamps = [float(line.split()[0]) for line in path.read_text().splitlines() if " GPU " in line]
    assert sorted({e.ts or 0.0 for e in events}) == stamps and len(events) == 4 * 4
    assert [e.value for e in events if e.name == "dcgm.sm_active:gpu0"] == [70.2, 71.2, 72.2, 73.2]


def test_local_time_without_zone_is_kept_as_text(tmp_path: Path) -> None:
    src = (DATA / "dcgmi_dmon_v3_ts.txt").read_text().splitlines()
    path = tmp_path / "local.txt"
    path.write_text("\n".join(re.sub(r"^\d+\.\d+", "2024-12-02 12:00:00", line) for line in src) + "\n")
    events = read_dcgm_dmon(path)
    assert {e.ts for e in events} == {None} and {e.attrs["time"] for e in events} == {"2024-12-02 12:00:00"}
    zoned = tmp_path / "utc.txt"
    zoned.write_text("\n".join(re.sub(r"^\d+\.\d+", "2024-12-02T12:00:00+00:00", line) for line in src) + "\n")
    assert {e.ts for e in read_dcgm_dmon(zoned)} == {1733140800.0}


def test_the_same_table_with_commas(tmp_path: Path) -> None:
    path = tmp_path / "dmon.csv"
    rows = []
    for line in H100.read_text().splitlines():
        first = " ".join(line.split()[:2]) if line.startswith("GPU") else line.split()[0]
        rest = line.split()[2:] if line.startswith("GPU") else line.split()[1:]
        if line.startswith("ID"):
            rest = ["", "", "", "", "", "W", "C", ""]
        rows.append(",".join([first, *rest]))
    path.write_text("\n".join(rows) + "\n")
    def pairs(file: Path) -> list[tuple[str, float | None]]:
        return [(e.name, None if math.isnan(e.value) else e.value) for e in read_dcgm_dmon(file)]

    assert pairs(path) == pairs(H100)
    assert {e.unit for e in read_dcgm_dmon(path) if e.name.startswith("dcgm.power")} == {"W"}


def test_unknown_fields_keep_dcgmi_unit_and_text_fields_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "d.txt"
    path.write_text("#Entity   NEWFLD      DVNAM                   \n"
                    "ID        KB/s                                \n"
                    "GPU 3     12.500      NVIDIA H100 80GB HBM3   \n")
    (event,) = read_dcgm_dmon(path)
    assert (event.name, event.value, event.unit, event.kind) == ("dcgm.newfld:gpu3", 12.5, "KB/s", "gauge")


@pytest.mark.parametrize(("text", "kind", "match"), [
    ("GPU 0     0.500\n", InputError, r"d\.txt:line 1: a 'dcgmi dmon' table: a '#Entity' header line before"),
    ("#Entity   SMACT  TENSO\nID\nGPU 0 0.5 0.6 0.7\n", InputError,
     r"d\.txt:line 3: 2 values, one per header column \(SMACT TENSO\), in the header's columns; found 3"),
    ("#Entity   SMACT\nID\nError setting watches. Result: -29: Requires root\n", InputError,
     r"d\.txt:line 3: a 'dcgmi dmon' table: a '#Entity' header.* found 'Error setting watches"),
    ("h:1:1 [0] NCCL INFO NCCL version 2.21.5\n", InputError, r"d\.txt:line 1: a 'dcgmi dmon' table"),
    ("#Entity   SMACT\nID\n", UnsupportedInputError, r"d\.txt: a 'dcgmi dmon' table: .* found no sample"),
])
def test_bad_input(tmp_path: Path, text: str, kind: type, match: str) -> None:
    path = tmp_path / "d.txt"
    path.write_text(text)
    with pytest.raises(kind, match=match):
        DcgmDmonProvider.from_input(path).collect()


def test_cli_exit_2_one_line(real_fixtures: Path, tmp_path: Path) -> None:
    log = real_fixtures / "nccl/dsl__example_2.502726.o.nccl2.22.3.log"
    result = subprocess.run([sys.executable, "-m", "my_utils.core", "plugins", "run", "dcgm_dmon", "--input", str(log),
                             "--output-dir", str(tmp_path / "o")], capture_output=True, text=True, timeout=180)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    assert f"{log}:line 1: a 'dcgmi dmon' table" in line
    assert not (tmp_path / "o" / "metrics_events.jsonl").exists()
    ok = subprocess.run([sys.executable, "-m", "my_utils.core", "plugins", "run", "dcgm_dmon", "--input", str(H100),
                         "--output-dir", str(tmp_path / "ok")], capture_output=True, text=True, timeout=180)
    assert ok.returncode == 0, ok.stderr


_LINES = st.sampled_from([
    "#Entity         GRACT        SMACT", "ID                           W", "GPU 0           0.917        0.871",
    "GPU 1           N/A          0.2", "GPU-I 2         0.5", "", "1733140800.5 GPU 0     0.1   0.2",
    "dmon was stopped do to receiving a signal", "GPU 0 LINK 1    4", "junk",
])


@settings(derandomize=True, database=None, max_examples=60, deadline=None)
@given(st.lists(st.one_of(_LINES, st.text(max_size=30)), max_size=10))
def test_any_text_gives_events_or_one_input_error(tmp_path_factory: pytest.TempPathFactory, lines: list[str]) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "d.txt"
    path.write_text("\n".join(lines), encoding="utf-8", errors="surrogatepass")
    try:
        events = read_dcgm_dmon(path)
    except MyUtilsError as exc:
        assert "\n" not in str(exc) and str(path) in str(exc)
    else:
        assert events and all(e.source == "dcgm_dmon" for e in events)


def test_provider_contract(tmp_path: Path) -> None:
    from my_utils.core.testing import check_metrics_provider

    bad = tmp_path / "bad.txt"
    bad.write_text("GPU 0     0.5\n")
    unsupported = tmp_path / "empty.txt"
    unsupported.write_text("#Entity   SMACT\nID\n")
    report = check_metrics_provider("dcgm_dmon", DATA, bad_input=bad, unsupported_input=unsupported)
    assert {e.attrs["file"] for e in report.events} == {H100.name, "dcgmi_dmon_v3_ts.txt"}
